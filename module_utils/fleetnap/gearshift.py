# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling gear shifts: what each host must do to reach a gear, and when a shift must refuse.

Sierra (Thereska et al., EuroSys 2011, sections 3.4 and 3.7) powers the first r-g of its r gear
groups down in gear g and, when a server of a group that stays active fails in a low gear, wakes
its peers instead of going lower. This module turns that into a per-host decision from what was
*observed* on every host just before acting, so a shift that was interrupted halfway converges
when it is run again: a host already in its target state gets no action.

Observed power states (``observed_state``):

- ``on``: the host's service (SSH) answers;
- ``asleep``: it does not answer but its BMC reports chassis power on (S3, or hung);
- ``off``: its BMC reports chassis power off;
- ``unknown``: it does not answer and there is no BMC answer to tell;
- a silent host whose BMC the observation did not ask (``observation_needs``: the state file has
  it asleep and the shift wakes it) is in the state the state file gives (``parked_as``).

Health gate (``plan_shift``): a host that answered at the end of the last shift (the state
file's ``hosts.NAME.state``; every host when there is no state file), that belongs to a group which must be on after the shift,
and that does not answer is *unhealthy*. If the shift would power anything down while a host is
unhealthy, the shift is refused: the target becomes gear r (every group on), the sleeping hosts
are woken and nothing goes down. Unhealthy hosts themselves are never acted on, only reported.

Woken outside a shift: a host the state file has parked (asleep or off) that answers now and
belongs to a group that is on gets no power action but is put *back* in service (``back_hosts``;
the wake phase runs gear_member's back and the undrain hook on it, as after a wake): someone
woke it by hand, by its BMC or a stray magic packet, and it still runs with the park's runtime
sleep settings and out of service.

Pure standard library (runs inside a module on the controller, and in plain pytest).
"""

from __future__ import annotations

import calendar
import os
import time
from datetime import date as dt_date

from ansible.module_utils.fleetnap.fileio import UnsafeFileError, read_optional
from ansible.module_utils.fleetnap.gear import GearError, groups_for
from ansible.module_utils.fleetnap.parse import ParseError, boolean, loads

POWER_STATES = ("on", "asleep", "off", "unknown")
DOWN_METHODS = ("suspend", "soft", "off")
PARK_CHOICES = DOWN_METHODS + ("auto",)
UP_METHODS = ("wol", "ipmi", "redfish")
STATE_LIMIT = 16 * 1024 * 1024      # a state file of a few thousand hosts is well under 1 MB


class ShiftError(ValueError):
    """Input a gear shift cannot be planned from (the message names the host or value)."""


def observed_state(ssh_answering, bmc_power=None, parked_as=None):
    """Power state from the SSH probe and, when SSH is silent, the BMC's chassis power; when the
    BMC was not asked (``bmc_power`` None), the state file's ``parked_as`` (asleep or off)."""
    if ssh_answering:
        return "on"
    if bmc_power == "off":
        return "off"
    if bmc_power == "on":
        return "asleep"
    if bmc_power is None and parked_as in ("asleep", "off"):
        return parked_as
    return "unknown"


def observation_needs(groups, groups_on, recorded, read_power=False):
    """What a shift's first observation must ask of each host, so that it asks nothing the plan
    does not use. ``groups``: name -> the host's gear group (its inventory value); ``groups_on``:
    the groups the shift is to have on (the health gate only ever adds groups to them, so what is
    skipped here for them stays unneeded); ``recorded``: the state file's entries (read_states).

    Returns name -> {"bmc_read": "always" | "silent" | "never", "wake": bool, "parked_as": state
    or None}:

    - a host of a group the shift has on: an answering one stays on, its BMC is not asked
      (``silent``: only when it does not answer, to tell asleep from off); one the state file has
      parked is to be woken (``wake``: a short probe, a host woken by hand is seen on), and when
      parked asleep its BMC is not asked (``never``; ``parked_as`` asleep): the wave wakes it by
      its methods, and a BMC among them is asked then. One parked off keeps its BMC read (a wake
      that falls back to the BMC must know the chassis was off: the host may be booting);
    - a host of any other group (or whose group is not a gear group): its BMC is read at once
      (``always``): an answering host goes down, and the plan's BMC check needs its BMC to have
      answered; a parked one needs its chassis (asleep or off, and the second tier's power-off);
    - ``read_power``: every BMC is read (``always``), for its power reading.
    """
    on = set(int(g) for g in groups_on)
    out = {}
    for name, group in groups.items():
        parked = ((recorded or {}).get(name) or {}).get("state")
        parked = parked if parked in ("asleep", "off") else None
        group = _group(group)
        need = {"bmc_read": "always", "wake": False, "parked_as": None}
        if group in on:
            need["wake"] = parked is not None
            need["bmc_read"] = "never" if parked == "asleep" else "silent"
            need["parked_as"] = "asleep" if parked == "asleep" else None
        if read_power:
            need["bmc_read"] = "always"
            need["parked_as"] = None
        out[name] = need
    return out


def target_groups(replicas, gmin, gear=None, groups_on=None, day=None):
    """(gear, groups_on, groups_off): from ``gear`` and the rotation of ``day``, or given groups."""
    if (gear is None) == (groups_on is None):
        raise ShiftError("give exactly one of gear (a number) or groups_on (from gear_plan's 'now')")
    if replicas < 1:
        raise ShiftError("replicas must be >= 1, got %r" % replicas)
    if not 1 <= gmin <= replicas:
        raise ShiftError("gmin must be between 1 and replicas (%d), got %r" % (replicas, gmin))
    if gear is not None:
        if not gmin <= gear <= replicas:
            raise ShiftError("gear %r is outside [gmin %d, replicas %d]: a shift never goes below gmin "
                             "(every item keeps a powered copy) nor above r" % (gear, gmin, replicas))
        on, off = groups_for(gear, replicas, day or dt_date.today())
        return gear, on, off
    on = sorted(set(int(g) for g in groups_on))
    bad = [g for g in on if not 1 <= g <= replicas]
    if bad:
        raise ShiftError("groups_on %s: gear groups are numbered 1..%d" % (bad, replicas))
    if len(on) < gmin:
        raise ShiftError("groups_on %s is gear %d, below gmin %d" % (on, len(on), gmin))
    return len(on), on, [g for g in range(1, replicas + 1) if g not in on]


def _check_hosts(hosts, replicas):
    if not hosts:
        raise ShiftError("no hosts to shift: the target pattern matched nothing")
    seen = set()
    for name, h in sorted(hosts.items()):
        group = _group(h.get("group"))
        if group is None:
            raise ShiftError("host %s: gear group %r is not a whole number (set fleetnap_gear_group)"
                             % (name, h.get("group")))
        if not 1 <= group <= replicas:
            raise ShiftError("host %s: gear group %d is outside 1..%d (fleetnap_gear_group)" % (name, group, replicas))
        if h.get("state") not in POWER_STATES:
            raise ShiftError("host %s: observed state %r is not one of %s" % (name, h.get("state"), ", ".join(POWER_STATES)))
        method = h.get("down_method") or "auto"
        if method not in PARK_CHOICES:
            raise ShiftError("host %s: down method %r is not one of %s (fleetnap_down_method / gear_shift_down_method)"
                             % (name, method, ", ".join(PARK_CHOICES)))
        methods = h.get("up_methods") or []
        bad = [m for m in methods if m not in UP_METHODS] if isinstance(methods, list) else [methods]
        if not methods or bad or len(set(methods)) != len(methods):
            raise ShiftError("host %s: wake methods %r must be a non-empty list of %s, each once "
                             "(fleetnap_power_methods)" % (name, methods, ", ".join(UP_METHODS)))
        seen.add(group)
    empty = [g for g in range(1, replicas + 1) if g not in seen]
    if empty:
        raise ShiftError("gear group(s) %s have no host: every group 1..%d needs hosts, or a gear would "
                         "power nothing (check fleetnap_gear_group and the target pattern)" % (empty, replicas))


def check_host_records(hosts, replicas):
    """The host records as given (state or ssh/bmc, group, down_method, up_methods, the flags),
    checked as plan_shift checks them, without reading anything: callers check them before the
    state file and the S3 records are read. ShiftError naming the host and field."""
    _check_hosts(dict((name, _with_state(name, h)) for name, h in (hosts or {}).items()), replicas)


def _flag(h, key, name):
    """h[key] as a boolean: a real one or Ansible's words ("0", "no" are false), never the
    truthiness of a string; absent or null is false. ShiftError naming the host and field."""
    value = h.get(key) if isinstance(h, dict) else None
    if value is None:
        return False
    try:
        return boolean(value, "host %s: %s" % (name, key))
    except ParseError as e:
        raise ShiftError(str(e))


def _group(value):
    """A gear group as an int: an int (not a bool) or a string of digits; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 10:
        return int(value.strip())
    return None


def park_method(name, h, parked_since=None, now=None, park_off_after_s=None):
    """(method, why): how a drained host is parked. Parking is not napping: the host's in-service
    sleep policy (a latency profile) does not decide it; what its hardware was measured to do does.

    ``h``: down_method (suspend / soft / off set by the operator, or auto), bmc_configured, s3
    (the measurement record: {ok, cycles, worst_ms, at, msg} or None), up_methods. auto: soft-off by
    its BMC when Wake-on-LAN is not among its wake methods (a BMC's power-on does not wake a host
    from S3: the host is on); else S3 when S3 resume was measured to work; soft-off by the BMC when it was measured not to; without a measurement S3,
    checked on the host first (a host without S3 falls back to soft-off by its BMC).
    ``parked_since`` (epoch s, a host asleep by plan) and ``park_off_after_s``: the second tier,
    a host in S3 for longer than that is moved on to power-off by its BMC.
    """
    bmc = _flag(h, "bmc_configured", name)
    if parked_since is not None:
        hours = (now - parked_since) / 3600.0
        return "off", ("in S3 for %.1f h, longer than gear_shift_park_off_after_h %.4g h: moved on to power-off by its BMC"
                       % (hours, park_off_after_s / 3600.0))
    method = h.get("down_method") or "auto"
    if method != "auto":
        return method, "fleetnap_down_method / gear_shift_down_method is %s" % method
    methods = h.get("up_methods")
    if bmc and isinstance(methods, list) and methods and "wol" not in methods:
        return "soft", ("no Wake-on-LAN among its wake methods (%s): a BMC's power-on does not wake a host from S3; "
                        "soft-off by its BMC, which powers it on" % ", ".join(str(m) for m in methods))
    s3 = h.get("s3")
    if isinstance(s3, dict) and _flag(s3, "ok", "%s s3" % name):
        return "suspend", ("S3 resume measured working: %s cycle(s), worst %s ms (%s)"
                           % (s3.get("cycles", "?"), s3.get("worst_ms", "?"), s3.get("at", "?")))
    if isinstance(s3, dict) and bmc:
        return "soft", ("S3 resume measured failing (%s: %s): soft-off by its BMC"
                        % (s3.get("at", "?"), s3.get("msg") or "failed"))
    if isinstance(s3, dict):
        return "suspend", ("S3 resume measured failing (%s) and no BMC: S3 is tried, checked on the host first"
                           % s3.get("at", "?"))
    return "suspend", ("no S3 measurement (measure_resume.yml): S3, checked on the host first; %s"
                       % ("soft-off by its BMC if it has no S3" if bmc else "no BMC to fall back on"))


def parked_state(method):
    """The state a host parked by ``method`` is in: S3 (suspend, the default) is asleep, a BMC's
    soft or hard power-off is off. The one place this mapping lives (the plan's parked_states,
    gear_state's write-ahead marks)."""
    return "asleep" if (method or "suspend") == "suspend" else "off"


def _rows(hosts, groups_on, expected, unhealthy, parked=None, now=None, park_off_after_s=None):
    parked = parked or {}
    rows = []
    for name in sorted(hosts, key=_natural):
        h = hosts[name]
        group = int(h["group"])
        target = "on" if group in groups_on else "off"
        state = h["state"]
        method, why, back = "", "", False
        since = parked.get(name)
        tier2 = (park_off_after_s is not None and state == "asleep" and expected.get(name) == "off"
                 and since is not None and now - since > park_off_after_s and _flag(h, "bmc_configured", name))
        if name in unhealthy:
            action = "none"
            why = "should answer and does not: left alone, look at it"
        elif target == "on":
            action = "none" if state == "on" else "up"
            if action == "up":
                method = ",".join(h["up_methods"])
                why = "gear group %d is on in this gear" % group
            elif expected.get(name) == "off":
                back = True
                why = ("woken outside a shift (the state file has it parked): put back in service "
                       "(in-service sleep policy, health, undrain)")
        elif tier2:
            action = "down"
            method, why = park_method(name, h, since, now, park_off_after_s)
        else:
            action = "down" if state == "on" else "none"
            if action == "down":
                method, why = park_method(name, h)
        rows.append({"host": name, "group": group, "rack": h.get("rack") or "", "state": state,
                     "expected": expected.get(name, "on"), "target": target, "action": action,
                     "method": method, "why": why, "unhealthy": name in unhealthy, "back": back})
    return rows


def _with_state(name, h):
    """A host entry with ``state``; computed from ``ssh`` (bool) and ``bmc`` (chassis power) when absent."""
    if not isinstance(h, dict):
        raise ShiftError("host %s: expected a dict (group, rack, state or ssh/bmc, ...), got %r" % (name, h))
    for key in ("bmc_configured", "ssh"):
        _flag(h, key, name)         # refused early when it is not a boolean
    if h.get("state") is not None:
        return h
    if "ssh" not in h:
        raise ShiftError("host %s: give state, or ssh (did it answer?) and bmc (chassis power)" % name)
    out = dict(h)
    try:        # "0", "no", "false" are not an answer: never the truthiness of a string
        out["state"] = observed_state(boolean(h["ssh"], "host %s: ssh" % name), h.get("bmc"),
                                      h.get("parked_as") if h.get("bmc_read") is False else None)
    except ParseError as e:
        raise ShiftError(str(e))
    return out


def _natural(name):
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, name)


def plan_shift(hosts, replicas, gear, groups_on, expected=None, parked=None, now=None, park_off_after_s=None):
    """Per-host actions to reach ``groups_on``, with Sierra's health gate.

    ``hosts``: name -> {group, rack, state, down_method, up_methods, bmc_configured, s3}.
    ``expected``: name -> the state the last shift left the host in on purpose ("on"/"off");
    missing means "on". ``parked``: name -> epoch since when the state file has it asleep;
    with ``park_off_after_s``, such a host asleep longer than that is powered off (second tier).
    """
    hosts = dict((name, _with_state(name, h)) for name, h in (hosts or {}).items())
    _check_hosts(hosts, replicas)
    expected = dict(expected or {})
    groups_on = sorted(int(g) for g in groups_on)
    unhealthy = sorted((n for n, h in hosts.items()
                        if int(h["group"]) in groups_on and expected.get(n, "on") == "on" and h["state"] != "on"),
                       key=_natural)
    requested = {"gear": gear, "groups_on": groups_on,
                 "groups_off": [g for g in range(1, replicas + 1) if g not in groups_on]}
    tier = dict(parked=parked, now=now, park_off_after_s=park_off_after_s)
    rows = _rows(hosts, groups_on, expected, set(unhealthy), **tier)
    result, reason = "ok", ""
    if unhealthy and any(r["action"] == "down" for r in rows):
        result = "refused"
        reason = ("host(s) %s of gear group(s) that must stay active do not answer: not going lower; "
                  "waking every sleeping group instead (gear %d)"
                  % (", ".join(unhealthy), replicas))
        groups_on = list(range(1, replicas + 1))
        gear = replicas
        rows = _rows(hosts, groups_on, expected, set(unhealthy), **tier)
    elif unhealthy:
        result = "degraded"
        reason = "host(s) %s do not answer and are left alone (not woken): look at them" % ", ".join(unhealthy)
    groups_now = {}
    for name, h in hosts.items():
        groups_now.setdefault(int(h["group"]), []).append(h["state"] == "on")
    current_gear = sum(1 for v in groups_now.values() if all(v))
    counts = {"up": 0, "down": 0, "none": 0}
    for r in rows:
        counts[r["action"]] += 1
    return {
        "requested": requested,
        "gear": gear,
        "groups_on": groups_on,
        "groups_off": [g for g in range(1, replicas + 1) if g not in groups_on],
        "current_gear": current_gear,
        "direction": "down" if counts["down"] and not counts["up"] else
                     "up" if counts["up"] and not counts["down"] else
                     "mixed" if counts["up"] else "none",
        "result": result,
        "reason": reason,
        "unhealthy": unhealthy,
        "rows": rows,
        "counts": counts,
        "up_hosts": [r["host"] for r in rows if r["action"] == "up"],
        "down_hosts": [r["host"] for r in rows if r["action"] == "down"],
        # on already, but parked by an earlier shift and woken outside one: put back in service
        "back_hosts": [r["host"] for r in rows if r.get("back")],
        # the wake phase's result for each of them, as a wave's result reads (a host step may fail it)
        "back_actions": [{"host": r["host"], "action": "back", "ok": True, "state": "on",
                          "msg": "woken outside a shift: put back in service"} for r in rows if r.get("back")],
        # every host the wake phase acts on (woken, or put back in service), in the plan's order
        "wake_phase_hosts": [r["host"] for r in rows if r["action"] == "up" or r.get("back")],
        "down_methods": dict((r["host"], r["method"]) for r in rows if r["action"] == "down"),
        "parked_states": dict((r["host"], parked_state(r["method"])) for r in rows if r["action"] == "down"),
        # the hosts' power figures as given (fleetnap_power_w), for gear_energy to check and keep
        "power_w": dict((n, h["power_w"]) for n, h in hosts.items() if h.get("power_w") is not None),
    }


def batch_count(size, n, option="batch_size"):
    """How many of ``n`` hosts one batch takes for ``size``, a number (``"50"``) or a percentage of
    them (``"10%"``), as Ansible's ``serial`` counts it: a percentage rounds down and is at least
    one host, 0 (or a batch beyond ``n``) is every host. ShiftError naming ``option`` for anything
    that is not such a size."""
    text = str(size).strip()
    pct = text.endswith("%")
    digits = text[:-1] if pct else text
    if not digits.isdigit() or len(digits) > 6:
        raise ShiftError("option %s: must be a number of hosts or a percentage of them (50, 10%%), got %r"
                         % (option, size))
    k = (int(int(digits) / 100.0 * n) or 1) if pct else int(digits)
    return n if k <= 0 or k > n else k


def batches(names, size, option="batch_size"):
    """``names`` in order, cut in batches of batch_count(size) hosts (the last one may be smaller):
    what a play with ``serial: size`` over those hosts runs, batch by batch."""
    names = list(names)
    k = batch_count(size, len(names), option)
    return [names[i:i + k] for i in range(0, len(names), k)] if names else []


def plan_from(hosts, replicas, gmin, gear=None, groups_on=None, day=None, state_file=None, resume_dir=None,
              park_off_after_h=None, now=None):
    """What M(gear_shift_plan) returns: the plan for ``hosts`` (observed) to reach ``gear`` (with
    the day's rotation) or ``groups_on``, given the previous shift's state file and the S3 records
    of ``resume_dir``; with its table, its power-state rows and its date. gear_record uses it for
    "where every host is now" after a shift (the same decision over the second observation)."""
    now = time.time() if now is None else now
    gear, on, _off = target_groups(replicas, gmin, gear=gear, groups_on=groups_on, day=day)
    check_host_records(hosts, replicas)     # before the state file and the S3 records are read
    expected = read_expected(state_file)
    records = read_s3_records(resume_dir, list(hosts))
    hosts = dict((n, dict(h, s3=records[n]) if n in records and isinstance(h, dict) else h)
                 for n, h in hosts.items())
    tier = {}
    if park_off_after_h is not None:
        tier = dict(parked=read_parked(state_file), now=now, park_off_after_s=park_off_after_h * 3600.0)
    out = plan_shift(hosts, replicas, gear, on, expected, **tier)
    carry_since(out["rows"], read_states(state_file), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)))
    out["table"] = table(out["rows"])
    out["power_rows"] = power_state_rows(out["rows"])
    out["date"] = (day or dt_date.fromtimestamp(now)).isoformat()
    return out


def bmc_check(hosts, plan):
    """The BMCs a shift needs, checked before anything is powered down.

    ``hosts``: the observation (name -> bmc_configured, bmc: the chassis power read or None,
    bmc_error, bmc_endpoint "address:port"); ``plan``: plan_shift's result. A host going down
    whose BMC is configured must have answered (a BMC parks it, or takes over when it has no S3),
    and a host parked by its BMC (method soft or off) must have one. Returns ``ok``,
    ``unanswered`` and ``missing`` (host names, in the plan's order), ``reason`` (for the record)
    and ``msg`` (why the shift stops, naming each BMC and the fix).
    """
    unanswered = [n for n in plan["down_hosts"]
                  if _flag(hosts[n], "bmc_configured", n) and "bmc" in hosts[n] and hosts[n]["bmc"] is None]
    missing = [r["host"] for r in plan["rows"] if r["action"] == "down" and r["method"] in ("soft", "off")
               and not _flag(hosts[r["host"]], "bmc_configured", r["host"])]
    out = {"ok": not (unanswered or missing), "unanswered": unanswered, "missing": missing, "reason": "", "msg": ""}
    if out["ok"]:
        return out

    def said(n):
        if hosts[n].get("bmc_read") is False:   # an observation that skipped it (observation_needs, another gear)
            return "not asked by the observation"
        return hosts[n].get("bmc_error") or "no answer"

    why = ["%s: %s" % (n, said(n)) for n in unanswered]
    why += ["%s: no BMC configured for down method soft/off" % n for n in missing]
    out["reason"] = "BMC check failed before anything was powered down: " + "; ".join(why)
    parts = []
    if unanswered:
        silent = ["%s (%s: %s)" % (n, hosts[n].get("bmc_endpoint") or "?", said(n)) for n in unanswered]
        parts.append("the BMC of " + "; ".join(silent))
    if missing:
        parts.append("no BMC configured for %s (down method soft/off)" % ", ".join(missing))
    out["msg"] = ("gear shift stopped before powering anything down: %s. Fix the BMC (address, port, credentials, "
                  "network) or take the host out of the shift's targets (gear_shift_targets), then run again."
                  % "; ".join(parts))
    return out


def table(rows):
    """The plan as a fixed-width text table."""
    head = ("HOST", "GROUP", "RACK", "STATE", "EXPECTED", "TARGET", "ACTION", "METHOD", "WHY")
    lines = [head]
    for r in rows:
        action = "back" if r.get("back") else r["action"] + (" (unhealthy)" if r.get("unhealthy") else "")
        lines.append((r["host"], str(r["group"]), r["rack"], r["state"], r["expected"], r["target"], action,
                      r["method"] or "-", r.get("why") or "-"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def power_state_rows(rows):
    """One row per host and power state, value 1 for the host's state (a Prometheus enum)."""
    return [{"host": r["host"], "state": st, "value": 1 if r["state"] == st else 0}
            for r in rows for st in POWER_STATES]


def _state_hosts(path):
    """The state file's hosts object ({} when there is no file); ShiftError naming the file."""
    if not path:
        return {}
    try:
        data = read_optional(path, STATE_LIMIT, what="state file")
    except UnsafeFileError as e:
        raise ShiftError("state file %s is unreadable (%s): fix or remove it" % (path, e))
    except (OSError, IOError) as e:
        raise ShiftError("state file %s is unreadable (%s): fix or remove it; the next shift then "
                         "expects every host on" % (path, e.strerror or e))
    if data is None:
        return {}
    try:
        doc = loads(data, "state file %s" % path, limit=STATE_LIMIT)
    except ParseError as e:
        text = str(e)
        if " is not valid JSON" in text:
            text = text.replace(" is not valid JSON", " is unreadable (not valid JSON", 1) + ")"
        raise ShiftError("%s: fix or remove it; the next shift then expects every host on" % text)
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    if not isinstance(hosts, dict):
        raise ShiftError("state file %s has no 'hosts' object: fix or remove it" % path)
    for name, h in hosts.items():
        if not isinstance(h, dict):
            raise ShiftError("state file %s: hosts.%s must be an object with a state, got %r: fix or remove it"
                             % (path, name, h))
        state = h.get("state")
        if state is not None and state not in POWER_STATES:
            raise ShiftError("state file %s: hosts.%s.state %r is not one of %s: fix or remove it"
                             % (path, name, state, ", ".join(POWER_STATES)))
    return hosts


def read_expected(path):
    """name -> "on"/"off": whether each host answered at the end of the previous shift (its state file).

    A host that answered then and is silent now has failed; one that was asleep or off then is
    asleep on purpose (or after a failed wake, which the next shift simply tries again).
    {} when there is no state file (every host is expected on).
    """
    return dict((name, "on" if h["state"] == "on" else "off")
                for name, h in _state_hosts(path).items() if h.get("state") is not None)


def read_states(path):
    """name -> the state file's entry ({state, since, ...}); {} without a state file."""
    return _state_hosts(path)


def carry_since(rows, previous, now_text):
    """Every row's ``since``: kept from the state file while the host's state is unchanged, else
    ``now_text`` (the shift's record keeps it, so a later shift knows how long a host is parked)."""
    for r in rows:
        h = previous.get(r["host"]) or {}
        same = h.get("state") == r["state"] and isinstance(h.get("since"), str)
        r["since"] = h["since"] if same else now_text
        if same and r["state"] == "asleep" and h.get("resume_hook") is True:
            r["resume_hook"] = True     # still parked with gear_member's resume hook
    return rows


def failure_wins(results):
    """One result per host and action, in the order first seen; where a host has several (its
    wake, then what failed after it: verification, health, undrain), a failure wins and keeps
    the wave's details. The one place this rule lives: the state file's marks (gear_state) and
    the shift's record (gear_record) both read a host's outcome through it."""
    out, at = [], {}
    for a in results:
        key = (a["host"], a.get("action"))
        if key not in at:
            at[key] = len(out)
            out.append(a)
        elif a.get("ok") is not True or out[at[key]].get("ok") is True:
            out[at[key]] = dict(out[at[key]], **a) if a.get("ok") is not True else a
    return out


def read_parked(path):
    """name -> epoch seconds since when the state file has the host asleep (parked in S3)."""
    out = {}
    for name, h in _state_hosts(path).items():
        if h.get("state") == "asleep" and isinstance(h.get("since"), str):
            try:
                out[name] = calendar.timegm(time.strptime(h["since"], "%Y-%m-%dT%H:%M:%SZ"))
            except ValueError:
                raise ShiftError("state file %s: hosts.%s.since %r is not YYYY-MM-DDTHH:MM:SSZ: fix or remove it"
                                 % (path, name, h["since"]))
    return out


S3_RECORD_LIMIT = 1024 * 1024


def read_s3_records(resume_dir, names):
    """name -> the S3 measurement record measure_resume.yml left in RESUME_DIR/NAME/s3.json
    ({ok, cycles, worst_ms, at, msg}); hosts without one are left out. ShiftError names a file
    that is not such a record."""
    out = {}
    if not resume_dir:
        return out
    for name in names:
        if "/" in name or name in (".", ".."):
            continue
        path = os.path.join(resume_dir, name, "s3.json")
        try:
            data = read_optional(path, S3_RECORD_LIMIT, what="S3 record")
            doc = None if data is None else loads(data, "S3 record %s" % path, limit=S3_RECORD_LIMIT)
        except (OSError, IOError, ValueError) as e:
            raise ShiftError("S3 record %s is unreadable (%s): remove it or measure again (measure_resume.yml)"
                             % (path, e))
        if data is None:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("ok"), bool):
            raise ShiftError("S3 record %s is not an object with ok (true/false): remove it or measure again"
                             % path)
        out[name] = doc
    return out


__all__ = ["GearError", "ShiftError", "POWER_STATES", "DOWN_METHODS", "UP_METHODS", "observed_state",
           "observation_needs",
           "target_groups", "plan_shift", "park_method", "bmc_check", "table", "read_expected", "read_parked",
           "read_s3_records", "read_states", "carry_since",
           "power_state_rows"]
