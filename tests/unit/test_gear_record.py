"""gear_record: a gear shift's result, state file, history, energy and metrics decided and written
in one call (module_utils/fleetnap/gearrecord.py, library/gear_record.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_module
from promcheck import check as promcheck

from ansible.module_utils.fleetnap import gearrecord as gr
from ansible.module_utils.fleetnap import gearshift as gs
from ansible.module_utils.fleetnap.validate import ParamError

LAB = {"lab%d" % n: {"group": (n - 1) % 3 + 1, "rack": "rack%d" % ((n + 1) // 2)} for n in range(1, 7)}
FIG = {"on": 130, "asleep": 5, "off": 3}


def plan_of(states, gear, on, expected=None):
    hosts = {n: dict(h, state=states.get(n, "on"), down_method="suspend", up_methods=["wol"], power_w=FIG)
             for n, h in LAB.items()}
    out = gs.plan_shift(hosts, 3, gear, on, expected)
    out["table"] = gs.table(out["rows"])
    out["power_rows"] = gs.power_state_rows(out["rows"])
    out["date"] = "2026-11-25"
    return out


def shift_down():
    """3 -> 1 with groups 2 and 3 going down: the plan, and the hosts as seen after it."""
    plan = plan_of({}, 1, [1])
    asleep = {n: "asleep" for n in plan["down_hosts"]}
    after = plan_of(asleep, 1, [1], dict.fromkeys(asleep, "asleep"))
    actions = [{"host": n, "action": "down", "ok": True, "method": "suspend", "msg": "silent"}
               for n in plan["down_hosts"]]
    return plan, after, actions


def test_a_shift_that_converged_has_the_plans_result():
    plan, after, actions = shift_down()
    assert after["up_hosts"] == [] and after["down_hosts"] == []
    assert gr.outcome(plan, after, actions) == ("ok", "")


def test_a_failed_host_or_one_left_behind_fails_the_shift_with_each_reason():
    plan, after, actions = shift_down()
    actions[0] = dict(actions[0], ok=False, msg="cannot suspend: suspend.target is masked ")
    left = plan_of({}, 1, [1])          # nobody went down
    result, reason = gr.outcome(plan, left, actions)
    assert result == "failed"
    assert reason.startswith("%s: cannot suspend: suspend.target is masked; not converged: " % actions[0]["host"])
    assert ", ".join(left["down_hosts"]) + " still to act on" in reason


def test_the_health_gates_reason_is_kept_and_degraded_stays_degraded():
    plan, after, actions = shift_down()
    plan = dict(plan, result="degraded", reason="group 1 is unhealthy (lab1 silent): stayed in gear 3")
    assert gr.outcome(plan, after, actions) == ("degraded", plan["reason"])


def test_record_history_line_and_report():
    plan, after, actions = shift_down()
    rec = gr.record(plan, after, actions, "ok", "", "2026-11-25T10:00:00+00:00", "2026-11-25T10:00:30+00:00", 30.0004)
    assert rec["gear"] == 1 and rec["target_gear"] == 1 and rec["duration_s"] == 30.0
    assert set(rec["hosts"]) == set(LAB) and rec["actions"] == actions and rec["planned"] == plan["rows"]
    line = gr.history_line(rec, after)
    assert line["power"] == {n: ("on" if LAB[n]["group"] == 1 else "asleep") for n in LAB}
    assert set(line) == set(gr.HISTORY_KEYS) | {"power", "took"}
    assert line["took"] == {}          # these actions say nothing of their time: nothing is made up
    lines = gr.report(rec, after, "/x/state.json")
    assert lines[0] == "Gear shift ok: gear 1 (target 1, requested 1) in 30.0 s"
    assert lines[1].split() == ["HOST", "GROUP", "RACK", "STATE", "EXPECTED", "TARGET", "ACTION", "METHOD", "WHY"]
    assert "  %s: down ok by suspend - silent" % actions[0]["host"] in lines
    assert lines[-1] == "  state: /x/state.json"


def test_the_history_line_keeps_what_each_park_and_wake_took():
    """slurmconf builds Slurm's timeouts from these: the verified and the failed, each with its
    method; an action without a usable elapsed_s (NaN, a bool) and a put back are left out."""
    plan, after, actions = shift_down()
    a, b = [x["host"] for x in actions[:2]]
    timed = [dict(actions[0], elapsed_s=12.5), dict(actions[1], ok=False, method="", elapsed_s=300.0),
             dict(actions[2], elapsed_s=float("nan")), dict(actions[3], elapsed_s=True),
             {"host": "lab1", "action": "back", "ok": True, "elapsed_s": 3.0}]
    rec = gr.record(plan, after, timed, "failed", "x", "2026-11-25T10:00:00+00:00", "2026-11-25T10:00:30+00:00", 30.0)
    assert gr.history_line(rec, after)["took"] == {
        a: {"action": "down", "ok": True, "method": "suspend", "elapsed_s": 12.5},
        b: {"action": "down", "ok": False, "method": "", "elapsed_s": 300.0}}


def test_a_host_parked_with_the_resume_hook_is_marked_in_the_state_file():
    """The next shift leaves its unpark to the host (gear_observe reports the mark): the mark comes
    from this shift's down action; a failed park or a host no longer asleep gets none."""
    plan, after, actions = shift_down()
    down = [a for a in actions if a["action"] == "down"]
    hooked, plain = down[0]["host"], down[1]["host"]
    actions = [dict(a, resume_hook=True) if a["host"] == hooked else a for a in actions]
    rec = gr.record(plan, after, actions, "ok", "", "2026-11-25T10:00:00+00:00", "2026-11-25T10:00:30+00:00", 30.0)
    assert rec["hosts"][hooked]["resume_hook"] is True and rec["hosts"][hooked]["state"] == "asleep"
    assert "resume_hook" not in rec["hosts"][plain]
    assert not any(r.get("resume_hook") for r in after["rows"])       # the rows given are not changed
    failed = [dict(a, ok=False) if a["host"] == hooked else a for a in actions]
    rec = gr.record(plan, after, failed, "failed", "", "2026-11-25T10:00:00+00:00", "2026-11-25T10:00:30+00:00", 30.0)
    assert "resume_hook" not in rec["hosts"][hooked]


@pytest.mark.parametrize("mutate,words", [
    (lambda p, a, x: p.pop("rows"), "option plan: needs gear_shift_plan's"),
    (lambda p, a, x: p.update(result="fine"), "option plan.result: 'fine' is not one of"),
    (lambda p, a, x: a.update(up_hosts="lab1"), "option after.up_hosts: must be a list of host names"),
    (lambda p, a, x: a.update(rows=[{"state": "on"}]), "option after.rows: must be a list of rows"),
    (lambda p, a, x: x.append({"host": "lab1", "ok": "yes"}), "option actions[6]: needs a host name"),
    (lambda p, a, x: p.update(requested=3), "option plan.requested: needs the requested gear"),
])
def test_inputs_are_checked_naming_the_option(mutate, words):
    plan, after, actions = shift_down()
    actions = list(actions) + [{"host": "lab9", "ok": True}] * (6 - len(actions))
    mutate(plan, after, actions)
    with pytest.raises(ParamError, match=words.replace("(", r"\(").replace("[", r"\[")):
        gr.check_inputs(plan, after, actions)


def test_writes_are_put_back_after_a_real_failure(tmp_path):
    """A write that fails (a file where a directory should be) after two others: the state file
    is as it was, the history has its old length, the new file is gone."""
    state, history, new = tmp_path / "state.json", tmp_path / "history.jsonl", tmp_path / "power_w.json"
    state.write_text('{"hosts": {}}\n')
    history.write_text('{"gear": 3}\n')
    (tmp_path / "plain").write_text("a file, not a directory")
    w = gr.Writes()
    w.replace(str(state), state.read_bytes(), '{"hosts": {"lab1": {}}}\n')
    w.append(str(history), '{"gear": 1}\n')
    w.replace(str(new), None, "{}\n")
    with pytest.raises(OSError):
        w.replace(str(tmp_path / "plain" / "metrics" / "fleetnap_gear.prom"), None, "x\n")
    assert w.rollback() == []
    assert state.read_text() == '{"hosts": {}}\n'
    assert history.read_text() == '{"gear": 3}\n'
    assert not new.exists()


def _valid_gear_metrics(path):
    """The metrics file's text; every problem promtool or the duplicate check finds fails the test."""
    text = path.read_text()
    problems = promcheck(text)
    assert not problems, "\n".join(problems) + "\n---\n" + text
    return text


def _args(tmp_path: Path, plan, after, actions, **extra):
    gear = tmp_path / "gear"
    gear.mkdir(exist_ok=True)
    return dict(dict(plan=plan, after=after, actions=actions, started="2026-11-25T10:00:00+00:00",
                     started_epoch=1764064800.0, state_file=str(gear / "state.json"),
                     history_file=str(gear / "history.jsonl"), power_file=str(gear / "power_w.json"),
                     metrics_dir=str(gear / "metrics")), **extra)


def test_module_writes_state_history_power_and_metrics_and_check_mode_writes_nothing(tmp_path):
    plan, after, actions = shift_down()
    args = _args(tmp_path, plan, after, actions)
    gear = tmp_path / "gear"
    dry = run_module("gear_record", args, check=True)
    assert dry.get("failed") is not True and dry["result"] == "ok" and dry["written"] == []
    assert sorted(p.name for p in gear.iterdir()) == []
    res = run_module("gear_record", args)
    assert res.get("failed") is not True, res
    assert res["changed"] and res["result"] == "ok" and res["reason"] == ""
    state = json.loads((gear / "state.json").read_text())
    assert state["gear"] == 1 and state["result"] == "ok" and state["hosts"]["lab2"]["state"] == "asleep"
    hist = [json.loads(x) for x in (gear / "history.jsonl").read_text().splitlines()]
    assert len(hist) == 1 and hist[0]["power"]["lab2"] == "asleep" and hist[0]["gear"] == 1
    assert json.loads((gear / "power_w.json").read_text()) == {n: FIG for n in LAB}
    prom = _valid_gear_metrics(gear / "metrics" / "fleetnap_gear.prom").splitlines()
    assert "fleetnap_gear 1" in prom and 'fleetnap_gear_shift_last_result{result="ok"} 1' in prom
    assert 'fleetnap_host_power_state{host="lab2",state="asleep"} 1' in prom
    assert res["report"][0].startswith("Gear shift ok: gear 1 (target 1, requested 1) in ")
    # A second shift: a second history line, and the energy counts the time between them.
    again = run_module("gear_record", args)
    assert again.get("failed") is not True
    assert len((gear / "history.jsonl").read_text().splitlines()) == 2
    _valid_gear_metrics(gear / "metrics" / "fleetnap_gear.prom")
    assert again["energy"]["hosts_without_figures"] == []


def test_module_records_a_stopped_shift_as_given(tmp_path):
    plan, _after, _actions = shift_down()
    res = run_module("gear_record", _args(tmp_path, plan, plan, [], result="failed",
                                          reason="BMC check failed before anything was powered down: lab2: timeout"))
    assert res.get("failed") is not True, res
    assert res["result"] == "failed" and res["reason"].startswith("BMC check failed")
    state = json.loads((tmp_path / "gear" / "state.json").read_text())
    assert state["result"] == "failed" and state["actions"] == []


def test_module_refuses_a_bad_history_before_writing_anything(tmp_path):
    plan, after, actions = shift_down()
    args = _args(tmp_path, plan, after, actions)
    Path(args["history_file"]).write_text('{"finished": "yesterday", "power": {}}\n')
    res = run_module("gear_record", args)
    assert res.get("failed") and "history.jsonl line 1: finished" in res["msg"], res
    assert sorted(p.name for p in (tmp_path / "gear").iterdir()) == ["history.jsonl"]


def test_a_wake_and_the_failure_after_it_are_one_failed_action():
    woke = {"host": "lab2", "action": "up", "ok": True, "method": "wol", "attempts": [{"method": "wol"}],
            "msg": "woke by wol"}
    health = {"host": "lab2", "action": "up", "ok": False, "msg": "health command failed"}
    other = {"host": "lab5", "action": "up", "ok": True, "method": "wol", "msg": "woke by wol"}
    merged = gr.merge_actions([woke, other, health])
    assert merged == [dict(woke, ok=False, msg="health command failed"), other]
    # the failure seen first is not undone by a later success
    assert gr.merge_actions([health, woke]) == [health]
    # a host's up and down are two actions
    down = {"host": "lab2", "action": "down", "ok": True, "msg": "silent"}
    assert len(gr.merge_actions([woke, down])) == 2


def test_module_decides_where_hosts_are_now_from_the_observation_itself(tmp_path):
    """observed (what gear_observe saw after the shift) instead of a second gear_shift_plan call:
    the same record as with that call's return, decided against the state file before it is
    rewritten."""
    plan, after, actions = shift_down()
    seen = {n: dict(h, ssh=n not in plan["down_hosts"], bmc="on", down_method="suspend", up_methods=["wol"],
                    bmc_configured=True, power_w=FIG) for n, h in LAB.items()}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    by_after = run_module("gear_record", _args(tmp_path / "a", plan, after, actions), check=True)
    args = _args(tmp_path / "b", plan, None, actions, observed=seen, replicas=3, gmin=1)
    del args["after"]
    res = run_module("gear_record", args)
    assert res.get("failed") is not True, res
    assert res["result"] == by_after["result"] == "ok"
    # (shift_down's after is fabricated with expected "asleep"; here there is no state file: expected on)
    for key in ("state", "target", "action", "group"):
        assert ({n: h[key] for n, h in res["record"]["hosts"].items()}
                == {n: h[key] for n, h in by_after["record"]["hosts"].items()}), key
    assert res["record"]["hosts"]["lab2"]["state"] == "asleep" and res["record"]["hosts"]["lab1"]["state"] == "on"
    # A host the plan put down that still answers: the shift failed, named.
    seen["lab2"]["ssh"] = True
    again = run_module("gear_record", args, check=True)
    assert again["result"] == "failed" and "lab2" in again["reason"]


def test_after_a_shift_that_only_woke_hosts_the_first_observation_and_the_wakes_decide(tmp_path):
    """1 -> 3 without a second observation: the hosts the wave woke (ok) count as answering, a
    failed wake stays silent and fails the shift, and a shift that put hosts down needs the
    observation from after it."""
    parked = {"lab2": "asleep", "lab3": "asleep", "lab5": "asleep", "lab6": "asleep"}
    plan = plan_of(parked, 3, [1, 2, 3], dict(parked))
    assert sorted(plan["up_hosts"]) == sorted(parked) and not plan["down_hosts"]
    before = {n: dict(h, ssh=n not in parked, bmc="on", down_method="suspend", up_methods=["wol"],
                      bmc_configured=True, power_w=FIG) for n, h in LAB.items()}
    woke = [{"host": n, "action": "up", "ok": True, "method": "wol", "msg": "woke by wol"} for n in sorted(parked)]
    args = _args(tmp_path, plan, None, woke, observed=before, observed_before=True, replicas=3, gmin=1)
    del args["after"]
    res = run_module("gear_record", args, check=True)
    assert res.get("failed") is not True and res["result"] == "ok", res
    assert all(h["state"] == "on" for h in res["record"]["hosts"].values())
    assert all(not before[n]["ssh"] for n in parked)            # the caller's observation is not changed
    # the same observation without observed_before: the woken hosts are where they were seen (silent)
    res = run_module("gear_record", dict(args, observed_before=False), check=True)
    assert all(res["record"]["hosts"][n]["state"] != "on" for n in parked)
    # one wake failed: it stays silent, the shift failed, named
    woke[0] = dict(woke[0], ok=False, msg="did not come back")
    res = run_module("gear_record", dict(args, actions=woke), check=True)
    assert res["result"] == "failed" and "lab2: did not come back" in res["reason"]
    # the same with the woken hosts' states the state file's word (gear_observe bmc_read=needed:
    # their BMCs not asked): the woken ones are on, the one whose wake failed is no longer asleep
    # by that word but unknown
    said = dict((n, dict(h, bmc=None, bmc_read=False, parked_as="asleep") if n in parked else h)
                for n, h in before.items())
    saw = gr.as_the_waves_saw(said, woke)
    assert saw["lab2"]["ssh"] is False and "parked_as" not in saw["lab2"]
    assert all(saw[n]["ssh"] is True and saw[n]["parked_as"] == "asleep" for n in sorted(parked)[1:])
    res = run_module("gear_record", dict(args, actions=woke, observed=said), check=True)
    assert res["result"] == "failed" and res["record"]["hosts"]["lab2"]["state"] == "unknown"
    # without the observation it refers to: refused, nothing written
    res = run_module("gear_record", dict(args, observed=None))
    assert res.get("failed") and "option observed_before: only with observed" in res["msg"]
    assert not (tmp_path / "gear" / "state.json").exists()


def test_after_a_down_shift_every_verified_park_is_taken_as_the_wave_saw_it(tmp_path):
    """3 -> 1 without a second observation: a host parked asleep is silent with its chassis on, one
    powered off silent with its chassis off, the draw each had before is not given to its new
    state; a park that failed stays as observed (answering) and fails the shift."""
    plan, _after, _actions = shift_down()
    down = sorted(plan["down_hosts"])
    before = {n: dict(h, ssh=True, bmc="on", down_method="suspend", up_methods=["wol"], bmc_configured=True,
                      power_w=FIG, power_watts=120.0, power_source="dcmi") for n, h in LAB.items()}
    actions = [{"host": n, "action": "down", "ok": True, "method": "suspend" if i else "off",
                "state": "asleep" if i else "off", "msg": "silent"} for i, n in enumerate(down)]
    args = _args(tmp_path, plan, None, actions, observed=before, observed_before=True, replicas=3, gmin=1)
    del args["after"]
    res = run_module("gear_record", args, check=True)
    assert res.get("failed") is not True and res["result"] == "ok", res
    hosts = res["record"]["hosts"]
    assert hosts[down[0]]["state"] == "off" and all(hosts[n]["state"] == "asleep" for n in down[1:])
    assert all(hosts[n]["state"] == "on" for n in LAB if n not in down)
    assert gr.readings_of(gr.as_the_waves_saw(before, actions)) == dict(
        ((n, "on"), (120.0, "dcmi")) for n in LAB if n not in down)       # no parked state given an on draw
    assert all(before[n]["ssh"] and before[n]["power_watts"] == 120.0 for n in down)   # the caller's unchanged
    # a host without a BMC read stays without one (a second observation would not know its chassis either)
    no_bmc = gr.as_the_waves_saw(dict(before, **{down[1]: dict(before[down[1]], bmc=None)}), actions)
    assert no_bmc[down[1]]["ssh"] is False and no_bmc[down[1]]["bmc"] is None
    # one park failed: it is as observed (answering), the shift failed and names it
    actions[1] = dict(actions[1], ok=False, state="on", msg="cannot suspend: masked")
    res = run_module("gear_record", dict(args, actions=actions), check=True)
    assert res["result"] == "failed" and "%s: cannot suspend: masked" % down[1] in res["reason"]
    assert res["record"]["hosts"][down[1]]["state"] == "on"


def test_the_record_releases_the_lock_its_playbook_owns_and_no_other(tmp_path):
    """Through ansible-playbook (the lock's owner is the playbook's main process): shift_lock takes
    it, gear_record writes the record and releases it; a lock held by another live process stays
    (a warning, lock_released false) and the record is still written."""
    import os
    import subprocess
    from conftest import REPO, VENV_BIN
    plan, after, actions = shift_down()
    gear = tmp_path / "gear"
    gear.mkdir()
    lock = gear / "shift.lock"
    args = dict(_args(tmp_path, plan, after, actions), lock_file=str(lock))
    (tmp_path / "args.json").write_text(json.dumps(args))
    play = tmp_path / "record.yml"
    play.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - shift_lock: {path: %s}\n"
        "      when: take | bool\n"
        "    - gear_record: \"{{ lookup('file', '%s') | from_json }}\"\n"
        "      register: rec\n"
        "    - ansible.builtin.copy: {content: \"{{ rec | to_json }}\", dest: %s}\n"
        % (lock, tmp_path / "args.json", tmp_path / "out.json"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-e",
           "ansible_python_interpreter=/usr/bin/python3", str(play)]
    proc = subprocess.run(cmd + ["-e", "take=true"], capture_output=True, text=True, env=env, cwd=str(REPO),
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["lock_released"] is True and not lock.exists()
    assert json.loads((gear / "state.json").read_text())["gear"] == 1
    # Another live process holds it: kept, said, and the record written all the same.
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lock.write_text(json.dumps({"pid": holder.pid, "start_time": _start_time(holder.pid), "cmdline": ["sleep"]}))
        (gear / "state.json").unlink()
        proc = subprocess.run(cmd + ["-e", "take=false"], capture_output=True, text=True, env=env, cwd=str(REPO),
                              timeout=120)
        assert proc.returncode == 0, proc.stdout[-3000:]
        out = json.loads((tmp_path / "out.json").read_text())
        assert out["lock_released"] is False and lock.exists()
        assert any("belongs to another live process" in w for w in out.get("warnings", [])), out.get("warnings")
        assert (gear / "state.json").exists()
    finally:
        holder.kill()
        holder.wait()


def test_the_record_ends_the_lease_of_the_shift_it_recorded(tmp_path):
    """A lease (a shift spanning jobs: an AWX workflow's record job ends its plan job's lock), in a
    process that is not the one that took it: the record reads that shift's journal and releases
    the lease; a process lock of another live process beside it would stay (the test above)."""
    import time
    plan, after, actions = shift_down()
    lock = tmp_path / "gear" / "shift.lock"
    lock.parent.mkdir()
    lock.write_text(json.dumps({"token": "wf-1", "since": "2026-11-29T10:00:00Z", "expires": int(time.time()) + 600}))
    res = run_module("gear_record", dict(_args(tmp_path, plan, after, actions), lock_file=str(lock)))
    assert not res.failed and res["lock_released"] is True and not lock.exists(), res


def _start_time(pid):
    with open("/proc/%d/stat" % pid) as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


def test_measured_watts_are_kept_per_state_and_replace_the_inventory_figures(tmp_path):
    """The BMC's readings (gear_observe read_power) are kept per host and state (the last five,
    their median), the energy uses them instead of the inventory's figures, and the page, the
    result and the metrics say which figure came from where (issue 34)."""
    plan, _after, actions = shift_down()
    down = set(plan["down_hosts"])
    after = {n: dict(h, ssh=n not in down, bmc="on", down_method="suspend", up_methods=["wol"],
                     bmc_configured=True, power_w=FIG,
                     power_watts=4.0 if n in down else None, power_source="dcmi" if n in down else None,
                     power_note="") for n, h in LAB.items()}
    before = {n: dict(h, ssh=True, bmc="on", down_method="suspend", up_methods=["wol"], bmc_configured=True,
                      power_w=FIG, power_watts=150.0 + i, power_source="EnvironmentMetrics", power_note="")
              for i, (n, h) in enumerate(sorted(LAB.items()))}
    args = _args(tmp_path, plan, None, actions, observed=after, first_observed=before, replicas=3, gmin=1,
                 measured_file=str(tmp_path / "gear" / "power_measured.json"))
    del args["after"]
    res = run_module("gear_record", args)
    assert res.get("failed") is not True, res
    kept = json.loads((tmp_path / "gear" / "power_measured.json").read_text())
    some_down, some_up = sorted(down)[0], sorted(set(LAB) - down)[0]
    # a host parked: read 'on' before the shift, 'asleep' after it; a host kept on: 'on' only
    assert set(kept[some_down]) == {"on", "asleep"} and kept[some_down]["asleep"]["readings"] == [4.0]
    assert kept[some_down]["asleep"]["source"] == "dcmi"
    assert set(kept[some_up]) == {"on"} and kept[some_up]["on"]["source"] == "EnvironmentMetrics"
    src = res["energy"]["figure_sources"]
    assert src[some_down] == {"on": "measured (EnvironmentMetrics, %s)" % kept[some_down]["on"]["date"][:10],
                              "asleep": "measured (dcmi, %s)" % kept[some_down]["asleep"]["date"][:10],
                              "off": "inventory"}
    assert src[some_up]["asleep"] == "inventory"
    assert str(tmp_path / "gear" / "power_measured.json") in res["written"]
    text = _valid_gear_metrics(tmp_path / "gear" / "metrics" / "fleetnap_gear.prom")
    assert 'fleetnap_gear_power_figure_watts{host="%s",source="measured",state="asleep"} 4' % some_down in text
    assert 'fleetnap_gear_power_figure_watts{host="%s",source="inventory",state="asleep"} 5' % some_up in text
    # five more shifts: the last five readings kept, their median used
    for watts in (6.0, 8.0, 10.0, 12.0, 100.0):
        for n in down:
            after[n]["power_watts"] = watts
        assert run_module("gear_record", args).get("failed") is not True
    kept = json.loads((tmp_path / "gear" / "power_measured.json").read_text())
    assert kept[some_down]["asleep"]["readings"] == [6.0, 8.0, 10.0, 12.0, 100.0]
    assert kept[some_down]["asleep"]["watts"] == 10.0
    # a measured file that is not one is refused before anything is written
    (tmp_path / "gear" / "power_measured.json").write_text('{"lab1": {"on": {"watts": 1}}}')
    bad = run_module("gear_record", args)
    assert bad.get("failed") and "measured power file" in bad["msg"] and "lab1.on" in bad["msg"]


def test_without_actions_the_record_reads_its_shifts_journal(tmp_path):
    """actions omitted: the actions the shift's batches wrote into the state file's journal (the
    shift holding lock_file), not another shift's; a failure there fails the shift."""
    plan, after, actions = shift_down()
    gear = tmp_path / "gear"
    gear.mkdir()
    lock = gear / "shift.lock"
    lock.write_text(json.dumps({"pid": 4242, "start_time": 777, "since": "2026-11-27T10:00:00Z", "cmdline": ["x"]}))
    failed = dict(actions[0], ok=False, msg="cannot suspend: suspend.target is masked")
    journal = {"hosts": {}, "in_progress": {"shift": "4242/777/2026-11-27T10:00:00Z", "actions": [failed] + actions[1:]}}
    (gear / "state.json").write_text(json.dumps(journal))
    args = _args(tmp_path, plan, after, [], lock_file=str(lock))
    del args["actions"]
    res = run_module("gear_record", args, check=True)
    assert res["result"] == "failed" and res["reason"].startswith("%s: cannot suspend" % failed["host"]), res
    # another shift's journal (this one holds the lock now) is not this shift's actions
    lock.write_text(json.dumps({"pid": 4343, "start_time": 777, "since": "2026-11-27T11:00:00Z", "cmdline": ["x"]}))
    res = run_module("gear_record", args, check=True)
    assert res["result"] == "ok", res


def test_a_shift_that_resumed_a_killed_one_records_both_runs_the_later_winning(tmp_path):
    """The killed run parked two hosts (one with the resume hook) and failed a third; the run that
    resumed it (gear_shift_plan's journal) parked the third: the record has every park, the later
    run's for the third, the hook's mark from the killed run, and names the killed run."""
    plan, after, actions = shift_down()
    first, second, third = actions[:3]
    gear = tmp_path / "gear"
    gear.mkdir()
    lock = gear / "shift.lock"
    lock.write_text(json.dumps({"pid": 4343, "start_time": 778, "since": "2026-11-27T11:00:00Z", "cmdline": ["x"]}))
    killed = {"shift": "4242/777/2026-11-27T10:00:00Z", "since": "t0", "plan": {"gear": 1},
              "actions": [dict(first, resume_hook=True), second, dict(third, ok=False, msg="timeout")],
              "failed": [{"host": third["host"], "action": "down", "msg": "timeout"}]}
    from ansible.module_utils.fleetnap import journal as jr
    doc = {"hosts": {}, "in_progress": killed}
    jr.begin(doc, "4343/778/2026-11-27T11:00:00Z", plan, "t1")
    jr.note_batch(doc, "4343/778/2026-11-27T11:00:00Z", [third] + actions[3:], "t2")
    (gear / "state.json").write_text(json.dumps(doc))
    args = _args(tmp_path, plan, after, [], lock_file=str(lock))
    del args["actions"]
    res = run_module("gear_record", args)
    rec = res["record"]
    assert res["result"] == "ok", res
    assert [(a["host"], a["ok"]) for a in rec["actions"]] == [(a["host"], True) for a in [first, second] + [third]
                                                               + actions[3:]]
    assert rec["hosts"][first["host"]].get("resume_hook") is True and "resume_hook" not in rec["hosts"][second["host"]]
    assert rec["resumed"] == {"shift": killed["shift"], "since": "t0", "actions": 3, "failed": killed["failed"]}
    line = json.loads((gear / "history.jsonl").read_text().splitlines()[-1])
    assert line["resumed"] == rec["resumed"]
    assert "in_progress" not in json.loads((gear / "state.json").read_text())


def test_a_failure_in_the_journal_asks_for_a_second_look_before_anything_is_written(tmp_path):
    """observe_again_on_failure with observed_before: the shift's journal holds a failed park, so the
    record writes nothing, keeps the lock and answers observe_again; the same call without the
    failure records at once (one call, no query before it); another shift's failure is not this
    one's. Without lock_file the option is refused."""
    plan, _after, actions = shift_down()
    gear = tmp_path / "gear"
    gear.mkdir()
    lock = gear / "shift.lock"
    lock.write_text(json.dumps({"pid": 4242, "start_time": 777, "since": "2026-11-27T10:00:00Z", "cmdline": ["x"]}))
    shift = "4242/777/2026-11-27T10:00:00Z"
    failed = dict(actions[0], ok=False, state="on", msg="cannot suspend: suspend.target is masked")
    from ansible.module_utils.fleetnap import journal as jr
    doc = {"hosts": {}}
    jr.note_batch(doc, shift, [failed] + actions[1:], "t1")
    state = gear / "state.json"
    state.write_text(json.dumps(doc))
    before = {n: dict(h, ssh=True, bmc="on", down_method="suspend", up_methods=["wol"], bmc_configured=True)
              for n, h in LAB.items()}
    args = dict(_args(tmp_path, plan, None, [], lock_file=str(lock), observed=before, observed_before=True,
                      observe_again_on_failure=True, replicas=3, gmin=1))
    del args["after"], args["actions"]
    text = state.read_text()
    res = run_module("gear_record", args)
    assert res.get("failed") is not True and res["observe_again"] is True, res
    assert "%s: down failed (cannot suspend" % failed["host"] in res["reason"] and res["written"] == []
    assert res["lock_released"] is False and lock.exists()
    assert state.read_text() == text and not (gear / "history.jsonl").exists()
    # another shift holds the lock: that failure is not its own, it records at once
    lock.write_text(json.dumps({"pid": 4343, "start_time": 777, "since": "2026-11-27T11:00:00Z", "cmdline": ["x"]}))
    parked = [dict(a, state="asleep") for a in actions]
    jr.note_batch(doc, "4343/777/2026-11-27T11:00:00Z", parked, "t2")
    state.write_text(json.dumps(doc))
    res = run_module("gear_record", args, check=True)
    assert res["observe_again"] is False and res["result"] == "ok", res
    refused = run_module("gear_record", dict((k, v) for k, v in args.items() if k != "lock_file"))
    assert refused.get("failed") and "observe_again_on_failure is True but all of the following are missing: lock_file" \
        in refused["msg"]
