# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A profile's CPU frequency part (fleetnap_profile's ``cpufreq`` option) as plan / apply / result
steps, beside the C-state gate (gate.py) and the sleep policy (sleeppolicy.py):

    fields = check_fields(module, p["cpufreq"])        # before the host is read; may fail_json
    plan = plan_cpufreq(module, fs, fields, state)      # reads, decides, checks writability
    changed = apply_cpufreq(module, plan, changes)      # writes as part of the call's Changes
    result, diff = cpufreq_result(module, plan, changed)

What the files held before fleetnap first wrote them is kept in ORIGINALS (pstate.remembered);
state=absent writes that back (pstate.restore) and removes the record.
"""

from __future__ import annotations

import json
import os

from ansible.module_utils.fleetnap.drift import COUNTS, PROM as DRIFT_PROM, WANT, counts as drift_counts
from ansible.module_utils.fleetnap.fileio import RECORD
from ansible.module_utils.fleetnap.gate import disable_path, tuned_running
from ansible.module_utils.fleetnap.persist import STATE_DIR
from ansible.module_utils.fleetnap.sysfs import HostFsError, SysfsBatch

ORIGINALS = STATE_DIR + "/pstate.orig.json"


def _pstate():
    """The pstate module, imported by the calls that have CPU frequency work only: a module ships as
    source and a host compiles every module_utils file it imports on every call, so a profile of
    C-states alone does not pay for pstate's 700 lines."""
    from ansible.module_utils.fleetnap import pstate
    return pstate


# Services that write the same knobs (tuned's [cpu] plugin, power-profiles-daemon's profiles,
# cpupower.service's governor and frequencies at boot): reported, as tuned is for C-states.
OTHER_WRITERS = (("power-profiles-daemon.service", "power-profiles-daemon switches EPP, EPB and the governor "
                  "with its profiles"),
                 ("cpupower.service", "cpupower.service sets the governor and frequencies at boot"))


def check_fields(module, fields):
    """The given fields (None ones dropped), each checked and normalised; fail_json naming the
    field otherwise. Nothing is read."""
    out = {}
    if all(value is None for value in fields.values()):
        return out
    pstate = _pstate()
    for name in pstate.FIELDS:
        if fields.get(name) is None:
            continue
        try:
            out[name] = pstate.check_field(name, fields[name])
        except pstate.FieldError as exc:
            module.fail_json(msg="cpufreq.%s; nothing was changed" % exc)
    try:
        pstate.check_together(out)
    except pstate.FieldError as exc:
        module.fail_json(msg="cpufreq.%s; nothing was changed" % exc)
    return out


def _warn_other_writers(module, fs):
    if tuned_running(fs):
        module.warn("tuned is running: its [cpu] plugin sets the governor, EPP, EPB and turbo too and may undo "
                    "fleetnap's cpufreq writes; disable that plugin in the active tuned profile or stop tuned")
    for unit, what in OTHER_WRITERS:
        if os.path.lexists(fs.path("/run/systemd/units/invocation:" + unit)):
            module.warn("%s is active: %s, over fleetnap's cpufreq writes; stop and disable it on hosts whose "
                        "profile sets them" % (unit, what))


def _read(module, fs):
    pstate = _pstate()
    try:
        return pstate.read_pstates(fs)
    except (pstate.PstateError, HostFsError, ValueError) as exc:
        module.fail_json(msg="cpufreq: %s; nothing was changed"
                             % (exc.reason if isinstance(exc, UnicodeDecodeError) else exc))


def plan_cpufreq(module, fs, fields, state):
    """Read the host's CPU frequency policy and decide the writes (none when no field is given and,
    for state=absent, when there is no record). Fails naming the fields the host does not take."""
    if state == "present" and not fields:
        return None
    # The record is read (and refused when no fleetnap wrote it) for both: absent writes it back,
    # present keeps the first originals in it.
    where = "the record %s" % fs.path(ORIGINALS)
    pstate = _pstate()
    try:
        record = fs.read_json(ORIGINALS)
        if record is not None:
            pstate.check_record(record, where)
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s; nothing was changed (%s)" % (exc, (
            "repair the record, or remove it and set the CPU frequency knobs by hand: state=absent cannot know "
            "the values to restore" if state == "absent" else
            "remove it only after setting the knobs it names back by hand")))
    if state == "absent":
        if record is None:
            return None
        pstates = _read(module, fs)
        writes, problems, gone = pstate.restore(pstates, record)
        for path in gone:
            module.warn("%s: kept in %s, but the host no longer has it; not restored" % (path, where))
    else:
        pstates = _read(module, fs)
        _warn_other_writers(module, fs)
        writes, problems = pstate.plan(pstates, fields)
    if problems:
        module.fail_json(msg="cpufreq: %s; nothing was changed" % "; ".join(problems))
    batch = SysfsBatch(fs)
    for path, new, old in writes:
        batch.add(path, new, old)
    try:
        batch.check()
    except HostFsError as exc:
        module.fail_json(msg="cpufreq: %s" % exc)
    return dict(state=state, fs=fs, fields=fields, pstates=pstates, writes=writes, batch=batch, record=record,
                changed=bool(len(batch)) or state == "absent")


def apply_cpufreq(module, plan, changes):
    """Make the writes (nothing in check mode) as part of ``changes``: a failure here or later in
    the call undoes every change of the call. Returns ``changed``."""
    if plan is None or not plan["changed"]:
        return False
    if module.check_mode:
        return True
    fs = plan["fs"]
    try:
        if plan["state"] == "present":
            record = _pstate().remembered(plan["record"], plan["batch"].writes)
            if record is not None:
                changes.write(fs.path(ORIGINALS), json.dumps(record, indent=1, sort_keys=True) + "\n", 0o600, module)
        plan["batch"].apply_to(changes)
        if plan["state"] == "absent":
            changes.remove(fs.path(ORIGINALS))
    except (HostFsError, OSError, IOError) as exc:
        module.fail_json(msg=changes.failure("cpufreq: %s" % exc))
    return True


def _after(module, plan, changed):
    """The host's CPU frequency policy after the writes: predicted in check mode; in a real run each
    file written is read again (what the kernel shows for it: intel_pstate names an EPP number it
    has a name for, the uncore keeps 100 MHz steps), the rest is as it was read (not every policy
    of the host read a second time)."""
    if "after" not in plan:
        writes = plan["batch"].writes
        if changed and not module.check_mode:
            shown = []
            for path, new, old in writes:
                try:
                    now = plan["fs"].read(path)
                except (HostFsError, ValueError) as exc:
                    module.warn("cpufreq: reading %s again after the write failed: %s" % (path, exc))
                    now = None
                shown.append((path, now if now and (now.isdigit() or now.replace("_", "").isalpha()) else new, old))
            writes = shown
        plan["after"] = _pstate().applied(plan["pstates"], writes)
    return plan["after"]


def want_text(module, gate_plan, freq_plan, freq_changed, metrics_dir):
    """WANT: every file the applied profile set, with its value (the C-state disables of the CPUs
    the gate acted on, the CPU frequency files of the fields given), for the check after a wake
    (gear_member's templates/unpark.sh.j2, run by the park's resume hook: POSIX sh, no Python)."""
    lines = ["# fleetnap_profile: the files this host's latency profile set and their values. After a",
             "# wake that ends a park, gear_member's resume path writes back each one that drifted and",
             "# counts it (fleetnap_profile_drift_total). Written by fleetnap_profile; do not edit."]
    if metrics_dir:
        lines.append("#metrics_dir %s" % metrics_dir)
    if gate_plan is not None and not gate_plan["absent"]:
        allowed = dict((r["name"], r["allowed"]) for r in gate_plan["rows"])
        for cpu in gate_plan["acted"]:
            for state in gate_plan["by_cpu"][cpu]["states"]:
                lines.append("%s %s" % (disable_path(cpu, state["index"]), "0" if allowed[state["name"]] else "1"))
    if freq_plan is not None and freq_plan["state"] == "present":
        lines += ["%s %s" % pair for pair in _pstate().wanted(_after(module, freq_plan, freq_changed), freq_plan["fields"])]
    return "\n".join(lines) + "\n"


def write_want(module, fs, text, changes, metrics_dir=None):
    """WANT holds ``text`` (None, state=absent: WANT removed, and the drift counts with it, their
    metrics file too), as one of the call's changes; True when something changed."""
    try:
        now = fs.read_bytes(WANT, RECORD)
    except (HostFsError, OSError, ValueError) as exc:
        module.fail_json(msg=changes.failure("%s cannot be read: %s" % (fs.path(WANT), exc)))
    gone = []
    if text is None:
        gone = [fs.path(p) for p in (WANT, COUNTS) if fs.exists(p)]
        if metrics_dir and os.path.lexists(os.path.join(metrics_dir, DRIFT_PROM)):
            gone.append(os.path.join(metrics_dir, DRIFT_PROM))
        if not gone:
            return False
    elif now == text.encode():
        return False
    if module.check_mode:
        return True
    try:
        if text is None:
            for path in gone:
                changes.remove(path)
        else:
            changes.write(fs.path(WANT), text, 0o644, module)
    except (HostFsError, OSError, IOError) as exc:
        module.fail_json(msg=changes.failure("writing %s failed: %s" % (fs.path(WANT), exc)))
    return True


def drift_so_far(fs):
    """The files written back after wakes since the profile was applied, per knob (drift.counts)."""
    try:
        return drift_counts(fs)
    except (HostFsError, ValueError):
        return {}


def cpufreq_result(module, plan, changed):
    """(the result's ``cpufreq``, the diff's before and after of each file written)."""
    if plan is None:
        return {}, ({}, {})
    after = _after(module, plan, changed)
    summary = _pstate().summary
    result = dict(before=summary(plan["pstates"]), after=summary(after), writes=len(plan["batch"]),
                  restored=plan["state"] == "absent" and changed)
    before_diff = dict((path, old) for path, _new, old in plan["batch"].writes)
    after_diff = dict((path, new) for path, new, _old in plan["batch"].writes)
    return result, (before_diff, after_diff)
