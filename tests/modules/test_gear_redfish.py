"""Gear shifts with Redfish BMCs (issue 18): gear_observe reads the chassis power and gear_wave
powers a host on through the real sushy-tools emulator (fake driver: a change applies 1-11 s
after the request), the next boot set to the disk once before the power-on.

The emulator drives no machine, so the "host" is a local SSH-like greeter that starts answering
when the emulator reports the system On, as a server boots when its BMC powers it on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_module
from redfishtools import Emulator, free_port, make_pki

USER = "fleetadm"
PASSWORD = "Fn7-rf-gw-5d20a7"
NODE = {"uuid": "7a1d0c2e-0002-4b7e-8f00-00000000b001", "name": "fn-rf2", "power_state": "Off",
        "nics": [{"mac": "52:54:00:00:0b:01", "ip": "192.0.2.22"}]}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def emu(tmp_path_factory, pki):
    e = Emulator(tmp_path_factory.mktemp("sushy"), pki, USER, PASSWORD, [NODE]).start()
    yield e
    e.stop()


class BootsWhenOn(threading.Thread):
    """Listens (and greets like sshd) once the emulator reports the system On."""

    def __init__(self, emu, port):
        super().__init__(daemon=True)
        self.emu, self.port, self.stop = emu, port, threading.Event()

    def run(self):
        while not self.stop.is_set() and self.emu.power_state(NODE["uuid"]) != "On":
            time.sleep(0.3)
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(8)
        srv.settimeout(0.3)
        while not self.stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"SSH-2.0-booted\r\n")
            conn.close()
        srv.close()


def host(emu, pki, port, **extra):
    return dict({"name": "rf2", "address": "127.0.0.1", "port": port, "bmc_address": "127.0.0.1",
                 "bmc_port": emu.port, "bmc_user": USER, "bmc_password": PASSWORD, "bmc_protocol": "redfish",
                 "bmc_ca_path": str(pki["ca"])}, **extra)


def test_observe_and_wake_through_redfish_with_the_next_boot_from_disk(emu, pki, tmp_path):
    emu.set_power(NODE["uuid"], "Off")
    emu.call("PATCH", emu.system_path(NODE["uuid"]), {"Boot": {"BootSourceOverrideTarget": "Pxe"}})
    port = free_port()
    seen = run_module("gear_observe", {"hosts": [host(emu, pki, port)], "probe_timeout": 0.5,
                                       "rate_limit_dir": str(tmp_path / "rl")})
    assert not seen.get("failed"), seen
    assert seen["hosts"]["rf2"]["bmc"] == "off" and not seen["hosts"]["rf2"]["ssh"], seen["hosts"]
    booted = BootsWhenOn(emu, port)
    booted.start()
    try:
        res = run_module("gear_wave", {"action": "up", "ipmi_timeout": 60, "rate_limit_dir": str(tmp_path / "rl"),
                                       "hosts": [host(emu, pki, port, up_methods=["redfish"], chassis_was_off=True)]})
    finally:
        booted.stop.set()
    assert not res.get("failed"), res
    r = res["hosts"]["rf2"]
    assert r["ok"] and r["method"] == "redfish" and r["state"] == "on", r
    assert "next boot from Hdd" in r["attempts"][0]["report"], r
    assert emu.power_state(NODE["uuid"]) == "On"
    _s, _h, doc = emu.call("GET", emu.system_path(NODE["uuid"]))
    assert doc["Boot"]["BootSourceOverrideTarget"] == "Hdd"
    assert PASSWORD not in str(res)


def test_a_redfish_method_needs_a_redfish_bmc(emu, pki, tmp_path):
    res = run_module("gear_wave", {"action": "up", "rate_limit_dir": str(tmp_path / "rl"),
                                   "hosts": [host(emu, pki, free_port(), up_methods=["ipmi"])]})
    assert res.get("failed") and "rf2 wakes by ipmi but its BMC speaks redfish" in res["msg"], res


def test_the_gear_member_role_wakes_a_host_by_redfish(emu, pki, tmp_path):
    """gear_member's up on its own (issue 35: its wake is the wave's), with the methods the README
    gives a Redfish host, [wol, redfish]: no magic packet wakes this one (no MAC is listening), so
    the BMC powers it on, the next boot set to the disk once; the role's result says so."""
    emu.set_power(NODE["uuid"], "Off")
    port = free_port()
    out = tmp_path / "result.json"
    play = tmp_path / "up.yml"
    play.write_text(yaml.safe_dump([{
        "hosts": "rf2", "gather_facts": False,
        "tasks": [{"ansible.builtin.include_role": {"name": "gear_member"},
                   "vars": {"gear_member_action": "up", "gear_member_power_ok": True, "gear_member_wol_timeout_s": 3,
                            "gear_member_ipmi_timeout_s": 60, "gear_member_observed_silent": True}},
                  {"ansible.builtin.copy": {"content": "{{ gear_member_result | to_json }}", "dest": str(out),
                                            "mode": "0644"}, "delegate_to": "localhost"}]}]))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"rf2": {
        "ansible_host": "127.0.0.1", "ansible_port": port, "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "fleetnap_power_methods": ["wol", "redfish"], "fleetnap_wol_macs": ["52:54:00:00:0b:01"],
        "fleetnap_wol_address": "127.255.255.255", "fleetnap_wol_port": free_port(),
        "fleetnap_bmc_address": "127.0.0.1", "fleetnap_bmc_port": emu.port, "fleetnap_bmc_user": USER,
        "fleetnap_bmc_protocol": "redfish", "fleetnap_bmc_ca_path": str(pki["ca"])}}}}))
    booted = BootsWhenOn(emu, port)
    booted.start()
    try:
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(play)],
                              capture_output=True, text=True, timeout=300, cwd=str(REPO),
                              env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                                       FLEETNAP_BMC_PASSWORD=PASSWORD))
    finally:
        booted.stop.set()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["ok"] and r["method"] == "redfish" and r["state"] == "on", r
    assert [a["method"] for a in r["attempts"]] == ["wol", "redfish"] and not r["attempts"][0]["ok"], r
    assert "next boot from Hdd" in r["attempts"][1]["report"], r
    assert emu.power_state(NODE["uuid"]) == "On"
    assert PASSWORD not in proc.stdout + proc.stderr
