#!/usr/bin/env python3
"""Benchmark (not a test): gear_plan for 10,000 servers x one year of hourly history.

Generates a synthetic but plausible year of fleet-wide load into a temporary CSV (8760 rows):
a diurnal curve (trough around 04:00, peak mid-afternoon), a weekly dip at weekends, a slow
seasonal drift, a nightly maintenance burst at 01:00 (Sierra section 4.3 saw one in Hotmail) and
multiplicative noise. Times (1) gear_plan's core - CSV parse, hourly peaks, prediction, schedule,
evaluation, table - the median of several runs, and (2) the whole module through the ansible CLI
once, and states both against the 2 s target (docs/bench/gear_plan.txt, benchlib).

    .venv/bin/python tests/bench/bench_gear_plan.py [--rows 8760] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
import conftest  # noqa: E402,F401  (makes ansible.module_utils.fleetnap importable)
sys.path.insert(0, str(REPO / "tests" / "bench"))
from benchlib import Report  # noqa: E402
from ansible.module_utils.fleetnap import gear  # noqa: E402

TARGET_S = 2.0
SERVERS = 10000
CAPS = dict(server_read_iops=250.0, server_write_iops=200.0, server_read_mbps=110.0, server_write_mbps=90.0)


def synth_year(path, rows, seed=7):
    rnd = random.Random(seed)
    t0 = int(datetime(2023, 1, 1, tzinfo=timezone.utc).timestamp())
    with open(path, "w") as fh:
        fh.write("timestamp,read_iops,write_iops,read_mbps,write_mbps\n")
        for i in range(rows):
            ts = t0 + i * 3600
            hour = i % 24
            day = i // 24
            diurnal = 0.55 + 0.45 * math.sin((hour - 10) / 24.0 * 2 * math.pi)
            weekly = 0.8 if (day + 6) % 7 >= 5 else 1.0         # 2023-01-01 is a Sunday
            season = 1.0 + 0.15 * math.sin(day / 365.0 * 2 * math.pi)
            scale = diurnal * weekly * season * rnd.lognormvariate(0, 0.08)
            burst = 2.0 if hour == 1 else 1.0                   # nightly maintenance (writes)
            fh.write("%d,%.1f,%.1f,%.2f,%.2f\n" % (ts, 1.2e6 * scale, 2.5e5 * scale * burst,
                                                   4.0e4 * scale, 1.5e4 * scale * burst))


def core(path, train_days):
    cap = gear.Capacity(CAPS["server_read_iops"], CAPS["server_write_iops"], CAPS["server_read_mbps"],
                        CAPS["server_write_mbps"])
    peaks = gear.read_load_csv(path, cap, 3)
    res = gear.plan(peaks, SERVERS, 3, 1, train_days, date(2024, 1, 1))
    gear.table(res["schedule"], SERVERS, 3)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8760)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--train-days", type=int, default=300)
    a = ap.parse_args()
    rep = Report("gear_plan")           # before the runs: its date and load are the ones before them
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = os.path.join(tmp, "year.csv")
        synth_year(csv_path, a.rows)
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            res = core(csv_path, a.train_days)
            times.append(time.perf_counter() - t)
        ev = res["evaluation"] or {}
        rep.print("gear_plan core, %d servers x %d hourly rows (%d days)" % (SERVERS, a.rows, a.rows // 24))
        core_s = rep.runs("gear_plan core", times)
        rep.target("gear_plan core (median s)", core_s["median"], "<=", TARGET_S, "s")
        if ev:
            rep.print("  evaluation on %d test days: nrmse %.3f, gear accuracy %.3f, powered %.3f (oracle %.3f)"
                      % (ev["test_days"], ev["nrmse"], ev["gear_accuracy"], ev["powered_fraction"],
                         ev["oracle_powered_fraction"]))
        args = dict(CAPS, servers=SERVERS, replicas=3, gmin=1, load_csv=csv_path, train_days=a.train_days,
                    date="2024-01-01")
        t = time.perf_counter()
        out = conftest.run_module("gear_plan", args, tmp_path=Path(tmp))
        wall = time.perf_counter() - t
        if out.failed:
            rep.print("module failed: %s" % out.get("msg"))
            rep.finish()
            return 1
        rep.print("gear_plan module via ansible: whole ansible CLI call %.2f s (one run)" % wall)
        rep.target("gear_plan module, time in the module (s)", out["elapsed_s"], "<=", TARGET_S, "s")
        rep.print(out["table"])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
