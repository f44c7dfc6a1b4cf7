"""The gear_shift role's contract, without a fleet: every phase's argument spec entry point refuses a
wrong input before the phase does anything; the thin playbook checks every input of the shift in
its first play, before the lock is taken or any host is looked at; gear_shift_power_ok false shows
the plan and does nothing; the role without a phase is a whole shift.

The hosts here answer nothing (a bound, never listening port): the observation sees them silent,
which is all a plan needs. The shifts on hosts with power are in tests/sim and tests/lab.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, TARGET_PYTHON, VENV_BIN

SPEC = yaml.safe_load((REPO / "roles/gear_shift/meta/argument_specs.yml").read_text())["argument_specs"]
PHASES = ["lock", "observe", "plan", "wake_waves", "wake", "down", "observe_again", "record"]
PLAYS = ["prepare", "wake", "down", "finish"]          # playbooks/gear_shift.yml: prepare = lock + observe + plan
# the AWX workflow's jobs (playbooks/gear_shift_workflow_*.yml) and the two inputs only they read
WORKFLOW = ["workflow_plan", "workflow_slice", "workflow_slice_finish", "workflow_record"]
WORKFLOW_ONLY = {"gear_shift_journal", "gear_shift_slice"}


# The tasks that wake hosts: the wake play's wave, and the waves from the controller (wake_waves).
WAVES = ("Wake the batch at once", "Wake the plan's waves from the controller")


def woke(out):
    """Whether a wave task ran (not only skipped) in this output."""
    return any(ran(out, w) for w in WAVES)


def run(args, tmp_path, timeout=300):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), *map(str, args),
                           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)


def ran(out, task):
    """Whether a task whose name has ``task`` in it ran on some host (not only skipped) in this output."""
    blocks = out.split("\nTASK [")[1:]
    return any(task in b.split("]", 1)[0] and any(line.startswith(("ok:", "changed:", "failed:", "fatal:"))
                                                for line in b.splitlines()) for b in blocks)


@pytest.fixture
def silent_fleet(tmp_path):
    """Three hosts, one per gear group, whose SSH port answers nothing."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {"hosts": {
        "h%d" % i: {"ansible_host": "127.0.0.1", "ansible_port": port, "fleetnap_gear_group": i,
                    "fleetnap_rack": "r%d" % i} for i in (1, 2, 3)}}}))
    yield inv
    closed.close()


def test_every_phase_has_an_entry_point_and_the_lock_checks_them_all():
    assert set(SPEC) == {"main", *PHASES, *PLAYS, *WORKFLOW}
    assert all((REPO / "roles/gear_shift/tasks" / ("%s.yml" % p)).is_file() for p in PHASES + PLAYS + WORKFLOW)
    every = set(SPEC["main"]["options"])
    assert set(SPEC["lock"]["options"]) == set(SPEC["prepare"]["options"]) == set(SPEC["workflow_plan"]["options"]) \
        == every
    for entry in WORKFLOW:
        opts = SPEC[entry]["options"]
        assert opts and set(opts) <= every | WORKFLOW_ONLY, entry
        assert all(o.get("description") and o.get("type") for o in opts.values()), entry
    assert SPEC["workflow_slice"]["options"]["gear_shift_journal"]["required"] is True
    assert set(SPEC["finish"]["options"]) == set(SPEC["observe_again"]["options"]) | set(SPEC["record"]["options"])
    read = set()
    for phase in PHASES + PLAYS:
        opts = SPEC[phase]["options"]
        assert opts and set(opts) <= every, phase
        assert all(o.get("description") and o.get("type") for o in opts.values()), phase
        read |= set(opts)
    defaults = yaml.safe_load((REPO / "roles/gear_shift/defaults/main.yml").read_text())
    # the contract and the defaults name the same inputs (the plan job's journal has no default)
    assert set(defaults) == every | WORKFLOW_ONLY - {"gear_shift_journal"}
    assert read == every                   # every input is read by some phase


def phase_play(tmp_path, phase, bad):
    play = tmp_path / ("%s.yml" % phase)
    play.write_text(yaml.safe_dump([{
        "name": "call %s" % phase, "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": dict(bad, gear_shift_state_dir=str(tmp_path / "gear")),
        "tasks": [{"name": "the phase", "ansible.builtin.import_role": {"name": "gear_shift", "tasks_from": phase}}],
    }]))
    return play


# One input each phase reads, given a wrong type or a value outside its choices.
BAD = {
    "lock": ({"gear_shift_gear": "two"}, "argument 'gear_shift_gear' is of type str and we were unable to convert to int"),
    "prepare": ({"gear_shift_down_timeout_s": "soon"},
                "argument 'gear_shift_down_timeout_s' is of type str and we were unable to convert to float"),
    "finish": ({"gear_shift_read_power": "maybe"},
               "argument 'gear_shift_read_power' is of type str and we were unable to convert to bool"),
    "observe": ({"gear_shift_probe_timeout_s": "soon"},
                "argument 'gear_shift_probe_timeout_s' is of type str and we were unable to convert to float"),
    "plan": ({"gear_shift_replicas": "three"},
             "argument 'gear_shift_replicas' is of type str and we were unable to convert to int"),
    "wake_waves": ({"gear_shift_wol_resend_s": "often"},
                   "argument 'gear_shift_wol_resend_s' is of type str and we were unable to convert to float"),
    "wake": ({"gear_shift_ipmi_cycle_parked": "sometimes"},
             "argument 'gear_shift_ipmi_cycle_parked' is of type str and we were unable to convert to bool"),
    "down": ({"gear_shift_suspend_mode": "s3"}, "value of gear_shift_suspend_mode must be one of: deep, any, got: s3"),
    "observe_again": ({"gear_shift_bmc_read_concurrency": [4]},
                      "argument 'gear_shift_bmc_read_concurrency' is of type list and we were unable to convert to int"),
    "record": ({"gear_shift_gmin": "one"}, "argument 'gear_shift_gmin' is of type str and we were unable to convert to int"),
}


@pytest.mark.parametrize("phase", PHASES + ["prepare", "finish"])
def test_a_play_calling_a_phase_with_a_wrong_input_fails_at_its_argument_spec(tmp_path, phase):
    bad, message = BAD[phase]
    assert set(bad) <= set(SPEC[phase]["options"])
    proc = run(["-i", "localhost,", phase_play(tmp_path, phase, bad)], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Validating arguments against arg spec '%s'" % phase in out, out[-3000:]
    assert "Validation of arguments failed" in out and message in out, out[-3000:]
    # Nothing of the phase ran: the validation was the only task, and nothing was written.
    tasks = [line for line in out.splitlines() if line.startswith("TASK [")]
    assert len(tasks) == 1 and "Validating arguments" in tasks[0], tasks
    assert not (tmp_path / "gear").exists()


def test_the_playbook_checks_every_input_before_the_lock_and_before_any_host(tmp_path, silent_fleet):
    """A wrong type of an input only the down phase reads stops the shift in its first play."""
    sd = tmp_path / "gear"
    proc = run(["-i", silent_fleet, REPO / "playbooks/gear_shift.yml", "-e", "gear_shift_gear=1",
                "-e", "gear_shift_state_dir=%s" % sd, "-e", "gear_shift_down_timeout_s=soon",
                "-e", "gear_shift_down_method=sleep"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Validating arguments against arg spec 'prepare'" in out
    assert "argument 'gear_shift_down_timeout_s' is of type str and we were unable to convert to float" in out
    assert "value of gear_shift_down_method must be one of: auto, suspend, soft, off, got: sleep" in out
    assert "Observe every host at once" not in out and "Take the gear-shift lock" not in out
    # the check ran once (on the controller), not once per target
    assert len([line for line in out.splitlines() if line.startswith("fatal: [")]) == 1, out[-3000:]
    assert not sd.exists()


def test_without_power_ok_the_plan_is_shown_and_nothing_is_done(tmp_path, silent_fleet):
    """Two hosts the state file has parked would be woken for gear 3: the plan says so, the lock is
    released, the state file is untouched and no wave ran."""
    sd = tmp_path / "gear"
    sd.mkdir()
    state = {"hosts": {"h2": {"state": "asleep", "since": "2026-11-25T01:00:00Z"},
                       "h3": {"state": "off", "since": "2026-11-25T01:00:00Z"}, "h1": {"state": "on"}}}
    (sd / "state.json").write_text(json.dumps(state))
    proc = run(["-i", silent_fleet, REPO / "playbooks/gear_shift.yml", "-e", "gear=3",
                "-e", "gear_shift_state_dir=%s" % sd, "-e", "gear_shift_probe_timeout_s=1",
                "-e", "gear_shift_power_ok=false"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Gear shift plan (gear_shift_power_ok is false: nothing will change)" in out
    assert "up 2, down 0" in out
    assert "gear_shift_power_ok is false: nothing was powered down or up (2 to wake, 0 to put down)" in out
    assert ran(out, "Print the plan") and not woke(out) and not ran(out, "Record the shift")
    assert json.loads((sd / "state.json").read_text()) == state
    assert not (sd / "shift.lock").exists() and not (sd / "history.jsonl").exists()


def test_phases_composed_after_a_whole_shift_run_every_step(tmp_path, silent_fleet):
    """A run whose earlier shift the prepare call made whole (its flag set, as molecule's second
    shift finds it), then the lock, observe and plan phases one by one: the lock resets the flag,
    so the steps after the plan run (here gear_shift_power_ok false: the lock released, nothing done)."""
    sd = tmp_path / "gear"
    sd.mkdir()
    state = {"hosts": {"h2": {"state": "asleep", "since": "2026-11-25T01:00:00Z"},
                       "h3": {"state": "off", "since": "2026-11-25T01:00:00Z"}, "h1": {"state": "on"}}}
    (sd / "state.json").write_text(json.dumps(state))
    phases = [{"name": "An earlier shift that the prepare call made whole",
               "ansible.builtin.set_fact": {"__gear_shift_went_on": True}},
              {"name": "The phases one by one, once, on the controller", "run_once": True, "delegate_to": "localhost",
               "block": [{"name": "Phase %s" % phase,
                          "ansible.builtin.include_role": {"name": "gear_shift", "tasks_from": phase}}
                         for phase in ("lock", "observe", "plan")]}]
    play = tmp_path / "composed.yml"
    play.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": phases, "vars": {
        "gear_shift_gear": 3, "gear_shift_state_dir": str(sd), "gear_shift_probe_timeout_s": 1,
        "gear_shift_power_ok": False}}]))
    proc = run(["-i", silent_fleet, play], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "gear_shift_power_ok is false: nothing was powered down or up (2 to wake, 0 to put down)" in out, out[-3000:]
    assert ran(out, "Release the lock (nothing will be done)") and not woke(out)
    assert not (sd / "shift.lock").exists() and json.loads((sd / "state.json").read_text()) == state


def test_the_role_without_a_phase_is_a_whole_shift(tmp_path, silent_fleet):
    """include_role: gear_shift in a play over the targets: the whole shift's input check (once),
    the plan, and with gear_shift_power_ok false nothing else (the shifts with power: tests/lab)."""
    sd = tmp_path / "gear"
    play = tmp_path / "main.yml"
    play.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "A whole shift", "ansible.builtin.include_role": {"name": "gear_shift"},
         "vars": {"gear_shift_gear": 1, "gear_shift_state_dir": str(sd), "gear_shift_probe_timeout_s": 1}}]}]))
    proc = run(["-i", silent_fleet, play], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Gear shift plan (gear_shift_power_ok is false: nothing will change)" in out
    assert ran(out, "Print the plan") and not woke(out) and not ran(out, "Record the shift")
    assert not (sd / "shift.lock").exists() and not (sd / "history.jsonl").exists()
    bad = tmp_path / "bad.yml"
    bad.write_text(play.read_text().replace("gear_shift_probe_timeout_s: 1", "gear_shift_probe_timeout_s: soon")
                   .replace(str(sd), str(tmp_path / "gear2")))
    proc = run(["-i", silent_fleet, bad], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Validating arguments against arg spec 'main'" in out, out[-3000:]
    assert "gear_shift_probe_timeout_s" in out and not (tmp_path / "gear2").exists()


def test_the_thin_playbook_is_four_plays_calling_the_phases_in_order():
    """playbooks/gear_shift.yml: prepare, wake, down, finish, each a single import of the role's
    phase. prepare and finish run over the targets with every task once on the controller (a
    block with run_once, delegated to localhost, around prepare: its argument check, the whole
    shift's, runs once too); only prepare validates (on the hosts that act a validation would be
    one more task per host)."""
    plays = yaml.safe_load((REPO / "playbooks/gear_shift.yml").read_text())
    phases, hosts, serial = [], {}, {}
    for play in plays:
        (task,) = play["tasks"]
        calls = [task]
        if "block" in task:
            assert task["run_once"] is True and task["delegate_to"] == "localhost"
            calls = task["block"]
        for i, call in enumerate(c["ansible.builtin.import_role"] for c in calls):
            assert call["name"] == "gear_shift"
            phase = call["tasks_from"]
            if i:                           # the wake from the controller, in prepare's play
                assert (phases[-1], phase) == ("prepare", "wake_waves")
                assert call["rolespec_validate"] is False
                continue
            phases.append(phase)
            assert call.get("rolespec_validate", True) is (phase == "prepare")
            assert ("block" in play["tasks"][0]) is (phase == "prepare")
            hosts[phase], serial[phase] = play["hosts"], play.get("serial")
    assert phases == PLAYS
    # The plays that act run over the hosts the plan acts on (the groups its phase adds); prepare
    # and finish over every target, no play on localhost (what they learn is the targets' own).
    assert hosts["wake"] == "{{ groups['fleetnap_gear_shift_wake'] | default([]) }}"
    assert hosts["down"] == "{{ groups['fleetnap_gear_shift_down'] | default([]) }}"
    assert hosts["prepare"] == hosts["finish"] == "{{ gear_shift_targets | default('all') }}"
    assert serial["wake"] == "{{ gear_shift_wake_batch_size }}" and serial["down"] == "{{ gear_shift_batch_size }}"
    # prepare and finish: every task of theirs runs once, on the controller
    for phase in ("prepare", "finish"):
        (block,) = yaml.safe_load((REPO / ("roles/gear_shift/tasks/%s.yml" % phase)).read_text())
        assert block["run_once"] is True and block["delegate_to"] == "localhost"
    # no phase reads the controller's facts or sets them there
    for path in (REPO / "roles/gear_shift").rglob("*.yml"):
        text = path.read_text()
        assert "hostvars['localhost']" not in text and "delegate_facts" not in text, path


def test_a_misspelt_power_record_variable_stops_the_shift_naming_it(tmp_path, silent_fleet):
    """The power record is read once, by the observation's checks (gear_shift_prepare's, as
    gear_observe's): a fleetnap_bmc_* name it does not know stops the shift before the lock is
    taken, naming the variable, before any observation, plan or wave."""
    inv = json.loads(silent_fleet.read_text())
    inv["all"]["hosts"]["h2"]["fleetnap_bmc_pasword"] = "Fn7-typo-pw"
    silent_fleet.write_text(json.dumps(inv))
    sd = tmp_path / "gear"
    proc = run(["-i", silent_fleet, REPO / "playbooks/gear_shift.yml", "-e", "gear_shift_gear=2",
                "-e", "gear_shift_state_dir=%s" % sd, "-e", "gear_shift_probe_timeout_s=1"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "hosts.record.fleetnap_bmc_pasword" in out and "Fn7-typo-pw" not in out, out[-3000:]
    assert "Gear shift plan" not in out and not any(w in out for w in WAVES)
    assert "lock was released" not in out
    assert not (sd / "shift.lock").exists() and not (sd / "shift.lock.guard").exists()   # never taken
    assert not (sd / "state.json").exists()
