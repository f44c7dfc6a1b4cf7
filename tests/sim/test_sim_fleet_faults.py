"""Faults at fleet scale (issue 17): gear_shift.yml on 100 simulated hosts, each with its own
ipmi_sim BMC, real S3 by its own write, real magic packets.

- 2 BMCs of hosts that would go down do not answer: the shift stops before anything is powered
  down, naming both; every host still answers.
- 1 host of a group that stays active is silent before a down-shift: the health gate refuses to
  go lower (nothing goes down), the silent host is left alone and named.
- 5 % of the parked hosts lose their magic packets on the way up: their BMC takes over (a
  parked host asleep in S3 is power-cycled, it is drained), every host is back, each result says
  how (wol, or wol failed then ipmi, and how many times the packets were sent). Two more lose
  only their first packets: the packets sent again wake them, by WoL.

No host is lost in any of them: the simulator's own power logs are the ground truth.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import pytest

from ansible.module_utils.fleetnap.gear import groups_for
from sim import ssh_answers as answers
from simtools import Sim, running_sim

pytestmark = pytest.mark.sim

NAME, SUBNET, HOSTS = "simf", "10.252.2.0/24", 100


@pytest.fixture(scope="module")
def fsim(tmp_path_factory):
    yield from running_sim(tmp_path_factory, NAME, SUBNET, HOSTS, SIM_RESUME="uniform:0.2:2", SIM_BOOT="1")


@pytest.fixture(scope="module")
def gear(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gear")


def shift(fsim: Sim, gear: Path, *extra: str):
    proc = fsim.playbook("gear_shift.yml", "-e", "gear_shift_state_dir=%s" % gear, *extra, timeout=900)
    st = json.loads((gear / "state.json").read_text())
    # what failed first, then the end, for the assertion messages
    proc.why = "\n".join([ln for ln in proc.stdout.splitlines() if "fatal:" in ln or "ERROR" in ln][:10]
                         + [proc.stdout[-3000:]])
    return proc, st


def in_groups(fsim: Sim, groups) -> list[str]:
    return sorted((n for n, h in fsim.hosts().items() if h["gear_group"] in groups),
                  key=lambda n: int(n[len(NAME):]))


def all_answer(fsim: Sim, but=()) -> list[str]:
    """Hosts that do not answer SSH (except ``but``)."""
    hosts = fsim.hosts()
    return [n for n in hosts if n not in but and not answers(hosts[n]["ip"], 3.0)]


def power(fsim: Sim, name: str) -> str:
    return fsim.power_log(name)[-1]["state"]


def test_two_unreachable_bmcs_stop_the_shift_before_anything_goes_down(fsim, gear):
    _, off1 = groups_for(1, 3, datetime.date.today())
    dead = in_groups(fsim, off1)[:2]
    before = {n: len(fsim.power_log(n)) for n in fsim.hosts()}
    for n in dead:
        fsim.cli("fault", n, "bmc-down")
    try:
        proc, st = shift(fsim, gear, "-e", "gear_shift_gear=1")
    finally:
        for n in dead:
            fsim.cli("fault", n, "bmc-up")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "gear shift stopped before powering anything down: the BMC of" in out
    for n in dead:
        assert n in st["reason"] and fsim.hosts()[n]["bmc_ip"] in out, st["reason"]
    assert st["result"] == "failed"
    assert {n: len(fsim.power_log(n)) for n in fsim.hosts()} == before        # nothing was touched
    assert all_answer(fsim) == []


def test_a_silent_host_of_an_active_group_refuses_going_lower(fsim, gear):
    on1, _ = groups_for(1, 3, datetime.date.today())
    silent = in_groups(fsim, on1)[3]
    fsim.cli("fault", silent, "hang")
    try:
        deadline = time.monotonic() + 30
        while power(fsim, silent) != "hung" and time.monotonic() < deadline:
            time.sleep(0.1)
        before = {n: len(fsim.power_log(n)) for n in fsim.hosts()}
        proc, st = shift(fsim, gear, "-e", "gear_shift_gear=1")
        assert proc.returncode != 0 and st["result"] == "refused", st
        assert silent in st["reason"] and "not going lower" in st["reason"], st["reason"]
        assert [a for a in st.get("actions", []) if a.get("action") == "down"] == []
        after = {n: len(fsim.power_log(n)) for n in fsim.hosts()}
        assert after == before                       # nothing down, the silent host left alone
        assert power(fsim, silent) == "hung"
        assert all_answer(fsim, but=[silent]) == []
    finally:
        # the operator's fix: a power cycle of the hung host by its BMC
        assert fsim.ipmitool(silent, "chassis", "power", "off").returncode == 0
        deadline = time.monotonic() + 30
        while power(fsim, silent) != "off" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fsim.ipmitool(silent, "chassis", "power", "on").returncode == 0
        deadline = time.monotonic() + 60
        while not answers(fsim.hosts()[silent]["ip"], 2.0) and time.monotonic() < deadline:
            time.sleep(0.5)


def test_lost_magic_packets_are_taken_over_by_the_bmc_and_no_host_is_lost(fsim, gear):
    assert all_answer(fsim) == []
    on1, off1 = groups_for(1, 3, datetime.date.today())
    proc, st = shift(fsim, gear, "-e", "gear_shift_gear=1")
    assert proc.returncode == 0, proc.why
    parked = in_groups(fsim, off1)
    assert len(parked) >= 60 and st["result"] == "ok"
    assert all(power(fsim, n) == "S3" for n in parked)
    assert all_answer(fsim, but=parked) == []
    # 5 % of the fleet: every magic packet is lost, however often the wave sends them (every 2 s
    # asked: every 4 s, a connection attempt and a greeting's wait, the least between two sends)
    lost = parked[::len(parked) // 5][:5]
    for n in lost:
        fsim.cli("fault", n, "drop-wol", "1000")
    # two more lose the first send's three packets only: a later send wakes them
    first_lost = [n for n in parked if n not in lost][:2]
    for n in first_lost:
        fsim.cli("fault", n, "drop-wol", "3")
    try:
        proc, st = shift(fsim, gear, "-e", "gear_shift_gear=3", "-e", "gear_shift_wol_timeout_s=10",
                         "-e", "gear_shift_wol_resend_s=2")
    finally:
        for n in lost:
            fsim.cli("fault", n, "drop-wol", "0")
    assert proc.returncode == 0, proc.why
    assert st["result"] == "ok" and st["gear"] == 3
    acts = {a["host"]: a for a in st["actions"]}
    assert set(acts) == set(parked)
    for n in parked:
        a = acts[n]
        assert a["ok"], a
        whys = [r["why"] for r in fsim.power_log(n)]
        if n in lost:
            assert a["method"] == "ipmi" and [(t["method"], t["ok"]) for t in a["attempts"]] == \
                [("wol", False), ("ipmi", True)], a
            report = a["attempts"][0]["report"]
            assert "did not become answering within 10 s" in report, a
            sends = int(report.split("magic packets sent ")[1].split()[0])
            assert sends >= 2 and sum("dropped" in w for w in whys) == 3 * sends and whys[-1] == "booted", (a, whys)
        elif n in first_lost:
            assert a["method"] == "wol" and len(a["attempts"]) == 1, a
            report = a["attempts"][0]["report"]
            assert report.startswith("wol: magic packets sent ") and "; answered after" in report, a
            assert int(report.split("magic packets sent ")[1].split()[0]) >= 2, a
            assert sum("dropped" in w for w in whys) == 3 and whys[-1] == "magic packet", (a, whys)
        else:
            assert a["method"] == "wol" and whys[-1] == "magic packet", (n, a)
    assert all_answer(fsim) == []
    assert all(r["power"] == "on" and r["ssh"] for r in fsim.status().values())
