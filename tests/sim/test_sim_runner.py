"""apply_profile.yml and gear_shift.yml under ansible-runner, the engine AWX and its execution
nodes run playbooks with (issue 17: when one controller is not enough, a shift is laid out as an
AWX workflow; packaging/README.md "Beyond one controller"). Against a simulated fleet with power: the jobs
succeed, and the runner's job events (what AWX shows and stores) have every host's result."""

from __future__ import annotations

import json
import os

import pytest

from simtools import REPO, Sim, VENV_BIN, running_sim

pytestmark = pytest.mark.sim

ansible_runner = pytest.importorskip("ansible_runner")

NAME, SUBNET, HOSTS = "simr", "10.252.3.0/24", 6


@pytest.fixture(scope="module")
def rsim(tmp_path_factory):
    yield from running_sim(tmp_path_factory, NAME, SUBNET, HOSTS, SIM_RESUME="uniform:0.2:1", SIM_BOOT="1")


def run(rsim: Sim, tmp_path, playbook: str, ident: str, **extravars):
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(rsim.state / "cp"),
           "PATH": "%s:%s" % (VENV_BIN, os.environ["PATH"])}
    (tmp_path / "runner").mkdir(exist_ok=True)
    r = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), project_dir=str(REPO), ident=ident,
                           playbook="playbooks/%s" % playbook, inventory=str(rsim.inventory / "hosts.yml"),
                           envvars=env, extravars=extravars, quiet=True, timeout=600)
    events = list(r.events)
    return r, events


def host_results(events, task_prefix):
    """host -> event name of the task whose name starts with task_prefix."""
    return {e["event_data"]["host"]: e["event"] for e in events
            if e["event"].startswith("runner_on_") and e["event_data"].get("task", "").startswith(task_prefix)}


def test_apply_profile_under_ansible_runner(rsim, tmp_path):
    r, events = run(rsim, tmp_path, "apply_profile.yml", "profile")
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    hosts = set(rsim.hosts())
    assert set(r.stats["ok"]) == hosts and not r.stats["failures"] and not r.stats["dark"]
    assert any(e["event"] == "playbook_on_stats" for e in events)
    ran = {e["event_data"]["host"] for e in events if e["event"] == "runner_on_ok"}
    assert hosts <= ran
    # the job's artifacts are where AWX collects them: events, stdout, rc, status
    art = tmp_path / "runner" / "artifacts" / "profile"
    assert (art / "rc").read_text() == "0" and (art / "status").read_text() == "successful"
    assert len(list((art / "job_events").glob("*.json"))) == len(events)


def test_gear_shift_down_and_up_under_ansible_runner(rsim, tmp_path):
    gear = tmp_path / "gear"
    # The job template's extra var `gear` (gear_shift.yml's short alias of gear_shift_gear), as an integer.
    r, events = run(rsim, tmp_path, "gear_shift.yml", "down", gear=1, gear_shift_state_dir=str(gear))
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    st = json.loads((gear / "state.json").read_text())
    assert st["result"] == "ok" and st["gear"] == 1
    parked = [a["host"] for a in st["actions"] if a["action"] == "down"]
    assert len(parked) == 4 and all(a["ok"] for a in st["actions"])
    # the one controller-side call per wave shows in the events as one task on localhost
    waves = [e for e in events if e["event"] == "runner_on_ok" and e["event_data"].get("task", "").startswith("Park the batch")]
    assert len(waves) == 1
    r, events = run(rsim, tmp_path, "gear_shift.yml", "up", gear=3, gear_shift_state_dir=str(gear))
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    st = json.loads((gear / "state.json").read_text())
    assert st["result"] == "ok" and st["gear"] == 3
    assert sorted(a["host"] for a in st["actions"]) == sorted(parked) and all(a["ok"] for a in st["actions"])
    assert all(r["power"] == "on" and r["ssh"] for r in rsim.status().values())


# --- A shift as an AWX workflow (issue 35): plan job, three slices, record job ----------------------


def artifacts(events) -> dict:
    """What the job published with set_stats, as AWX reads it: the stats event's artifact_data."""
    stats = [e for e in events if e["event"] == "playbook_on_stats"]
    assert stats, "no playbook_on_stats event"
    return stats[-1]["event_data"].get("artifact_data") or {}


def run_job(rsim: Sim, base, playbook: str, ident: str, limit=None, **extravars):
    """One job as an execution node runs it: a private data directory of its own."""
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(rsim.state / "cp"),
           "PATH": "%s:%s" % (VENV_BIN, os.environ["PATH"])}
    private = base / ident
    private.mkdir(parents=True)
    return ansible_runner.run_async(private_data_dir=str(private), project_dir=str(REPO), ident=ident,
                                    playbook="playbooks/%s" % playbook, inventory=str(rsim.inventory / "hosts.yml"),
                                    envvars=env, extravars=extravars, limit=limit, quiet=True, timeout=600)


def finished(started):
    thread, r = started
    thread.join(timeout=700)
    assert not thread.is_alive()
    return r, list(r.events)


def workflow_shift(rsim, base, gear, state_dir, slices, tag):
    """The three stages as AWX runs them: the plan job; the slices in parallel (each its own private
    directory and state directory, as execution nodes that share no disk; each given the plan job's
    artifacts as extra variables; one of them on the plan job's node); the record job given the plan's
    and every slice's artifacts,
    merged shallowly as AWX merges a node's parents'. Returns the record job's runner and the slices'."""
    r, events = finished(run_job(rsim, base, "gear_shift_workflow_plan.yml", "%s-plan" % tag, gear=gear,
                                 gear_shift_state_dir=str(state_dir)))
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    plan_art = artifacts(events)
    assert set(plan_art) == {"gear_shift_journal"}
    # slice 0 on the plan job's node (its state directory: the slice keeps its own files apart in it),
    # the others on nodes of their own
    jobs = [run_job(rsim, base, "gear_shift_workflow_slice.yml", "%s-slice%d" % (tag, i), limit=",".join(hosts),
                    gear_shift_slice="row%d" % i,
                    gear_shift_state_dir=str(state_dir if i == 0 else base / ("%s-node%d" % (tag, i))), **plan_art)
            for i, hosts in enumerate(slices)]
    merged, slice_runs = dict(plan_art), []
    for job in jobs:
        sr, sevents = finished(job)
        slice_runs.append((sr, sevents))
        merged.update(artifacts(sevents))
    r, events = finished(run_job(rsim, base, "gear_shift_workflow_record.yml", "%s-record" % tag,
                                 gear_shift_state_dir=str(state_dir), **merged))
    return r, slice_runs, merged


def outcome(state_dir):
    st = json.loads((state_dir / "state.json").read_text())
    return st["result"], st["gear"], sorted((a["host"], a["action"], a["ok"]) for a in st["actions"])


def test_a_shift_as_an_awx_workflow_equals_a_one_controller_shift(rsim, tmp_path):
    hosts = sorted(rsim.hosts())
    slices = [hosts[i::3] for i in range(3)]          # AWX job slicing's cut: disjoint, every host once
    gear = tmp_path / "gear"
    base = tmp_path / "jobs"
    # down 3 -> 1 as a workflow
    r, slice_runs, merged = workflow_shift(rsim, base, 1, gear, slices, "down")
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    assert all((sr.status, sr.rc) == ("successful", 0) for sr, _ in slice_runs)
    assert sorted(k for k in merged if k.startswith("gear_shift_slice_")) == ["gear_shift_slice_row%d" % i
                                                                            for i in range(3)]
    # each slice acted on its own hosts only, and no slice wrote the plan job's state directory
    suspended = set()
    for i, (sr, sevents) in enumerate(slice_runs):
        acted = {e["event_data"]["host"] for e in sevents if e["event"] == "runner_on_ok"
                 and e["event_data"].get("task", "").startswith("Check that the host can suspend")}
        assert acted <= set(slices[i])
        suspended |= acted
        published = merged["gear_shift_slice_row%d" % i]
        assert published["hosts"] == slices[i] and {a["host"] for a in published["actions"]} == acted
    workflow_down = outcome(gear)
    assert workflow_down[:2] == ("ok", 1)
    assert len(workflow_down[2]) == 4 and all(ok for _, action, ok in workflow_down[2] if action == "down")
    assert suspended == {host for host, _, _ in workflow_down[2]}    # every park was a slice's
    assert not (gear / "shift.lock").exists()        # the record job ended the plan job's lease
    history = [json.loads(line) for line in (gear / "history.jsonl").read_text().splitlines()]
    assert history[-1]["gear"] == 1
    # the same shift from one controller, from the same start: the same record
    r, _ = run(rsim, tmp_path, "gear_shift.yml", "up1", gear=3, gear_shift_state_dir=str(gear))
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    one_up = outcome(gear)
    r, _ = run(rsim, tmp_path, "gear_shift.yml", "down1", gear=1, gear_shift_state_dir=str(gear))
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    assert outcome(gear) == workflow_down
    # and back up as a workflow: the one-controller up-shift's record
    r, slice_runs, _ = workflow_shift(rsim, base, 3, gear, slices, "up")
    assert (r.status, r.rc) == ("successful", 0), r.stdout.read()[-3000:]
    assert all((sr.status, sr.rc) == ("successful", 0) for sr, _ in slice_runs), \
        [sr.stdout.read()[-2000:] for sr, _ in slice_runs if sr.rc]
    assert outcome(gear) == one_up
    assert all(s["power"] == "on" and s["ssh"] for s in rsim.status().values())


def test_a_slice_refuses_a_journal_that_is_not_the_plan_jobs(rsim, tmp_path):
    """An extra variable can hold anything: a slice given a forged journal changes nothing."""
    hosts = sorted(rsim.hosts())
    r, events = finished(run_job(rsim, tmp_path, "gear_shift_workflow_slice.yml", "forged", limit=hosts[0],
                                 gear_shift_state_dir=str(tmp_path / "node"),
                                 gear_shift_journal={"version": 1, "token": "x", "started": "now",
                                                     "started_epoch": 1.0, "plan": {"gear": 1}, "observation": {}}))
    assert r.rc != 0
    out = r.stdout.read()
    assert "not a plan gear_shift_plan returned" in out and "nothing was changed" in out
    assert all(s["power"] == "on" and s["ssh"] for s in rsim.status().values())
