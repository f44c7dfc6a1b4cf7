#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleetnap_profile
short_description: Apply a latency profile in one call (C-state gate and system sleep policy)
description:
  - One module call per host for what the role C(latency_profile) otherwise does in four. It reads
    the measurements fleetnap's measurement playbooks stored on the host, gates the C-states by
    the CPU wake-up budget exactly as M(cpuidle_qos) does, decides the system sleep state from
    the measured resume latency and applies it exactly as M(sleep_policy) does.
  - Stored wake latencies (C(wake_latency_us) in O(measurements_file)) are used for the states the
    host has; a value given in O(cstates.measured_latency_us) wins over the stored one.
  - "The sleep state: V(deep) when the host offers S3 and the measured resume latency fits
    O(sleep.resume_budget_ms) (or there is no budget), else V(s2idle) when O(sleep.fallback=s2idle)
    and the host offers suspend-to-idle, else V(none)."
  - With O(sleep.advice) the PowerNap model of M(powernap_advice) decides instead of the budget, in
    this same call on the host; S3 is allowed when the host offers it, its resume latency is
    measured and the model advises sleeping at the given utilisation.
  - Both parts are planned (read, validated, decided, writability checked) before anything is
    written, so bad input in either part fails and changes nothing. If the sleep part fails while
    writing, the C-state writes of the same call are rolled back.
  - With O(state=present) the files the profile set and their values (C-state disables, the
    CPU frequency files of O(cpufreq)) are kept in C(/var/lib/fleetnap/profile.want); the role
    C(gear_member)'s put-back after a park's wake compares them with what the host shows and writes
    back those that drifted, counting them (C(fleetnap_profile_drift_total), with O(metrics_dir)).
    O(state=absent) removes it.
  - Which module to call. This one, to apply a latency profile, in one call per host (a Python start
    on the host is what a fleet-wide apply costs). M(cpuidle_qos) and M(sleep_policy) are its two
    halves for a host that needs only one of them; all three share the code and the originals
    records under C(/var/lib/fleetnap).
version_added: "0.2.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  cstates:
    description:
      - The C-state gate, with the options of M(cpuidle_qos) (O(state), O(sysfs_root) and
        O(metrics_dir) are given at the top level of this module).
    type: dict
    default: {}
    suboptions:
      max_latency_us:
        description:
          - Latency budget in microseconds. States whose effective exit latency exceeds it are
            disabled, the others enabled. Omit (or null) for no limit.
        type: float
      measured_latency_us:
        description:
          - Worst measured wake latency per state name, in microseconds. Merged over the stored
            measurements of O(measurements_file) (a value given here wins).
        type: dict
        default: {}
      declared_latency_margin:
        description: Multiplier applied to declared latencies of states that were not measured. Must be >= 1.
        type: float
        default: 1.0
      combine:
        description:
          - V(measured) takes the measurement when there is one; V(worst) takes the larger of
            measured and declared x margin.
        type: str
        choices: [measured, worst]
        default: measured
      disable:
        description: State names to disable regardless of the budget.
        type: list
        elements: str
        default: []
      enable:
        description: State names to enable regardless of the budget.
        type: list
        elements: str
        default: []
      cpus:
        description: CPUs to act on, as a kernel CPU list or a list of numbers. Default all present CPUs.
        type: raw
      resume_latency_us:
        description: Per-CPU PM QoS resume latency for the selected CPUs (V(0) = no constraint). Omit to leave it.
        type: int
      global_latency_us:
        description:
          - Global CPU wake-up latency limit held on C(/dev/cpu_dma_latency) by the service
            C(fleetnap-cpu-dma-latency). Omit to remove a limit set earlier by fleetnap.
        type: int
      pm_qos:
        description:
          - Derive the per-CPU PM QoS resume latency from the budget, rounded up to whole
            microseconds (V(0), no constraint, without a budget). A budget below 1 microsecond is
            refused (a PM QoS value of 0 means no constraint, not none allowed). Not together with
            O(cstates.resume_latency_us).
        type: bool
        default: false
      global_latency:
        description:
          - Derive O(cstates.global_latency_us) from the budget, rounded up (nothing without a
            budget). Not together with O(cstates.global_latency_us).
        type: bool
        default: false
      governor:
        description: cpuidle governor to switch to (one of the host's C(available_governors)); omit to keep it.
        type: str
      persist:
        description: Re-apply the state disables and the per-CPU PM QoS at boot (service C(fleetnap-cpuidle)).
        type: bool
        default: false
  sleep:
    description: The system sleep part (M(sleep_policy)) and how its state is decided.
    type: dict
    default: {}
    suboptions:
      manage:
        description: Manage the system sleep states. V(false) leaves them alone (the decision is still reported).
        type: bool
        default: true
      resume_budget_ms:
        description:
          - Resume budget in milliseconds. S3 is allowed only when the host's measured resume
            latency is known and within it. Omit (or null) for no limit.
        type: raw
      resume_measured_ms:
        description:
          - Measured resume latency in milliseconds. Omit (or null) to use what
            C(measure_resume.yml) stored in O(measurements_file) (C(resume.<resume_metric>_ms)).
        type: raw
      resume_metric:
        description:
          - Which stored resume latency the budget is compared with. V(end_to_end) (wake packet to the
            host answering) or V(kernel) (sleepgraph's resume time).
        type: str
        choices: [end_to_end, kernel]
        default: end_to_end
      fallback:
        description: What to allow when S3 is not allowed.
        type: str
        choices: [s2idle, none]
        default: s2idle
      mask_targets:
        description: When the decision is V(none), mask systemd's sleep targets (see M(sleep_policy)).
        type: bool
        default: true
      advice:
        description:
          - Decide S3 by the PowerNap model (M(powernap_advice)) instead of O(sleep.resume_budget_ms),
            which is then not used. The model's other constants keep the defaults M(powernap_advice)
            documents.
          - Omit (or null) for the budget rule. Not used with O(state=absent).
          - The measured resume latency must be at most an hour (the model's bound), else the call fails.
        type: dict
        suboptions:
          utilization:
            description:
              - The host's recent utilisation, a busy fraction in [0, 1), or a list of such samples
                (at most 100000) of which O(sleep.advice.utilization_percentile) is used.
            type: raw
            required: true
          utilization_percentile:
            description: The percentile of the samples used, in (0, 100] (the busy hours, not the average).
            type: float
            default: 95.0
          response_time_objective:
            description: Mean response time allowed, as a multiple (1 to 1000) of the one without power management.
            type: float
            default: 1.5
          require_beating_dvfs:
            description: Advise sleeping only when it also draws less power than DVFS would.
            type: bool
            default: true
          service_time_s:
            description: Mean request service time of the host's service, in seconds (above 0, at most 3600).
            type: float
            default: 0.038
          service_time_cv:
            description: Coefficient of variation of the service time (0 to 100).
            type: float
            default: 1.0
          svg:
            description:
              - Return the model's power and response-time curves as SVG text in RV(powernap_svg)
                (in check mode too, since nothing is written on the host).
            type: bool
            default: false
  cpufreq:
    description:
      - The CPU frequency part of the profile, decided on what the host's driver shows
        (C(/sys/devices/system/cpu/cpufreq), C(intel_pstate), C(amd_pstate), C(energy_perf_bias),
        C(intel_uncore_frequency)). Each field is optional; an absent (or null) field leaves its
        knob as it is.
      - A value the host's driver does not take (a governor it does not offer, EPP without HWP or
        in amd-pstate's passive mode, an EPP other than V(performance) under intel_pstate's
        V(performance) governor, a frequency outside C(cpuinfo_min_freq..cpuinfo_max_freq)) fails
        the call before anything is written, naming the field and what the host allows.
      - Written in the same batch as the C-states and the sleep policy (a failure undoes them all).
        The value a file held before fleetnap first wrote it is kept in
        C(/var/lib/fleetnap/pstate.orig.json); O(state=absent) writes those values back and removes
        the record.
    type: dict
    default: {}
    suboptions:
      governor:
        description: cpufreq governor for every policy (one of its C(scaling_available_governors)).
        type: str
      min_khz:
        description:
          - Minimum frequency of every policy (C(scaling_min_freq)), in kHz, or V(min), V(max),
            V(base) (C(base_frequency), intel_pstate) or a percentage of the CPU's range like V(50%).
        type: raw
      max_khz:
        description: Maximum frequency of every policy (C(scaling_max_freq)), as O(cpufreq.min_khz).
        type: raw
      turbo:
        description: Turbo (intel_pstate C(no_turbo), else C(cpufreq/boost)) on or off.
        type: bool
      epp:
        description:
          - Energy-performance preference of every policy, a name the driver offers
            (C(energy_performance_available_preferences)) or, under intel_pstate, a number 0-255.
        type: raw
      epb:
        description:
          - Energy-performance bias of every CPU, 0 (performance) to 15 (power), or V(performance),
            V(balance-performance), V(normal), V(balance-power), V(power).
        type: raw
      uncore_min_khz:
        description:
          - Minimum uncore frequency of every domain (TPMI C(uncoreNN) where the host has them, else
            legacy C(package_XX_die_YY)), in kHz, V(min), V(max) or a percentage of the domain's
            initial range.
        type: raw
      uncore_max_khz:
        description: Maximum uncore frequency of every domain, as O(cpufreq.uncore_min_khz).
        type: raw
      elc_low_percent:
        description:
          - Efficiency latency control of TPMI uncore domains (Granite Rapids, Sierra Forest), the low
            threshold of utilisation in percent (C(elc_low_threshold_percent)), 0-100; below it the
            uncore runs at O(cpufreq.elc_floor_khz). At most the high threshold.
        type: raw
      elc_high_percent:
        description: The high threshold (C(elc_high_threshold_percent)), 0-100; above it the uncore ramps up.
        type: raw
      elc_high_enable:
        description: Whether the high threshold is used (C(elc_high_threshold_enable)).
        type: bool
      elc_floor_khz:
        description:
          - The uncore's floor below the low threshold (C(elc_floor_freq_khz)), in kHz, V(min), V(max)
            or a percentage of the domain's initial range.
        type: raw
  measurements_file:
    description:
      - The JSON the measurement playbooks store on the host, found under O(sysfs_root)
        (C(wake_latency_us) maps state names to microseconds, C(resume) holds C(<metric>_ms)
        values). A missing file means no
        stored measurements; a file that is not a JSON object fails.
    type: path
    default: /etc/ansible/facts.d/fleetnap.fact
  metrics_dir:
    description:
      - node_exporter textfile collector directory (on the host, not under O(sysfs_root)). When set,
        the gate writes C(fleetnap_cpuidle.prom) and the sleep policy C(fleetnap_sleep_policy.prom),
        as M(cpuidle_qos) and M(sleep_policy) do.
    type: path
  state:
    description:
      - V(present) applies the profile. V(absent) restores what the kernel had before fleetnap
        (both parts; the sleep part only with O(sleep.manage)).
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description: Root under which C(/sys), C(/proc/cmdline), C(/etc) and C(/var/lib) are found; V(/) is the live host.
    type: path
    default: /
attributes:
  check_mode:
    support: full
    details:
      - Decides both parts and returns the decision and the diff, writes nothing.
  diff_mode:
    support: full
    details:
      - C(before)/C(after) hold C(cstates) (as M(cpuidle_qos)), C(sleep) (as M(sleep_policy)) and
        C(cpufreq) (each CPU frequency file written, with its value before and after).
  platform:
    support: full
notes:
  - The PowerNap advice (role variable C(latency_profile_sleep_policy=advise)) runs on the controller;
    this module takes only the budget rule. The role keeps its multi-task path for advise.
seealso:
  - module: cpuidle_qos
  - module: sleep_policy
  - module: cpuidle_info
"""

EXAMPLES = r"""
- name: C-states within 20 us, S3 only where resume fits 500 ms (stored measurements used)
  fleetnap_profile:
    cstates:
      max_latency_us: 20
      declared_latency_margin: 1.5
    sleep:
      resume_budget_ms: 500

- name: Allow S3 only where the PowerNap model says sleeping pays at this host's load
  fleetnap.power.fleetnap_profile:
    cstates:
      max_latency_us: 50
    sleep:
      advice:
        utilization: [0.02, 0.05, 0.04, 0.11]
        response_time_objective: 1.5

- name: A latency-critical host (C1 at most, no system sleep at all), publish metrics
  fleetnap_profile:
    cstates:
      max_latency_us: 2
      resume_latency_us: 2
    sleep:
      resume_budget_ms: 0
      fallback: none
    metrics_dir: /var/lib/prometheus/node-exporter

- name: A latency-critical policy beside the C-states (tuned's latency-performance, in one call)
  fleetnap.power.fleetnap_profile:
    cstates:
      max_latency_us: 10
    cpufreq:
      governor: performance
      epp: performance
      epb: performance
      min_khz: base
      uncore_min_khz: max

- name: Undo every part (C-states, sleep policy, CPU frequency knobs)
  fleetnap_profile:
    state: absent
"""

RETURN = r"""
driver:
  description: The cpuidle driver, or null when the host has none.
  returned: always
  type: str
  sample: intel_idle
states:
  description: The gate's decision per state (as M(cpuidle_qos) returns it; empty with state=absent).
  returned: always
  type: list
  elements: dict
  sample: [{name: POLL, index: 0, declared_us: 0, measured_us: null, effective_us: 0, allowed: true,
            reason: POLL always stays enabled}]
allowed_states:
  description: Names of the states the gate allows.
  returned: always
  type: list
  elements: str
  sample: [POLL, C1]
disabled_states:
  description: Names of the states the gate disables.
  returned: always
  type: list
  elements: str
  sample: [C1E, C6]
measured_latency_us:
  description: The measurements the gate used (stored ones for states the host has, given ones winning).
  returned: always
  type: dict
  sample: {C1: 19.3}
sleep:
  description:
    - The sleep state in force after the call (deep, s2idle or none); null when not managed or
      with state=absent.
  returned: always
  type: str
  sample: deep
sleep_decided:
  description: The sleep state the budget rule chose (also when the sleep part is not managed).
  returned: always
  type: str
  sample: deep
sleep_reason:
  description: Why (the same text as the role's decision table).
  returned: always
  type: str
  sample: resume 142.6 ms <= budget 500 ms
resume_measured_ms:
  description: The resume latency the budget was compared with (given or stored), or null.
  returned: always
  type: raw
  sample: 142.6
budget_us:
  description: The CPU wake-up budget the gate used (O(cstates.max_latency_us)), or null for none.
  returned: always
  type: float
  sample: 50.0
resume_budget_ms:
  description: The resume budget as given (O(sleep.resume_budget_ms)), or null.
  returned: always
  type: raw
  sample: 500
powernap:
  description:
    - The PowerNap advice, as M(powernap_advice) returns it (C(advice), C(reason), the power and
      response-time figures, the model); empty without O(sleep.advice) or when the resume latency
      is not measured.
  returned: always
  type: dict
  sample: {advice: sleep, reason: "resume 10 ms at 2 % load (single value): power 0.13x (DVFS 0.71x, crossover 42.1 %),
           response 1.26x <= objective 1.5x"}
powernap_svg:
  description: The model's curves (SVG text), highlighting the host's resume latency.
  returned: when O(sleep.advice.svg) is true and the advice was computed
  type: str
cstates:
  description: The gate's full result, as M(cpuidle_qos) returns it (without C(diff)).
  returned: always
  type: dict
sleep_policy:
  description: The sleep part's full result, as M(sleep_policy) returns it (without C(diff)); empty when not managed.
  returned: always
  type: dict
profile_drift:
  description:
    - The files of the profile found changed after a wake and written back by the host itself
      (gear_member's put-back after a park, pm_cycle after a measured cycle) since the profile was
      applied, per knob (C(/var/lib/fleetnap/drift.counts), as the call found it; state=absent
      removes it).
  returned: always
  type: dict
  sample: {epp: 8, epb: 8}
cpufreq:
  description:
    - The CPU frequency part. C(before) is what the host showed (driver, mode, HWP, governors, EPP and
      EPB values in use, the frequency ranges, turbo, the uncore layout), C(after) the same once the
      writes are made (predicted in check mode), C(writes) the number of files written, C(restored)
      (state=absent) whether a record was written back. Empty when no field is given and there is
      nothing to restore.
  returned: always
  type: dict
  sample: {writes: 3, restored: false, before: {driver: intel_pstate, mode: active, hwp: true, governors: [powersave],
           epp: [balance_performance], epb: [6], khz: [[800000, 3800000]], turbo: "on", uncore: [legacy], policies: 4},
           after: {driver: intel_pstate, mode: active, hwp: true, governors: [performance], epp: [performance],
           epb: [6], khz: [[800000, 3800000]], turbo: "on", uncore: [legacy], policies: 4}}
"""

import copy
import math

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.cpuidle import state_names
from ansible.module_utils.fleetnap.cpufreqpolicy import (
    apply_cpufreq, check_fields, cpufreq_result, drift_so_far, plan_cpufreq, want_text, write_want,
)
from ansible.module_utils.fleetnap.gate import (
    GATE_ARGS, GATE_TOP_LEVEL, PM_QOS_MAX_US, apply_gate, check_gate_inputs, gate_result, plan_gate,
    read_gate_model,
)
from ansible.module_utils.fleetnap.parse import ParseError, loads, number_of
from ansible.module_utils.fleetnap.sleep import read_sleep
from ansible.module_utils.fleetnap.sleeppolicy import apply_sleep, plan_sleep, sleep_result
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError
from ansible.module_utils.fleetnap.powernapconf import ADVICE_BOUNDS, DEFAULTS
from ansible.module_utils.fleetnap.validate import (
    ParamError, ansible_module, check_params, number as number_check, path as path_check, validate,
)

CHECKS = {"sysfs_root": path_check(), "metrics_dir": path_check(), "measurements_file": path_check()}

SLEEP_OPTIONS = dict(
    manage=dict(type="bool", default=True),
    resume_budget_ms=dict(type="raw"),
    resume_measured_ms=dict(type="raw"),
    resume_metric=dict(type="str", choices=["end_to_end", "kernel"], default="end_to_end"),
    fallback=dict(type="str", choices=["s2idle", "none"], default="s2idle"),
    mask_targets=dict(type="bool", default=True),
    advice=dict(type="dict", options=dict(
        utilization=dict(type="raw", required=True),
        utilization_percentile=dict(type="float", default=95.0),
        response_time_objective=dict(type="float", default=1.5),
        require_beating_dvfs=dict(type="bool", default=True),
        service_time_s=dict(type="float", default=DEFAULTS["service_time_s"]),
        service_time_cv=dict(type="float", default=DEFAULTS["service_time_cv"]),
        svg=dict(type="bool", default=False),
    )),
)
CPUFREQ_OPTIONS = dict(
    governor=dict(type="str"),
    min_khz=dict(type="raw"),
    max_khz=dict(type="raw"),
    turbo=dict(type="bool"),
    epp=dict(type="raw"),
    epb=dict(type="raw"),
    uncore_min_khz=dict(type="raw"),
    uncore_max_khz=dict(type="raw"),
    elc_low_percent=dict(type="raw"),
    elc_high_percent=dict(type="raw"),
    elc_high_enable=dict(type="bool"),
    elc_floor_khz=dict(type="raw"),
)
NOT_MEASURED = "resume latency not measured yet (run measure_resume.yml)"
# The longest resume the PowerNap advice takes (powernap.check_latency: an hour), in ms.
RESUME_MAX_MS = 3600 * 1000
# The advice's numbers, bounded as powernap_advice bounds them (one table: powernapconf.ADVICE_BOUNDS).
ADVICE_CHECKS = dict(("sleep.advice." + k, number_check(**bounds)) for k, bounds in ADVICE_BOUNDS.items())


def argument_spec():
    cstates = dict((k, copy.deepcopy(v)) for k, v in GATE_ARGS.items() if k not in GATE_TOP_LEVEL)
    cstates.update(pm_qos=dict(type="bool", default=False), global_latency=dict(type="bool", default=False))
    return dict(
        cstates=dict(type="dict", default={}, options=cstates, apply_defaults=True),
        sleep=dict(type="dict", default={}, options=copy.deepcopy(SLEEP_OPTIONS), apply_defaults=True),
        cpufreq=dict(type="dict", default={}, options=copy.deepcopy(CPUFREQ_OPTIONS), apply_defaults=True),
        measurements_file=dict(type="path", default="/etc/ansible/facts.d/fleetnap.fact"),
        metrics_dir=dict(type="path"),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        sysfs_root=dict(type="path", default="/"),
    )


def number(module, name, value):
    """A number given as int, float or numeric string -> float (one parser: ASCII digits, finite,
    no 400-digit integer); fail_json otherwise. NaN compares false with everything: a NaN budget
    or measurement would silently decide s2idle."""
    if value is None:
        return None
    try:
        return float(number_of(value, name))
    except ParseError:
        words = "finite number" if isinstance(value, float) or str(value).strip().lower() in ("nan", "inf", "-inf",
                                                                                              "infinity") else "number"
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        module.fail_json(msg="%s must be a %s of milliseconds (or null), got %s" % (name, words, shown))


def stored_measurements(module, fs, path):
    try:
        text = fs.read(path, limit=fileio.RECORD)
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="measurements_file: %s; nothing was changed"
                             % (exc.reason if isinstance(exc, UnicodeDecodeError) else exc))
    if not text or not text.strip():
        return {}
    try:
        data = loads(text, fs.path(path), fileio.RECORD)
    except ParseError as exc:
        data = exc
    if not isinstance(data, dict):
        module.fail_json(msg="measurements_file %s does not hold a JSON object (%s); repair it or move it aside "
                             "(measure_resume.yml and measure_wake_latency.yml write it again)"
                         % (fs.path(path), data))
    for key in ("wake_latency_us", "resume"):
        if not isinstance(data.get(key, {}), dict):
            module.fail_json(msg="measurements_file %s: %r must be an object, got %r; repair it or move it aside"
                             % (fs.path(path), key, data[key]))
    return data


def sleep_state(offer, s3_fits, fallback):
    """deep where the host offers S3 and the rule lets it, else the fallback the host offers, else none."""
    if offer["s3_available"] and s3_fits:
        return "deep"
    if fallback == "s2idle" and offer["s2idle_available"]:
        return "s2idle"
    return "none"


def decide_sleep(offer, budget, budget_f, resume, resume_f, fallback):
    """The role's budget rule: (state, reason)."""
    fits = budget is None or (resume is not None and resume_f <= budget_f)
    state = sleep_state(offer, fits, fallback)
    if not offer["s3_available"]:
        reason = "S3 not offered by this host"
    elif budget is None:
        reason = "no resume budget"
    elif resume is None:
        reason = NOT_MEASURED
    else:
        reason = "resume %s ms %s budget %s ms" % (resume, "<=" if fits else ">", budget)
    return state, reason


def derived_latencies(module, cs):
    """cstates with resume_latency_us / global_latency_us derived from the budget where pm_qos /
    global_latency ask for it (whole microseconds, rounded up), those two switches removed."""
    cs = dict(cs)
    pm_qos, global_latency = cs.pop("pm_qos"), cs.pop("global_latency")
    budget = cs["max_latency_us"]
    for switch, key in ((pm_qos, "resume_latency_us"), (global_latency, "global_latency_us")):
        if switch and cs[key] is not None:
            module.fail_json(msg="cstates.%s and cstates.%s both given: give the value or derive it from the "
                                 "budget, not both; nothing was changed"
                                 % (key, "pm_qos" if key == "resume_latency_us" else "global_latency"))
    if budget is not None and (not math.isfinite(budget) or budget < 0 or budget > PM_QOS_MAX_US):
        return cs           # the gate refuses it, naming the option
    if pm_qos:
        if budget is not None and budget < 1:
            module.fail_json(msg="cstates.pm_qos needs cstates.max_latency_us of at least 1 microsecond (a PM QoS "
                                 "value of 0 means no constraint), got %g; nothing was changed" % budget)
        cs["resume_latency_us"] = int(math.ceil(budget)) if budget is not None else 0
    if global_latency and budget is not None:
        cs["global_latency_us"] = int(math.ceil(budget))
    return cs


def _powernap():
    """The PowerNap model, imported only for a profile with advice (a module ships as source: every
    host would compile it on every apply)."""
    from ansible.module_utils.fleetnap import powernap
    return powernap


def checked_advice(module, advice):
    """sleep.advice with every value checked (each utilisation sample too), before the host is
    read; its utilization as utilization_input returns it."""
    powernap = _powernap()
    try:
        validate(dict(("sleep.advice." + k, v) for k, v in advice.items()), ADVICE_CHECKS)
        util = powernap.utilization_input(advice["utilization"], "sleep.advice.utilization")
        powernap.summarize_utilization(util, advice["utilization_percentile"])     # every sample checked now
    except (ParamError, powernap.PowerNapError) as exc:
        msg = str(exc)
        module.fail_json(msg="%s%s; nothing was changed"
                             % ("" if msg.startswith(("option ", "sleep.advice")) else "sleep.advice.", msg))
    return dict(advice, utilization=util)


def powernap_advice(module, advice, resume_f):
    """The PowerNap advice (checked_advice's) for a resume of resume_f ms (None: not measured, no
    advice): (result, svg text or None)."""
    if resume_f is None:
        return {}, None
    util = advice["utilization"]
    params = dict(DEFAULTS, transition_latency_s=resume_f / 1000.0, suspend_latency_s=None, utilization=util,
                  utilization_percentile=advice["utilization_percentile"],
                  response_time_objective=advice["response_time_objective"],
                  require_beating_dvfs=advice["require_beating_dvfs"],
                  service_time_s=advice["service_time_s"], service_time_cv=advice["service_time_cv"])
    powernap = _powernap()
    try:
        out, model, tr, rho = powernap.advise(params)
        svg = powernap.advice_svg(out, model, tr, rho) if advice["svg"] else None
    except powernap.PowerNapError as exc:
        module.fail_json(msg="sleep.advice: %s; nothing was changed" % exc)
    return out, svg


def decide_advised(offer, resume, advice, fallback):
    """The advice's rule (the role's former advise path): (state, reason)."""
    state = sleep_state(offer, bool(advice) and advice["advice"] == "sleep", fallback)
    if not offer["s3_available"]:
        reason = "S3 not offered by this host"
    elif resume is None:
        reason = NOT_MEASURED
    else:
        reason = "powernap_advice: %s, %s" % (advice["advice"], advice["reason"])
    return state, reason


def main():
    module = ansible_module(argument_spec=argument_spec(), supports_check_mode=True)
    check_params(module, CHECKS)
    p = module.params
    sp = p["sleep"]
    fs = HostFS(p["sysfs_root"])

    # Validate every input first, then read the host. With state=absent the advice and the derived
    # PM QoS values are not used (the undo never depends on them).
    present = p["state"] == "present"
    advice_p = checked_advice(module, sp["advice"]) if (sp["advice"] is not None and present) else None
    cstates = derived_latencies(module, p["cstates"]) if present else dict(
        (k, v) for k, v in p["cstates"].items() if k not in ("pm_qos", "global_latency"))
    budget_f = number(module, "sleep.resume_budget_ms", sp["resume_budget_ms"])
    if budget_f is not None and budget_f < 0:
        module.fail_json(msg="sleep.resume_budget_ms must be >= 0 milliseconds (or null for no limit), got %s"
                         % sp["resume_budget_ms"])
    given_resume_f = number(module, "sleep.resume_measured_ms", sp["resume_measured_ms"])
    if given_resume_f is not None and given_resume_f < 0:
        module.fail_json(msg="sleep.resume_measured_ms must be >= 0 milliseconds, got %s" % sp["resume_measured_ms"])
    if advice_p is not None and given_resume_f is not None and given_resume_f > RESUME_MAX_MS:
        module.fail_json(msg="sleep.resume_measured_ms %s is over an hour, more than the PowerNap advice takes "
                             "(%d ms): the resume latency is in milliseconds"
                             % (sp["resume_measured_ms"], RESUME_MAX_MS))
    freq_fields = check_fields(module, p["cpufreq"]) if present else {}
    gate_p = dict(cstates, state=p["state"], sysfs_root=p["sysfs_root"], metrics_dir=p["metrics_dir"])
    if present:
        # the gate's inputs too, before the measurements file and sysfs are read
        check_gate_inputs(module, dict(gate_p, measured_latency_us=p["cstates"]["measured_latency_us"] or {}))
    stored = stored_measurements(module, fs, p["measurements_file"])
    model = read_gate_model(module, fs)
    names = state_names(model)
    measured = dict((k, v) for k, v in stored.get("wake_latency_us", {}).items() if k in names)
    measured.update(p["cstates"]["measured_latency_us"] or {})
    if sp["resume_measured_ms"] is not None:
        resume = sp["resume_measured_ms"]
    else:
        resume = stored.get("resume", {}).get(sp["resume_metric"] + "_ms")
    resume_f = number(module, "%s: resume.%s_ms" % (fs.path(p["measurements_file"]), sp["resume_metric"]), resume)
    advice, svg = ({}, None)
    if advice_p is not None:
        advice, svg = powernap_advice(module, advice_p, resume_f)
    try:
        offer = read_sleep(fs)
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s; nothing was changed" % (exc.reason if isinstance(exc, UnicodeDecodeError) else exc))
    if advice_p is not None:
        decided, reason = decide_advised(offer, resume, advice, sp["fallback"])
    else:
        decided, reason = decide_sleep(offer, sp["resume_budget_ms"], budget_f, resume, resume_f, sp["fallback"])

    gate_p["measured_latency_us"] = measured
    gate_plan = plan_gate(module, gate_p, model=model)
    sleep_plan = None
    if sp["manage"]:
        sleep_p = dict(allow=decided if p["state"] == "present" else None, mask_targets=sp["mask_targets"],
                       state=p["state"], sysfs_root=p["sysfs_root"], metrics_dir=p["metrics_dir"])
        sleep_plan = plan_sleep(module, sleep_p)
    freq_plan = plan_cpufreq(module, fs, freq_fields, p["state"])

    # Then write: the gate, then the sleep policy, all in one batch of changes: a failure anywhere
    # (the sleep part, a unit, a metrics file) undoes every change of this call.
    changes = fileio.Changes(fs.root)
    gate_changed = apply_gate(module, gate_plan, changes)
    sleep_changed = False
    if sleep_plan is not None:
        sleep_changed = apply_sleep(module, sleep_plan, changes)
    freq_changed = apply_cpufreq(module, freq_plan, changes)
    # What the profile set, for the check after a wake (gear_member's resume path); removed by absent.
    want = want_text(module, gate_plan, freq_plan, freq_changed, p["metrics_dir"]) if present else None
    drifted = drift_so_far(fs)
    want_changed = write_want(module, fs, want, changes, p["metrics_dir"])

    cstates = gate_result(module, gate_plan, gate_changed)
    sleep_res = sleep_result(module, sleep_plan, sleep_changed) if sleep_plan is not None else {}
    gate_diff = cstates.pop("diff", {})
    diff = {"before": {"cstates": gate_diff.get("before")}, "after": {"cstates": gate_diff.get("after")}}
    if sleep_plan is not None:
        sleep_diff = sleep_res.pop("diff", {})
        diff["before"]["sleep"] = sleep_diff.get("before")
        diff["after"]["sleep"] = sleep_diff.get("after")
    freq_res, (freq_before, freq_after) = cpufreq_result(module, freq_plan, freq_changed)
    if freq_plan is not None:
        diff["before"]["cpufreq"], diff["after"]["cpufreq"] = freq_before, freq_after
    rows = cstates["states"]
    result = dict(
        changed=bool(gate_changed or sleep_changed or freq_changed or want_changed),
        driver=cstates["driver"],
        states=rows,
        allowed_states=[r["name"] for r in rows if r["allowed"]],
        disabled_states=[r["name"] for r in rows if not r["allowed"]],
        measured_latency_us=measured,
        sleep=decided if (sp["manage"] and p["state"] == "present") else None,
        sleep_decided=decided,
        sleep_reason=reason,
        resume_measured_ms=resume,
        cstates=cstates,
        sleep_policy=sleep_res,
        cpufreq=freq_res,
        profile_drift=drifted,
        powernap=advice,
        budget_us=p["cstates"]["max_latency_us"],
        resume_budget_ms=sp["resume_budget_ms"],
    )
    if svg is not None:
        result["powernap_svg"] = svg
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
