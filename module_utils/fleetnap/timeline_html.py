# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One suspend/resume cycle as a self-contained HTML page.

Inline CSS and inline SVG only: no scripts, no external assets, so the page can be mailed,
archived or opened from a CI artifact as it is. Two panels, suspend and resume, each on its
own linear time axis (the machine phases, which can last seconds in s2idle, are clipped
when they would squash the rest, and say so). Phases are coloured bands, device callbacks
are bars in rows, critical-path bars are red, and every bar has a hover title. Below the
panels: the totals, the CPUs / noirq / devices breakdown, the slowest devices and the
recommendations. Standard library only.
"""

from __future__ import annotations

import html

from ansible.module_utils.fleetnap.dmesg import PHASES, SUSPEND_PHASES, RESUME_PHASES

PHASE_COLOURS = {
    "suspend_prepare": "#ccffcc", "suspend": "#88ff88", "suspend_late": "#5fd35f",
    "suspend_noirq": "#4fb0b0", "suspend_machine": "#7f9fff", "resume_machine": "#ff9f9f",
    "resume_noirq": "#ffbf66", "resume_early": "#ffdd66", "resume": "#ffff99",
    "resume_complete": "#ffffdd",
}
BAR = "#5a6b8c"
BAR_ASYNC = "#8aa0c8"
CRIT = "#d62728"
CPU_BAR = "#444444"

_W = 1340           # svg width
_LABEL = 210        # device-name column
_ROW = 15           # row height
_TOP = 34           # phase labels above the rows
_AXIS = 26          # time axis below the rows


def _e(text):
    return html.escape("" if text is None else str(text), quote=True)


def _ms(v):
    return "%.3f" % v if v < 10 else "%.1f" % v


def _panel(cyc, phases, title, max_rows, min_bar_ms):
    t0 = cyc.phase_start[phases[0]]
    t1 = cyc.phase_end[phases[-1]]
    machine = "suspend_machine" if phases[-1] == "suspend_machine" else "resume_machine"
    clip_note = ""
    m_len = cyc.phase_end[machine] - cyc.phase_start[machine]
    rest = (t1 - t0) - m_len
    if rest > 0 and m_len > 2 * rest:
        # a long machine phase (s2idle sleep time) would squash everything else
        keep = max(rest, 1e-3)
        if machine == "suspend_machine":
            t1 = cyc.phase_start[machine] + keep
        else:
            t0 = cyc.phase_end[machine] - keep
        clip_note = " (%s clipped: %s ms)" % (machine, _ms(m_len * 1000))
    span = max(t1 - t0, 1e-6)
    width = _W - _LABEL - 20

    def x(t):
        return _LABEL + (min(max(t, t0), t1) - t0) / span * width

    devs = [d for d in cyc.devices if d.phase in phases]
    cpus = [c for c in cyc.cpus if c.phase in phases]
    shown = [d for d in devs if d.critical or d.duration_ms >= min_bar_ms]
    if len(shown) > max_rows:
        crit = [d for d in shown if d.critical and d.duration_ms >= min_bar_ms]
        others = sorted((d for d in shown if d not in crit), key=lambda d: -d.duration_ms)
        shown = crit[:max_rows] + others[:max(0, max_rows - len(crit))]
    shown.sort(key=lambda d: (d.start, d.name))
    hidden = len(devs) - len(shown)
    rows = len(shown) + (1 if cpus else 0)
    height = _TOP + max(rows, 1) * _ROW + _AXIS
    out = ['<h2>%s <span class="dim">%s ms%s</span></h2>'
           % (_e(title), _ms((cyc.phase_end[phases[-1]] - cyc.phase_start[phases[0]]) * 1000),
              _e(clip_note)),
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'role="img" aria-label="%s timeline">' % (_W, height, _W, height, _e(title))]
    # phase bands
    for p in phases:
        a, b = x(cyc.phase_start[p]), x(cyc.phase_end[p])
        ms = (cyc.phase_end[p] - cyc.phase_start[p]) * 1000
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s ms'
                   '</title></rect>' % (a, _TOP - 14, max(b - a, 0.5), height - _TOP + 14 - _AXIS,
                                        PHASE_COLOURS[p], _e(p), _ms(ms)))
        if b - a > 40:
            out.append('<text x="%.1f" y="%d" class="ph">%s %s ms</text>'
                       % (a + 3, _TOP - 4, _e(p), _ms(ms)))
    row = 0
    if cpus:
        y = _TOP + row * _ROW
        out.append('<text x="%d" y="%d" class="lbl">CPUs (%d)</text>' % (_LABEL - 6, y + 11, len(cpus)))
        for c in cpus:
            a, b = x(c.start), x(c.end)
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#fff" '
                       'stroke-width="0.5"><title>CPU%d %s: %s ms (serial)</title></rect>'
                       % (a, y + 2, max(b - a, 1.0), _ROW - 4, CPU_BAR, c.cpu, _e(c.action),
                          _ms(c.duration_ms)))
        row += 1
    for d in shown:
        y = _TOP + row * _ROW
        a, b = x(d.start), x(d.end)
        colour = CRIT if d.critical else (BAR_ASYNC if d.async_ else BAR)
        label = d.name if len(d.name) <= 28 else d.name[:27] + "\u2026"
        out.append('<text x="%d" y="%d" class="lbl%s">%s</text>'
                   % (_LABEL - 6, y + 11, " crit" if d.critical else "", _e(label)))
        title = "%s%s | %s | %s ms | start %s ms | %s%s%s" % (
            d.name, " (%s)" % d.driver if d.driver else "", d.phase, _ms(d.duration_ms),
            _ms(cyc.rel_ms(d.start)), "async" if d.async_ else "sync",
            " | critical path" if d.critical else "",
            " | returned %d" % d.rc if d.rc else "")
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"%s><title>%s</title>'
                   '</rect>' % (a, y + 2, max(b - a, 1.0), _ROW - 4, colour,
                                ' class="critbar"' if d.critical else "", _e(title)))
        if b - a > 70:
            out.append('<text x="%.1f" y="%d" class="inbar">%s ms</text>'
                       % (a + 3, y + 11, _ms(d.duration_ms)))
        row += 1
    if not shown and not cpus:
        out.append('<text x="%d" y="%d" class="lbl">no device callbacks</text>'
                   % (_LABEL + 6, _TOP + 11))
    # axis
    ya = height - _AXIS + 4
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (_LABEL, ya, _W - 20, ya))
    for i in range(6):
        t = t0 + span * i / 5.0
        xx = x(t)
        anchor = ' style="text-anchor:end"' if i == 5 else ""
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>'
                   '<text x="%.1f" y="%d" class="ax"%s>%s ms</text>'
                   % (xx, ya, xx, ya + 4, xx, ya + 16, anchor, _ms(cyc.rel_ms(t))))
    out.append("</svg>")
    if hidden:
        out.append('<p class="dim">%d shorter callbacks (under %s ms, off the critical path) '
                   'are not drawn.</p>' % (hidden, _ms(min_bar_ms)))
    return "\n".join(out)


_CSS = """
body{font:14px/1.35 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:18px;
color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 4px}
.dim{color:#666;font-weight:normal;font-size:13px}
table{border-collapse:collapse;margin:6px 0 10px}td,th{border:1px solid #bbb;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#eee}td.n{text-align:right;
font-variant-numeric:tabular-nums}
.totals td{font-size:16px}svg .lbl.crit{fill:#d62728;font-weight:600}
svg text{font:11px system-ui,Helvetica,Arial,sans-serif}
svg .lbl{text-anchor:end;fill:#222}svg .ph{fill:#222;font-weight:600}
svg .ax{text-anchor:middle;fill:#333}svg .inbar{fill:#fff}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border:1px solid #999}
.warn{color:#8a4b00}
"""


def render(cyc, recommendations=(), host=None, top=10, max_rows=45, min_bar_ms=0.5):
    """The HTML page (a str) for one :class:`~dmesg.Cycle` and its recommendations."""
    bd = cyc.breakdown()
    title = "Suspend/resume timeline%s" % (" - %s" % host if host else "")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>%s</title>" % _e(title), "<style>%s</style></head><body>" % _CSS,
             "<h1>%s</h1>" % _e(title),
             '<p class="dim">cycle %d, mode %s, log lines %d-%d; times from the kernel log '
             '(pm_print_times), as sleepgraph defines them</p>'
             % (cyc.index, _e(cyc.mode or "unknown"), cyc.first_line, cyc.last_line),
             '<table class="totals"><tr><th>kernel suspend</th><td class="n">%s ms</td>'
             '<th>kernel resume</th><td class="n">%s ms</td></tr></table>'
             % (_ms(cyc.suspend_ms), _ms(cyc.resume_ms))]
    parts.append('<p class="legend">' + "".join(
        '<span style="background:%s">%s</span>' % (PHASE_COLOURS[p], _e(p)) for p in PHASES)
        + '<span style="background:%s;color:#fff">critical path</span>'
          '<span style="background:%s;color:#fff">sync</span>'
          '<span style="background:%s">async</span></p>' % (CRIT, BAR, BAR_ASYNC))
    parts.append(_panel(cyc, SUSPEND_PHASES, "Suspend", max_rows, min_bar_ms))
    parts.append(_panel(cyc, RESUME_PHASES, "Resume", max_rows, min_bar_ms))
    # summary tables
    parts.append("<h2>Breakdown</h2><table><tr><th></th><th>CPUs</th><th>noirq</th>"
                 "<th>devices</th></tr>")
    for side in ("suspend", "resume"):
        b = bd[side]
        cells = (side, _ms(b["cpus_ms"]), _ms(b["noirq_ms"]), _ms(b["devices_ms"]))
        parts.append('<tr><th>%s</th><td class="n">%s ms</td><td class="n">%s ms</td>'
                     '<td class="n">%s ms</td></tr>' % cells)
    parts.append("</table><h2>Phases</h2><table><tr>%s</tr><tr>%s</tr></table>" % (
        "".join("<th>%s</th>" % _e(p) for p in PHASES),
        "".join('<td class="n">%s</td>' % _ms(cyc.phase_ms(p)) for p in PHASES)))
    parts.append("<h2>Slowest devices</h2><table><tr><th>device</th><th>driver</th><th>phase</th>"
                 "<th>ms</th><th>critical path</th><th>async</th></tr>")
    for d in cyc.slowest(top):
        parts.append('<tr><td>%s</td><td>%s</td><td>%s</td><td class="n">%s</td><td>%s</td>'
                     '<td>%s</td></tr>' % (_e(d.name), _e(d.driver or ""), _e(d.phase),
                                           _ms(d.duration_ms), "yes" if d.critical else "",
                                           "yes" if d.async_ else ""))
    parts.append("</table><h2>Recommendations</h2>")
    if recommendations:
        parts.append("<table><tr><th>saving</th><th>device</th><th>category</th><th>advice</th>"
                     "</tr>")
        for r in recommendations:
            parts.append('<tr><td class="n">%s ms</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                         % (_ms(r["saving_ms"]), _e(r["device"]), _e(r["category"]),
                            _e(r["message"])))
        parts.append("</table><p class=\"dim\">Nothing has been applied.</p>")
    else:
        parts.append("<p>No device on the critical path has a known server-side fix.</p>")
    if cyc.warnings:
        parts.append("<h2>Warnings</h2><ul>%s</ul>" % "".join(
            '<li class="warn">%s</li>' % _e(w) for w in cyc.warnings))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
