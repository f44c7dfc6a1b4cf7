"""A second, one-guest lab in its own state directory: up, up again, down, up fresh.

It runs beside the shared lab (other ports, other state, other inventory, other WoL ports), so
it proves 'down' leaves no processes and 'up' after 'down' starts from a clean overlay without
touching the lab the other tests use.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from labtools import labctl, run_labctl

pytestmark = [pytest.mark.lab, pytest.mark.lab_self]   # make test-lab-self, not CI


def _procs_mentioning(text: str) -> list[int]:
    pids = []
    for piddir in Path("/proc").glob("[0-9]*"):
        try:
            if text.encode() in (piddir / "cmdline").read_bytes():
                pids.append(int(piddir.name))
        except OSError:
            continue
    return pids


def test_small_lab_up_idempotent_down_and_fresh_up(lab, tmp_path):
    state = tmp_path / "state"
    env = {"LAB_STATE": str(state), "LAB_INVENTORY": str(tmp_path / "inventory"), "LAB_HOSTS": "1",
           "LAB_PORT_BASE": "22290", "LAB_BMC_PORT_BASE": "9690", "LAB_WOL_PORTS": "9099"}
    try:
        first = json.loads(run_labctl("up", env=env).stdout)
        assert first["booted"] == ["lab1"] and first["changed"] is True
        table = json.loads((state / "lab.json").read_text())
        h = table["hosts"][0]
        assert (h["ssh_port"], h["bmc_port"], h["vm_port"], h["redfish_port"]) == (22291, 9691, 9791, 9891)
        inv = json.loads("\n".join((tmp_path / "inventory/hosts.yml").read_text().splitlines()[1:]))
        assert inv["all"]["children"]["lab"]["hosts"]["lab1"]["ansible_port"] == 22291
        pids = sorted(_procs_mentioning(str(state)))
        assert len(pids) == 4, pids          # ipmi_sim, its QEMU, its Redfish BMC, the WoL relay
        labctl_h = dict(h)
        labctl.ssh(labctl_h, "touch /root/written-before-down")

        again = json.loads(run_labctl("up", env=env).stdout)
        assert again["changed"] is False and again["booted"] == []
        assert sorted(_procs_mentioning(str(state))) == pids

        down = json.loads(run_labctl("down", env=env).stdout)
        assert set(down["stopped"]) == {"wol-relay", "lab1 redfish_bmc", "lab1 qemu", "lab1 ipmi_sim"}
        assert _procs_mentioning(str(state)) == []

        # A guest whose pid file was lost is still stopped by down, before down returns.
        run_labctl("up", env=env)
        qemu_pid = int((state / "lab1" / "qemu.pid").read_text())
        (state / "lab1" / "qemu.pid").unlink()
        down = json.loads(run_labctl("down", env=env).stdout)
        assert "qemu-system pid %d (not in the lab's pid files)" % qemu_pid in down["stopped"], down
        assert _procs_mentioning(str(state)) == []
        assert not Path("/proc/%d" % qemu_pid).exists() or \
            Path("/proc/%d/stat" % qemu_pid).read_text().rsplit(")", 1)[1].split()[0] == "Z"
        for port, kind in ((22291, socket.SOCK_STREAM), (9691, socket.SOCK_DGRAM),
                           (9791, socket.SOCK_STREAM), (9891, socket.SOCK_STREAM), (9099, socket.SOCK_DGRAM)):
            assert labctl.port_free(port, kind), port
        assert json.loads(run_labctl("down", env=env).stdout) == {"changed": False, "stopped": []}

        fresh = json.loads(run_labctl("up", env=env).stdout)
        assert fresh["booted"] == ["lab1"]
        out = labctl.ssh(labctl_h, "hostname; test -e /root/written-before-down && echo kept || echo fresh")
        assert out.stdout.split() == ["lab1", "fresh"]
    finally:
        run_labctl("down", env=env, check=False)
    assert _procs_mentioning(str(state)) == []
