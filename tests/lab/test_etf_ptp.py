"""ETF qdiscs and phc2sys on a lab guest (lab6; never suspended or powered off here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labtools import why

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


# ptp_clock present and absent (phc2sys on the e1000e's PHC with the TAI offset, the earlier
# offset recorded and put back, idempotent both ways) are the two phases of molecule's ptp_clock
# scenario, verified on lab6 by testinfra.


def test_ptp_clock_without_linuxptp_and_without_installing_says_which_package(lab):
    """A host missing ptp4l (asked for) with ptp_clock_install_packages=false given as a string:
    one clear error naming the package and the variable, and nothing changed."""
    lab.ssh(HOST, "mv /usr/sbin/ptp4l /usr/sbin/ptp4l.fleetnap-test")
    try:
        proc = playbook("ptp_clock.yml", "-e", "fleetnap_targets=%s" % HOST, "-e", "ptp_clock_ptp4l=master",
                        "-e", "ptp_clock_install_packages=false")
        assert proc.returncode != 0
        assert "/usr/sbin/ptp4l missing (package linuxptp) and ptp_clock_install_packages is false" in \
            " ".join(proc.stdout.split()), why(proc)
        assert lab.ssh(HOST, "ls /etc/systemd/system/fleetnap-*.service /var/lib/fleetnap/ptp_clock-tai-before.json "
                             "2>/dev/null", check=False).stdout.strip() == ""
    finally:
        lab.ssh(HOST, "mv /usr/sbin/ptp4l.fleetnap-test /usr/sbin/ptp4l")


def test_ptp_clock_refuses_to_run_beside_an_active_time_service(lab):
    """chrony active on the host (a transient unit of that name): ptp_clock refuses with one error
    naming it and the variable that would stop it, and nothing is changed."""
    lab.ssh(HOST, "systemd-run --quiet --unit=chrony.service sleep 600")
    try:
        proc = playbook("ptp_clock.yml", "-e", "fleetnap_targets=%s" % HOST)
        assert proc.returncode != 0
        said = " ".join(proc.stdout.split())
        assert "chrony.service is active and steers the system clock" in said, why(proc)
        assert "set ptp_clock_conflicts: stop" in said, why(proc)
        assert lab.ssh(HOST, "ls /etc/systemd/system/fleetnap-*.service /var/lib/fleetnap/ptp_clock-tai-before.json "
                             "2>/dev/null", check=False).stdout.strip() == ""
    finally:
        lab.ssh(HOST, "systemctl stop chrony.service", check=False)


# --- SO_TXTIME through the ETF qdisc, timestamped on the receiving side -------------------------
#
# A veth pair with 4 TX queues in the guest: fnetf0 (root namespace, mqprio + etf on queue 0 by
# etf_qdisc) and its peer fnetf1 in the namespace fnetf-rx, where txtime_probe.py receives with
# SO_TIMESTAMPNS (kernel RX time, converted to CLOCK_TAI). Crossing namespaces scrubs skb->tstamp,
# so the receive timestamp is a fresh clock reading, never the sender's launch time.
#
# What software ETF (no offload: emulated NICs have none) promises, from net/sched/sch_etf.c: a
# packet is dequeued within [launch - delta, launch]; if the qdisc watchdog runs after the launch
# time the packet is dropped ("expired while in queue", etf_dequeue_timesortedlist, counted in
# tc -s "dropped"). Under QEMU TCG that watchdog runs up to several ms late, so the kernel's usual
# delta of 300 us drops about half the packets (that was the earlier "dropped 5": skb:kfree_skb
# with a stack trace shows etf_dequeue_timesortedlist, not the enqueue check); delta 10 ms drops
# none. Leaving exactly at the launch time (not before) is what offload adds: the NIC holds the
# packet until its PHC reaches it. So the checks are: every packet is either received or counted
# as dropped by ETF; none arrives before launch - delta or after its launch time (plus transit);
# a packet on a non-ETF queue (socket priority 0) is not held; a socket without SO_TXTIME is
# refused by ETF at enqueue (is_packet_valid).

TXTIME_PROBE = Path(__file__).with_name("txtime_probe.py")
VETH, PEER, NETNS = "fnetf0", "fnetf1", "fnetf-rx"
ETF_DELTA_NS = 10000000
TRANSIT_SLACK_NS = 2000000   # ETF dequeue -> veth -> netif_rx timestamp, generous for TCG


@pytest.fixture
def veth4(lab):
    lab.ssh(HOST, "modprobe veth; ip netns del %(ns)s 2>/dev/null; ip link del %(v)s 2>/dev/null; "
                  "ip netns add %(ns)s && ip link add %(v)s numtxqueues 4 numrxqueues 4 type veth peer name %(p)s "
                  "netns %(ns)s && ip addr add 10.231.0.1/24 dev %(v)s && ip link set %(v)s up && "
                  "ip -n %(ns)s addr add 10.231.0.2/24 dev %(p)s && ip -n %(ns)s link set %(p)s up"
            % {"v": VETH, "p": PEER, "ns": NETNS})
    res = module("copy", {"src": str(TXTIME_PROBE), "dest": "/run/fleetnap-txtime_probe.py", "mode": "0755"})
    assert not res.get("failed"), res.get("msg")
    yield VETH
    lab.ssh(HOST, "ip link del %s; ip netns del %s; rm -f /run/fleetnap-txtime_probe.py" % (VETH, NETNS),
            check=False)


def etf_stats(lab):
    """(sent, dropped) packets of the etf child on queue 0."""
    for q in json.loads(lab.ssh(HOST, "tc -s -j qdisc show dev %s" % VETH).stdout):
        if q["kind"] == "etf":
            return q["packets"], q["drops"]
    raise AssertionError("no etf qdisc on %s" % VETH)


def txtime_run(lab, count, min_ms, max_ms, *send_opts):
    """Run receiver and sender in the guest; returns (sent rows, received rows by seq)."""
    port = 7000 + len(send_opts)
    script = ("rm -f /run/fnetf-rx.out; (ip netns exec %(ns)s python3 /run/fleetnap-txtime_probe.py recv %(port)d "
              "%(count)d %(wait)d > /run/fnetf-rx.out &); for i in $(seq 100); do grep -q ready /run/fnetf-rx.out "
              "2>/dev/null && break; sleep 0.1; done; python3 /run/fleetnap-txtime_probe.py send 10.231.0.2 %(port)d "
              "%(count)d %(min)s %(max)s %(opts)s; while ! grep -q done /run/fnetf-rx.out; do sleep 0.2; done; "
              "cat /run/fnetf-rx.out"
              % {"ns": NETNS, "port": port, "count": count, "wait": 3, "min": min_ms, "max": max_ms,
                 "opts": " ".join(send_opts)})
    lines = [json.loads(line) for line in lab.ssh(HOST, script, timeout=120).stdout.splitlines() if line.strip()]
    sent = [line for line in lines if "sent" in line][0]["sent"]
    received = dict((line["seq"], line) for line in lines if "seq" in line)
    return sent, received


def test_so_txtime_packets_leave_in_their_etf_window_measured_on_the_receiver(lab, veth4):
    res = module("etf_qdisc", {"device": veth4, "delta_ns": ETF_DELTA_NS, "persist": False})
    assert not res.get("failed") and res["changed"], res.get("msg")
    assert res["qdiscs"]["mqprio"]["priority_map"][3] == 0 and res["qdiscs"]["mqprio"]["tc_queues"][0] == "1@0"
    assert list(res["qdiscs"]["etf"]) == ["0"]
    try:
        count = 40
        pkts0, drops0 = etf_stats(lab)
        sent, received = txtime_run(lab, count, 15, 60, "--priority", "3")
        pkts1, drops1 = etf_stats(lab)
        # Every packet went through the etf child on queue 0 (socket priority 3 -> class 0 -> queue 0):
        # it was either sent on time or dropped by ETF as late; nothing else lost it.
        assert pkts1 - pkts0 == len(received) and len(received) + (drops1 - drops0) == count
        assert len(received) >= 0.8 * count, "ETF dropped %d of %d (qdisc watchdog later than delta)" % (
            drops1 - drops0, count)
        lateness = []
        for row in sent:
            if row["seq"] not in received:
                continue
            rx = received[row["seq"]]
            assert rx["launch_tai_ns"] == row["launch_tai_ns"] and rx["rx_tai_ns"] not in (None, row["launch_tai_ns"])
            assert rx["rx_tai_ns"] <= rx["user_tai_ns"]
            late = rx["rx_tai_ns"] - row["launch_tai_ns"]
            # not before the launch time minus delta (held 15-60 ms by the qdisc), not after it
            assert -ETF_DELTA_NS <= late <= TRANSIT_SLACK_NS, (row, rx)
            assert rx["rx_tai_ns"] - row["send_tai_ns"] >= 15000000 - ETF_DELTA_NS
            lateness.append(late / 1000.0)
        lateness.sort()
        n = len(lateness)
        summary = {"count": n, "dropped": drops1 - drops0, "delta_us": ETF_DELTA_NS / 1000,
                   "min_us": lateness[0], "median_us": lateness[n // 2], "p90_us": lateness[int(0.9 * (n - 1))],
                   "max_us": lateness[-1],
                   # after the start of the ETF window (launch - delta): how late the qdisc watchdog ran
                   "release_after_window_min_us": lateness[0] + ETF_DELTA_NS / 1000,
                   "release_after_window_median_us": lateness[n // 2] + ETF_DELTA_NS / 1000,
                   "release_after_window_max_us": lateness[-1] + ETF_DELTA_NS / 1000}
        print("SO_TXTIME arrival - launch time (software ETF, delta %d us): %s" % (ETF_DELTA_NS / 1000,
                                                                                   json.dumps(summary)))
        lab.record_timing("etf_software_lateness_median_us", summary["median_us"])

        # Control: priority 0 goes to class 1 (queues 1-3, fq_codel), past the ETF: not held.
        pkts0, _drops = etf_stats(lab)
        sent, received = txtime_run(lab, 10, 15, 60, "--priority", "0")
        assert etf_stats(lab)[0] == pkts0 and len(received) == 10
        early = [s for s in sent if received[s["seq"]]["rx_tai_ns"] < s["launch_tai_ns"] - ETF_DELTA_NS]
        assert len(early) == 10, "packets outside the ETF queue must arrive right away"

        # A socket without SO_TXTIME on the timed queue: ETF refuses it at enqueue (is_packet_valid).
        _pkts, drops0 = etf_stats(lab)
        _sent, received = txtime_run(lab, 5, 15, 20, "--priority", "3", "--no-txtime")
        assert received == {} and etf_stats(lab)[1] - drops0 == 5
    finally:
        res = module("etf_qdisc", {"device": veth4, "state": "absent"})
        assert res["changed"] and all(q["kind"] != "etf" for q in qdiscs(lab, veth4))
