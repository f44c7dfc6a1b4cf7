"""The simulated fleet has power (lab/sim.py + lab/simhost.py): every host a real ipmi_sim BMC
whose power off/on/soft stops and starts it, a real suspend (the host's own write to its
/sys/power/state makes it silent) and a wake by a real magic packet naming its MAC, after the
host's own resume time. gear_shift.yml runs on it unchanged.

The ground truth is each host's power log (power.jsonl, written by its power program); what is
checked against it is what an operator sees: SSH answering or not, the BMC's chassis status.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from sim import ssh_answers as answers
from simtools import REPO, Sim, VENV_BIN, running_sim

pytestmark = pytest.mark.sim

NAME, SUBNET, HOSTS = "simp", "10.252.1.0/24", 6
RESUME = "uniform:0.3:1.5"
BOOT_S = 2.0            # after a power-on (not the first) the host answers after this


@pytest.fixture(scope="module")
def psim(tmp_path_factory):
    yield from running_sim(tmp_path_factory, NAME, SUBNET, HOSTS, SIM_RESUME=RESUME, SIM_BOOT=str(BOOT_S))


def wait(what: str, cond, timeout: float = 30.0, step: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def ssh(psim: Sim, host: str, command: str) -> subprocess.CompletedProcess:
    h = psim.hosts()[host]
    return subprocess.run(["ssh", "-i", str(psim.state / "id_ed25519"), "-o", "BatchMode=yes",
                           "-o", "UserKnownHostsFile=%s" % (psim.state / "known_hosts"),
                           "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5",
                           "root@%s" % h["ip"], command], capture_output=True, text=True, timeout=60)


def suspend(psim: Sim, host: str, state: str = "mem") -> None:
    """What gear_member does on a host without systemd: a detached write a moment later."""
    proc = ssh(psim, host, "trap '' HUP; setsid /bin/sh -c 'sleep 0.3; echo %s > /sys/power/state' "
                           "</dev/null >/dev/null 2>&1 &" % state)
    assert proc.returncode == 0, proc.stderr


def magic_packet(psim: Sim, host: str) -> dict:
    """fleetnap's own wake_on_lan module, run on the controller as a gear shift runs it."""
    h = psim.hosts()[host]
    args = {"macs": [h["mac"]], "broadcast": str(ipaddress.ip_network(SUBNET).broadcast_address),
            "port": 9}
    proc = subprocess.run([str(VENV_BIN / "ansible"), "localhost", "-m", "wake_on_lan", "-a", json.dumps(args),
                           "-o"], capture_output=True, text=True, timeout=120, cwd=str(REPO),
                          env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")))
    assert proc.returncode == 0 and "CHANGED" in proc.stdout, proc.stdout + proc.stderr
    return args


def shift_to(psim: Sim, gear, *extra: str) -> dict:
    """gear_shift.yml as an operator runs it (its state in GEAR); it must succeed; its state.json."""
    proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, *extra)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads((gear / "state.json").read_text())


def observed_in_finish(stdout: str) -> bool:
    """Whether the finish play of a gear_shift.yml run observed every host again (its
    gear_observe task ran, not skipped)."""
    finish = stdout.split("PLAY [Gear shift - finish", 1)[1]
    task = finish.split("TASK [gear_shift : Observe every host at once", 1)
    return len(task) == 2 and re.search(r"^(?:ok|changed): \[\S+ -> localhost\]", task[1].split("TASK [", 1)[0],
                                        re.M) is not None


def chassis(psim: Sim, host: str) -> str:
    out = psim.ipmitool(host, "chassis", "power", "status")
    return out.stdout.strip().rsplit(" ", 1)[-1] if out.returncode == 0 else "no-bmc"


def task_ran(out: str, name: str) -> bool:
    """Whether the first task of ``out`` (a play's output) whose name starts with ``name`` ran on the
    controller (an ok or changed line "host -> localhost"), not skipped."""
    task = out.split("TASK [gear_shift : " + name, 1)
    return len(task) == 2 and re.search(r"^(?:ok|changed): \[\S+ -> localhost\]", task[1].split("TASK [", 1)[0],
                                        re.M) is not None


def last(psim: Sim, host: str) -> dict:
    return psim.power_log(host)[-1]


def test_up_gives_every_host_a_bmc_a_mac_and_its_own_resume_time(psim):
    hosts, status = psim.hosts(), psim.status()
    assert len(hosts) == HOSTS
    assert len({h["bmc_ip"] for h in hosts.values()}) == len({h["mac"] for h in hosts.values()}) == HOSTS
    for name, h in hosts.items():
        assert status[name]["power"] == "on" and status[name]["ssh"] and status[name]["bmc_up"], status[name]
        assert 0.3 <= h["resume_s"] <= 1.5
        assert chassis(psim, name) == "on"
        # the MAC is the one the host's own interface has
        link = ssh(psim, name, "cat /sys/class/net/eth0/address").stdout.strip()
        assert link == h["mac"], (name, link)
    assert len({h["resume_s"] for h in hosts.values()}) > 1          # drawn per host
    inv = (psim.inventory / "hosts.yml").read_text()
    assert (psim.state / "bmc-password").read_text().strip() not in inv    # a file lookup, not the secret
    assert (psim.state / "bmc-password").stat().st_mode & 0o077 == 0
    # a bad distribution is refused, naming the option
    proc = psim.cli("--resume", "lognormal:1", "status", check=False)
    assert proc.returncode != 0 and "resume distribution 'lognormal:1'" in proc.stderr, proc.stderr


def test_bmc_power_off_on_and_soft_stop_and_start_the_host_and_its_disk_survives(psim):
    host = "%s1" % NAME
    ip = psim.hosts()[host]["ip"]
    assert ssh(psim, host, "echo kept > /etc/fleetnap-disk; echo gone > /run/fleetnap-ram").returncode == 0
    out = psim.ipmitool(host, "chassis", "power", "off")
    assert out.returncode == 0, out.stderr
    wait("chassis off", lambda: chassis(psim, host) == "off")
    assert not answers(ip, 1.0) and last(psim, host)["state"] == "off"
    assert last(psim, host)["why"] == "BMC power off"
    assert psim.ipmitool(host, "chassis", "power", "on").returncode == 0
    wait("SSH after power on", lambda: answers(ip))
    assert chassis(psim, host) == "on"
    assert ssh(psim, host, "cat /etc/fleetnap-disk").stdout == "kept\n"          # the disk
    assert ssh(psim, host, "cat /run/fleetnap-ram").returncode != 0             # memory is gone
    assert ssh(psim, host, "cat /sys/power/state").stdout == "freeze mem\n"      # a fresh kernel
    # soft off: the OS shuts down (the host's shutdown time), then the chassis is off
    assert psim.ipmitool(host, "chassis", "power", "soft").returncode == 0
    wait("chassis off after soft", lambda: chassis(psim, host) == "off")
    assert last(psim, host)["why"].startswith("BMC soft off") and not answers(ip, 1.0)
    assert psim.ipmitool(host, "chassis", "power", "on").returncode == 0
    wait("SSH after power on", lambda: answers(ip))


def test_the_hosts_own_write_suspends_it_and_a_magic_packet_wakes_it_after_its_resume_time(psim):
    host = "%s2" % NAME
    h = psim.hosts()[host]
    suspend(psim, host)
    wait("S3", lambda: last(psim, host)["state"] == "S3")
    assert not answers(h["ip"], 1.0)
    assert chassis(psim, host) == "on"                      # S3: the BMC still sees the chassis on
    sent = time.time()
    magic_packet(psim, host)
    wait("SSH after the magic packet", lambda: answers(h["ip"]))
    woke = last(psim, host)
    assert woke["state"] == "on" and woke["why"] == "magic packet"
    assert woke["t"] - sent >= h["resume_s"] - 0.05, (woke, sent, h["resume_s"])   # its own resume time
    # the state file reads back as the kernel offers it; a packet for another MAC wakes nothing
    assert ssh(psim, host, "cat /sys/power/state").stdout == "freeze mem\n"
    other = "%s3" % NAME
    suspend(psim, host)
    wait("S3 again", lambda: last(psim, host)["state"] == "S3")
    magic_packet(psim, other)                              # sim3 is awake: nothing happens to it
    time.sleep(h["resume_s"] + 1.0)
    assert last(psim, host)["state"] == "S3" and last(psim, other)["state"] == "on"
    magic_packet(psim, host)
    wait("SSH", lambda: answers(h["ip"]))


def test_mem_with_s2idle_selected_is_suspend_to_idle(psim):
    host = "%s3" % NAME
    assert ssh(psim, host, "echo s2idle > /sys/power/mem_sleep").returncode == 0
    suspend(psim, host)
    wait("s2idle", lambda: last(psim, host)["state"] == "s2idle")
    magic_packet(psim, host)
    wait("SSH", lambda: answers(psim.hosts()[host]["ip"]))
    assert ssh(psim, host, "echo deep > /sys/power/mem_sleep").returncode == 0


def test_faults_lost_magic_packets_a_hung_host_and_a_dead_bmc(psim):
    host = "%s4" % NAME
    h = psim.hosts()[host]
    # lost magic packets: one call's three packets are dropped, the next call wakes the host
    psim.cli("fault", host, "drop-wol", "3")
    suspend(psim, host)
    wait("S3", lambda: last(psim, host)["state"] == "S3")
    magic_packet(psim, host)
    time.sleep(h["resume_s"] + 1.0)
    log = psim.power_log(host)
    assert log[-1]["state"] == "S3" and sum(1 for r in log if "dropped" in r["why"]) == 3
    magic_packet(psim, host)
    wait("SSH", lambda: answers(h["ip"]))
    # a hung host: silent, deaf to magic packets; only its BMC brings it back
    psim.cli("fault", host, "hang")
    wait("hung", lambda: last(psim, host)["state"] == "hung")
    assert not answers(h["ip"], 1.0) and chassis(psim, host) == "on"
    magic_packet(psim, host)
    time.sleep(h["resume_s"] + 1.0)
    assert last(psim, host)["state"] == "hung"
    assert psim.ipmitool(host, "chassis", "power", "off").returncode == 0
    wait("off", lambda: chassis(psim, host) == "off")
    assert psim.ipmitool(host, "chassis", "power", "on").returncode == 0
    wait("SSH after the power cycle", lambda: answers(h["ip"]))
    # a dead BMC: no answer, the host runs on; back, it reports the chassis as it is
    psim.cli("fault", host, "bmc-down")
    assert chassis(psim, host) == "no-bmc" and answers(h["ip"])
    assert not psim.status()[host]["bmc_up"]
    psim.cli("fault", host, "bmc-up")
    wait("BMC on again", lambda: chassis(psim, host) == "on", timeout=20)
    # faults are checked: an unknown host is refused
    proc = psim.cli("fault", "nosuch", "hang", check=False)
    assert proc.returncode != 0 and "unknown host" in proc.stderr


def test_gear_observe_sees_every_host_and_its_bmc_at_once(psim, tmp_path):
    """fleetnap's gear_observe (one call for the fleet) against the real BMCs: a host asleep in S3
    (silent, chassis on), one powered off (silent, chassis off), one whose BMC is dead (answers,
    bmc_error), one without credentials, the others on; the password in no output."""
    hosts = psim.hosts()
    asleep, off, dead, nocred = "%s1" % NAME, "%s2" % NAME, "%s3" % NAME, "%s4" % NAME
    password = (psim.state / "bmc-password").read_text().strip()
    suspend(psim, asleep)
    wait("S3", lambda: last(psim, asleep)["state"] == "S3")
    assert psim.ipmitool(off, "chassis", "power", "off").returncode == 0
    wait("off", lambda: last(psim, off)["state"] == "off")
    psim.cli("fault", dead, "bmc-down")
    try:
        targets = [{"name": n, "address": h["ip"], "bmc_address": h["bmc_ip"], "bmc_user": "admin",
                    "bmc_password": "" if n == nocred else password} for n, h in hosts.items()]
        args = {"hosts": targets, "probe_timeout": 2, "bmc_concurrency": 8, "rate_limit_dir": str(tmp_path / "rl")}
        proc = subprocess.run([str(VENV_BIN / "ansible"), "localhost", "-vvv", "-m", "gear_observe", "-a", json.dumps(args)],
                              capture_output=True, text=True, timeout=120, cwd=str(REPO),
                              env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert password not in proc.stdout + proc.stderr
        seen = json.loads(proc.stdout[proc.stdout.index("{", proc.stdout.index("SUCCESS")):])["hosts"]
    finally:
        psim.cli("fault", dead, "bmc-up")
    assert (seen[asleep]["ssh"], seen[asleep]["bmc"]) == (False, "on")
    assert (seen[off]["ssh"], seen[off]["bmc"]) == (False, "off")
    assert seen[dead]["ssh"] and seen[dead]["bmc"] is None and "did not answer" in seen[dead]["bmc_error"]
    assert seen[nocred]["ssh"] and seen[nocred]["bmc"] is None and "no password for BMC" in seen[nocred]["bmc_error"]
    for n in set(hosts) - {asleep, off, dead, nocred}:
        assert (seen[n]["ssh"], seen[n]["bmc"], seen[n]["bmc_error"]) == (True, "on", ""), (n, seen[n])
    # back as they were, for the tests after this one
    magic_packet(psim, asleep)
    assert psim.ipmitool(off, "chassis", "power", "on").returncode == 0
    wait("SSH", lambda: answers(hosts[asleep]["ip"]) and answers(hosts[off]["ip"]))
    wait("BMC", lambda: chassis(psim, dead) == "on", timeout=20)


def test_gear_shift_parks_in_s3_wakes_by_wol_and_by_ipmi_on_the_simulated_fleet(psim, tmp_path):
    """gear_shift.yml unchanged: 3 -> 1 parks two groups in S3 (the hosts' own writes), 1 -> 3
    wakes them by magic packets; then 3 -> 2 powers a group off through the BMCs and 2 -> 3
    powers it on through them. The power logs agree with every result."""
    gear = tmp_path / "gear"
    hosts = psim.hosts()
    shift = functools.partial(shift_to, psim, gear)

    before = {n: len(psim.power_log(n)) for n in hosts}
    proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, "-e", "gear_shift_gear=1")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    parked = [n for n in hosts if last(psim, n)["state"] != "on"]
    assert len(parked) == 4 and len({hosts[n]["gear_group"] for n in parked}) == 2, parked
    for n in parked:
        assert last(psim, n)["state"] == "S3" and not answers(hosts[n]["ip"], 0.5)
    # every park verified by the wave: no second observation round, the record took each parked
    # host as the wave saw it (silent, asleep)
    assert not observed_in_finish(proc.stdout), proc.stdout[-3000:]
    st = json.loads((gear / "state.json").read_text())
    assert sorted(n for n, h in st["hosts"].items() if h["state"] == "asleep") == sorted(parked), st["hosts"]
    for n in set(hosts) - set(parked):
        assert len(psim.power_log(n)) == before[n]                       # untouched
    proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, "-e", "gear_shift_gear=3")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # No health command, no undrain hook, every host parked with its resume hook: the prepare call
    # (on the controller: its line reads "host -> localhost") woke the waves and recorded the shift
    # itself (gear_shift_one_process): the wave task and the record task were skipped, the wake play
    # had no host, and no task ran on a woken host (a task's line names the host alone).
    prepare, rest = proc.stdout.split("PLAY [Gear shift - wake]", 1)
    wake = rest.split("PLAY [Gear shift - down]", 1)[0]
    assert task_ran(prepare, "Take the lock, observe every host at once and plan the shift"), prepare[-3000:]
    assert not task_ran(prepare, "Wake the plan's waves from the controller"), prepare[-3000:]
    assert not task_ran(rest, "Record the shift (state file"), rest[-3000:]
    assert "skipping: no hosts matched" in wake and "TASK [" not in wake, wake[-3000:]
    # nothing was left after that call: the steps it made needless are not passed one by one (the
    # BMC check, check mode, the groups; the finish phase's observation and record: one skipped
    # include each), the result printed once
    finish = rest.split("PLAY [Gear shift - finish", 1)[1]
    for needless in ("Check mode shows the plan", "The hosts the wake play acts on",
                     "Say that the record has an observation from after the shift", "Record the shift"):
        assert "TASK [gear_shift : " + needless not in proc.stdout, (needless, prepare[-2000:], finish[-2000:])
    assert finish.count("TASK [gear_shift : Print the result]") == 1 and task_ran(finish, "Print the result"), \
        finish[-3000:]
    ran = set(re.findall(r"^(?:ok|changed|failed|fatal): \[([^\]\s]+)\]", prepare + wake, re.M))
    assert not ran & set(parked), (sorted(ran), prepare[-3000:])
    st = json.loads((gear / "state.json").read_text())
    assert st["result"] == "ok" and sorted(a["host"] for a in st["actions"] if a["action"] == "up") == sorted(parked)
    # every group on, one wake batch: each parked host's packets went out during the observation,
    # right after its probe's SYN (gear_shift_wake_during_observation), and its probe still saw it
    # asleep, the fastest simulated resume included (its link down drops that SYN; the kernel sends
    # it again after 1 s, past the probe's half second): each is woken by the wave, not found on
    for a in st["actions"]:
        if a["host"] in parked:
            assert "(the first during the observation)" in a["attempts"][0]["report"], a
    for n in parked:
        woke = last(psim, n)
        assert woke["state"] == "on" and woke["why"] == "magic packet", (n, woke)
        assert answers(hosts[n]["ip"])
        # the park's resume hook put mem_sleep back as it was and left nothing in /run (by itself,
        # on the wake: it may finish a moment after the shift)
        wait("%s's resume hook" % n, lambda: ssh(psim, n, "test ! -e /run/fleetnap/park-resume").returncode == 0, 15)
        assert ssh(psim, n, "cat /sys/power/mem_sleep; ls /run/fleetnap 2>&1").stdout.startswith("s2idle [deep]\n")
    # Parked again; one host woken by hand outside a shift (a magic packet of its own): its resume
    # hook puts it back in its in-service policy by itself. The up-shift then, with
    # gear_shift_one_process false, runs one gear_wave call per wave from the prepare play (the
    # hand-woken host put back by the wave, no packet of the shift for it) and a gear_record call.
    shift("-e", "gear_shift_gear=1")
    assert sorted(n for n in hosts if last(psim, n)["state"] == "S3") == sorted(parked)
    by_hand = sorted(parked)[0]
    logged = len(psim.power_log(by_hand))
    magic_packet(psim, by_hand)
    wait("%s woken by hand" % by_hand, lambda: answers(hosts[by_hand]["ip"]), 30)
    wait("%s's resume hook" % by_hand, lambda: ssh(psim, by_hand, "test ! -e /run/fleetnap/park-resume").returncode == 0,
         15)
    assert ssh(psim, by_hand, "cat /sys/power/mem_sleep").stdout.startswith("s2idle [deep]\n")
    proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, "-e", "gear_shift_gear=3",
                         "-e", "gear_shift_one_process=false")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    prepare, rest = proc.stdout.split("PLAY [Gear shift - wake]", 1)
    assert task_ran(prepare, "Wake the plan's waves from the controller"), prepare[-3000:]
    assert task_ran(rest, "Record the shift (state file"), rest[-3000:]
    st = json.loads((gear / "state.json").read_text())
    acts = dict((a["host"], a) for a in st["actions"])
    assert st["result"] == "ok" and acts[by_hand]["action"] == "back" and acts[by_hand]["ok"], st["actions"]
    assert sorted(h for h, a in acts.items() if a["action"] == "up") == sorted(set(parked) - {by_hand})
    assert [e["why"] for e in psim.power_log(by_hand)[logged:]] == ["magic packet"]   # its own, none of the shift
    for n in parked:
        assert last(psim, n)["state"] == "on" and answers(hosts[n]["ip"])
    # by the BMC: power off, then on by IPMI alone; with the parked draw asked for
    # (gear_shift_read_power), the shift observes again after the parks (ipmi_sim reads none)
    proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, "-e", "gear_shift_gear=2",
                         "-e", "gear_shift_down_method=off", "-e", "gear_shift_read_power=true")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert observed_in_finish(proc.stdout), proc.stdout[-3000:]
    off = [n for n in hosts if last(psim, n)["state"] == "off"]
    assert len(off) == 2 and all(last(psim, n)["why"] == "BMC power off" for n in off), off
    st = json.loads((gear / "state.json").read_text())
    assert sorted(n for n, h in st["hosts"].items() if h["state"] == "off") == sorted(off), st["hosts"]
    assert all(chassis(psim, n) == "off" for n in off)
    shift("-e", "gear_shift_gear=3", "-e", '{"gear_shift_up_methods": ["ipmi"]}')
    for n in off:
        assert last(psim, n)["state"] == "on" and last(psim, n)["why"] == "booted" and answers(hosts[n]["ip"])
    assert all(r["power"] == "on" and r["ssh"] for r in psim.status().values())


def test_soft_off_parking_and_wake_on_lan_from_soft_off_slower_than_the_wol_wait(psim, tmp_path):
    """3 -> 2 by soft off (the OS shuts down on the ACPI power button); 2 -> 3 by magic packets,
    which power the hosts on from soft-off (the NIC's standby power asks the BMC), with a WoL
    wait (1 s) shorter than their boot (2 s): the ipmi step finds the chassis on that was off
    before the wake, sends nothing and waits for the boot, and the result names WoL (on the lab,
    TCG guests booting under load outran the WoL wait and the shift failed, calling them hung)."""
    gear = tmp_path / "gear"
    hosts = psim.hosts()
    shift = functools.partial(shift_to, psim, gear)

    shift("-e", "gear_shift_gear=2", "-e", "gear_shift_down_method=soft")
    off = [n for n in hosts if last(psim, n)["state"] == "off"]
    assert len(off) == 2 and all(last(psim, n)["why"].startswith("BMC soft off") for n in off), off
    st = shift("-e", "gear_shift_gear=3", "-e", "gear_shift_wol_timeout_s=1")
    acts = {a["host"]: a for a in st["actions"]}
    assert set(acts) == set(off), st["actions"]
    for n in off:
        a = acts[n]
        assert a["ok"] and a["method"] == "wol", a
        assert [(t["method"], t["ok"]) for t in a["attempts"]] == [("wol", False), ("ipmi", True)], a
        assert "chassis on since the wake (booting), no command sent" in a["attempts"][1]["report"], a
        whys = [r["why"] for r in psim.power_log(n)]
        assert whys[-3:] == ["magic packet while off: the BMC powers it on", "power on", "booted"], whys
        assert answers(hosts[n]["ip"])


def test_gear_member_alone_parks_a_host_in_s3_and_wakes_it(psim, tmp_path):
    """The gear_member role on its own, as a playbook of an operator's would call it: down (the
    host's own checked suspend, then the same gear_wave call gear_shift parks a wave with) and
    up (magic packet), each result checked against the host's power log."""
    host = sorted(psim.hosts())[0]
    out = tmp_path / "results"
    out.mkdir()
    play = tmp_path / "member.yml"
    play.write_text("""
- hosts: %s
  gather_facts: false
  tasks:
    - name: Down, then up
      ansible.builtin.include_role:
        name: gear_member
      vars:
        gear_member_action: "{{ item }}"
        gear_member_power_ok: true
        gear_member_wol_timeout_s: 30
      loop: [down, up]
    - name: Keep the last result
      ansible.builtin.copy:
        content: "{{ gear_member_result | to_json }}"
        dest: "%s/up.json"
        mode: "0644"
      delegate_to: localhost
""" % (host, out))
    before = len(psim.power_log(host))
    proc = psim.playbook(str(play))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    states = [(r["state"], r["why"]) for r in psim.power_log(host)[before:]]
    assert states[0][0] == "S3" and states[-1] == ("on", "magic packet"), states
    up = json.loads((out / "up.json").read_text())
    assert up["ok"] and up["action"] == "up" and up["method"] == "wol", up
    assert answers(psim.hosts()[host]["ip"])


def test_a_host_without_s3_is_parked_by_soft_off_and_a_long_sleep_moves_on_to_power_off(psim, tmp_path):
    """Two claims of docs/gear_shifts.md, each failing without its feature (issue 34):
    - a host whose kernel offers no S3 (its mem_sleep has no deep) is parked by soft-off through
      its BMC in a shift left to decide (fleetnap_down_method auto): the host's own check says
      "no S3" (exit 4) and gear_wave falls back to the BMC, while its group peer goes to S3;
    - the second tier: a host asleep by plan for longer than gear_shift_park_off_after_h is
      powered off by its BMC in the next shift, and a shift back up wakes both."""
    from datetime import date
    from ansible.module_utils.fleetnap.gear import groups_for
    gear = tmp_path / "gear"
    hosts = psim.hosts()
    shift = functools.partial(shift_to, psim, gear)
    _on, off_groups = groups_for(2, 3, date.today())
    going = sorted((n for n in hosts if hosts[n]["gear_group"] in off_groups), key=lambda n: int(n[len(NAME):]))
    assert len(going) == 2, going
    no_s3, peer = going
    kept = ssh(psim, no_s3, "cat /sys/power/mem_sleep").stdout
    assert ssh(psim, no_s3, "printf '[s2idle]\\n' > /sys/power/mem_sleep").returncode == 0
    try:
        st = shift("-e", "gear_shift_gear=2")
        assert last(psim, no_s3)["state"] == "off" and last(psim, no_s3)["why"].startswith("BMC soft off"), \
            psim.power_log(no_s3)[-3:]
        assert last(psim, peer)["state"] == "S3"
        acts = {a["host"]: a for a in st["actions"]}
        assert acts[no_s3]["ok"] and "no S3" in json.dumps(acts[no_s3]), acts[no_s3]
        assert st["hosts"][no_s3]["state"] == "off" and st["hosts"][peer]["state"] == "asleep"
        # the second tier: the peer asleep longer than the limit (a second here) is powered off
        time.sleep(1.5)
        st = shift("-e", "gear_shift_gear=2", "-e", "gear_shift_park_off_after_h=0.0002")
        assert last(psim, peer)["state"] == "off" and last(psim, peer)["why"] == "BMC power off", \
            psim.power_log(peer)[-3:]
        assert "moved on to power-off" in json.dumps(st), st["actions"]
        assert st["hosts"][peer]["state"] == "off"
        shift("-e", "gear_shift_gear=3")
        for n in going:
            assert last(psim, n)["state"] == "on" and answers(hosts[n]["ip"]), psim.power_log(n)[-3:]
    finally:
        ssh(psim, no_s3, "printf '%%s\\n' %s > /sys/power/mem_sleep" % shlex.quote(kept.strip()))


def test_a_park_that_fails_stops_the_later_batches(psim, tmp_path):
    """The stop rule (gear_state, issue 35): batches of one host; the first host going down has no
    S3 and no fallback allowed, so its park fails and it stays up; the next batch is not touched
    (gear_state answered stop), the shift fails naming the host, and a shift back up converges."""
    from datetime import date
    from ansible.module_utils.fleetnap.gear import groups_for
    gear = tmp_path / "gear"
    hosts = psim.hosts()
    _on, off_groups = groups_for(2, 3, date.today())
    going = sorted((n for n in hosts if hosts[n]["gear_group"] in off_groups), key=lambda n: int(n[len(NAME):]))
    assert len(going) == 2, going
    no_s3, peer = going
    kept = ssh(psim, no_s3, "cat /sys/power/mem_sleep").stdout
    logged = len(psim.power_log(peer))
    assert ssh(psim, no_s3, "printf '[s2idle]\\n' > /sys/power/mem_sleep").returncode == 0
    try:
        proc = psim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, "-e", "gear_shift_gear=2",
                             "-e", "gear_shift_batch_size=1", "-e", "gear_shift_down_method=suspend",
                             "-e", "gear_member_no_s3_fallback=")
        assert proc.returncode != 0, proc.stdout[-3000:]
        st = json.loads((gear / "state.json").read_text())
        assert st["result"] == "failed" and no_s3 in st["reason"], st["reason"]
        assert last(psim, no_s3)["state"] == "on" and answers(hosts[no_s3]["ip"])
        assert len(psim.power_log(peer)) == logged and answers(hosts[peer]["ip"])     # never told to go down
        assert sorted(a["host"] for a in st["actions"]) == [no_s3], st["actions"]
        assert "in_progress" not in st                                                 # the record replaced it
    finally:
        ssh(psim, no_s3, "printf '%%s\\n' %s > /sys/power/mem_sleep" % shlex.quote(kept.strip()))
    shift_to(psim, gear, "-e", "gear_shift_gear=3")
    assert all(answers(hosts[n]["ip"]) for n in going)


def park_play(tmp_path, host):
    """A playbook that parks ``host`` with gear_member alone (no shift)."""
    play = tmp_path / "park.yml"
    play.write_text("""
- hosts: %s
  gather_facts: false
  tasks:
    - name: Park
      ansible.builtin.include_role:
        name: gear_member
      vars:
        gear_member_action: down
        gear_member_power_ok: true
""" % host)
    return play


def test_a_parked_host_woken_by_a_stray_packet_puts_its_sleep_policy_back_by_itself(psim, tmp_path):
    """gear_member's S3 park on a host without systemd: the park's resume hook (a detached shell)
    writes the state itself and waits for the kernel's count of suspends to move; a magic packet
    sent by hand, outside any shift, wakes the host, and with no command from the controller the
    host's in-service mem_sleep (s2idle) is back, the park's record and the hook are gone."""
    host = sorted(psim.hosts())[1]
    look = "cat /sys/power/suspend_stats/success /sys/power/mem_sleep; ls -A /run/fleetnap 2>/dev/null | wc -l"
    assert ssh(psim, host, "echo s2idle > /sys/power/mem_sleep").returncode == 0
    before = wait("the kernel's view of s2idle", lambda: (lambda o: o[1].startswith("[s2idle]") and o)(
        ssh(psim, host, look).stdout.split("\n")), timeout=10)
    play = park_play(tmp_path, host)
    logged = len(psim.power_log(host))
    proc = psim.playbook(str(play))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert last(psim, host)["state"] == "S3"
    magic_packet(psim, host)                            # by hand: no shift, no role
    wait("%s to answer" % host, lambda: answers(psim.hosts()[host]["ip"]), timeout=60)
    after = wait("the resume hook to finish", lambda: (lambda o: o[2] == "0" and o)(
        ssh(psim, host, look).stdout.split("\n")), timeout=15)
    assert int(after[0]) == int(before[0]) + 1, (before, after)
    assert after[1].startswith("[s2idle]"), after
    states = [r["state"] for r in psim.power_log(host)[logged:]]
    assert states == ["S3", "on"], states
    assert ssh(psim, host, "echo deep > /sys/power/mem_sleep").returncode == 0


def test_a_profile_knob_changed_during_a_park_is_put_back_by_the_hosts_resume_path(psim, tmp_path):
    """Issue 38: fleetnap_profile sets EPP, EPB, a frequency cap and the C-states on a simulated host with a
    captured HWP machine (aml-y-2: intel_pstate, EPP, EPB); the host is parked in S3 by
    gear_member; while it sleeps its EPP is changed behind its back (as a resume that resets EPP
    does); a magic packet wakes it, and with no command from the controller its resume path
    writes the profile's EPP back and counts it (drift.counts, fleetnap_profile_drift_total)."""
    host = [n for n, h in sorted(psim.hosts().items()) if h["machine"] == "aml-y-2"][0]
    metrics = "/var/lib/fleetnap-test-metrics"
    assert ssh(psim, host, "mkdir -p %s" % metrics).returncode == 0
    profile = {"cstates": {"max_latency_us": 50}, "sleep": {"manage": False}, "metrics_dir": metrics,
               "cpufreq": {"epp": "power", "epb": "power", "max_khz": "50%"}}
    res = psim.ansible(host, "fleetnap_profile", profile)[host]
    assert not res.get("failed") and res["cpufreq"]["writes"] == 4 + 4 + 4, res
    epp = "/sys/devices/system/cpu/cpufreq/policy%d/energy_performance_preference"
    assert [psim.read(host, epp % n).strip() for n in range(4)] == ["power"] * 4
    play = park_play(tmp_path, host)
    proc = psim.playbook(str(play))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    wait("%s asleep" % host, lambda: last(psim, host)["state"] == "S3", timeout=30)
    # During the park, from outside the host (its processes are frozen): two policies' EPP reset.
    for n in (0, 3):
        psim.write(host, epp % n, "balance_performance\n")
    magic_packet(psim, host)
    wait("%s to answer" % host, lambda: answers(psim.hosts()[host]["ip"]), timeout=60)
    wait("the resume hook to finish", lambda: ssh(psim, host, "test ! -e /run/fleetnap/park-resume").returncode == 0,
         timeout=15)
    assert [psim.read(host, epp % n).strip() for n in range(4)] == ["power"] * 4
    assert psim.read(host, "/var/lib/fleetnap/drift.counts") == "epp 2\n"
    assert 'fleetnap_profile_drift_total{knob="epp"} 2' in psim.read(host, metrics + "/fleetnap_profile_drift.prom")
    # The next apply of the profile changes nothing and reports the drift (decisions.json keeps it).
    again = psim.ansible(host, "fleetnap_profile", profile)[host]
    assert not again.get("changed") and again["profile_drift"] == {"epp": 2}, again


def test_down_stops_every_bmc_and_power_program(psim):
    dirs = [h["dir"] for h in psim.hosts().values()]
    psim.cli("down")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert not any(d in cmd for d in dirs), cmd
    assert not any(Path(d).exists() for d in dirs)
