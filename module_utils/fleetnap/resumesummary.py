# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's summary of its measured suspend/resume cycles (the resume_measure role).

A cycle is what ``pm_cycle`` collect returns for it (``resume_ms``, ``suspend_ms``, the resume
split ``cpus_ms`` / ``noirq_ms`` / ``devices_ms``, ``slowest`` device callbacks, ``mem_sleep``),
plus ``cycle`` (its number) and ``end_to_end_ms`` (wake packet to the host's service answering,
timed on the controller). ``check_cycles`` checks that shape; ``summarize`` computes:

- medians (the middle value; the mean of the two middle values for an even count) and worst
  values of kernel resume, end-to-end resume and kernel suspend;
- the resume split of the worst cycle (the one with the longest kernel resume; the later one of
  equals) and its timeline's recommendations;
- the ``top`` slowest device callbacks over all cycles, each (device, phase) once at its worst,
  longest first: a device slow on both sides of the cycle is two slow callbacks.

``resume_metrics`` turns a summary into the ``fleetnap_resume_*`` / ``fleetnap_suspend_*``
metrics (the ``metrics`` list of the ``textfile_metrics`` module), in seconds.

Standard library only.
"""

from __future__ import annotations

import math

MAX_MS = 1e7            # 2.8 hours: no cycle of a working host comes near it
MAX_CYCLES = 1000
MAX_CALLBACKS = 10000   # per cycle
TIMES = ("resume_ms", "suspend_ms", "end_to_end_ms")
SPLIT = ("cpus_ms", "noirq_ms", "devices_ms")
MEM_SLEEP = ("s2idle", "shallow", "deep", "", None)


class SummaryError(ValueError):
    """The cycles are not what pm_cycle and the resume_measure role produce (message names the field)."""


def median(values):
    """The middle value of values; for an even count the mean of the two middle ones."""
    ordered = sorted(values)
    if not ordered:
        raise SummaryError("median of no values")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SummaryError("%s: must be a number of milliseconds, got %r" % (where, value))
    if not math.isfinite(value) or not 0 <= value <= MAX_MS:
        raise SummaryError("%s: must be a finite number of milliseconds in 0..%d, got %r"
                           % (where, MAX_MS, value))
    return value


def _text(value, where, max_len=256):
    if not isinstance(value, str) or len(value) > max_len or any(ord(c) < 32 for c in value):
        raise SummaryError("%s: must be a line of text of at most %d characters, got %r"
                           % (where, max_len, value if not isinstance(value, str) else value[:60]))
    return value


def check_cycles(cycles, recommendations=None):
    """Refuse cycles (and per-cycle recommendation lists) that are not of the expected shape."""
    if not isinstance(cycles, list) or not cycles:
        raise SummaryError("cycles: must be a non-empty list of measured cycles")
    if len(cycles) > MAX_CYCLES:
        raise SummaryError("cycles: at most %d cycles, got %d" % (MAX_CYCLES, len(cycles)))
    seen = set()
    for i, cyc in enumerate(cycles):
        where = "cycles[%d]" % i
        if not isinstance(cyc, dict):
            raise SummaryError("%s: must be a cycle (a dict), got %s" % (where, type(cyc).__name__))
        number = cyc.get("cycle")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_CYCLES:
            raise SummaryError("%s.cycle: must be a whole number in 1..%d, got %r" % (where, MAX_CYCLES, number))
        if number in seen:
            raise SummaryError("%s.cycle: cycle %d is given twice" % (where, number))
        seen.add(number)
        for key in TIMES + SPLIT:
            _number(cyc.get(key), "%s.%s" % (where, key))
        if cyc.get("mem_sleep") not in MEM_SLEEP:
            raise SummaryError("%s.mem_sleep: must be s2idle, shallow, deep or null, got %r"
                               % (where, cyc.get("mem_sleep")))
        slowest = cyc.get("slowest", [])
        if not isinstance(slowest, list) or len(slowest) > MAX_CALLBACKS:
            raise SummaryError("%s.slowest: must be a list of at most %d device callbacks" % (where, MAX_CALLBACKS))
        for j, cb in enumerate(slowest):
            cb_where = "%s.slowest[%d]" % (where, j)
            if not isinstance(cb, dict):
                raise SummaryError("%s: must be a device callback (a dict), got %s" % (cb_where, type(cb).__name__))
            _text(cb.get("name"), cb_where + ".name")
            _text(cb.get("phase"), cb_where + ".phase", 64)
            _number(cb.get("duration_ms"), cb_where + ".duration_ms")
    if recommendations is not None:
        if not isinstance(recommendations, list) or len(recommendations) != len(cycles):
            raise SummaryError("recommendations: must be a list with one list per cycle (%d), got %s"
                               % (len(cycles), len(recommendations) if isinstance(recommendations, list)
                                  else type(recommendations).__name__))
        for i, recs in enumerate(recommendations):
            if not isinstance(recs, list) or len(recs) > 100:
                raise SummaryError("recommendations[%d]: must be a list of at most 100 recommendations" % i)


def slowest_callbacks(cycles, top=3):
    """The top slowest callbacks over the cycles, each (device, phase) once at its worst."""
    worst = {}
    for cyc in cycles:
        for cb in cyc.get("slowest", []):
            key = (cb["name"], cb["phase"])
            if key not in worst or cb["duration_ms"] > worst[key]["duration_ms"]:
                worst[key] = cb
    ordered = sorted(worst.values(), key=lambda cb: (-cb["duration_ms"], cb["name"], cb["phase"]))
    return ordered[:top]


def summarize(cycles, recommendations=None, host="", top=3):
    """The host's summary (the keys the resume_measure role's summary.json and metrics use)."""
    check_cycles(cycles, recommendations)
    worst_i = max(range(len(cycles)), key=lambda i: (cycles[i]["resume_ms"], i))
    worst = cycles[worst_i]
    out = {
        "host": host,
        "cycles": len(cycles),
        "mem_sleep": worst.get("mem_sleep") or "",
        "worst_cycle": worst["cycle"],
        "recommendations": recommendations[worst_i] if recommendations is not None else [],
        "slowest": slowest_callbacks(cycles, top),
    }
    for key, name in (("resume_ms", "resume_kernel"), ("end_to_end_ms", "resume_end_to_end"),
                      ("suspend_ms", "suspend_kernel")):
        values = [c[key] for c in cycles]
        out[name + "_median_ms"] = round(median(values), 3)
        out[name + "_worst_ms"] = max(values)
    for key in SPLIT:
        out[key] = worst[key]
    return out


def _stats(summary, name):
    """The median and max samples of <name>_median_ms / <name>_worst_ms, in seconds."""
    return [{"labels": {"stat": "median"}, "value": summary[name + "_median_ms"] / 1000},
            {"labels": {"stat": "max"}, "value": summary[name + "_worst_ms"] / 1000}]


def resume_metrics(summary):
    """The summary as textfile_metrics' metrics list: medians and worst values of kernel resume,
    end-to-end resume and kernel suspend, the worst cycle's split, the slowest callbacks (ms in the
    summary, seconds in the metrics) and the number of cycles."""
    return [
        {"name": "fleetnap_resume_kernel_seconds",
         "help": "Kernel resume time (machine resume to resume complete) over the last measurement's cycles.",
         "samples": _stats(summary, "resume_kernel")},
        {"name": "fleetnap_resume_end_to_end_seconds",
         "help": "Wake trigger to the host's service answering, timed on the controller.",
         "samples": _stats(summary, "resume_end_to_end")},
        {"name": "fleetnap_suspend_kernel_seconds",
         "help": "Kernel suspend time (suspend start to machine suspend) over the last measurement's cycles.",
         "samples": _stats(summary, "suspend_kernel")},
        {"name": "fleetnap_resume_part_seconds",
         "help": "Resume time by part (CPUs, noirq, devices) in the slowest measured cycle.",
         "samples": [{"labels": {"part": part}, "value": summary[part + "_ms"] / 1000}
                     for part in ("cpus", "noirq", "devices")]},
        {"name": "fleetnap_resume_slowest_device_seconds",
         "help": "The slowest device callbacks seen in the last measurement.",
         "rows": summary["slowest"], "row_labels": {"device": "name", "phase": "phase"},
         "row_value": "duration_ms", "scale": 0.001},
        {"name": "fleetnap_resume_cycles_measured",
         "help": "Number of suspend/resume cycles in the last measurement.",
         "samples": [{"labels": {}, "value": summary["cycles"]}]},
    ]
