"""make bench's reports: the verdict and parsing logic, and docs/benchmarks.md quoting docs/bench/.

The timings themselves are never a test; what is tested is that a missed target makes a MISS and
a non-zero exit, that the median (not the best run) is what is stated, that a written report
parses back to the same verdicts, and that every figure docs/benchmarks.md shows is a quote of a
file make bench wrote.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
import benchlib  # noqa: E402


def test_spread_is_the_median_not_the_best_run():
    s = benchlib.spread([5.8, 4.95, 5.9])
    assert s == {"median": 5.8, "min": 4.95, "max": 5.9, "n": 3}


@pytest.mark.parametrize("values", [[], [float("nan")], [1.0, float("inf")]])
def test_spread_refuses_no_or_non_finite_measurements(values):
    with pytest.raises(benchlib.BenchError):
        benchlib.spread(values)


@pytest.mark.parametrize("value,op,limit,want", [
    (1.49, "<=", 1.5, "PASS"), (1.5, "<=", 1.5, "PASS"), (1.51, "<=", 1.5, "MISS"),
    (5.0, ">=", 5.0, "PASS"), (4.9, ">=", 5.0, "MISS"), (2.0, "<", 2.0, "MISS"),
    (float("nan"), "<=", 1.5, "MISS"), (float("inf"), ">=", 1.0, "MISS"),
])
def test_verdict(value, op, limit, want):
    assert benchlib.verdict(value, op, limit) == want


def test_verdict_refuses_an_unknown_comparison():
    with pytest.raises(benchlib.BenchError):
        benchlib.verdict(1.0, "=~", 2.0)


def _report(tmp_path, *targets):
    rep = benchlib.Report("unit-bench", argv=["--x"], out_dir=tmp_path)
    rep.print("some table\nof two lines")
    rep.runs("shift 3->1", [5.8, 4.95, 5.9])
    for label, value, op, limit in targets:
        rep.target(label, value, op, limit, "x")
    return rep


def test_a_missed_target_writes_miss_and_exits_non_zero(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETNAP_BENCH_DIR", raising=False)
    rep = _report(tmp_path, ("apply / ping", 1.86, "<=", 2.0), ("shift / floor", 1.6, "<=", 1.5))
    assert rep.finish() == 1
    text = (tmp_path / "unit-bench.txt").read_text()
    parsed = benchlib.parse_report(text)
    assert parsed["verdict"] == "MISS"
    assert [(v["label"], v["verdict"]) for v in parsed["verdicts"]] == [
        ("apply / ping", "PASS"), ("shift / floor", "MISS")]
    assert "# verdict: MISS (2 targets, 1 missed)" in text
    assert "shift 3->1: median 5.8 s over 3 runs (min 4.95, max 5.9; 5.8, 4.95, 5.9)" in text
    for key in ("commit", "date", "machine", "load_before", "load_after"):
        assert re.search(r"^# %s: \S" % key, text, re.M), key


def test_all_targets_met_exits_zero_and_no_target_is_not_a_pass(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETNAP_BENCH_DIR", raising=False)
    assert _report(tmp_path, ("apply / ping", 1.2, "<=", 2.0)).finish() == 0
    assert _report(tmp_path).finish() == 1


def test_a_value_just_over_its_limit_is_written_with_the_digits_its_verdict_needs(tmp_path, monkeypatch):
    # 1.5036 at three digits is 1.5, which would read as a pass of "<= 1.5": a report that says
    # MISS beside it would not parse back (make bench's render refused one such report).
    monkeypatch.delenv("FLEETNAP_BENCH_DIR", raising=False)
    rep = _report(tmp_path, ("shift / floor", 1.5036, "<=", 1.5), ("other", 1.4951, ">=", 1.5),
                  ("plain", 1.61, "<=", 1.5))
    assert rep.finish() == 1
    parsed = benchlib.parse_report((tmp_path / "unit-bench.txt").read_text())
    assert [(v["value"], v["verdict"]) for v in parsed["verdicts"]] == [
        (1.504, "MISS"), (1.495, "MISS"), (1.61, "MISS")]


def test_a_report_whose_verdicts_do_not_follow_from_its_figures_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETNAP_BENCH_DIR", raising=False)
    _report(tmp_path, ("apply / ping", 1.2, "<=", 2.0)).finish()
    text = (tmp_path / "unit-bench.txt").read_text()
    with pytest.raises(benchlib.BenchError, match="is not a PASS"):
        benchlib.parse_report(text.replace("PASS apply / ping: 1.2 <=", "PASS apply / ping: 2.2 <="))
    with pytest.raises(benchlib.BenchError, match="says PASS but its targets say MISS"):
        benchlib.parse_report(text.replace("PASS apply / ping: 1.2", "MISS apply / ping: 9"))
    with pytest.raises(benchlib.BenchError, match="no commit line"):
        benchlib.parse_report(re.sub(r"^# commit: .*\n", "", text, flags=re.M))


def test_render_rewrites_a_quote_from_its_file_and_refuses_a_missing_one(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETNAP_BENCH_DIR", raising=False)
    _report(tmp_path, ("apply / ping", 1.2, "<=", 2.0)).finish()
    doc = "intro\n<!-- bench:unit-bench -->\nstale 9.9x\n<!-- /bench -->\nend\n"
    out = benchlib.render(doc, tmp_path)
    assert "stale" not in out and "PASS apply / ping: 1.2 <= 2 x" in out
    assert "shift 3->1: median 5.8 s" in out
    assert benchlib.render(out, tmp_path) == out
    with pytest.raises(benchlib.BenchError, match="not written by make bench"):
        benchlib.render(doc.replace("unit-bench", "gone"), tmp_path)


def test_docs_benchmarks_quotes_are_the_files_make_bench_wrote():
    """Every quote in docs/benchmarks.md is the current file's (benchlib.py render), every file in
    docs/bench/ is a report that parses, and the prose states no figure of its own."""
    doc = benchlib.DOC.read_text()
    names = [m.group("name") for m in benchlib.QUOTE.finditer(doc)]
    assert names, "docs/benchmarks.md quotes no report"
    assert benchlib.render(doc, benchlib.BENCH_DIR) == doc, \
        "docs/benchmarks.md differs from docs/bench/: run python tests/bench/benchlib.py render"
    for path in sorted(benchlib.BENCH_DIR.glob("*.txt")):
        benchlib.parse_report(path.read_text())
    assert sorted(p.stem for p in benchlib.BENCH_DIR.glob("*.txt")) == sorted(set(names))
    prose = benchlib.QUOTE.sub("", doc)
    prose = re.sub(r"```.*?```", "", prose, flags=re.S)
    figures = re.findall(r"\b\d+(?:\.\d+)?\s?(?:x|s|ms|min)\b", prose)
    assert not figures, "figures in docs/benchmarks.md that no report states: %s" % figures
