"""gear_plan through Ansible on real CSV files (the hand-computed week and a synthetic year)."""

from __future__ import annotations

import math
import socket
import time
from datetime import date, datetime, timedelta, timezone

import pytest

from ansible.module_utils.fleetnap import gear



@pytest.fixture
def run(module_runner):
    return module_runner


# The hand-computed week of tests/unit/test_gear.py: N=30, r=3, one server = 100/50 IOPS, 10/5 MB/s;
# blocks of six hours with L = 7.2, 15, 27, 10; days scaled 0.75..1.25 (mean 1), test day 1.1.
CAPS = {"server_read_iops": 100, "server_write_iops": 50, "server_read_mbps": 10, "server_write_mbps": 5}
BLOCKS = [(600, 20, 30, 2), (900, 100, 80, 10), (1000, 200, 150, 20), (700, 50, 40, 5)]
DAY_SCALE = [0.75, 0.85, 0.95, 1.05, 1.15, 1.25, 1.10]
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def week_csv(tmp_path):
    lines = ["timestamp,read_iops,write_iops,read_mbps,write_mbps"]
    for day, scale in enumerate(DAY_SCALE):
        for hour in range(24):
            for minute, frac in ((10, 0.2), (40, 1.0)):
                t = START + timedelta(days=day, hours=hour, minutes=minute)
                vals = [v * scale * frac for v in BLOCKS[hour // 6]]
                lines.append(",".join([t.strftime("%Y-%m-%dT%H:%M:%SZ")] + ["%.6f" % v for v in vals]))
    p = tmp_path / "week.csv"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def base_args(csv, **kw):
    args = dict(CAPS, servers=30, replicas=3, gmin=1, load_csv=csv, date="2024-01-08",
                at="2024-01-08T13:20:00Z")
    args.update(kw)
    return args


def test_week_schedule_and_evaluation(run, week_csv):
    res = run("gear_plan", base_args(week_csv, train_days=6))
    assert not res.failed and not res.changed
    rows = res["schedule"]
    assert [r["gear"] for r in rows] == [1] * 6 + [2] * 6 + [3] * 6 + [1] * 6
    assert [round(r["predicted_load"], 6) for r in rows[::6]] == [7.2, 15.0, 27.0, 10.0]
    assert rows[0]["groups_on"] == [2] and rows[0]["groups_off"] == [1, 3]   # 2024-01-08: order 3,1,2
    assert res["rotation_order"] == [3, 1, 2] and res["rotation_offset"] == 2
    assert res["now"] == {"at": "2024-01-08T13:20:00+00:00", "date": "2024-01-08", "hour": 13, "gear": 3,
                          "groups_on": [1, 2, 3], "groups_off": []}
    ev = res["evaluation"]
    assert ev["gear_accuracy"] == pytest.approx(0.75)
    assert ev["nrmse"] == pytest.approx(0.1021320, rel=1e-5)
    assert ev["powered_fraction"] == pytest.approx(7 / 12)
    assert ev["oracle_powered_fraction"] == pytest.approx(8 / 12)
    assert res["input"]["samples"] == 7 * 48 and res["input"]["days"] == 7 and res["input"]["train_days"] == 6
    lines = res["table"].splitlines()
    assert len(lines) == 26 and lines[2].split() == ["00:00", "7.20", "1", "2", "1,3", "10"]


def test_matches_the_core(run, week_csv):
    res = run("gear_plan", base_args(week_csv, gmin=2, train_days=5, date="2024-03-01"))
    peaks = gear.read_load_csv(week_csv, gear.Capacity(100, 50, 10, 5), 3)
    core = gear.plan(peaks, 30, 3, 2, 5, date(2024, 3, 1))
    assert res["schedule"] == core["schedule"]
    for k, v in core["evaluation"].items():
        assert res["evaluation"][k] == (pytest.approx(v) if isinstance(v, float) else v)


def test_now_follows_the_date_of_at_in_the_timezone(run, week_csv):
    # 23:30 UTC on Jan 8 is 00:30 on Jan 9 in Berlin: hour 0, Jan 9's rotation (offset 0: order 1,2,3).
    # Local hour 0 is the UTC 23:00 hour of the 10-server block, averaged over all 7 days
    # (no train_days): 10 * 7.1 / 7 = 10.14 > one group of 10 -> gear 2, group 1 off.
    res = run("gear_plan", base_args(week_csv, timezone="Europe/Berlin", at="2024-01-08T23:30:00Z"))
    assert res["now"]["date"] == "2024-01-09" and res["now"]["hour"] == 0
    assert res["now"]["gear"] == 2 and res["now"]["groups_on"] == [2, 3] and res["now"]["groups_off"] == [1]
    # Local hours shifted by one: 07:00-12:00 Berlin are the 06-11 UTC block.
    assert [r["gear"] for r in res["schedule"]][6:14] == [1, 2, 2, 2, 2, 2, 2, 3]


def test_check_mode_is_identical(run, week_csv):
    a = run("gear_plan", base_args(week_csv, train_days=6))
    b = run("gear_plan", base_args(week_csv, train_days=6), check=True)
    assert not b.failed and not b.changed and a["schedule"] == b["schedule"] and a["evaluation"] == b["evaluation"]


def test_layout_violations_listed_and_fail(run, week_csv):
    hosts = {"a": {"gear_group": 1, "rack": "r1"}, "b": {"gear_group": 2, "rack": "r2"},
             "c": {"gear_group": 3, "rack": "r3"}}
    args = base_args(week_csv, layout_hosts=hosts, replica_map={"x": ["a", "b"], "ok": ["a", "b", "c"]})
    res = run("gear_plan", args)
    assert res.failed and "1 violation(s)" in res["msg"] and "item x" in res["msg"]
    res = run("gear_plan", dict(args, fail_on_layout_violations=False))
    assert not res.failed and res["layout"]["kind"] == "rack-aligned"
    assert [(v["item"], v["gear"], v["rotation"]) for v in res["layout"]["violations"]] == [("x", 1, 0)]
    res = run("gear_plan", dict(args, gmin=2))
    assert not res.failed and res["layout"]["violations"] == []


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("change,match", [
    ({"load_csv": "/nonexistent/load.csv"}, "cannot read load_csv /nonexistent/load.csv"),
    ({"gmin": 0}, "option gmin: must be >= 1"),
    ({"servers": 2}, "servers (N=2) must be at least replicas"),
    ({"server_write_iops": 0}, "option server_write_iops: must be > 0"),
    ({"train_days": 9}, "covers only 7 day"),
    ({"timezone": "Moon/Base"}, "unknown time zone 'Moon/Base'"),
    ({"date": "08.01.2024"}, "date '08.01.2024' is not YYYY-MM-DD"),
    ({"at": "soon"}, "at 'soon' is neither"),
    ({"replica_map": {"x": ["a"]}}, "replica_map needs layout_hosts"),
    ({"load_csv": None, "prometheus_url": "http://127.0.0.1:9", "promql": {"read_iops": "x"}},
     "promql needs exactly the keys"),
    ({"prometheus_url": "http://127.0.0.1:9"}, "mutually exclusive"),
])
def test_bad_input(run, week_csv, change, match):
    args = base_args(week_csv)
    args.update(change)
    args = {k: v for k, v in args.items() if v is not None}
    res = run("gear_plan", args)
    assert res.failed and match in res["msg"], res["msg"]


def test_prometheus_unreachable_is_a_clear_error(run, week_csv):
    port = _closed_port()
    q = {m: "sum(rate(x_%s[1m]))" % m for m in gear.METRICS}
    args = base_args(None, prometheus_url="http://127.0.0.1:%d" % port, promql=q, prometheus_days=1)
    del args["load_csv"]
    res = run("gear_plan", args)
    assert res.failed and "cannot reach Prometheus at http://127.0.0.1:%d/api/v1/query_range" % port in res["msg"]


def test_year_of_history_under_two_seconds(run, tmp_path):
    """10,000 servers x one year of hourly fleet totals (8760 rows): the module's own timing < 2 s."""
    p = tmp_path / "year.csv"
    t0 = int(datetime(2023, 1, 1, tzinfo=timezone.utc).timestamp())
    with p.open("w") as fh:
        fh.write("timestamp,read_iops,write_iops,read_mbps,write_mbps\n")
        for i in range(8760):
            d = 1 + 0.8 * math.sin((i % 24 - 8) / 24 * 2 * math.pi)
            fh.write("%d,%.1f,%.1f,%.1f,%.1f\n" % (t0 + i * 3600, 8e5 * d, 2e5 * d, 3e4 * d, 1e4 * d))
    started = time.time()
    res = run("gear_plan", dict(CAPS, servers=10000, server_read_iops=250, server_write_iops=200,
                                server_read_mbps=110, server_write_mbps=90, load_csv=str(p), train_days=300,
                                date="2024-01-01"))
    wall = time.time() - started
    assert not res.failed, res.get("msg")
    assert res["input"]["samples"] == 8760 and res["input"]["days"] == 365
    assert res["elapsed_s"] < 2.0, res["elapsed_s"]
    assert res["evaluation"]["test_days"] == 65 and res["evaluation"]["gear_accuracy"] == 1.0
    print("gear_plan year: core %.3f s, whole ansible call %.2f s" % (res["elapsed_s"], wall))
