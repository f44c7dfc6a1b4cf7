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
