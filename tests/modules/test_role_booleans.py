"""Every boolean switch of the latency_profile role given on the command line as a string
(`-e name=false` / `-e name=true`, what an operator types) has the effect it says on the host.

On the command line `false` is the string "false", which Jinja treats as true unless the role
casts it: these tests run the role through ansible-playbook on a captured machine's sysfs and
look at the tree it changed, one switch at a time, both ways.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import REPO, TARGET_PYTHON, VENV_BIN, materialize

PLAY = """- hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: latency_profile
"""
# Every switch off, as strings; each test turns one of them on or leaves it off.
SWITCHES = ("latency_profile_pm_qos", "latency_profile_global_latency", "latency_profile_persist",
            "latency_profile_manage_sleep", "latency_profile_show_table")


def run_role(tmp_path, switch: str, value: str):
    root = materialize("ivbep1", tmp_path / "root")
    power = root / "sys" / "power"
    power.mkdir(parents=True, exist_ok=True)
    (power / "state").write_text("freeze mem disk\n")
    (power / "mem_sleep").write_text("s2idle [deep]\n")
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(play),
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
           "-e", "latency_profile_budget_us=50", "-e", "latency_profile_sysfs_root=%s" % root]
    for name in SWITCHES:
        cmd += ["-e", "%s=%s" % (name, value if name == switch else "false")]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return root, proc.stdout


def pm_qos_values(root):
    return {p.read_text().strip() for p in root.glob("sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us")}


EFFECTS = {
    # switch: what on the host (or in the run) shows that it acted
    "latency_profile_pm_qos": lambda root, out: pm_qos_values(root) == {"50"},
    "latency_profile_global_latency":
        lambda root, out: (root / "etc/systemd/system/fleetnap-cpu-dma-latency.service").exists(),
    "latency_profile_persist":
        lambda root, out: (root / "etc/systemd/system/fleetnap-cpuidle.service").exists(),
    "latency_profile_manage_sleep":
        lambda root, out: (root / "etc/systemd/sleep.conf.d/fleetnap.conf").exists(),
    "latency_profile_show_table": lambda root, out: "TASK [latency_profile : Show the decision (one table for the batch)]" in out
                                                    and "skipping: [localhost]" not in out.split(
                                                        "Show the decision (one table for the batch)]")[1].split("TASK")[0],
}


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("value,acts", [("false", False), ("False", False), ("no", False),
                                        ("true", True), ("yes", True)])
def test_a_switch_given_as_a_string_does_what_it_says(tmp_path, switch, value, acts):
    root, out = run_role(tmp_path, switch, value)
    assert EFFECTS[switch](root, out) is acts, (switch, value, out[-3000:])
    if switch != "latency_profile_pm_qos":
        # PM QoS stays as captured whenever its own switch is off
        assert "50" not in pm_qos_values(root)
