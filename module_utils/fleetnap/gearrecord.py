# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift's record, decided in Python (gear_record): the shift's result and reason from
the plan, the per-host results and where the hosts are now; the state file's document; the
history line; the metrics; the result table the playbook prints. Standard library only."""

from __future__ import annotations

import os

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.energy import FIGURE_KEYS
from ansible.module_utils.fleetnap.gearshift import (
    check_host_records, failure_wins, observed_state, plan_from, target_groups,
)
from ansible.module_utils.fleetnap.validate import ParamError

RESULTS = ("ok", "degraded", "refused", "failed")
HISTORY_KEYS = ("gear", "target_gear", "requested_gear", "result", "started", "finished", "duration_s")
PLAN_KEYS = ("gear", "requested", "groups_on", "groups_off", "date", "result", "reason", "unhealthy", "rows")
AFTER_KEYS = ("current_gear", "rows", "up_hosts", "down_hosts", "power_rows", "table")


def check_inputs(plan, after, actions):
    """The plan and the observation after the shift are gear_shift_plan's returns, the actions
    per-host results ({host, ok, msg, ...}). ``after`` None: the plan and the actions only (the
    observation after the shift is yet to be decided from ``observed``). Raises ParamError naming
    the option and the field."""
    docs = (("plan", plan, PLAN_KEYS),) + ((("after", after, AFTER_KEYS),) if after is not None else ())
    for opt, doc, keys in docs:
        missing = [k for k in keys if k not in doc]
        if missing:
            raise ParamError("option %s: needs gear_shift_plan's %s (missing: %s)"
                             % (opt, ", ".join(keys), ", ".join(missing)))
    if plan["result"] not in RESULTS:
        raise ParamError("option plan.result: %r is not one of %s" % (plan["result"], ", ".join(RESULTS)))
    if not isinstance(plan["requested"], dict) or "gear" not in plan["requested"]:
        raise ParamError("option plan.requested: needs the requested gear (requested.gear)")
    for opt, doc, key in (("plan", plan, "rows"), ("after", after, "rows"), ("after", after, "power_rows")):
        if doc is None:
            continue
        rows = doc[key]
        if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("host"), str) for r in rows):
            raise ParamError("option %s.%s: must be a list of rows, each with a host name" % (opt, key))
    if after is None:
        check_actions(actions)
        return
    for key in ("up_hosts", "down_hosts"):
        if not isinstance(after[key], list) or not all(isinstance(h, str) for h in after[key]):
            raise ParamError("option after.%s: must be a list of host names" % key)
    check_actions(actions)
    _unique(after["rows"], "after.rows", ("host",))
    _unique(after["power_rows"], "after.power_rows", ("host", "state"))


def check_actions(actions):
    """Each action a dict with a host name (a string: a list there is refused here, before any
    set or dict is built from the names) and ok (true or false)."""
    for i, a in enumerate(actions):
        if not isinstance(a, dict) or not isinstance(a.get("host"), str) or not isinstance(a.get("ok"), bool):
            raise ParamError("option actions[%d]: needs a host name (host) and ok (true or false), got %s"
                             % (i, repr(a)[:80]))


def _unique(rows, opt, keys):
    """Two rows for one host (and state) would be two samples of one series in the metrics file,
    which node_exporter's textfile collector rejects whole: refused, naming both rows."""
    seen = {}
    for i, r in enumerate(rows):
        key = tuple(r.get(k) for k in keys)
        try:
            first = seen.setdefault(key, i)
        except TypeError:
            raise ParamError("option %s[%d]: %s must be text, got %s" % (opt, i, "/".join(keys), repr(key)[:80]))
        if first != i:
            raise ParamError("option %s[%d] and %s[%d]: two rows for %s %s: one row per %s (the metrics file "
                             "would hold two samples of one series, which node_exporter rejects)"
                             % (opt, first, opt, i, " and ".join(keys), " ".join(repr(k) for k in key),
                                " and ".join(keys)))


def after_shift(plan, observed, replicas, gmin, state_file, now=None):
    """Where every host is now, against the plan's target groups: gear_shift_plan's decision over
    the observation after the shift (the state file is still the previous shift's: nothing is
    written before this). ParamError when the plan has no target groups; ShiftError / GearError
    name a host or value the observation does not allow."""
    return plan_from(observed, replicas, gmin, groups_on=groups_on_of(plan), state_file=state_file, now=now)


def check_observed(plan, observed, replicas, gmin):
    """What after_shift decides from, checked without reading anything (gear_record checks it
    before the lock file and the state file are read): the plan's target groups against replicas
    and gmin, and the observation's host records. ParamError / ShiftError as after_shift's."""
    on = groups_on_of(plan)
    target_groups(replicas, gmin, groups_on=on)
    check_host_records(observed, replicas)


def groups_on_of(plan):
    """The plan's target groups (groups_on); ParamError when it has none."""
    on = plan.get("groups_on")
    if not isinstance(on, list) or not on or not all(isinstance(g, int) and not isinstance(g, bool) for g in on):
        raise ParamError("option plan.groups_on: needs gear_shift_plan's target groups (a list of group numbers), got %r"
                         % (on,))
    return on


# What a second observation would see of a host whose action the waves verified: a woken host
# greets (its chassis on), a host parked asleep is silent with its chassis on, a host parked off
# silent with its chassis off.
_VERIFIED = {("up", "on"): (True, "on"), ("down", "asleep"): (False, "on"), ("down", "off"): (False, "off")}


def as_the_waves_saw(observed, actions):
    """The observation from before a shift, with every host whose action the waves verified (a
    wake: its SSH greeting; a park: its silence, and the BMC's chassis off for a power-off) seen
    as a second observation would see it: answering or silent, its chassis power the state's
    (only where the first observation read that host's BMC). The others stay as they were (a
    failed action is not taken as done; where its state was the state file's word, its BMC not
    asked, it is unknown now). A changed host's power reading is dropped: it was measured in the
    state it left. Returns a new dict."""
    done, failed = {}, set()
    for a in actions:
        if a.get("ok") is not True:
            failed.add(a.get("host"))
            continue
        seen_as = _VERIFIED.get((a.get("action"), "on" if a.get("action") == "up" else a.get("state")))
        if seen_as is not None:
            done[a.get("host")] = seen_as
    out = {}
    for name, seen in observed.items():
        seen = dict(seen) if isinstance(seen, dict) else seen
        if name in done and isinstance(seen, dict):
            ssh, chassis = done[name]
            seen["ssh"] = ssh
            if seen.get("bmc") is not None:
                seen["bmc"] = chassis
            if seen.get("power_watts") is not None:
                seen.update(power_watts=None, power_source=None,
                            power_note="not read again after the shift (the waves verified the host)")
        if name in failed and isinstance(seen, dict) and seen.get("bmc_read") is False:
            seen.pop("parked_as", None)     # the state file's word no longer holds after a failed action
        out[name] = seen
    return out


# One result per host and action, a failure winning (gearshift.failure_wins).
merge_actions = failure_wins


def outcome(plan, after, actions):
    """(result, reason): failed when a host's action failed or a host is not where the plan put
    it; else the plan's own result (ok, degraded when the health gate kept a higher gear)."""
    failures = [a for a in actions if not a["ok"]]
    left = list(after["up_hosts"]) + list(after["down_hosts"])
    parts = ["%s: %s" % (a["host"], str(a.get("msg") or "failed").strip()) for a in failures]
    if left:
        parts.append("not converged: %s still to act on" % ", ".join(left))
    if plan.get("reason"):
        parts.append(str(plan["reason"]))
    result = "failed" if failures or left else plan["result"]
    return result, "; ".join(parts)


def record(plan, after, actions, result, reason, started, finished, duration_s, resumed=None):
    """The state file's document (gear_shift_plan reads it as the previous shift's result). A host
    asleep at the end whose park in this shift installed gear_member's resume hook is marked
    ``resume_hook`` (a mark kept from an earlier shift is in its row already). ``resumed``: the
    killed run this shift resumed (journal.begin), named with its count of actions and its failures."""
    hooked = set(a["host"] for a in actions if a.get("action") == "down" and a.get("ok") is True
                 and a.get("resume_hook") is True)
    hosts = dict((r["host"], dict(r, resume_hook=True) if r["host"] in hooked and r.get("state") == "asleep" else r)
                 for r in after["rows"])
    doc = {
        "gear": after["current_gear"],
        "target_gear": plan["gear"],
        "requested_gear": plan["requested"]["gear"],
        "groups_on": plan["groups_on"],
        "groups_off": plan["groups_off"],
        "rotation_date": plan["date"],
        "result": result,
        "reason": reason.strip(),
        "unhealthy": plan["unhealthy"],
        "started": started,
        "finished": finished,
        "duration_s": round(duration_s, 3),
        "planned": plan["rows"],
        "hosts": hosts,
        "actions": actions,
    }
    if resumed:
        doc["resumed"] = {"shift": resumed.get("shift"), "since": resumed.get("since"),
                          "actions": len(resumed.get("actions") or []), "failed": resumed.get("failed") or []}
    return doc


def history_line(rec, after):
    """A line of history.jsonl: the shift and every host's power state at its end."""
    line = dict((k, rec[k]) for k in HISTORY_KEYS)
    if "resumed" in rec:
        line["resumed"] = rec["resumed"]
    line["power"] = dict((r["host"], r.get("state")) for r in after["rows"])
    # What each park and wake of the shift took (slurmconf: Slurm's timeouts from measurements).
    line["took"] = dict((a["host"], {"action": a["action"], "ok": a.get("ok") is True, "method": a.get("method") or "",
                                     "elapsed_s": a["elapsed_s"]})
                        for a in rec["actions"] if a.get("action") in ("up", "down") and _seconds(a.get("elapsed_s")))
    return line


def _seconds(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 86400


def metrics(rec, after, energy, now):
    """The fleetnap_gear* metrics (prom.render's input)."""
    def value(v):
        return [{"labels": {}, "value": v}]

    return [
        {"name": "fleetnap_gear", "samples": value(rec["gear"]),
         "help": "Gear groups whose hosts all answer, observed at the end of the last gear shift."},
        {"name": "fleetnap_gear_target", "samples": value(rec["target_gear"]),
         "help": "The gear the last gear shift went to (gear r when the health gate refused a lower one)."},
        {"name": "fleetnap_host_power_state",
         "help": "Power state of each host observed at the end of the last gear shift (1 = the current state).",
         "rows": after["power_rows"], "row_labels": {"host": "host", "state": "state"}, "row_value": "value"},
        {"name": "fleetnap_gear_shift_last_result", "help": "Result of the last gear shift (1 = this result).",
         "samples": [{"labels": {"result": r}, "value": int(rec["result"] == r)} for r in RESULTS]},
        # Base units, as promtool's lint wants them: host-seconds and joules (the dashboard shows
        # host-hours and kWh: / 3600 and / 3.6e6).
        {"name": "fleetnap_gear_parked_host_seconds_total", "type": "counter",
         "samples": value(round(energy["total"]["parked_host_hours"] * 3600.0, 3)),
         "help": "Host-seconds parked (asleep in S3 or off) by gear shifts since the gear history began."},
        {"name": "fleetnap_gear_energy_not_spent_joules_total", "type": "counter",
         "samples": value(round(energy["total"]["kwh_not_spent"] * 3.6e6, 3)),
         "help": "Energy not spent against staying on since the gear history began (hosts with power figures), J."},
        {"name": "fleetnap_gear_hosts_without_power_figures", "samples": value(len(energy["hosts_without_figures"])),
         "help": "Hosts in the gear history without power figures (fleetnap_power_w); they count in host-hours only."},
        {"name": "fleetnap_gear_shift_duration_seconds", "samples": value(rec["duration_s"]),
         "help": "Wall time of the last gear shift, lock to record."},
        {"name": "fleetnap_gear_shift_last_run_timestamp_seconds", "samples": value(round(now)),
         "help": "Unix time the last gear shift ended."},
    ]


def readings_of(observed):
    """{(host, state): (watts, source)} of the hosts whose BMC measured a power draw in this
    observation (gear_observe read_power), each in the state the same observation saw it in
    (observed_state: answering = on, silent with chassis on = asleep, off = off)."""
    out = {}
    for name, seen in (observed or {}).items():
        if not isinstance(seen, dict) or seen.get("power_watts") is None:
            continue
        state = observed_state(seen.get("ssh") is True, seen.get("bmc"))
        out[(name, state)] = (seen.get("power_watts"), seen.get("power_source"))
    return out


def figure_metrics(figures, sources):
    """fleetnap_gear_power_figure_watts{host, state, source}: the watts the energy figures use per
    host and state, and whether the BMC measured them (source="measured") or the inventory gave
    them (source="inventory"); hosts without a complete set of figures are left out."""
    rows = []
    for host in sorted(figures):
        for state in FIGURE_KEYS:
            src = sources[host][state]
            rows.append({"host": host, "state": state, "source": "inventory" if src == "inventory" else "measured",
                         "value": round(figures[host][state], 3)})
    return [{"name": "fleetnap_gear_power_figure_watts", "rows": rows,
             "row_labels": {"host": "host", "state": "state", "source": "source"}, "row_value": "value",
             "help": "Watts per host and power state the gear energy figures use: measured by the host's BMC "
                     "(source=measured, gear_observe read_power) or from the inventory (source=inventory)."}]


def report(rec, after, state_file):
    """What the playbook prints at the end: the result, the hosts as they are now, every action."""
    lines = ["Gear shift %s: gear %s (target %s, requested %s) in %s s"
             % (rec["result"], rec["gear"], rec["target_gear"], rec["requested_gear"], rec["duration_s"])]
    if rec["reason"]:
        lines.append("  " + rec["reason"])
    lines.extend(str(after["table"]).strip("\n").split("\n"))
    for a in rec["actions"]:
        by = (" by %s" % a["method"]) if a.get("method") else ""
        lines.append("  %s: %s %s%s - %s" % (a["host"], a.get("action") or "?", "ok" if a["ok"] else "FAILED", by,
                                             a.get("msg") or ""))
    lines.append("  state: %s" % state_file)
    return lines


def _rmdir(directory):
    return lambda: os.rmdir(directory)


class Writes(fileio.Changes):
    """The files one call writes (fileio.Changes: each write atomic, each remembered with how to
    undo it), so that a failure after the first write puts every file back as it was."""

    def __init__(self, module=None):
        super(Writes, self).__init__("/")
        self.module = module

    def replace(self, p, old, new):
        """Write ``new`` to ``p`` atomically (``old``, its content before, is kept by Changes'
        own snapshot; the argument stays for callers)."""
        return self.write(p, new, 0o644, self.module)

    def makedirs(self, directory):
        """Create ``directory`` (and missing parents); undone by removing what was created."""
        made = []
        d = directory
        while d and d != "/" and not os.path.lexists(d):
            made.append(d)
            d = os.path.dirname(d)
        os.makedirs(directory, 0o755)
        for d in reversed(made):     # recorded outermost first, so undone deepest first
            self.record(d, _rmdir(d))

    def rollback(self):
        """Put back every file written; returns 'path: why' for the ones that could not be."""
        return self.undo()[1]
