"""Helpers for the lab suite: run labctl, and a Lab object around the running lab's table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "lab"
# labctl is standard-library Python 3.11: run it with Debian's interpreter, as make does
LABCTL = ["/usr/bin/python3", str(LAB / "labctl.py")]
sys.path.insert(0, str(LAB))

import labctl  # noqa: E402


def run_labctl(*args, env=None, timeout=900, check=True):
    proc = subprocess.run(LABCTL + list(args), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})), cwd=str(REPO))
    if check and proc.returncode != 0:
        raise AssertionError("labctl %s failed (rc=%d)\n%s\n%s"
                             % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def why(proc, tail: int = 3000) -> str:
    """What a failed ansible-playbook run says went wrong: every fatal/unreachable/failed line with
    the lines after it (the cause is usually far above the recap), then the end of the output."""
    lines = proc.stdout.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith(("fatal:", "failed:", "[ERROR]")) or "UNREACHABLE!" in line or " | FAILED" in line:
            picked.extend(lines[i:i + 6] + ["..."])
    return "\n".join(["rc=%d" % proc.returncode, "--- errors in the run ---", *picked[:200],
                      "--- end of stdout ---", proc.stdout[-tail:], "--- stderr ---", proc.stderr[-1500:]])


class Lab:
    """The running lab: its table (lab/state/lab.json) and helpers around labctl's functions."""

    def __init__(self, up_result: dict):
        self.up_result = up_result
        self.table = labctl.load_table()
        self.hosts = {h["name"]: h for h in self.table["hosts"]}
        self.password = labctl.bmc_password()

    def __getitem__(self, name: str) -> dict:
        return self.hosts[name]

    def ssh(self, name: str, command: str, timeout: float = 30, check: bool = True):
        return labctl.ssh(self.hosts[name], command, timeout=timeout, check=check)

    def ipmitool(self, name: str, *args: str, password: str | None = None, cipher: bool = True):
        """The documented command: ipmitool -I lanplus -H 127.0.0.1 -p PORT -U admin -E ..."""
        cmd = ["ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", str(self.hosts[name]["bmc_port"]),
               "-U", "admin", "-E"]
        if cipher:
            cmd[3:3] = ["-C", "3"]
        env = dict(os.environ, IPMI_PASSWORD=self.password if password is None else password)
        return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=60)

    def power(self, name: str) -> str:
        return labctl.bmc_power(self.hosts[name])

    def qmp_status(self, name: str) -> str:
        return labctl.qmp_status(self.hosts[name])

    def qemu_pid(self, name: str):
        return labctl.qemu_alive(self.hosts[name])

    def wait_for(self, what: str, predicate, timeout: float, interval: float = 0.25):
        t0 = time.monotonic()
        while True:
            value = predicate()
            if value:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
            time.sleep(interval)

    def wait_ssh(self, name: str, timeout: float = 240) -> float:
        return labctl.wait_ssh(self.hosts[name], timeout)

    def ssh_down(self, name: str) -> bool:
        return not labctl.ssh_banner(self.hosts[name], timeout=1.0)

    def wol_log(self) -> list[dict]:
        path = labctl.STATE / "wol-relay.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    # -- the guest's Redfish BMC (lab/redfish_bmc.py), as a client would see it
    def redfish(self, name: str, method: str, path: str, body=None, password: str | None = None):
        """(status, JSON or None) of one request to NAME's Redfish BMC, verified by the lab's CA."""
        from redfishtools import http_json
        status, _headers, doc = http_json(self.hosts[name]["redfish_port"], method, path, labctl.REDFISH_CA,
                                          user="admin", password=self.password if password is None else password,
                                          body=body, timeout=20)
        return status, doc

    def redfish_system(self, name: str) -> str:
        """The path of NAME's one ComputerSystem."""
        status, doc = self.redfish(name, "GET", "/redfish/v1/Systems")
        assert status == 200 and len(doc["Members"]) == 1, (status, doc)
        return doc["Members"][0]["@odata.id"]

    def redfish_log(self, name: str) -> list[dict]:
        """What NAME's Redfish BMC did to the guest (power.log: reset type, what was done, boot)."""
        path = labctl.redfish_dir(self.hosts[name]) / "power.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def redfish_fault(self, name: str, fault) -> None:
        labctl.redfish_fault(self.hosts[name], fault)

    def in_s3(self, name: str, timeout: float = 60) -> str:
        """QEMU's status once the guest is in S3 (suspended), or what it still is after ``timeout``
        s. A shift reports a host asleep once it is silent after its suspend command; the guest's
        kernel then finishes its own way into S3, which on the lab's emulated (TCG) guests can
        take seconds more on a loaded 2-core machine (seen: a guest silent 2 s after its suspend
        command entered S3 9 s later, its systemd slow to act on the request)."""
        h = self.hosts[name]
        deadline = time.monotonic() + timeout
        while True:
            status = labctl.qmp_status(h)
            if status == "suspended" or time.monotonic() > deadline:
                return status
            time.sleep(0.25)

    def restore(self, name: str) -> str:
        """Bring a guest back to running with SSH, whatever state a test left it in; returns the
        state it was found in (running, suspended, off)."""
        h = self.hosts[name]
        status = labctl.qmp_status(h)
        if status == "suspended":
            labctl.qmp(h["qmp"], "system_wakeup")
        elif status == "off":
            self.wait_for("%s's BMC to report off" % name, lambda: self.power(name) == "off", 60)
            labctl.ipmi(h, "chassis", "power", "on")
        labctl.wait_ssh(h, 300)
        return status

    def record_timing(self, key: str, value) -> None:
        path = labctl.STATE / "timings.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data[key] = value
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
