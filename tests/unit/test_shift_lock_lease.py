"""shift_lock's lease: the lock of a shift that spans several jobs (an AWX workflow: the plan job
takes it, the record job renews and releases it). A lease is held until it expires or its token
releases it; an expired lease is taken over; a live process lock refuses a lease and the other
way round; the journal names a leased shift by its token (so every job of the workflow writes the
same shift's journal); gear_record releases the lease of the shift it recorded, never another's."""

from __future__ import annotations

import json
import os
import time

from conftest import REPO, run_module  # noqa: F401  (REPO puts module_utils on the path)

from ansible.module_utils.fleetnap import journal, shiftlock


def lease_file(path, token="t1", expires_in=3600, purpose="gear shift"):
    path.write_text(json.dumps({"token": token, "since": "2026-11-29T10:00:00Z",
                                "expires": int(time.time()) + expires_in, "purpose": purpose}))


def test_a_lease_is_taken_renewed_and_released_by_its_token(tmp_path):
    lock = tmp_path / "gear" / "shift.lock"
    res = run_module("shift_lock", {"path": str(lock), "lease": 600, "purpose": "plan job"})
    assert not res.failed and res["held"] and res["changed"], res
    token = res["owner"]["token"]
    held = json.loads(lock.read_text())
    assert held["token"] == token and "pid" not in held
    assert abs(held["expires"] - (time.time() + 600)) < 30
    # the record job, another process: renews with the token (the since stays the plan job's)
    again = run_module("shift_lock", {"path": str(lock), "lease": 1200, "lease_id": token})
    assert not again.failed and again["renewed"] and again["owner"]["since"] == held["since"], again
    assert json.loads(lock.read_text())["expires"] > held["expires"]
    # anyone else - a process lock or another lease - is refused while it holds
    other = run_module("shift_lock", {"path": str(lock), "pid": os.getpid()})
    assert other.failed and "another shift holds the lock" in other["msg"] and token in other["msg"], other
    other = run_module("shift_lock", {"path": str(lock), "lease": 60, "lease_id": "someone-else"})
    assert other.failed and "until" in other["msg"] and lock.exists()
    gone = run_module("shift_lock", {"path": str(lock), "state": "absent", "lease_id": "someone-else"})
    assert gone.failed and "belongs to another live lease" in gone["msg"] and lock.exists()
    gone = run_module("shift_lock", {"path": str(lock), "state": "absent", "pid": os.getpid()})
    assert gone.failed and "belongs to another live lease" in gone["msg"] and lock.exists()
    # its token releases it
    gone = run_module("shift_lock", {"path": str(lock), "state": "absent", "lease_id": token})
    assert not gone.failed and gone["changed"] and not lock.exists()


def test_an_expired_lease_is_taken_over_and_a_live_process_lock_refuses_a_lease(tmp_path):
    lock = tmp_path / "shift.lock"
    lease_file(lock, token="old", expires_in=-5)
    res = run_module("shift_lock", {"path": str(lock), "pid": os.getpid()})
    assert not res.failed and res["took_over"]["token"] == "old", res
    assert any("has expired" in w for w in res.get("warnings", []))
    refused = run_module("shift_lock", {"path": str(lock), "lease": 60})
    assert refused.failed and "another shift holds the lock" in refused["msg"], refused
    assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_check_mode_takes_no_lease(tmp_path):
    lock = tmp_path / "shift.lock"
    res = run_module("shift_lock", {"path": str(lock), "lease": 60}, check=True)
    assert not res.failed and res["changed"] and not lock.exists()


def test_a_lease_field_of_another_shape_is_refused_naming_it(tmp_path):
    lock = tmp_path / "shift.lock"
    lock.write_text(json.dumps({"token": "ok", "expires": "tomorrow"}))
    res = run_module("shift_lock", {"path": str(lock), "lease": 60, "lease_id": "ok"})
    assert res.failed and "field expires must be a whole number" in res["msg"], res
    lock.write_text(json.dumps({"token": "../../etc", "expires": 1}))
    res = run_module("shift_lock", {"path": str(lock), "lease": 60})
    assert res.failed and "field token must be a token" in res["msg"], res


def test_the_journal_names_a_leased_shift_by_its_token_and_alive_follows_the_expiry(tmp_path):
    lock = tmp_path / "shift.lock"
    lease_file(lock, token="wf-42")
    assert journal.shift_of(str(lock)) == "lease/wf-42"
    owner = shiftlock.read(str(lock))
    assert shiftlock.alive(owner) and not shiftlock.alive(owner, now=owner["expires"])
    assert "the lease wf-42" in shiftlock.describe(owner)
