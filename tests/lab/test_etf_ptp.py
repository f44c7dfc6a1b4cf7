"""ETF qdiscs and phc2sys on a lab guest (lab6; never suspended or powered off here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_measure_resume import INVENTORY, REPO, playbook

pytestmark = pytest.mark.lab
HOST = os.environ.get("LAB_ETF_HOST", "lab6")


def module(name, args, check=False):
    cmd = [str(Path(sys.executable).parent / "ansible"), HOST, "-i", str(INVENTORY), "-b",
           "-m", name, "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
           "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.json",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    out = proc.stdout[proc.stdout.index("{"):]
    return json.loads(out)["plays"][0]["tasks"][0]["hosts"][HOST]


def qdiscs(lab, dev):
    return json.loads(lab.ssh(HOST, "tc -j qdisc show dev %s" % dev).stdout)


def test_etf_on_the_e1000e_is_applied_idempotent_and_removed(lab):
    module("etf_qdisc", {"device": "lan0", "state": "absent"})  # start from the kernel's default
    res = module("etf_qdisc", {"device": "lan0", "root": "etf", "delta_ns": 300000, "persist": False})
    assert not res.get("failed") and res["changed"], res.get("msg")
    root = [q for q in qdiscs(lab, "lan0") if q.get("root")]
    assert root[0]["kind"] == "etf" and root[0]["options"]["clockid"] == "TAI"
    assert root[0]["options"]["delta"] == 300000
    again = module("etf_qdisc", {"device": "lan0", "root": "etf", "delta_ns": 300000, "persist": False})
    assert not again["changed"]
    # Offload where the NIC cannot: a clear error, and the software ETF is still there.
    res = module("etf_qdisc", {"device": "lan0", "root": "etf", "delta_ns": 300000, "offload": "on", "persist": False})
    assert res.get("failed") and "offload" in res["msg"]
    assert [q for q in qdiscs(lab, "lan0") if q.get("root")][0]["kind"] == "etf"
    res = module("etf_qdisc", {"device": "lan0", "state": "absent"})
    assert res["changed"] and all(q["kind"] != "etf" for q in qdiscs(lab, "lan0"))


def test_too_few_queues_changes_nothing(lab):
    before = qdiscs(lab, "lan0")
    res = module("etf_qdisc", {"device": "lan0", "root": "mqprio", "num_tc": 3, "etf_queues": [0, 1], "persist": False})
    assert res.get("failed") and "queue" in res["msg"]
    assert qdiscs(lab, "lan0") == before


def test_phc2sys_runs_on_the_e1000e_phc_with_the_tai_offset(lab):
    vars_ = {"ptp_clock_interface": "lan0", "ptp_clock_direction": "system_to_phc", "ptp_clock_conflicts": "stop",
             "ptp_clock_install_packages": False}
    proc = playbook("ptp_clock.yml", "-e", "fleetnap_targets=%s" % HOST, "-e", json.dumps(vars_))
    assert proc.returncode == 0, proc.stdout[-3000:]
    args = lab.ssh(HOST, "ps -o args= -C phc2sys").stdout
    assert "-O 37" in args and "/dev/ptp" in args and "CLOCK_REALTIME" in args
    assert lab.ssh(HOST, "systemctl is-active fleetnap-phc2sys").stdout.strip() == "active"
    proc = playbook("ptp_clock.yml", "-e", "fleetnap_targets=%s" % HOST, "-e", json.dumps(vars_))
    assert " changed=0 " in proc.stdout
    proc = playbook("ptp_clock.yml", "-e", "fleetnap_targets=%s" % HOST,
                    "-e", json.dumps(dict(vars_, ptp_clock_state="absent")))
    assert proc.returncode == 0 and lab.ssh(HOST, "pgrep -x phc2sys", check=False).returncode != 0
