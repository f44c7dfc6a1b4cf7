#!/usr/bin/env python3
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: parse time of a 100k-line suspend/resume log, ours against sleepgraph's.

Not a test: its report goes to docs/bench/pm_timeline.txt (benchlib), and a missed target exits 1. Builds one large, valid cycle from the real pm-graph log
(tests/data/dmesg/pmgraph-skynet-mem-3.15.txt) by repeating its suspend and resume
device blocks with renamed devices and shifted timestamps, checks that both parsers agree on
the totals, then times (median of several runs):

* ours: ``fleetnap.dmesg.parse`` (the whole analysis: phases, devices, CPUs, critical paths)
* sleepgraph 5.6: ``loadKernelLog`` + ``parseKernelLog`` (its dmesg-only analysis, without
  writing its HTML), through its Python API in this process.

Then (issue 31) a big log of many cycles: the golden 3-cycle lab log
(tests/golden/lab1-console-6.1-3cycles.txt) repeated with shifted timestamps to ``--big-mb`` MB
(60 by default, about 1800 cycles), timed as pm_timeline's module does its work (read through the
file layer, parse, every cycle's result and recommendations), beside sleepgraph on the same file.
It must finish within ``BIG_TARGET_S`` (PASS/MISS printed; the script exits non-zero on a MISS).
pm_timeline refuses a saved log above 64 MiB (fileio.LOG) from its size.

Run with the venv's Python: ``.venv/bin/python tests/bench/bench_pm_timeline.py [--lines N] [--big-mb MB]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "data" / "dmesg" / "pmgraph-skynet-mem-3.15.txt"

import ansible.module_utils  # noqa: E402

if str(REPO / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(REPO / "module_utils"))
from ansible.module_utils.fleetnap.dmesg import parse, parse_file  # noqa: E402
from ansible.module_utils.fleetnap.recommend import recommend  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from sleepgraph_oracle import load_sleepgraph, sleepgraph_parse  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "bench"))
from benchlib import Report  # noqa: E402

_TS = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")
_CALL = re.compile(r"^(calling  )(.+?)(\+ @ \d+, parent: )(.+)$")
_RET = re.compile(r"^(call )(.+?)(\+ returned .*)$")


def build_log(target_lines):
    """One valid cycle of about ``target_lines`` lines, from the real log."""
    lines = SOURCE.read_text().splitlines()
    header = [l for l in lines if not l.startswith("[")]
    recs = [(float(m.group(1)), m.group(2)) for m in map(_TS.match, lines) if m]

    def block(start_marker, end_marker):
        i = next(k for k, (_, msg) in enumerate(recs) if msg.startswith(start_marker))
        j = next(k for k, (_, msg) in enumerate(recs) if msg.startswith(end_marker))
        return i + 1, j

    blocks = [block("Suspending console", "PM: suspend of devices complete"),
              block("PM: early resume of devices complete", "PM: resume of devices complete")]
    per_copy = sum(j - i for i, j in blocks)
    copies = max(1, (target_lines - len(recs)) // per_copy + 1)
    out = list(header)
    shift = 0.0
    pos = 0
    for i, j in blocks:
        out.extend(_fmt(t + shift, msg) for t, msg in recs[pos:i])
        span = recs[j][0] - recs[i][0] + 0.001
        for k in range(copies):
            for t, msg in recs[i:j]:
                if k:
                    msg = _rename(msg, k)
                out.append(_fmt(t + shift + k * span, msg))
        shift += (copies - 1) * span
        pos = j
    out.extend(_fmt(t + shift, msg) for t, msg in recs[pos:])
    return "\n".join(out) + "\n"


def _rename(msg, k):
    m = _CALL.match(msg)
    if m:
        parent = m.group(4)
        return "%s%s-r%d%s%s-r%d" % (m.group(1), m.group(2), k, m.group(3), parent, k)
    m = _RET.match(msg)
    if m:
        return "%s%s-r%d%s" % (m.group(1), m.group(2), k, m.group(3))
    return msg


def _fmt(t, msg):
    return "[%12.6f] %s" % (t, msg)


GOLDEN = REPO / "tests" / "golden" / "lab1-console-6.1-3cycles.txt"
BIG_TARGET_S = 20.0        # "finishes in seconds": a 60 MB log of 1800 cycles, on a busy 2-core machine


def build_big_log(megabytes):
    """The golden 3-cycle log repeated (timestamps shifted past the previous copy) to ``megabytes`` MB."""
    lines = GOLDEN.read_text().splitlines()
    recs = []
    for line in lines:
        m = _TS.match(line)
        recs.append((float(m.group(1)), m.group(2)) if m else (None, line))
    span = max(t for t, _ in recs if t is not None) + 10.0
    one = sum(len(l) + 1 for l in lines)
    copies = max(1, int(megabytes * 1e6 / one))
    out = []
    for k in range(copies):
        out.extend(_fmt(t + k * span, msg) if t is not None else msg for t, msg in recs)
    return "\n".join(out) + "\n"


def module_work(path):
    """What pm_timeline does with a saved log and cycle=all: read (file layer), parse, each cycle's
    result with its recommendations."""
    cycles = parse_file(str(path))
    return [dict(c.to_dict(top=10, with_devices=True), recommendations=recommend(c, min_saving_ms=1.0))
            for c in cycles]


def timed(fn, reps):
    times = []
    result = None
    for _ in range(reps):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=5, help="repetitions of our parser")
    ap.add_argument("--sg-reps", type=int, default=3, help="repetitions of sleepgraph")
    ap.add_argument("--big-mb", type=float, default=60.0, help="size of the many-cycle log (0: skip it)")
    ap.add_argument("--big-reps", type=int, default=3, help="repetitions on the many-cycle log")
    args = ap.parse_args()

    rep = Report("pm_timeline")
    text = build_log(args.lines)
    n = text.count("\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big-dmesg.txt"
        path.write_text(text)
        _t, ours_all, cycles = timed(lambda: parse(path.read_text()), args.reps)
        cyc = cycles[-1]
        sg = load_sleepgraph()
        _t, sg_all, runs = timed(lambda: sleepgraph_parse(sg, path), args.sg_reps)
    sg_sus, sg_res = runs[-1].getTimeValues()
    rep.print("log: %d lines, %d device callbacks, one %s cycle (built from %s)"
              % (n, len(cyc.devices), cyc.mode, SOURCE.name))
    rep.print("totals  ours: suspend %.3f ms resume %.3f ms | sleepgraph: suspend %.3f ms resume %.3f ms"
              % (cyc.suspend_ms, cyc.resume_ms, sg_sus, sg_res))
    agree = abs(cyc.suspend_ms - sg_sus) <= 0.01 * sg_sus and abs(cyc.resume_ms - sg_res) <= 0.01 * sg_res
    rep.target("totals agree with sleepgraph's (1 when within 1%)", 1 if agree else 0, ">=", 1)
    ours = rep.runs("fleetnap.dmesg.parse", ours_all)
    theirs = rep.runs("sleepgraph 5.6", sg_all)
    rep.target("sleepgraph / fleetnap parse time (medians)", theirs["median"] / ours["median"], ">=", 1.0, "x")
    if args.big_mb > 0:
        big(args, rep)
    return rep.finish()


def big(args, rep):
    text = build_big_log(args.big_mb)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "many-cycles-dmesg.txt"
        path.write_text(text)
        size = path.stat().st_size
        del text
        _t, ours_all, results = timed(lambda: module_work(path), args.big_reps)
        sg = load_sleepgraph()
        try:
            sg_t, _all, _runs = timed(lambda: sleepgraph_parse(sg, path), 1)
            sg_said = "%.3f s (one run)" % sg_t
        except SystemExit as exc:       # sleepgraph reports what it cannot analyse with doError(): an exit
            sg_said = "refused the log (doError, exit %s)" % exc.code
    rep.print("many-cycle log: %.1f MB, %d cycles (the golden lab1 log repeated)" % (size / 1e6, len(results)))
    ours = rep.runs("pm_timeline work on the many-cycle log (read, parse, every cycle)", ours_all)
    rep.print("sleepgraph 5.6 on the same log: %s" % sg_said)
    rep.target("pm_timeline on a %.0f MB log (median s)" % (size / 1e6), ours["median"], "<=", BIG_TARGET_S, "s")


if __name__ == "__main__":
    sys.exit(main())
