#!/usr/bin/env python3
"""Run 'make' stages in order, stop at the first that fails, always run the --finally targets,
and print each stage's wall time and result at the end (what 'make test' prints).

    python tests/run_stages.py lint test-unit test-sim test-lab test-molecule --finally lab-down
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def run(target: str) -> tuple[int, float]:
    t0 = time.monotonic()
    print("\n===== make %s =====" % target, flush=True)
    rc = subprocess.call(["make", "--no-print-directory", target])
    return rc, time.monotonic() - t0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="+")
    ap.add_argument("--finally", dest="final", action="append", default=[],
                    help="a target run at the end whatever happened (repeatable)")
    args = ap.parse_args(argv)
    rows, rc = [], 0
    t_all = time.monotonic()
    for stage in args.stages:
        if rc:
            rows.append((stage, None, "not run"))
            continue
        code, secs = run(stage)
        rows.append((stage, secs, "passed" if code == 0 else "FAILED (rc=%d)" % code))
        rc = code
    for target in args.final:
        code, secs = run(target)
        rows.append((target, secs, "done" if code == 0 else "FAILED (rc=%d)" % code))
        rc = rc or code
    total = time.monotonic() - t_all
    print("\n===== stages =====")
    for name, secs, what in rows:
        print("%-16s %9s  %s" % (name, "-" if secs is None else "%.0f s" % secs, what))
    print("%-16s %9s" % ("total", "%.0f s" % total))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
