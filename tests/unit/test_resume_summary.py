"""The per-host resume summary (module_utils/fleetnap/resumesummary.py, module resume_summary)
on cycles the lab really produced.

The input is what measure_resume.yml saved for lab6 in a CI run (tests/golden/
lab6-measure-resume-3cycles.json): in each cycle's five slowest callbacks there are only two
devices, each in several phases. The summary once kept one entry per device name and listed
two "slowest devices" instead of three; it keeps each (device, phase) once, at its worst.
It was computed in Jinja, where the "median" was the value at index len // 2 of the sorted list:
for two cycles, the worse one. The median is now the middle value, or the mean of the two middle.
"""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import REPO, run_module
from promcheck import assert_valid_metrics
from ansible.module_utils.fleetnap.prom import render
from ansible.module_utils.fleetnap.resumesummary import SummaryError, median, resume_metrics, summarize

GOLDEN = REPO / "tests" / "golden" / "lab6-measure-resume-3cycles.json"


def summarise(tmp_path, cycles, result=False):
    """Through the module, as the resume_measure role calls it (ansible -m, arguments as JSON)."""
    recs = [c["recommendations"] for c in cycles]
    res = run_module("resume_summary", {"host": "lab6", "cycles": cycles, "recommendations": recs})
    assert not res.failed and res.get("changed") is False, res
    return res if result else res["summary"]


def test_three_slowest_callbacks_when_two_devices_fill_every_cycle(tmp_path):
    cycles = json.loads(GOLDEN.read_text())["cycles"]
    assert all(len({d["name"] for d in c["slowest"]}) == 2 for c in cycles)   # the case that failed in CI
    s = summarise(tmp_path, cycles)
    assert [(d["name"], d["phase"], d["duration_ms"]) for d in s["slowest"]] == [
        ("0000:00:04.0", "resume", 92.717),     # e1000e, cycle 3
        ("0000:00:04.0", "suspend", 15.005),    # the same NIC's suspend, cycle 1 (its worst of three)
        ("0000:00:03.0", "suspend", 14.038),    # virtio-pci, cycle 3
    ]
    assert s["slowest"][0]["driver"] == "e1000e" and s["slowest"][2]["driver"] == "virtio-pci"


def test_medians_worst_and_the_slowest_cycle_split(tmp_path):
    cycles = json.loads(GOLDEN.read_text())["cycles"]
    s = summarise(tmp_path, cycles)
    kernel = [c["resume_ms"] for c in cycles]
    worst = max(cycles, key=lambda c: c["resume_ms"])
    assert s["host"] == "lab6" and s["cycles"] == 3 and s["mem_sleep"] == "deep"
    assert s["resume_kernel_median_ms"] == statistics.median(kernel) == 285.338
    assert s["resume_kernel_worst_ms"] == max(kernel) == 326.676
    assert s["resume_end_to_end_worst_ms"] == max(c["end_to_end_ms"] for c in cycles)
    assert s["suspend_kernel_worst_ms"] == max(c["suspend_ms"] for c in cycles)
    assert s["worst_cycle"] == worst["cycle"] == 3
    assert (s["cpus_ms"], s["noirq_ms"], s["devices_ms"]) == (worst["cpus_ms"], worst["noirq_ms"], worst["devices_ms"])
    assert s["recommendations"] == worst["recommendations"]


def test_a_single_cycle_with_fewer_than_three_callbacks(tmp_path):
    one = json.loads(GOLDEN.read_text())["cycles"][0]
    one = dict(one, slowest=one["slowest"][:2])
    s = summarise(tmp_path, [one])
    assert [(d["name"], d["phase"]) for d in s["slowest"]] == [("0000:00:04.0", "resume"), ("0000:00:04.0", "suspend")]
    assert s["resume_kernel_median_ms"] == s["resume_kernel_worst_ms"] == one["resume_ms"]


def test_cycles_without_device_callbacks_summarise_with_none(tmp_path):
    """A log without device lines (no pm_print_times on that kernel): the rest is still summarised."""
    cycles = [dict(c, slowest=[]) for c in json.loads(GOLDEN.read_text())["cycles"]]
    s = summarise(tmp_path, cycles)
    assert s["slowest"] == [] and s["resume_kernel_worst_ms"] == 326.676


def test_median_is_the_middle_value_or_the_mean_of_the_two_middle():
    assert median([3.0]) == 3.0
    assert median([5.0, 1.0, 3.0]) == 3.0
    assert median([1000.0, 5000.0]) == 3000.0          # the Jinja version said 5000 (the worst)
    assert median([4, 1, 3, 2]) == 2.5
    for values in ([1.5, 2.5], [7, 1, 9, 3, 5, 11], [0.1] * 4):
        assert median(values) == statistics.median(values)
    with pytest.raises(SummaryError):
        median([])


def test_two_cycles_the_median_is_not_the_worst(tmp_path):
    """The demo measures two cycles: their median must lie between them, not be the worse one."""
    a, b = json.loads(GOLDEN.read_text())["cycles"][:2]
    s = summarise(tmp_path, [a, b])
    for key, name in (("resume_ms", "resume_kernel"), ("end_to_end_ms", "resume_end_to_end"),
                      ("suspend_ms", "suspend_kernel")):
        assert s[name + "_median_ms"] == round((a[key] + b[key]) / 2, 3)
        assert s[name + "_worst_ms"] == max(a[key], b[key])
    assert s["resume_kernel_median_ms"] < s["resume_kernel_worst_ms"]


def test_equal_worst_resumes_take_the_later_cycle():
    cycles = [dict(c, resume_ms=300.0) for c in json.loads(GOLDEN.read_text())["cycles"]]
    assert summarize(cycles)["worst_cycle"] == cycles[-1]["cycle"]


BAD = [
    ("no cycles", [], "cycles: must be a non-empty list"),
    ("a cycle is a list", [[1]], "cycles[0]: must be a cycle (a dict), got list"),
    ("no cycle number", [{"resume_ms": 1}], "cycles[0].cycle: must be a whole number"),
    ("cycle number twice", "twice", "cycle 1 is given twice"),
    ("resume NaN", {"resume_ms": float("nan")}, "cycles[0].resume_ms: must be a finite number"),
    ("suspend negative", {"suspend_ms": -1}, "cycles[0].suspend_ms: must be a finite number"),
    ("end to end a string", {"end_to_end_ms": "5 s"}, "cycles[0].end_to_end_ms: must be a number"),
    ("split missing", {"devices_ms": None}, "cycles[0].devices_ms: must be a number"),
    ("bool as time", {"cpus_ms": True}, "cycles[0].cpus_ms: must be a number"),
    ("mem_sleep unknown", {"mem_sleep": "banana"}, "cycles[0].mem_sleep: must be s2idle, shallow, deep or null"),
    ("slowest a dict", {"slowest": {"a": 1}}, "cycles[0].slowest: must be a list"),
    ("callback without phase", {"slowest": [{"name": "x", "duration_ms": 1}]}, "cycles[0].slowest[0].phase"),
    ("callback name with newline", {"slowest": [{"name": "x\ny", "phase": "resume", "duration_ms": 1}]},
     "cycles[0].slowest[0].name"),
    ("callback duration inf", {"slowest": [{"name": "x", "phase": "resume", "duration_ms": float("inf")}]},
     "cycles[0].slowest[0].duration_ms"),
]


@pytest.mark.parametrize("label,change,message", BAD, ids=[b[0] for b in BAD])
def test_bad_cycles_are_refused_naming_the_field(label, change, message):
    good = json.loads(GOLDEN.read_text())["cycles"]
    if isinstance(change, dict):
        cycles = [dict(good[0], **change)] + good[1:]
    elif change == "twice":
        cycles = [good[0], dict(good[1], cycle=good[0]["cycle"])]
    else:
        cycles = change
    with pytest.raises(SummaryError) as err:
        summarize(cycles)
    assert message in str(err.value)


def test_recommendations_must_match_the_cycles():
    cycles = json.loads(GOLDEN.read_text())["cycles"]
    with pytest.raises(SummaryError, match="one list per cycle"):
        summarize(cycles, [[]])
    with pytest.raises(SummaryError, match=r"recommendations\[1\]"):
        summarize(cycles, [[], "x", []])


def test_metrics_are_the_summary_in_seconds(tmp_path):
    """The module returns the metrics textfile_metrics writes (the role once computed them in
    Jinja, 40 lines of ms / 1000): every figure of the summary in seconds, the slowest callbacks as
    rows scaled by textfile_metrics, the number of cycles as it is."""
    res = summarise(tmp_path, json.loads(GOLDEN.read_text())["cycles"], result=True)
    s, metrics = res["summary"], res["metrics"]
    assert metrics == resume_metrics(s)
    by_name = {m["name"]: m for m in metrics}
    assert list(by_name) == ["fleetnap_resume_kernel_seconds", "fleetnap_resume_end_to_end_seconds",
                             "fleetnap_suspend_kernel_seconds", "fleetnap_resume_part_seconds",
                             "fleetnap_resume_slowest_device_seconds", "fleetnap_resume_cycles_measured"]
    assert all(m["help"] and m.get("type", "gauge") == "gauge" for m in metrics)
    for name, key in (("fleetnap_resume_kernel_seconds", "resume_kernel"),
                      ("fleetnap_resume_end_to_end_seconds", "resume_end_to_end"),
                      ("fleetnap_suspend_kernel_seconds", "suspend_kernel")):
        assert by_name[name]["samples"] == [{"labels": {"stat": "median"}, "value": s[key + "_median_ms"] / 1000},
                                            {"labels": {"stat": "max"}, "value": s[key + "_worst_ms"] / 1000}]
    assert by_name["fleetnap_resume_part_seconds"]["samples"] == [
        {"labels": {"part": p}, "value": s[p + "_ms"] / 1000} for p in ("cpus", "noirq", "devices")]
    slow = by_name["fleetnap_resume_slowest_device_seconds"]
    assert (slow["rows"], slow["row_labels"], slow["row_value"], slow["scale"]) == (
        s["slowest"], {"device": "name", "phase": "phase"}, "duration_ms", 0.001)
    assert by_name["fleetnap_resume_cycles_measured"]["samples"] == [{"labels": {}, "value": 3}]

    text = assert_valid_metrics(render(metrics)).splitlines()       # promtool accepts it
    assert 'fleetnap_resume_kernel_seconds{stat="max"} 0.326676' in text
    assert 'fleetnap_resume_kernel_seconds{stat="median"} 0.285338' in text
    assert 'fleetnap_resume_slowest_device_seconds{device="0000:00:04.0",phase="resume"} 0.092717' in text
    assert "fleetnap_resume_cycles_measured 3" in text
    assert "# TYPE fleetnap_resume_part_seconds gauge" in text
    assert len([line for line in text if not line.startswith("#")]) == 2 * 3 + 3 + 3 + 1
