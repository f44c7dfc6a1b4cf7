# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report: one self-contained HTML page from what the playbooks left on the controller.

Inputs (all optional; a missing one is reported as "not measured yet" with the playbook to run):

- ``profile/decisions.json``   apply_profile.yml: per host, the gate's decision
- ``resume/summary.json``      measure_resume.yml: per host, kernel and end-to-end resume
- ``wake-latency/<host>.json`` measure_wake_latency.yml: per host and C-state, measured latency
- ``gear/state.json``, ``gear/history.jsonl``  gear_shift.yml: the gear now and its history
- ``gear/power_w.json``                        gear_shift.yml (gear_energy): hosts' power figures
"""

from __future__ import annotations

import glob
import html
import os
import time

from ansible.module_utils.fleetnap import fileio, parse
from ansible.module_utils.fleetnap.energy import (
    FIGURE_KEYS, EnergyError, check_figures, check_measured, daily, effective_figures, parse_time, read_history,
    read_text,
)
from ansible.module_utils.fleetnap.validate import ParamError, ShapeError, shape


class ReportError(ValueError):
    """An input file exists but cannot be read, or does not have the shape the report needs (the
    message names the file and the field)."""


ARTIFACT_LIMIT = fileio.LOG


_ROOT = {"artifacts": None}     # the artifacts directory gather() reads: no link may lead out of it


def _text(path):
    """The artifact's text through the file layer: a regular file under the artifacts directory
    (no link out of it, no FIFO or device), at most ARTIFACT_LIMIT bytes, strictly UTF-8."""
    try:
        text = read_text(path, "artifact", ARTIFACT_LIMIT, _ROOT["artifacts"])
    except ParamError as exc:
        raise ReportError("%s: rerun the playbook that writes it" % exc)
    if text is None:
        raise ReportError("cannot read %s: it is gone" % path)
    return text


def _loads(text, where):
    """One JSON document (parse.loads: bounded depth, no NaN, Infinity or lone surrogates)."""
    try:
        return parse.loads(text, where, ARTIFACT_LIMIT)
    except parse.ParseError as exc:
        words = str(exc)
        if "is not valid JSON" in words:
            words = "%s is not valid JSON (%s)" % (where, words.split("is not valid JSON: ", 1)[-1])
        raise ReportError("%s: rerun the playbook that writes it" % words)


def _load(path):
    return _loads(_text(path), path)


def _shape(doc, where, kind, optional=True):
    """doc checked to be of kind (None allowed when optional); ReportError naming where."""
    if doc is None and optional:
        return doc
    try:
        return shape(doc, where, kind)
    except ShapeError as exc:
        raise ReportError("%s: rerun the playbook that writes it" % exc)


def _object(doc, path):
    if not isinstance(doc, dict):
        raise ReportError("%s: expected a JSON object, got %s: rerun the playbook that writes it"
                          % (path, type(doc).__name__))
    return doc


def check_profile(doc, path):
    """decisions.json: {host: {budget_us, sleep, sleep_reason, states: [{name, allowed, reason}]}}."""
    for host, d in sorted(_object(doc, path).items()):
        if d is None:
            continue
        if not isinstance(d, dict):
            raise ReportError("%s: host %s: expected an object, got %r: rerun the playbook that writes it"
                              % (path, host, d))
        _shape(d.get("budget_us"), "%s: host %s: budget_us" % (path, host), "number")
        for i, state in enumerate(_shape(d.get("states"), "%s: host %s: states" % (path, host), "list") or []):
            _shape(state, "%s: host %s: states[%d]" % (path, host, i), "object", optional=False)
    return doc


RESUME_NUMBERS = ("resume_kernel_worst_ms", "resume_end_to_end_worst_ms", "cpus_ms", "noirq_ms", "devices_ms")


def check_resume(doc, path):
    """summary.json: {hosts: [{host, resume_*_ms, ..., worst_cycle, powernap: {advice}}], failed: [host]}."""
    _object(doc, path)
    for i, h in enumerate(_shape(doc.get("hosts"), "%s: hosts" % path, "list") or []):
        where = "%s: hosts[%d]" % (path, i)
        _shape(h, where, "object", optional=False)
        _shape(h.get("host"), where + ".host", "string", optional=False)
        for key in RESUME_NUMBERS:
            _shape(h.get(key), "%s.%s" % (where, key), "number")
        _shape(h.get("worst_cycle"), where + ".worst_cycle", "whole number")
        _shape(h.get("powernap"), where + ".powernap", "object")
    for i, host in enumerate(_shape(doc.get("failed"), "%s: failed" % path, "list") or []):
        _shape(host, "%s: failed[%d]" % (path, i), "string", optional=False)
    return doc


WAKE_NUMBERS = ("declared_us", "count", "median_us", "p99_us", "max_us", "max_occurrences")


def check_wake(doc, path):
    """wake-latency/HOST.json: {host, method, states: [{name, declared_us, count, median_us, ...}]}."""
    _object(doc, path)
    _shape(doc.get("host"), "%s: host" % path, "string")
    for i, state in enumerate(_shape(doc.get("states"), "%s: states" % path, "list") or []):
        where = "%s: states[%d]" % (path, i)
        _shape(state, where, "object", optional=False)
        for key in WAKE_NUMBERS:
            _shape(state.get(key), "%s.%s" % (where, key), "number")
    return doc


def check_gear_state(doc, path):
    """gear/state.json: {gear, target_gear, result, hosts: {name: {state, ...}}, groups_on, ...}."""
    _object(doc, path)
    for key in ("gear", "target_gear"):
        _shape(doc.get(key), "%s: %s" % (path, key), "whole number")
    for name, h in sorted((_shape(doc.get("hosts"), "%s: hosts" % path, "object") or {}).items()):
        _shape(h, "%s: hosts.%s" % (path, name), "object")
    return doc


def check_history_record(doc, where):
    """A line of gear/history.jsonl: {gear, started, finished, ...}."""
    if not isinstance(doc, dict):
        raise ReportError("%s: expected a JSON object, got %s: rerun the playbook that writes it"
                          % (where, type(doc).__name__))
    _shape(doc.get("gear"), "%s: gear" % where, "whole number")
    for key in ("started", "finished"):
        _shape(doc.get(key), "%s: %s" % (where, key), "string")
    return doc


def gather(artifacts, until=None):
    """Everything the report shows, as plain data (also returned by the module).

    Every artifact is read strictly (UTF-8, JSON) and its shape checked: one that is not what the
    playbook writing it writes fails the report with a ReportError naming the file and the field
    (a report built around it would show wrong numbers or none)."""
    data = {"profile": None, "resume": None, "wake_latency": {}, "gear": None, "gear_history": [], "energy": None}
    _ROOT["artifacts"] = artifacts
    # decisions.json, and decisions-NAME.json of other fleets (make demo: the simulated hosts)
    for path in sorted(glob.glob(os.path.join(artifacts, "profile", "decisions*.json"))):
        data["profile"] = dict(data["profile"] or {}, **check_profile(_load(path), path))
    path = os.path.join(artifacts, "resume", "summary.json")
    if os.path.lexists(path):
        data["resume"] = check_resume(_load(path), path)
    for path in sorted(glob.glob(os.path.join(artifacts, "wake-latency", "*.json"))):
        item = check_wake(_load(path), path)
        if "states" in item:
            data["wake_latency"][item.get("host") or os.path.basename(path)[:-5]] = item
    path = os.path.join(artifacts, "gear", "state.json")
    if os.path.lexists(path):
        data["gear"] = check_gear_state(_load(path), path)
    path = os.path.join(artifacts, "gear", "history.jsonl")
    if os.path.lexists(path):
        for lineno, line in enumerate(_text(path).splitlines(), 1):
            if line.strip():
                where = "%s line %d" % (path, lineno)
                record = _loads(line, where)
                data["gear_history"].append(check_history_record(record, where))
        data["energy"] = energy_of(path, os.path.join(artifacts, "gear", "power_w.json"), until,
                                   os.path.join(artifacts, "gear", "power_measured.json"))
    return data


def energy_of(history_path, power_path, until=None, measured_path=None):
    """Host-hours and energy not spent per day (module_utils/fleetnap/energy.py) with the watts
    measured by the BMCs where kept (measured_path) and the inventory's otherwise, and where each
    figure came from (``figure_sources``); or ReportError naming the file."""
    try:
        figures, measured = {}, {}
        if os.path.lexists(power_path):
            figures = check_figures(_load(power_path), power_path)
        if measured_path and os.path.lexists(measured_path):
            measured = check_measured(_load(measured_path), measured_path)
        history = read_history(_text(history_path).splitlines(), history_path)
    except EnergyError as exc:
        raise ReportError(str(exc))
    if not history:
        return None
    used, sources = effective_figures(figures, measured)
    return dict(daily(history, used, time.time() if until is None else until), figure_sources=sources,
                figures=used)


def _e(value):
    return html.escape("" if value is None else str(value))


def _num(value, fmt="%.1f"):
    try:
        return fmt % float(value)
    except (TypeError, ValueError):
        return "-"


def _missing(what, playbook):
    return '<p class="missing">%s: not measured yet (run <code>playbooks/%s</code>).</p>' % (_e(what), _e(playbook))


def _profile(decisions):
    if not decisions:
        return _missing("Latency profiles", "apply_profile.yml")
    rows = []
    without = []
    for host in sorted(decisions):
        d = decisions[host] or {}
        states = d.get("states") or []
        if not states:
            without.append(host)
        cells = " ".join('<span class="%s" title="%s">%s&nbsp;%s</span>' % (
            "ok" if s.get("allowed") else "no", _e(s.get("reason")), _e(s.get("name")),
            _e(_latency(s.get("effective_us")))) for s in states)
        rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            _e(host), _num(d["budget_us"], "%g") if d.get("budget_us") is not None else "none", cells or "(no cpuidle driver)",
            _e(d.get("sleep") or "unmanaged"), _e(d.get("sleep_reason"))))
    note = ""
    if without:
        note = ('<p class="missing">%d host(s) have no cpuidle driver (%s): no C-state to gate. The lab\'s QEMU '
                "guests run under TCG, which offers none; the simulated hosts of <code>make demo</code> present "
                "real machines' cpuidle (tests/data/cpuidle).</p>" % (len(without), _e(", ".join(without[:12]))))
    return ("<table><tr><th>host</th><th>budget (µs)</th><th>C-states with the exit latency that decided "
            "(green allowed, red disabled)</th><th>sleep</th><th>why</th></tr>%s</table>%s" % ("".join(rows), note))


def _latency(us):
    """A state's deciding exit latency (measured, else declared x margin), or '' when unknown."""
    if isinstance(us, bool) or not isinstance(us, (int, float)):
        return ""
    return "%g µs" % us


def _resume(summary):
    if not summary:
        return _missing("Suspend/resume", "measure_resume.yml")
    hosts = summary.get("hosts") or []
    top = max([float(h.get("resume_end_to_end_worst_ms") or 0) for h in hosts] + [1.0])
    rows = []
    for h in sorted(hosts, key=lambda x: x.get("host")):
        k, e2e = float(h.get("resume_kernel_worst_ms") or 0), float(h.get("resume_end_to_end_worst_ms") or 0)
        rows.append(
            '<tr><td><a href="resume/%s/cycle-%s.html">%s</a></td><td>%s</td><td>%s</td><td>%s / %s / %s</td>'
            '<td><span class="bar" style="width:%.0fpx"></span><br><span class="bar e2e" style="width:%.0fpx"></span></td>'
            "<td>%s</td></tr>" % (
                _e(h.get("host")), _e(h.get("worst_cycle", 1)), _e(h.get("host")), _num(k), _num(e2e, "%.0f"),
                _num(h.get("cpus_ms")), _num(h.get("noirq_ms")), _num(h.get("devices_ms")),
                240 * k / top, 240 * e2e / top, _e((h.get("powernap") or {}).get("advice", "-"))))
    failed = summary.get("failed") or []
    note = '<p class="no">failed: %s</p>' % _e(", ".join(failed)) if failed else ""
    return ("<table><tr><th>host</th><th>kernel resume, worst (ms)</th><th>end-to-end, worst (ms)</th>"
            "<th>CPUs / noirq / devices (ms)</th><th>kernel (blue) vs end-to-end (orange)</th>"
            "<th>PowerNap advice</th></tr>%s</table>%s" % ("".join(rows), note))


def _wake(per_host, decisions):
    if not per_host:
        return _missing("C-state wake latency", "measure_wake_latency.yml")
    out = []
    for host in sorted(per_host):
        item = per_host[host]
        budget = ((decisions or {}).get(host) or {}).get("budget_us")
        rows = []
        for s in item.get("states") or []:
            over = budget is not None and s.get("max_us") is not None and float(s["max_us"]) > float(budget)
            rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td%s>%s</td><td>%s</td></tr>" % (
                _e(s.get("name")), _e(s.get("declared_us")), _e(s.get("count")), _num(s.get("median_us")),
                _num(s.get("p99_us")), ' class="no"' if over else "", _num(s.get("max_us")),
                _e(s.get("max_occurrences"))))
        out.append("<h3>%s (%s%s)</h3><table><tr><th>state</th><th>declared (µs)</th><th>samples</th>"
                   "<th>median</th><th>p99</th><th>max</th><th>max seen</th></tr>%s</table>" % (
                       _e(host), _e(item.get("method")),
                       ", budget %s µs" % _num(budget, "%g") if budget is not None else "", "".join(rows)))
    return "".join(out)


def _gear(state, history):
    if not state and not history:
        return _missing("Gear shifts", "gear_shift.yml")
    out = []
    if state:
        hosts = state.get("hosts") or {}
        cells = " ".join('<span class="%s">%s</span>' % (
            "ok" if (h or {}).get("power") in ("on", "running") or (h or {}).get("state") == "on" else "no", _e(name))
            for name, h in sorted(hosts.items()))
        out.append("<p>gear <b>%s</b> (target %s), result <b>%s</b> %s, at %s. Groups on: %s; off: %s.</p><p>%s</p>" % (
            _e(state.get("gear")), _e(state.get("target_gear")), _e(state.get("result")), _e(state.get("reason")),
            _e(state.get("finished")), _e(state.get("groups_on")), _e(state.get("groups_off")), cells))
    if history:
        out.append(gear_chart(history[-500:]))
    return "".join(out)


def _epoch(text):
    try:
        return parse_time(text, "finished")
    except EnergyError:
        return None


def gear_chart(history, width=760, height=220):
    """An SVG of the gear history: the gear (steps, left axis) and the hosts on and parked after
    each shift (steps, right axis) against time (UTC, bottom axis), with axis labels, ticks and a
    legend. Shifts whose end time cannot be read are left out (and counted under the chart)."""
    points = []
    for h in history:
        t = _epoch(h.get("finished") or "")
        if t is None:
            continue
        power = h.get("power") if isinstance(h.get("power"), dict) else {}
        on = sum(1 for v in power.values() if v == "on")
        parked = sum(1 for v in power.values() if v in ("asleep", "off"))
        points.append((t, int(h.get("gear") or 0), on, parked))
    points.sort()
    skipped = len(history) - len(points)
    if not points:
        return '<p class="missing">no shift with a readable end time</p>'
    left, right, top, bottom = 56, 56, 14, 40
    pw, ph = width - left - right, height - top - bottom
    t0, t1 = points[0][0], max(points[-1][0], points[0][0] + 60)
    gmax = max([p[1] for p in points] + [1])
    hmax = max([p[2] + p[3] for p in points] + [1])

    def x(t):
        return left + (t - t0) / float(t1 - t0) * pw

    def y(v, vmax):
        return top + ph - v / float(vmax) * ph

    def steps(values, vmax):
        pts, last = [], None
        for (t, v) in values:
            if last is not None:
                pts.append("%.1f,%.1f" % (x(t), y(last, vmax)))
            pts.append("%.1f,%.1f" % (x(t), y(v, vmax)))
            last = v
        pts.append("%.1f,%.1f" % (left + pw, y(last, vmax)))
        return " ".join(pts)

    parts = ['<svg width="%d" height="%d" role="img" aria-label="gear history: gear and hosts on and parked over time" '
             'font-size="11" font-family="system-ui,sans-serif">' % (width, height)]
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (left, top, pw, ph))
    for g in range(0, gmax + 1):
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" '
                     'text-anchor="end" class="tick-gear">%d</text>'
                     % (left, left + pw, y(g, gmax), y(g, gmax), left - 6, y(g, gmax) + 4, g))
    for i in range(0, 5):
        v = hmax * i / 4.0
        parts.append('<text x="%d" y="%.1f" class="tick-hosts">%s</text>'
                     % (left + pw + 6, y(v, hmax) + 4, ("%d" % v) if v == int(v) else ("%.1f" % v)))
    ticks = 5 if t1 - t0 >= 300 else 2
    for i in range(ticks):
        t = t0 + (t1 - t0) * i / float(ticks - 1)
        parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/><text x="%.1f" y="%d" '
                     'text-anchor="middle" class="tick-time">%s</text>'
                     % (x(t), x(t), top + ph, top + ph + 4, x(t), top + ph + 16,
                        time.strftime("%m-%d %H:%M", time.gmtime(t))))
    parts.append('<text x="%d" y="%d" text-anchor="middle" class="axis-label">time (UTC)</text>'
                 % (left + pw // 2, height - 4))
    parts.append('<text transform="translate(14,%d) rotate(-90)" text-anchor="middle" class="axis-label">gear</text>'
                 % (top + ph // 2))
    parts.append('<text transform="translate(%d,%d) rotate(90)" text-anchor="middle" class="axis-label">hosts</text>'
                 % (width - 12, top + ph // 2))
    parts.append('<polyline points="%s" fill="none" stroke="#16a34a" stroke-width="1.5" class="series-on"/>'
                 % steps([(p[0], p[2]) for p in points], hmax))
    parts.append('<polyline points="%s" fill="none" stroke="#9ca3af" stroke-width="1.5" stroke-dasharray="4 3" '
                 'class="series-parked"/>' % steps([(p[0], p[3]) for p in points], hmax))
    parts.append('<polyline points="%s" fill="none" stroke="#2563eb" stroke-width="2.5" class="series-gear"/>'
                 % steps([(p[0], p[1]) for p in points], gmax))
    legend = (("#2563eb", "gear (left axis)"), ("#16a34a", "hosts on (right axis)"),
              ("#9ca3af", "hosts parked (right axis)"))
    for i, (colour, label) in enumerate(legend):
        lx = left + 8 + i * 190
        parts.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"/><text x="%d" y="%d" '
                     'class="legend">%s</text>' % (lx, lx + 18, top + 12, top + 12, colour, lx + 22, top + 16, label))
    parts.append("</svg>")
    note = '<p class="missing">%d shifts, from %s to %s (UTC)%s</p>' % (
        len(points), time.strftime("%Y-%m-%d %H:%M", time.gmtime(points[0][0])),
        time.strftime("%Y-%m-%d %H:%M", time.gmtime(points[-1][0])),
        "; %d without a readable end time left out" % skipped if skipped else "")
    return "".join(parts) + note


def _energy(energy):
    if not energy:
        return _missing("Energy", "gear_shift.yml")
    days = energy["days"][-31:]
    top = max([d["kwh_if_on"] for d in days] + [0.001])
    rows = "".join(
        "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s "
        '<span class="bar" style="width:%dpx"></span></td></tr>'
        % (_e(d["day"]), _num(d["host_hours"]["on"]), _num(d["parked_host_hours"]), _num(d["kwh_used"], "%.2f"),
           _num(d["kwh_if_on"], "%.2f"), _num(d["kwh_not_spent"], "%.2f"), int(200 * d["kwh_not_spent"] / top))
        for d in days)
    t = energy["total"]
    note = ""
    if energy["hosts_without_figures"]:
        note = ('<p class="missing">%d host(s) without power figures (fleetnap_power_w) count in host-hours only: %s</p>'
                % (len(energy["hosts_without_figures"]), _e(", ".join(energy["hosts_without_figures"][:20]))))
    return ("<table><tr><th>day (UTC)</th><th>host-hours on</th><th>host-hours parked</th><th>kWh used</th>"
            "<th>kWh if always on</th><th>kWh not spent</th></tr>%s</table>"
            "<p>In all: <b>%s</b> host-hours parked, <b>%s kWh</b> not spent of %s kWh staying on.</p>%s%s"
            % (rows, _num(t["parked_host_hours"]), _num(t["kwh_not_spent"], "%.2f"), _num(t["kwh_if_on"], "%.2f"), note,
               _figures(energy)))


def _figures(energy):
    """The watts per host and state the figures used, and where each came from (measured by the
    host's BMC, or the inventory's fleetnap_power_w)."""
    sources = energy.get("figure_sources") or {}
    if not sources:
        return ""
    used = energy.get("figures") or {}
    rows = []
    for host in sorted(sources)[:200]:
        cells = []
        for state in FIGURE_KEYS:
            src = sources[host].get(state, "none")
            watts = used.get(host, {}).get(state)
            cells.append("<td>%s <span class=\"missing\">%s</span></td>"
                         % ("-" if watts is None else _num(watts, "%.1f W"), _e(src)))
        rows.append("<tr><td>%s</td>%s</tr>" % (_e(host), "".join(cells)))
    measured = sum(1 for h in sources.values() for v in h.values() if v.startswith("measured"))
    return ("<h3>Watts used per host and state</h3><p>%d of %d figures measured by the hosts' BMCs "
            "(gear_shift_read_power); the rest from the inventory (fleetnap_power_w).</p>"
            "<table><tr><th>host</th><th>on</th><th>asleep</th><th>off</th></tr>%s</table>"
            % (measured, 3 * len(sources), "".join(rows)))


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin-bottom:1em}th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}
th{background:#f3f3f3}.ok{background:#dcfce7;padding:1px 5px;border-radius:3px}
.no{background:#fee2e2;padding:1px 5px;border-radius:3px}.missing{color:#666}
.bar{display:inline-block;height:10px;background:#3b82f6}.e2e{background:#f59e0b}"""


def render(data, title="fleetnap fleet report"):
    """The page depends only on the data, so an unchanged fleet gives an unchanged report."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>"
            "<body><h1>%s</h1>"
            "<h2>Latency profiles</h2>%s<h2>Suspend/resume</h2>%s<h2>C-state wake latency</h2>%s"
            "<h2>Gear</h2>%s<h2>Energy not spent</h2>%s</body></html>\n" % (
                _e(title), CSS, _e(title), _profile(data["profile"]), _resume(data["resume"]),
                _wake(data["wake_latency"], data["profile"]), _gear(data["gear"], data["gear_history"]),
                _energy(data.get("energy"))))
