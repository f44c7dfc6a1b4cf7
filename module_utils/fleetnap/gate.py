# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The C-state latency gate (module cpuidle_qos) as plan / apply / result steps.

``cpuidle_qos`` is these three steps in a row; ``fleetnap_profile`` plans the gate and the sleep
policy first (so bad input anywhere changes nothing) and then applies both, in one module call.

    plan = plan_gate(module, params)      # reads, validates, decides, checks writability; may fail_json
    changed = apply_gate(module, plan)    # writes (nothing in check mode); may fail_json
    result = gate_result(module, plan, changed)   # the module's return values, diff included

``params`` holds the keys of GATE_ARGS. Every failure before apply_gate() goes through
``module.fail_json`` and leaves the host untouched.
"""

from __future__ import annotations

import json
import os
import re
import sys

from ansible.module_utils.fleetnap import fileio

from ansible.module_utils.fleetnap.cpuidle import (
    CPU_DIR, CpuidleError, check_plan_inputs, cmdline_conflicts, disabled_map, plan_states, read_cpu_dma_latency,
    read_model, select_cpus, state_names,
)
from ansible.module_utils.fleetnap.cpulist import format_cpulist
from ansible.module_utils.fleetnap.validate import ParamError, check_output_dir
from ansible.module_utils.fleetnap.persist import (
    APPLY_CONFIG, APPLY_SCRIPT, APPLY_SCRIPT_TEXT, APPLY_UNIT, HOLD_SCRIPT, HOLD_SCRIPT_TEXT, HOLD_UNIT,
    STATE_DIR, UnitSet, apply_config_text, apply_unit_text, hold_unit_text, write_recorded,
)
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, SysfsBatch, kernel_cmdline

ORIGINALS = STATE_DIR + "/cpuidle_qos.orig.json"
GOVERNOR = CPU_DIR + "/cpuidle/current_governor"

# The argument spec of cpuidle_qos (fleetnap_profile takes all but sysfs_root, state and
# metrics_dir as the sub-options of its ``cstates`` option and those three at its top level).
GATE_ARGS = dict(
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
)
GATE_TOP_LEVEL = ("state", "sysfs_root", "metrics_dir")


# PM QoS latencies are signed 32-bit microseconds in the kernel; /dev/cpu_dma_latency's own
# default (no constraint) is 2000 s.
PM_QOS_MAX_US = 2000000000
GOVERNOR_NAME = re.compile(r"^[a-z0-9_-]{1,15}$")


def disable_path(cpu, index):
    return "%s/cpu%d/cpuidle/state%d/disable" % (CPU_DIR, cpu, index)


def _qos_path(cpu):
    return "%s/cpu%d/power/pm_qos_resume_latency_us" % (CPU_DIR, cpu)


def _originals(model):
    """The values fleetnap may change, for every CPU: what state=absent restores.

    A state is identified by its index under the CPU (``stateN``), with its name and declared
    latency kept to check it is still the same state when the record is read back: names are not
    unique (ACPI tables give some boards two ``C2_ACPI`` states)."""
    cpus = {}
    for cpu in model["cpus"]:
        cpus[str(cpu["cpu"])] = {
            "states": dict((str(s["index"]), {"name": s["name"], "latency_us": s["latency_us"],
                                              "disable": s["disable"]}) for s in cpu["states"]),
            "pm_qos_resume_latency_us": cpu["pm_qos_resume_latency_us"],
        }
    return {"version": 2, "cpus": cpus, "governor": model["governor"]}


def tuned_running(fs):
    """True when tuned really runs: systemd has tuned.service active (its invocation link under
    /run/systemd/units), or the pid in /run/tuned/tuned.pid is a live process named tuned. A pid
    file left by a tuned that exited (or whose pid now belongs to another program) is not enough."""
    if os.path.lexists(fs.path("/run/systemd/units/invocation:tuned.service")):
        return True
    try:
        pid = fs.read("/run/tuned/tuned.pid") or ""
        if not (pid.isascii() and pid.isdigit() and len(pid) <= 10):
            return False
        stat = (fs.read_bytes("/proc/%s/stat" % pid) or b"").decode("utf-8", "replace")
    except (HostFsError, IOError, OSError, ValueError):
        return False
    name, _sep, rest = stat.partition(" (")[2].rpartition(") ")
    fields = rest.split()
    return name.startswith("tuned") and bool(fields) and fields[0] not in ("Z", "X")


def _other_managers(fs):
    warnings = cmdline_conflicts(kernel_cmdline(fs))
    profile = fs.read("/etc/tuned/active_profile")
    if profile and tuned_running(fs):
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


def _views(model, cpus, fs, module=None):
    """What the diff shows; with ``module``, a file that cannot be read fails it (nothing changed yet)."""
    if module is not None:
        try:
            return _views(model, cpus, fs)
        except (HostFsError, ValueError) as exc:
            module.fail_json(msg="%s; nothing was changed" % exc)
    return {
        "disabled_cpus_per_state": disabled_map(model, cpus),
        "pm_qos_resume_latency_us": dict(
            (str(c["cpu"]), c["pm_qos_resume_latency_us"]) for c in model["cpus"] if c["cpu"] in cpus),
        "governor": fs.read(GOVERNOR),
        "global_latency_us": _installed_global(fs),
        "persist": fs.exists("/etc/systemd/system/" + APPLY_UNIT),
    }


def _json(data):
    """A record as one line of JSON: json's C encoder writes it (with ``indent`` the encoder is pure
    Python, and a host's originals record has a few thousand entries)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"


def read_gate_model(module, fs):
    """The host's cpuidle model (fail_json when sysfs cannot be read), after warning about other managers."""
    try:
        model = read_model(fs, counters=False)
        warnings = _other_managers(fs)
    except (CpuidleError, HostFsError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    for warning in warnings:
        module.warn(warning)
    return model


def check_gate_inputs(module, p):
    """Every input of the gate (state present) that needs no host, checked before the host is read;
    fail_json names the input. plan_gate calls it; fleetnap_profile calls it before its own reads."""
    for key in ("resume_latency_us", "global_latency_us"):
        if p[key] is not None and p[key] < 0:
            module.fail_json(msg="%s must be >= 0 microseconds, got %d" % (key, p[key]))
        if p[key] is not None and p[key] > PM_QOS_MAX_US:
            module.fail_json(msg="%s must be <= %d microseconds (the kernel's PM QoS limit), got %d"
                                 % (key, PM_QOS_MAX_US, p[key]))
    if p["max_latency_us"] is not None and p["max_latency_us"] < 0:
        module.fail_json(msg="max_latency_us must be >= 0 microseconds (or null for no limit), got %g"
                         % p["max_latency_us"])
    if p["max_latency_us"] is not None and PM_QOS_MAX_US < p["max_latency_us"] < float("inf"):
        module.fail_json(msg="max_latency_us must be <= %d microseconds (or null for no limit), got %g"
                             % (PM_QOS_MAX_US, p["max_latency_us"]))
    if p["metrics_dir"]:
        try:
            check_output_dir("metrics_dir", p["metrics_dir"], "fleetnap_cpuidle.prom")
        except ParamError as exc:
            module.fail_json(msg=str(exc))
    try:
        check_plan_inputs(p["max_latency_us"], p["measured_latency_us"], p["declared_latency_margin"],
                          p["disable"], p["enable"], p["combine"], p["cpus"])
    except CpuidleError as exc:
        module.fail_json(msg=str(exc))


def plan_gate(module, p, model=None):
    """Validate, read and decide; nothing is written. Returns the plan apply_gate() and gate_result()
    take. Every input that needs no host is checked before the host is read (check_gate_inputs); a
    caller that gives the ``model`` it read has checked them before its read (fleetnap_profile)."""
    fs = HostFS(p["sysfs_root"])
    if model is None:
        if p["state"] != "absent":
            check_gate_inputs(module, p)
        model = read_gate_model(module, fs)
    if p["state"] == "absent":
        return _plan_absent(module, fs, model)
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
            batch.add(disable_path(cpu, state["index"]), "0" if allowed[state["name"]] else "1", state["disable"])
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

    return dict(
        absent=False, p=p, fs=fs, model=model, rows=rows, cpus=cpus, acted=acted, skipped=skipped,
        by_cpu=by_cpu, batch=batch, governor=governor, hold=hold, hold_change=hold_change, boot=boot,
        changed=bool(len(batch)) or hold_change or boot_change, before=_views(model, cpus, fs, module),
    )


def apply_gate(module, plan, changes=None):
    """Write what plan_gate() decided (nothing in check mode); returns ``changed`` (metrics included).

    Every change (the originals record, the sysfs values, the units, the metrics file) is one of
    ``changes`` (fileio.Changes; fleetnap_profile passes the one of its whole call): a failure
    undoes all of them and the message says whether the host is as it was."""
    if changes is None:
        changes = fileio.Changes(plan["fs"].root)
    if plan["absent"]:
        return _apply_absent(module, plan, changes)
    p, fs, batch, hold = plan["p"], plan["fs"], plan["batch"], plan["hold"]
    changed = plan["changed"]
    if changed and not module.check_mode:
        try:
            if not fs.exists(ORIGINALS):
                changes.write(fs.path(ORIGINALS), _json(_originals(plan["model"])), 0o600, module)
            batch.apply_to(changes)
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg=changes.failure("%s" % exc))
        try:
            if p["global_latency_us"] is not None:
                hold.install(plan["hold_change"], changes)
            else:
                hold.remove(changes)
            if p["persist"]:
                plan["boot"].install(False, changes)
            else:
                plan["boot"].remove(changes)
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg=changes.failure("installing fleetnap's services failed: %s" % exc))

    if p["metrics_dir"] and not module.check_mode:
        from ansible.module_utils.fleetnap.prom import render   # only with metrics: not compiled on every host
        try:
            changed = write_recorded(changes, os.path.join(p["metrics_dir"], "fleetnap_cpuidle.prom"),
                                     render(decision_metrics(plan["rows"], p, plan["acted"])), 0o644,
                                     module) or changed
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg=changes.failure("writing the metrics failed: %s" % exc))
    return changed


def gate_result(module, plan, changed):
    """The module's return values (the diff too when diff mode is on)."""
    if plan["absent"]:
        return _result_absent(module, plan, changed)
    p, fs, rows, acted, by_cpu, cpus = plan["p"], plan["fs"], plan["rows"], plan["acted"], plan["by_cpu"], plan["cpus"]
    result = dict(
        changed=changed, driver=plan["model"]["driver"], governor=plan["governor"], states=rows,
        cpus=format_cpulist(acted), skipped_cpus=format_cpulist(plan["skipped"]), writes=len(plan["batch"]),
        global_latency_us=p["global_latency_us"], persist=p["persist"],
    )
    if fs.live:
        result["cpu_dma_latency_us"] = read_cpu_dma_latency(fs)
    if module._diff:
        if changed and not module.check_mode:
            after = _views(read_model(fs), cpus, fs)
        else:
            after = dict(plan["before"])
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
            after["governor"] = plan["governor"]
        result["diff"] = {"before": plan["before"], "after": after}
    return result


def check_record(doc, where):
    """The originals record as _originals() writes it, or ValueError naming the field: its values
    are written back into sysfs by state=absent, so a hand-edited or corrupt one is refused.

    Version 2 keys a CPU's states by index (``{"2": {"name": "C2", "latency_us": 127, "disable": 0}}``);
    version 1 (no ``version``) by name, which state=absent takes only where names are unique."""
    def bad(field, what, value):
        raise ValueError("%s: %s must be %s, got %s" % (where, field, what, repr(value)[:60]))

    def disable_value(field, value):
        if value not in ("0", "1", 0, 1) or isinstance(value, bool):
            bad(field, "'0' or '1'", value)

    if not isinstance(doc, dict):
        raise ValueError("%s: must be a JSON object, got %s" % (where, repr(doc)[:60]))
    version = doc.get("version", 1)
    if version not in (1, 2) or isinstance(version, bool):
        bad("version", "1 or 2", version)
    cpus = doc.get("cpus", {})
    if not isinstance(cpus, dict) or len(cpus) > 8192:
        bad("cpus", "an object of at most 8192 CPUs", cpus)
    for cpu, saved in cpus.items():
        if not (cpu.isascii() and cpu.isdigit()) or len(cpu) > 4 or int(cpu) > 8191:
            bad("cpus key %r" % cpu[:20], "a CPU number 0-8191", cpu)
        if not isinstance(saved, dict):
            bad("cpus.%s" % cpu, "an object", saved)
        states = saved.get("states", {})
        if not isinstance(states, dict) or len(states) > 64:
            bad("cpus.%s.states" % cpu, "an object of at most 64 states", states)
        for key, value in states.items():
            field = "cpus.%s.states.%s" % (cpu, key[:20])
            if version == 1:
                disable_value(field, value)
                continue
            if not (key.isascii() and key.isdigit()) or len(key) > 3:
                bad("cpus.%s.states key %r" % (cpu, key[:20]), "a state index", key)
            if not isinstance(value, dict):
                bad(field, "an object with name, latency_us and disable", value)
            if not isinstance(value.get("name"), str) or len(value["name"]) > 64:
                bad(field + ".name", "a state name", value.get("name"))
            latency = value.get("latency_us")
            if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int)
                                        or not 0 <= latency < 2 ** 64):
                bad(field + ".latency_us", "a whole number of microseconds or null", latency)
            if value.get("disable") is not None:
                disable_value(field + ".disable", value["disable"])
        qos = saved.get("pm_qos_resume_latency_us")
        if qos is not None and qos != "n/a" and (isinstance(qos, bool) or not isinstance(qos, int)
                                                 or not 0 <= qos <= PM_QOS_MAX_US):
            bad("cpus.%s.pm_qos_resume_latency_us" % cpu, "0-%d, 'n/a' or null" % PM_QOS_MAX_US, qos)
    governor = doc.get("governor")
    if governor is not None and not (isinstance(governor, str) and GOVERNOR_NAME.match(governor)):
        bad("governor", "a cpuidle governor name or null", governor)
    return doc


def _saved_disable(originals, where, cpu, state):
    """The disable value the record kept for this state of this CPU (None when it kept none), or
    ValueError when the record cannot say which state it meant."""
    saved = originals.get("cpus", {}).get(str(cpu["cpu"])) or {}
    states = saved.get("states", {})
    if originals.get("version", 1) == 1:
        twins = [s["index"] for s in cpu["states"] if s["name"] == state["name"]]
        if len(twins) > 1 and state["name"] in states:
            raise ValueError("%s names states, and cpu%d has %d states named %s (state%s): it cannot say which "
                             "value belongs to which" % (where, cpu["cpu"], len(twins), state["name"],
                                                         ", state".join(str(i) for i in twins)))
        return states.get(state["name"])
    kept = states.get(str(state["index"]))
    if kept is None:
        return None
    if kept["name"] != state["name"] or kept["latency_us"] != state["latency_us"]:
        raise ValueError("%s kept cpu%d state%d as %s (latency %s us), but the host has %s (latency %s us) there: "
                         "the kernel's idle states changed since it was written"
                         % (where, cpu["cpu"], state["index"], kept["name"], kept["latency_us"], state["name"],
                            state["latency_us"]))
    return kept["disable"]


def _plan_absent(module, fs, model):
    where = "the record %s" % fs.path(ORIGINALS)
    batch = SysfsBatch(fs)
    try:
        originals = fs.read_json(ORIGINALS)
        if originals is not None:
            check_record(originals, where)
            for cpu in model["cpus"]:
                for state in cpu["states"]:
                    old = _saved_disable(originals, where, cpu, state)
                    if old is not None:
                        batch.add(disable_path(cpu["cpu"], state["index"]), old, state["disable"])
                saved = originals.get("cpus", {}).get(str(cpu["cpu"])) or {}
                qos = saved.get("pm_qos_resume_latency_us")
                if qos is not None and cpu["pm_qos_resume_latency_us"] is not None:
                    batch.add(_qos_path(cpu["cpu"]), qos, cpu["pm_qos_resume_latency_us"])
            if originals.get("governor") and model["governor"]:
                batch.add(GOVERNOR, originals["governor"], model["governor"])
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s; nothing was changed (repair the record, or remove it and set the C-states "
                             "by hand: state=absent cannot know the values to restore)" % exc)
    hold = _hold_unit(fs, module, 0)
    boot = _apply_unit(fs, module, None)
    units_present = hold.present() or boot.present()
    all_cpus = [c["cpu"] for c in model["cpus"]]
    return dict(
        absent=True, fs=fs, model=model, originals=originals, batch=batch, hold=hold, boot=boot,
        all_cpus=all_cpus, changed=bool(len(batch)) or units_present or originals is not None,
        before=_views(model, all_cpus, fs, module),
    )


def _apply_absent(module, plan, changes):
    fs = plan["fs"]
    if plan["changed"] and not module.check_mode:
        try:
            plan["batch"].apply_to(changes)
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg=changes.failure("restoring the kernel's original C-state settings failed: %s"
                                                 % exc))
        try:
            plan["hold"].remove(changes)
            plan["boot"].remove(changes)
            changes.remove(fs.path(ORIGINALS))
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg=changes.failure("removing fleetnap's services and record failed: %s" % exc))
    return plan["changed"]


def _result_absent(module, plan, changed):
    fs, originals, all_cpus = plan["fs"], plan["originals"], plan["all_cpus"]
    after_model = read_model(fs) if (changed and not module.check_mode) else None
    result = dict(changed=changed, driver=plan["model"]["driver"], restored=originals is not None,
                  writes=len(plan["batch"]), cpus=format_cpulist(all_cpus), skipped_cpus="",
                  global_latency_us=None, persist=False, states=[])
    if module._diff:
        before = plan["before"]
        if after_model is not None:
            after = _views(after_model, all_cpus, fs)
        else:
            after = dict(before, global_latency_us=None, persist=False)
            if originals:
                # A fresh dict: the before view must not change with the after view.
                after["disabled_cpus_per_state"] = dict(before["disabled_cpus_per_state"])
                for name in after["disabled_cpus_per_state"]:
                    after["disabled_cpus_per_state"][name] = format_cpulist(
                        int(c) for c, saved in originals.get("cpus", {}).items()
                        if any(_kept_disabled(originals, key, value, name)
                               for key, value in saved.get("states", {}).items()))
        result["diff"] = {"before": before, "after": after}
    return result


def _kept_disabled(originals, key, value, name):
    """True when a record entry (version 1: name -> disable; 2: index -> {name, disable}) keeps
    state ``name`` disabled."""
    if originals.get("version", 1) == 1:
        return key == name and str(value) == "1"
    return value.get("name") == name and str(value.get("disable")) == "1"


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
