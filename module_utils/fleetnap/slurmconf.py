# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm.conf's power-saving block from what fleetnap measured (issue 37).

Every gear shift appends a line to gear/history.jsonl (gearrecord.history_line); since this module
the line keeps what each park and wake of the shift took (``took``: host -> action, ok, method,
elapsed_s). From those lines, the hosts' gear groups and the lowest gear, ``block`` builds the
lines an operator includes in slurm.conf (``Include``): the three programs of role slurm_power,
``ResumeTimeout`` and ``SuspendTimeout`` from the worst measured wake and park (with the slurmd
start and the margin, both settings), ``SuspendExcNodes`` as a count (``hosts:N``): the gear shift
keeps gmin gear groups up, a different set each day (the daily rotation, gear.rotation_order), so
no host is exempt for good, but Slurm must never have fewer than the most hosts the gmin groups
hold up at once; ``ResumeRate``/``SuspendRate`` from the slowest measured shift (hosts per minute
fleetnap really parked or woke, its BMC throttle and batches included), and each host's
``Weight`` by gear group (Slurm fills the lowest weight first) as comments for the node lines.
Each value has a comment naming the measurement (host, shift) or the setting it came from; a value
nothing measured is the operator's setting, and the comment says so. Standard library only.
"""

from __future__ import annotations

import math

from ansible.module_utils.fleetnap import hostlist
from ansible.module_utils.fleetnap.energy import EnergyError, history_records, parse_time
from ansible.module_utils.fleetnap.gear import groups_for_offset

ACTIONS = ("up", "down")
MAX_S = 86400.0


class ConfError(ValueError):
    """A history line or a setting the block cannot be built from (the message names it)."""


def _took(value, at):
    """host -> {action, ok, method, elapsed_s}, checked; {} for a line written before ``took``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfError("%s: took must map hosts to what their park or wake took" % at)
    out = {}
    for host, t in value.items():
        where = "%s: took[%s]" % (at, host)
        if not isinstance(t, dict) or t.get("action") not in ACTIONS or not isinstance(t.get("ok"), bool):
            raise ConfError("%s: must have action (up or down) and ok (true or false)" % where)
        e = t.get("elapsed_s")
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or not 0 <= e <= MAX_S:
            raise ConfError("%s: elapsed_s must be seconds between 0 and %d, got %r" % (where, MAX_S, e))
        out[host] = {"action": t["action"], "ok": t["ok"], "method": str(t.get("method") or ""),
                     "elapsed_s": float(e)}
    return out


def read_shifts(lines, where="history"):
    """[{finished (ISO), epoch, duration_s, took}] oldest first, from history.jsonl lines (strict
    JSON per line, ``finished`` an ISO time in UTC within 2000-01-01 .. a year from now)."""
    out = []
    try:
        for at, rec in history_records(lines, where):
            out.append(_shift(at, rec))
    except EnergyError as exc:
        raise ConfError(str(exc))
    out.sort(key=lambda s: s["epoch"])
    return out


def _shift(at, rec):
    epoch = parse_time(rec.get("finished"), at + ": finished")
    d = rec.get("duration_s")
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or not 0 <= d <= MAX_S:
        raise ConfError("%s: duration_s must be seconds between 0 and %d, got %r" % (at, MAX_S, d))
    return {"finished": rec["finished"], "epoch": epoch, "duration_s": float(d), "took": _took(rec.get("took"), at)}


def measured(shifts, hosts):
    """What the shifts measured of ``hosts``: the worst verified wake and park (seconds, host,
    shift), the slowest shift's hosts per minute for each, and the hosts with no wake measured."""
    worst = {"up": None, "down": None}
    rate = {"up": None, "down": None}
    for s in shifts:
        done = {"up": 0, "down": 0}
        for host, t in sorted(s["took"].items()):
            if host not in hosts or not t["ok"]:
                continue
            done[t["action"]] += 1
            w = worst[t["action"]]
            if w is None or t["elapsed_s"] > w["seconds"]:
                worst[t["action"]] = {"seconds": t["elapsed_s"], "host": host, "shift": s["finished"],
                                      "method": t["method"]}
        for action, n in done.items():
            if n and s["duration_s"] > 0:
                per_min = n * 60.0 / s["duration_s"]
                r = rate[action]
                if r is None or per_min < r["per_min"]:
                    rate[action] = {"per_min": per_min, "hosts": n, "duration_s": s["duration_s"],
                                    "shift": s["finished"]}
    woken = set(h for s in shifts for h, t in s["took"].items() if t["action"] == "up" and t["ok"])
    return {"wake": worst["up"], "park": worst["down"], "resume_rate": rate["up"], "suspend_rate": rate["down"],
            "unmeasured": sorted((h for h in hosts if h not in woken), key=_natural), "shifts": len(shifts)}


def _natural(name):
    """lab2 before lab10."""
    head = name.rstrip("0123456789")
    return (head, int(name[len(head):]) if name[len(head):] else -1, name)


def _names(hosts):
    try:
        return hostlist.compress(sorted(hosts, key=_natural))
    except hostlist.HostlistError as exc:
        raise ConfError(str(exc))


def _seconds(value):
    return int(math.ceil(value - 1e-9))


def check_gmin(groups, gmin):
    """The number of gear groups (the highest group in ``groups``, host -> gear group 1..r); a
    ConfError when gmin keeps every one of them up. Needs nothing from the host: the module calls
    it before the history is read."""
    replicas = max(groups.values())
    if gmin >= replicas:
        raise ConfError("gmin %d keeps all %d gear groups up: nothing for Slurm to power down" % (gmin, replicas))
    return replicas


def block(groups, gmin, programs_dir, shifts, slurmd_start_s=30.0, margin=1.5,
          resume_timeout_s=600, suspend_timeout_s=300, source="history"):
    """(text, values) of the block for the hosts in ``groups`` (host -> gear group, 1..r). The
    shifts keep gmin groups up, rotated daily: every host may be parked on some day, so the
    timeouts come from every host, and SuspendExcNodes keeps a count of them up."""
    if not groups:
        raise ConfError("no hosts: the block needs the hosts and their gear groups")
    replicas = check_gmin(groups, gmin)
    size = dict((g, sum(1 for v in groups.values() if v == g)) for g in range(1, replicas + 1))
    keep = max(sum(size[g] for g in groups_for_offset(gmin, replicas, offset)[0]) for offset in range(replicas))
    m = measured(shifts, set(groups))
    lines = ["# fleetnap: Slurm power saving for %d hosts (at least %d kept up), from %d gear shift(s) in %s"
             % (len(groups), keep, m["shifts"], source),
             "SuspendProgram=%s/fleetnap-slurm-suspend" % programs_dir,
             "ResumeProgram=%s/fleetnap-slurm-resume" % programs_dir,
             "ResumeFailProgram=%s/fleetnap-slurm-resume-fail" % programs_dir]
    values = {}
    w = m["wake"]
    if w is not None:
        values["ResumeTimeout"] = _seconds((w["seconds"] + slurmd_start_s) * margin)
        lines.append("# ResumeTimeout: (worst measured wake %.1f s, %s by %s in the shift of %s, + slurmd start "
                     "%g s, a setting) x %g" % (w["seconds"], w["host"], w["method"] or "?", w["shift"],
                                                slurmd_start_s, margin))
    else:
        values["ResumeTimeout"] = _seconds(resume_timeout_s)
        lines.append("# ResumeTimeout: no wake measured yet: the setting (%g s)" % resume_timeout_s)
    if w is not None and m["unmeasured"]:
        lines.append("#   no wake measured for %s" % _names(m["unmeasured"]))
    lines.append("ResumeTimeout=%d" % values["ResumeTimeout"])
    p = m["park"]
    if p is not None:
        values["SuspendTimeout"] = _seconds(p["seconds"] * margin)
        lines.append("# SuspendTimeout: worst measured park %.1f s (%s by %s in the shift of %s) x %g"
                     % (p["seconds"], p["host"], p["method"] or "?", p["shift"], margin))
    else:
        values["SuspendTimeout"] = _seconds(suspend_timeout_s)
        lines.append("# SuspendTimeout: no park measured yet: the setting (%g s)" % suspend_timeout_s)
    lines.append("SuspendTimeout=%d" % values["SuspendTimeout"])
    for key, r in (("ResumeRate", m["resume_rate"]), ("SuspendRate", m["suspend_rate"])):
        if r is None:
            lines.append("# %s: not measured (no shift %s hosts yet): Slurm's default" %
                         (key, "woke" if key == "ResumeRate" else "parked"))
            continue
        values[key] = max(1, int(math.floor(r["per_min"])))
        lines.append("# %s: the slowest measured shift, %d host(s) in %.1f s (%s)"
                     % (key, r["hosts"], r["duration_s"], r["shift"]))
        lines.append("%s=%d" % (key, values[key]))
    if keep:
        values["SuspendExcNodes"] = "%s:%d" % (_names(groups), keep)
        lines.append("# SuspendExcNodes: the gear shift keeps %d of the %d gear groups up, a different set each day "
                     "(the daily rotation); Slurm keeps %d host(s) up, the most those groups hold on any day"
                     % (gmin, replicas, keep))
        lines.append("SuspendExcNodes=%s" % values["SuspendExcNodes"])
    else:
        lines.append("# SuspendExcNodes: none (gmin 0: the gear shift keeps no gear group up)")
    weights = {}
    for h, g in groups.items():
        weights.setdefault(g, []).append(h)
    values["Weight"] = dict((h, g) for h, g in groups.items())
    lines.append("# Weight by gear group (Slurm fills the lowest first): put it on each node's NodeName line")
    for g in sorted(weights):
        lines.append("#   Weight=%d: %s" % (g, _names(weights[g])))
    return "\n".join(lines) + "\n", dict(values, measured=m)
