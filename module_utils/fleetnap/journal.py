# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gear shift's journal: the controller's state file (``hosts.NAME.state``, the last shift's
record) and, while a shift runs, its ``in_progress`` part: the shift's identity (the owner of the
gear-shift lock), every action of its batches (the hosts' results, a failure winning per host and
action) and its failures. Read, checked and updated here only: gear_state writes a batch into it,
gear_state's ``query`` and gear_record read the running shift's actions back from it, so the
actions travel between the shift's phases in this file, not in facts carried through hostvars.
Standard library only."""

from __future__ import annotations

import errno
import json
import math
import os
import time

from ansible.module_utils.fleetnap import fileio, parse, shiftlock
from ansible.module_utils.fleetnap.gearshift import failure_wins, parked_state
from ansible.module_utils.fleetnap.validate import ParamError, name

MAX_ACTIONS = 100000
# A host name the state file takes (\Z, not $: '$' also matches before a final newline, which let
# "n2\n" into the state file), and how many hosts one event may name.
HOST_NAME = name(r"^[A-Za-z0-9_.:@\[\]-]{1,255}\Z", "an inventory host name")
MAX_HOSTS = 100000


def read(real):
    """The state document, or a new one when the file does not exist. Read through the file layer
    (a regular file in its own directory, no link out of it, at most fileio.RECORD bytes, UTF-8)
    and parse.loads (bounded depth, no NaN, Infinity or 1e999, no lone surrogates). Raises
    ParamError naming the file and what is wrong with it."""
    directory = os.path.dirname(real) or "/"
    try:
        data = _read_whole(real, directory)
    except fileio.UnsafeFileError as exc:
        raise ParamError("%s: fix or remove it" % exc)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise ParamError("state file %s is a directory: give the file's path" % real)
        raise ParamError("cannot read the state file %s: %s" % (real, exc.strerror or exc))
    if data is None:
        return {"hosts": {}}
    doc = None
    if data.strip():
        try:
            doc = parse.loads(data, "state file %s" % real, fileio.RECORD)
        except parse.ParseError as exc:
            raise ParamError("%s: fix or remove it (nothing was written)" % exc)
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), dict):
        raise ParamError("state file %s is not a JSON object with a 'hosts' object: fix or remove it" % real)
    for h, entry in doc["hosts"].items():
        if not isinstance(entry, dict):
            raise ParamError("state file %s: hosts.%s is not an object (got %s): fix or remove the file"
                             % (real, h, type(entry).__name__))
    _check_journal(doc, real)
    return doc


def _check_journal(doc, real):
    """The journal's actions (``in_progress`` and what it resumed): an action names its host and its
    action as text, the keys a failure is merged by (failure_wins); ParamError naming the file."""
    progress = doc.get("in_progress")
    if not isinstance(progress, dict):
        return
    resumed = progress.get("resumed") if isinstance(progress.get("resumed"), dict) else {}
    for where, value in (("in_progress", progress), ("in_progress.resumed", resumed)):
        for key in ("actions", "failed"):
            for i, entry in enumerate(_actions(value.get(key))):
                if entry.get("action") is not None and not isinstance(entry["action"], str):
                    raise ParamError("state file %s: %s.%s[%d].action is %s, not text: fix or remove the file"
                                     % (real, where, key, i, type(entry["action"]).__name__))


def _read_whole(real, directory, attempts=5):
    """The file's bytes; read again when the writer's rename landed between the file layer's check
    and its open (each read is of one whole file: a write is a rename of a complete one)."""
    for attempt in range(attempts):
        try:
            return fileio.read_optional(real, fileio.RECORD, root=directory, what="state file")
        except fileio.ReplacedError:
            if attempt == attempts - 1:
                raise


def shift_of(lock_file):
    """The running shift's identity: its lock's owner (PID, start time, when it took the lock), or
    None without a lock. ParamError naming the lock when it cannot be read."""
    if not lock_file:
        return None
    try:
        owner = shiftlock.read(lock_file)
    except shiftlock.LockError as exc:
        raise ParamError("option lock_file: %s" % exc)
    if shiftlock.is_lease(owner):      # a shift spanning jobs (AWX): its lease, whoever runs the step
        return "lease/%s" % owner["token"]
    if not owner or owner.get("pid") is None:
        return None
    return "%s/%s/%s" % (owner.get("pid"), owner.get("start_time"), owner.get("since"))


def progress_of(doc, shift):
    """This shift's ``in_progress`` part, {} when the file holds another shift's or none."""
    progress = doc.get("in_progress")
    if not shift or not isinstance(progress, dict) or progress.get("shift") != shift:
        return {}
    return progress


def _dicts(value):
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _actions(value):
    """The entries of a journal's list that are actions: objects with a host name (the rest of a
    hand-edited or foreign file is not an action; gear_record checks the actions it records)."""
    return [x for x in _dicts(value) if isinstance(x.get("host"), str)]


def stop_reason(doc, shift):
    """Why this shift must not go lower ("" when nothing of this shift failed)."""
    return "; ".join("%s: %s failed (%s)" % (f.get("host"), f.get("action"), f.get("msg"))
                     for f in _dicts(progress_of(doc, shift).get("failed")))


def actions(doc, shift):
    """Every action this shift's batches wrote, a failure winning per host and action."""
    return failure_wins(_actions(progress_of(doc, shift).get("actions")))


def failed(doc, shift):
    """This shift's failures as its batches wrote them (host, action, msg)."""
    return _failed(progress_of(doc, shift).get("failed"))


def failures(results):
    """The failed outcomes of a batch (a failure wins per host and action): host, action, msg."""
    return [{"host": r["host"], "action": str(r.get("action") or ""), "msg": str(r.get("msg") or "failed")[:500]}
            for r in failure_wins(results) if r.get("ok") is not True]


def touch(doc, shift, now):
    """The document's ``in_progress`` for this call, marked updated ``now``: this shift's (started
    anew when the file holds another shift's: one killed before its record), or, without a shift,
    whatever is there. Returned; the document is changed in place."""
    progress = doc.get("in_progress") if isinstance(doc.get("in_progress"), dict) else {"since": now}
    if shift and progress.get("shift") != shift:
        progress = {"since": now, "shift": shift}
    progress["updated"] = now
    doc["in_progress"] = progress
    return progress


def note_batch(doc, shift, results, now):
    """Write a batch's results into this shift's ``in_progress`` (touch): its actions, a failure
    winning, and its failures. The document is changed in place, and not at all when the actions
    would pass MAX_ACTIONS (ParamError)."""
    batch = failure_wins([r for r in results if isinstance(r, dict) and isinstance(r.get("host"), str)])
    # what touch will keep: this shift's in_progress, or without a shift whatever is there
    current = doc.get("in_progress") if isinstance(doc.get("in_progress"), dict) else {}
    kept = _dicts((current if not shift or current.get("shift") == shift else {}).get("actions"))
    if len(kept) + len(batch) > MAX_ACTIONS:
        raise ParamError("the shift's journal would hold more than %d actions: nothing was written" % MAX_ACTIONS)
    progress = touch(doc, shift, now)
    progress["actions"] = kept + batch
    failed = failures(batch)
    if failed:
        progress["failed"] = _dicts(progress.get("failed")) + failed
    return failed


def later_wins(earlier, later):
    """The actions of two runs of one shift (a killed run, then the run that resumed it): the later
    run's action for a host and action replaces the earlier run's, whatever either says (the later
    one is what happened last); within each run a failure wins (failure_wins)."""
    later = failure_wins(_actions(later))
    done = set((a["host"], a.get("action")) for a in later)
    return [a for a in failure_wins(_actions(earlier)) if (a["host"], a.get("action")) not in done] + later


def _plan_summary(plan):
    """What the journal keeps of a plan: the gear, its groups, and per host the observed state and
    the action decided (the record's own ``planned`` rows are the whole rows)."""
    return {"gear": plan.get("gear"), "groups_on": plan.get("groups_on"), "date": plan.get("date"),
            "result": plan.get("result"),
            "rows": [dict((k, r.get(k)) for k in ("host", "state", "action", "method"))
                     for r in _dicts(plan.get("rows"))]}


def begin(doc, shift, plan, now):
    """Write this shift's observation and plan into the document's ``in_progress`` (changed in
    place). The caller holds the gear-shift lock, so an ``in_progress`` of another shift is one that
    was killed before its record: this shift resumes it - its actions and failures are kept under
    ``resumed`` (a chain of killed runs folded into one, the later run winning per host and action)
    for the record, and are no reason to stop (this shift planned from what it observed now). The
    same shift planning again keeps its own actions. Returns the resumed part, or None."""
    if not shift:
        raise ParamError("the shift's journal needs the gear-shift lock's owner: take the lock first (shift_lock)")
    current = doc.get("in_progress") if isinstance(doc.get("in_progress"), dict) else None
    progress = {"shift": shift, "since": now, "updated": now, "plan": _plan_summary(plan)}
    resumed = None
    if current is not None and current.get("shift") == shift:
        for key in ("since", "actions", "failed", "resumed"):
            if key in current:
                progress[key] = current[key]
    elif current is not None:
        earlier = current.get("resumed") if isinstance(current.get("resumed"), dict) else {}
        plan_then = current.get("plan") if isinstance(current.get("plan"), dict) else {}
        resumed = {"shift": _text(current.get("shift")), "since": _when(current.get("since")),
                   "updated": _when(current.get("updated")),
                   "gear": _gear(plan_then.get("gear")),
                   "actions": later_wins(earlier.get("actions"), current.get("actions")),
                   "failed": _failed(earlier.get("failed")) + _failed(current.get("failed"))}
        if len(resumed["actions"]) > MAX_ACTIONS:
            raise ParamError("the killed shift's journal holds more than %d actions: fix or remove the state file"
                             % MAX_ACTIONS)
        progress["resumed"] = resumed
    doc["in_progress"] = progress
    return resumed


def _gear(value):
    """A gear number as the plan wrote it (an int, never a bool), or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value, limit=200):
    return value[:limit] if isinstance(value, str) else None


def stamp(now):
    """The journal's time stamps: UTC, ISO 8601 to the second (what gear_state writes)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def _when(value):
    """A time stamp of the journal as text: the text as written, or a number of seconds since the
    epoch (an earlier fleetnap's plan wrote those) as stamp() writes it; None for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            0 <= value < 1e11:
        return stamp(value)
    return _text(value)


def _failed(value):
    """A journal's failures in the one shape failures() writes (host, action, msg: text)."""
    return [{"host": f["host"][:200], "action": str(f.get("action") or "")[:20],
             "msg": str(f.get("msg") or "failed")[:500]} for f in _actions(value)]


def resumed_of(doc, shift):
    """The killed shift this one resumed (begin), or None; in the shapes begin writes, whatever the
    file holds now."""
    r = progress_of(doc, shift).get("resumed")
    if not isinstance(r, dict):
        return None
    return {"shift": _text(r.get("shift")), "since": _when(r.get("since")), "updated": _when(r.get("updated")),
            "gear": _gear(r.get("gear")),
            "actions": failure_wins(_actions(r.get("actions"))), "failed": _failed(r.get("failed"))}


def write(real, doc, module):
    """The document, atomically (temp file, fsync, rename, directory fsync), at most fileio.RECORD
    bytes (what read takes back). ParamError / OSError as fileio raises them."""
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    if len(text.encode("utf-8")) > fileio.RECORD:
        raise ParamError("the state file %s would pass %d bytes, the most it is read back at: nothing was written"
                         % (real, fileio.RECORD))
    fileio.atomic_write(real, text, 0o644, os.path.dirname(real) or "/", module)


def batch_states(event, hosts, rows, results):
    """Host -> the state a batch's event writes (only the hosts of ``hosts`` it concerns):
    before_down marks the plan's down hosts (``rows``) parked as their method leaves them,
    after_down keeps the parked state of each verified park and puts ``on`` back for a host whose
    down failed while it stayed up, after_up marks ``on`` each verified wake. A host may have two
    results (its wake, then what failed after it): a failure wins."""
    batch = set(hosts)
    out = {}
    if event == "before_down":
        for r in rows:
            if r["host"] in batch and r.get("action") == "down":
                out[r["host"]] = parked_state(r.get("method"))
        return out
    merged = failure_wins(results)
    failed = set(res["host"] for res in merged if res.get("ok") is not True)
    for res in merged:
        h = res["host"]
        if h not in batch:
            continue
        if event == "after_up" and res.get("ok") is True and h not in failed:
            out[h] = "on"
        elif event == "after_down":
            if res.get("ok") is True and res.get("state") in ("asleep", "off"):
                out[h] = res["state"]
            elif res.get("ok") is not True and res.get("state") == "on":
                out[h] = "on"   # the down failed and the host stayed up
    return out


def note_event(real, doc, shift, event, want, results, module, check_mode=False):
    """A batch's event into the state file ``real`` (its document ``doc``, as read): the states of
    ``want`` (batch_states), and with a ``shift`` (the lock's owner) and ``results`` the batch's
    results in its journal. Nothing is written in check mode, or when nothing changes and there is
    nothing to journal. Returns (written, updated, diff). ParamError, OSError or fileio.HostFsError
    when the file cannot be written (it is as it was then)."""
    journaled = shift is not None and event != "before_down" and bool(results)
    hosts = doc["hosts"]
    before = dict((h, hosts[h].get("state") if h in hosts else None) for h in want)
    updated = dict((h, s) for h, s in want.items() if before[h] != s)
    diff = {"before": {"hosts": before}, "after": {"hosts": dict(before, **want)}}
    if (not updated and not journaled) or check_mode:
        return False, updated, diff
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for h, s in updated.items():
        entry = hosts.get(h, {"host": h})
        entry.update(state=s, since=now, by=event)
        hosts[h] = entry
    directory = os.path.dirname(real) or "/"
    if not os.path.isdir(directory):
        raise ParamError("the state file's directory %s does not exist" % directory)
    if journaled:
        note_batch(doc, shift, results, now)
    else:
        touch(doc, shift, now)
    write(real, doc, module)
    return True, updated, diff
