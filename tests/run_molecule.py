#!/usr/bin/env python3
"""Run the molecule scenarios (what 'make test-molecule' does): lanes of scenarios side by side,
each lane's scenarios one after another, then the scenarios in no lane, one at a time.

    python tests/run_molecule.py --lane ptp_clock,resume_measure --lane default,node_exporter \\
        default node_exporter ptp_clock resume_measure gear_shift

Scenarios in different lanes must touch different lab guests (each scenario's inventory pattern
says which) to run at the same time; a scenario in no lane runs alone, after the lanes. lab/lab.mk
gives two: a scenario on one TCG guest keeps about 1.2 of CI's 2 cores busy, two lanes both.
Each scenario's output goes to LOG_DIR/molecule-NAME.log; its time, each action's share of it
(create, converge, idempotence, verify, ...) and its result are printed when it ends, the log's
end when it failed. The first failure stops its lane and
the scenarios after the lanes; the other lanes finish what they run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time

PRINT = threading.Lock()


def say(text: str) -> None:
    with PRINT:
        print(text, flush=True)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# molecule's lines around each action of a scenario's sequence: "default ➜ converge: Executing"
ACTION = re.compile(r"\S+ \u279c (\w+): (Executing|Executed)\b")


class Steps(object):
    """Each action's wall time from molecule's "➜ ACTION: Executing" ... "Executed" lines (an
    action run twice, such as idempotence, adds up)."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    def line(self, text: str, now: float) -> None:
        m = ACTION.search(ANSI.sub("", text))
        if not m:
            return
        if m.group(2) == "Executing":
            self._open = (m.group(1), now)
        elif self._open and self._open[0] == m.group(1):
            self.times[m.group(1)] = self.times.get(m.group(1), 0.0) + now - self._open[1]
            self._open = None

    def summary(self) -> str:
        return ", ".join("%s %.0f s" % (k, v) for k, v in self.times.items() if v >= 0.5)


def run_one(name: str, log_dir: str, molecule: list[str]) -> tuple[bool, float]:
    """``molecule``: the molecule command with its global options; reset, then test, scenario NAME."""
    path = os.path.join(log_dir, "molecule-%s.log" % name)
    t0 = time.monotonic()
    steps = Steps()
    with open(path, "wb") as log:
        # A run killed before its destroy leaves the scenario's state (created, prepared) in
        # molecule's ephemeral directory, which is named after the checkout's directory name and
        # shared by every checkout of that name: the next test then skips create and prepare
        # ("Skipping, instances already prepared") and verifies a guest nobody prepared. Reset first.
        for step in ("reset", "test"):
            proc = subprocess.Popen(molecule + [step, "-s", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)
                steps.line(raw.decode("utf-8", "replace"), time.monotonic())
            rc = proc.wait()
            if rc:
                break
    secs = time.monotonic() - t0
    if rc == 0:
        spent = steps.summary()
        say("molecule scenario %s: passed (%.0f s%s)" % (name, secs, "; " + spent if spent else ""))
    else:
        with open(path, errors="replace") as fh:
            tail = fh.read()[-12000:]
        say("%s\nmolecule scenario %s: FAILED (rc=%d, %.0f s; whole log: %s)" % (tail, name, rc, secs, path))
    return rc == 0, secs


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+", help="every scenario, in the order to run those in no lane")
    ap.add_argument("--lane", action="append", default=[], help="comma-separated scenarios run in order (repeatable)")
    ap.add_argument("--log-dir", default="artifacts")
    ap.add_argument("--molecule", default=os.path.join(os.path.dirname(sys.executable), "molecule"))
    args = ap.parse_args(argv)
    lanes = [[s for s in lane.split(",") if s] for lane in args.lane]
    in_lanes = [s for lane in lanes for s in lane]
    unknown = sorted(set(in_lanes) - set(args.scenarios))
    if unknown or len(set(in_lanes)) != len(in_lanes):
        ap.error("every lane's scenario must be one of the scenarios, in one lane only: %s" % (unknown or in_lanes))
    os.makedirs(args.log_dir, exist_ok=True)
    # Every scenario extends the repository's base configuration; molecule finds it at the root of
    # a git checkout by itself, and is told where it is for a tree without .git.
    base = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".config", "molecule", "config.yml")
    command = [args.molecule, "--base-config", base]
    results: dict[str, bool] = {}
    t0 = time.monotonic()

    def lane_run(lane):
        for name in lane:
            ok, _ = run_one(name, args.log_dir, command)
            results[name] = ok
            if not ok:
                return

    threads = [threading.Thread(target=lane_run, args=(lane,)) for lane in lanes if lane]
    if threads:
        say("molecule: lanes side by side: %s" % "; ".join(" -> ".join(lane) for lane in lanes if lane))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in args.scenarios:
        if name in in_lanes or not all(results.values()):
            continue
        results[name] = run_one(name, args.log_dir, command)[0]
    not_run = [s for s in args.scenarios if s not in results]
    failed = [s for s, ok in results.items() if not ok]
    say("molecule: %d scenario(s) passed, %d failed%s, %d not run; %.0f s"
        % (sum(results.values()), len(failed), " (%s)" % ", ".join(failed) if failed else "", len(not_run),
           time.monotonic() - t0))
    return 1 if failed or not_run else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
