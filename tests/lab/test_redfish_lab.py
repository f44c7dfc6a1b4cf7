"""Redfish on the lab: every guest's BMC also speaks Redfish (OpenStack's sushy-tools emulator with
the lab's driver, lab/redfish_bmc.py), so power off, on and cycle by Redfish really stop and start a
guest; gear shifts use it like IPMI; its faults (a busy BMC, a slow task, a wrong password, a
certificate from a CA the client was not given) are each a clear per-host error.

Every test starts and ends with all six guests running and booting from the disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labtools import why
from test_gear_shift import CmdlineWatch, all_running, hosts_in, power_of, shift, state, today_groups  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.lab
HOST = "lab2"       # the power test's guest


def redfish_power(lab, name, *, verbose=False, **args):
    """fleetnap's redfish_power module against NAME's Redfish BMC (the lab's CA verifies it); the
    password comes from the controller's environment by a lookup, never on a command line. Returns
    (result, output); the password is in neither, nor in any process's argv while it runs."""
    base = {"bmc_address": "127.0.0.1", "bmc_port": lab[name]["redfish_port"], "bmc_user": "admin",
            "bmc_password": "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}",
            "ca_path": str(REPO / "lab/state/redfish-ca.pem") if "ca_path" not in args else args.pop("ca_path")}
    base.update(args)
    base = {k: v for k, v in base.items() if v is not None}
    cmd = [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "redfish_power", "-a", json.dumps(base)]
    if verbose:
        cmd.append("-vvv")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", FLEETNAP_BMC_PASSWORD=lab.password,
               ANSIBLE_NOCOLOR="1")
    watch = CmdlineWatch(lab.password)
    watch.start()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=600)
    finally:
        watch.stop.set()
        watch.join()
    out = proc.stdout + proc.stderr
    assert watch.scans > 0 and not watch.hits, "BMC password in the argv of PIDs %s" % watch.hits
    assert lab.password not in out, "BMC password in the output"
    text = proc.stdout
    doc, _end = json.JSONDecoder().raw_decode(text[0 if text.startswith("{") else text.index("\n{\n") + 1:])
    return doc["plays"][0]["tasks"][0]["hosts"]["localhost"], out


def set_boot_device(lab, name, target):
    """The system's boot device as the emulator keeps it (Continuous): Pxe is a host whose boot
    order network-boots (lab/redfish_bmc.py starts it with no kernel and -boot n)."""
    status, _ = lab.redfish(name, "PATCH", lab.redfish_system(name), {"Boot": {"BootSourceOverrideTarget": target}})
    assert status == 204, status
    status, doc = lab.redfish(name, "GET", lab.redfish_system(name))
    assert doc["Boot"]["BootSourceOverrideTarget"] == target


def starts(lab, name, since):
    return [e for e in lab.redfish_log(name)[since:] if e["done"] == "started"]


@pytest.fixture
def disk_boot(lab):
    """Every guest boots from the disk again afterwards; no fault left on any Redfish BMC."""
    yield
    for name in ("lab%d" % n for n in range(1, 7)):
        lab.redfish_fault(name, None)
        set_boot_device(lab, name, "Hdd")


# Out of CI's lab stage (about 160 s of its budget): redfish_power's soft, off, on and cycle run
# against sushy-tools in the unit stage, and the gear shift below powers guests off and on by
# Redfish; the slow task and the network boot order on a real guest are make test-lab-self.
@pytest.mark.lab_long
def test_off_on_cycle_by_redfish_a_slow_task_and_a_network_boot_order(all_running, disk_boot):
    """Off, on and cycle through the Redfish BMC, each verified by the guest itself (silent, then
    answering with a new boot). The guest's boot order network-boots: powered on without the
    one-time override it never answers (the BMC started it from the network), with it (the default)
    it boots the disk. A reset answered by a task that outlasts the module's timeout is a clear
    error (and happens when the task ends); one within the timeout is followed to its end. A BMC
    busy for two requests (503, Retry-After) is waited out. -vvv shows no password."""
    lab = all_running
    boot_id = lab.ssh(HOST, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    set_boot_device(lab, HOST, "Pxe")
    mark = len(lab.redfish_log(HOST))

    # off, by a reset whose task runs 6 s: past a 2 s timeout, a clear error; then it happens
    lab.redfish_fault(HOST, {"task_s": 6})
    res, _ = redfish_power(lab, HOST, state="off", timeout=2)
    assert res.get("failed") and "still Running when the timeout ran out" in res["msg"], res
    assert "127.0.0.1:%d" % lab[HOST]["redfish_port"] in res["msg"]
    lab.wait_for("%s off after its slow task" % HOST, lambda: power_of(lab, HOST) == "off", 30)
    assert lab.ssh_down(HOST)
    assert lab.power(HOST) == "off"          # its IPMI side agrees: one BMC, two protocols
    lab.redfish_fault(HOST, None)

    # on without the one-time boot override: the boot order network-boots, the guest never answers
    console = Path(lab[HOST]["console"])
    size = console.stat().st_size
    res, _ = redfish_power(lab, HOST, state="on", boot_once="none")
    assert not res.get("failed") and res["power"] == "on", res
    assert [e["boot"] for e in starts(lab, HOST, mark)] == ["network (boot device Pxe)"]
    time.sleep(10)          # a disk boot's kernel writes its banner on the console within 2 s
    with console.open("rb") as fh:
        fh.seek(size)
        assert b"Linux version" not in fh.read(), "the guest started from the network booted a kernel"
    assert lab.ssh_down(HOST), "a guest started from the network answered SSH"
    res, _ = redfish_power(lab, HOST, state="off")
    assert not res.get("failed") and res["reset_type"] == "ForceOff" and res["power"] == "off", res

    # on, safe: the next boot from the disk first (the default); busy twice, waited out
    lab.redfish_fault(HOST, {"status": 503, "count": 2})
    res, out = redfish_power(lab, HOST, state="on", verbose=True)
    assert not res.get("failed") and res["reset_type"] == "On", res
    assert res["boot_override"]["target"] == "Hdd" and res["boot_override"]["requested"]["enabled"] == "Once"
    assert [r["status"] for r in res["requests"]][:2] == [503, 503], res["requests"]
    assert "> EXEC /bin/sh" in out                       # -vvv did show the commands
    assert [e["boot"] for e in starts(lab, HOST, mark)][-1] == "disk"
    lab.wait_ssh(HOST, 300)
    with console.open("rb") as fh:      # the check above can fail: a disk boot writes the banner
        fh.seek(size)
        assert b"Linux version" in fh.read()
    booted = lab.ssh(HOST, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert booted != boot_id

    # cycle: ForceOff + On (this BMC offers no PowerCycle), each reset a 2 s task followed to its end
    lab.redfish_fault(HOST, {"task_s": 2})
    n = len(starts(lab, HOST, mark))
    res, _ = redfish_power(lab, HOST, state="cycle", timeout=120)
    assert not res.get("failed") and res["cycled"] and res["power"] == "on", res
    assert "off" in res["states_seen"]
    assert [e["boot"] for e in starts(lab, HOST, mark)][n:] == ["disk"]
    lab.redfish_fault(HOST, None)
    lab.wait_ssh(HOST, 300)
    assert lab.ssh(HOST, "cat /proc/sys/kernel/random/boot_id").stdout.strip() not in (boot_id, booted)


def redfish_inventory(lab, path, hosts):
    """An inventory that moves HOSTS (name -> methods or overrides) to their Redfish BMC."""
    doc = {"all": {"hosts": {}}}
    for name, extra in hosts.items():
        v = {"fleetnap_bmc_protocol": "redfish", "fleetnap_bmc_port": lab[name]["redfish_port"],
             "fleetnap_bmc_ca_path": str(REPO / "lab/state/redfish-ca.pem")}
        v.update(extra)
        doc["all"]["hosts"][name] = {k: val for k, val in v.items() if val is not None}
    path.write_text(json.dumps(doc))
    return path


def test_gear_shift_by_redfish_with_and_without_wake_on_lan(all_running, disk_boot, tmp_path):
    """3 -> 2 -> 3 with the parked group on Redfish: one host [wol, redfish], one [redfish] only.
    The plan parks the [redfish] host by a soft-off through its BMC (a BMC's power-on does not wake
    a host from S3) and the other in S3. On the way up the first one's magic packets are lost:
    its Redfish BMC power-cycles it (gear_shift_ipmi_cycle_parked); the [redfish] host, whose boot
    order network-boots, is powered on with the next boot from the disk. Both boot the disk."""
    lab = all_running
    sd = tmp_path / "gear"
    _on, off = today_groups(2)
    down = hosts_in(lab, off)
    assert len(down) == 2
    both, rf_only = down
    inv = redfish_inventory(lab, tmp_path / "redfish.yml", {both: {"fleetnap_power_methods": ["wol", "redfish"]},
                                                             rf_only: {"fleetnap_power_methods": ["redfish"]}})
    env = {"FLEETNAP_BMC_PASSWORD": lab.password}
    proc = shift(lab, sd, "-e", "gear_shift_gear=2", inventories=[inv], env=env)
    assert proc.returncode == 0, why(proc)
    assert "no Wake-on-LAN among its wake methods (redfish)" in proc.stdout, proc.stdout[-3000:]
    assert lab.in_s3(both) == "suspended"
    assert power_of(lab, rf_only) == "off" and lab.ssh_down(rf_only)
    assert [e["reset_type"] for e in lab.redfish_log(rf_only)][-1] == "GracefulShutdown"
    st = state(sd)
    assert st["hosts"][both]["state"] == "asleep" and st["hosts"][rf_only]["state"] == "off", st

    set_boot_device(lab, rf_only, "Pxe")
    mark = {n: len(lab.redfish_log(n)) for n in down}
    subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "wol-drop", lab[both]["wol_mac"], "--count", "0"],
                   check=True, capture_output=True, timeout=60)
    try:
        proc = shift(lab, sd, "-e", "gear_shift_gear=3", "-e", "gear_shift_wol_timeout_s=10",
                     "-e", "gear_shift_ipmi_cycle_parked=true", inventories=[inv], env=env)
    finally:
        subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "wol-drop", "--clear"],
                       check=True, capture_output=True, timeout=60)
    assert proc.returncode == 0, why(proc)
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 3
    assert all(power_of(lab, n) == "running" for n in lab.hosts)
    acts = {a["host"]: a for a in st["actions"]}
    assert [(a["method"], a["ok"]) for a in acts[both]["attempts"]] == [("wol", False), ("redfish", True)]
    assert [(a["method"], a["ok"]) for a in acts[rf_only]["attempts"]] == [("redfish", True)]
    assert "next boot from Hdd" in acts[rf_only]["attempts"][0]["report"]
    assert [e["reset_type"] for e in lab.redfish_log(both)[mark[both]:]] == ["ForceOff", "On"]
    for n in down:
        assert [e["boot"] for e in starts(lab, n, mark[n])] == ["disk"]
        assert lab.ssh(n, "hostname").stdout.strip() == n


def test_redfish_faults_stop_a_shift_before_anything_goes_down(all_running, disk_boot, tmp_path):
    """3 -> 1 with the four hosts to park on Redfish, each BMC wrong in its own way: a wrong password
    (401), a certificate the client cannot verify (no fleetnap_bmc_ca_path: the lab's CA is not the
    system's), a BMC that answers every request 503, and one that is fine. The shift stops before
    anything is powered down and names each BMC and what it said."""
    lab = all_running
    sd = tmp_path / "gear"
    _on, off = today_groups(1)
    down = hosts_in(lab, off)
    assert len(down) == 4
    wrong_pw, no_ca, busy, fine = down
    inv = redfish_inventory(lab, tmp_path / "redfish.yml", {
        wrong_pw: {"fleetnap_bmc_password": "not-the-password"},
        no_ca: {"fleetnap_bmc_ca_path": None},
        busy: {}, fine: {}})
    lab.redfish_fault(busy, {"status": 503, "count": 1000})
    before = {n: len(lab.redfish_log(n)) for n in down}
    proc = shift(lab, sd, "-e", "gear_shift_gear=1", inventories=[inv], env={"FLEETNAP_BMC_PASSWORD": lab.password})
    lab.redfish_fault(busy, None)
    assert proc.returncode != 0
    out = proc.stdout
    assert "gear shift stopped before powering anything down" in out, why(proc)
    ports = {n: "127.0.0.1:%d" % lab[n]["redfish_port"] for n in down}
    assert "%s (%s: " % (wrong_pw, ports[wrong_pw]) in out and "401" in out
    assert "%s (%s: " % (no_ca, ports[no_ca]) in out and "certificate" in out
    assert "%s (%s: " % (busy, ports[busy]) in out and "503" in out
    assert "%s (%s" % (fine, ports[fine]) not in out
    assert "not-the-password" not in out
    assert all(power_of(lab, n) == "running" for n in lab.hosts)
    assert all(len(lab.redfish_log(n)) == before[n] for n in down)      # no reset reached any of them
