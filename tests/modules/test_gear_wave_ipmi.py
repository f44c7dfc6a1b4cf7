"""Safe power-on by IPMI (issue 18), gear_wave against a real ipmi_sim BMC with a real QEMU behind it.

Before the BMC powers the host on, gear_wave asks it to boot the disk once ('chassis bootdev
disk', read back with 'chassis bootparam get 5') and notes what its event log (SEL) holds; after
the host answers, the entries the power-on added are returned. The "machine" ipmi_sim starts on
'chassis power on' is a small script, as firmware at power-on: it writes an event to the BMC's SEL
(IPMI 'Add SEL Entry', over LAN with ipmitool), starts an SSH-like greeter (the host answering)
and runs a diskless QEMU whose ipmi-bmc-extern device keeps the chassis on.

OpenIPMI's ipmi_sim takes no boot parameters ('Set Chassis Boot Parameter 5 failed: Invalid data
field in request'): that is the BMC that cannot set the override, reported per host (and refused
with boot_once_required). That a BMC which can set it is read back as once is the Redfish test's
(test_gear_redfish.py, sushy-tools) and the unit tests'.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import run_module

USER = "fleetadm"
PASSWORD = "Fn7-pw-wave-3f81c2"     # distinctive: a leak anywhere is found by a plain search
# Add SEL Entry (NetFn storage 0x0a, cmd 0x44): a system event record, "Power Supply #1: failure
# detected, asserted" (sensor type 0x08, offset 1), as a host's firmware logs a fault at power-on.
SEL_RECORD = "0x00 0x00 0x02 0x00 0x00 0x00 0x00 0x20 0x00 0x04 0x08 0x01 0x6f 0x01 0xff 0xff"

GREETER = r"""
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(8)
while True:
    conn, _ = srv.accept()
    conn.sendall(b"SSH-2.0-booted\r\n")
    conn.close()
"""


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as c:
            c.settimeout(1)
            return c.recv(64).startswith(b"SSH-")
    except OSError:
        return False


class Machine(object):
    """ipmi_sim (SEL enabled) whose power-on runs machine.sh: SEL entry, greeter, QEMU."""

    def __init__(self, tmp):
        for tool in ("ipmi_sim", "ipmitool", "qemu-system-x86_64"):
            if not shutil.which(tool):
                pytest.fail("%s is missing: apt-get install openipmi ipmitool qemu-system-x86" % tool)
        self.dir = tmp
        self.port = free_port(socket.SOCK_DGRAM)
        self.vmport = free_port(socket.SOCK_STREAM)
        self.ssh = free_port(socket.SOCK_STREAM)
        (tmp / "greeter.py").write_text(GREETER)
        (tmp / "machine.sh").write_text("\n".join([
            "#!/bin/sh",
            "ipmitool -I lanplus -H 127.0.0.1 -p %d -U %s -E -C 3 -N 1 -R 2 raw 0x0a 0x44 %s >>%s/sel-add.log 2>&1"
            % (self.port, USER, SEL_RECORD, tmp),
            "%s %s/greeter.py %d </dev/null >/dev/null 2>&1 &" % (sys.executable, tmp, self.ssh),
            "echo $! > %s/greeter.pid" % tmp,
            "exec qemu-system-x86_64 -accel tcg -nodefaults -nographic -m 64 -no-reboot -serial null -monitor none "
            "-chardev socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=10 "
            "-device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-bt,bmc=bmc0" % self.vmport,
            ""]))
        os.chmod(str(tmp / "machine.sh"), 0o755)
        (tmp / "bmc.emu").write_text("mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
                                     "sel_enable 0x20 1000 0x0a\nmc_enable 0x20\n")
        (tmp / "lan.conf").write_text("\n".join([
            'name "fleetnap-wave-test"',
            "set_working_mc 0x20",
            "  startlan 1",
            "    addr 127.0.0.1 %d" % self.port,
            "    priv_limit admin",
            "    allowed_auths_callback md5",
            "    allowed_auths_user md5",
            "    allowed_auths_operator md5",
            "    allowed_auths_admin md5",
            "    guid b123456789abcdefa123456789abcdef",
            "  endlan",
            "  serial 15 127.0.0.1 %d codec VM" % self.vmport,
            '  startcmd "%s/machine.sh"' % tmp,
            "  startnow false",
            "  poweroff_wait 2",
            "  kill_wait 2",
            '  user 2 true "%s" "%s" admin 10 md5' % (USER, PASSWORD),
            "",
        ]))
        os.chmod(str(tmp / "lan.conf"), 0o600)
        self.log = open(str(tmp / "ipmi_sim.log"), "w")
        # The machine's firmware logs over LAN with the BMC's own credentials (its environment only).
        self.proc = subprocess.Popen(["ipmi_sim", "-n", "-p", "-c", str(tmp / "lan.conf"), "-f", str(tmp / "bmc.emu"),
                                      "-s", str(tmp / "state")], stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=str(tmp),
                                     env=dict(os.environ, IPMI_PASSWORD=PASSWORD))
        deadline = time.time() + 20
        while self.ipmitool("chassis", "power", "status").returncode != 0:
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                pytest.fail("ipmi_sim did not answer on 127.0.0.1:%d; log:\n%s"
                            % (self.port, (tmp / "ipmi_sim.log").read_text()))
            time.sleep(0.2)

    def ipmitool(self, *cmd):
        return subprocess.run(["ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", str(self.port), "-U", USER,
                               "-E", "-C", "3", "-N", "1", "-R", "1"] + list(cmd), capture_output=True, text=True,
                              env=dict(os.environ, IPMI_PASSWORD=PASSWORD), timeout=30)

    def power(self):
        out = self.ipmitool("chassis", "power", "status").stdout
        return "on" if "is on" in out else "off" if "is off" in out else out

    def off(self):
        if self.power() != "off":
            self.ipmitool("chassis", "power", "off")
        deadline = time.time() + 20
        while self.power() != "off" and time.time() < deadline:
            time.sleep(0.2)
        assert self.power() == "off"
        self.kill_greeter()
        deadline = time.time() + 10
        while answers(self.ssh) and time.time() < deadline:
            time.sleep(0.2)

    def kill_greeter(self):
        pidfile = self.dir / "greeter.pid"
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
            pidfile.unlink()

    def sel_entries(self):
        out = self.ipmitool("sel", "info").stdout
        return int([ln for ln in out.splitlines() if ln.strip().startswith("Entries")][0].split(":")[1])

    def host(self, **extra):
        return dict({"name": "fw1", "address": "127.0.0.1", "port": self.ssh, "up_methods": ["ipmi"],
                     "chassis_was_off": True, "bmc_address": "127.0.0.1", "bmc_port": self.port, "bmc_user": USER,
                     "bmc_password": PASSWORD}, **extra)

    def stop(self):
        self.kill_greeter()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        subprocess.run(["pkill", "-f", "port=%d,reconnect" % self.vmport], check=False)
        self.log.close()


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    m = Machine(tmp_path_factory.mktemp("wave-ipmi"))
    yield m
    m.stop()


def wave(machine, tmp_path, **host):
    return run_module("gear_wave", {"action": "up", "hosts": [machine.host(**host)], "ipmi_timeout": 60,
                                    "min_interval": 0.2, "session_timeout": 1, "retries": 1,
                                    "rate_limit_dir": str(tmp_path / "rl")})


def test_ipmi_wake_tries_the_disk_once_and_reports_the_event_the_power_on_logged(machine, tmp_path):
    machine.off()
    before = machine.sel_entries()
    res = wave(machine, tmp_path)
    assert not res.get("failed"), res
    r = res["hosts"]["fw1"]
    assert r["ok"] and r["method"] == "ipmi" and r["state"] == "on", r
    report = r["attempts"][-1]["report"]
    # ipmi_sim cannot set boot parameters: said, with the BMC's own answer, and the wake went on.
    assert "boot override not set" in report and "chassis bootdev disk" in report, report
    assert "Set Chassis Boot Parameter" in report and "Invalid data field" in report, report
    # The entry the machine's power-on wrote is the one reported, and only it.
    assert machine.sel_entries() == before + 1
    assert len(r["bmc_events"]) == 1, (report, r.get("bmc_events"))
    assert "Power Supply" in r["bmc_events"][0]["message"], r["bmc_events"]
    assert "1 new event log entry (first: Power Supply" in report, report
    assert PASSWORD not in repr(res)


def test_boot_once_required_leaves_a_bmc_that_cannot_set_it_off(machine, tmp_path):
    machine.off()
    before = machine.sel_entries()
    res = wave(machine, tmp_path, boot_once_required=True)
    assert not res.get("failed"), res     # one host's failure is its result, not the module's
    r = res["hosts"]["fw1"]
    assert not r["ok"] and res["not_ok"] == ["fw1"], r
    assert "not powered on: the next boot could not be set to the disk" in r["msg"], r["msg"]
    assert "Invalid data field" in r["msg"], r["msg"]
    assert machine.power() == "off" and not answers(machine.ssh)
    assert machine.sel_entries() == before      # the machine never ran
    assert PASSWORD not in repr(res)


def test_without_the_safe_power_on_steps_nothing_is_asked_of_the_bmc_first(machine, tmp_path):
    machine.off()
    res = wave(machine, tmp_path, boot_once=False, event_log=False)
    r = res["hosts"]["fw1"]
    assert r["ok"], r
    report = r["attempts"][-1]["report"]
    assert "boot" not in report and "event log" not in report and "bmc_events" not in r, r
    machine.off()
