"""C-state metrics: the gate's decision (cpuidle_qos metrics_dir) and residency (cstate_residency)."""

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


def kernel_misses():
    """{'cpu="N",state="NAME"': (above, below)} straight from this kernel's cpuidle files."""
    out = {}
    for sdir in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpuidle/state[0-9]*"):
        key = 'cpu="%s",state="%s"' % (sdir.parent.parent.name[3:], (sdir / "name").read_text().strip())
        out[key] = (int((sdir / "above").read_text()), int((sdir / "below").read_text()))
    return out


@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu0/cpuidle/state0/above").exists(),
                    reason="this kernel counts no idle-governor misses (no cpuidle, or no above/below files)")
def test_governor_misses_on_the_live_kernel_are_the_kernels_counts(tmp_path, module_runner):
    """A scrape between two reads of the kernel's above and below files: every CPU and state has its
    series, each value lies between the kernel's counts read before and after it (a counter only
    grows), and the two causes of a below add up to the kernel's. Whether the counts move is the
    kernel's business and the machine's load (on a busy machine the CPUs may not go idle at all); it
    is not asserted."""
    before = kernel_misses()
    res = module_runner("cstate_residency", {"directory": str(tmp_path)})
    after = kernel_misses()
    assert not res.failed, res.get("msg")
    text = (tmp_path / "fleetnap_cstate_residency.prom").read_text()
    above, below = samples(text, "fleetnap_cstate_above_total"), samples(text, "fleetnap_cstate_below_total")
    entries = samples(text, "fleetnap_cstate_entries_total")
    assert sorted(above) == sorted(entries) == sorted(before) and len(below) == 2 * len(entries)
    for key, (above0, below0) in before.items():
        above1, below1 = after[key]
        assert above0 <= above[key] <= above1, (key, above0, above[key], above1)
        cpu, state = key.split(",", 1)
        both = below['cause="qos",%s,%s' % (cpu, state)] + below['cause="governor",%s,%s' % (cpu, state)]
        assert below0 <= both <= below1, (key, below0, both, below1)
