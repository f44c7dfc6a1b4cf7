# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift's record as a module call makes it: gear_record's options, their checks and the
record itself (the state file, the history line, the energy not spent, the metrics, the lock
released), for gear_record and for gear_shift_prepare when it goes on to record the shift it ran
in its own process. Standard library only; the caller owns the AnsibleModule."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone

from ansible.module_utils.fleetnap import fileio, journal
from ansible.module_utils.fleetnap.energy import (
    EnergyError, add_readings, check_figures, daily, effective_figures, read_history, read_measured_file,
    read_power_file, read_text,
)
from ansible.module_utils.fleetnap.gearrecord import (
    Writes, after_shift, check_actions, check_inputs, check_observed, figure_metrics, history_line, merge_actions,
    metrics, as_the_waves_saw, outcome, readings_of, record, report,
)
from ansible.module_utils.fleetnap.gear import GearError
from ansible.module_utils.fleetnap.gearshift import ShiftError
from ansible.module_utils.fleetnap.prom import MetricError, render
from ansible.module_utils.fleetnap.shiftlock import LockError, guarded, is_lease, playbook_ancestor, read, release, stat
from ansible.module_utils.fleetnap.validate import ParamError, items, number, path, text


class RecordError(Exception):
    """The shift could not be recorded; the message says what is as it was."""


def options():
    """gear_record's options, a fresh copy."""
    return dict(
        plan=dict(type="dict", required=True),
        after=dict(type="dict"),
        observed=dict(type="dict"),
        observed_before=dict(type="bool", default=False),
        observe_again_on_failure=dict(type="bool", default=False),
        replicas=dict(type="int", default=3),
        gmin=dict(type="int", default=1),
        actions=dict(type="list", elements="dict"),
        result=dict(type="str", choices=["ok", "degraded", "refused", "failed"]),
        reason=dict(type="str", default=""),
        started=dict(type="str", required=True),
        started_epoch=dict(type="float", required=True),
        state_file=dict(type="path", required=True),
        history_file=dict(type="path", required=True),
        power_file=dict(type="path", required=True),
        measured_file=dict(type="path"),
        first_observed=dict(type="dict"),
        metrics_dir=dict(type="path", required=True),
        lock_file=dict(type="path"),
    )


MUTUALLY_EXCLUSIVE = [("after", "observed")]
REQUIRED_ONE_OF = [("after", "observed")]
REQUIRED_IF = [("observe_again_on_failure", True, ("lock_file",))]

CHECKS = {
    "started": text(max_len=64),
    "started_epoch": number(lo=0, hi=1e11),
    "reason": text(max_len=65536, printable=False),
    "state_file": path(),
    "history_file": path(),
    "power_file": path(),
    "measured_file": path(),
    "metrics_dir": path(),
    "lock_file": path(),
    "observed": items(100000),
    "first_observed": items(100000),
    "replicas": number(lo=1, hi=100, integer=True),
    "gmin": number(lo=1, hi=100, integer=True),
}
MAX_ACTIONS = 100000


def _writable(p, opt):
    """Refuse, before anything is written, a target this call could not replace: a directory, a
    FIFO or device, an immutable or append-only file or directory (fileio.write_problem)."""
    if os.path.isdir(p):
        raise ParamError("option %s: %s is a directory, not a file" % (opt, p))
    if os.path.islink(p):
        try:
            fileio.resolve(os.path.dirname(p) or "/", p, "option %s: %s" % (opt, p))
        except fileio.UnsafeFileError as exc:
            raise ParamError("%s; nothing was written" % exc)
    problem = fileio.write_problem(p)
    if problem:
        raise ParamError("option %s: cannot write %s: %s; nothing was written" % (opt, p, problem))


def run(module, p):
    """Record the shift of the checked options ``p`` (gear_record's, CHECKS applied): gear_record's
    result (with ``changed``); RecordError naming what failed and what is as it was."""
    now = time.time()
    try:
        # What was given, checked before the lock file and the state file are read: the actions
        # (the journal's, when none are given, are checked once read), the plan, the observation
        # after the shift or what it is decided from, its power figures and readings.
        if p["actions"] is not None and len(p["actions"]) > MAX_ACTIONS:
            raise ParamError("option actions: at most %d, got %d" % (MAX_ACTIONS, len(p["actions"])))
        if p["observed_before"] and p["observed"] is None:
            raise ParamError("option observed_before: only with observed (the observation from before the shift)")
        check_actions(p["actions"] or [])
        if p["observed"] is not None:     # in after_shift's order: before the plan's other keys
            check_observed(p["plan"], p["observed"], p["replicas"], p["gmin"])
        check_inputs(p["plan"], p["after"], p["actions"] or [])
        if p["observed"] is not None and p["measured_file"]:
            readings = readings_of(p["first_observed"] or {})
            readings.update(readings_of(p["observed"]))
            add_readings({}, readings, "")
        if p["after"] is not None:
            check_figures(p["after"].get("power_w") or {}, "option after.power_w")
        resumed = None
        shift = journal.shift_of(p["lock_file"]) if p["lock_file"] else None
        if p["actions"] is None:
            # the shift's actions as its batches wrote them (gear_state), before this replaces the
            # file, after those of a killed run it resumed (gear_shift_plan)
            p["actions"] = []
            if p["lock_file"]:
                doc = journal.read(p["state_file"])
                resumed = journal.resumed_of(doc, shift)
                p["actions"] = journal.later_wins(resumed["actions"] if resumed else [], journal.actions(doc, shift))
                stop = journal.stop_reason(doc, shift)
                if p["observe_again_on_failure"] and p["observed_before"] and stop:
                    # a failure: where its host is now, only a second look says; nothing written
                    return dict(changed=False, observe_again=True, reason=stop, written=[], lock_released=False)
        if len(p["actions"]) > MAX_ACTIONS:
            raise ParamError("option actions: at most %d, got %d" % (MAX_ACTIONS, len(p["actions"])))
        if p["observed_before"] and p["observed"] is None:
            raise ParamError("option observed_before: only with observed (the observation from before the shift)")
        check_actions(p["actions"])
        if p["observed"] is not None:
            observed = p["observed"]
            if p["observed_before"]:
                observed = as_the_waves_saw(observed, [a for a in p["actions"] if isinstance(a, dict)])
            p["after"] = after_shift(p["plan"], observed, p["replicas"], p["gmin"], p["state_file"], now)
        check_inputs(p["plan"], p["after"], p["actions"])
        actions = merge_actions(p["actions"])
        for opt in ("state_file", "history_file", "power_file", "measured_file"):
            if p[opt] is None:
                continue
            directory = os.path.dirname(p[opt]) or "/"
            if not os.path.isdir(directory):
                raise ParamError("option %s: its directory %s does not exist" % (opt, directory))
        if os.path.exists(p["metrics_dir"]) and not os.path.isdir(p["metrics_dir"]):
            raise ParamError("option metrics_dir: %s is not a directory" % p["metrics_dir"])
        new_figures = check_figures(p["after"].get("power_w") or {}, "option after.power_w")
        metrics_file = os.path.join(p["metrics_dir"], "fleetnap_gear.prom")
        # An append-only history could be appended to but not cut back if a later write failed:
        # refused too, like every target this call could not put back.
        for opt, target in (("state_file", p["state_file"]), ("history_file", p["history_file"]),
                            ("power_file", p["power_file"]), ("measured_file", p["measured_file"]),
                            ("metrics_dir", metrics_file)):
            if target is None:
                continue
            _writable(target, opt)
        kept = read_power_file(p["power_file"])
        measured_kept = read_measured_file(p["measured_file"]) if p["measured_file"] else {}
        measured = measured_kept
        if p["measured_file"] and p["observed"] is not None:
            readings = readings_of(p["first_observed"] or {})
            readings.update(readings_of(p["observed"]))
            measured = add_readings(measured_kept, readings, datetime.fromtimestamp(now, timezone.utc).isoformat())
        history_text = read_text(p["history_file"], "gear history") or ""

        if p["result"]:
            result, reason = p["result"], p["reason"]
        else:
            result, reason = outcome(p["plan"], p["after"], actions)
        finished = datetime.fromtimestamp(now, timezone.utc).isoformat()
        rec = record(p["plan"], p["after"], actions, result, reason, p["started"], finished,
                     max(0.0, now - p["started_epoch"]), resumed)
        line = json.dumps(history_line(rec, p["after"]), sort_keys=True, allow_nan=False) + "\n"
        sep = "" if not history_text or history_text.endswith("\n") else "\n"
        history = read_history((history_text + sep + line).splitlines(), p["history_file"])
        figures = dict(kept, **new_figures)
        used, sources = effective_figures(figures, measured)
        energy = dict(daily(history, used, now), figure_sources=sources)
        prom_text = render(metrics(rec, p["after"], energy, now) + figure_metrics(used, sources))
        state_text = json.dumps(rec, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except (ParamError, EnergyError, MetricError, ShiftError, GearError) as exc:
        raise RecordError(str(exc))
    except (OSError, ValueError, fileio.HostFsError) as exc:   # unreadable files; a record that is not JSON (NaN)
        raise RecordError("could not record the gear shift: %s (nothing was written)" % exc)

    out = dict(record=rec, result=result, reason=rec["reason"], energy=energy, observe_again=False,
               report=report(rec, p["after"], p["state_file"]))
    if module.check_mode:
        return dict(changed=True, written=[], lock_released=False, **out)

    undo = Writes(module)
    written = []
    step = p["state_file"]
    try:
        undo.replace(p["state_file"], None, state_text)
        written.append(step)
        step = p["history_file"]
        undo.append(p["history_file"], sep + line)
        written.append(step)
        step = p["power_file"]
        if figures != kept:
            undo.replace(p["power_file"], None, json.dumps(figures, indent=1, sort_keys=True) + "\n")
            written.append(step)
        step = p["measured_file"]
        if p["measured_file"] and measured != measured_kept:
            undo.replace(p["measured_file"], None, json.dumps(measured, indent=1, sort_keys=True) + "\n")
            written.append(step)
        step = metrics_file
        if not os.path.isdir(p["metrics_dir"]):
            undo.makedirs(p["metrics_dir"])
        undo.replace(metrics_file, None, prom_text)
        written.append(step)
    except (OSError, fileio.HostFsError) as exc:
        raise RecordError(undo.failure("could not write %s: %s" % (step, exc)))
    return dict(changed=True, written=written, lock_released=_release(module, p["lock_file"], shift), **out)


def _release(module, lock_file, shift):
    """Release the shift's lock after the record (True), or warn why not (False)."""
    if not lock_file:
        return False
    try:
        with guarded(lock_file):
            owner = read(lock_file)
            if is_lease(owner):     # a shift spanning jobs: the record ends the lease it recorded, whoever runs it
                if "lease/%s" % owner["token"] != shift:
                    raise LockError("the lease is %s's now, not the shift recorded (%s)" % (owner["token"], shift))
                release(lock_file, None, None, token=owner["token"])
            else:
                pid = playbook_ancestor()
                st = stat(pid) if pid else None
                if st is None:
                    raise LockError("no ansible-playbook process above this module to own it")
                release(lock_file, pid, st[1])
    except LockError as exc:
        module.warn("the shift is recorded; its lock %s was not released: %s" % (lock_file, exc))
        return False
    return True
