"""Helpers for the fleet simulator tests: drive lab/sim.py, run modules over SSH, read captures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CPUIDLE_DATA = REPO / "tests" / "data" / "cpuidle"
VENV_BIN = Path(sys.executable).parent
STATE_LINE = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/cpuidle/state(\d+)/(name|latency|disable)$")

SIM_NAME = "simt"
SIM_SUBNET = "10.252.0.0/24"
# Three captured machines for six hosts: sim hosts 1 and 4 share a machine (and its read-only
# template), so the isolation test can show a write on one is not seen by the other.
SIM_MACHINES = "ivbep1,milan0,aml-y-2"
SIM_HOSTS = 6


def missing_tools():
    if os.geteuid() != 0:
        return "the simulator needs root"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "openssh-server is not installed (make setup)"
    for tool in ("ip", "unshare", "nsenter", "ipmi_sim", "ipmitool"):
        if not shutil.which(tool):
            return "%s is missing" % tool
    return None


def running_sim(tmp_path_factory, name: str, subnet: str, hosts: int, **env):
    """A simulator of its own for a test module (a generator for a module-scoped fixture): skipped
    without the tools, whatever a crashed earlier run left taken down first, down afterwards."""
    import pytest

    why = missing_tools()
    if why:
        pytest.skip(why)
    s = Sim(tmp_path_factory.mktemp(name), name=name, subnet=subnet, **env)
    s.cli("down")
    s.cli("up", "--hosts", str(hosts))
    yield s
    s.cli("down", check=False)


class Sim:
    def __init__(self, base: Path, name: str = SIM_NAME, subnet: str = SIM_SUBNET, **env):
        self.state = base / "state"
        self.inventory = base / "inventory"
        self.name, self.subnet = name, subnet
        self.env = dict(os.environ, SIM_MACHINES=SIM_MACHINES, **env)

    def cli(self, *args, check=True):
        cmd = ["/usr/bin/python3", str(REPO / "lab" / "sim.py"), "--state", str(self.state),
               "--inventory", str(self.inventory), "--name", self.name, "--subnet", self.subnet] + list(args)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError("sim.py %s failed (rc=%d): %s" % (" ".join(args), proc.returncode, proc.stderr))
        return proc

    def table(self):
        return json.loads((self.state / "sim.json").read_text())

    def hosts(self) -> dict:
        return {h["name"]: h for h in self.table()["hosts"]}

    def status(self) -> dict:
        return {r["host"]: r for r in json.loads(self.cli("status", "--json").stdout)}

    def power_log(self, host: str) -> list[dict]:
        """What the host's power program recorded (lab/simhost.py): the ground truth."""
        path = Path(self.hosts()[host]["dir"]) / "power.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def ipmitool(self, host: str, *args: str) -> subprocess.CompletedProcess:
        """ipmitool against the host's BMC (ipmi_sim), the password through the environment."""
        h = self.hosts()[host]
        env = dict(os.environ, IPMI_PASSWORD=(self.state / "bmc-password").read_text().strip())
        return subprocess.run(["ipmitool", "-I", "lanplus", "-H", h["bmc_ip"], "-U", "admin", "-E", "-C", "3",
                               "-N", "1", "-R", "2"] + list(args), capture_output=True, text=True, env=env, timeout=60)

    def playbook(self, playbook: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_SSH_CONTROL_PATH_DIR=str(self.state / "cp"))
        return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory),
                               str(REPO / "playbooks" / playbook)] + list(args),
                              capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)

    def read(self, host: str, path: str) -> str:
        return self.cli("path", host, path).stdout

    def write(self, host: str, path: str, text: str) -> None:
        """Write PATH as HOST sees it, from outside the host (it works while the host sleeps):
        through the root of the sshd its power program started at the host's last power-on, as
        `lab/sim.py path` reads (sim.sshd_alive). The pid in the table is the one of `up` and is
        stale once an earlier test power-cycled the host."""
        from sim import sshd_alive      # lab/ is on sys.path (tests/conftest.py)

        pid = sshd_alive(self.hosts()[host])
        assert pid, "%s is not running: no sshd of its last power-on" % host
        (Path("/proc/%d/root" % pid) / path.lstrip("/")).write_text(text)

    def ansible(self, pattern: str, module: str, args: dict | None = None) -> dict:
        """Run a module of library/ over SSH on the simulated hosts; {host: result}."""
        cmd = [str(VENV_BIN / "ansible"), "-i", str(self.inventory), pattern, "-m", module]
        if args:
            cmd += ["-a", json.dumps(args)]
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                   ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json",
                   ANSIBLE_SSH_CONTROL_PATH_DIR=str(self.state / "cp"))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
        try:
            report = json.loads(proc.stdout[proc.stdout.find("{"):])
            return report["plays"][0]["tasks"][0]["hosts"]
        except (ValueError, KeyError, IndexError):
            raise AssertionError("ansible produced no result (rc=%d)\n%s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))




def captured_states(machine: str) -> dict:
    """{cpu: {index: {"name", "latency", "disable"}}} straight from the capture file (the oracle)."""
    out: dict = {}
    for line in (CPUIDLE_DATA / ("%s.txt" % machine)).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        _mode, path, value = line.split("|", 2)
        m = STATE_LINE.match(path)
        if m:
            out.setdefault(int(m.group(1)), {}).setdefault(int(m.group(2)), {})[m.group(3)] = value
    return out


def captured_value(machine: str, path: str) -> str | None:
    for line in (CPUIDLE_DATA / ("%s.txt" % machine)).read_text().splitlines():
        if line.startswith(("rw|" + path + "|", "ro|" + path + "|")):
            return line.split("|", 2)[2]
    return None
