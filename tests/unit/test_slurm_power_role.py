"""The slurm_power role (issue 37) on this machine, into a temporary tree: it installs the program
under its three names with its settings; the programs, called as slurmctld calls them (one hostlist
argument, an environment of SLURM_CONF and SLURM_RESUME_FILE only, their output read to EOF),
return at once, log a line per node and leave the parking or waking to the runner, which runs a real
ansible-playbook and logs each node's outcome; a node it could not wake is told to Slurm (scontrol
is a stand-in here: the error path; the real slurmctld is the lab's test). Bad calls act on no node."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_slurmpower import PLAYBOOK   # the same stand-in for the park and wake playbook

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KNOWN = ["lab1", "lab2", "lab3"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="not root: the role sets owners")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm_power")
    (tmp / "act.yml").write_text(PLAYBOOK)
    (tmp / "hosts.yml").write_text("all:\n  hosts:\n" + "".join(
        "    %s: {ansible_connection: local, ansible_python_interpreter: %s}\n" % (n, sys.executable) for n in KNOWN))
    scontrol = tmp / "scontrol"
    scontrol.write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s\n" % (tmp / "scontrol.calls"))
    scontrol.chmod(0o755)
    extra = {"slurm_power_nodes": KNOWN, "slurm_power_user": "root", "slurm_power_dir": str(tmp / "lib"),
             "slurm_power_settings_dir": str(tmp / "etc"), "slurm_power_log": str(tmp / "log" / "slurm-power.log"),
             "slurm_power_lock_dir": str(tmp / "locks"), "slurm_power_python": "/usr/bin/python3",
             "slurm_power_scontrol": str(scontrol), "slurm_power_ansible_playbook": str(BIN / "ansible-playbook"),
             "slurm_power_fleetnap_dir": str(REPO), "slurm_power_inventory": str(tmp / "hosts.yml"),
             "slurm_power_playbook": str(tmp / "act.yml"), "slurm_power_playbook_args": ["-e", "failing=lab2"],
             "slurm_power_path": "%s:/usr/bin:/bin" % BIN}
    (tmp / "extra.json").write_text(json.dumps(extra))
    (tmp / "install.yml").write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - slurm_power\n")

    def apply(*args):
        return subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "@%s" % (tmp / "extra.json"),
                               *args, str(tmp / "install.yml")], capture_output=True, text=True, timeout=300,
                              cwd=str(REPO), env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")))
    first = apply()
    assert first.returncode == 0, first.stdout[-3000:]
    return tmp, apply, first


def call(tmp, name, *args, env=None, timeout=30):
    """As slurmctld calls it: an environment built from scratch, the output read to EOF."""
    t0 = time.monotonic()
    proc = subprocess.run([str(tmp / "lib" / name), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict({"SLURM_CONF": "/etc/slurm/slurm.conf"}, **(env or {})), cwd="/")
    return proc, time.monotonic() - t0


def log_lines(tmp):
    path = tmp / "log" / "slurm-power.log"
    return [x.split(" ", 1)[1] for x in path.read_text().splitlines()] if path.exists() else []


def wait_log(tmp, wanted, timeout=180):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        lines = log_lines(tmp)
        if all(w in lines for w in wanted):
            return lines
        time.sleep(0.2)
    raise AssertionError("not logged within %d s: %s; log: %s" % (timeout, wanted, log_lines(tmp)))


def test_the_role_installs_the_program_under_three_names_and_is_idempotent(installed):
    tmp, apply, first = installed
    prog = tmp / "lib" / "fleetnap-slurm-power"
    assert stat.S_IMODE(prog.stat().st_mode) == 0o755
    for name in ("fleetnap-slurm-suspend", "fleetnap-slurm-resume", "fleetnap-slurm-resume-fail"):
        assert os.readlink(tmp / "lib" / name) == "fleetnap-slurm-power"
    settings = tmp / "etc" / "settings.json"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640 and stat.S_IMODE((tmp / "etc").stat().st_mode) == 0o750
    doc = json.loads(settings.read_text())
    assert doc["nodes"] == KNOWN and doc["timeout_s"] == {"suspend": 300, "resume": 600}
    assert doc["playbook"] == {"ansible_playbook": str(BIN / "ansible-playbook"), "inventory": str(tmp / "hosts.yml"),
                               "playbook": str(tmp / "act.yml"), "fleetnap_dir": str(REPO), "args": ["-e", "failing=lab2"]}
    cfg = (tmp / "etc" / "ansible.cfg").read_text()
    assert "stdout_callback = ansible.posix.json" in cfg and "roles_path = %s/roles" % REPO in cfg
    second = apply()
    recap = [x for x in second.stdout.splitlines() if x.startswith("localhost ") and "ok=" in x]
    assert second.returncode == 0 and len(recap) == 1 and "changed=0" in recap[0], second.stdout[-2000:]


def test_suspend_returns_at_once_and_the_runner_parks_the_known_nodes(installed):
    tmp, _apply, _first = installed
    proc, took = call(tmp, "fleetnap-slurm-suspend", "lab[1,3],other7")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc
    assert took < 10, took                  # Slurm kills a program that does not return (issue: <= 2 s)
    lines = wait_log(tmp, ["fleetnap-slurm suspend lab1: parked", "fleetnap-slurm suspend lab3: parked"])
    assert "fleetnap-slurm suspend other7: skipped: not a node fleetnap knows: left alone" in lines
    assert any(x.startswith("fleetnap-slurm suspend lab1: handed to the runner: pid ") for x in lines)


def test_resume_logs_the_jobs_wakes_and_tells_slurm_of_a_node_it_could_not_wake(installed):
    tmp, _apply, _first = installed
    resume = tmp / "resume.json"
    resume.write_text(json.dumps({"all_nodes_resume": "lab[1-2]", "jobs": [{"job_id": 77, "nodes_resume": "lab[1-2]"}]}))
    proc, took = call(tmp, "fleetnap-slurm-resume", "lab[1-2]", env={"SLURM_RESUME_FILE": str(resume)})
    assert proc.returncode == 0 and took < 10, proc
    resume.unlink()                           # slurmctld removes it: the program read it at once
    lines = wait_log(tmp, ["fleetnap-slurm resume lab1: woken", "fleetnap-slurm resume lab2: failed: no answer from lab2",
                           "fleetnap-slurm resume lab2: told Slurm: nodename=lab2 state=POWER_DOWN"])
    assert "fleetnap-slurm resume -: job 77: resumes lab[1-2]" in lines
    assert (tmp / "scontrol.calls").read_text().splitlines() == [
        "update nodename=lab2 state=DOWN reason=fleetnap: no answer from lab2", "update nodename=lab2 state=POWER_DOWN"]


@pytest.mark.parametrize("name,args,words", [
    ("fleetnap-slurm-suspend", [], "nothing done: expected one argument"),
    ("fleetnap-slurm-suspend", ["lab[1-"], "nothing done:"),
    ("fleetnap-slurm-resume-fail", [","], "nothing done: the hostlist expression names no node"),
    ("fleetnap-slurm-suspend", ["lab1", "lab2"], "nothing done: expected one argument, a Slurm hostlist expression; got 2"),
])
def test_a_bad_call_acts_on_no_node_and_returns_at_once(installed, name, args, words):
    tmp, _apply, _first = installed
    before = len(log_lines(tmp))
    proc, took = call(tmp, name, *args)
    assert proc.returncode == 1 and took < 10
    new = log_lines(tmp)[before:]
    assert len(new) == 1 and words in new[0], new


def test_the_program_under_another_name_does_nothing(installed, tmp_path):
    tmp, _apply, _first = installed
    other = tmp / "lib" / "fleetnap-slurm-other"
    other.symlink_to("fleetnap-slurm-power")
    try:
        before = len(log_lines(tmp))
        proc, _took = call(tmp, "fleetnap-slurm-other", "lab1")
        assert proc.returncode == 2
        assert "refused: called as 'fleetnap-slurm-other'" in log_lines(tmp)[before]
    finally:
        other.unlink()


def test_absent_removes_the_programs_and_settings(installed):
    tmp, apply, _first = installed
    proc = apply("-e", "slurm_power_state=absent")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert not (tmp / "lib").exists() and not (tmp / "etc").exists() and not (tmp / "locks").exists()
    assert (tmp / "log" / "slurm-power.log").exists()          # the log is kept
    assert apply().returncode == 0                              # and back for any later test
