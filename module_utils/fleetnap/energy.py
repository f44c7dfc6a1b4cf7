# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host-hours and energy a fleet did not spend, from its gear history, against staying on.

gear_shift.yml appends a line per shift to gear/history.jsonl with every host's power state at
its end (``power``: name -> on / asleep / off / unknown) and the time it ended (``finished``).
A host is taken to be in that state until the next shift's end (the state changes during the
shift; its minute is small against hours). Every UTC day gets its host-hours per state and,
for hosts with power figures (watts when on, asleep in S3, off: fleetnap_power_w in the
inventory, or a BMC's own reading), the energy not spent against staying on:
sum over time of (watts on - watts in the state).

Figures are per host (gear/power_w.json, kept by the gear_energy module). A host without them
counts in host-hours only, and is named. An ``unknown`` host (no answer, no BMC) saves nothing.
Standard library only.
"""

from __future__ import annotations

import calendar
import json
import math
import os
import time

from ansible.module_utils.fleetnap.validate import ParamError, read_text_file

STATES = ("on", "asleep", "off", "unknown")
FIGURE_KEYS = ("on", "asleep", "off")
MAX_WATTS = 100000.0


class EnergyError(ValueError):
    """A history line or a power figure that cannot be used (the message names it)."""


def parse_time(text, where):
    """Epoch seconds of an ISO time in UTC as gear_record writes it (Jinja's now(utc=true):
    no offset; or +00:00 or Z; optional fraction). Another offset is refused."""
    if not isinstance(text, str):
        raise EnergyError("%s: expected an ISO time, got %r" % (where, text))
    t = text.strip().replace("Z", "+00:00")
    if t.endswith("+00:00"):
        t = t[:-6]
    elif len(t) > 19 and t[19:20] in "+-" or "+" in t[10:]:
        raise EnergyError("%s: %r is not a UTC time (no offset, +00:00 or Z)" % (where, text))
    frac = 0.0
    if "." in t:
        t, f = t.split(".", 1)
        if not f.isdigit():
            raise EnergyError("%s: %r is not an ISO time" % (where, text))
        frac = float("0." + f)
    try:
        return calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%S")) + frac
    except ValueError:
        raise EnergyError("%s: %r is not an ISO time (YYYY-MM-DDTHH:MM:SS+00:00)" % (where, text))


def check_figures(figures, where="power figures"):
    """host -> {on, asleep, off} watts: finite, >= 0, at most MAX_WATTS, asleep/off <= on."""
    if not isinstance(figures, dict):
        raise EnergyError("%s: expected host -> {on, asleep, off} watts, got %s" % (where, type(figures).__name__))
    out = {}
    for host, f in figures.items():
        at = "%s: %s" % (where, host)
        if not isinstance(f, dict):
            raise EnergyError("%s: expected {on, asleep, off} watts, got %r" % (at, f))
        if any(isinstance(k, bool) for k in f):
            raise EnergyError('%s: a key is true or false: write "on" and "off" in quotes (YAML reads them '
                              "unquoted as booleans)" % at)
        extra = sorted(str(k) for k in set(f) - set(FIGURE_KEYS))
        if extra:
            raise EnergyError("%s: unknown key(s) %s (on, asleep, off)" % (at, ", ".join(extra)))
        row = {}
        for k in FIGURE_KEYS:
            v = f.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
                    not 0 <= v <= MAX_WATTS:
                raise EnergyError("%s.%s: must be watts, a number from 0 to %d, got %r" % (at, k, MAX_WATTS, v))
            row[k] = float(v)
        if row["asleep"] > row["on"] or row["off"] > row["on"]:
            raise EnergyError("%s: asleep (%g W) and off (%g W) cannot draw more than on (%g W)"
                              % (at, row["asleep"], row["off"], row["on"]))
        out[host] = row
    return out


def read_power_file(path):
    """The power figures kept in ``path`` (host -> {on, asleep, off}), {} when it does not exist;
    EnergyError/ParamError naming the file when it is not what gear_energy writes."""
    if not os.path.exists(path):
        return {}
    try:
        kept = json.loads(read_text_file(path, "power file"))
    except ValueError as exc:
        if isinstance(exc, ParamError):
            raise
        raise EnergyError("power file %s is not valid JSON: fix or remove it" % path)
    return check_figures(kept, "power file %s" % path)


def read_history(lines, where="history"):
    """[(epoch, {host: state})] sorted by time, from history.jsonl lines."""
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        at = "%s line %d" % (where, i)
        try:
            rec = json.loads(line)
        except ValueError:
            raise EnergyError("%s is not valid JSON" % at)
        if not isinstance(rec, dict):
            raise EnergyError("%s: expected a JSON object" % at)
        power = rec.get("power", {})
        if not isinstance(power, dict) or any(s not in STATES for s in power.values()):
            raise EnergyError("%s: power must map hosts to one of %s" % (at, ", ".join(STATES)))
        out.append((parse_time(rec.get("finished"), at + ": finished"), power))
    out.sort(key=lambda r: r[0])
    return out


def _day(epoch):
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def _split_days(start, end):
    """[(day, seconds)] of the interval [start, end) cut at UTC midnights."""
    out = []
    t = start
    while t < end:
        midnight = (math.floor(t / 86400.0) + 1) * 86400.0
        stop = min(end, midnight)
        out.append((_day(t), stop - t))
        t = stop
    return out


def daily(history, figures, until):
    """Per UTC day from the first shift to ``until`` (epoch): host-hours per state, host-hours
    parked (asleep + off), energy used and energy not spent against staying on (kWh, hosts with
    figures only). Returns {"days": [...], "total": {...}, "hosts_without_figures": [...]}."""
    days = {}
    without = set()
    for i, (t0, power) in enumerate(history):
        t1 = history[i + 1][0] if i + 1 < len(history) else until
        if t1 <= t0:
            continue
        for day, secs in _split_days(t0, t1):
            d = days.setdefault(day, {"day": day, "host_hours": dict.fromkeys(STATES, 0.0),
                                      "parked_host_hours": 0.0, "kwh_used": 0.0, "kwh_if_on": 0.0,
                                      "kwh_not_spent": 0.0})
            hours = secs / 3600.0
            for host, state in power.items():
                d["host_hours"][state] += hours
                if state in ("asleep", "off"):
                    d["parked_host_hours"] += hours
                f = figures.get(host)
                if f is None:
                    without.add(host)
                    continue
                if state == "unknown":
                    continue
                d["kwh_used"] += f[state] * hours / 1000.0
                d["kwh_if_on"] += f["on"] * hours / 1000.0
                d["kwh_not_spent"] += (f["on"] - f[state]) * hours / 1000.0
    rows = [days[k] for k in sorted(days)]
    for r in rows:
        r["host_hours"] = dict((k, round(v, 3)) for k, v in r["host_hours"].items())
        for k in ("parked_host_hours", "kwh_used", "kwh_if_on", "kwh_not_spent"):
            r[k] = round(r[k], 3)
    total = {"parked_host_hours": round(sum(r["parked_host_hours"] for r in rows), 3),
             "kwh_not_spent": round(sum(r["kwh_not_spent"] for r in rows), 3),
             "kwh_if_on": round(sum(r["kwh_if_on"] for r in rows), 3),
             "kwh_used": round(sum(r["kwh_used"] for r in rows), 3)}
    return {"days": rows, "total": total, "hosts_without_figures": sorted(without)}
