"""tests/run_stages.py (what 'make test' runs) with a Makefile of its own: stages in order, a
background target waited for before its stage, stages beside another at nice 19, the --finally
targets after everything."""

import os
import subprocess
import sys

import pytest

from conftest import REPO

MAKEFILE = """\
a:
\t@echo a-start >> order; sleep 0.3; echo a-end >> order
b:
\t@echo b >> order
bad:
\t@echo bad >> order; exit 3
bg:
\t@echo bg-start >> order; sleep 0.8; echo bg-end >> order
bgfail:
\t@echo boom; exit 4
down:
\t@echo down >> order
niced:
\t@echo niced-$$(nice) >> order; echo io-$$(ionice | cut -d: -f1) >> order; sleep 0.5; echo niced-end >> order
failsoon:
\t@sleep 0.5; echo failsoon >> order; exit 3
slow:
\t@echo slow-start >> order; sleep 3; echo slow-end >> order
untilbg:
\t@echo slow-start >> order; i=0; until grep -q bg-start order || [ $$i -ge 300 ]; do sleep 0.1; i=$$((i+1)); done; echo slow-end >> order
skips:
\t@printf 'x\\nskipped: 2 tests\\n  2 this kernel can suspend\\nskipped: 1 test\\n'
verify:
\t@printf 'noise\\n  \\342\\224\\202 \\033[31mE   assert 1 == 2\\033[0m\\n  \\342\\224\\202 FAILED tests/test_x.py::test_y - assert 1 == 2\\nlab1 : ok=3 failed=0\\n'; exit 1
"""


def run(tmp_path, *args):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    proc = subprocess.run([sys.executable, str(REPO / "tests/run_stages.py"), *args, "--log-dir", str(tmp_path / "logs")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    order = (tmp_path / "order").read_text().split() if (tmp_path / "order").exists() else []
    return proc, order


def test_background_runs_beside_the_first_stages_and_is_waited_for_before_its_stage(tmp_path):
    proc, order = run(tmp_path, "a", "b", "--background", "bg:b", "--finally", "down")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # bg started before a ended (beside it), ended before b started; down last
    assert order.index("bg-start") < order.index("a-end") and order.index("bg-end") < order.index("b")
    assert order[-1] == "down"
    assert "bg (bg)" in proc.stdout and "waited" in proc.stdout
    # its own run time (about 0.8 s), not the time until it was waited for
    ran = float(proc.stdout.split("it ran ")[1].split(" s")[0])
    assert ran < 5


def test_a_failed_stage_stops_the_background_before_finally(tmp_path):
    proc, order = run(tmp_path, "bad", "b", "--background", "bg:b", "--finally", "down")
    assert proc.returncode == 2        # make says 2 when a recipe failed
    assert "b" not in order and "bg-end" not in order and order[-1] == "down"
    assert "not run" in proc.stdout and "stopped (a stage failed)" in proc.stdout


def test_a_failed_background_target_prints_its_log_and_the_stage_still_runs(tmp_path):
    proc, order = run(tmp_path, "a", "b", "--background", "bgfail:b")
    assert "bgfail (background): FAILED (rc=" in proc.stdout and "boom" in proc.stdout
    assert order[-1] == "b" and proc.returncode == 0


def test_stages_beside_run_at_nice_19_from_their_stage_on_and_are_waited_for(tmp_path):
    # the stage (untilbg) lasts until bg has started (at most 30 s): at nice 19 on a busy machine
    # the chain beside it may take longer than any fixed sleep to get there
    proc, order = run(tmp_path, "b", "untilbg", "a", "--beside", "niced,bg:untilbg", "--finally", "down")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # not before their stage; at the lowest priority (19, what this test may already run at); one
    # after the other; beside their stage (niced and bg both started before the stage ended); the
    # stage after it waits for them
    assert order.index("b") < order.index("slow-start") < order.index("niced-19")
    assert "io-idle" in order       # and in the idle I/O class: its disk writes wait for the stage's
    assert order.index("niced-end") < order.index("bg-start") < order.index("slow-end")
    assert order.index("bg-end") < order.index("a-start") and order[-1] == "down"
    table = proc.stdout[proc.stdout.index("===== stages ====="):]
    assert "niced (beside)" in table and "bg (beside)" in table and "FAILED" not in table


def test_the_stage_after_waits_for_the_stages_beside_and_they_never_run_beside_it(tmp_path):
    proc, order = run(tmp_path, "a", "b", "--beside", "slow:a", "--finally", "down")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert order == ["a-start", "slow-start", "a-end", "slow-end", "b", "down"] or \
        order == ["slow-start", "a-start", "a-end", "slow-end", "b", "down"]
    assert "waited" in proc.stdout and "slow (beside)" in proc.stdout


def test_a_failed_stage_beside_fails_the_run_and_stops_the_stages_in_front(tmp_path):
    proc, order = run(tmp_path, "slow", "a", "--beside", "bad,b:slow", "--finally", "down")
    assert proc.returncode == 2
    # slow was running when bad failed: it ends; a (after it) and b (beside, after bad) do not start
    assert sorted(order[:2]) == ["bad", "slow-start"] and order[2:] == ["slow-end", "down"]
    table = proc.stdout[proc.stdout.index("===== stages ====="):]
    assert "bad (beside)" in table and "FAILED (rc=2)" in table
    assert [ln for ln in table.splitlines() if ln.startswith("a ")][0].rstrip().endswith("not run")
    assert "===== why bad failed" in proc.stdout


def test_a_failed_stage_in_front_leaves_the_stages_beside_not_started_unrun(tmp_path):
    proc, order = run(tmp_path, "failsoon", "a", "--beside", "slow,b:failsoon", "--finally", "down")
    assert proc.returncode == 2
    # slow started with failsoon (its stage) and ends; b, after the failure, does not start, nor a
    assert order == ["slow-start", "failsoon", "slow-end", "down"]
    table = proc.stdout[proc.stdout.index("===== stages ====="):]
    assert [ln for ln in table.splitlines() if ln.startswith("b (beside)")][0].rstrip().endswith("not run")


def test_beside_at_a_nice_level_of_its_own_and_two_chains_beside_two_stages(tmp_path):
    proc, order = run(tmp_path, "slow", "a", "--beside", "niced:slow:7", "--beside", "b:a")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # nice 7 itself, whatever this test runs at (make test runs the unit tests at nice 10: the
    # stage is then at 10, never higher); b only once a started, after slow
    assert ("niced-%d" % max(7, os.getpriority(os.PRIO_PROCESS, 0))) in order
    assert order.index("slow-end") < order.index("b")


@pytest.mark.parametrize("spec,why", [("b:nosuch", "must name one of the stages: nosuch"),
                                      ("b", "expected STAGE[,STAGE...]:WITH[:NICE]"),
                                      ("b:a:20", "NICE 0..19"), ("b:a:-1", "NICE 0..19"), ("b:a:x", "NICE 0..19"),
                                      (":a", "expected STAGE"), ("b:a:1:2", "expected STAGE")])
def test_beside_refuses_what_it_cannot_run(tmp_path, spec, why):
    proc, order = run(tmp_path, "a", "--beside", spec)
    assert proc.returncode == 2 and why in proc.stdout + proc.stderr and order == []


def test_the_end_of_the_output_says_why_a_stage_failed(tmp_path):
    proc, order = run(tmp_path, "b", "verify", "a", "--finally", "down")
    assert proc.returncode == 2 and order == ["b", "down"]
    tail = proc.stdout.split("===== stages =====")[1]
    why = tail.split("===== why verify failed")[1]
    # the failure's lines, without colour codes nor molecule's frame; not the noise nor a clean recap
    assert "E   assert 1 == 2" in why and "FAILED tests/test_x.py::test_y - assert 1 == 2" in why
    assert "noise" not in why and "failed=0" not in why and "\x1b" not in why
    # the stage's whole output is still printed as it comes, and kept in its log
    assert "noise" in proc.stdout.split("===== stages =====")[0]
    assert "noise" in (tmp_path / "logs" / "stage-verify.log").read_text()


def test_failure_lines_are_capped(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    import run_stages
    log = tmp_path / "x.log"
    log.write_text("".join("E   line %d\n" % i for i in range(100)))
    lines = run_stages.failure_lines(str(log), limit=5)
    assert lines == ["E   line 0", "E   line 1", "E   line 2", "E   line 3", "... and 96 more such lines"]


def test_the_table_counts_each_stages_skipped_tests(tmp_path):
    proc, _order = run(tmp_path, "skips", "b")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout[proc.stdout.index("===== stages ====="):]
    assert "skips" in table and "passed; 3 skipped (reasons in its log)" in table
    row_b = [ln for ln in table.splitlines() if ln.startswith("b ")][0]
    assert row_b.split(";")[0].rstrip().endswith("passed") and "skipped" not in row_b, row_b


SKIPPING = """\
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="this kernel offers no S3")
def test_kernel():
    pass

def test_tool():
    pytest.skip(MISSING)
"""


def _pytest_with_skips(tmp_path, missing, strict):
    (tmp_path / "test_skips.py").write_text(SKIPPING.replace("MISSING", repr(missing)))
    env = dict(__import__("os").environ, PYTHONPATH=str(REPO / "tests"), FLEETNAP_STRICT_SKIPS=strict)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_skips.py")],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)


def test_a_skip_ci_should_not_have_fails_a_strict_run_and_every_run_counts_its_skips(tmp_path):
    proc = _pytest_with_skips(tmp_path, "needs promtool (Debian package prometheus)", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "skipped: 2 tests" in proc.stdout
    assert "1  needs promtool (Debian package prometheus)" in proc.stdout
    assert "1 skip reason(s) that CI must not have" in proc.stdout
    relaxed = _pytest_with_skips(tmp_path, "needs promtool (Debian package prometheus)", "0")
    assert relaxed.returncode == 0 and "skipped: 2 tests" in relaxed.stdout
    justified = _pytest_with_skips(tmp_path, "this machine has no single-queue network interface", "1")
    assert justified.returncode == 0, justified.stdout + justified.stderr
    assert "skipped: 2 tests" in justified.stdout


def test_the_table_says_how_busy_the_cores_were_during_each_stage(tmp_path):
    """A stage that keeps one core busy reads as at least most of one core busy (whatever else the
    machine does adds to it, never takes from it); the reading is /proc/stat's."""
    (tmp_path / "spin.py").write_text("import time\nt = time.time()\nwhile time.time() - t < 1.5:\n    pass\n")
    (tmp_path / "Makefile").write_text("spin:\n\t@%s spin.py\n" % sys.executable)
    proc = subprocess.run([sys.executable, str(REPO / "tests/run_stages.py"), "spin", "--log-dir", str(tmp_path / "logs")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = [ln for ln in proc.stdout.splitlines() if ln.startswith("spin ")][0]
    busy, cpus = row.split("; ")[1].split(" cores busy")[0].split(" of ")
    assert int(cpus) == os.cpu_count() and 0.8 <= float(busy) <= int(cpus), row


def test_cpu_readings_from_proc_stat_and_what_is_not_one(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    import run_stages
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n")
    assert run_stages.cpu_jiffies(str(stat)) == (150, 1000)
    assert run_stages.cores_busy((150, 1000), (650, 2000), cpus=2) == "1.00 of 2 cores busy"
    assert run_stages.cores_busy(None, (650, 2000), cpus=2) == ""
    assert run_stages.cores_busy((150, 1000), (150, 1000), cpus=2) == ""
    for text in ("", "intr 1 2 3\n", "cpu  1 2 x 4 5 6\n", "cpu 1 2\n"):
        stat.write_text(text)
        assert run_stages.cpu_jiffies(str(stat)) is None, text
    assert run_stages.cpu_jiffies(str(tmp_path / "absent")) is None
