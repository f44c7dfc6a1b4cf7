"""tests/run_molecule.py (what 'make test-molecule' runs), with a stand-in for molecule that notes
when each scenario starts and ends: lanes side by side, a lane in order, the rest alone after
them, a failure stopping its lane and what comes after the lanes, every scenario's log kept."""

import os
import stat
import subprocess
import sys

from conftest import REPO

STAND_IN = """#!/bin/sh
# molecule --base-config FILE reset|test -s NAME (every scenario extends the repository's base configuration)
for name; do :; done
[ "$1" = --base-config ] && [ -f "$2" ] && [ "$4" = -s ] || { echo "not called as expected: $*"; exit 3; }
if [ "$3" = reset ]; then echo "reset $name" >> "$ORDER"; exit 0; fi
[ "$3" = test ] || { echo "not called as expected: $*"; exit 3; }
echo "start $name" >> "$ORDER"
# molecule's own lines around an action, colours and all (what run_molecule times)
if [ -n "$ACTIONS" ]; then
  printf '\033[36mINFO    \033[0m \033[32m%s\033[0m \u279c \033[33mconverge\033[0m: \033[36mExecuting\033[0m\n' "$name"
  sleep 0.6
  printf 'INFO     %s \u279c converge: Executed: Successful\n' "$name"
  printf 'INFO     %s \u279c verify: Executing\n' "$name"
  printf 'INFO     %s \u279c verify: Executed: Successful\n' "$name"
fi
sleep 0.4; echo "end $name" >> "$ORDER"
echo "log of $name"
[ "$name" != "$FAIL" ]
"""


def run(tmp_path, *args, fail="", actions=""):
    tool = tmp_path / "molecule"
    tool.write_text(STAND_IN)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    order = tmp_path / "order"
    env = dict(os.environ, ORDER=str(order), FAIL=fail, ACTIONS=actions)
    proc = subprocess.run([sys.executable, str(REPO / "tests/run_molecule.py"), "--molecule", str(tool),
                           "--log-dir", str(tmp_path / "logs"), *args], capture_output=True, text=True, env=env,
                          timeout=60)
    lines = order.read_text().splitlines() if order.exists() else []
    # every scenario's state is reset just before its test (a killed run's state must not carry over)
    for i, line in enumerate(lines):
        if line.startswith("start "):
            assert "reset " + line[6:] in lines[:i], lines
    return proc, [line for line in lines if not line.startswith("reset ")]


def test_lanes_side_by_side_then_the_rest_alone(tmp_path):
    proc, order = run(tmp_path, "--lane", "a,b", "--lane", "c", "a", "b", "c", "z")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert order.index("start c") < order.index("end a")             # side by side
    assert order.index("end a") < order.index("start b")             # a lane in order
    assert order[-2:] == ["start z", "end z"]                        # alone, after the lanes
    assert all("molecule scenario %s: passed" % s in proc.stdout for s in "abcz")
    assert (tmp_path / "logs" / "molecule-b.log").read_text() == "log of b\n"


def test_a_failure_stops_its_lane_and_what_comes_after_and_shows_its_log(tmp_path):
    proc, order = run(tmp_path, "--lane", "a,b", "--lane", "c", "a", "b", "c", "z", fail="a")
    assert proc.returncode == 1
    assert "start b" not in order and "start z" not in order and "end c" in order
    assert "log of a" in proc.stdout and "molecule scenario a: FAILED" in proc.stdout
    assert "1 scenario(s) passed, 1 failed (a), 2 not run" in proc.stdout


def test_a_lane_naming_an_unknown_scenario_is_refused(tmp_path):
    proc, order = run(tmp_path, "--lane", "a,q", "a")
    assert proc.returncode == 2 and "one of the scenarios" in proc.stderr and order == []


def test_each_actions_time_is_printed_with_the_scenarios(tmp_path):
    """converge took 0.6 s in the stand-in (verify no time): the line says converge and its time,
    and leaves out an action that took none; the log keeps molecule's lines as they were."""
    proc, _order = run(tmp_path, "a", actions="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("molecule scenario a: passed")][0]
    assert "; converge 1 s)" in line and "verify" not in line, line
    assert "\033[33mconverge\033[0m: \033[36mExecuting" in (tmp_path / "logs" / "molecule-a.log").read_text()
