"""The gear shift's journal (module_utils/fleetnap/journal.py): the state file carries a shift's
actions between its phases. Readers never see half a write, a torn file is refused naming it, the
file never grows past what it is read back at, and a killed shift's journal is not the next one's."""

from __future__ import annotations

import json
import threading

import pytest

from ansible.module_utils.fleetnap import fileio, journal
from ansible.module_utils.fleetnap.validate import ParamError

A, B = "4242/777/2026-11-27T10:00:00Z", "4343/778/2026-11-27T11:00:00Z"


def up(host, ok=True, **kw):
    return dict({"host": host, "action": "up", "ok": ok, "state": "on" if ok else "off"}, **kw)


def test_batches_add_up_a_failure_wins_and_another_shifts_journal_is_replaced():
    doc = {"hosts": {}}
    assert journal.note_batch(doc, A, [up("n1"), up("n2")], "t1") == []
    failed = journal.note_batch(doc, A, [up("n3"), up("n3", ok=False, msg="health command failed")], "t2")
    assert failed == [{"host": "n3", "action": "up", "msg": "health command failed"}]
    assert [(a["host"], a["ok"]) for a in journal.actions(doc, A)] == [("n1", True), ("n2", True), ("n3", False)]
    assert journal.stop_reason(doc, A) == "n3: up failed (health command failed)"
    assert journal.actions(doc, B) == [] and journal.stop_reason(doc, B) == ""      # not B's
    # B took the lock after A was killed: B's first batch starts a journal of its own
    journal.note_batch(doc, B, [up("n1")], "t3")
    assert doc["in_progress"]["shift"] == B and [a["host"] for a in journal.actions(doc, B)] == ["n1"]
    assert journal.actions(doc, A) == [] and journal.stop_reason(doc, B) == ""
    # a result without a host name is not an action
    journal.note_batch(doc, B, [{"ok": True}, {"host": ["n9"], "ok": False}], "t4")
    assert len(journal.actions(doc, B)) == 1


def test_the_journal_is_bounded(monkeypatch):
    monkeypatch.setattr(journal, "MAX_ACTIONS", 3)
    doc = {"hosts": {}}
    journal.note_batch(doc, A, [up("n1"), up("n2")], "t1")
    before = json.dumps(doc)
    with pytest.raises(ParamError, match="more than 3 actions: nothing was written"):
        journal.note_batch(doc, A, [up("n3"), up("n4")], "t2")
    assert json.dumps(doc) == before


def test_a_file_too_large_to_read_back_is_never_written(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    journal.write(str(path), {"hosts": {}}, None)
    monkeypatch.setattr(fileio, "RECORD", 200)
    doc = {"hosts": {}, "in_progress": {"shift": A, "actions": [up("n%d" % i) for i in range(20)]}}
    with pytest.raises(ParamError, match="would pass 200 bytes, the most it is read back at: nothing was written"):
        journal.write(str(path), doc, None)
    assert json.loads(path.read_text()) == {"hosts": {}}


def test_a_torn_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "state.json"
    text = json.dumps({"hosts": {"n1": {"state": "on"}}, "in_progress": {"shift": A, "actions": [up("n1")]}})
    path.write_text(text[:len(text) // 2])          # what a writer killed mid-write without rename leaves
    with pytest.raises(ParamError, match=r"state file %s.*fix or remove it" % path):
        journal.read(str(path))


def test_readers_never_see_half_a_write(tmp_path):
    """One writer rewrites the journal (growing batches) while four readers read it: every read is
    a whole document of one of the writes (the write is a rename of a complete temporary file)."""
    path = tmp_path / "state.json"
    journal.write(str(path), {"hosts": {}}, None)
    seen, errors, done = [], [], threading.Event()

    def reader():
        while not done.is_set():
            try:
                doc = journal.read(str(path))
                seen.append(len(journal.actions(doc, A)))
            except Exception as exc:            # any failure to read is the test's failure
                errors.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    doc = {"hosts": {}}
    try:
        for i in range(120):
            journal.note_batch(doc, A, [up("n%d-%d" % (i, j), blob="x" * 100) for j in range(5)], "t%d" % i)
            journal.write(str(path), doc, None)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert errors == []
    assert len(seen) >= 10 and all(n % 5 == 0 for n in seen) and max(seen) <= 600
    assert len(journal.actions(journal.read(str(path)), A)) == 600


def test_without_a_shift_batches_keep_adding_to_the_same_in_progress():
    """No lock (no shift): the in_progress that touch keeps is the one the batch's actions join,
    so its actions and its failures stay together."""
    doc = {"hosts": {}}
    journal.note_batch(doc, None, [up("n1", ok=False, msg="no answer")], "t1")
    journal.note_batch(doc, None, [up("n2")], "t2")
    progress = doc["in_progress"]
    assert [a["host"] for a in progress["actions"]] == ["n1", "n2"]
    assert [f["host"] for f in progress["failed"]] == ["n1"] and progress["updated"] == "t2"


C = "4444/779/2026-11-27T12:00:00Z"


def down(host, ok=True, **kw):
    return dict({"host": host, "action": "down", "ok": ok, "state": "asleep" if ok else "on"}, **kw)


PLAN = {"gear": 1, "groups_on": [1], "date": "2026-11-27", "result": "ok", "up_hosts": [],
        "rows": [{"host": "n1", "state": "on", "action": "down", "method": "suspend", "group": 2, "why": "x"},
                 {"host": "n2", "state": "on", "action": "down", "method": "suspend", "group": 3, "why": "y"}]}


def test_the_plan_is_written_into_the_journal_and_a_killed_shift_is_resumed():
    doc = {"hosts": {}}
    assert journal.begin(doc, A, PLAN, "t0") is None
    assert doc["in_progress"]["plan"] == {"gear": 1, "groups_on": [1], "date": "2026-11-27", "result": "ok", "rows": [
        {"host": "n1", "state": "on", "action": "down", "method": "suspend"},
        {"host": "n2", "state": "on", "action": "down", "method": "suspend"}]}
    journal.note_batch(doc, A, [down("n1", resume_hook=True), down("n2", ok=False, msg="masked")], "t1")
    assert journal.stop_reason(doc, A)
    # A is killed; B took the lock over and plans: it resumes A
    resumed = journal.begin(doc, B, dict(PLAN, gear=3), "t2")
    assert resumed["shift"] == A and resumed["since"] == "t0" and resumed["gear"] == 1
    assert [(a["host"], a["ok"]) for a in resumed["actions"]] == [("n1", True), ("n2", False)]
    assert resumed["failed"] == [{"host": "n2", "action": "down", "msg": "masked"}]
    assert doc["in_progress"]["shift"] == B and doc["in_progress"]["plan"]["gear"] == 3
    # A's failure is no reason for B to stop (B planned from what it observed), and not B's action
    assert journal.stop_reason(doc, B) == "" and journal.actions(doc, B) == []
    journal.note_batch(doc, B, [up("n1")], "t3")
    assert journal.resumed_of(doc, B) == resumed and doc["in_progress"]["plan"]["gear"] == 3
    # B planning again (the same shift) keeps its own actions and what it resumed
    assert journal.begin(doc, B, PLAN, "t4") is None
    assert [a["host"] for a in journal.actions(doc, B)] == ["n1"] and journal.resumed_of(doc, B) == resumed
    # B is killed too: C resumes both, folded, the later run winning per host and action
    journal.note_batch(doc, B, [down("n2")], "t5")
    folded = journal.begin(doc, C, PLAN, "t6")
    assert folded["shift"] == B
    assert [(a["host"], a["action"], a["ok"]) for a in folded["actions"]] == [
        ("n1", "down", True), ("n1", "up", True), ("n2", "down", True)]
    assert folded["failed"] == resumed["failed"]      # what failed is still told
    with pytest.raises(ParamError, match="take the lock first"):
        journal.begin(doc, None, PLAN, "t7")


def test_the_later_run_wins_per_host_and_action_and_a_failure_within_a_run():
    earlier = [down("n1", ok=False, msg="timeout"), down("n2"), up("n3")]
    later = [down("n1"), down("n1", ok=False, msg="health"), up("n4")]
    got = journal.later_wins(earlier, later)
    assert [(a["host"], a["action"], a["ok"]) for a in got] == [
        ("n2", "down", True), ("n3", "up", True), ("n1", "down", False), ("n4", "up", True)]
    assert got[2]["msg"] != "timeout"         # the later run's failure, not the earlier one's
    # what is not an action (no host name, not an object) is left out, never a traceback
    assert journal.later_wins(None, "garbage") == []
    assert journal.later_wins([{"x": 1}, {"host": ["n1"]}, "n1", down("n5")], []) == [down("n5")]


def test_a_killed_journal_too_large_is_refused_naming_the_file_to_fix(monkeypatch):
    monkeypatch.setattr(journal, "MAX_ACTIONS", 2)
    doc = {"hosts": {}, "in_progress": {"shift": A, "actions": [up("n1"), up("n2"), up("n3")]}}
    with pytest.raises(ParamError, match="more than 2 actions: fix or remove the state file"):
        journal.begin(doc, B, PLAN, "t")
    assert doc["in_progress"]["shift"] == A      # unchanged


def test_what_is_resumed_has_the_journals_shapes_whatever_the_file_held():
    """A hand-edited or foreign journal: what is resumed is text, an integer gear, actions with a
    host, failures as failures() writes them - never a traceback, never a structure passed on."""
    doc = {"hosts": {}, "in_progress": {"shift": {"pid": 1}, "since": ["x"], "updated": "u" * 500,
                                        "plan": {"gear": "1"}, "actions": [up("n1"), {"ok": True}, 3],
                                        "failed": [{"host": "n2", "action": ["down"], "msg": {"a": 1}}, {"msg": "x"}]}}
    got = journal.begin(doc, B, PLAN, "t")
    assert got["shift"] is None and got["since"] is None and got["updated"] == "u" * 200 and got["gear"] is None
    assert got["actions"] == [up("n1")]
    assert got["failed"] == [{"host": "n2", "action": "['down']", "msg": "{'a': 1}"}]


def test_a_resumed_part_edited_by_hand_is_read_back_in_its_shapes():
    doc = {"hosts": {}, "in_progress": {"shift": B, "resumed": {"actions": 5, "failed": "x", "gear": True}}}
    assert journal.resumed_of(doc, B) == {"shift": None, "since": None, "updated": None, "gear": None,
                                          "actions": [], "failed": []}
    doc["in_progress"]["resumed"] = "killed"
    assert journal.resumed_of(doc, B) is None and journal.resumed_of(doc, A) is None


def test_a_killed_shift_whose_plan_wrote_epoch_seconds_is_resumed_with_its_times_as_text():
    """The plan of an earlier fleetnap wrote since/updated as seconds since the epoch (the lab's
    interrupted-shift test found them dropped as None): they are read back as the journal's text
    stamps, and gear_shift_plan now writes text stamps itself."""
    doc = {"hosts": {}, "in_progress": {"shift": A, "since": 1795950039.5, "updated": 1795950040,
                                        "plan": {"gear": 1}, "actions": [up("n1")]}}
    got = journal.begin(doc, B, PLAN, journal.stamp(1795950100))
    assert got["since"] == "2026-11-29T11:00:39Z" and got["updated"] == "2026-11-29T11:00:40Z"
    assert journal.resumed_of(doc, B)["since"] == "2026-11-29T11:00:39Z"
    assert doc["in_progress"]["since"] == "2026-11-29T11:01:40Z"
    for bad in (float("nan"), True, -1, 1e12):
        doc = {"hosts": {}, "in_progress": {"shift": A, "since": bad}}
        assert journal.begin(doc, B, PLAN, "t")["since"] is None
