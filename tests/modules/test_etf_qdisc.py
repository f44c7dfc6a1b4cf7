"""etf_qdisc on this machine's kernel (no sch_etf, no mqprio): every error path is clear and changes nothing.

The tc layout logic is checked against real ``tc -j`` output captured on a lab guest (Debian 6.1
kernel, iproute2 6.1) after running the very commands ``commands()`` produces.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, TARGET_PYTHON, VENV_BIN
from ansible.module_utils.fleetnap.tc import (
    TcError, commands, current_view, default_layout, desired_view, is_default, is_ours, needs_rebuild, validate,
)

NET = Path("/sys/class/net")
SINGLE = sorted(d.name for d in NET.iterdir()
                if d.name != "lo" and len(list((d / "queues").glob("tx-*"))) == 1) if NET.exists() else []
DEV = SINGLE[0] if SINGLE else None

# Captured on lab6 after: ip link add ve0 numtxqueues 4 type veth peer ...; then commands() below.
LAB_MQPRIO = json.loads(
    '[{"kind":"mqprio","handle":"100:","root":true,"options":{"tc":3,"map":[2,2,1,0,2,2,2,2,2,2,2,2,2,2,2,2],'
    '"queues":[[0,0],[1,1],[2,3]]}},{"kind":"etf","handle":"8001:","parent":"100:1","options":{"clockid":"TAI",'
    '"delta":300000,"offload":"off","deadline_mode":"on","skip_sock_check":"on"}},{"kind":"fq_codel","handle":"0:",'
    '"parent":"100:4","options":{"limit":10240}},{"kind":"fq_codel","handle":"0:","parent":"100:3","options":{}},'
    '{"kind":"fq_codel","handle":"0:","parent":"100:2","options":{}}]')
LAB_DEFAULT = json.loads('[{"kind":"fq_codel","handle":"0:","root":true,"refcnt":2,"options":{"limit":10240}}]')


def cfg(**kw):
    base = dict(root="mqprio", handle=0x100, num_tc=None, priority_map=None, tc_queues=None, etf_priority=3,
                etf_queues=[0], clockid="CLOCK_TAI", delta_ns=300000, offload=False, deadline_mode=False,
                skip_sock_check=False)
    base.update(kw)
    return base


def test_layout_matches_what_the_lab_kernel_reported():
    want = validate(cfg(num_tc=3, priority_map=[2, 2, 1, 0] + [2] * 12, tc_queues=["1@0", "1@1", "2@2"],
                        deadline_mode=True, skip_sock_check=True), 4, "ve0")
    assert commands(want, "ve0") == [
        ["qdisc", "replace", "dev", "ve0", "root", "handle", "100:", "mqprio", "num_tc", "3", "map",
         "2", "2", "1", "0", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2",
         "queues", "1@0", "1@1", "2@2", "hw", "0"],
        ["qdisc", "replace", "dev", "ve0", "parent", "100:1", "etf", "clockid", "CLOCK_TAI", "delta", "300000",
         "deadline_mode", "skip_sock_check"]]
    got = current_view(LAB_MQPRIO)
    assert got == desired_view(want)  # idempotence: the second run sees nothing to do
    assert is_ours(got, 0x100) and not is_default(got)
    assert needs_rebuild(got, desired_view(dict(want, tc_queues=["1@0", "1@1", "1@2"])))
    # etf cannot be changed in place either (the lab kernel: 'Change operation not supported')
    assert needs_rebuild(got, desired_view(dict(want, delta_ns=500000)))
    assert not needs_rebuild(got, desired_view(want))
    default = current_view(LAB_DEFAULT)
    assert is_default(default) and not is_ours(default, 0x100)
    assert current_view([]) == {"root": None, "handle": None, "mqprio": None, "etf": {}}


def test_default_layout_and_single_queue_root():
    assert default_layout(4) == (2, [1, 1, 1, 0] + [1] * 12, ["1@0", "3@1"])
    single = validate(cfg(root="etf"), 1, "lan0")
    assert commands(single, "lan0") == [["qdisc", "replace", "dev", "lan0", "root", "handle", "100:", "etf",
                                         "clockid", "CLOCK_TAI", "delta", "300000"]]
    view = current_view([{"kind": "etf", "handle": "100:", "root": True,
                          "options": {"clockid": "TAI", "delta": 300000, "offload": "off",
                                      "deadline_mode": "off", "skip_sock_check": "off"}}])
    assert view == desired_view(single)


@pytest.mark.parametrize("kw, queues, match", [
    (dict(), 1, "has 1 TX queue"),
    (dict(root="etf"), 4, "root etf times a single-queue device"),
    (dict(etf_queues=[4]), 4, r"etf_queues \[4\] do not exist: ve0 has TX queues 0-3"),
    (dict(num_tc=2, priority_map=[0] * 16, tc_queues=["1@0", "4@1"]), 4, "need 5 TX queues; ve0 has 4"),
    (dict(num_tc=2, priority_map=[0] * 16, tc_queues=["2@0", "1@1"]), 4, "overlap"),
    (dict(num_tc=2, priority_map=[0] * 16, tc_queues=["1@0"]), 4, "one COUNT@OFFSET per traffic class"),
    (dict(num_tc=2, priority_map=[0] * 15, tc_queues=["1@0", "1@1"]), 4, "16 traffic classes"),
    (dict(num_tc=2, priority_map=[2] * 16, tc_queues=["1@0", "1@1"]), 4, "16 traffic classes"),
    (dict(num_tc=2), 4, "go together"),
    (dict(num_tc=2, priority_map=[0] * 16, tc_queues=["x@1", "1@1"]), 4, "COUNT@OFFSET"),
    (dict(offload=True, clockid="CLOCK_MONOTONIC"), 4, "offload needs clockid CLOCK_TAI"),
    (dict(delta_ns=-1), 4, "delta_ns must be"),
    (dict(handle=0), 4, "handle must be"),
    (dict(etf_queues=[]), 4, "at least one TX queue"),
])
def test_validation(kw, queues, match):
    with pytest.raises(TcError, match=match):
        validate(cfg(**kw), queues, "ve0")


def qdiscs(dev):
    tc = shutil.which("tc")
    return subprocess.run([tc, "-j", "qdisc", "show", "dev", dev], capture_output=True, text=True).stdout


def needs_dev(fn):
    fn = pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (Debian package iproute2)")(fn)
    return pytest.mark.skipif(DEV is None, reason="this machine has no single-queue network interface")(fn)


@needs_dev
@pytest.mark.parametrize("args, message", [
    ({"device": "nonexist0"}, "device 'nonexist0' does not exist on"),
    ({}, "has 1 TX queue(s)"),
    ({"root": "etf", "offload": "on"}, "has no PTP hardware clock"),
    ({"tc_queues": ["1@0", "1@1"], "num_tc": 2, "priority_map": [0] * 16}, "mqprio needs a multi-queue NIC"),
    ({"root": "etf", "clockid": "CLOCK_MONOTONIC", "offload": "on"}, "offload needs clockid CLOCK_TAI"),
    ({"root": "etf", "etf_priority": 16}, "option etf_priority: must be >= 0 and <= 15, got 16"),
])
def test_bad_input_fails_clearly_and_changes_nothing(module_runner, args, message):
    before = qdiscs(DEV)
    res = module_runner("etf_qdisc", dict({"device": DEV}, **args))
    assert res.failed and message in res["msg"], res.get("msg")
    assert qdiscs(DEV) == before
    assert not Path("/etc/fleetnap/etf/%s.json" % DEV).exists()


@needs_dev
@pytest.mark.parametrize("check", [False, True])
def test_kernel_without_sch_etf(module_runner, check):
    config = Path("/proc/config.gz")
    if Path("/sys/module/sch_etf").exists():
        pytest.skip("this kernel has sch_etf: covered by the lab tests")
    before = qdiscs(DEV)
    res = module_runner("etf_qdisc", {"device": DEV, "root": "etf"}, check=check)
    assert res.failed, res
    if config.exists():
        assert "has no sch_etf (CONFIG_NET_SCH_ETF is not set)" in res["msg"] and "nothing was changed" in res["msg"]
    else:
        assert "etf" in res["msg"]
    assert qdiscs(DEV) == before
    assert not Path("/etc/fleetnap/etf/%s.json" % DEV).exists()


@needs_dev
def test_absent_without_anything_is_a_no_op(module_runner):
    before = qdiscs(DEV)
    res = module_runner("etf_qdisc", {"device": DEV, "state": "absent"}, diff=True)
    assert not res.failed and not res.changed
    assert res["qdiscs"]["root"] == json.loads(before)[0]["kind"]
    assert qdiscs(DEV) == before


@needs_dev
def test_ptp_clock_role_refuses_an_interface_without_phc(tmp_path):
    """The ptp_clock role's 'no PHC' error: clear, and nothing is installed."""
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n"
                    "    - role: ptp_clock\n      vars:\n        ptp_clock_interface: %s\n" % DEV)
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, str(play)]
    env = dict(__import__("os").environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0
    assert "has no PTP hardware" in proc.stdout and "Nothing was changed" in proc.stdout, proc.stdout[-2000:]
    assert not Path("/etc/systemd/system/fleetnap-phc2sys.service").exists()
    bad = play.read_text().replace("ptp_clock_interface: %s" % DEV,
                                   "ptp_clock_interface: %s\n        ptp_clock_ptp4l: slave" % DEV)
    play.write_text(bad)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0 and "ptp4l slave goes with direction phc_to_system" in proc.stdout
