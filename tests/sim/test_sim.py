"""The fleet simulator (lab/sim.py): N hosts, each its own sshd, network and mount namespace and
captured machine, reached over real SSH by real fleetnap modules."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from livelock import live_cpuidle_lock
from simtools import SIM_HOSTS, SIM_MACHINES, SIM_NAME, captured_states, captured_value

pytestmark = pytest.mark.sim

MACHINES = SIM_MACHINES.split(",")
REAL_CPU = Path("/sys/devices/system/cpu")


def real_disables():
    return {str(p): p.read_text() for p in REAL_CPU.glob("cpu[0-9]*/cpuidle/state[0-9]*/disable")}


def test_hosts_are_up_with_round_robin_machines(sim):
    table = sim.table()
    assert [h["name"] for h in table["hosts"]] == ["%s%d" % (SIM_NAME, i) for i in range(1, SIM_HOSTS + 1)]
    assert [h["machine"] for h in table["hosts"]] == [MACHINES[i % len(MACHINES)] for i in range(SIM_HOSTS)]
    assert len({h["ip"] for h in table["hosts"]}) == SIM_HOSTS
    inv = (sim.inventory / "hosts.yml").read_text()
    for h in table["hosts"]:
        assert '"fleetnap_sim_machine": "%s"' % h["machine"] in inv
    # up again: every running host is kept, nothing restarted
    out = sim.cli("up", "--hosts", str(SIM_HOSTS)).stdout
    assert '"kept": %d' % SIM_HOSTS in out and '"started": 0' in out
    assert [h["pid"] for h in sim.table()["hosts"]] == [h["pid"] for h in table["hosts"]]


def test_each_host_reports_its_own_captured_machine(sim):
    """cpuidle_info over SSH on every host = the raw capture of that host's machine."""
    results = sim.ansible("sim", "cpuidle_info", {"per_cpu": True})
    table = {h["name"]: h for h in sim.table()["hosts"]}
    assert set(results) == set(table)
    for name, res in results.items():
        assert not res.get("failed") and not res.get("unreachable"), res
        machine = table[name]["machine"]
        facts = res["ansible_facts"]["fleetnap_cpuidle"]
        raw = captured_states(machine)
        assert facts["driver"] == captured_value(machine, "/sys/devices/system/cpu/cpuidle/current_driver")
        assert len(facts["cpus"]) == len(raw), name
        for cpu in facts["cpus"]:
            want = raw[cpu["cpu"]]
            got = {s["index"]: (s["name"], s["latency_us"], s["disable"]) for s in cpu["states"]}
            assert got == {i: (st["name"], int(st["latency"]), int(st["disable"])) for i, st in want.items()}, (name, cpu["cpu"])


def test_hosts_with_different_machines_differ(sim):
    results = sim.ansible("%s1:%s2" % (SIM_NAME, SIM_NAME), "cpuidle_info", {"per_cpu": False})
    one = results["%s1" % SIM_NAME]["ansible_facts"]["fleetnap_cpuidle"]
    two = results["%s2" % SIM_NAME]["ansible_facts"]["fleetnap_cpuidle"]
    assert (one["driver"], one["online_cpus"]) == ("intel_idle", "0-47")        # ivbep1
    assert (two["driver"], two["online_cpus"]) == ("acpi_idle", "0-127")        # milan0
    assert [s["name"] for s in one["states"]] != [s["name"] for s in two["states"]]
    # each host's /proc/cmdline is its machine's captured command line
    assert "ivbep1" in sim.read("%s1" % SIM_NAME, "/proc/cmdline")
    assert "ivbep1" not in sim.read("%s2" % SIM_NAME, "/proc/cmdline")


def test_a_write_on_one_host_is_not_seen_by_another(sim):
    """sim1 and sim4 run the same captured machine: cpuidle_qos on sim1 changes sim1 only,
    and never the kernel running the test."""
    a, b = "%s1" % SIM_NAME, "%s4" % SIM_NAME
    table = {h["name"]: h for h in sim.table()["hosts"]}
    assert table[a]["machine"] == table[b]["machine"] == "ivbep1"
    path = "/sys/devices/system/cpu/cpu5/cpuidle/state4/disable"      # ivbep1 C6
    assert sim.read(a, path).strip() == sim.read(b, path).strip() == "0"
    # The live_kernel tests of test-unit (beside this stage in make test) change the real settings
    # and put them back: none of them runs between the two reads (tests/livelock.py).
    with live_cpuidle_lock():
        real_before = real_disables()
        res = sim.ansible(a, "cpuidle_qos", {"disable": ["C6"]})[a]
        assert res.get("changed") and not res.get("failed"), res
        assert sim.read(a, path).strip() == "1"
        assert sim.read(b, path).strip() == "0"
        # what cpuidle_qos records for state=absent lives on sim1 only
        assert sim.read(a, "/var/lib/fleetnap/cpuidle_qos.orig.json")
        with pytest.raises(AssertionError, match="No such file"):
            sim.read(b, "/var/lib/fleetnap/cpuidle_qos.orig.json")
        assert real_disables() == real_before
    # a second run changes nothing (the write really landed where the module reads)
    again = sim.ansible(a, "cpuidle_qos", {"disable": ["C6"]})[a]
    assert not again.get("changed") and not again.get("failed"), again

    # reset gives sim1 its pristine captured machine back
    sim.cli("reset", a)
    assert sim.read(a, path).strip() == "0"
    with pytest.raises(AssertionError, match="No such file"):
        sim.read(a, "/var/lib/fleetnap/cpuidle_qos.orig.json")


def test_bad_input_is_refused_and_changes_nothing(sim):
    before = sim.table()
    for args, msg in ((["up", "--hosts", "0"], "use 1..126"),
                      (["--subnet", "8.8.8.0/24", "status"], "not a private network"),
                      (["--name", "waytoolong", "status"], "1-5 lowercase"),
                      (["reset", "nosuchhost"], "unknown host")):
        proc = sim.cli(*args, check=False)
        assert proc.returncode != 0 and msg in proc.stderr, (args, proc.stderr)
    # another subnet (or name) for the running simulator is refused, not half-applied
    proc = sim.cli("--subnet", "10.253.0.0/24", "up", "--hosts", "2", check=False)
    assert proc.returncode != 0 and "down` first" in proc.stderr, proc.stderr
    assert sim.table() == before
    assert all(r["ssh"] for r in json.loads(sim.cli("status", "--json").stdout))


def test_host_keys_are_checked_against_the_simulators_known_hosts(sim):
    """Ansible reaches the hosts with host key checking on (ansible.cfg does not switch it off):
    with the right known_hosts every host answers; with one host's key swapped for another's,
    that host is refused and the others still answer."""
    known = sim.state / "known_hosts"
    lines = known.read_text().splitlines()
    table = sim.table()
    assert [line.split()[0] for line in lines] == [h["ip"] for h in table["hosts"]]
    assert len({line.split()[2] for line in lines}) == len(lines)      # a key of its own each
    a, b = table["hosts"][0], table["hosts"][1]
    original = known.read_text()
    try:
        swapped = [lines[0].split()[0] + " " + " ".join(lines[1].split()[1:])] + lines[1:]
        known.write_text("\n".join(swapped) + "\n")
        shutil.rmtree(sim.state / "cp", ignore_errors=True)     # no reused connection
        results = sim.ansible("%s:%s" % (a["name"], b["name"]), "ansible.builtin.ping")
        assert results[b["name"]].get("ping") == "pong", results[b["name"]]
        assert results[a["name"]].get("unreachable"), results[a["name"]]
        assert "host key" in results[a["name"]]["msg"].lower(), results[a["name"]]["msg"]
    finally:
        known.write_text(original)
    shutil.rmtree(sim.state / "cp", ignore_errors=True)
    assert sim.ansible(a["name"], "ansible.builtin.ping")[a["name"]].get("ping") == "pong"


def test_down_leaves_nothing_behind(sim):
    pids = [h["pid"] for h in sim.table()["hosts"]]
    out = sim.cli("down").stdout
    assert '"bridge_removed": true' in out
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "fleetnap-%s-" % SIM_NAME not in netns
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not re.search(r"\bfn%s(\d+|br)\b" % SIM_NAME, links)
    for pid in pids:     # gone, or a zombie waiting for PID 1 (this container's init) to reap it
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            assert Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] == "Z", pid
    marker = str(sim.state)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            mounts = (proc / "mountinfo").read_text()
        except (OSError, ValueError):
            continue
        assert marker not in cmdline, (proc.name, cmdline)
        assert "fleetnap-sim-%s" % SIM_NAME not in mounts and marker not in mounts, proc.name
    assert not (sim.inventory / "hosts.yml").exists()
    # and down again is a no-op that succeeds
    assert sim.cli("down").returncode == 0
