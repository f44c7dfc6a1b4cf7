"""module_utils/fleetnap/gearshift.py: per-host actions, the health gate, convergence, the lock module."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from datetime import date

import pytest

from ansible.module_utils.fleetnap import gearshift as gs
from ansible.module_utils.fleetnap.gear import groups_for

# The lab's layout: labN in group (N-1) % 3 + 1, racks of consecutive pairs.
LAB = {"lab%d" % n: {"group": (n - 1) % 3 + 1, "rack": "rack%d" % ((n + 1) // 2)} for n in range(1, 7)}
DAY = date(2026, 11, 21)   # ordinal % 3 decides the rotation


def fleet(states=None, down_method="suspend", up_methods=("wol", "ipmi")):
    states = states or {}
    return {n: dict(h, state=states.get(n, "on"), down_method=down_method, up_methods=list(up_methods))
            for n, h in LAB.items()}


def actions(plan):
    return {r["host"]: r["action"] for r in plan["rows"]}


def test_observed_state_from_ssh_and_bmc():
    assert gs.observed_state(True, "off") == "on"      # SSH wins: the BMC may lag
    assert gs.observed_state(False, "on") == "asleep"
    assert gs.observed_state(False, "off") == "off"
    assert gs.observed_state(False, None) == "unknown"


def test_target_groups_follow_the_daily_rotation():
    for gear in (1, 2, 3):
        g, on, off = gs.target_groups(3, 1, gear=gear, day=DAY)
        assert (g, (on, off)) == (gear, groups_for(gear, 3, DAY))
        assert len(on) == gear and sorted(on + off) == [1, 2, 3]
    # three consecutive days put three different groups alone in gear 1
    alone = {tuple(gs.target_groups(3, 1, gear=1, day=date(2026, 11, d))[1]) for d in (20, 21, 22)}
    assert alone == {(1,), (2,), (3,)}
    assert gs.target_groups(3, 1, groups_on=[3, 1, 3]) == (2, [1, 3], [2])


@pytest.mark.parametrize("kw, msg", [
    (dict(gear=0), "outside [gmin 1, replicas 3]"),
    (dict(gear=4), "outside [gmin 1, replicas 3]"),
    (dict(gear=1, gmin=2), "outside [gmin 2"),
    (dict(groups_on=[4]), "numbered 1..3"),
    (dict(groups_on=[2], gmin=2), "below gmin 2"),
    (dict(), "exactly one of gear"),
    (dict(gear=1, groups_on=[1]), "exactly one of gear"),
])
def test_target_groups_rejects_bad_input(kw, msg):
    gmin = kw.pop("gmin", 1)
    with pytest.raises(gs.ShiftError, match=msg.replace("[", r"\[")):
        gs.target_groups(3, gmin, **kw)


def test_down_shift_3_to_1_puts_two_groups_down_and_leaves_racks_lit():
    g, on, off = gs.target_groups(3, 1, gear=1, day=DAY)
    plan = gs.plan_shift(fleet(), 3, g, on)
    acts = actions(plan)
    assert plan["result"] == "ok" and plan["direction"] == "down" and plan["current_gear"] == 3
    assert sorted(plan["down_hosts"]) == sorted(n for n, h in LAB.items() if h["group"] in off)
    assert plan["up_hosts"] == [] and plan["counts"] == {"up": 0, "down": 4, "none": 2}
    assert all(acts[n] == "none" for n, h in LAB.items() if h["group"] in on)
    assert all(r["method"] == "suspend" for r in plan["rows"] if r["action"] == "down")


def test_the_plan_says_which_state_each_parked_host_will_be_in():
    """parked_states (Slurm's record of a park, gear_state's write-ahead marks): asleep by S3,
    off by the BMC's soft or hard power-off; only the hosts going down."""
    g, on, off = gs.target_groups(3, 1, gear=1, day=DAY)
    hosts = fleet()
    soft, hard = sorted(n for n, h in LAB.items() if h["group"] in off)[:2]
    hosts[soft]["down_method"], hosts[hard]["down_method"] = "soft", "off"
    plan = gs.plan_shift(hosts, 3, g, on)
    assert set(plan["parked_states"]) == set(plan["down_hosts"])
    assert plan["parked_states"][soft] == plan["parked_states"][hard] == "off"
    assert all(plan["parked_states"][n] == "asleep" for n in plan["down_hosts"] if n not in (soft, hard))
    assert [gs.parked_state(m) for m in ("suspend", "", None, "soft", "off")] == ["asleep"] * 3 + ["off"] * 2


def test_up_shift_wakes_only_sleeping_hosts_and_lists_methods_in_order():
    g, on, off = gs.target_groups(3, 1, gear=1, day=DAY)
    asleep = {n: "asleep" for n, h in LAB.items() if h["group"] in off}
    expected = dict.fromkeys(asleep, "off")
    plan = gs.plan_shift(fleet(asleep), 3, 3, [1, 2, 3], expected)
    assert plan["result"] == "ok" and plan["direction"] == "up" and plan["current_gear"] == 1
    assert sorted(plan["up_hosts"]) == sorted(asleep) and plan["down_hosts"] == []
    assert plan["wake_phase_hosts"] == plan["up_hosts"] and plan["back_hosts"] == [] and plan["back_actions"] == []
    assert {r["method"] for r in plan["rows"] if r["action"] == "up"} == {"wol,ipmi"}


def test_interrupted_shift_converges_from_what_is_observed():
    """Half of a 3 -> 1 shift was done: only the rest is planned; after it nothing is left."""
    g, on, off = gs.target_groups(3, 1, gear=1, day=DAY)
    going = sorted(n for n, h in LAB.items() if h["group"] in off)
    half = {going[0]: "asleep", going[1]: "off"}
    plan = gs.plan_shift(fleet(half), 3, g, on)
    assert plan["down_hosts"] == going[2:] and plan["up_hosts"] == []
    done = gs.plan_shift(fleet(dict.fromkeys(going, "asleep")), 3, g, on, dict.fromkeys(going, "off"))
    assert done["counts"]["none"] == 6 and done["direction"] == "none" and done["current_gear"] == 1


def test_health_gate_refuses_and_wakes_the_sleeping_groups():
    """Gear 2 -> 1 with a dead host in the group that stays on: wake everything, power nothing down."""
    _g2, on2, off2 = gs.target_groups(3, 1, gear=2, day=DAY)
    _g1, on1, off1 = gs.target_groups(3, 1, gear=1, day=DAY)
    sleeping = [n for n, h in LAB.items() if h["group"] in off2]
    dead = sorted(n for n, h in LAB.items() if h["group"] in on1)[0]
    states = dict.fromkeys(sleeping, "asleep")
    states[dead] = "off"
    expected = dict.fromkeys(sleeping, "off")
    plan = gs.plan_shift(fleet(states), 3, 1, on1, expected)
    assert plan["result"] == "refused" and plan["unhealthy"] == [dead]
    assert plan["gear"] == 3 and plan["groups_on"] == [1, 2, 3] and plan["requested"]["gear"] == 1
    assert plan["down_hosts"] == [] and sorted(plan["up_hosts"]) == sorted(sleeping)
    assert actions(plan)[dead] == "none" and dead in plan["reason"] and "gear 3" in plan["reason"]
    assert "(unhealthy)" in gs.table(plan["rows"])


def test_a_host_asleep_on_purpose_is_not_unhealthy():
    """Expected off (the last shift put it down): in a group now wanted on, it is woken, not refused."""
    _g, on, off = gs.target_groups(3, 1, gear=2, day=DAY)
    host = sorted(n for n, h in LAB.items() if h["group"] in on)[0]
    other = sorted(n for n, h in LAB.items() if h["group"] in off)[0]
    plan = gs.plan_shift(fleet({host: "asleep"}), 3, 2, on, {host: "off"})
    assert plan["result"] == "ok" and plan["up_hosts"] == [host] and plan["down_hosts"] == sorted(
        n for n, h in LAB.items() if h["group"] in off)
    assert plan["direction"] == "mixed" and other in plan["down_hosts"]


def test_a_parked_host_woken_outside_a_shift_is_put_back_in_service_not_woken():
    """Parked by the last shift (expected off), answering now (woken by hand, by its BMC): in a
    group that is on it gets no power action but is put back (back_hosts); in a group that stays
    off it is parked again; a host that was on all along is neither."""
    _g, on, off = gs.target_groups(3, 1, gear=2, day=DAY)
    woken = sorted(n for n, h in LAB.items() if h["group"] in on)[0]
    again = sorted(n for n, h in LAB.items() if h["group"] in off)[0]
    plan = gs.plan_shift(fleet(), 3, 2, on, {woken: "off", again: "off"})
    assert plan["result"] == "ok" and plan["back_hosts"] == [woken] and plan["up_hosts"] == []
    assert plan["wake_phase_hosts"] == [woken]
    # the wake phase keeps this as the host's result unless a step on it fails
    assert plan["back_actions"] == [{"host": woken, "action": "back", "ok": True, "state": "on",
                                     "msg": "woken outside a shift: put back in service"}]
    assert again in plan["down_hosts"] and woken not in plan["down_hosts"]
    row = next(r for r in plan["rows"] if r["host"] == woken)
    assert row["action"] == "none" and row["back"] is True and "woken outside a shift" in row["why"]
    assert plan["counts"]["up"] == 0
    assert not any(r["back"] for r in plan["rows"] if r["host"] != woken)
    line = next(x for x in gs.table(plan["rows"]).splitlines() if x.startswith(woken + " "))
    assert " back " in line
    # no state file: nobody was parked, nobody is put back
    assert gs.plan_shift(fleet(), 3, 3, [1, 2, 3])["back_hosts"] == []


def test_unhealthy_host_without_down_actions_is_degraded_and_left_alone():
    plan = gs.plan_shift(fleet({"lab1": "unknown"}), 3, 3, [1, 2, 3])
    assert plan["result"] == "degraded" and plan["unhealthy"] == ["lab1"] and plan["up_hosts"] == []


def test_state_from_ssh_and_bmc_fields():
    hosts = {n: dict(h, ssh=n != "lab2", bmc="off" if n == "lab2" else "on", up_methods=["wol"])
             for n, h in LAB.items()}
    plan = gs.plan_shift(hosts, 3, 3, [1, 2, 3], {"lab2": "off"})
    assert {r["host"]: r["state"] for r in plan["rows"]}["lab2"] == "off" and plan["up_hosts"] == ["lab2"]


@pytest.mark.parametrize("mutate, msg", [
    (lambda h: h["lab1"].update(group=4), "host lab1: gear group 4 is outside 1..3"),
    (lambda h: h["lab1"].update(group="x"), "host lab1: gear group 'x' is not a whole number"),
    (lambda h: h["lab2"].update(state="sleeping"), "host lab2: observed state 'sleeping'"),
    (lambda h: h["lab3"].update(down_method="halt"), "host lab3: down method 'halt'"),
    (lambda h: h["lab4"].update(up_methods=["pxe"]), "host lab4: wake methods"),
    (lambda h: h["lab5"].update(up_methods=[]), "host lab5: wake methods"),
    (lambda h: h["lab6"].update(up_methods=["wol", "wol"]), "host lab6: wake methods"),
    (lambda h: [h.pop(n) for n in ("lab3", "lab6")], r"gear group\(s\) \[3\] have no host"),
    (lambda h: h["lab1"].pop("state"), "host lab1: give state, or ssh"),
])
def test_bad_hosts_are_rejected_with_the_host_named(mutate, msg):
    hosts = fleet()
    mutate(hosts)
    with pytest.raises(gs.ShiftError, match=msg):
        gs.plan_shift(hosts, 3, 1, [1])


def test_table_and_power_rows():
    plan = gs.plan_shift(fleet({"lab2": "asleep"}), 3, 3, [1, 2, 3], {"lab2": "off"})
    lines = gs.table(plan["rows"]).splitlines()
    assert lines[0].split() == ["HOST", "GROUP", "RACK", "STATE", "EXPECTED", "TARGET", "ACTION", "METHOD", "WHY"]
    assert [ln.split()[0] for ln in lines[1:]] == ["lab%d" % n for n in range(1, 7)]
    assert lines[2].split()[:8] == ["lab2", "2", "rack1", "asleep", "off", "on", "up", "wol,ipmi"]
    assert lines[2].endswith("gear group 2 is on in this gear")
    rows = gs.power_state_rows(plan["rows"])
    assert len(rows) == 6 * 4 and sum(r["value"] for r in rows) == 6
    assert {r["state"] for r in rows if r["host"] == "lab2" and r["value"]} == {"asleep"}


def test_read_expected(tmp_path):
    assert gs.read_expected(str(tmp_path / "missing.json")) == {}
    good = tmp_path / "state.json"
    good.write_text(json.dumps({"hosts": {"lab1": {"state": "asleep"}, "lab2": {"state": "on"}, "lab3": {},
                                          "lab4": {"state": "off"}, "lab5": {"state": "unknown"}}}))
    assert gs.read_expected(str(good)) == {"lab1": "off", "lab2": "on", "lab4": "off", "lab5": "off"}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(gs.ShiftError, match="bad.json is unreadable"):
        gs.read_expected(str(bad))
    bad.write_text("[]")
    with pytest.raises(gs.ShiftError, match="no 'hosts' object"):
        gs.read_expected(str(bad))


# --- the BMC check: every BMC a shift needs answered, before anything goes down ------------------

def observed(bmcs):
    """The lab fleet as gear_observe returns it: every host answering; ``bmcs``: name -> (bmc_configured,
    chassis power read or None, bmc_error)."""
    out = {}
    for n, h in fleet().items():
        configured, power, error = bmcs.get(n, (True, "on", ""))
        out[n] = dict(h, name=n, ssh=True, bmc_configured=configured, bmc=power, bmc_error=error,
                      bmc_endpoint="127.0.0.1:90%02d" % int(n[3:]))
        del out[n]["state"]
    return out


def test_bmc_check_passes_when_every_needed_bmc_answered():
    hosts = observed({"lab3": (True, None, "did not answer")})        # lab3 stays on in gear 1 here
    plan = gs.plan_shift(hosts, 3, 1, [3])
    assert plan["down_hosts"] == ["lab1", "lab2", "lab4", "lab5"]
    assert gs.bmc_check(hosts, plan) == {"ok": True, "unanswered": [], "missing": [], "reason": "", "msg": ""}
    # a host going down by S3 without any BMC needs none
    hosts = observed({"lab1": (False, None, "")})
    assert gs.bmc_check(hosts, gs.plan_shift(hosts, 3, 1, [3]))["ok"]


def test_bmc_check_names_each_silent_bmc_and_each_missing_one():
    hosts = observed({"lab2": (True, None, "did not answer after 3 tries"), "lab4": (False, None, ""),
                      "lab5": (True, None, "no password for BMC 127.0.0.1")})
    hosts["lab4"]["down_method"] = "off"                           # parked by a BMC it does not have
    plan = gs.plan_shift(hosts, 3, 1, [3])
    check = gs.bmc_check(hosts, plan)
    assert not check["ok"] and check["unanswered"] == ["lab2", "lab5"] and check["missing"] == ["lab4"]
    assert check["reason"] == ("BMC check failed before anything was powered down: lab2: did not answer after 3 tries; "
                               "lab5: no password for BMC 127.0.0.1; lab4: no BMC configured for down method soft/off")
    assert check["msg"] == ("gear shift stopped before powering anything down: the BMC of lab2 (127.0.0.1:9002: "
                            "did not answer after 3 tries); lab5 (127.0.0.1:9005: no password for BMC 127.0.0.1); "
                            "no BMC configured for lab4 (down method soft/off). Fix the BMC (address, port, "
                            "credentials, network) or take the host out of the shift's targets (gear_shift_targets), "
                            "then run again.")
    only_missing = gs.bmc_check(hosts, dict(plan, down_hosts=["lab4"]))
    assert only_missing["unanswered"] == [] and only_missing["msg"].startswith(
        "gear shift stopped before powering anything down: no BMC configured for lab4 (down method soft/off). Fix")


def test_bmc_check_reads_only_hosts_going_down():
    # going up (or staying) with a dead BMC: not this check's business (the wave reports it)
    hosts = observed({n: (True, None, "did not answer") for n in LAB})
    plan = gs.plan_shift(hosts, 3, 3, [1, 2, 3])
    assert plan["down_hosts"] == [] and gs.bmc_check(hosts, plan)["ok"]
    # a plan row given without an observed chassis (no "bmc" key): nothing to judge, as before
    hosts = fleet()
    for h in hosts.values():
        h["bmc_configured"] = True
    assert gs.bmc_check(hosts, gs.plan_shift(hosts, 3, 1, [3]))["ok"]


# --- the modules through Ansible -----------------------------------------------------------------

def test_gear_shift_plan_module(module_runner, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {"lab2": {"state": "asleep"}, "lab5": {"state": "off"}}}))
    hosts = fleet({"lab2": "asleep", "lab5": "off"})
    res = module_runner("gear_shift_plan", {"hosts": hosts, "gear": 3, "state_file": str(state)}, check=True)
    assert not res.failed and not res.changed, res
    assert res["up_hosts"] == ["lab2", "lab5"] and res["result"] == "ok" and "lab5" in res["table"]
    assert len(res["power_rows"]) == 24
    assert res["bmc_check"] == {"ok": True, "unanswered": [], "missing": [], "reason": "", "msg": ""}
    silent = observed({"lab2": (True, None, "did not answer")})
    res = module_runner("gear_shift_plan", {"hosts": silent, "gear": 1, "date": DAY.isoformat()}, check=True)
    assert not res.failed and "lab2" in res["down_hosts"], res
    assert res["bmc_check"]["unanswered"] == ["lab2"] and "the BMC of lab2 (127.0.0.1:9002: did not answer)" \
        in res["bmc_check"]["msg"]
    res = module_runner("gear_shift_plan", {"hosts": hosts, "gear": 0})
    assert res.failed and "outside [gmin 1, replicas 3]" in res["msg"]
    res = module_runner("gear_shift_plan", {"hosts": hosts, "gear": 1, "date": "21/11/2026"})
    assert res.failed and "not YYYY-MM-DD" in res["msg"]



def test_the_plan_goes_into_the_journal_and_a_killed_shift_is_resumed(module_runner, tmp_path):
    """With lock_file the plan (per host its observed state and action) is written into the state
    file's journal, for the shift holding the lock; another shift's journal there was killed and is
    resumed (named in the result, its failures no reason to stop); check mode writes nothing."""
    state = tmp_path / "state.json"
    lock = tmp_path / "shift.lock"
    killed = {"shift": "4242/777/2026-11-27T10:00:00Z", "since": "2026-11-27T10:00:01Z", "plan": {"gear": 1},
              "actions": [{"host": "lab2", "action": "down", "ok": True, "state": "asleep"}],
              "failed": [{"host": "lab3", "action": "down", "msg": "timeout"}]}
    state.write_text(json.dumps({"hosts": {"lab2": {"state": "asleep"}}, "in_progress": killed}))
    lock.write_text(json.dumps({"pid": 4343, "start_time": 778, "since": "2026-11-27T11:00:00Z", "cmdline": ["x"]}))
    args = {"hosts": fleet({"lab2": "asleep"}), "gear": 3, "state_file": str(state), "lock_file": str(lock)}
    before = state.read_text()
    res = module_runner("gear_shift_plan", args, check=True)
    assert not res.failed and not res.changed and res["journal_written"] is False, res
    assert res["resumed"]["shift"] == killed["shift"] and res["resumed"]["failed"] == killed["failed"]
    assert state.read_text() == before
    res = module_runner("gear_shift_plan", args)
    assert not res.failed and res.changed and res["journal_written"] is True, res
    progress = json.loads(state.read_text())["in_progress"]
    assert progress["shift"] == "4343/778/2026-11-27T11:00:00Z" and progress["plan"]["gear"] == 3
    assert {r["host"]: (r["state"], r["action"]) for r in progress["plan"]["rows"]}["lab2"] == ("asleep", "up")
    assert progress["resumed"]["actions"] == killed["actions"] and "failed" not in progress
    # without the lock held there is no shift to write for: refused, the file as it was
    lock.unlink()
    before = state.read_text()
    res = module_runner("gear_shift_plan", args)
    assert res.failed and "take the lock first" in res["msg"] and state.read_text() == before, res


def test_shift_lock_module(module_runner, tmp_path):
    lock = tmp_path / "gear" / "shift.lock"
    holder = subprocess.Popen(["sleep", "60"])
    try:
        res = module_runner("shift_lock", {"path": str(lock), "pid": holder.pid, "purpose": "test"}, check=True)
        assert not res.failed and res.changed and not lock.exists(), res
        res = module_runner("shift_lock", {"path": str(lock), "pid": holder.pid, "purpose": "test"})
        assert not res.failed and res.changed and res["held"], res
        doc = json.loads(lock.read_text())
        assert doc["pid"] == holder.pid and doc["cmdline"][0] == "sleep" and doc["purpose"] == "test"
        assert oct(lock.stat().st_mode & 0o777) == "0o644"
        # same owner again: nothing to do
        res = module_runner("shift_lock", {"path": str(lock), "pid": holder.pid})
        assert not res.failed and not res.changed
        # another live owner is refused, and the lock is untouched
        res = module_runner("shift_lock", {"path": str(lock), "pid": os.getpid()})
        assert res.failed and "another shift holds the lock" in res["msg"] and "PID %d" % holder.pid in res["msg"]
        assert json.loads(lock.read_text()) == doc
        res = module_runner("shift_lock", {"path": str(lock), "pid": os.getpid(), "state": "absent"})
        assert res.failed and "belongs to another live process" in res["msg"] and lock.exists()
    finally:
        holder.kill()
        holder.wait()
    # the owner died: the stale lock is taken over with a warning
    res = module_runner("shift_lock", {"path": str(lock), "pid": os.getpid()})
    assert not res.failed and res["took_over"]["pid"] == holder.pid, res
    assert any("no longer running" in w for w in res.get("warnings", []))
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    res = module_runner("shift_lock", {"path": str(lock), "pid": os.getpid(), "state": "absent"})
    assert not res.failed and res.changed and not lock.exists()
    res = module_runner("shift_lock", {"path": str(lock), "pid": os.getpid(), "state": "absent"})
    assert not res.failed and not res.changed


def test_shift_lock_without_a_playbook_owner(module_runner, tmp_path):
    res = module_runner("shift_lock", {"path": str(tmp_path / "l")})
    assert res.failed and "no ansible-playbook process above this module" in res["msg"]
    assert not (tmp_path / "l").exists()
    gone = subprocess.Popen(["true"])
    gone.wait()
    res = module_runner("shift_lock", {"path": str(tmp_path / "l"), "pid": gone.pid})
    assert res.failed and "is not a running process" in res["msg"]
    res = module_runner("shift_lock", {"path": str(tmp_path / "l"), "pid": 2 ** 22 + 7})
    assert res.failed and "option pid: must be >= 1 and <= 4194304" in res["msg"]
    res = module_runner("shift_lock", {"path": "gear/shift.lock", "pid": os.getpid()})
    assert res.failed and "option path: must be an absolute path" in res["msg"]
    assert not (tmp_path / "l").exists()


# --- playbooks/gear_schedule.yml on the controller (no lab) ------------------------------------

WEEK_BLOCKS = [(600, 20, 30, 2), (900, 100, 80, 10), (1000, 200, 150, 20), (700, 50, 40, 5)]
SCHED_CAPS = ["-e", "gear_shift_servers=30", "-e", "gear_shift_server_read_iops=100", "-e", "gear_shift_server_write_iops=50",
              "-e", "gear_shift_server_read_mbps=10", "-e", "gear_shift_server_write_mbps=5"]


def _week_csv(path):
    """Six-hour blocks of load L = 7.2, 15, 27, 10 servers (N=30, r=3: gears 1, 2, 3, 1)."""
    from datetime import datetime, timedelta, timezone
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    lines = ["timestamp,read_iops,write_iops,read_mbps,write_mbps"]
    for day in range(3):
        for hour in range(24):
            t = start + timedelta(days=day, hours=hour, minutes=30)
            lines.append(",".join([t.strftime("%Y-%m-%dT%H:%M:%SZ")] + ["%.3f" % v for v in WEEK_BLOCKS[hour // 6]]))
    path.write_text("\n".join(lines) + "\n")
    return path


def _schedule(tmp_path, *extra):
    from conftest import REPO, VENV_BIN
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(REPO / "playbooks/gear_schedule.yml"),
           "-e", "gear_shift_load_csv=%s" % _week_csv(tmp_path / "load.csv"), *SCHED_CAPS,
           "-e", "gear_schedule_unit_dir=%s" % (tmp_path / "units"), "-e", "gear_schedule_date=2030-06-15", *extra]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)


def test_gear_schedule_dry_run_install_and_replace(tmp_path):
    units = tmp_path / "units"
    proc = _schedule(tmp_path, "-e", "gear_schedule_dry_run=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Changes: 0h -> gear 1, 6h -> gear 2, 12h -> gear 3, 18h -> gear 1" in proc.stdout
    assert "OnCalendar=2030-06-15 12:00:00 UTC" in proc.stdout and not units.exists()

    units.mkdir()
    old = units / "fleetnap-gear-20200101-05.timer"          # a past day: removed
    gone = units / "fleetnap-gear-20300615-03.service"       # same day, no longer a change: removed
    other = units / "unrelated.timer"                        # not ours: kept
    for p in (old, gone, other):
        p.write_text("[Timer]\n")
    proc = _schedule(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    names = sorted(p.name for p in units.iterdir())
    assert names == sorted(["fleetnap-gear-20300615-%s.%s" % (h, k) for h in ("00", "06", "12", "18")
                            for k in ("service", "timer")] + ["unrelated.timer"])
    timer = (units / "fleetnap-gear-20300615-12.timer").read_text()
    assert "OnCalendar=2030-06-15 12:00:00 UTC" in timer and "Unit=fleetnap-gear-20300615-12.service" in timer
    service = (units / "fleetnap-gear-20300615-12.service").read_text()
    assert "gear_shift.yml -e gear_shift_gear=3 -e gear_shift_date=2030-06-15" in service and "Type=oneshot" in service
    verify = subprocess.run(["systemd-analyze", "verify", str(units / "fleetnap-gear-20300615-12.timer")],
                            capture_output=True, text=True, cwd=str(units))
    assert verify.returncode == 0, verify.stderr
    # a second run changes nothing
    proc = _schedule(tmp_path)
    assert proc.returncode == 0 and "changed=0" in proc.stdout.split("PLAY RECAP")[1].splitlines()[1], proc.stdout[-2000:]


def test_gear_schedule_cron_lines_and_bad_input(tmp_path):
    proc = _schedule(tmp_path, "-e", "gear_schedule_mode=cron")
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = [ln.strip().strip('",') for ln in proc.stdout.splitlines() if ln.strip().startswith('"0 ')]
    assert [ln.split()[:5] for ln in lines] == [["0", h, "15", "6", "*"] for h in ("0", "6", "12", "18")]
    assert lines[2].endswith("-e gear_shift_date=2030-06-15 -e gear_shift_gear=3") and not (tmp_path / "units").exists()
    proc = _schedule(tmp_path, "-e", "gear_schedule_mode=anacron")
    assert proc.returncode != 0 and "gear_schedule_mode must be one of: systemd, cron, got: anacron" in proc.stdout, proc.stdout[-2000:]
    assert not (tmp_path / "units").exists()


def test_gear_schedule_absent_removes_every_unit_it_installed(tmp_path):
    units = tmp_path / "units"
    proc = _schedule(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    old = units / "fleetnap-gear-20300614-06.timer"            # another day's, left by an earlier run
    other = units / "unrelated.timer"                           # not ours: kept
    for p in (old, other):
        p.write_text("[Timer]\n")
    assert len(list(units.glob("fleetnap-gear-*"))) == 9
    from conftest import REPO, VENV_BIN
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(REPO / "playbooks/gear_schedule.yml"),
           "-e", "gear_schedule_state=absent", "-e", "gear_schedule_unit_dir=%s" % units]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]            # no load history needed
    assert sorted(p.name for p in units.iterdir()) == ["unrelated.timer"]
    assert "9 unit file(s)" in proc.stdout
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0 and "changed=0" in proc.stdout.split("PLAY RECAP")[1].splitlines()[1]
    assert "none were installed" in proc.stdout


def test_the_documented_gear_schedule_command_runs_as_written_with_the_example_week(tmp_path):
    """docs/gear_shifts.md (where the README's gear-shift section points): ansible-playbook -i INV
    playbooks/gear_schedule.yml -e gear_shift_load_csv=... (dry run), from the repository root, with the
    example load file that ships in inventories/example."""
    from conftest import REPO, VENV_BIN
    readme = (REPO / "docs" / "gear_shifts.md").read_text()
    start = readme.index("ansible-playbook -i INV playbooks/gear_schedule.yml")
    command = readme[start:readme.index("```", start)].replace("\\\n", " ").split()
    assert "gear_shift_load_csv=inventories/example/load-week.csv" in command
    command = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,"] + command[3:] + [
        "-e", "gear_schedule_date=2026-11-24"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    changes = [line for line in proc.stdout.splitlines() if "Changes:" in line]
    assert changes and "gear 1" in changes[0] and "gear 3" in changes[0], changes


@pytest.mark.parametrize("gear", ["gear_shift_gear", "gear"])
def test_a_shift_whose_planning_fails_releases_the_lock(tmp_path, gear):
    """gear_shift.yml with a gear outside [gmin, replicas]: refused before the lock is taken
    (gear_shift_prepare checks the target first); with a state file the plan cannot read, a failure
    after the lock was taken: the lock is released (the next shift does not meet a dead owner's
    lock), and the message says so. The same through the playbook's short alias -e gear=N."""
    from conftest import REPO, TARGET_PYTHON, VENV_BIN
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]          # bound, never listening: nothing answers
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {"hosts": {
        "h%d" % i: {"ansible_host": "127.0.0.1", "ansible_port": port, "fleetnap_gear_group": i,
                    "fleetnap_rack": "r%d" % i} for i in (1, 2, 3)}}}))
    sd = tmp_path / "gear"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")

    def shift(value):
        return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks/gear_shift.yml"),
                               "-e", "%s=%d" % (gear, value), "-e", "gear_shift_state_dir=%s" % sd,
                               "-e", "gear_shift_probe_timeout_s=1", "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON],
                              capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    proc = shift(9)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "gear 9 is outside" in proc.stdout and "lock was released" not in proc.stdout, proc.stdout[-3000:]
    assert not (sd / "shift.lock").exists() and not (sd / "shift.lock.guard").exists()   # never taken
    sd.mkdir()
    (sd / "state.json").write_text("{hosts")
    proc = shift(1)
    closed.close()
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "(the gear-shift lock was released)" in proc.stdout and "is unreadable" in proc.stdout, proc.stdout[-3000:]
    assert (sd / "shift.lock.guard").exists() and not (sd / "shift.lock").exists()   # taken, then released
    assert (sd / "state.json").read_text() == "{hosts"


def test_gear_shift_prepare_releases_only_its_own_lock_and_a_bmc_command_that_cannot_start_is_observed(tmp_path):
    """One playbook. A lock this run took earlier (shift_lock) stays held when gear_shift_prepare
    fails after it (an S3 record that is not JSON): only a lock the call took is released. And a
    BMC command that cannot be started (a `timeout` on PATH whose interpreter does not exist) is
    that host's bmc_error: the module goes on, plans, and keeps the lock it took, where the error
    used to end the module from a probe thread with its lock still held."""
    from conftest import REPO, VENV_BIN
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]          # bound, never listening: nothing answers
    bad = tmp_path / "badbin"
    bad.mkdir()
    for tool in ("timeout", "ipmitool"):
        (bad / tool).write_text("#!/nonexistent/interpreter\n")
        (bad / tool).chmod(0o755)
    (tmp_path / "resume" / "h1").mkdir(parents=True)
    (tmp_path / "resume" / "h1" / "s3.json").write_text("{ok")
    host = {"name": "h1", "address": "127.0.0.1", "port": port, "inventory": {"group": 1, "up_methods": ["wol"]}}
    ipmi = dict(host, bmc_address="127.0.0.1", bmc_port=port, bmc_user="admin", bmc_password="Fn7-pw-77a0c1")
    common = {"gear": 1, "replicas": 1, "probe_timeout": 0.2, "rate_limit_dir": str(tmp_path / "rl"),
              "min_interval": 0, "retries": 0}
    held, other = tmp_path / "held" / "shift.lock", tmp_path / "other" / "shift.lock"
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        {"shift_lock": {"path": str(held)}},
        {"gear_shift_prepare": dict(common, lock_file=str(held), state_file=str(tmp_path / "held" / "state.json"),
                                    resume_dir=str(tmp_path / "resume"), hosts=[host]),
         "register": "failed_late", "ignore_errors": True},
        {"gear_shift_prepare": dict(common, lock_file=str(other), state_file=str(tmp_path / "other" / "state.json"),
                                    lease=60, hosts=[ipmi]),
         "register": "unstartable", "environment": {"PATH": "%s:/usr/bin:/bin" % bad}},
        {"ansible.builtin.debug": {"msg": "RESULTS={{ {'late': failed_late, 'unstartable': unstartable} | to_json }}"}},
    ]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-e",
                           "ansible_python_interpreter=%s" % (VENV_BIN / "python"), str(play)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    closed.close()
    assert proc.returncode == 0, proc.stdout[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if "RESULTS=" in ln)
    res = json.loads(json.loads("{%s}" % line.strip().rstrip(","))["msg"].split("RESULTS=", 1)[1])
    late, unstartable = res["late"], res["unstartable"]
    assert late["failed"] and "s3.json is unreadable" in late["msg"], late
    assert late["lock_released"] is False and "was released" not in late["msg"], late
    assert json.loads(held.read_text())["pid"] > 0                          # still this run's lock
    assert not unstartable.get("failed"), unstartable
    bmc = unstartable["hosts"]["h1"]
    assert bmc["bmc"] is None and bmc["bmc_error"] and unstartable["plan"]["gear"] == 1, bmc
    assert "Fn7-pw-77a0c1" not in proc.stdout
    assert json.loads(other.read_text())["token"] == unstartable["lock"]["owner"]["token"]   # kept, as planned


def test_shift_lock_owner_is_the_playbook_and_a_second_one_is_refused(tmp_path):
    """Through ansible-playbook: the owner is the main process (not a forked worker that ends with its task)."""
    from conftest import REPO, VENV_BIN
    lock = tmp_path / "shift.lock"
    play = tmp_path / "hold.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - shift_lock: {path: %s}\n"
        "    - ansible.builtin.wait_for: {path: %s}\n"
        "    - shift_lock: {path: %s, state: absent}\n" % (lock, tmp_path / "go", lock))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-e",
           "ansible_python_interpreter=/usr/bin/python3", str(play)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO))
    try:
        for _ in range(300):
            if lock.exists() and lock.read_text().strip().endswith("}"):
                break
            time.sleep(0.1)
        owner = json.loads(lock.read_text())
        assert owner["pid"] == first.pid, (owner, first.pid)
        second = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120)
        assert second.returncode != 0 and "another shift holds the lock" in second.stdout
        assert "PID %d" % first.pid in second.stdout and json.loads(lock.read_text()) == owner
        (tmp_path / "go").write_text("")
        out, _ = first.communicate(timeout=120)
        assert first.returncode == 0, out[-2000:]
        assert not lock.exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


# Parking is not napping: how a drained host is parked, and why (the plan shows both).
@pytest.mark.parametrize("h, method, why", [
    ({"down_method": "off"}, "off", "fleetnap_down_method / gear_shift_down_method is off"),
    ({"s3": {"ok": True, "cycles": 3, "worst_ms": 2410, "at": "2026-11-25"}, "bmc_configured": True},
     "suspend", "S3 resume measured working: 3 cycle(s), worst 2410 ms (2026-11-25)"),
    ({"s3": {"ok": False, "at": "2026-11-25", "msg": "no resume within 60 s"}, "bmc_configured": True},
     "soft", "S3 resume measured failing (2026-11-25: no resume within 60 s): soft-off by its BMC"),
    ({"s3": {"ok": False, "at": "2026-11-25"}}, "suspend",
     "S3 resume measured failing (2026-11-25) and no BMC: S3 is tried, checked on the host first"),
    ({"bmc_configured": True}, "suspend",
     "no S3 measurement (measure_resume.yml): S3, checked on the host first; soft-off by its BMC if it has no S3"),
    ({}, "suspend", "no S3 measurement (measure_resume.yml): S3, checked on the host first; no BMC to fall back on"),
    # woken by its BMC only: parked by it, whatever S3 would do (On does not wake a host from S3)
    ({"up_methods": ["redfish"], "bmc_configured": True, "s3": {"ok": True, "cycles": 3, "worst_ms": 900, "at": "x"}},
     "soft", "no Wake-on-LAN among its wake methods (redfish): a BMC's power-on does not wake a host from S3; "
     "soft-off by its BMC, which powers it on"),
    ({"up_methods": ["ipmi", "redfish"], "bmc_configured": True}, "soft",
     "no Wake-on-LAN among its wake methods (ipmi, redfish): a BMC's power-on does not wake a host from S3; "
     "soft-off by its BMC, which powers it on"),
    ({"up_methods": ["redfish", "wol"], "bmc_configured": True}, "suspend",
     "no S3 measurement (measure_resume.yml): S3, checked on the host first; soft-off by its BMC if it has no S3"),
    ({"up_methods": ["ipmi"]}, "suspend",      # no BMC: nothing to park it by (the plan's BMC check says so)
     "no S3 measurement (measure_resume.yml): S3, checked on the host first; no BMC to fall back on"),
])
def test_park_method_and_why(h, method, why):
    assert gs.park_method("lab1", h) == (method, why)


def test_measured_s3_parks_by_s3_whatever_the_budget_and_the_plan_says_so():
    hosts = fleet()
    for h in hosts.values():
        h.update(down_method="auto", bmc_configured=True)
    hosts["lab1"]["s3"] = {"ok": True, "cycles": 3, "worst_ms": 5000, "at": "2026-11-25"}
    hosts["lab4"]["s3"] = {"ok": False, "at": "2026-11-25", "msg": "failed"}
    plan = gs.plan_shift(hosts, 3, 1, [3])
    rows = dict((r["host"], r) for r in plan["rows"])
    assert plan["down_methods"] == {"lab1": "suspend", "lab2": "suspend", "lab4": "soft", "lab5": "suspend"}
    assert rows["lab1"]["why"].startswith("S3 resume measured working")
    assert rows["lab4"]["why"].startswith("S3 resume measured failing")


def test_second_tier_moves_a_long_parked_host_on_to_power_off():
    hosts = fleet({"lab1": "asleep", "lab2": "asleep", "lab4": "asleep"})
    for h in hosts.values():
        h["bmc_configured"] = True
    hosts["lab4"]["bmc_configured"] = False
    now = 1_800_000_000
    parked = {"lab1": now - 13 * 3600, "lab2": now - 3600, "lab4": now - 20 * 3600}
    expected = dict.fromkeys(parked, "off")
    plan = gs.plan_shift(hosts, 3, 1, [3], expected, parked=parked, now=now, park_off_after_s=12 * 3600)
    rows = dict((r["host"], r) for r in plan["rows"])
    assert rows["lab1"]["action"] == "down" and rows["lab1"]["method"] == "off"
    assert rows["lab1"]["why"] == ("in S3 for 13.0 h, longer than gear_shift_park_off_after_h 12 h: "
                                   "moved on to power-off by its BMC")
    assert rows["lab2"]["action"] == "none"          # 1 h: stays in S3
    assert rows["lab4"]["action"] == "none"          # no BMC: cannot be powered off, stays in S3
    assert rows["lab5"]["action"] == "down" and rows["lab5"]["method"] == "suspend"
    # without the setting nothing moves on
    plan = gs.plan_shift(hosts, 3, 1, [3], expected, parked=parked, now=now)
    assert [r["host"] for r in plan["rows"] if r["action"] == "down"] == ["lab5"]


def test_read_parked_and_s3_records(tmp_path):
    st = tmp_path / "state.json"
    st.write_text(json.dumps({"hosts": {"a": {"state": "asleep", "since": "2026-11-25T01:00:00Z"},
                                        "b": {"state": "off", "since": "2026-11-25T01:00:00Z"},
                                        "c": {"state": "asleep"}}}))
    assert gs.read_parked(str(st)) == {"a": 1795568400}
    st.write_text(json.dumps({"hosts": {"a": {"state": "asleep", "since": "yesterday"}}}))
    with pytest.raises(gs.ShiftError, match=r"hosts.a.since 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ"):
        gs.read_parked(str(st))
    (tmp_path / "r" / "a").mkdir(parents=True)
    (tmp_path / "r" / "a" / "s3.json").write_text('{"ok": true, "cycles": 2}')
    assert gs.read_s3_records(str(tmp_path / "r"), ["a", "b", "../x"]) == {"a": {"ok": True, "cycles": 2}}
    (tmp_path / "r" / "a" / "s3.json").write_text('{"ok": "yes"}')
    with pytest.raises(gs.ShiftError, match="s3.json is not an object with ok"):
        gs.read_s3_records(str(tmp_path / "r"), ["a"])
    (tmp_path / "r" / "a" / "s3.json").write_text('{"ok": tru')
    with pytest.raises(gs.ShiftError, match="s3.json is unreadable"):
        gs.read_s3_records(str(tmp_path / "r"), ["a"])


def test_since_is_kept_while_the_state_is_unchanged_so_the_second_tier_can_see_it(tmp_path):
    rows = [{"host": "a", "state": "asleep"}, {"host": "b", "state": "on"}, {"host": "c", "state": "asleep"}]
    prev = {"a": {"state": "asleep", "since": "2026-11-24T22:00:00Z"}, "b": {"state": "asleep", "since": "x"}}
    gs.carry_since(rows, prev, "2026-11-25T06:00:00Z")
    assert [r["since"] for r in rows] == ["2026-11-24T22:00:00Z", "2026-11-25T06:00:00Z", "2026-11-25T06:00:00Z"]
    # what the record writes from these rows is what read_parked reads back
    st = tmp_path / "state.json"
    st.write_text(json.dumps({"hosts": dict((r["host"], r) for r in rows)}))
    assert gs.read_parked(str(st)) == {"a": 1795557600, "c": 1795586400}


def test_the_resume_hook_mark_is_kept_while_a_host_stays_asleep():
    """carry_since keeps gear_member's resume_hook mark of the state file while the host stays
    asleep (the record writes it back), and drops it once the host is seen awake."""
    hooked, plain, woken = "lab1", "lab2", "lab3"
    previous = {hooked: {"state": "asleep", "since": "2026-11-27T01:00:00Z", "resume_hook": True},
                plain: {"state": "asleep", "since": "2026-11-27T01:00:00Z"},
                woken: {"state": "asleep", "since": "2026-11-27T01:00:00Z", "resume_hook": True}}
    rows = [{"host": hooked, "state": "asleep"}, {"host": woken, "state": "on"}, {"host": plain, "state": "asleep"}]
    gs.carry_since(rows, previous, "2026-11-27T02:00:00Z")
    assert rows[0]["resume_hook"] is True and rows[0]["since"] == "2026-11-27T01:00:00Z"
    assert "resume_hook" not in rows[1] and "resume_hook" not in rows[2]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 301])
@pytest.mark.parametrize("size", ["0", "1", "3", "50", "0%", "1%", "10%", "33%", "50%", "100%", "150%", "400"])
def test_batches_are_what_ansibles_serial_makes(n, size):
    """gear_shift_plan's wake_batches/down_batches, for the role without serial plays: the same cut
    as Ansible's serial over the same hosts (ansible.utils.helpers.pct_to_int and the rule of the
    playbook executor: a size of 0 or less is every host), in order, each host once."""
    from ansible.utils.helpers import pct_to_int
    names = ["h%03d" % i for i in range(n)]
    got = gs.batches(names, size)
    k = pct_to_int(size, n)
    k = n if k <= 0 or k > n else k
    assert [len(b) for b in got[:-1]] == [k] * (len(got) - 1) and 0 < len(got[-1]) <= k
    assert [h for b in got for h in b] == names
    assert gs.batches([], size) == []


@pytest.mark.parametrize("size", ["-1", "1.5", "", "x%", " %", "1e3", "1234567", "%5"])
def test_a_batch_size_that_is_no_size_is_refused_naming_it(size):
    with pytest.raises(gs.ShiftError, match="option wake_batch_size: must be a number of hosts or a percentage"):
        gs.batches(["a"], size, "wake_batch_size")


def test_the_wake_phase_runs_steps_only_on_the_hosts_that_need_one():
    """step_hosts (shiftplan: gear_shift_plan's and gear_shift_prepare's): a host parked with the
    resume hook needs no step once it greets; one parked without it needs its sleep policy put back;
    a health command or an undrain hook is a step on every host; on a Slurm cluster only the health
    command runs on the host."""
    from ansible.module_utils.fleetnap import shiftplan as gsp
    seen = {"a": {"resume_hook": True}, "b": {}, "c": {"resume_hook": "yes"}}
    assert gsp.step_hosts(["a", "b", "c"], seen, False, False, "none") == ["b", "c"]
    assert gsp.step_hosts(["a", "b", "c"], seen, True, False, "none") == ["a", "b", "c"]
    assert gsp.step_hosts(["a", "b", "c"], seen, False, True, "none") == ["a", "b", "c"]
    assert gsp.step_hosts(["a", "b", "c"], seen, False, True, "slurm") == []
    assert gsp.step_hosts(["a", "b"], seen, True, False, "slurm") == ["a", "b"]


def test_the_controller_wakes_the_waves_when_no_woken_host_has_a_step():
    """wake_split (shiftplan: the plan's wake_waves, wake_play_hosts, wake_play_batches): with no step
    on any host the wake phase acts on and fleetnap's own waves, every wave is one controller call,
    each with its hosts, those it wakes and the results of those it puts back, and the wake play
    has no host; a single step host, or Slurm, sends the whole phase to the wake play."""
    from ansible.module_utils.fleetnap import shiftplan as gsp
    batches = [["a", "b"], ["c", "d"], ["e"]]
    back = [{"host": "b", "action": "back", "ok": True}, {"host": "e", "action": "back", "ok": True}]
    waves, play, play_batches = gsp.wake_split(batches, ["a", "c", "d"], back, [], "none")
    assert waves == [{"hosts": ["a", "b"], "up": ["a"], "back": [back[0]]},
                     {"hosts": ["c", "d"], "up": ["c", "d"], "back": []},
                     {"hosts": ["e"], "up": [], "back": [back[1]]}]
    assert play == [] and play_batches == []
    for steps, scheduler in ((["d"], "none"), ([], "slurm"), (["a"], "slurm")):
        waves, play, play_batches = gsp.wake_split(batches, ["a", "c", "d"], back, steps, scheduler)
        assert waves == [] and play == ["a", "b", "c", "d", "e"] and play_batches == batches
    assert gsp.wake_split([], [], [], [], "none") == ([], [], [])


def test_the_controller_runs_the_whole_shift_only_when_the_plan_only_wakes_from_there():
    """whole_from_controller (shiftplan: when gear_shift_prepare's whole_shift goes on): only with no
    host going down, no host of the wake phase in the wake play (each has its step otherwise),
    fleetnap's own waves and every BMC the plan needs answered; a plan with nothing to do goes on
    too (its record is all)."""
    from ansible.module_utils.fleetnap import shiftplan as gsp
    plan = {"down_hosts": [], "wake_play_hosts": [], "bmc_check": {"ok": True}}
    assert gsp.whole_from_controller(plan, "none") is True
    assert gsp.whole_from_controller(plan, "slurm") is False
    assert gsp.whole_from_controller(dict(plan, down_hosts=["a"]), "none") is False
    assert gsp.whole_from_controller(dict(plan, wake_play_hosts=["b"]), "none") is False
    assert gsp.whole_from_controller(dict(plan, bmc_check={"ok": False}), "none") is False


EARLY_P = {"whole_shift": {"wake_during_observation": True}, "journal": True, "scheduler": "none",
           "wake_health": False, "wake_undrain": False, "replicas": 2, "wake_batch_size": "100%",
           "probe_timeout": 3.0, "parked_probe_timeout": 0.5, "wake_probe_timeout": 0.5,
           "hosts": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
EARLY_RECORDED = {"a": {"state": "asleep", "resume_hook": True}, "b": {"state": "asleep"},
                  "c": {"state": "off", "resume_hook": True}}


@pytest.mark.parametrize("change, on, check_mode, woken", [
    ({}, [1, 2], False, ["a"]),                                        # asleep with its resume hook only
    ({"wake_batch_size": "3"}, [1, 2], False, ["a"]),                  # a batch of every host
    ({"wake_batch_size": "0"}, [1, 2], False, ["a"]),
    ({}, [2], False, []),                                              # a group goes off: a BMC check could stop it
    ({}, [1, 2], True, []),                                            # check mode
    ({"whole_shift": None}, [1, 2], False, []),                        # the prepare call does not go on
    ({"whole_shift": {"wake_during_observation": False}}, [1, 2], False, []),
    ({"journal": False}, [1, 2], False, []),                           # gear_shift_power_ok false
    ({"scheduler": "slurm"}, [1, 2], False, []),
    ({"wake_health": True}, [1, 2], False, []),                        # a step on the woken hosts
    ({"wake_undrain": True}, [1, 2], False, []),
    ({"wake_batch_size": "50%"}, [1, 2], False, []),                   # a later batch would be woken early
    ({"wake_batch_size": "2"}, [1, 2], False, []),
    ({"parked_probe_timeout": 1.0, "wake_probe_timeout": 1.0}, [1, 2], False, []),   # the SYN's resend in the wait
    ({"probe_timeout": 1.0, "parked_probe_timeout": 2.0, "wake_probe_timeout": 2.0}, [1, 2], False, []),
    ({"probe_timeout": 0.9, "parked_probe_timeout": 2.0, "wake_probe_timeout": 2.0}, [1, 2], False, ["a"]),
])
def test_packets_go_out_during_the_observation_only_where_nothing_can_stop_the_shift_after_them(
        change, on, check_mode, woken):
    """shiftplan.wake_during_observation: only a whole shift of the prepare call that nothing can stop
    once the packets are out (no group off, one wake batch, journal, not check mode, not Slurm, no
    step), with a probe under a second, and only hosts parked asleep with their resume hook."""
    from ansible.module_utils.fleetnap import shiftplan as gsp
    assert gsp.wake_during_observation(dict(EARLY_P, **change), on, EARLY_RECORDED, check_mode) == woken
