#!/usr/bin/env python3
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every benchmark of ``make bench`` shares: the report it writes to ``docs/bench/``.

A benchmark makes one :class:`Report`, prints through it, states its repeated measurements with
:meth:`Report.runs` (median and spread, never the best run) and its targets with
:meth:`Report.target` (PASS or MISS), and ends with :meth:`Report.finish`, which writes
``docs/bench/NAME.txt`` - a header (commit, date, machine: cores and load before and after), the
whole output, and one verdict line per target - and returns the exit status: 1 when a target was
missed. ``docs/benchmarks.md`` quotes those files between ``<!-- bench:NAME -->`` and
``<!-- /bench -->``; ``python tests/bench/benchlib.py render`` rewrites the quotes from the files,
and ``tests/unit/test_bench_reports.py`` fails when a quote and its file differ.

The parsing and verdict logic is unit-tested (``tests/unit/test_bench_reports.py``); the timings
themselves are never a test.
"""

from __future__ import annotations

import math
import operator
import os
import platform
import re
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "docs" / "bench"
DOC = REPO / "docs" / "benchmarks.md"

OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}
VERDICT = re.compile(r"^(PASS|MISS) (?P<label>.+?): (?P<value>\S+) (?P<op><=|>=|<|>) (?P<limit>\S+)"
                     r"(?: (?P<unit>\S+))?$")
HEADER = re.compile(r"^# (?P<key>[a-z_]+): (?P<value>.*)$")
QUOTE = re.compile(r"(<!-- bench:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /bench -->)", re.S)


class BenchError(Exception):
    pass


def spread(values) -> dict:
    """Median, min, max and count of repeated measurements (the median is what is quoted)."""
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) for v in vals):
        raise BenchError("no finite measurements: %r" % (values,))
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def verdict(value: float, op: str, limit: float) -> str:
    """PASS when ``value op limit`` holds, MISS otherwise (a non-finite value is a MISS)."""
    if op not in OPS:
        raise BenchError("unknown comparison %r" % op)
    if not math.isfinite(value):
        return "MISS"
    return "PASS" if OPS[op](value, limit) else "MISS"


def _git(*args) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO)] + list(args), capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> str:
    """The checked-out commit, with ``+dirty`` when tracked files differ from it."""
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/bench")
    return head + ("+dirty" if dirty else "")


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2.0 ** 30
    except (ValueError, OSError):
        return 0.0


def load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def _fmt(value: float) -> str:
    return "%.3g" % value if abs(value) < 100 else "%.1f" % value


class Report(object):
    """One benchmark's report; see the module's docstring."""

    def __init__(self, name: str, argv=None, out_dir: Path | None = None):
        if not re.match(r"^[\w.-]+$", name):
            raise BenchError("bad report name %r" % name)
        self.name = name
        self.out_dir = Path(os.environ.get("FLEETNAP_BENCH_DIR") or out_dir or BENCH_DIR)
        self.header = {
            "bench": name,
            "command": " ".join(["python", "tests/bench/%s" % Path(sys.argv[0]).name] + list(
                sys.argv[1:] if argv is None else argv)),
            "commit": commit(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": "%d cores, %.1f GiB, kernel %s, Python %s" % (
                os.cpu_count() or 0, _memory_gib(), platform.release(), platform.python_version()),
            "load_before": load(),
        }
        self.lines: list[str] = []
        self.verdicts: list[dict] = []

    def print(self, text: str = "") -> None:
        for line in str(text).split("\n"):
            print(line, flush=True)
            self.lines.append(line)

    def runs(self, label: str, values, unit: str = "s") -> dict:
        """Print repeated measurements as median and spread; return :func:`spread`'s dict."""
        s = spread(values)
        self.print("%s: median %s %s over %d runs (min %s, max %s; %s)" % (
            label, _fmt(s["median"]), unit, s["n"], _fmt(s["min"]), _fmt(s["max"]),
            ", ".join(_fmt(float(v)) for v in values)))
        return s

    def target(self, label: str, value: float, op: str, limit: float, unit: str = "") -> bool:
        """Record and print a target's verdict; True on PASS."""
        v = verdict(float(value), op, float(limit))
        shown = _fmt(float(value))
        digits = 4
        while verdict(float(shown), op, float(_fmt(float(limit)))) != v and digits <= 17:
            shown = "%.*g" % (digits, float(value))     # as many digits as the verdict needs (1.504, not 1.5)
            digits += 1
        line = "%s %s: %s %s %s%s" % (v, label, shown, op, _fmt(float(limit)),
                                       (" " + unit) if unit else "")
        self.verdicts.append(parse_verdict(line))
        self.print(line)
        return v == "PASS"

    def text(self) -> str:
        head = ["# %s: %s" % (k, v) for k, v in self.header.items()]
        head.append("# load_after: %s" % load())
        missed = [v for v in self.verdicts if v["verdict"] == "MISS"]
        tail = ["", "# verdict: %s (%d targets, %d missed)" % ("MISS" if missed else "PASS",
                                                               len(self.verdicts), len(missed))]
        return "\n".join(head + [""] + self.lines + tail) + "\n"

    def finish(self) -> int:
        """Write docs/bench/NAME.txt; 1 when a target was missed (or none was stated), else 0."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / ("%s.txt" % self.name)
        path.write_text(self.text())
        print("written: %s" % path, flush=True)
        if not self.verdicts:
            print("%s: no target was stated" % self.name, file=sys.stderr)
            return 1
        return 1 if any(v["verdict"] == "MISS" for v in self.verdicts) else 0


def parse_verdict(line: str) -> dict:
    m = VERDICT.match(line.strip())
    if not m:
        raise BenchError("not a verdict line: %r" % line)
    d = m.groupdict()
    return {"verdict": line.split(" ", 1)[0], "label": d["label"], "value": float(d["value"]),
            "op": d["op"], "limit": float(d["limit"]), "unit": d["unit"] or ""}


def parse_report(text: str) -> dict:
    """A written report's header, verdicts and overall verdict; BenchError when it is not one."""
    header, verdicts, overall = {}, [], None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            if m.group("key") == "verdict":
                overall = m.group("value").split(" ", 1)[0]
            else:
                header[m.group("key")] = m.group("value")
        elif VERDICT.match(line):
            verdicts.append(parse_verdict(line))
    for key in ("bench", "commit", "date", "machine", "load_before", "load_after"):
        if key not in header:
            raise BenchError("report has no %s line" % key)
    if overall is None:
        raise BenchError("report has no verdict line")
    missed = [v for v in verdicts if v["verdict"] == "MISS"]
    want = "MISS" if missed else "PASS"
    if overall != want:
        raise BenchError("report says %s but its targets say %s" % (overall, want))
    for v in verdicts:
        if verdict(v["value"], v["op"], v["limit"]) != v["verdict"]:
            raise BenchError("%s: %s %s %s is not a %s" % (v["label"], v["value"], v["op"], v["limit"],
                                                           v["verdict"]))
    return {"header": header, "verdicts": verdicts, "verdict": overall}


def quote(text: str) -> str:
    """What docs/benchmarks.md shows of a report: its commit/date/machine and every line that
    states a median or a verdict."""
    rep = parse_report(text)
    h = rep["header"]
    keep = ["commit %s, %s, %s, load %s before / %s after" % (
        h["commit"], h["date"], h["machine"], h["load_before"], h["load_after"])]
    for line in text.splitlines():
        if VERDICT.match(line) or ": median " in line:
            keep.append(line)
    return "```\n" + "\n".join(keep) + "\n```\n"


def render(doc_text: str, bench_dir: Path) -> str:
    """doc_text with every ``<!-- bench:NAME -->`` quote rewritten from bench_dir/NAME.txt."""
    def one(m):
        path = bench_dir / ("%s.txt" % m.group("name"))
        if not path.is_file():
            raise BenchError("%s: quoted in docs/benchmarks.md but not written by make bench" % path)
        return m.group(1) + quote(path.read_text()) + m.group(4)
    return QUOTE.sub(one, doc_text)


def main(argv) -> int:
    if argv[1:] != ["render"]:
        print("usage: benchlib.py render   (rewrite docs/benchmarks.md's quotes from docs/bench/)")
        return 2
    new = render(DOC.read_text(), BENCH_DIR)
    if new != DOC.read_text():
        DOC.write_text(new)
        print("docs/benchmarks.md: quotes rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
