"""gear_state's bad inputs and broken state files (tests/badinput.py runs the table): refused,
named, no traceback, bounded, and the state files it was pointed at are as they were."""

from __future__ import annotations

import pytest

from badinput import assert_refused, case_params, run_table
from conftest import snapshot_tree

ROWS = [{"host": "n2", "action": "down", "method": "suspend"}]
OK_DOWN = {"event": "before_down", "hosts": ["n2"], "rows": ROWS}

# Files each case's state file starts as (written under FILES/<case>/ before the table runs).
FILES = {
    "state file not UTF-8": b'{"hosts": {"n2": {"state": "\xff\xfe"}}}',
    "state file not JSON": b"{hosts: n2",
    "state file a JSON list": b'[{"hosts": {}}]',
    "state file action a list": b'{"hosts": {}, "in_progress": {"shift": "lease/abc", '
                                b'"actions": [{"host": "n2", "action": ["up"], "ok": false}]}}',
    "state file resumed action an object": b'{"hosts": {}, "in_progress": {"shift": "x", "resumed": '
                                           b'{"actions": [{"host": "n2", "action": {"up": 1}}]}}}',
    "state file hosts a list": b'{"hosts": ["n2"]}',
    "state file empty": b"",
    "state file NaN": b'{"hosts": {"n2": {"state": "on", "wait_s": NaN}}}',
    "state file host entry a list": b'{"hosts": {"n2": ["on"]}}',
}


def _table(base):
    def sf(case):
        return str(base / case / "state.json")
    return [
        ("path relative", dict(OK_DOWN, path="artifacts/gear/state.json"), "option path: must be an absolute path"),
        ("path with ..", dict(OK_DOWN, path="{tmp}/../state.json"), "option path: '..' is not allowed"),
        ("event unknown", dict(OK_DOWN, path="{tmp}/state.json", event="during_down"), "event"),
        ("hosts a dict", dict(OK_DOWN, path="{tmp}/state.json", hosts={"n2": 1}), "hosts"),
        ("host name with a space", dict(OK_DOWN, path="{tmp}/state.json", hosts=["n 2"]),
         "option hosts[0]: must be an inventory host name"),
        ("host name with a newline", dict(OK_DOWN, path="{tmp}/state.json", hosts=["n2\nn3"]),
         "option hosts[0]: must be an inventory host name"),
        ("host name empty", dict(OK_DOWN, path="{tmp}/state.json", hosts=[""]), "option hosts[0]"),
        ("hosts missing", {"path": "{tmp}/state.json", "event": "after_up"}, "hosts"),
        ("lock_file relative", dict(OK_DOWN, path="{tmp}/state.json", lock_file="gear/shift.lock"),
         "option lock_file: must be an absolute path"),
        ("lock_file a directory", dict(OK_DOWN, path="{tmp}/state.json", lock_file="{tmp}"), "option lock_file: "),
        ("lock_file a FIFO", dict(OK_DOWN, path="{tmp}/state.json", lock_file="/dev/null"), "option lock_file: "),
        ("before_down without rows", {"path": "{tmp}/state.json", "event": "before_down", "hosts": ["n2"]},
         "option rows: event before_down needs the plan's rows"),
        ("row without host", dict(OK_DOWN, path="{tmp}/state.json", rows=[{"action": "down"}]),
         "option rows[0]: needs a host name"),
        ("row action unknown", dict(OK_DOWN, path="{tmp}/state.json", rows=[{"host": "n2", "action": "nap"}]),
         "option rows[0].action: must be one of none, up, down"),
        ("down row method unknown", dict(OK_DOWN, path="{tmp}/state.json",
                                         rows=[{"host": "n2", "action": "down", "method": "unplug"}]),
         "option rows[0].method: a down row's method must be one of suspend, soft, off, got 'unplug'"),
        ("result host a number", {"path": "{tmp}/state.json", "event": "after_up", "hosts": ["n2"],
                                  "results": [{"host": 2, "ok": True}]}, "option results[0]: needs a host name"),
        ("too many hosts", dict(OK_DOWN, path="{tmp}/state.json", hosts=["h%d" % i for i in range(100001)]),
         "option hosts: at most 100000 hosts"),
        ("directory missing", dict(OK_DOWN, path="{tmp}/no/such/dir/state.json"), "directory"),
        ("state file is a directory", dict(OK_DOWN, path="{tmp}"), "state file"),
        # the journal's reader: query reads the state file as the other events do
        ("query a torn state file", {"path": sf("state file not JSON"), "event": "query", "hosts": []},
         "is not valid JSON"),
        ("query lock_file relative", {"path": "{tmp}/state.json", "event": "query", "hosts": [],
                                      "lock_file": "gear/shift.lock"}, "option lock_file: must be an absolute path"),
    ] + [(case, dict(OK_DOWN, path=sf(case)), words) for case, words in [
        ("state file not UTF-8", "is not UTF-8 text"),
        ("state file not JSON", "is not valid JSON"),
        ("state file a JSON list", "is not a JSON object with a 'hosts' object"),
        ("state file hosts a list", "is not a JSON object with a 'hosts' object"),
        ("state file empty", "is not a JSON object with a 'hosts' object"),
        ("state file NaN", "holds NaN, which is not a JSON number"),
        ("state file host entry a list", "hosts.n2 is not an object"),
        # a failure is merged by host and action: an action that is not text was a TypeError
        ("state file action a list", "in_progress.actions[0].action is list, not text"),
        ("state file resumed action an object", "in_progress.resumed.actions[0].action is dict, not text"),
    ]] + [("query, the state file's action a list", {"path": sf("state file action a list"), "event": "query",
                                                      "hosts": []}, "in_progress.actions[0].action is list, not text")]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("gear-state-files")
    for case, data in FILES.items():
        (base / case).mkdir()
        (base / case / "state.json").write_bytes(data)
    return base, snapshot_tree(base)


_TABLE = _table(__import__("pathlib").Path("/nonexistent"))   # names and count only, for the ids
CASES = case_params({"gear_state": _TABLE})


def test_the_table_has_at_least_15_cases():
    assert len(_TABLE) >= 15


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, files, module, index, words):
    base, before = files
    assert_refused(run_table(module, _table(base), tmp_path_factory), index, words)
    assert snapshot_tree(base) == before
