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
import math
import os
import stat
import time

from ansible.module_utils.fleetnap import fileio, parse
from ansible.module_utils.fleetnap.validate import ParamError

STATES = ("on", "asleep", "off", "unknown")
FIGURE_KEYS = ("on", "asleep", "off")
MAX_WATTS = 100000.0


class EnergyError(ValueError):
    """A history line or a power figure that cannot be used (the message names it)."""


def parse_time(text, where):
    """Epoch seconds of an ISO time in UTC as gear_record writes it (Jinja's now(utc=true):
    no offset; or +00:00 or Z; optional fraction). Another offset is refused."""
    if not isinstance(text, str) or not text.isascii() or len(text) > 64:
        raise EnergyError("%s: expected an ISO time in ASCII digits, got %s" % (where, repr(text)[:80]))
    t = text.strip().replace("Z", "+00:00")
    if t.endswith("+00:00"):
        t = t[:-6]
    elif len(t) > 19 and t[19:20] in "+-" or "+" in t[10:]:
        raise EnergyError("%s: %r is not a UTC time (no offset, +00:00 or Z)" % (where, text))
    frac = 0.0
    if "." in t:
        t, f = t.split(".", 1)
        if not (f.isascii() and f.isdigit()) or len(f) > 9:
            raise EnergyError("%s: %r is not an ISO time" % (where, text))
        frac = float("0." + f)
    try:
        epoch = calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%S")) + frac
    except (ValueError, OverflowError):
        raise EnergyError("%s: %r is not an ISO time (YYYY-MM-DDTHH:MM:SS+00:00)" % (where, text))
    try:
        return parse.in_date_window(epoch, where)
    except parse.ParseError as exc:
        raise EnergyError(str(exc))


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


def read_text(path, what, limit=fileio.LOG, root=None):
    """The text of a record file (history, power figures, an artifact) through the file layer: a
    regular file in its own directory (no link out of it, no FIFO or device), at most ``limit``
    bytes (a larger one refused from its size, before any byte is read) of UTF-8; None when it does
    not exist; ParamError naming the file otherwise. ``root``: the tree no link may lead out of
    (default the file's own directory)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise ParamError("%s %s is larger than %d MiB, the most fleetnap reads of such a file (%d bytes): "
                         "not a file fleetnap wrote" % (what, path, limit // (1024 * 1024), st.st_size))
    try:
        data = fileio.read_optional(path, limit, root=root or os.path.dirname(path) or "/", what=what)
        return None if data is None else fileio.decode(data, path, what)
    except fileio.UnsafeFileError as exc:
        raise ParamError(str(exc))
    except OSError as exc:
        raise ParamError("cannot read %s %s: %s" % (what, path, exc.strerror or exc))


def _read_kept(path, what, check):
    """check(the JSON kept in ``path``, where) or {} when it does not exist; EnergyError or
    ParamError naming the file when it is not what fleetnap writes there."""
    text = read_text(path, what, fileio.RECORD)
    if text is None:
        return {}
    try:
        kept = parse.loads(text, "%s %s" % (what, path), fileio.RECORD)
    except parse.ParseError as exc:
        raise EnergyError("%s: fix or remove it" % exc)
    return check(kept, "%s %s" % (what, path))


def read_power_file(path):
    """The power figures kept in ``path`` (host -> {on, asleep, off}), {} when it does not exist."""
    return _read_kept(path, "power file", check_figures)


MAX_LINE = 1024 * 1024          # one shift's line: every host's state, a million bytes is beyond any fleet


def history_records(lines, where="history"):
    """(where and line number, the line's JSON object) for each line of history.jsonl that is not
    empty: strict JSON (parse.loads), at most MAX_LINE bytes; EnergyError naming the line otherwise."""
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        at = "%s line %d" % (where, i)
        if len(line) > MAX_LINE:
            raise EnergyError("%s is longer than %d bytes: not a line gear_record writes" % (at, MAX_LINE))
        try:
            rec = parse.loads(line, at, MAX_LINE)
        except parse.ParseError as exc:
            raise EnergyError(str(exc) if "not valid JSON" not in str(exc) else "%s is not valid JSON" % at)
        if not isinstance(rec, dict):
            raise EnergyError("%s: expected a JSON object" % at)
        yield at, rec


def read_history(lines, where="history"):
    """[(epoch, {host: state})] sorted by time, from history.jsonl lines. Every line strict JSON
    (parse.loads), its ``finished`` an ISO time in UTC within 2000-01-01 .. a year from now."""
    out = []
    for at, rec in history_records(lines, where):
        power = rec.get("power", {})
        if not isinstance(power, dict) or any(not isinstance(s, str) or s not in STATES for s in power.values()):
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


def _rates(power, figures, without):
    """Per hour of one interval: host-hours per state, parked host-hours and kW used, if on and
    not spent (hosts with figures). Computed once per history line, so the walk over the days
    costs nothing per host."""
    per_state = dict.fromkeys(STATES, 0.0)
    parked = used = if_on = not_spent = 0.0
    for host, state in power.items():
        per_state[state] += 1.0
        if state in ("asleep", "off"):
            parked += 1.0
        f = figures.get(host)
        if f is None:
            without.add(host)
            continue
        if state == "unknown":
            continue
        used += f[state] / 1000.0
        if_on += f["on"] / 1000.0
        not_spent += (f["on"] - f[state]) / 1000.0
    return per_state, parked, used, if_on, not_spent


def daily(history, figures, until):
    """Per UTC day from the first shift to ``until`` (epoch): host-hours per state, host-hours
    parked (asleep + off), energy used and energy not spent against staying on (kWh, hosts with
    figures only). Returns {"days": [...], "total": {...}, "hosts_without_figures": [...]}.

    The work is one pass over each line's hosts plus one step per day the history covers; the
    dates are bounded when read (2000-01-01 .. a year from now) and ``until`` by the callers'
    checks, so no line can make the walk over days unbounded."""
    days = {}
    without = set()
    for i, (t0, power) in enumerate(history):
        t1 = history[i + 1][0] if i + 1 < len(history) else until
        if t1 <= t0:
            continue
        per_state, parked, used, if_on, not_spent = _rates(power, figures, without)
        for day, secs in _split_days(t0, t1):
            d = days.setdefault(day, {"day": day, "host_hours": dict.fromkeys(STATES, 0.0),
                                      "parked_host_hours": 0.0, "kwh_used": 0.0, "kwh_if_on": 0.0,
                                      "kwh_not_spent": 0.0})
            hours = secs / 3600.0
            for state, count in per_state.items():
                d["host_hours"][state] += count * hours
            d["parked_host_hours"] += parked * hours
            d["kwh_used"] += used * hours
            d["kwh_if_on"] += if_on * hours
            d["kwh_not_spent"] += not_spent * hours
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


# --- measured watts: what the BMCs read, per host and state (issue 34) -----------------------------
#
# gear/power_measured.json keeps, per host and power state, the last READINGS watts its BMC
# measured in that state (gear_observe read_power: DCMI or Redfish), the date of the newest and
# its source; the baseline is their median. Where a host has one, it is used instead of the
# inventory's figure for that state (fleetnap_power_w stays the fallback), and every figure says
# where it came from.

READINGS = 5
MEASURED_SOURCES = ("dcmi", "EnvironmentMetrics", "Power", "PowerSubsystem")
MAX_HOSTS = 100000


def _median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def check_measured(doc, where):
    """The measured file's content: host -> state (on, asleep, off) -> {watts (median), readings
    (1..READINGS finite watts), date (ISO UTC), source}. EnergyError naming the entry otherwise."""
    if not isinstance(doc, dict) or len(doc) > MAX_HOSTS:
        raise EnergyError("%s: expected host -> state -> reading, got %s" % (where, type(doc).__name__))
    out = {}
    for host, states in doc.items():
        at = "%s: %s" % (where, host)
        if not isinstance(states, dict) or set(states) - set(FIGURE_KEYS):
            raise EnergyError("%s: expected on / asleep / off readings, got %r" % (at, sorted(states)[:5]
                                                                                   if isinstance(states, dict) else states))
        row = {}
        for state, m in states.items():
            here = "%s.%s" % (at, state)
            if not isinstance(m, dict) or set(m) != {"watts", "readings", "date", "source"}:
                raise EnergyError("%s: expected watts, readings, date and source" % here)
            readings = m["readings"]
            if not isinstance(readings, list) or not 1 <= len(readings) <= READINGS or any(
                    isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r)
                    or not 0 <= r <= MAX_WATTS for r in readings):
                raise EnergyError("%s.readings: 1 to %d watts from 0 to %d" % (here, READINGS, MAX_WATTS))
            if m["source"] not in MEASURED_SOURCES:
                raise EnergyError("%s.source: one of %s, got %r" % (here, ", ".join(MEASURED_SOURCES), m["source"]))
            parse_time(m["date"], here + ".date")
            row[state] = {"watts": _median(readings), "readings": [float(r) for r in readings],
                          "date": m["date"], "source": m["source"]}
        out[host] = row
    return out


def read_measured_file(path):
    """The measured watts kept in ``path`` ({} when it does not exist)."""
    return _read_kept(path, "measured power file", check_measured)


def add_readings(measured, readings, date):
    """``measured`` with ``readings`` ({(host, state): (watts, source)}; states other than on,
    asleep and off are left out) added: each host and state keeps its last READINGS watts, the
    newest's date and source. A new dict."""
    out = dict((h, dict(s)) for h, s in measured.items())
    for (host, state), (watts, source) in sorted(readings.items()):
        if state not in FIGURE_KEYS or watts is None:
            continue
        if isinstance(watts, bool) or not isinstance(watts, (int, float)) or not math.isfinite(watts) \
                or not 0 <= watts <= MAX_WATTS or source not in MEASURED_SOURCES:
            raise EnergyError("%s: a reading of %r W (%s) from %r cannot be kept: watts from 0 to %d from one of %s"
                              % (host, watts, state, source, MAX_WATTS, ", ".join(MEASURED_SOURCES)))
        old = out.get(host, {}).get(state, {}).get("readings", [])
        kept = (list(old) + [float(watts)])[-READINGS:]
        out.setdefault(host, {})[state] = {"watts": _median(kept), "readings": kept, "date": date, "source": source}
    return out


def effective_figures(inventory, measured):
    """The figures the energy is computed with and where each came from.

    Returns (figures, sources): figures host -> {on, asleep, off} for every host whose three
    states each have a measured baseline or an inventory figure (measured first); sources host ->
    state -> "measured (SOURCE, DATE)" or "inventory" (and "none" for a state with neither, whose
    host then counts in host-hours only)."""
    figures, sources = {}, {}
    for host in sorted(set(inventory) | set(measured)):
        inv, mea = inventory.get(host) or {}, measured.get(host) or {}
        row, src = {}, {}
        for state in FIGURE_KEYS:
            if state in mea:
                row[state] = mea[state]["watts"]
                src[state] = "measured (%s, %s)" % (mea[state]["source"], mea[state]["date"][:10])
            elif state in inv:
                row[state] = inv[state]
                src[state] = "inventory"
            else:
                src[state] = "none"
        sources[host] = src
        if len(row) == len(FIGURE_KEYS):
            figures[host] = row
    return figures, sources
