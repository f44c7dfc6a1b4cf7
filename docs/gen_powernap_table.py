#!/usr/bin/env python3
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate the reproduction table of docs/powernap.md from the model in module_utils.

    python3 docs/gen_powernap_table.py           print the table
    python3 docs/gen_powernap_table.py --write   replace the table in docs/powernap.md
    python3 docs/gen_powernap_table.py --check   exit 1 if docs/powernap.md differs (the unit test)

Standard library only; the table is everything between the BEGIN/END markers in the doc.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "module_utils"))

from fleetnap import powernap as pn  # noqa: E402

DOC = os.path.join(HERE, "powernap.md")
BEGIN = "<!-- BEGIN gen_powernap_table.py -->"
END = "<!-- END gen_powernap_table.py -->"

SEED = {  # what the seed reports (section V), per transition latency
    0.01: ("~45 %", "28-44 % faster than 50 ms below 45 %"),
    0.05: ("~35 %", "faster than DVFS at every utilisation"),
    0.1: ("not reported", "competitive with DVFS only above ~30 %"),
    0.65: ("~4 %", "not competitive"),
}


def _pct(x):
    return "none" if x is None else "%.1f %%" % (x * 100)


def _dvfs_beaten(t, m):
    """Utilisation ranges (1 % grid, 0-95 %) where PowerNap's mean response time beats DVFS's."""
    spans, start, prev = [], None, None
    for i in range(0, 96):
        r = i / 100.0
        e = pn.evaluate(r, t, m)
        if e["powernap"]["response_time_rel"] < e["dvfs"]["response_time_rel"]:
            start = i if start is None else start
            prev = i
        elif start is not None:
            spans.append((start, prev))
            start = None
    if start is not None:
        spans.append((start, prev))
    return ", ".join("%d-%d %%" % s for s in spans) or "never"


def table():
    m = pn.Model()
    rows = ["| Tt | seed's crossover | model's crossover | PowerNap power at 10 % / 30 % | "
            "response at 10 % / 30 % | faster than DVFS at | seed on response time |",
            "|---|---|---|---|---|---|---|"]
    for t in pn.SEED_LATENCIES_S:
        c = pn.crossover_utilization(t, m)
        e10, e30 = pn.evaluate(0.1, t, m), pn.evaluate(0.3, t, m)
        rows.append("| %s | %s | %s | %.2fx / %.2fx | %.2fx / %.2fx | %s | %s |" % (
            pn.format_latency(t), SEED[t][0], _pct(c),
            e10["powernap"]["power_rel"], e30["powernap"]["power_rel"],
            e10["powernap"]["response_time_rel"], e30["powernap"]["response_time_rel"],
            _dvfs_beaten(t, m), SEED[t][1]))
    d10, d30 = pn.evaluate(0.1, 0, m)["dvfs"], pn.evaluate(0.3, 0, m)["dvfs"]
    rows.append("| DVFS | | | %.2fx / %.2fx | %.2fx / %.2fx | | |" % (
        d10["power_rel"], d30["power_rel"], d10["response_time_rel"], d30["response_time_rel"]))
    rows += ["", "Sensitivity of the crossover to the assumptions (one change at a time):", "",
             "| assumption | " + " | ".join(pn.format_latency(t) for t in pn.SEED_LATENCIES_S) + " |",
             "|---|" + "---|" * len(pn.SEED_LATENCIES_S)]
    variants = [
        ("defaults (table above)", {}, None),
        ("seed's reported crossover", None, None),
        ("transitions at idle power (0.6)", {"transition_power_fraction": 0.6}, None),
        ("no suspend time (resume only)", {}, 0.0),
        ("E[S] = 75 ms", {"service_time_s": 0.075}, None),
        ("sleep at 3.8 % (Arch) instead of 5 %", {"sleep_power_fraction": 0.038}, None),
        ("DVFS down to 0.4 of nominal", {"dvfs_min_frequency": 0.4}, None),
    ]
    for name, kw, suspend in variants:
        if kw is None:
            cells = [SEED[t][0] for t in pn.SEED_LATENCIES_S]
        else:
            mv = pn.Model(**kw)
            cells = [_pct(pn.crossover_utilization(t, mv, suspend_latency_s=suspend)) for t in pn.SEED_LATENCIES_S]
        rows.append("| %s | %s |" % (name, " | ".join(cells)))
    return "\n".join(rows) + "\n"


def _split(doc):
    a = doc.index(BEGIN) + len(BEGIN)
    b = doc.index(END)
    return doc[:a], doc[a:b], doc[b:]


def main(argv):
    text = table()
    if "--write" in argv or "--check" in argv:
        with open(DOC) as f:
            doc = f.read()
        head, old, tail = _split(doc)
        new = "\n" + text
        if "--check" in argv:
            if old != new:
                sys.stdout.write("docs/powernap.md is out of date; run python3 docs/gen_powernap_table.py "
                                 "--write\n--- doc\n%s--- generator\n%s" % (old, new))
                return 1
            return 0
        with open(DOC, "w") as f:
            f.write(head + new + tail)
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
