"""slurm_conf's bad inputs and bad files (tests/badinput.py runs the table, each case forked as
AnsiballZ runs a module): refused naming the option or the file, no traceback, bounded, nothing
written, and each case's prepared files as they were."""

from __future__ import annotations

import json
import os

import pytest

from badinput import NAN, assert_refused_prepared, case_params, run_prepared

G = {"lab1": 1, "lab2": 2}
OK = {"gear_groups": G, "history_file": "{in}/history.jsonl"}
LINE = json.dumps({"finished": "2026-11-27T11:00:00+00:00", "duration_s": 60,
                   "took": {"lab2": {"action": "up", "ok": True, "method": "wol", "elapsed_s": 40.0}}})


def _file(name, data):
    def prepare(d):
        (d / name).write_bytes(data)
    return prepare


def _fifo(name):
    def prepare(d):
        os.mkfifo(str(d / name))
    return prepare


def _link_out(name):
    def prepare(d):
        (d / name).symlink_to("/etc/hostname")
    return prepare


PREPARE = {
    "history a FIFO": _fifo("history.jsonl"),
    "gmin as many as the groups, history a FIFO": _fifo("history.jsonl"),
    "history a link out of its directory": _link_out("history.jsonl"),
    "history not JSON": _file("history.jsonl", b"{finished\n"),
    "history not UTF-8": _file("history.jsonl", b'{"finished": "\xff"}\n'),
    "history line without finished": _file("history.jsonl", b'{"duration_s": 3}\n'),
    "history took elapsed a string": _file("history.jsonl", LINE.replace("40.0", '"40"').encode()),
    "history NaN": _file("history.jsonl", b'{"finished": "2026-11-27T11:00:00Z", "duration_s": NaN}\n'),
    "dest a FIFO": lambda d: (_file("history.jsonl", LINE.encode())(d), _fifo("out.conf")(d)),
    "dest a directory": lambda d: (_file("history.jsonl", LINE.encode())(d), (d / "out.conf").mkdir()),
}

TABLE = [
    ("gear_groups missing", {"history_file": "{in}/history.jsonl"}, "gear_groups"),
    ("gear_groups empty", dict(OK, gear_groups={}), "option gear_groups: no hosts"),
    ("gear_groups a list", dict(OK, gear_groups=["lab1"]), "gear_groups"),
    ("host name with a space", dict(OK, gear_groups={"lab 1": 2}), "option gear_groups: 'lab 1' is not a node name"),
    ("host name with a newline", dict(OK, gear_groups={"lab1\nlab2": 2}), "is not a node name"),
    ("gear group 0", dict(OK, gear_groups={"lab1": 0}), "option gear_groups.lab1: must be >= 1"),
    ("gear group a fraction", dict(OK, gear_groups={"lab1": 1.5}), "option gear_groups.lab1: must be a whole number"),
    ("gear group a word", dict(OK, gear_groups={"lab1": "two"}), "option gear_groups.lab1: must be a number"),
    ("gear group a bool", dict(OK, gear_groups={"lab1": True}), "option gear_groups.lab1: must be a number"),
    ("gear group NaN", dict(OK, gear_groups={"lab1": NAN}), "option gear_groups.lab1: must be a finite number"),
    ("gmin keeps every group up", dict(OK, gear_groups={"lab1": 1}), "nothing for Slurm to power down"),
    ("gmin as many as the groups", dict(OK, gear_groups={"lab1": 1, "lab2": 2}, gmin=2),
     "gmin 2 keeps all 2 gear groups up: nothing for Slurm to power down"),
    # Refused before the history is read: a FIFO there would be refused naming the file instead.
    ("gmin as many as the groups, history a FIFO", dict(OK, gmin=2),
     "gmin 2 keeps all 2 gear groups up: nothing for Slurm to power down"),
    ("gmin negative", dict(OK, gmin=-1), "option gmin: must be >= 0"),
    ("gmin huge", dict(OK, gmin=100000), "option gmin: must be >= 0 and <= 1000"),
    ("margin below 1", dict(OK, margin=0.5), "option margin: must be >= 1"),
    ("margin NaN", dict(OK, margin="{{ 'nan' | float }}"), "option margin: must be a finite number"),
    ("slurmd_start_s inf", dict(OK, slurmd_start_s="{{ 'inf' | float }}"), "option slurmd_start_s: must be a finite"),
    ("slurmd_start_s negative", dict(OK, slurmd_start_s=-5), "option slurmd_start_s: must be >= 0"),
    ("resume_timeout_s 0", dict(OK, resume_timeout_s=0), "option resume_timeout_s: must be >= 1"),
    ("suspend_timeout_s a year", dict(OK, suspend_timeout_s=31536000), "option suspend_timeout_s: must be >= 1 and <= 86400"),
    ("history_file relative", dict(OK, history_file="gear/history.jsonl"), "option history_file: must be an absolute path"),
    ("history_file with ..", dict(OK, history_file="{in}/../x/history.jsonl"), "option history_file: '..' is not allowed"),
    ("programs_dir relative", dict(OK, programs_dir="lib/fleetnap-slurm"), "option programs_dir: must be an absolute path"),
    ("dest relative", dict(OK, dest="fleetnap-power.conf"), "option dest: must be an absolute path"),
    ("dest directory missing", dict(OK, dest="{in}/no/such/dir/out.conf"), "option dest: the directory"),
    ("history a FIFO", OK, "{in}/history.jsonl"),
    ("history a link out of its directory", OK, "{in}/history.jsonl"),
    ("history not JSON", OK, "line 1 is not valid JSON"),
    ("history not UTF-8", OK, "not UTF-8"),
    ("history line without finished", OK, "line 1: finished"),
    ("history took elapsed a string", OK, "took[lab2]: elapsed_s must be seconds"),
    ("history NaN", OK, "NaN"),
    ("dest a FIFO", dict(OK, dest="{in}/out.conf"), "{in}/out.conf"),
    ("dest a directory", dict(OK, dest="{in}/out.conf"), "{in}/out.conf"),
]
CASES = case_params({"slurm_conf": TABLE})


def test_the_table_has_at_least_25_cases():
    assert len(TABLE) >= 25


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    assert_refused_prepared(run_prepared(module, TABLE, PREPARE, tmp_path_factory), index, words)
