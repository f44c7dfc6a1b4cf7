# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timer-based C-state wake-latency probe: cyclictest command lines, sample parsing, statistics.

What cyclictest measures: a thread at a real-time priority sleeps until an absolute time
(``clock_nanosleep``, CLOCK_MONOTONIC) every ``interval`` microseconds and records how late it
woke up. That lateness is the *timer wake-up latency*: the C-state exit latency of the CPU plus
the fixed overhead of the path (timer interrupt entry, hrtimer expiry, scheduler wake-up, context
switch, and on a virtual machine the hypervisor's timer and vCPU wake-up). The C-state share of it
is visible against the POLL (C0) baseline: the same probe with every state but POLL disabled, so
the CPU never leaves C0. ``stat(state) - stat(POLL)`` is the analogue of the thesis's subtraction
of its constant interrupt offset (1.8 us on the i210 method).

``--default-system`` keeps cyclictest from opening ``/dev/cpu_dma_latency`` with 0 (which would
pin every CPU in C0 and measure nothing); ``-v -N`` prints every sample in nanoseconds, so the
percentiles here are exact, not histogram bins.

Pure functions only: the module ``wake_latency_probe`` does the sysfs writes (with
``module_utils.fleetnap.sysfs.SysfsBatch``) and runs the program.
"""

from __future__ import annotations

import math
import re

from ansible.module_utils.fleetnap.cpuidle import POLL

# "       0:     196:   36875"  (thread : loop : latency) with -v; ns with -N
SAMPLE_RE = re.compile(r"^\s*(\d+):\s*(\d+):\s*(-?\d+)\s*$")
INTERVAL_RE = re.compile(r"^Thread (\d+) Interval: (\d+)")
PERCENTILES = (("median_us", 50.0), ("p99_us", 99.0), ("p999_us", 99.9))


class ProbeError(ValueError):
    """Bad probe input or output; the message says what and how to fix it."""


def cyclictest_argv(binary, cpu, interval_us, loops, priority=95):
    """The cyclictest command for one probe run on one CPU (one thread, samples on stdout in ns)."""
    for name, value, low in (("cpu", cpu, 0), ("interval_us", interval_us, 50), ("loops", loops, 1),
                             ("priority", priority, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ProbeError("%s must be an integer >= %d, got %r" % (name, low, value))
    if priority > 99:
        raise ProbeError("priority must be 0-99 (SCHED_FIFO; 0 runs the probe as SCHED_OTHER), got %d" % priority)
    argv = [binary, "--default-system", "--mlockall", "--quiet", "--verbose", "--nsecs",
            "--affinity=%d" % cpu, "--threads=1", "--distance=0",
            "--interval=%d" % interval_us, "--loops=%d" % loops]
    if priority:
        argv.append("--priority=%d" % priority)
    else:
        argv.append("--policy=other")
    return argv


def parse_verbose(text):
    """Samples in ns from ``cyclictest -v -N`` output: {thread: [ns, ...]} in loop order.

    Raises ProbeError when the output has no samples (the error lines are quoted).
    """
    samples = {}
    for line in text.splitlines():
        match = SAMPLE_RE.match(line)
        if match:
            samples.setdefault(int(match.group(1)), []).append(int(match.group(3)))
    if not samples:
        tail = "; ".join(l.strip() for l in text.strip().splitlines()[-3:]) or "(no output)"
        raise ProbeError("cyclictest printed no samples: %s" % tail)
    return samples


def percentile(sorted_values, pct):
    """Nearest-rank percentile (the value of the ceil(pct/100 * n)-th smallest sample)."""
    if not sorted_values:
        raise ProbeError("percentile of an empty sample set")
    if not 0 < pct <= 100:
        raise ProbeError("percentile must be in (0, 100], got %r" % pct)
    # round first: 99.9 / 100 * 1000 is 999.0000000000001 in binary floating point
    rank = int(math.ceil(round(pct * len(sorted_values) / 100.0, 9)))
    return sorted_values[max(rank, 1) - 1]


def summarize(samples_ns, resolution_ns=1000):
    """count, min, median, p99, p99.9, max, mean (us) and how often the maximum occurs.

    ``max_occurrences`` counts the samples within ``resolution_ns`` of the maximum (cyclictest's
    own histogram resolution is 1 us): the thesis reports how often its maximum was hit, because a
    maximum seen once is a weaker figure than one seen many times.
    """
    if not samples_ns:
        raise ProbeError("no samples to summarize")
    values = sorted(samples_ns)
    top = values[-1]
    out = {
        "count": len(values),
        "min_us": values[0] / 1000.0,
        "max_us": top / 1000.0,
        "mean_us": round(sum(values) / 1000.0 / len(values), 3),
        "max_occurrences": sum(1 for v in values if v > top - resolution_ns),
    }
    for key, pct in PERCENTILES:
        out[key] = percentile(values, pct) / 1000.0
    return out


def histogram(samples_ns, bin_us=1.0):
    """[[bin start us, count], ...] for the non-empty bins (for the HTML page)."""
    if bin_us <= 0:
        raise ProbeError("bin_us must be > 0, got %r" % bin_us)
    counts = {}
    for value in samples_ns:
        start = math.floor(value / 1000.0 / bin_us) * bin_us
        counts[start] = counts.get(start, 0) + 1
    return [[round(k, 6), counts[k]] for k in sorted(counts)]


def over_baseline(stats, baseline):
    """Per statistic, the state's value minus the POLL baseline's (the C-state share)."""
    if not baseline:
        return None
    return dict((key, round(stats[key] - baseline[key], 3))
                for key in ("min_us", "median_us", "p99_us", "p999_us", "max_us"))


def limit_plan(cpu_states, target_index):
    """{index: "0"/"1"}: enable states up to ``target_index``, disable the deeper ones.

    ``cpu_states`` are the state dicts of one CPU (index, name, disable); POLL (index 0) is never
    disabled. For POLL itself every other state is disabled, so the CPU stays in C0.
    """
    indexes = [s["index"] for s in cpu_states]
    if target_index not in indexes:
        raise ProbeError("state index %r does not exist on this CPU (indexes %s)" % (target_index, indexes))
    plan = {}
    for state in cpu_states:
        if state["name"] == POLL:
            plan[state["index"]] = "0"
        else:
            plan[state["index"]] = "0" if state["index"] <= target_index else "1"
    return plan


def select_states(names, wanted):
    """The state names to measure, in index order; unknown names are an error naming the known ones."""
    if not wanted:
        return list(names)
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ProbeError("states: unknown C-state(s) %s; this host's states are: %s"
                         % (", ".join(unknown), ", ".join(names) or "none (no cpuidle driver)"))
    return [n for n in names if n in wanted]


def qos_limits(declared_us, resume_latency, global_latency):
    """Why PM QoS would keep the governor out of a state with this declared latency, or None.

    ``resume_latency`` is the CPU's ``pm_qos_resume_latency_us`` (0 = no constraint, "n/a" = no
    latency at all), ``global_latency`` the value of ``/dev/cpu_dma_latency`` (us).
    """
    reasons = []
    if resume_latency == "n/a":
        reasons.append("pm_qos_resume_latency_us is n/a (no wake-up latency tolerated)")
    elif isinstance(resume_latency, int) and resume_latency > 0 and declared_us is not None \
            and declared_us >= resume_latency:
        reasons.append("pm_qos_resume_latency_us %d <= declared %d us" % (resume_latency, declared_us))
    if global_latency is not None and declared_us is not None and 0 <= global_latency < declared_us \
            and global_latency < 2000000000:
        reasons.append("/dev/cpu_dma_latency %d < declared %d us" % (global_latency, declared_us))
    return "; ".join(reasons) or None


def declared_vs_measured(rows):
    """A text table like the thesis's: state, declared, measured max, ratio, median, p99, share."""
    head = ("state", "declared us", "max us", "x declared", "median us", "p99 us", "p99.9 us", "count",
            "max - POLL max")
    lines = [head]
    for row in rows:
        declared = row.get("declared_us")
        ratio = "-" if not declared else "%.1f" % (row["max_us"] / float(declared))
        share = row.get("over_baseline") or {}
        lines.append((row["name"], "-" if declared is None else "%s" % declared, "%.1f" % row["max_us"], ratio, "%.1f" % row["median_us"],
                      "%.1f" % row["p99_us"], "%.1f" % row["p999_us"], "%d" % row["count"],
                      "-" if "max_us" not in share else "%.1f" % share["max_us"]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(line, widths))) for line in lines)


# --- results as Prometheus textfile metrics (rendered by module_utils.fleetnap.prom) ----------------

IDLE_LOOP = "idle-loop"
QUANTILES = (("0", "min_us"), ("0.5", "median_us"), ("0.99", "p99_us"), ("0.999", "p999_us"), ("1", "max_us"))


def metrics(rows):
    """fleetnap_wake_latency_* metrics for prom.render from measured state rows (base units).

    ``fleetnap_wake_latency_seconds{state, quantile}`` with quantile 0 (min), 0.5, 0.99, 0.999 and
    1 (max, the figure of merit), ``fleetnap_wake_latency_samples{state}`` (wake-ups measured) and
    ``fleetnap_wake_latency_declared_seconds{state}`` (the driver's exit latency; not for the
    idle-loop row of a host without a cpuidle driver, which declares nothing).
    """
    latency, samples, declared = [], [], []
    for row in rows:
        if "count" not in row:
            continue
        for quantile, key in QUANTILES:
            latency.append({"labels": {"state": row["name"], "quantile": quantile}, "value": row[key] / 1e6})
        samples.append({"labels": {"state": row["name"]}, "value": row["count"]})
        if row.get("declared_us") is not None:
            declared.append({"labels": {"state": row["name"]}, "value": row["declared_us"] / 1e6})
    out = [
        {"name": "fleetnap_wake_latency_seconds", "type": "gauge", "samples": latency,
         "help": "Timer wake-up latency per C-state measured by cyclictest (quantile 0 = min, 1 = max); "
                 "state idle-loop = a host without a cpuidle driver."},
        {"name": "fleetnap_wake_latency_samples", "type": "gauge", "samples": samples,
         "help": "Wake-ups measured per C-state in the last wake-latency measurement."},
    ]
    if declared:
        out.append({"name": "fleetnap_wake_latency_declared_seconds", "type": "gauge", "samples": declared,
                    "help": "Exit latency the cpuidle driver declares for the state."})
    return out


# --- the NIC launch-time method (b): is there a NIC that can do it? ------------------------------

# Drivers with ETF launch-time offload (tc-etf "offload"; ndo_setup_tc TC_SETUP_QDISC_ETF) in
# Linux 6.1: igb (only the i210's queues 0 and 1), igc (i225/i226), stmmac (dwmac4/5 with TBS),
# enetc (NXP), and am65-cpsw (TI). Nothing in sysfs or ethtool reports the capability: the driver
# list is the pre-check, and etf_qdisc with offload 'on' is the proof (the driver refuses otherwise).
LAUNCH_TIME_DRIVERS = ("igb", "igc", "stmmac", "enetc", "fsl_enetc", "am65-cpsw-nuss")
I210_DEVICE_IDS = ("0x1533", "0x1536", "0x1537", "0x1538", "0x157b", "0x157c", "0x15f6")


def launch_time_nics(nics):
    """Method (b) availability from NIC facts.

    ``nics``: [{name, driver, pci_device (e.g. "0x1533") or None, phc ("/dev/ptp0") or None,
    tx_queues}]. Returns {available, candidates: [names], reason}: candidates have a PHC, at least
    2 TX queues (mqprio) and a driver with ETF offload (igb only on an i210); summary: the line a
    report prints ("possible on NAMES" or "unavailable: REASON").
    """
    candidates, refused = [], []
    for nic in sorted(nics, key=lambda n: n["name"]):
        why = None
        if not nic.get("phc"):
            why = "no PTP hardware clock"
        elif nic.get("driver") not in LAUNCH_TIME_DRIVERS:
            why = "driver %s has no ETF launch-time offload" % (nic.get("driver") or "none")
        elif nic["driver"] == "igb" and nic.get("pci_device") not in I210_DEVICE_IDS:
            why = "igb offloads launch time only on the i210 (device %s)" % nic.get("pci_device")
        elif (nic.get("tx_queues") or 0) < 2:
            why = "%d TX queue(s); mqprio + etf needs 2 or more" % (nic.get("tx_queues") or 0)
        if why:
            if nic.get("phc"):
                refused.append("%s (%s)" % (nic["name"], why))
        else:
            candidates.append(nic["name"])
    if candidates:
        return {"available": True, "candidates": candidates,
                "reason": "launch-time offload candidates: %s (etf_qdisc offload: 'on' confirms)" % ", ".join(candidates),
                "summary": "possible on %s" % ", ".join(candidates)}
    reason = ("no NIC with ETF launch-time offload (a PHC and igb/i210, igc, stmmac, enetc or am65-cpsw)"
              + ("; NICs with a PHC: " + ", ".join(refused) if refused else "; no NIC has a PTP hardware clock"))
    return {"available": False, "candidates": [], "reason": reason, "summary": "unavailable: " + reason}
