"""module_utils.fleetnap.wakeprobe: cyclictest output, statistics, per-state limit plans.

cyclictest itself is the oracle where it can be: a short real run prints every sample (-v -N) and
writes its own summary (--json), and our parse + summary must agree with it.
"""

import json
import random
import shutil
import subprocess

import pytest

from conftest import materialize
from ansible.module_utils.fleetnap.cpuidle import read_model
from ansible.module_utils.fleetnap.sysfs import HostFS
from ansible.module_utils.fleetnap.prom import render
from ansible.module_utils.fleetnap.wakeprobe import (
    IDLE_LOOP, ProbeError, cyclictest_argv, declared_vs_measured, histogram, launch_time_nics, limit_plan, metrics,
    over_baseline, parse_verbose, percentile, qos_limits, select_states, summarize,
)

CYCLICTEST = shutil.which("cyclictest")


@pytest.mark.skipif(CYCLICTEST is None, reason="cyclictest (Debian package rt-tests) is not installed")
def test_parse_and_summary_agree_with_cyclictest_itself(tmp_path):
    report = tmp_path / "ct.json"
    argv = cyclictest_argv(CYCLICTEST, 0, 200, 300, priority=0) + ["--json=%s" % report]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "not setting cpu_dma_latency" in proc.stdout + proc.stderr  # --default-system took effect
    samples = parse_verbose(proc.stdout)
    assert list(samples) == [0]
    stats = summarize(samples[0])
    own = json.loads(report.read_text())["thread"]["0"]
    assert stats["count"] == own["cycles"] == 300
    # -N: cyclictest's own min/max/avg are in ns; ours are us with three decimals, so the same
    # nanosecond once rounded (128.545 * 1000 is 128544.99999999999 in binary floating point).
    assert round(stats["min_us"] * 1000) == own["min"]
    assert round(stats["max_us"] * 1000) == own["max"]
    assert stats["mean_us"] == pytest.approx(own["avg"] / 1000.0, abs=0.002)
    assert stats["min_us"] <= stats["median_us"] <= stats["p99_us"] <= stats["p999_us"] <= stats["max_us"]
    assert sum(c for _b, c in histogram(samples[0])) == 300


@pytest.mark.skipif(CYCLICTEST is None, reason="cyclictest (Debian package rt-tests) is not installed")
def test_parse_quotes_cyclictest_errors():
    proc = subprocess.run([CYCLICTEST, "--default-system", "--affinity=4096", "-l", "5", "-q", "-v"],
                          capture_output=True, text=True, timeout=30)
    with pytest.raises(ProbeError, match="cyclictest printed no samples"):
        parse_verbose(proc.stdout + proc.stderr)
    with pytest.raises(ProbeError, match=r"\(no output\)"):
        parse_verbose("")


@pytest.mark.parametrize("n", [1, 2, 3, 10, 999, 1000, 1001, 2000])
def test_percentile_is_nearest_rank(n):
    """p is a sample; at least pct% of samples are <= p, fewer than pct% are < p (the definition)."""
    rng = random.Random(n)
    values = sorted(rng.choice(range(0, 50)) * 1000 for _ in range(n))  # ties on purpose
    for pct in (50, 99, 99.9, 100):
        p = percentile(values, pct)
        assert p in values
        assert sum(v <= p for v in values) >= pct / 100.0 * n
        assert sum(v < p for v in values) < pct / 100.0 * n
    assert percentile(values, 100) == values[-1]


def test_percentile_and_summary_errors():
    with pytest.raises(ProbeError):
        percentile([], 50)
    with pytest.raises(ProbeError):
        percentile([1], 0)
    with pytest.raises(ProbeError, match="no samples"):
        summarize([])


def test_p999_of_1000_samples_is_the_999th():
    values = list(range(1000, 1001000, 1000))  # 1..1000 us
    stats = summarize(values)
    assert stats["p999_us"] == 999.0 and stats["p99_us"] == 990.0 and stats["median_us"] == 500.0
    assert stats["max_us"] == 1000.0 and stats["min_us"] == 1.0 and stats["max_occurrences"] == 1


def test_max_occurrences_counts_samples_within_one_us_of_the_max():
    stats = summarize([5000, 21000, 21500, 21765, 20765, 21765])
    assert stats["max_us"] == 21.765
    assert stats["max_occurrences"] == 4  # 21000 is 765 ns below, 20765 exactly 1 us below: not counted


def test_histogram_bins():
    assert histogram([1200, 1900, 2000, 15300], 1.0) == [[1.0, 2], [2.0, 1], [15.0, 1]]
    assert histogram([1200, 1900, 2000, 15300], 5.0) == [[0.0, 3], [15.0, 1]]
    with pytest.raises(ProbeError):
        histogram([1], 0)


@pytest.mark.parametrize("kw, match", [
    (dict(cpu=-1), "cpu must be an integer >= 0"),
    (dict(cpu=True), "cpu must be"),
    (dict(interval_us=10), "interval_us must be an integer >= 50"),
    (dict(loops=0), "loops must be"),
    (dict(priority=100), "priority must be 0-99"),
])
def test_argv_validation(kw, match):
    args = dict(cpu=1, interval_us=1000, loops=10, priority=95)
    args.update(kw)
    with pytest.raises(ProbeError, match=match):
        cyclictest_argv("cyclictest", **args)


def test_argv_never_pins_c0():
    argv = cyclictest_argv("/usr/bin/cyclictest", 3, 2000, 5000)
    assert "--default-system" in argv and not any(a.startswith("--latency") for a in argv)
    assert "--affinity=3" in argv and "--interval=2000" in argv and "--loops=5000" in argv
    assert "--nsecs" in argv and "--verbose" in argv and "--priority=95" in argv
    assert "--policy=other" in cyclictest_argv("cyclictest", 0, 1000, 1, priority=0)


def test_limit_plan_on_a_captured_xeon(tmp_path):
    model = read_model(HostFS(str(materialize("hswep0", tmp_path))))
    states = model["cpus"][0]["states"]
    names = {s["index"]: s["name"] for s in states}
    assert list(names.values())[:3] == ["POLL", "C1", "C1E"]
    c1e = [s["index"] for s in states if s["name"] == "C1E"][0]
    plan = limit_plan(states, c1e)
    assert {names[i] for i, v in plan.items() if v == "0"} == {"POLL", "C1", "C1E"}
    assert {names[i] for i, v in plan.items() if v == "1"} == set(names.values()) - {"POLL", "C1", "C1E"}
    poll = limit_plan(states, 0)
    assert poll[0] == "0" and all(v == "1" for i, v in poll.items() if i)
    deepest = limit_plan(states, max(names))
    assert all(v == "0" for v in deepest.values())
    with pytest.raises(ProbeError, match="does not exist"):
        limit_plan(states, 42)


def test_select_states():
    names = ["POLL", "C1", "C1E", "C6"]
    assert select_states(names, []) == names
    assert select_states(names, ["C6", "C1"]) == ["C1", "C6"]
    with pytest.raises(ProbeError, match=r"unknown C-state\(s\) C3; this host's states are: POLL, C1, C1E, C6"):
        select_states(names, ["C3"])
    with pytest.raises(ProbeError, match="none"):
        select_states([], ["C1"])


def test_qos_limits():
    assert qos_limits(133, 0, 2000000000) is None
    assert "pm_qos_resume_latency_us 100" in qos_limits(133, 100, 2000000000)
    assert qos_limits(10, 100, 2000000000) is None
    assert "n/a" in qos_limits(1, "n/a", None)
    assert "/dev/cpu_dma_latency 20 < declared 133" in qos_limits(133, 0, 20)


def test_table_and_baseline():
    poll = summarize([10000, 12000, 13000])
    c1 = summarize([20000, 25000, 40000])
    share = over_baseline(c1, poll)
    assert share["max_us"] == 27.0 and share["min_us"] == 10.0
    assert over_baseline(c1, None) is None
    rows = [dict(poll, name="POLL", declared_us=0, over_baseline=None),
            dict(c1, name="C1", declared_us=2, over_baseline=share)]
    table = declared_vs_measured(rows).splitlines()
    assert table[0].split()[:3] == ["state", "declared", "us"]
    assert table[2].split()[:4] == ["C1", "2", "40.0", "20.0"] and table[2].split()[-1] == "27.0"
    assert table[1].split()[3] == "-"


def test_metrics_in_base_units_rendered_by_the_one_writer():
    poll = dict(summarize([10000, 12000, 13000]), name="POLL", declared_us=0)
    c1e = dict(summarize([20000, 21800] + [15000] * 998), name="C1E", declared_us=10)
    text = render(metrics([poll, c1e, {"name": "C6", "declared_us": 133}]))  # C6 not measured: no samples
    lines = text.splitlines()
    assert 'fleetnap_wake_latency_seconds{quantile="1",state="C1E"} 2.18e-05' in lines
    assert 'fleetnap_wake_latency_seconds{quantile="0.5",state="C1E"} 1.5e-05' in lines
    assert 'fleetnap_wake_latency_seconds{quantile="0.999",state="C1E"} 2e-05' in lines
    assert 'fleetnap_wake_latency_seconds{quantile="0",state="POLL"} 1e-05' in lines
    assert 'fleetnap_wake_latency_samples{state="C1E"} 1000' in lines
    assert 'fleetnap_wake_latency_declared_seconds{state="C1E"} 1e-05' in lines
    assert 'fleetnap_wake_latency_declared_seconds{state="POLL"} 0' in lines
    assert "C6" not in text
    assert "# TYPE fleetnap_wake_latency_seconds gauge" in lines and "# HELP fleetnap_wake_latency_samples" in text
    assert len([l for l in lines if l.startswith("fleetnap_wake_latency_seconds{")]) == 10


def test_idle_loop_metrics_and_table_declare_nothing():
    row = dict(summarize([40000, 440000, 16520000]), name=IDLE_LOOP, declared_us=None, over_baseline=None)
    text = render(metrics([row]))
    assert "fleetnap_wake_latency_declared_seconds" not in text
    assert 'fleetnap_wake_latency_seconds{quantile="1",state="idle-loop"} 0.01652' in text
    line = declared_vs_measured([row]).splitlines()[1].split()
    assert line[:4] == ["idle-loop", "-", "16520.0", "-"]


def _nic(name, driver, phc="/dev/ptp0", queues=4, device=None):
    return {"name": name, "driver": driver, "phc": phc, "tx_queues": queues, "pci_device": device}


def test_launch_time_nic_detection():
    lab = launch_time_nics([_nic("lan0", "e1000e", queues=1), _nic("mgmt0", "virtio_net", phc=None)])
    assert lab["available"] is False and lab["candidates"] == []
    assert "NICs with a PHC: lan0 (driver e1000e has no ETF launch-time offload)" in lab["reason"]
    assert "mgmt0" not in lab["reason"]
    assert "no NIC has a PTP hardware clock" in launch_time_nics([_nic("eth0", "virtio_net", phc=None)])["reason"]
    assert "no NIC has a PTP hardware clock" in launch_time_nics([])["reason"]
    # the thesis's i210 (igb, device 0x1533) qualifies; an i350 on igb does not
    thesis = launch_time_nics([_nic("enp3s0", "igb", device="0x1533"), _nic("enp4s0", "igb", device="0x1521")])
    assert thesis["available"] and thesis["candidates"] == ["enp3s0"]
    # the line the role's table, plan and page print
    assert thesis["summary"] == "possible on enp3s0"
    assert lab["summary"] == "unavailable: " + lab["reason"]
    i350 = launch_time_nics([_nic("enp4s0", "igb", device="0x1521")])
    assert not i350["available"] and "only on the i210 (device 0x1521)" in i350["reason"]
    one_queue = launch_time_nics([_nic("eth1", "igc", queues=1)])
    assert not one_queue["available"] and "1 TX queue(s)" in one_queue["reason"]
    assert launch_time_nics([_nic("eth1", "igc")])["candidates"] == ["eth1"]
