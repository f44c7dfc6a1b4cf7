# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PowerNap vs DVFS: the analytic model of the S3 study's section V (after Meisner et al., 2009).

Standard library only. Time in seconds, power as a fraction of the server's peak power, and
utilisation as the busy fraction rho in [0, 1) of a server without power management.

Performance: an M/G/1 queue whose first request after an idle period waits for the server to
come back ("exceptional first service", Welch 1964). After the last request the server suspends
(``suspend_s``); a request that arrives during the suspend waits for the rest of it and then for
the resume (``resume_s``), as BigHouse's PowerNapServer does. The extra delay I of the first
request is therefore ``resume_s + max(suspend_s - A, 0)`` with A ~ Exp(lambda) the time from the
end of the busy period to that request, and the mean response time is

    E[T] = E[S] + lambda E[S^2] / (2 (1 - rho)) + (2 E[I] + lambda E[I^2]) / (2 (1 + lambda E[I]))

(with suspend_s = 0 this is Welch's result for a deterministic setup time T:
(2T + lambda T^2) / (2 (1 + lambda T))). The tests check it against a discrete-event simulation.

Power: the time-weighted mix of busy (peak), transition (``transition_power_fraction`` of peak,
peak by default) and sleep power. Per idle period the server spends suspend_s + resume_s in
transition and max(A - suspend_s, 0) asleep; the fractions of time are

    busy rho, transition (suspend_s + resume_s) lambda (1 - rho) / D, sleep e^(-lambda suspend_s) (1 - rho) / D,
    D = 1 + lambda E[I].

No power management: busy at peak, idle at ``idle_power_fraction``: P0 = idle + (1 - idle) rho.

DVFS: the frequency f (relative to nominal) is lowered so the server stays busy longer, down to
``dvfs_min_frequency`` and no further than a stretched utilisation rho / f of
``dvfs_target_utilization``: f = clamp(rho / target, f_min, 1). Service times stretch by 1/f
(CPU-bound work). Only the CPU's share ``cpu_power_fraction`` of the power scales, as
f^``dvfs_power_exponent`` (P ~ f V^2 with V ~ f gives 3); the rest keeps drawing what it draws
without power management:

    P_dvfs = (1 - c) P0(rho) + c f^k P0(rho / f)

See docs/powernap.md for the sources of every default and the reproduction of the study.
"""

from __future__ import annotations

import math

try:
    from ansible.module_utils.fleetnap import parse
    from ansible.module_utils.fleetnap.powernapconf import DEFAULTS
except ImportError:     # docs/gen_powernap_table.py imports this file as fleetnap.powernap
    from fleetnap import parse  # type: ignore
    from fleetnap.powernapconf import DEFAULTS  # type: ignore


def escape(text):
    """&, < and > as XML entities (what xml.sax.saxutils.escape does, without importing xml.sax and
    urllib.request on every host that runs fleetnap_profile: 60 ms of Python start)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The transition latencies of the seed's Figures 7 and 8.
SEED_LATENCIES_S = (0.01, 0.05, 0.1, 0.65)
# What the seed reports as the highest utilisation at which PowerNap still draws less than DVFS.
SEED_CROSSOVERS = {0.01: 0.45, 0.05: 0.35, 0.1: None, 0.65: 0.04}

_GRID = 2000  # crossover scan: 0.05 % steps of utilisation, then bisection


class PowerNapError(ValueError):
    """Bad input for the model; the message names the value and the fix."""


MIN_FREQUENCY = 0.01


def _num(name, value):
    # Text through parse.parse_number (ASCII digits only: float() reads '٠.٥' as 0.5); a number
    # through parse.finite (a 400-digit int refused before float() overflows).
    try:
        if isinstance(value, str):
            if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
                raise PowerNapError("%s must be a finite number, got %r" % (name, value))
            v = float(parse.parse_number(value, name))
        elif isinstance(value, bool):
            raise PowerNapError("%s must be a number, got %r" % (name, value))
        else:
            v = float(parse.finite(value, name) if isinstance(value, int) else value)
    except PowerNapError:
        raise
    except parse.ParseError as e:
        raise PowerNapError("%s must be a number: %s" % (name, e))
    except (TypeError, ValueError, OverflowError):
        raise PowerNapError("%s must be a number, got %r" % (name, value))
    if math.isnan(v) or math.isinf(v):
        raise PowerNapError("%s must be a finite number, got %r" % (name, value))
    return v


class Model(object):
    """Validated model parameters (everything except utilisation and transition latency)."""

    FIELDS = tuple(sorted(DEFAULTS))

    def __init__(self, **kw):
        unknown = set(kw) - set(DEFAULTS)
        if unknown:
            raise PowerNapError("unknown model parameter(s): %s" % ", ".join(sorted(unknown)))
        for k in self.FIELDS:
            v = kw.get(k)
            setattr(self, k, _num(k, DEFAULTS[k] if v is None else v))
        self._validate()

    def _validate(self):
        if self.service_time_s <= 0:
            raise PowerNapError("service_time_s must be > 0 seconds (the mean time one request keeps "
                                "the server busy), got %r" % self.service_time_s)
        if self.service_time_cv < 0:
            raise PowerNapError("service_time_cv must be >= 0 (0 = constant, 1 = exponential), got %r"
                                % self.service_time_cv)
        for k in ("idle_power_fraction", "sleep_power_fraction", "cpu_power_fraction"):
            v = getattr(self, k)
            if not 0 <= v <= 1:
                raise PowerNapError("%s must be a fraction of peak power in [0, 1], got %r (write 0.6 "
                                    "for 60 %%)" % (k, v))
        if self.sleep_power_fraction > self.idle_power_fraction:
            raise PowerNapError("sleep_power_fraction %r is above idle_power_fraction %r: a sleeping "
                                "server draws less than an idle one (S3: 0.04-0.06, idle: 0.6)"
                                % (self.sleep_power_fraction, self.idle_power_fraction))
        if self.transition_power_fraction < 0:
            raise PowerNapError("transition_power_fraction must be >= 0, got %r"
                                % self.transition_power_fraction)
        # A tiny f_min stretched service times past any float at zero utilisation (0.1 s / 1e-200,
        # squared: a division by zero); no processor scales its frequency by more than 100x.
        if not MIN_FREQUENCY <= self.dvfs_min_frequency <= 1:
            raise PowerNapError("dvfs_min_frequency must be in [%g, 1] (lowest frequency / nominal, "
                                "0.5 for a 2x range; no processor has a range of more than 100x), got %r"
                                % (MIN_FREQUENCY, self.dvfs_min_frequency))
        if not 0 < self.dvfs_target_utilization < 1:
            raise PowerNapError("dvfs_target_utilization must be in (0, 1), got %r"
                                % self.dvfs_target_utilization)
        if self.dvfs_power_exponent < 1:
            raise PowerNapError("dvfs_power_exponent must be >= 1 (3 = cubic), got %r"
                                % self.dvfs_power_exponent)

    def as_dict(self):
        return dict((k, getattr(self, k)) for k in self.FIELDS)

    @property
    def second_moment(self):
        s = self.service_time_s
        return s * s * (1.0 + self.service_time_cv ** 2)


def check_utilization(rho, name="utilization"):
    v = _num(name, rho)
    if not 0 <= v < 1:
        hint = " (a percentage? give the busy fraction, e.g. 0.45 for 45 %%)" if 1 < v <= 100 else ""
        raise PowerNapError("%s %r is outside [0, 1): the model needs a stable queue%s" % (name, rho, hint))
    return v


def check_latency(t, name="transition_latency_s"):
    v = _num(name, t)
    if v < 0:
        raise PowerNapError("%s must be >= 0 seconds, got %r (a measured resume latency is positive; "
                            "was it measured?)" % (name, t))
    if v > 3600:
        raise PowerNapError("%s %r s is over an hour: the latency is in seconds (0.65 for 650 ms)" % (name, t))
    return v


def summarize_utilization(values, percentile=95.0):
    """A conservative single utilisation from a number or a series.

    A series gives its nearest-rank ``percentile`` (95th by default): the host must be advised for
    its busy hours, not its average. Returns (value, description).
    """
    if isinstance(values, (list, tuple)):
        if not values:
            raise PowerNapError("utilization is an empty list: give a number or a series of measured "
                                "utilisations (fractions in [0, 1))")
        vals = sorted(check_utilization(v, "utilization[%d]" % i) for i, v in enumerate(values))
        p = _num("utilization_percentile", percentile)
        if not 0 < p <= 100:
            raise PowerNapError("utilization_percentile must be in (0, 100], got %r" % percentile)
        rank = max(1, int(math.ceil(p / 100.0 * len(vals))))
        return vals[rank - 1], "p%g of %d samples" % (p, len(vals))
    return check_utilization(values), "single value"


def _residual_moments(x):
    """h(x) = E[max(T - A, 0)] / T and g(x) = E[max(T - A, 0)^2] / T^2 for A ~ Exp(x / T)."""
    if x < 0.5:
        # Series, free of the cancellation the closed form suffers for small lambda T (exact at 0):
        # h = sum_{k>=2} (-1)^k x^(k-1) / k!,  g = sum_{k>=3} 2 (-1)^(k+1) x^(k-2) / k!
        h = g = 0.0
        t = 1.0  # x^(k-2) / k! for the current k
        for k in range(2, 30):
            t = 0.5 if k == 2 else t * x / k
            h += (-1) ** k * t * x
            if k >= 3:
                g += 2.0 * (-1) ** (k + 1) * t
        return h, g
    q = -math.expm1(-x)
    return 1.0 - q / x, 1.0 - 2.0 / x + 2.0 * q / (x * x)


def setup_moments(lam, resume_s, suspend_s):
    """E[I], E[I^2] of the first request's extra delay I = resume + max(suspend - A, 0)."""
    if suspend_s > 0:
        h, g = _residual_moments(lam * suspend_s)
        m1, m2 = suspend_s * h, suspend_s * suspend_s * g
    else:
        m1 = m2 = 0.0
    return resume_s + m1, resume_s * resume_s + 2.0 * resume_s * m1 + m2


def mg1_response(rho, service_s, second_moment):
    """Pollaczek-Khinchine mean response time of M/G/1."""
    lam = rho / service_s
    return service_s + lam * second_moment / (2.0 * (1.0 - rho))


def baseline(rho, model):
    return {
        "power": model.idle_power_fraction + (1.0 - model.idle_power_fraction) * rho,
        "response_time_s": mg1_response(rho, model.service_time_s, model.second_moment),
    }


def powernap(rho, resume_s, suspend_s, model):
    s = model.service_time_s
    lam = rho / s
    ei, ei2 = setup_moments(lam, resume_s, suspend_s)
    d = 1.0 + lam * ei
    f_trans = (resume_s + suspend_s) * lam * (1.0 - rho) / d
    f_sleep = math.exp(-lam * suspend_s) * (1.0 - rho) / d
    power = rho + model.transition_power_fraction * f_trans + model.sleep_power_fraction * f_sleep
    setup_delay = (2.0 * ei + lam * ei2) / (2.0 * d)
    rt = mg1_response(rho, s, model.second_moment) + setup_delay
    return {"power": power, "response_time_s": rt, "busy_fraction": rho,
            "transition_fraction": f_trans, "sleep_fraction": f_sleep,
            "setup_delay_s": setup_delay}


def dvfs(rho, model):
    f = min(1.0, max(model.dvfs_min_frequency, rho / model.dvfs_target_utilization))
    idle = model.idle_power_fraction
    c = model.cpu_power_fraction
    p0 = idle + (1.0 - idle) * rho
    p_stretched = idle + (1.0 - idle) * (rho / f)
    power = (1.0 - c) * p0 + c * f ** model.dvfs_power_exponent * p_stretched
    s = model.service_time_s / f
    rt = mg1_response(rho / f, s, model.second_moment / (f * f))
    return {"power": power, "response_time_s": rt, "frequency": f}


def _rel(x, base):
    return {"power_rel": x["power"] / base["power"],
            "response_time_rel": x["response_time_s"] / base["response_time_s"]}


def evaluate(rho, transition_latency_s, model=None, suspend_latency_s=None):
    """PowerNap and DVFS at one utilisation, relative to no power management."""
    model = model or Model()
    rho = check_utilization(rho)
    tr = check_latency(transition_latency_s)
    ts = tr if suspend_latency_s is None else check_latency(suspend_latency_s, "suspend_latency_s")
    base = baseline(rho, model)
    pn = powernap(rho, tr, ts, model)
    dv = dvfs(rho, model)
    out_pn = dict(pn, **_rel(pn, base))
    out_dv = dict(dv, **_rel(dv, base))
    return {"utilization": rho, "baseline": base, "powernap": out_pn, "dvfs": out_dv}


def _power_gap(rho, tr, ts, model):
    return powernap(rho, tr, ts, model)["power"] - dvfs(rho, model)["power"]


def crossover_utilization(transition_latency_s, model=None, suspend_latency_s=None, tol=1e-7):
    """Lowest utilisation at which PowerNap draws at least as much power as DVFS.

    Below it PowerNap draws less. None when PowerNap draws less over all of [0, 1). The gap is
    scanned in 0.05 % steps and the first sign change refined by bisection.
    """
    model = model or Model()
    tr = check_latency(transition_latency_s)
    ts = tr if suspend_latency_s is None else check_latency(suspend_latency_s, "suspend_latency_s")
    if _power_gap(0.0, tr, ts, model) >= 0:
        return 0.0
    lo = 0.0
    for i in range(1, _GRID):
        hi = i / float(_GRID)
        if _power_gap(hi, tr, ts, model) >= 0:
            while hi - lo > tol:
                mid = (lo + hi) / 2.0
                if _power_gap(mid, tr, ts, model) >= 0:
                    hi = mid
                else:
                    lo = mid
            return hi
        lo = hi
    return None


def curves(latencies_s, model=None, points=200, rho_max=0.95):
    """Relative power and response time against utilisation: one series per latency plus DVFS."""
    model = model or Model()
    rhos = [rho_max * i / float(points) for i in range(points + 1)]
    series = []
    for t in latencies_s:
        t = check_latency(t)
        pts = [evaluate(r, t, model) for r in rhos]
        series.append({"label": "PowerNap Tt = %s" % format_latency(t), "latency_s": t,
                       "power_rel": [p["powernap"]["power_rel"] for p in pts],
                       "response_time_rel": [p["powernap"]["response_time_rel"] for p in pts],
                       "crossover": crossover_utilization(t, model)})
    pts = [evaluate(r, 0.0, model) for r in rhos]
    series.append({"label": "DVFS", "latency_s": None,
                   "power_rel": [p["dvfs"]["power_rel"] for p in pts],
                   "response_time_rel": [p["dvfs"]["response_time_rel"] for p in pts],
                   "crossover": None})
    return rhos, series


def format_latency(t):
    if t >= 1:
        return "%.3g s" % t
    return "%.4g ms" % (t * 1000.0)


# ----------------------------------------------------------------------------------------- SVG

_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4")


def _fmt(v):
    return ("%.2f" % v).rstrip("0").rstrip(".")


def _log_ticks(vmax):
    ticks = []
    for decade in (1, 10, 100, 1000):
        for m in (1, 2, 5):
            v = m * decade
            if v <= vmax * 1.0001:
                ticks.append(v)
    return ticks


def render_svg(latencies_s, model=None, utilization=None, title=None, points=160, highlight_s=None):
    """A self-contained SVG: relative power and relative mean response time against utilisation,
    one line per transition latency and one for DVFS (like the seed's Figures 7 and 8).

    ``utilization`` draws the host's operating point; ``highlight_s`` draws that latency's line
    thicker (the host's measured latency).
    """
    model = model or Model()
    lat = []
    for t in list(latencies_s) + ([highlight_s] if highlight_s is not None else []):
        t = check_latency(t)
        if t not in lat:
            lat.append(t)
    lat.sort()
    if not lat:
        raise PowerNapError("render_svg needs at least one transition latency")
    if utilization is not None:
        utilization = check_utilization(utilization)
    rho_max = 0.95
    rhos, series = curves(lat, model, points=points, rho_max=rho_max)

    W, H = 1100, 560
    top, bottom_pad = 70, 140
    pw, ph = 440, H - top - bottom_pad
    panels = [(80, "Power relative to no power management", "power_rel", False),
              (620, "Mean response time relative (log scale)", "response_time_rel", True)]
    out = []
    a = out.append
    a('<?xml version="1.0" encoding="UTF-8"?>')
    a('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
      'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">' % (W, H, W, H))
    a('<title>%s</title>' % escape(title or "PowerNap vs DVFS"))
    a('<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>' % (W, H))
    a('<text x="%d" y="28" font-size="17" font-weight="bold" text-anchor="middle">%s</text>'
      % (W // 2, escape(title or "PowerNap vs DVFS")))
    a('<text x="%d" y="48" text-anchor="middle" fill="#444">%s</text>' % (W // 2, escape(
        "E[S] = %s ms, cv = %s, idle %s %%, sleep %s %%, transition %s %% of peak, CPU %s %%, "
        "DVFS f >= %s, stretched to %s %% busy"
        % (_fmt(model.service_time_s * 1000), _fmt(model.service_time_cv),
           _fmt(model.idle_power_fraction * 100), _fmt(model.sleep_power_fraction * 100),
           _fmt(model.transition_power_fraction * 100), _fmt(model.cpu_power_fraction * 100),
           _fmt(model.dvfs_min_frequency), _fmt(model.dvfs_target_utilization * 100)))))

    for x0, label, key, logy in panels:
        vals = [v for s in series for v in s[key]]
        if logy:
            vmax = min(max(vals), 1000.0)
            nice = [v for v in (1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if v >= vmax]
            ymax = nice[0] if nice else 1000.0
            ymin = 1.0

            def ty(v, ymin=ymin, ymax=ymax):
                v = min(max(v, ymin), ymax)
                return top + ph - (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)) * ph
            ticks = _log_ticks(ymax)
            if len(ticks) < 3:
                ticks = [1, 1.25, 1.5, 1.75, 2][:int((ymax - 1) / 0.25) + 1]
        else:
            ymin, ymax = 0.0, max(1.2, math.ceil(max(vals) * 5) / 5.0)
            ymax = min(ymax, 3.0)

            def ty(v, ymin=ymin, ymax=ymax):
                v = min(max(v, ymin), ymax)
                return top + ph - (v - ymin) / (ymax - ymin) * ph
            step = 0.2
            ticks = [round(i * step, 2) for i in range(int(ymax / step + 1e-9) + 1)]

        def tx(r, x0=x0):
            return x0 + r / rho_max * pw
        a('<g class="panel" data-metric="%s">' % key)
        a('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (x0, top, pw, ph))
        for t in ticks:
            y = ty(t)
            a('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + pw, y))
            a('<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>'
              % (x0 - 6, y, _fmt(t)))
        for i in range(0, 10):
            r = i / 10.0
            if r > rho_max:
                break
            x = tx(r)
            a('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (x, top, x, top + ph))
            a('<text x="%.1f" y="%d" text-anchor="middle">%d %%</text>' % (x, top + ph + 16, int(r * 100)))
        if not logy:
            a('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888" stroke-dasharray="2,3"/>'
              % (x0, ty(1.0), x0 + pw, ty(1.0)))
        a('<text x="%.1f" y="%d" text-anchor="middle">Utilization</text>' % (x0 + pw / 2.0, top + ph + 36))
        a('<text x="%d" y="%.1f" text-anchor="middle" transform="rotate(-90 %d %.1f)">%s</text>'
          % (x0 - 46, top + ph / 2.0, x0 - 46, top + ph / 2.0, escape(label)))
        for idx, s in enumerate(series):
            dvfs_line = s["latency_s"] is None
            color = "#000000" if dvfs_line else _COLORS[idx % len(_COLORS)]
            width = 3.2 if (highlight_s is not None and s["latency_s"] == highlight_s) else 1.8
            pts = " ".join("%.1f,%.1f" % (tx(r), ty(v)) for r, v in zip(rhos, s[key]))
            a('<polyline class="series" data-label="%s" fill="none" stroke="%s" stroke-width="%.1f"%s '
              'points="%s"/>' % (escape(s["label"]), color, width,
                                 ' stroke-dasharray="7,4"' if dvfs_line else "", pts))
            if key == "power_rel" and s["crossover"] is not None and s["crossover"] <= rho_max:
                c = s["crossover"]
                a('<circle class="crossover" cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s: crossover '
                  '%.1f %%</title></circle>' % (tx(c), ty(dvfs(c, model)["power"] / baseline(c, model)["power"]),
                                                color, escape(s["label"]), c * 100))
        if utilization is not None and utilization <= rho_max:
            x = tx(utilization)
            a('<line class="host" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c00" '
              'stroke-dasharray="4,3"/>' % (x, top, x, top + ph))
            a('<text x="%.1f" y="%d" fill="#c00" text-anchor="start">host %s %%</text>'
              % (x + 3, top + 14, _fmt(utilization * 100)))
        a('</g>')

    # Legend, below the panels.
    ly = top + ph + 62
    lx = 80
    for idx, s in enumerate(series):
        dvfs_line = s["latency_s"] is None
        color = "#000000" if dvfs_line else _COLORS[idx % len(_COLORS)]
        text = s["label"]
        if not dvfs_line:
            text += (" (crossover %.1f %%)" % (s["crossover"] * 100) if s["crossover"] is not None
                     else " (below DVFS everywhere)")
        a('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>'
          % (lx, ly, lx + 28, ly, color, ' stroke-dasharray="7,4"' if dvfs_line else ""))
        a('<text x="%d" y="%d" dominant-baseline="middle">%s</text>' % (lx + 34, ly, escape(text)))
        lx += 330
        if lx > W - 300:
            lx = 80
            ly += 22
    a('<text x="80" y="%d" fill="#555">Dots: crossover utilisation, below which PowerNap draws less power '
      'than DVFS. Response times above the panel are clipped.</text>' % (H - 12))
    a('</svg>')
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# The advice (powernap_advice's and fleetnap_profile's sleep.advice: one rule, one text)
# ---------------------------------------------------------------------------------------------

MAX_SAMPLES = 100000


def pct(x):
    """0.02 -> '2 %' (the advice's text)."""
    return ("%.1f" % (x * 100)).rstrip("0").rstrip(".") + " %"


def utilization_input(util, name="utilization"):
    """The utilisation option as given -> a number, a numeric text or a list of at most MAX_SAMPLES
    samples (a templated list arrives as text when it was not a YAML list: read by the one JSON
    loader). PowerNapError names ``name`` otherwise; summarize_utilization checks each value."""
    if isinstance(util, str):
        text = util.strip()
        if text.startswith("["):
            try:
                util = parse.loads(text, name, max_depth=1)
            except parse.ParseError as e:
                raise PowerNapError("%s %s is neither a number nor a list of numbers: %s" % (name, repr(util)[:60], e))
        else:
            util = text
    if isinstance(util, (list, tuple)) and len(util) > MAX_SAMPLES:
        raise PowerNapError("%s: at most %d samples, got %d (give a percentile of a longer series)"
                            % (name, MAX_SAMPLES, len(util)))
    if util is None or util == "":
        raise PowerNapError("%s is missing: give the host's measured busy fraction (a number in [0, 1) or a "
                            "list of samples)" % name)
    return util


def advise(params):
    """The PowerNap advice for one host: params holds transition_latency_s, suspend_latency_s (None:
    the transition latency), utilization (as utilization_input returns it), utilization_percentile,
    response_time_objective, require_beating_dvfs and every key of DEFAULTS. Returns (result, model,
    transition latency, utilisation); sleeping is advised when it saves power (and beats DVFS, unless
    not required) and keeps the response-time objective."""
    model = Model(**dict((k, params[k]) for k in DEFAULTS))
    tr = check_latency(params["transition_latency_s"])
    ts = params.get("suspend_latency_s")
    ts = tr if ts is None else check_latency(ts, "suspend_latency_s")
    rho, summary = summarize_utilization(params["utilization"], params["utilization_percentile"])
    objective = params["response_time_objective"]
    if objective is None or objective < 1:
        raise PowerNapError("response_time_objective must be >= 1 (a multiple of the mean response "
                            "time without power management, e.g. 1.5), got %r" % objective)
    ev = evaluate(rho, tr, model, suspend_latency_s=ts)
    cross = crossover_utilization(tr, model, suspend_latency_s=ts)
    pn, dv = ev["powernap"], ev["dvfs"]
    beats_dvfs = pn["power"] < dv["power"]
    saves = pn["power_rel"] < 1.0 and (beats_dvfs or not params["require_beating_dvfs"])
    keeps = pn["response_time_rel"] <= objective
    advice = "sleep" if (saves and keeps) else "stay-awake"
    reason = "resume %s at %s load (%s): power %.2fx (DVFS %.2fx, crossover %s), response %.2fx %s objective %gx" % (
        format_latency(tr), pct(rho), summary, pn["power_rel"], dv["power_rel"],
        pct(cross) if cross is not None else "none", pn["response_time_rel"],
        "<=" if keeps else ">", objective)
    out = {
        "utilization": rho,
        "utilization_summary": summary,
        "powernap": pn,
        "dvfs": dv,
        "baseline": ev["baseline"],
        "crossover_utilization": cross,
        "saves_power": saves,
        "beats_dvfs": beats_dvfs,
        "keeps_objective": keeps,
        "advice": advice,
        "reason": reason,
        "model": dict(model.as_dict(), transition_latency_s=tr, suspend_latency_s=ts,
                      response_time_objective=objective,
                      require_beating_dvfs=params["require_beating_dvfs"]),
    }
    return out, model, tr, rho


def advice_svg(out, model, tr, rho, latencies_s=SEED_LATENCIES_S, title=None):
    """The curves of an advice (advise's result, model, transition latency and utilisation), the
    host's resume latency highlighted; its title says the resume and the load unless given."""
    title = title or "PowerNap vs DVFS: resume %s, utilisation %s (%s)" % (
        format_latency(tr), pct(rho), out["utilization_summary"])
    return render_svg(list(latencies_s), model, utilization=rho, title=title, highlight_s=tr)
