"""C-state metrics: the gate's decision (cpuidle_qos metrics_dir) and residency (cstate_residency)."""

import os
import re
from pathlib import Path

import pytest

from conftest import materialize
from datasets import raw_states


def samples(text, name):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % name, line) or re.match(r"^%s() (\S+)$" % name, line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_gate_decision_as_metrics(tmp_path, module_runner):
    root = materialize("ivbep1", tmp_path / "root")
    metrics = tmp_path / "textfile"
    metrics.mkdir()
    args = {"sysfs_root": str(root), "max_latency_us": 20, "measured_latency_us": {"C1E": 21.765},
            "metrics_dir": str(metrics)}
    res = module_runner("cpuidle_qos", args, check=True)
    assert not (metrics / "fleetnap_cpuidle.prom").exists()
    res = module_runner("cpuidle_qos", args)
    assert res.changed
    text = (metrics / "fleetnap_cpuidle.prom").read_text()
    assert "# TYPE fleetnap_cstate_allowed gauge" in text
    assert samples(text, "fleetnap_cstate_allowed") == {
        'state="POLL"': 1, 'state="C1"': 1, 'state="C1E"': 0, 'state="C3"': 0, 'state="C6"': 0}
    assert samples(text, "fleetnap_cstate_effective_latency_seconds")['state="C1E"'] == 21.765e-6
    assert samples(text, "fleetnap_cstate_declared_latency_seconds")['state="C6"'] == 82e-6
    assert samples(text, "fleetnap_cpuidle_budget_seconds") == {"": 20e-6}
    assert not module_runner("cpuidle_qos", args).changed


def test_residency_from_a_captured_machine(tmp_path, module_runner):
    root = materialize("skld0", tmp_path / "root")
    out = tmp_path / "textfile"
    out.mkdir()
    res = module_runner("cstate_residency", {"sysfs_root": str(root), "directory": str(out)})
    n = sum(len(s) for s in raw_states("skld0").values())
    text = (out / "fleetnap_cstate_residency.prom").read_text()
    assert not res.failed and res["samples"] == sum(1 for line in text.splitlines() if line and line[0] != "#")
    # entries, residency, disabled, qos_bounded, above: one per CPU and state; below: one per cause
    for name, per in (("fleetnap_cstate_entries_total", 1), ("fleetnap_cstate_residency_seconds_total", 1),
                      ("fleetnap_cstate_disabled", 1), ("fleetnap_cstate_qos_bounded", 1),
                      ("fleetnap_cstate_above_total", 1), ("fleetnap_cstate_below_total", 2)):
        assert len(samples(text, name)) == per * n, name
    assert "# TYPE fleetnap_cstate_entries_total counter" in text
    usage = samples(text, "fleetnap_cstate_entries_total")
    capture = (tmp_path / "root/sys/devices/system/cpu/cpu3/cpuidle/state2/usage").read_text().strip()
    name = raw_states("skld0")[3][2]["name"]
    assert usage['cpu="3",state="%s"' % name] == float(capture)


@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu0/cpuidle/state0").exists(),
                    reason="this kernel has no cpuidle states")
def test_residency_on_the_live_kernel_moves(tmp_path, module_runner):
    first = module_runner("cstate_residency", {"directory": str(tmp_path)})
    assert not first.failed, first.get("msg")
    before = samples((tmp_path / "fleetnap_cstate_residency.prom").read_text(), "fleetnap_cstate_entries_total")
    assert before and all(k.startswith('cpu="') for k in before)
    res = module_runner("cstate_residency", {"directory": str(tmp_path)}, check=True)
    assert res["samples"] >= len(before)


@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu0/cpuidle/state0/above").exists(),
                    reason="this kernel counts no idle-governor misses (no cpuidle, or no above/below files)")
def test_governor_misses_on_the_live_kernel_move_under_load(tmp_path, module_runner):
    """Two scrapes around a load of short sleeps on every CPU (many idle periods of about a
    millisecond): the above and below series are there for every CPU and state, and move."""
    import subprocess
    import time

    def misses():
        res = module_runner("cstate_residency", {"directory": str(tmp_path)})
        assert not res.failed, res.get("msg")
        text = (tmp_path / "fleetnap_cstate_residency.prom").read_text()
        return samples(text, "fleetnap_cstate_above_total"), samples(text, "fleetnap_cstate_below_total"), \
            samples(text, "fleetnap_cstate_entries_total")
    above0, below0, entries = misses()
    assert len(above0) == len(entries) and len(below0) == 2 * len(entries)
    sleepers = [subprocess.Popen(["taskset", "-c", str(cpu), "/usr/bin/python3", "-c",
                                  "import time\nfor _ in range(2000): time.sleep(0.001)"])
                for cpu in sorted(os.sched_getaffinity(0))]
    for p in sleepers:
        p.wait(timeout=120)
    time.sleep(0.5)
    above1, below1, _entries = misses()
    assert sum(above1.values()) + sum(below1.values()) > sum(above0.values()) + sum(below0.values())
