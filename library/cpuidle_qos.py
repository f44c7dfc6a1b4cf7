#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpuidle_qos
short_description: Allow only the C-states whose exit latency fits a latency budget
description:
  - The latency gate of fleetnap. For each idle state of the host's cpuidle driver it computes
    an effective exit latency (the measured worst case when one is given, otherwise the driver's
    declared latency times O(declared_latency_margin)), disables the states above
    O(max_latency_us) and enables the others, on every selected CPU, in one batch.
  - C(POLL) always stays enabled. Explicit O(disable) and O(enable) lists win over the budget and
    are checked against the state names the host really has.
  - Optionally sets the per-CPU PM QoS resume latency, holds a global limit on
    C(/dev/cpu_dma_latency) through a small systemd service, and re-applies everything at boot.
  - Everything is validated before the first write; if a write fails, the writes already made are
    rolled back. The first change records the kernel's original values so O(state=absent) can
    restore them.
  - Warns when something else manages the same knobs (tuned, C(intel_idle.max_cstate),
    C(processor.max_cstate), C(idle=), C(cpuidle.off=1) on the kernel command line).
version_added: "0.1.0"
author: fleetnap contributors
options:
  max_latency_us:
    description:
      - Latency budget in microseconds. States whose effective exit latency exceeds it are
        disabled, the others enabled. Omit (or null) for no limit (all states enabled).
    type: float
  measured_latency_us:
    description:
      - Worst measured wake latency per state name, in microseconds (from the measurement
        playbooks or the inventory). Wins over the declared value (see O(combine)).
    type: dict
    default: {}
  declared_latency_margin:
    description:
      - Multiplier applied to declared latencies of states that were not measured. Must be >= 1.
        The C-state thesis measured up to 7x the declared values on Xeons.
    type: float
    default: 1.0
  combine:
    description:
      - How a measured value and the declared one combine. V(measured) takes the measurement
        when there is one; V(worst) takes the larger of measured and declared x margin.
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
    description:
      - CPUs to act on, as a kernel CPU list (V(0-3,8-11)) or a list of numbers. Default all
        present CPUs. CPUs that are offline and have no cpuidle directory are skipped and reported.
    type: raw
  resume_latency_us:
    description:
      - Per-CPU PM QoS resume latency (C(power/pm_qos_resume_latency_us)) for the selected CPUs.
        V(0) means no constraint. Omit to leave it as it is.
    type: int
  global_latency_us:
    description:
      - Global CPU wake-up latency limit held on C(/dev/cpu_dma_latency) by the service
        C(fleetnap-cpu-dma-latency). Omit to remove a limit set earlier by fleetnap.
    type: int
  governor:
    description:
      - cpuidle governor to switch to (one of the host's C(available_governors)), for example
        V(menu). Omit to keep the current one. The C(haltpoll) governor of KVM guests ignores
        per-state disables, so a budget has no effect under it; the module warns about that.
    type: str
  persist:
    description:
      - Re-apply the state disables and the per-CPU PM QoS at boot (service C(fleetnap-cpuidle),
        states matched by name). V(false) removes the boot-time service if fleetnap installed it.
    type: bool
    default: false
  metrics_dir:
    description:
      - node_exporter textfile collector directory. When set, the decision is published as
        C(fleetnap_cstate_allowed), C(fleetnap_cstate_declared_latency_seconds),
        C(fleetnap_cstate_effective_latency_seconds), C(fleetnap_cpuidle_budget_seconds) and
        C(fleetnap_pm_qos_resume_latency_seconds) in C(fleetnap_cpuidle.prom).
    type: path
  state:
    description:
      - V(present) applies the decision. V(absent) restores the values the kernel had before
        fleetnap first changed them and removes fleetnap's services and files.
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description:
      - Root under which C(/sys), C(/proc/cmdline), C(/etc) and C(/var/lib) are found. V(/) is the
        live host; another directory is a captured or prepared tree (services are then installed
        as files only, never started).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    details: Computes and returns the decision and the diff, writes nothing.
  diff_mode:
    support: full
    details: Before/after of disabled CPUs per state, PM QoS, the global limit and persistence.
  platform:
    platforms: posix
notes:
  - Requires a cpuidle driver for state limits. Without one the module reports no states and
    warns; an explicit state name then fails.
  - Without systemd as PID 1 (containers, image builds) unit files are installed but not started.
seealso:
  - module: cpuidle_info
  - module: sleep_policy
"""

EXAMPLES = r"""
- name: Allow only C-states that wake within 20 us (declared values inflated by 50 %)
  cpuidle_qos:
    max_latency_us: 20
    declared_latency_margin: 1.5

- name: Use the measured worst case per state from the wake-latency playbook
  cpuidle_qos:
    max_latency_us: 50
    measured_latency_us:
      C1: 19.3
      C1E: 21.8
      C3: 78.8

- name: Keep C6 off on the packet-processing CPUs, hold a global 20 us limit, survive reboots
  cpuidle_qos:
    cpus: "2-15"
    disable: [C6]
    global_latency_us: 20
    persist: true

- name: Undo everything fleetnap changed
  cpuidle_qos:
    state: absent
"""

RETURN = r"""
driver:
  description: The cpuidle driver, or null when the host has none.
  returned: always
  type: str
  sample: intel_idle
states:
  description: The decision per state name.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: State name, type: str, sample: C1E}
    index: {description: State index in sysfs, type: int, sample: 2}
    declared_us: {description: Driver's declared exit latency, type: int, sample: 10}
    measured_us: {description: Measured worst case if given, type: float, sample: 21.8}
    effective_us: {description: Latency the budget was compared with, type: float, sample: 21.8}
    allowed: {description: Whether the state stays enabled, type: bool, sample: false}
    reason: {description: Why, type: str, sample: "measured 21.8 us > budget 20 us"}
  sample:
    - {name: POLL, index: 0, declared_us: 0, measured_us: null, effective_us: 0, allowed: true,
       reason: POLL always stays enabled}
cpus:
  description: The CPUs acted on (kernel CPU list).
  returned: always
  type: str
  sample: 0-47
skipped_cpus:
  description: Offline CPUs without a cpuidle directory, which were left alone.
  returned: always
  type: str
  sample: ""
writes:
  description: Number of sysfs attributes written (or that would be in check mode).
  returned: always
  type: int
  sample: 96
governor:
  description: The cpuidle governor after this call.
  returned: always
  type: str
  sample: menu
global_latency_us:
  description: The global limit fleetnap holds after this call, or null.
  returned: always
  type: int
  sample: 20
persist:
  description: Whether the boot-time service is installed after this call.
  returned: always
  type: bool
  sample: false
restored:
  description: With state=absent, whether an original-values record existed and was restored.
  returned: when state=absent
  type: bool
  sample: true
"""

import json
import os
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.cpuidle import (
    CPU_DIR, CpuidleError, cmdline_conflicts, disabled_map, plan_states, read_model, select_cpus,
    state_names,
)
from ansible.module_utils.fleetnap.cpulist import format_cpulist
from ansible.module_utils.fleetnap.prom import render
from ansible.module_utils.fleetnap.persist import (
    APPLY_CONFIG, APPLY_SCRIPT, APPLY_SCRIPT_TEXT, APPLY_UNIT, HOLD_SCRIPT, HOLD_SCRIPT_TEXT, HOLD_UNIT,
    STATE_DIR, UnitSet, apply_config_text, apply_unit_text, hold_unit_text, read_cpu_dma_latency,
)
from ansible.module_utils.fleetnap.sysfs import (
    HostFS, HostFsError, SysfsBatch, kernel_cmdline, remove_path, write_file_atomic,
)

ORIGINALS = STATE_DIR + "/cpuidle_qos.orig.json"
GOVERNOR = CPU_DIR + "/cpuidle/current_governor"


def _disable_path(cpu, index):
    return "%s/cpu%d/cpuidle/state%d/disable" % (CPU_DIR, cpu, index)


def _qos_path(cpu):
    return "%s/cpu%d/power/pm_qos_resume_latency_us" % (CPU_DIR, cpu)


def _originals(model):
    """The values fleetnap may change, for every CPU: what state=absent restores."""
    cpus = {}
    for cpu in model["cpus"]:
        cpus[str(cpu["cpu"])] = {
            "states": dict((s["name"], s["disable"]) for s in cpu["states"]),
            "pm_qos_resume_latency_us": cpu["pm_qos_resume_latency_us"],
        }
    return {"version": 1, "cpus": cpus, "governor": model["governor"]}


def _other_managers(fs):
    warnings = cmdline_conflicts(kernel_cmdline(fs))
    profile = fs.read("/etc/tuned/active_profile")
    if fs.exists("/run/tuned/tuned.pid") and profile:
        warnings.append("tuned is running with profile %r: it may change C-state settings (force_latency, "
                        "cpu_dma_latency) behind fleetnap's back; disable its [cpu] plugin or stop tuned"
                        % profile)
    return warnings


def _hold_unit(fs, module, value):
    return UnitSet(fs, module, HOLD_UNIT, [
        (HOLD_SCRIPT, HOLD_SCRIPT_TEXT, 0o755),
        ("/etc/systemd/system/" + HOLD_UNIT, hold_unit_text(sys.executable, value), 0o644),
    ])


def _apply_unit(fs, module, config_text):
    return UnitSet(fs, module, APPLY_UNIT, [
        (APPLY_SCRIPT, APPLY_SCRIPT_TEXT, 0o755),
        (APPLY_CONFIG, config_text or "", 0o644),
        ("/etc/systemd/system/" + APPLY_UNIT, apply_unit_text(sys.executable), 0o644),
    ])


def _installed_global(fs):
    text = fs.read("/etc/systemd/system/" + HOLD_UNIT)
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            try:
                return int(line.split()[-1])
            except ValueError:
                return None
    return None


def _views(model, cpus, fs):
    return {
        "disabled_cpus_per_state": disabled_map(model, cpus),
        "pm_qos_resume_latency_us": dict(
            (str(c["cpu"]), c["pm_qos_resume_latency_us"]) for c in model["cpus"] if c["cpu"] in cpus),
        "governor": fs.read(GOVERNOR),
        "global_latency_us": _installed_global(fs),
        "persist": fs.exists("/etc/systemd/system/" + APPLY_UNIT),
    }


def run_absent(module, fs, model):
    originals = fs.read_json(ORIGINALS)
    batch = SysfsBatch(fs)
    if originals:
        for cpu in model["cpus"]:
            saved = originals.get("cpus", {}).get(str(cpu["cpu"]))
            if not saved:
                continue
            for state in cpu["states"]:
                old = saved.get("states", {}).get(state["name"])
                if old is not None:
                    batch.add(_disable_path(cpu["cpu"], state["index"]), old, state["disable"])
            qos = saved.get("pm_qos_resume_latency_us")
            if qos is not None and cpu["pm_qos_resume_latency_us"] is not None:
                batch.add(_qos_path(cpu["cpu"]), qos, cpu["pm_qos_resume_latency_us"])
        if originals.get("governor") and model["governor"]:
            batch.add(GOVERNOR, originals["governor"], model["governor"])
    hold = _hold_unit(fs, module, 0)
    boot = _apply_unit(fs, module, None)
    units_present = hold.present() or boot.present()
    changed = bool(len(batch)) or units_present or originals is not None
    all_cpus = [c["cpu"] for c in model["cpus"]]
    before = _views(model, all_cpus, fs)
    if changed and not module.check_mode:
        try:
            batch.apply()
        except HostFsError as exc:
            module.fail_json(msg="restoring the kernel's original C-state settings failed: %s" % exc)
        hold.remove()
        boot.remove()
        remove_path(fs, ORIGINALS)
    after_model = read_model(fs) if (changed and not module.check_mode) else None
    result = dict(changed=changed, driver=model["driver"], restored=originals is not None,
                  writes=len(batch), cpus=format_cpulist(all_cpus), skipped_cpus="",
                  global_latency_us=None, persist=False, states=[])
    if module._diff:
        if after_model is not None:
            after = _views(after_model, all_cpus, fs)
        else:
            after = dict(before, global_latency_us=None, persist=False)
            if originals:
                for name in after["disabled_cpus_per_state"]:
                    after["disabled_cpus_per_state"][name] = format_cpulist(
                        int(c) for c, saved in originals["cpus"].items() if saved["states"].get(name))
        result["diff"] = {"before": before, "after": after}
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            max_latency_us=dict(type="float"),
            measured_latency_us=dict(type="dict", default={}),
            declared_latency_margin=dict(type="float", default=1.0),
            combine=dict(type="str", choices=["measured", "worst"], default="measured"),
            disable=dict(type="list", elements="str", default=[]),
            enable=dict(type="list", elements="str", default=[]),
            cpus=dict(type="raw"),
            resume_latency_us=dict(type="int"),
            global_latency_us=dict(type="int"),
            governor=dict(type="str"),
            persist=dict(type="bool", default=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            sysfs_root=dict(type="path", default="/"),
            metrics_dir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    fs = HostFS(p["sysfs_root"])
    try:
        model = read_model(fs)
    except CpuidleError as exc:
        module.fail_json(msg=str(exc))
    for warning in _other_managers(fs):
        module.warn(warning)

    if p["state"] == "absent":
        run_absent(module, fs, model)

    # Validate everything before deciding anything.
    for key in ("resume_latency_us", "global_latency_us"):
        if p[key] is not None and p[key] < 0:
            module.fail_json(msg="%s must be >= 0 microseconds, got %d" % (key, p[key]))
    if p["max_latency_us"] is not None and p["max_latency_us"] < 0:
        module.fail_json(msg="max_latency_us must be >= 0 microseconds (or null for no limit), got %g"
                         % p["max_latency_us"])
    try:
        cpus = select_cpus(model, p["cpus"])
        rows = plan_states(model, max_latency_us=p["max_latency_us"], measured=p["measured_latency_us"],
                           margin=p["declared_latency_margin"], disable=p["disable"], enable=p["enable"],
                           combine=p["combine"], cpus=cpus)
    except CpuidleError as exc:
        module.fail_json(msg=str(exc))
    if not state_names(model):
        module.warn("no cpuidle states on this host (driver: %s): C-states cannot be limited here; "
                    "resume_latency_us and global_latency_us still apply" % (model["driver"] or "none"))

    allowed = dict((r["name"], r["allowed"]) for r in rows)
    by_cpu = dict((c["cpu"], c) for c in model["cpus"])
    batch = SysfsBatch(fs)
    acted, skipped = [], []
    for cpu in cpus:
        info = by_cpu[cpu]
        if not info["states"] and not info["online"]:
            skipped.append(cpu)
            continue
        acted.append(cpu)
        for state in info["states"]:
            batch.add(_disable_path(cpu, state["index"]), "0" if allowed[state["name"]] else "1", state["disable"])
        if p["resume_latency_us"] is not None:
            if info["pm_qos_resume_latency_us"] is None:
                module.fail_json(msg="resume_latency_us: %s does not exist; this kernel has no per-CPU PM QoS "
                                     "(CONFIG_PM) — omit resume_latency_us" % fs.path(_qos_path(cpu)))
            batch.add(_qos_path(cpu), p["resume_latency_us"], info["pm_qos_resume_latency_us"])
    governor = model["governor"]
    if p["governor"] is not None:
        if p["governor"] not in model["available_governors"]:
            module.fail_json(msg="governor: %r is not available on this host; available: %s"
                             % (p["governor"], ", ".join(model["available_governors"]) or "none (no cpuidle)"))
        batch.add(GOVERNOR, p["governor"], model["governor"])
        governor = p["governor"]
    if governor == "haltpoll" and not all(r["allowed"] for r in rows):
        module.warn("the haltpoll cpuidle governor ignores per-state disables: the budget has no effect until "
                    "the governor is switched (governor: menu)")
    if skipped:
        module.warn("offline CPU(s) %s have no cpuidle directory and were skipped; run again after bringing "
                    "them online, or use persist: true" % format_cpulist(skipped))
    try:
        batch.check()
    except HostFsError as exc:
        module.fail_json(msg=str(exc))

    hold = _hold_unit(fs, module, p["global_latency_us"] or 0)
    if p["global_latency_us"] is not None:
        hold_change = not hold.installed_matches() or hold.active() is False
    else:
        hold_change = hold.present()
    managed = [r["name"] for r in rows]
    config = apply_config_text(format_cpulist(acted), [r["name"] for r in rows if not r["allowed"]],
                               managed, p["resume_latency_us"])
    boot = _apply_unit(fs, module, config)
    boot_change = (not boot.installed_matches()) if p["persist"] else boot.present()

    changed = bool(len(batch)) or hold_change or boot_change
    before = _views(model, cpus, fs)
    if changed and not module.check_mode:
        created_originals = False
        try:
            if not fs.exists(ORIGINALS):
                write_file_atomic(fs, ORIGINALS, _json(_originals(model)), 0o600, module)
                created_originals = True
            batch.apply()
        except (HostFsError, OSError, IOError) as exc:
            if created_originals:
                remove_path(fs, ORIGINALS)
            module.fail_json(msg=str(exc))
        try:
            if p["global_latency_us"] is not None:
                hold.install(restart=hold_change)
            else:
                hold.remove()
            if p["persist"]:
                boot.install(restart=False)
            else:
                boot.remove()
        except (OSError, IOError) as exc:
            module.fail_json(msg="C-state limits were applied, but installing fleetnap's services failed: %s" % exc)

    if p["metrics_dir"] and not module.check_mode:
        changed = write_file_atomic(HostFS("/"), os.path.join(p["metrics_dir"], "fleetnap_cpuidle.prom"),
                                    render(decision_metrics(rows, p, acted)), 0o644, module) or changed
    result = dict(
        changed=changed, driver=model["driver"], governor=governor, states=rows,
        cpus=format_cpulist(acted), skipped_cpus=format_cpulist(skipped), writes=len(batch),
        global_latency_us=p["global_latency_us"], persist=p["persist"],
    )
    if fs.live:
        result["cpu_dma_latency_us"] = read_cpu_dma_latency(fs)
    if module._diff:
        if changed and not module.check_mode:
            after = _views(read_model(fs), cpus, fs)
        else:
            after = dict(before)
            after["disabled_cpus_per_state"] = dict(
                (r["name"], "" if r["allowed"] else format_cpulist(
                    c for c in acted if any(s["name"] == r["name"] for s in by_cpu[c]["states"])))
                for r in rows)
            if p["resume_latency_us"] is not None:
                after["pm_qos_resume_latency_us"] = dict(
                    (str(c), p["resume_latency_us"] if c in acted else by_cpu[c]["pm_qos_resume_latency_us"])
                    for c in cpus)
            after["global_latency_us"] = p["global_latency_us"]
            after["persist"] = p["persist"]
            after["governor"] = governor
        result["diff"] = {"before": before, "after": after}
    module.exit_json(**result)


def decision_metrics(rows, p, cpus):
    def per_state(key, scale=1.0):
        return [{"labels": {"state": r["name"]}, "value": r[key] * scale} for r in rows if r[key] is not None]
    metrics = [
        {"name": "fleetnap_cstate_allowed", "help": "1 if the latency gate allows the idle state.",
         "samples": [{"labels": {"state": r["name"]}, "value": 1 if r["allowed"] else 0} for r in rows]},
        {"name": "fleetnap_cstate_declared_latency_seconds", "help": "Exit latency the cpuidle driver declares.",
         "samples": per_state("declared_us", 1e-6)},
        {"name": "fleetnap_cstate_effective_latency_seconds",
         "help": "Exit latency the gate compared with the budget (measured, or declared x margin).",
         "samples": per_state("effective_us", 1e-6)},
        {"name": "fleetnap_cstate_measured_latency_seconds", "help": "Worst measured wake latency per state.",
         "samples": per_state("measured_us", 1e-6)},
    ]
    if p["max_latency_us"] is not None:
        metrics.append({"name": "fleetnap_cpuidle_budget_seconds", "help": "The CPU wake-up latency budget.",
                        "samples": [{"labels": {}, "value": p["max_latency_us"] * 1e-6}]})
    if p["resume_latency_us"] is not None:
        metrics.append({"name": "fleetnap_pm_qos_resume_latency_seconds",
                        "help": "Per-CPU PM QoS resume latency set by fleetnap (0 = no constraint).",
                        "samples": [{"labels": {"cpu": str(c)}, "value": p["resume_latency_us"] * 1e-6} for c in cpus]})
    if p["global_latency_us"] is not None:
        metrics.append({"name": "fleetnap_cpu_dma_latency_seconds",
                        "help": "Global CPU wake-up latency limit held on /dev/cpu_dma_latency.",
                        "samples": [{"labels": {}, "value": p["global_latency_us"] * 1e-6}]})
    return metrics


def _json(data):
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    main()
