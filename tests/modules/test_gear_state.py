"""gear_state through Ansible: the state file follows a shift batch by batch, so that the next
shift's plan (gear_shift_plan's read_expected) sees the hosts an interrupted shift put down as
down on purpose, not as failed."""

from __future__ import annotations

import json

from conftest import run_module

from ansible.module_utils.fleetnap.gearshift import read_expected

ROWS = [{"host": "n1", "action": "none", "method": ""},
        {"host": "n2", "action": "down", "method": "suspend"},
        {"host": "n3", "action": "down", "method": "off"},
        {"host": "n4", "action": "up", "method": "wol"}]


def _state(path):
    return json.loads(path.read_text())


def test_write_ahead_then_results(tmp_path):
    sf = tmp_path / "state.json"
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n1", "n2", "n3"],
                                    "rows": ROWS}, tmp_path=tmp_path)
    assert not res.failed and res.changed and res["updated"] == {"n2": "asleep", "n3": "off"}, res
    st = _state(sf)
    assert st["hosts"]["n2"]["state"] == "asleep" and st["hosts"]["n2"]["by"] == "before_down"
    assert "n1" not in st["hosts"] and "since" in st["in_progress"]
    # The next shift's plan: n2, n3 expected off (down on purpose), n1 expected on (no entry).
    assert read_expected(str(sf)) == {"n2": "off", "n3": "off"}
    # n2 went to sleep; n3's power-off failed and it stayed up: it is expected on again.
    res = run_module("gear_state", {"path": str(sf), "event": "after_down", "hosts": ["n2", "n3"], "results": [
        {"host": "n2", "ok": True, "state": "asleep"}, {"host": "n3", "ok": False, "state": "on"}]}, tmp_path=tmp_path)
    assert res["updated"] == {"n3": "on"}, res
    assert read_expected(str(sf)) == {"n2": "off", "n3": "on"}


def test_after_up_marks_only_verified_wakes(tmp_path):
    sf = tmp_path / "state.json"
    sf.write_text(json.dumps({"gear": 1, "result": "ok", "hosts": {
        "n4": {"host": "n4", "state": "asleep", "group": 2}, "n5": {"host": "n5", "state": "off"}}}))
    # n6 woke (the wave's result) but its health command failed after it (a second result): not on.
    res = run_module("gear_state", {"path": str(sf), "event": "after_up", "hosts": ["n4", "n5", "n6"], "results": [
        {"host": "n4", "ok": True, "state": "on"}, {"host": "n5", "ok": False}, {"host": "n6", "ok": True, "state": "on"},
        {"host": "n6", "ok": False, "msg": "health command failed"}]}, diff=True, tmp_path=tmp_path)
    assert res.changed and res["updated"] == {"n4": "on"}
    st = _state(sf)
    assert st["hosts"]["n4"] == dict(st["hosts"]["n4"], state="on", group=2)   # the rest of the entry kept
    assert st["hosts"]["n5"]["state"] == "off" and st["gear"] == 1
    assert res["diff"]["before"]["hosts"] == {"n4": "asleep"} and res["diff"]["after"]["hosts"] == {"n4": "on"}
    again = run_module("gear_state", {"path": str(sf), "event": "after_up", "hosts": ["n4"], "results": [
        {"host": "n4", "ok": True, "state": "on"}]}, tmp_path=tmp_path)
    assert not again.changed and again["updated"] == {}


def test_hosts_outside_the_batch_are_left_alone(tmp_path):
    sf = tmp_path / "state.json"
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n2"], "rows": ROWS},
                     tmp_path=tmp_path)
    assert res["updated"] == {"n2": "asleep"} and set(_state(sf)["hosts"]) == {"n2"}


def test_check_mode_writes_nothing(tmp_path):
    sf = tmp_path / "state.json"
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n2", "n3"], "rows": ROWS},
                     check=True, tmp_path=tmp_path)
    assert res.changed and res["updated"] == {"n2": "asleep", "n3": "off"} and not sf.exists()


def _lock(path, since, pid=4242, start_time=777):
    """A lock as shift_lock writes it (the owner's fields; this owner need not be alive here)."""
    path.write_text(json.dumps({"pid": pid, "start_time": start_time, "since": since,
                                "cmdline": ["ansible-playbook", "gear_shift.yml"], "purpose": "test"}))
    return str(path)


def test_no_batch_goes_lower_after_a_failure_of_this_shift(tmp_path):
    """The stop rule (gear_state, not Jinja): a failed wake of shift A (the lock's owner) is kept;
    A's next before_down answers stop with the reason and writes nothing; shift B (A killed before
    its record, the lock taken over) starts clean; a failed park of a batch stops B's next batch."""
    sf, lock = tmp_path / "state.json", tmp_path / "shift.lock"
    a = _lock(lock, "2026-11-27T10:00:00Z")
    res = run_module("gear_state", {"path": str(sf), "event": "after_up", "hosts": ["n4"], "lock_file": a, "results": [
        {"host": "n4", "action": "up", "ok": False, "msg": "did not come back: wol: no answer"}]}, tmp_path=tmp_path)
    assert not res.failed and res["stop"] is False, res
    before = sf.read_text()
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n2", "n3"], "rows": ROWS,
                                    "lock_file": a}, tmp_path=tmp_path)
    assert res["stop"] is True and not res.changed and res["updated"] == {}, res
    assert res["reason"] == "n4: up failed (did not come back: wol: no answer)"
    assert sf.read_text() == before
    # Another shift holds the lock now: A's failure is not B's; B's first batch is marked down.
    b = _lock(lock, "2026-11-27T11:00:00Z", pid=4343)
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n2"], "rows": ROWS,
                                    "lock_file": b}, tmp_path=tmp_path)
    assert res["stop"] is False and res["updated"] == {"n2": "asleep"}, res
    res = run_module("gear_state", {"path": str(sf), "event": "after_down", "hosts": ["n2"], "lock_file": b, "results": [
        {"host": "n2", "action": "down", "ok": False, "state": "on", "msg": "cannot suspend: masked"}]},
        tmp_path=tmp_path)
    assert res["updated"] == {"n2": "on"} and _state(sf)["in_progress"]["shift"] == "4343/777/2026-11-27T11:00:00Z"
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n3"], "rows": ROWS,
                                    "lock_file": b}, tmp_path=tmp_path)
    assert res["stop"] is True and res["reason"] == "n2: down failed (cannot suspend: masked)", res
    assert _state(sf)["hosts"].get("n3") is None
    # Without a lock (a caller of its own) nothing is kept and nothing stops.
    lock.unlink()
    res = run_module("gear_state", {"path": str(sf), "event": "before_down", "hosts": ["n3"], "rows": ROWS,
                                    "lock_file": str(lock)}, tmp_path=tmp_path)
    assert res["stop"] is False and res["updated"] == {"n3": "off"}, res


def test_the_journal_carries_the_shifts_actions_and_query_reads_them_back(tmp_path):
    """after_up and after_down write every result of their batch into the shift's journal (a failure
    winning per host and action); query writes nothing and gives them back with the stop answer;
    another shift's journal is not this one's."""
    sf, lock = tmp_path / "state.json", tmp_path / "shift.lock"
    a = _lock(lock, "2026-11-27T10:00:00Z")
    up = [{"host": "n4", "action": "up", "ok": True, "state": "on", "method": "wol", "attempts": [{"method": "wol"}]},
          {"host": "n5", "action": "up", "ok": True, "state": "on", "method": "wol"},
          {"host": "n5", "action": "up", "ok": False, "msg": "health command failed"}]
    res = run_module("gear_state", {"path": str(sf), "event": "after_up", "hosts": ["n4", "n5"], "lock_file": a,
                                    "results": up}, tmp_path=tmp_path)
    assert res.changed, res
    res = run_module("gear_state", {"path": str(sf), "event": "after_down", "hosts": ["n2"], "lock_file": a,
                                    "results": [{"host": "n2", "action": "down", "ok": True, "state": "asleep"}]},
                     tmp_path=tmp_path)
    before = sf.read_text()
    q = run_module("gear_state", {"path": str(sf), "event": "query", "hosts": [], "lock_file": a}, tmp_path=tmp_path)
    assert not q.changed and sf.read_text() == before
    got = {(x["host"], x["action"]): x for x in q["actions"]}
    assert sorted(got) == [("n2", "down"), ("n4", "up"), ("n5", "up")]
    assert got[("n4", "up")]["attempts"] == [{"method": "wol"}]            # the result as the wave gave it
    assert got[("n5", "up")]["ok"] is False                                # the failure won
    assert q["stop"] is True and q["reason"] == "n5: up failed (health command failed)"
    # the lock's next owner (a shift after this one was killed) has an empty journal
    b = _lock(lock, "2026-11-27T11:00:00Z", pid=4343)
    q = run_module("gear_state", {"path": str(sf), "event": "query", "hosts": [], "lock_file": b}, tmp_path=tmp_path)
    assert q["actions"] == [] and q["stop"] is False
