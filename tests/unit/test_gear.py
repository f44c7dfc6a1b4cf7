"""Unit tests of module_utils/fleetnap/gear.py (Sierra, sections 3.3, 3.4, 3.7, 4.1)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from urllib.error import HTTPError, URLError

import pytest

from ansible.module_utils.fleetnap import gear
from ansible.module_utils.fleetnap.gear import Capacity, GearError

# Capacities of one server for the hand-computed week: 100 read IOPS, 50 write IOPS,
# 10 read MB/s, 5 write MB/s. N = 30 servers, r = 3 groups of 10.
CAP = Capacity(100, 50, 10, 5)
N, R = 30, 3

# Base fleet totals per block of six hours: (read_iops, write_iops, read_mbps, write_mbps).
# Hand-computed L = max(ri/100 + 3*wi/50, rm/10 + 3*wm/5):
#   00-05: max(6 + 1.2, 3 + 1.2)   = 7.2  (IOPS term)  -> ceil(7.2/10)  = 1
#   06-11: max(9 + 6,   8 + 6)     = 15   (IOPS term)  -> ceil(15/10)   = 2
#   12-17: max(10 + 12, 15 + 12)   = 27   (MB/s term)  -> ceil(27/10)   = 3
#   18-23: max(7 + 3,   4 + 3)     = 10   (exactly one group) -> 1
BLOCKS = [(600, 20, 30, 2), (900, 100, 80, 10), (1000, 200, 150, 20), (700, 50, 40, 5)]
HAND_L = [7.2, 15.0, 27.0, 10.0]
# Day multipliers: days 0..5 (training) average exactly 1; day 6 (test) is 10 % above.
DAY_SCALE = [0.75, 0.85, 0.95, 1.05, 1.15, 1.25, 1.10]
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def write_week(path, stamp_styles=True):
    """Two samples per hour: at :10 one fifth of the base, at :40 the base (the hour's peak)."""
    lines = ["timestamp,read_iops,write_iops,read_mbps,write_mbps"]
    for day, scale in enumerate(DAY_SCALE):
        for hour in range(24):
            base = [v * scale for v in BLOCKS[hour // 6]]
            for minute, frac in ((10, 0.2), (40, 1.0)):
                t = START + timedelta(days=day, hours=hour, minutes=minute)
                style = (day * 24 + hour) % 3 if stamp_styles else 0
                if style == 0:
                    ts = str(int(t.timestamp()))
                elif style == 1:
                    ts = t.strftime("%Y-%m-%dT%H:%M:%SZ")
                else:  # the same instant written with a +02:00 offset
                    ts = (t.astimezone(timezone(timedelta(hours=2)))).isoformat()
                lines.append(",".join([ts] + ["%.6f" % (v * frac) for v in base]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def week(tmp_path):
    return gear.read_load_csv(str(write_week(tmp_path / "week.csv")), CAP, R)


# ---------------------------------------------------------------------------------------------
# Load metric and gear choice
# ---------------------------------------------------------------------------------------------

def test_load_metric_weights_writes_by_r():
    # 200 write IOPS on 50-IOPS servers with r=3 is 12 servers' worth; reads add 1.
    assert gear.load_metric(100, 200, 0, 0, CAP, 3) == pytest.approx(13.0)
    assert gear.load_metric(100, 200, 0, 0, CAP, 1) == pytest.approx(5.0)
    # The streaming term wins when it is larger.
    assert gear.load_metric(0, 0, 50, 10, CAP, 3) == pytest.approx(11.0)


@pytest.mark.parametrize("block,expected", list(zip(BLOCKS, HAND_L)))
def test_load_metric_hand_values(block, expected):
    assert gear.load_metric(*block, capacity=CAP, replicas=R) == pytest.approx(expected)


def test_gear_is_ceil_of_load_over_group_size_and_clamped():
    assert gear.choose_gear(0.0, N, R, 1) == 1          # no load -> gmin
    assert gear.choose_gear(9.99, N, R, 1) == 1
    assert gear.choose_gear(10.0, N, R, 1) == 1         # exactly one group
    assert gear.choose_gear(10.01, N, R, 1) == 2
    assert gear.choose_gear(20.5, N, R, 1) == 3
    assert gear.choose_gear(45.0, N, R, 1) == 3         # above N: clamped to r
    assert gear.choose_gear(3.0, N, R, 2) == 2          # gmin clamp
    assert gear.raw_gear(45.0, N, R) == 5


def test_gear_tolerates_float_rounding():
    load = 0.1 * 3 * 100 / 3 * 1.0  # 10.000000000000002 in binary floating point
    assert load != 10.0 and load * R / N > 1.0
    assert gear.raw_gear(load, N, R) == 1


@pytest.mark.parametrize("servers,replicas,gmin,word", [
    (30, 0, 1, "replicas"), (2, 3, 1, "servers"), (30, 3, 0, "gmin"), (30, 3, 4, "gmin"),
    (30, 3, True, "gmin"), (30.0, 3, 1, "servers"),
])
def test_validate_fleet_rejects(servers, replicas, gmin, word):
    with pytest.raises(GearError, match=word):
        gear.validate_fleet(servers, replicas, gmin)


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "100", None, True])
def test_capacity_rejects(bad):
    with pytest.raises(GearError, match="server_read_iops"):
        Capacity(bad, 1, 1, 1)


# ---------------------------------------------------------------------------------------------
# Rotation
# ---------------------------------------------------------------------------------------------

def test_rotation_on_a_known_date():
    # 2024-01-08 has proleptic ordinal 738893; 738893 % 3 = 2 -> order (3, 1, 2).
    d = date(2024, 1, 8)
    assert gear.rotation_offset(d, 3) == 2
    assert gear.rotation_order(d, 3) == [3, 1, 2]
    assert gear.groups_for(1, 3, d) == ([2], [1, 3])
    assert gear.groups_for(2, 3, d) == ([1, 2], [3])
    assert gear.groups_for(3, 3, d) == ([1, 2, 3], [])
    assert gear.groups_for(0, 3, d) == ([], [1, 2, 3])


def test_rotation_is_even_and_continuous_across_year_end():
    days = [date(2023, 12, 29) + timedelta(days=i) for i in range(6)]
    offsets = [gear.rotation_offset(d, 3) for d in days]
    assert all((b - a) % 3 == 1 for a, b in zip(offsets, offsets[1:]))  # no repeat at Jan 1
    for g in (1, 2):
        off_days = {k: 0 for k in (1, 2, 3)}
        for d in days:
            for grp in gear.groups_for(g, 3, d)[1]:
                off_days[grp] += 1
        assert len(set(off_days.values())) == 1, off_days  # every group off equally often


def test_groups_at_uses_the_local_date():
    moment = datetime(2024, 1, 7, 23, 30, tzinfo=timezone.utc)  # 00:30 on the 8th in Berlin
    d, hour, on, off = gear.groups_at(moment, 1, 3, gear.get_timezone("Europe/Berlin"))
    assert (d, hour, on, off) == (date(2024, 1, 8), 0, [2], [1, 3])
    d, hour, on, off = gear.groups_at(moment, 1, 3)
    assert (d, hour) == (date(2024, 1, 7), 23)
    assert on == gear.groups_for(1, 3, date(2024, 1, 7))[0]


def test_unknown_timezone():
    with pytest.raises(GearError, match="Mars/Olympus"):
        gear.get_timezone("Mars/Olympus")


# ---------------------------------------------------------------------------------------------
# Hand-computed week: peaks, prediction, schedule, evaluation
# ---------------------------------------------------------------------------------------------

def test_week_hourly_peak_not_mean(week):
    assert week.samples == 7 * 24 * 2
    assert len(week.peaks) == 7 * 24
    assert len(week.days()) == 7
    # Day 0 hour 7 (block 1, scale 0.75): the :40 sample is the peak, 15 * 0.75.
    bucket = gear.date_to_day(date(2024, 1, 1)) * 24 + 7
    assert week.peaks[bucket] == pytest.approx(11.25)


def test_week_formula_reproduced(week):
    res = gear.plan(week, N, R, 1, train_days=6, day=date(2024, 1, 8))
    rows = res["schedule"]
    assert [r["hour"] for r in rows] == list(range(24))
    # Prediction = mean over days 0..5 of the scaled peaks = the hand-computed L.
    for r in rows:
        assert r["predicted_load"] == pytest.approx(HAND_L[r["hour"] // 6])
    assert [r["gear"] for r in rows] == [1] * 6 + [2] * 6 + [3] * 6 + [1] * 6
    # 2024-01-08: order (3, 1, 2) -> gear 1 keeps group 2, gear 2 keeps 1 and 2.
    assert rows[0]["groups_on"] == [2] and rows[0]["groups_off"] == [1, 3]
    assert rows[6]["groups_on"] == [1, 2] and rows[6]["groups_off"] == [3]
    assert rows[12]["groups_on"] == [1, 2, 3] and rows[12]["groups_off"] == []
    assert not any(r["overloaded"] for r in rows)
    assert res["train_days"] == 6 and res["rotation_order"] == [3, 1, 2]

    ev = res["evaluation"]
    # Test day = 1.1 x base: actual L 7.92, 16.5, 29.7, 11 -> oracle gears 1, 2, 3, 2.
    assert ev["test_days"] == 1 and ev["test_hours"] == 24
    # RMS of 0.1*L over the 4 blocks = 0.1*sqrt((7.2^2+15^2+27^2+10^2)/4) = 1.66271
    assert ev["rms_error"] == pytest.approx(1.6627086, rel=1e-6)
    assert ev["mean_load"] == pytest.approx(16.28)
    assert ev["nrmse"] == pytest.approx(0.1021320, rel=1e-5)
    assert ev["gear_accuracy"] == pytest.approx(18 / 24)      # 18:00-23:00 predicted 1, oracle 2
    assert ev["under_provisioned_hours"] == 6
    assert ev["powered_fraction"] == pytest.approx((1 + 2 + 3 + 1) / 4 / 3)
    assert ev["oracle_powered_fraction"] == pytest.approx((1 + 2 + 3 + 2) / 4 / 3)


def test_week_gmin_two(week):
    res = gear.plan(week, N, R, 2, train_days=6, day=date(2024, 1, 8))
    assert [r["gear"] for r in res["schedule"]] == [2] * 12 + [3] * 6 + [2] * 6
    assert res["evaluation"]["gear_accuracy"] == pytest.approx(1.0)


def test_week_all_days_train_no_evaluation(week):
    res = gear.plan(week, N, R, 1, day=date(2024, 1, 8))
    assert res["evaluation"] is None and res["train_days"] == 7
    # Mean over 7 days of the scales = (6 + 1.1) / 7.
    assert res["schedule"][0]["predicted_load"] == pytest.approx(7.2 * 7.1 / 7)


def test_default_schedule_date_is_day_after_data(week):
    assert gear.plan(week, N, R, 1)["date"] == "2024-01-08"


def test_week_timezone_shifts_hours(tmp_path):
    path = str(write_week(tmp_path / "w.csv"))
    berlin = gear.read_load_csv(path, CAP, R, gear.get_timezone("Europe/Berlin"))
    res = gear.plan(berlin, N, R, 1, day=date(2024, 1, 8))
    # Berlin is UTC+1 in January: local hour h is UTC hour h-1, so the blocks shift by one.
    gears = [r["gear"] for r in res["schedule"]]
    assert gears[7:12] == [2] * 5 and gears[6] == 1 and gears[12] == 2 and gears[13] == 3
    # Data starts 00:10 UTC = 01:10 local on Jan 1 and ends 00:40 local on Jan 8: 8 local days.
    assert len(berlin.days()) == 8


def test_predict_needs_every_hour(tmp_path):
    p = tmp_path / "gap.csv"
    p.write_text("".join("%d,1,1,1,1\n" % (1704067200 + h * 3600) for h in range(24) if h != 5))
    peaks = gear.read_load_csv(str(p), CAP, R)
    with pytest.raises(GearError, match="05:00"):
        gear.plan(peaks, N, R, 1)


def test_train_days_beyond_data(week):
    with pytest.raises(GearError, match="covers only 7 day"):
        gear.plan(week, N, R, 1, train_days=8)


def test_overload_flagged(tmp_path):
    p = tmp_path / "hot.csv"
    p.write_text("".join("%d,5000,0,0,0\n" % (1704067200 + h * 3600) for h in range(24)))
    res = gear.plan(gear.read_load_csv(str(p), CAP, R), N, R, 1)
    assert all(r["overloaded"] and r["gear"] == 3 for r in res["schedule"])
    assert "exceeds the whole fleet" in gear.table(res["schedule"])


def test_table_has_24_rows(week):
    res = gear.plan(week, N, R, 1, train_days=6, day=date(2024, 1, 8))
    text = gear.table(res["schedule"], N, R)
    lines = text.splitlines()
    assert lines[0].split() == ["hour", "pred_load", "gear", "groups_on", "groups_off", "servers_on"]
    assert len(lines) == 2 + 24
    assert lines[2].split() == ["00:00", "7.20", "1", "2", "1,3", "10"]
    assert lines[2 + 12].split() == ["12:00", "27.00", "3", "1,2,3", "-", "30"]


# ---------------------------------------------------------------------------------------------
# CSV input errors and variants
# ---------------------------------------------------------------------------------------------

def test_csv_header_any_order_extra_columns(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("host_count,write_mbps,timestamp,read_mbps,write_iops,read_iops\n"
                 "9,5,2024-01-01T00:00:00Z,10,50,100\n")
    peaks = gear.read_load_csv(str(p), CAP, R)
    # max(1 + 3, 1 + 3) = 4
    assert list(peaks.peaks.values()) == [pytest.approx(4.0)]


@pytest.mark.parametrize("content,match", [
    ("timestamp,read_iops,write_iops\n1,2,3\n", "lacks column"),
    ("1704067200,1,2,x,4\n", "line 1: read_mbps is 'x'"),
    ("1704067200,1,2,3,4\n1704067260,1,-2,3,4\n", "line 2: write_iops is '-2'"),
    ("1704067200,1,2,3,nan\n", "write_mbps"),
    ("yesterday,1,2,3,4\n", "line 1: timestamp 'yesterday'"),
    ("1704067200,1,2\n", "3 column"),
    ("# only a comment\n\n", "no samples"),
])
def test_csv_errors(tmp_path, content, match):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(GearError, match=match):
        gear.read_load_csv(str(p), CAP, R)


def test_csv_missing_file(tmp_path):
    with pytest.raises(GearError, match="cannot read load_csv .*nope.csv"):
        gear.read_load_csv(str(tmp_path / "nope.csv"), CAP, R)


def test_naive_iso_is_wall_time_in_timezone(tmp_path):
    p = tmp_path / "n.csv"
    p.write_text("2024-07-01T13:15:00,100,0,0,0\n")
    ny = gear.read_load_csv(str(p), CAP, R, gear.get_timezone("America/New_York"))
    (bucket,) = ny.peaks
    assert bucket % 24 == 13 and gear.day_to_date(bucket // 24) == date(2024, 7, 1)


# ---------------------------------------------------------------------------------------------
# Prometheus JSON -> series (the HTTP path is only mocked for its error paths)
# ---------------------------------------------------------------------------------------------

def _matrix(*series):
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"instance": "s%d" % i}, "values": values} for i, values in enumerate(series)]}})


def test_prom_matrix_sums_series_and_skips_nan():
    text = _matrix([[1704067200, "10"], [1704067260, "NaN"]], [[1704067200, "5.5"], [1704067260, "2"]])
    assert gear.prom_matrix_to_series(text, "q") == {1704067200.0: 15.5, 1704067260.0: 2.0}


@pytest.mark.parametrize("payload,match", [
    ("not json", "not JSON"),
    (json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
     "bad_data: parse error"),
    (json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}), "matrix"),
    (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [{"values": [[1, "x"]]}]}}),
     "bad sample"),
])
def test_prom_matrix_errors(payload, match):
    with pytest.raises(GearError, match=match):
        gear.prom_matrix_to_series(payload, "sum(rate(x[1m]))")


def test_prom_windows_respect_point_limit():
    w = gear.prom_windows(0, 7 * 86400, 30)
    assert w[0][0] == 0 and w[-1][1] == 7 * 86400
    for a, b in w:
        assert (b - a) / 30 + 1 <= gear.PROM_MAX_POINTS
    for (a, b), (c, d) in zip(w, w[1:]):
        assert c == b + 30
    with pytest.raises(GearError, match="after"):
        gear.prom_windows(10, 5, 1)


def test_prom_fetch_error_paths():
    def http_error(req, timeout):
        raise HTTPError(req.full_url, 400, "Bad Request", {}, None)

    def refused(req, timeout):
        raise URLError(ConnectionRefusedError(111, "Connection refused"))

    with pytest.raises(GearError, match="HTTP 400"):
        gear.prom_fetch("http://prom:9090", "q", 0, 3600, 60, opener=http_error)
    with pytest.raises(GearError, match="cannot reach Prometheus at http://prom:9090/api/v1/query_range"):
        gear.prom_fetch("http://prom:9090/", "q", 0, 3600, 60, opener=refused)


def test_peaks_from_series_joins_and_drops():
    t0 = 1704067200.0
    series = {"read_iops": {t0: 100, t0 + 60: 300}, "write_iops": {t0: 0, t0 + 60: 0},
              "read_mbps": {t0: 0, t0 + 60: 0}, "write_mbps": {t0: 0}}
    peaks, dropped = gear.peaks_from_series(series, CAP, R)
    assert dropped == 1 and list(peaks.peaks.values()) == [pytest.approx(1.0)]
    with pytest.raises(GearError, match="promql.write_mbps"):
        gear.peaks_from_series(dict(series, write_mbps={}), CAP, R)


# ---------------------------------------------------------------------------------------------
# Layout checks (section 3.3, Figure 5)
# ---------------------------------------------------------------------------------------------

# Figure 5 of the paper: four racks (rows) of four servers, the digit is the gear group.
FIG5_ALIGNED = ["2222", "3333", "1111", "1111"]
FIG5_ROTATED = ["2312", "3123", "1231", "1231"]


def fig5_hosts(rows):
    return {"r%ds%d" % (i, j): {"gear_group": int(g), "rack": "rack%d" % i}
            for i, row in enumerate(rows) for j, g in enumerate(row)}


def test_layout_kinds_of_figure_5():
    kind, racks = gear.layout_kind(fig5_hosts(FIG5_ALIGNED), 3)
    assert kind == "rack-aligned" and racks["rack0"] == [2]
    kind, racks = gear.layout_kind(fig5_hosts(FIG5_ROTATED), 3)
    assert kind == "rotated" and all(v == [1, 2, 3] for v in racks.values())
    kind, _ = gear.layout_kind(fig5_hosts(["1122", "3333"]), 3)
    assert kind == "mixed"
    hosts = fig5_hosts(FIG5_ALIGNED)
    hosts["r0s0"].pop("rack")
    assert gear.layout_kind(hosts, 3)[0] == "unknown"


def test_groups_non_empty_and_valid():
    hosts = fig5_hosts(["11", "22"])
    hosts["odd"] = {"gear_group": 4, "rack": "x"}
    hosts["none"] = {"rack": "x"}
    groups, violations = gear.check_groups(hosts, 3)
    kinds = sorted((v["kind"], v.get("host", v.get("group"))) for v in violations)
    assert kinds == [("bad_gear_group", "odd"), ("empty_group", 3), ("no_gear_group", "none")]
    assert groups[1] == ["r0s0", "r0s1"]
    assert gear.check_groups(fig5_hosts(FIG5_ROTATED), 3)[1] == []


def test_replica_map_sierra_layout_has_no_violations():
    hosts = fig5_hosts(FIG5_ROTATED)
    by_group = {g: sorted(h for h, i in hosts.items() if i["gear_group"] == g) for g in (1, 2, 3)}
    replica_map = {"chunk%d" % k: [by_group[g][k % len(by_group[g])] for g in (1, 2, 3)]
                   for k in range(20)}
    assert gear.check_replica_map(replica_map, hosts, 3, 1) == []


def test_replica_map_violations_hand_checked():
    hosts = {"a": {"gear_group": 1}, "b": {"gear_group": 2}, "c": {"gear_group": 3}}
    # Gear 1 keeps only the last group of the order: offset 0 -> 3, 1 -> 1, 2 -> 2.
    # Gear 2 keeps the last two: offset 0 -> {2,3}, 1 -> {3,1}, 2 -> {1,2}.
    replica_map = {"x": ["a", "b"], "y": ["a"], "z": ["a", "b", "c"], "w": ["a", "ghost"]}
    v = gear.check_replica_map(replica_map, hosts, 3, 1)
    got = sorted((x["item"], x.get("gear", 0), x.get("rotation", -1), x["kind"]) for x in v)
    assert got == sorted([
        ("x", 1, 0, "no_active_copy"),
        ("y", 1, 0, "no_active_copy"), ("y", 1, 2, "no_active_copy"), ("y", 2, 0, "no_active_copy"),
        ("w", 0, -1, "unknown_host"),
        ("w", 1, 0, "no_active_copy"), ("w", 1, 2, "no_active_copy"), ("w", 2, 0, "no_active_copy"),
    ])
    x = [e for e in v if e["item"] == "x"][0]
    assert x["groups_off"] == [1, 2] and x["hosts"] == ["a", "b"] and x["active"] == []
    # gmin 2 removes the gear-1 violations.
    v2 = gear.check_replica_map(replica_map, hosts, 3, 2)
    assert sorted((e["item"], e.get("gear", 0)) for e in v2) == [("w", 0), ("w", 2), ("y", 2)]
    # Two active copies required: z still fine in gear 2 but not in gear 1.
    v3 = gear.check_replica_map({"z": ["a", "b", "c"]}, hosts, 3, 1, min_copies=2)
    assert sorted((e["gear"], e["rotation"]) for e in v3) == [(1, 0), (1, 1), (1, 2)]


def test_check_layout_combines():
    out = gear.check_layout(fig5_hosts(FIG5_ALIGNED), 3, 1, {"k": ["r0s0"]})
    assert out["kind"] == "rack-aligned"
    assert {v["kind"] for v in out["violations"]} == {"no_active_copy"}
    # r0s0 is in group 2: off in gear 1 at offsets 0 and 1, in gear 2 at offset 1.
    assert sorted((v["gear"], v["rotation"]) for v in out["violations"]) == [(1, 0), (1, 1), (2, 1)]


def test_prom_range_end_is_exclusive():
    # Midnight to midnight at 5 minutes: 288 points, the last at 23:55 (Prometheus would answer
    # the point at midnight with the 23:55 sample and invent an hour of the next day).
    day = 1735689600
    assert gear.prom_last_point(day, day + 86400, 300) == day + 86400 - 300
    assert gear.prom_last_point(day, day + 86400 - 1, 300) == day + 86400 - 300
    assert gear.prom_last_point(day, day + 86400 + 1, 300) == day + 86400
    assert gear.prom_last_point(day, day + 1, 300) == day
    with pytest.raises(GearError, match=r"prometheus_end \(2025-01-01T00:00:00\+00:00\) must be after"):
        gear.prom_last_point(day, day, 60)
    with pytest.raises(GearError, match="prometheus_step must be > 0"):
        gear.prom_last_point(day, day + 60, 0)


@pytest.mark.parametrize("days,step,windows", [(28, 60, 4), (28, 300, 1), (42, 300, 2), (7, 55, 1), (8, 60, 2)])
def test_prom_windows_chunk_long_ranges(days, step, windows):
    start = 1735689600
    last = gear.prom_last_point(start, start + days * 86400, step)
    w = gear.prom_windows(start, last, step)
    assert len(w) == windows
    points = []
    for a, b in w:
        # Prometheus refuses (end - start) / step > 11,000.
        assert (b - a) / step <= 11000
        points.extend(range(a, b + 1, step))
    # Every point of the grid exactly once, in order, none at or after the end.
    assert points == list(range(start, last + 1, step))
    assert points[-1] < start + days * 86400


def test_prom_matrix_rejects_inf_and_negative():
    with pytest.raises(GearError, match=r"returned '\+Inf' at 2024-01-01T00:00:00\+00:00"):
        gear.prom_matrix_to_series(_matrix([[1704067200, "+Inf"]]), "sum(x) / 0")
    with pytest.raises(GearError, match="finite and >= 0"):
        gear.prom_matrix_to_series(_matrix([[1704067200, "-3"]]), "deriv(x[5m])")


def test_prom_fetch_http_error_shows_the_api_error():
    import io

    def bad_query(req, timeout):
        body = b'{"status":"error","errorType":"bad_data","error":"1:15: parse error: unclosed left parenthesis"}'
        raise HTTPError(req.full_url, 400, "Bad Request", {}, io.BytesIO(body))

    with pytest.raises(GearError, match="HTTP 400 for 'sum\\(x': bad_data: 1:15: parse error: unclosed"):
        gear.prom_fetch("http://prom:9090", "sum(x", 0, 3600, 60, opener=bad_query)


# --- the day's changes and the units to remove (gear_schedule's decisions, issue 36) -------------

ROWS = [{"hour": h, "gear": g, "groups_on": list(range(1, g + 1)), "predicted_load": float(g)}
        for h, g in enumerate([1] * 6 + [2] * 6 + [3] * 6 + [1] * 6)]


def test_day_changes_are_hour_zero_and_every_new_gear_with_unit_and_cron_line():
    out = gear.day_changes(ROWS, "2030-06-15", "fleetnap-gear", "cd /x && ap shift.yml -e gear_shift_date=2030-06-15")
    assert [(c["hour"], c["gear"]) for c in out] == [(0, 1), (6, 2), (12, 3), (18, 1)]
    assert out[2]["unit"] == "fleetnap-gear-20300615-12" and out[2]["cron"] == "0 12 15 6 *"
    assert out[2]["cron_line"] == "0 12 15 6 * root cd /x && ap shift.yml -e gear_shift_date=2030-06-15 -e gear_shift_gear=3"
    bare = gear.day_changes(ROWS, "2030-06-15")
    assert "unit" not in bare[0] and "cron_line" not in bare[0]
    assert gear.day_changes([dict(r, gear=2) for r in ROWS], "2030-06-15") == [dict(bare[0], gear=2)]


def test_stale_units_are_past_days_and_this_days_no_longer_planned_never_today_or_later_or_others():
    changes = gear.day_changes(ROWS, "2030-06-15", "fg")
    d = "/etc/systemd/system/"
    found = [d + n for n in ("fg-20300615-00.timer", "fg-20300615-03.service", "fg-20300615-03.timer",
                             "fg-20300614-06.timer", "fg-20300616-06.timer", "fg-20300613-00.service",
                             "fg-x-20300601-01.timer", "other-20200101-00.timer", "fg-20200101-00.conf")]
    stale = gear.stale_units(found, "fg", "2030-06-15", changes, "2030-06-14")
    assert stale == [d + n for n in ("fg-20300613-00.service", "fg-20300615-03.service", "fg-20300615-03.timer")]
    # run on the day itself: that day's planned units stay, the day before goes
    stale = gear.stale_units(found, "fg", "2030-06-15", changes, "2030-06-15")
    assert d + "fg-20300614-06.timer" in stale and d + "fg-20300615-00.timer" not in stale
