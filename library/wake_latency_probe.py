#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wake_latency_probe
short_description: Measure the wake-up latency of each C-state with cyclictest, then restore the settings
description:
  - For each selected C-state of the host, makes it the deepest one allowed (every deeper state
    disabled, the shallower ones enabled), runs C(cyclictest) from the C(rt-tests) package pinned
    to one CPU, and records count, min, median, p99, p99.9, mean and max of the wake-up latency,
    and how often the maximum occurs.
  - The portable method of fleetnap's wake-latency playbook. cyclictest measures the B(timer
    wake-up latency) - the C-state exit latency plus the fixed cost of the timer interrupt,
    hrtimer expiry, scheduler wake-up and context switch (and on a virtual machine the
    hypervisor's timer path). The POLL state (C0, every other state disabled) is measured first
    as the baseline, and every state reports its statistics minus the baseline's
    (RV(states[].over_baseline)) - that is the C-state's share, the analogue of the thesis's
    subtraction of its constant interrupt offset.
  - cyclictest runs with C(--default-system), so it does not hold C(/dev/cpu_dma_latency) at 0
    (which would keep every CPU in C0); PM QoS limits already in force are reported, and a state
    they keep the governor out of is flagged.
  - The C(haltpoll) cpuidle governor of KVM guests ignores per-state disables; with
    O(governor=auto) the module switches to C(menu) for the measurement.
  - The cpuidle idle-state usage counters of the probe CPU are read around every run, so the
    result shows whether the CPU really entered the state and never a deeper one.
  - Every sysfs value the module changes (state disables on the limited CPUs, the governor) is
    recorded first and written back afterwards - also when cyclictest fails or the module is
    terminated - and read back to prove the host is exactly as before. Nothing is left changed,
    so the module reports C(changed=false).
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  cpu:
    description:
      - The CPU the probe thread runs on. It should be otherwise idle (nothing pinned to it).
        Default the highest-numbered online CPU with cpuidle states.
    type: int
  states:
    description:
      - State names to measure (as in C(/sys/devices/system/cpu/cpuN/cpuidle/stateM/name)).
        Default all. POLL is always measured too, as the baseline.
    type: list
    elements: str
    default: []
  loops:
    description:
      - Wake-ups per state (cyclictest C(-l)), 1 to 10000000.
      - O(loops) times O(interval_us) is at most an hour per state (the idle states stay limited while
        a state is measured).
    type: int
    default: 2000
  interval_us:
    description:
      - Time between wake-ups in microseconds (cyclictest C(-i)). It must be longer than the
        target residency of the deepest state measured, or the governor will not choose it.
      - 50 to 1000000 (one second).
    type: int
    default: 1000
  priority:
    description:
      - SCHED_FIFO priority of the probe thread (cyclictest C(-p)); V(0) runs it as SCHED_OTHER.
    type: int
    default: 95
  governor:
    description:
      - cpuidle governor during the measurement. V(auto) switches from C(haltpoll) (which ignores
        per-state disables) to C(menu) and keeps any other governor. V(keep) never switches. Any
        other value must be one of the host's available governors. The original governor is
        restored afterwards.
    type: str
    default: auto
  limit_cpus:
    description:
      - Where the per-state limits apply. V(all) applies them on every CPU (package C-states need
        every core idle in the state; the thesis measured with one online CPU). V(probe) limits
        only the probe CPU.
    type: str
    choices: [all, probe]
    default: all
  histogram_bin_us:
    description: Bin width of the returned histograms, in microseconds (above 0, at most 1000000).
    type: float
    default: 1.0
  settle_s:
    description: Seconds to wait after changing the limits before a run starts (0 to 60).
    type: float
    default: 0.2
  no_driver:
    description:
      - What to do on a host without a cpuidle driver (a QEMU TCG guest, C(cpuidle.off=1), C(idle=poll)).
        V(fail) fails. V(idle_loop) measures only the idle-loop baseline - cyclictest on an idle CPU that
        sleeps in the kernel's default idle routine (usually HLT) - reports it as RV(idle_loop), labelled,
        and measures no C-state (RV(states) and RV(worst_us) stay empty, so nothing reaches the gate).
    type: str
    choices: [fail, idle_loop]
    default: fail
attributes:
  check_mode:
    support: full
    details:
      - Validates the input and returns the plan (states, CPUs, expected run time); measures
        nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: linux
notes:
  - Needs root, a cpuidle driver (or O(no_driver=idle_loop)), and C(cyclictest) (Debian/Ubuntu package C(rt-tests)).
  - Takes about O(loops) x O(interval_us) per state plus a second or so; a lock file
    (C(/run/fleetnap-wake-latency.lock)) keeps two measurements on one host from overlapping.
  - The NIC launch-time method of the thesis (ETF qdisc with offload, phc2sys, SO_TXTIME) needs a
    NIC with launch-time offload; see the M(etf_qdisc) module and the C(ptp_clock) role.
    RV(nic_method) says whether the host has a candidate NIC (read-only, also in check mode).
seealso:
  - module: cpuidle_qos
  - module: cpuidle_info
"""

EXAMPLES = r"""
- name: Measure every C-state on CPU 3, 5000 wake-ups 2 ms apart each
  wake_latency_probe:
    cpu: 3
    loops: 5000
    interval_us: 2000
  register: wake

- name: Feed the worst cases into the gate
  cpuidle_qos:
    max_latency_us: 50
    measured_latency_us: "{{ wake.worst_us }}"
    combine: worst
"""

RETURN = r"""
method:
  description: How the latency was measured.
  returned: always
  type: str
  sample: cyclictest
cpu:
  description: The probe CPU.
  returned: always
  type: int
  sample: 1
states:
  description: One row per measured state, POLL first (in check mode without statistics).
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: State name, type: str, sample: C1E}
    index: {description: State index, type: int, sample: 2}
    desc: {description: State description from sysfs, type: str, sample: MWAIT 0x01}
    declared_us: {description: The driver's declared exit latency, type: int, sample: 10}
    residency_us: {description: The driver's target residency, type: int, sample: 20}
    count: {description: Number of samples, type: int, sample: 2000}
    min_us: {description: Smallest wake-up latency, type: float, sample: 3.2}
    median_us: {description: Median, type: float, sample: 5.1}
    p99_us: {description: 99th percentile (nearest rank), type: float, sample: 9.8}
    p999_us: {description: 99.9th percentile (nearest rank), type: float, sample: 14.0}
    max_us: {description: Largest wake-up latency (the figure of merit), type: float, sample: 21.8}
    mean_us: {description: Mean, type: float, sample: 5.4}
    max_occurrences: {description: Samples within 1 us of the maximum, type: int, sample: 1}
    over_baseline: {description: "min/median/p99/p999/max minus POLL's (null for POLL)", type: dict}
    histogram: {description: "[[bin start us, count], ...] of the non-empty bins", type: list}
    entered: {description: Times the probe CPU entered this state during the run, type: int, sample: 1987}
    deeper_entered: {description: Times it entered a deeper (disabled) state - should be 0, type: int, sample: 0}
    qos_limited: {description: "Why PM QoS keeps the governor out of this state, or null.", type: str}
baseline:
  description: The POLL statistics (same keys as a state row), or null when POLL was not measured.
  returned: when not check mode
  type: dict
worst_us:
  description: "{state name: max_us}: what the measurement playbook stores for cpuidle_qos."
  returned: when not check mode
  type: dict
  sample: {POLL: 12.4, C1: 19.3}
table:
  description: Declared vs measured, as text.
  returned: when not check mode
  type: str
pm_qos:
  description: PM QoS in force during the measurement.
  returned: always
  type: dict
  sample: {cpu_resume_latency_us: 0, cpu_dma_latency_us: 2000000000}
governor:
  description: The governor before and during the measurement.
  returned: always
  type: dict
  sample: {before: haltpoll, during: menu}
limited_cpus:
  description: CPUs whose state disables were changed for the measurement (kernel CPU list).
  returned: always
  type: str
  sample: 0-3
restored:
  description: Every changed sysfs value was written back and read back equal to the original.
  returned: when not check mode
  type: bool
  sample: true
cyclictest:
  description: The command line of the last run.
  returned: when not check mode
  type: list
  elements: str
cpuidle_driver:
  description: The cpuidle driver, or null when the host has none.
  returned: always
  type: str
  sample: intel_idle
idle_loop:
  description:
    - On a host without a cpuidle driver (O(no_driver=idle_loop)), the idle-loop baseline (same keys as a
      state row, name C(idle-loop), declared_us null); null otherwise. Not a C-state measurement.
  returned: when not check mode
  type: dict
metrics:
  description:
    - C(fleetnap_wake_latency_seconds{state,quantile}), C(fleetnap_wake_latency_samples{state}) and
      C(fleetnap_wake_latency_declared_seconds{state}) for M(textfile_metrics) (base units; quantile 0 is the
      minimum and 1 the maximum).
  returned: when not check mode
  type: list
  elements: dict
nic_method:
  description:
    - Whether the NIC launch-time method (b) could run on this host - a NIC with a PHC, 2 or more TX
      queues and a driver with ETF offload (igb on an i210, igc, stmmac, enetc, am65-cpsw) - with the
      reason.
  returned: always
  type: dict
  contains:
    available: {description: Whether at least one NIC is a candidate., type: bool}
    candidates: {description: Names of the candidate NICs., type: list, elements: str}
    reason:
      description: Why, naming every NIC with a PHC that is not a candidate and what it lacks.
      type: str
    summary:
      description: The line a report prints, C(possible on NAMES) or C(unavailable) and the reason.
      type: str
  sample:
    available: false
    candidates: []
    reason: "no NIC with ETF launch-time offload ...; NICs with a PHC: lan0 (driver e1000e has no ETF launch-time offload)"
    summary: "unavailable: no NIC with ETF launch-time offload ...; NICs with a PHC: lan0 (driver e1000e has no ETF launch-time offload)"
expected_seconds:
  description: Expected run time of the whole measurement.
  returned: always
  type: float
  sample: 8.4
"""

import fcntl
import os
import signal
import time

from ansible.module_utils.fleetnap import command, fileio
from ansible.module_utils.fleetnap.cpuidle import (
    CPU_DIR, POLL, CpuidleError, read_cpu_dma_latency, read_model, state_names,
)
from ansible.module_utils.fleetnap.cpulist import format_cpulist
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, SysfsBatch
from ansible.module_utils.fleetnap.validate import ParamError, ansible_module, check_params, name, names, number
from ansible.module_utils.fleetnap.wakeprobe import (
    IDLE_LOOP, ProbeError, cyclictest_argv, declared_vs_measured, histogram, launch_time_nics, limit_plan, metrics,
    over_baseline, parse_verbose, qos_limits, select_states, summarize,
)

GOVERNOR = CPU_DIR + "/cpuidle/current_governor"
LOCK = "/run/fleetnap-wake-latency.lock"


def read_nics(fs):
    """Facts about every NIC backed by a device: name, driver, PCI device id, PHC, TX queues."""
    nics = []
    for name in fs.listdir("/sys/class/net"):
        base = "/sys/class/net/%s" % name
        if not fs.exists(base + "/device"):
            continue
        driver_link = fs.path(base + "/device/driver")
        ptp = fs.listdir(base + "/device/ptp")
        nics.append({"name": name,
                     "driver": os.path.basename(os.path.realpath(driver_link)) if os.path.islink(driver_link) else None,
                     "pci_device": fs.read(base + "/device/device"),
                     "phc": "/dev/%s" % sorted(ptp)[0] if ptp else None,
                     "tx_queues": len([q for q in fs.listdir(base + "/queues") if q.startswith("tx-")])})
    return nics


def nic_method(fs):
    nics = read_nics(fs)
    return dict(launch_time_nics(nics), nics=nics)


def _disable_path(cpu, index):
    return "%s/cpu%d/cpuidle/state%d/disable" % (CPU_DIR, cpu, index)


def _usage(fs, cpu, states):
    return dict((s["index"], fs.read_int("%s/cpu%d/cpuidle/state%d/usage" % (CPU_DIR, cpu, s["index"]), 0))
                for s in states)


def hold_lock(module, result):
    """One measurement per host at a time: take LOCK exclusively, without waiting, or fail.

    The descriptor is deliberately left open: the lock is held until the module process exits.
    """
    try:
        lock_fd = fileio.lock_fd(LOCK, 0o600)
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot open the lock file %s: %s" % (LOCK, exc.strerror or exc), **result)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (IOError, OSError):
        os.close(lock_fd)
        module.fail_json(msg="another wake-latency measurement holds %s on this host; wait for it to finish"
                         % LOCK, **result)
    return lock_fd


def _stop_children():
    """SIGTERM this process's own children (the running timeout + cyclictest) before exiting."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not (entry.isascii() and entry.isdigit()):
            continue
        try:
            ppid = fileio.read_proc(int(entry), "stat").decode("utf-8", "replace").rsplit(")", 1)[1].split()[1]
        except (IOError, OSError, IndexError, ValueError):
            continue
        if ppid == me:
            try:
                os.kill(int(entry), signal.SIGTERM)
            except OSError:
                pass


class Restorer(object):
    """Remembers the original value of every path it is told about and writes them all back."""

    def __init__(self, fs):
        self.fs = fs
        self.original = {}
        self.done = False

    def remember(self, path, value):
        self.original.setdefault(path, value)

    def restore(self):
        batch = SysfsBatch(self.fs)
        # disables first, the governor last (it is the first thing changed)
        for path in sorted(self.original, key=lambda p: p == GOVERNOR):
            batch.add(path, self.original[path], self.fs.read(path))
        batch.apply()
        self.done = True
        return dict((p, self.fs.read(p)) for p in self.original if self.fs.read(p) != self.original[p])


# Every option bounded before the host is read: a probe disables idle states on every CPU while it
# runs, so its length is bounded too (MAX_RUN_S per state).
MAX_RUN_S = 3600
CHECKS = {
    "cpu": number(0, 8191, integer=True),
    # cpuidle names are at most 15 characters and may hold spaces ('haltpoll idle')
    "states": names(r"^[^\x00-\x1f\x7f/]{1,15}$", "a C-state name as cpuidle shows it (e.g. C1E, POLL)"),
    "loops": number(1, 10 ** 7, integer=True),
    "interval_us": number(50, 10 ** 6, integer=True),
    "priority": number(0, 99, integer=True),
    "governor": name(r"^[a-z0-9_-]{1,15}$", "auto, keep or a cpuidle governor name (e.g. menu, teo)"),
    "histogram_bin_us": number(0, 10 ** 6, lo_open=True),
    "settle_s": number(0, 60),
}


def check_run_length(p):
    """loops x interval_us of one state's run at most MAX_RUN_S (the idle states stay limited that long)."""
    run_s = p["loops"] * p["interval_us"] / 1e6
    if run_s > MAX_RUN_S:
        raise ParamError("options loops and interval_us: %d loops of %d us are %.0f s per state; at most %d s "
                         "(idle states are limited while a probe runs)"
                         % (p["loops"], p["interval_us"], run_s, MAX_RUN_S))


def main():
    module = ansible_module(
        argument_spec=dict(
            cpu=dict(type="int"),
            states=dict(type="list", elements="str", default=[]),
            loops=dict(type="int", default=2000),
            interval_us=dict(type="int", default=1000),
            priority=dict(type="int", default=95),
            governor=dict(type="str", default="auto"),
            limit_cpus=dict(type="str", choices=["all", "probe"], default="all"),
            histogram_bin_us=dict(type="float", default=1.0),
            settle_s=dict(type="float", default=0.2),
            no_driver=dict(type="str", choices=["fail", "idle_loop"], default="fail"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    try:
        check_run_length(p)
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    fs = HostFS("/")
    try:
        model = read_model(fs)
    except CpuidleError as exc:
        module.fail_json(msg=str(exc))
    names = state_names(model)
    if not model["driver"] and p["no_driver"] == "idle_loop":
        idle_loop(module, fs, model)
    if not model["driver"] or not names:
        module.fail_json(msg="this host has no cpuidle driver or no idle states (driver: %s, %s): there are no "
                             "C-states to measure; a guest under QEMU TCG has none - measure on the physical host"
                         % (model["driver"] or "none", fs.path(CPU_DIR + "/cpu0/cpuidle")))
    by_cpu = dict((c["cpu"], c) for c in model["cpus"])
    usable = [c["cpu"] for c in model["cpus"] if c["online"] and c["states"]]
    cpu = p["cpu"] if p["cpu"] is not None else (usable[-1] if usable else None)
    if cpu not in usable:
        module.fail_json(msg="cpu: CPU %s is not an online CPU with cpuidle states on this host (usable: %s)"
                         % (cpu, format_cpulist(usable) or "none"))
    try:
        wanted = select_states(names, p["states"])
        cyclictest_argv("cyclictest", cpu, p["interval_us"], p["loops"], p["priority"])  # validates
        histogram([], p["histogram_bin_us"])
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    if POLL in names and POLL not in wanted:
        wanted.insert(0, POLL)

    governor_before = model["governor"]
    governor_during = governor_for(module, model)
    if governor_during == "haltpoll" and len(wanted) > 1:
        module.warn("the haltpoll governor ignores per-state disables: every run measures whatever haltpoll "
                    "chooses, not the state named (use governor: auto or menu)")

    limited = usable if p["limit_cpus"] == "all" else [cpu]
    cpu_states = dict((c, by_cpu[c]["states"]) for c in limited)
    probe_states = by_cpu[cpu]["states"]
    index_of = dict((s["name"], s["index"]) for s in probe_states)
    missing = [n for n in wanted if n not in index_of]
    if missing:
        module.fail_json(msg="states: %s do not exist on CPU %d (its states: %s)"
                         % (", ".join(missing), cpu, ", ".join(s["name"] for s in probe_states)))

    resume = by_cpu[cpu]["pm_qos_resume_latency_us"]
    pm_qos = {"cpu_resume_latency_us": resume, "cpu_dma_latency_us": read_cpu_dma_latency(fs)}
    rows = []
    for name in wanted:
        state = [s for s in probe_states if s["name"] == name][0]
        rows.append({"name": name, "index": state["index"], "desc": state["desc"],
                     "declared_us": state["latency_us"], "residency_us": state["residency_us"],
                     "qos_limited": None if name == POLL else qos_limits(state["latency_us"], resume,
                                                                         pm_qos["cpu_dma_latency_us"])})
        if rows[-1]["qos_limited"]:
            module.warn("PM QoS keeps the governor out of %s on CPU %d (%s): its run measures a shallower state"
                        % (name, cpu, rows[-1]["qos_limited"]))
        if state["residency_us"] and state["residency_us"] * 2 > p["interval_us"]:
            module.warn("%s has a target residency of %d us; with interval_us %d the governor may not choose it "
                        "(use an interval of at least twice the residency)"
                        % (name, state["residency_us"], p["interval_us"]))
    expected = round(len(wanted) * (p["loops"] * p["interval_us"] / 1e6 + p["settle_s"] + 0.5), 1)
    result = dict(changed=False, method="cyclictest", cpu=cpu, pm_qos=pm_qos, cpuidle_driver=model["driver"],
                  nic_method=nic_method(fs),
                  governor={"before": governor_before, "during": governor_during},
                  limited_cpus=format_cpulist(limited), expected_seconds=expected)

    cyclictest = module.get_bin_path("cyclictest")
    if not cyclictest:
        module.fail_json(msg="cyclictest was not found on %s: install the rt-tests package "
                             "(apt-get install rt-tests / dnf install rt-tests)" % os.uname()[1], **result)
    timeout_bin = module.get_bin_path("timeout", required=True)
    for cpu_n in limited:
        for s in cpu_states[cpu_n]:
            if not fs.exists(_disable_path(cpu_n, s["index"])):
                module.fail_json(msg="%s does not exist: this kernel cannot disable idle states"
                                 % fs.path(_disable_path(cpu_n, s["index"])), **result)
    if module.check_mode:
        result["states"] = rows
        module.exit_json(**result)

    hold_lock(module, result)

    restorer = Restorer(fs)

    def on_signal(signum, _frame):
        try:
            _stop_children()
            restorer.restore()
        finally:
            os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    error = None
    argv = None
    try:
        if governor_during != governor_before:
            restorer.remember(GOVERNOR, fs.read(GOVERNOR))
            batch = SysfsBatch(fs)
            batch.add(GOVERNOR, governor_during, governor_before)
            batch.apply()
        for row in rows:
            batch = SysfsBatch(fs)
            for cpu_n in limited:
                target = [s["index"] for s in cpu_states[cpu_n] if s["name"] == row["name"]]
                if not target:
                    continue
                for index, value in limit_plan(cpu_states[cpu_n], target[0]).items():
                    path = _disable_path(cpu_n, index)
                    current = fs.read(path)
                    restorer.remember(path, current)
                    batch.add(path, value, current)
            batch.apply()
            time.sleep(p["settle_s"])
            argv = cyclictest_argv(cyclictest, cpu, p["interval_us"], p["loops"], p["priority"])
            limit = int(p["loops"] * p["interval_us"] / 1e6 * 3) + 30
            before = _usage(fs, cpu, probe_states)
            rc, out, err = command.run([timeout_bin, "--kill-after=5", str(limit)] + argv, {"LC_ALL": "C"})
            after = _usage(fs, cpu, probe_states)
            if rc != 0:
                raise ProbeError("cyclictest failed on CPU %d while measuring %s (rc=%d%s): %s"
                                 % (cpu, row["name"], rc, ", timed out after %d s" % limit if rc == 124 else "",
                                    (err or out).strip()[-400:]))
            samples = parse_verbose(out)[0]
            row.update(summarize(samples))
            row["histogram"] = histogram(samples, p["histogram_bin_us"])
            row["entered"] = after[row["index"]] - before[row["index"]]
            row["deeper_entered"] = sum(after[s["index"]] - before[s["index"]]
                                        for s in probe_states if s["index"] > row["index"])
            if row["name"] != POLL and row["entered"] == 0:
                module.warn("CPU %d never entered %s during its run: the result is not that state's latency "
                            "(interval too short for its residency, PM QoS, or the governor)" % (cpu, row["name"]))
    except (ProbeError, HostFsError, OSError) as exc:
        error = str(exc)
    finally:
        try:
            left = restorer.restore()
        except HostFsError as exc:
            module.fail_json(msg="RESTORE FAILED on %s: %s; original values: %s" % (os.uname()[1], exc,
                                                                                    restorer.original), **result)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
    if left:
        module.fail_json(msg="settings not restored on %s: %s (originals: %s)" % (os.uname()[1], left,
                                                                                  restorer.original), **result)
    if error:
        module.fail_json(msg=error + "; the C-state settings were restored", restored=True, **result)

    baseline = None
    for row in rows:
        if row["name"] == POLL:
            baseline = dict((k, row[k]) for k in ("count", "min_us", "median_us", "p99_us", "p999_us", "max_us",
                                                  "mean_us", "max_occurrences"))
    for row in rows:
        row["over_baseline"] = None if row["name"] == POLL else over_baseline(row, baseline)
        if row["name"] != POLL and row["deeper_entered"]:
            module.warn("CPU %d entered a state deeper than %s %d time(s) while it was disabled"
                        % (cpu, row["name"], row["deeper_entered"]))
    result.update(states=rows, baseline=baseline, restored=True, cyclictest=argv, idle_loop=None,
                  worst_us=dict((r["name"], r["max_us"]) for r in rows), table=declared_vs_measured(rows),
                  metrics=metrics(rows))
    module.exit_json(**result)


def governor_for(module, model):
    """The governor during the measurement (O(governor) against the host's available ones)."""
    p = module.params
    before = model["governor"]
    if p["governor"] == "auto":
        return "menu" if before == "haltpoll" and "menu" in model["available_governors"] else before
    if p["governor"] == "keep":
        return before
    if p["governor"] in model["available_governors"]:
        return p["governor"]
    module.fail_json(msg="governor: %r is not available on this host; use auto, keep or one of: %s"
                     % (p["governor"], ", ".join(model["available_governors"]) or "none"))


def idle_loop(module, fs, model):
    """No cpuidle driver: measure the idle-loop baseline only (no sysfs write), clearly labelled.
    The governor is never changed (no state to keep it out of), but one that is named must exist."""
    p = module.params
    governor_for(module, model)
    online = [c["cpu"] for c in model["cpus"] if c["online"]]
    cpu = p["cpu"] if p["cpu"] is not None else (online[-1] if online else None)
    if cpu not in online:
        module.fail_json(msg="cpu: CPU %s is not online on this host (online: %s)"
                         % (cpu, format_cpulist(online) or "none"))
    if p["states"]:
        module.fail_json(msg="states: %s requested, but this host has no cpuidle driver (%s is %s): there are no "
                             "C-states to measure; leave states empty to measure the idle-loop baseline"
                         % (", ".join(p["states"]), fs.path(CPU_DIR + "/cpuidle/current_driver"),
                            fs.read(CPU_DIR + "/cpuidle/current_driver") or "missing"))
    try:
        cyclictest_argv("cyclictest", cpu, p["interval_us"], p["loops"], p["priority"])
        histogram([], p["histogram_bin_us"])
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    pm_qos = {"cpu_resume_latency_us": [c for c in model["cpus"] if c["cpu"] == cpu][0]["pm_qos_resume_latency_us"],
              "cpu_dma_latency_us": read_cpu_dma_latency(fs)}
    label = ("no cpuidle driver on this host: the idle-loop baseline only (the kernel's default idle routine, "
             "usually HLT), not a C-state measurement")
    result = dict(changed=False, method="cyclictest", cpu=cpu, pm_qos=pm_qos, cpuidle_driver=None,
                  governor={"before": model["governor"], "during": model["governor"]}, limited_cpus="",
                  expected_seconds=round(p["loops"] * p["interval_us"] / 1e6 + 0.5, 1), states=[],
                  nic_method=nic_method(fs))
    module.warn(label)
    cyclictest = module.get_bin_path("cyclictest")
    if not cyclictest:
        module.fail_json(msg="cyclictest was not found on %s: install the rt-tests package "
                             "(apt-get install rt-tests / dnf install rt-tests)" % os.uname()[1], **result)
    if module.check_mode:
        module.exit_json(**result)
    timeout_bin = module.get_bin_path("timeout", required=True)
    hold_lock(module, result)
    argv = cyclictest_argv(cyclictest, cpu, p["interval_us"], p["loops"], p["priority"])
    limit = int(p["loops"] * p["interval_us"] / 1e6 * 3) + 30
    rc, out, err = command.run([timeout_bin, "--kill-after=5", str(limit)] + argv, {"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="cyclictest failed on CPU %d while measuring the idle loop (rc=%d%s): %s"
                         % (cpu, rc, ", timed out after %d s" % limit if rc == 124 else "",
                            (err or out).strip()[-400:]), **result)
    try:
        samples = parse_verbose(out)[0]
    except ProbeError as exc:
        module.fail_json(msg=str(exc), **result)
    row = dict(name=IDLE_LOOP, index=None, desc=label, declared_us=None, residency_us=None, qos_limited=None,
               entered=None, deeper_entered=None, over_baseline=None,
               histogram=histogram(samples, p["histogram_bin_us"]), **summarize(samples))
    table = "%s\n%s" % (label, declared_vs_measured([row]))
    result.update(idle_loop=row, baseline=None, restored=True, cyclictest=argv, worst_us={}, table=table,
                  metrics=metrics([row]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
