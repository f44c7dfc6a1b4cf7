"""gear_plan against a real Prometheus holding backfilled load history.

Four weeks of deterministic, diurnal fleet load at 5-minute sampling are written twice: as the
CSV gear_plan reads, and as OpenMetrics text (three hosts per metric, whose sum is the fleet
total) that ``promtool tsdb create-blocks-from openmetrics`` turns into TSDB blocks. A
Prometheus (Debian package ``prometheus``) serves those blocks on a free loopback port with no
scrape targets; gear_plan runs through Ansible once on the CSV and once on PromQL range queries
over the same time range, and the two schedules and evaluations must be identical.

Caveats handled here:

- retention: the history spans four weeks of 2025; ``--storage.tsdb.retention.time=10y`` keeps
  every backfilled block (the default is 15 days);
- block size: ``--max-block-duration`` lets promtool write a few large blocks instead of one per
  2 hours of history;
- staleness: a range query at time t returns the newest sample in the lookback window (5 min by
  default). With 5-minute samples and a step of 300 s aligned on them, every step returns exactly
  the stored sample; with the default step of 60 s each sample is returned five times (same
  peaks). The range ends at midnight after the last sample and gear_plan treats the end as
  exclusive: at midnight itself Prometheus would still return the 23:55 sample and invent an
  hour on the next day;
- the 11,000-points limit: at step 60 s four weeks are 40,320 points per series, which
  gear_plan must split into four windows (counted in Prometheus's own request metrics);
- time zones: Prometheus speaks Unix seconds; the CSV carries ISO 8601 with ``Z``.

Values are multiples of 1/4 per host so the sum over hosts is exact in binary floating point and
both inputs give bit-identical loads.

The same Prometheus also holds a week of node_exporter-style disk counters scraped every minute;
the PromQL of the module's EXAMPLES (``sum(rate(node_disk_..._total[5m]))``, bytes ``/ 1e6``)
must give the plan of the CSV of the rates those counters were built from.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from ansible.module_utils.fleetnap import gear

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL),
    reason="needs the prometheus and promtool binaries (Debian package prometheus; make setup installs it)")

START = datetime(2025, 1, 6, tzinfo=timezone.utc)  # a Monday
DAYS = 28
TRAIN_DAYS = 21
INTERVAL = 300
HOSTS = ("store-01", "store-02", "store-03")
HOST_SHARE = (0.5, 0.3, 0.2)
# Fleet peak rates; the diurnal curve scales them between about 10 % and 100 %.
PEAK = {"read_iops": 6000.0, "write_iops": 1500.0, "read_mbps": 500.0, "write_mbps": 120.0}
CAPS = {"server_read_iops": 250, "server_write_iops": 200, "server_read_mbps": 110, "server_write_mbps": 90}
PROM_NAME = {m: "fleetnap_load_%s" % m for m in gear.METRICS}


def _quarter(x):
    return math.floor(x * 4) / 4.0


def fleet_history():
    """[(unix_seconds, {metric: [per-host value]})], deterministic, diurnal with weekly shape."""
    rows = []
    n = DAYS * 86400 // INTERVAL
    t0 = int(START.timestamp())
    for i in range(n):
        ts = t0 + i * INTERVAL
        when = START + timedelta(seconds=i * INTERVAL)
        hour = when.hour + when.minute / 60.0
        diurnal = 0.55 - 0.45 * math.cos((hour - 3.0) / 24.0 * 2 * math.pi)  # low at 03:00, peak 15:00
        weekly = 0.7 if when.weekday() >= 5 else 1.0
        # Deterministic "noise": slow beat between two incommensurate periods, +-15 %.
        wobble = 1.0 + 0.15 * math.sin(i * 0.37) * math.cos(i * 0.011)
        level = max(0.05, diurnal * weekly * wobble)
        vals = {}
        for k, m in enumerate(gear.METRICS):
            phase = 1.0 + 0.05 * math.sin(i * 0.05 + k)
            total = PEAK[m] * level * phase
            vals[m] = [_quarter(total * share) for share in HOST_SHARE]
        rows.append((ts, vals))
    return rows


def _fmt(x):
    return repr(float(x))


def write_csv(rows, path):
    with open(path, "w") as fh:
        fh.write("timestamp,read_iops,write_iops,read_mbps,write_mbps\n")
        for ts, vals in rows:
            iso = datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            fh.write(",".join([iso] + [_fmt(sum(vals[m])) for m in gear.METRICS]) + "\n")


def write_openmetrics(rows, path, extra=None):
    """OpenMetrics text: one gauge family per metric, one series per host, timestamps in seconds."""
    with open(path, "w") as fh:
        for k, m in enumerate(gear.METRICS):
            name = PROM_NAME[m]
            fh.write("# HELP %s Fleet load history (%s) per storage host.\n" % (name, m))
            fh.write("# TYPE %s gauge\n" % name)
            for h, host in enumerate(HOSTS):
                for ts, vals in rows:
                    fh.write('%s{instance="%s",job="storage"} %s %d\n' % (name, host, _fmt(vals[m][h]), ts))
        if extra:
            extra(fh)
        fh.write("# EOF\n")


# node_exporter-style disk counters of the same hosts, scraped every minute for one week. Each host
# has a constant integer rate (per second) within every 5-minute block (t-300, t] ending on a
# multiple of 300 s, so sum(rate(...[5m])) at the block ends is exactly the sum of those rates
# (no extrapolation: the window starts and ends on a scrape). The CSV holds the same fleet rates.
COUNTER_DAYS = 7
COUNTER_TRAIN_DAYS = 5
SCRAPE = 60
COUNTERS = {"read_iops": ("node_disk_reads_completed", 1), "write_iops": ("node_disk_writes_completed", 1),
            "read_mbps": ("node_disk_read_bytes", 10 ** 6), "write_mbps": ("node_disk_written_bytes", 10 ** 6)}
NODE_PROMQL = {
    "read_iops": 'sum(rate(node_disk_reads_completed_total{job="storage",device=~"sd.+"}[5m]))',
    "write_iops": 'sum(rate(node_disk_writes_completed_total{job="storage",device=~"sd.+"}[5m]))',
    "read_mbps": 'sum(rate(node_disk_read_bytes_total{job="storage",device=~"sd.+"}[5m])) / 1e6',
    "write_mbps": 'sum(rate(node_disk_written_bytes_total{job="storage",device=~"sd.+"}[5m])) / 1e6',
}


def counter_history():
    """(block rates [(block end, {metric: [per-host int rate per second]})], scrapes per host).

    The first block ends at START, so the blocks cover [START, START + 7 days) in hours of data.
    """
    t0 = int(START.timestamp())
    blocks = []
    for b in range(COUNTER_DAYS * 86400 // INTERVAL):
        end = t0 + b * INTERVAL
        when = START + timedelta(seconds=b * INTERVAL)
        hour = when.hour + when.minute / 60.0
        level = 0.55 - 0.45 * math.cos((hour - 3.0) / 24.0 * 2 * math.pi)
        level *= (0.7 if when.weekday() >= 5 else 1.0) * (1.0 + 0.15 * math.sin(b * 0.37))
        rates = {}
        for m in gear.METRICS:
            unit = COUNTERS[m][1]
            rates[m] = [int(PEAK[m] * unit * level * share) for share in HOST_SHARE]
        blocks.append((end, rates))
    return blocks


def write_counter_csv(blocks, path):
    with open(path, "w") as fh:
        fh.write("timestamp,read_iops,write_iops,read_mbps,write_mbps\n")
        for end, rates in blocks:
            vals = [float(sum(rates[m])) / COUNTERS[m][1] for m in gear.METRICS]
            fh.write(",".join(["%d" % end] + [_fmt(v) for v in vals]) + "\n")


def write_counter_openmetrics(blocks, fh):
    """Counters scraped every minute from one block before START (value 0) to the last block end."""
    for m in gear.METRICS:
        family = COUNTERS[m][0]
        fh.write("# HELP %s Counter of the disk (node_exporter diskstats).\n" % family)
        fh.write("# TYPE %s counter\n" % family)
        for h, host in enumerate(HOSTS):
            value = 0
            ts = blocks[0][0] - INTERVAL
            lines = ['%s_total{device="sda",instance="%s",job="storage"} %d %d\n' % (family, host, value, ts)]
            for end, rates in blocks:
                while ts < end:
                    ts += SCRAPE
                    value += rates[m][h] * SCRAPE
                    lines.append('%s_total{device="sda",instance="%s",job="storage"} %d %d\n'
                                 % (family, host, value, ts))
            assert value < 2 ** 53  # exact in float64
            fh.write("".join(lines))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    base = tmp_path_factory.mktemp("promhist")
    rows = fleet_history()
    csv_path = base / "load.csv"
    om_path = base / "load.om"
    blocks = counter_history()
    counter_csv = base / "node_disk.csv"
    write_csv(rows, csv_path)
    write_counter_csv(blocks, counter_csv)
    write_openmetrics(rows, om_path, extra=lambda fh: write_counter_openmetrics(blocks, fh))
    return {"dir": base, "rows": rows, "csv": str(csv_path), "openmetrics": str(om_path),
            "first": rows[0][0], "last": rows[-1][0], "counter_csv": str(counter_csv), "blocks": blocks}


@pytest.fixture(scope="module")
def prometheus(history):
    base = history["dir"]
    data = base / "tsdb"
    data.mkdir()
    started = time.time()
    # promtool cuts 2-hour blocks by default and re-reads the whole input for each of them (48 s
    # here for 336 blocks); --max-block-duration (a hidden flag in 2.42) makes two blocks in 0.7 s.
    backfill = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                               "--max-block-duration=%dh" % (DAYS * 24 + 48), history["openmetrics"], str(data)],
                              capture_output=True, text=True, timeout=300)
    assert backfill.returncode == 0, "promtool backfill failed:\n%s\n%s" % (backfill.stdout, backfill.stderr)
    backfill_s = time.time() - started
    config = base / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = _free_port()
    url = "http://127.0.0.1:%d" % port
    log = open(base / "prometheus.log", "w")
    proc = subprocess.Popen(
        [PROMETHEUS, "--config.file=%s" % config, "--storage.tsdb.path=%s" % data,
         "--storage.tsdb.retention.time=10y", "--web.listen-address=127.0.0.1:%d" % port,
         "--query.lookback-delta=5m"],
        stdout=log, stderr=subprocess.STDOUT, cwd=str(base), start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError("prometheus exited with %s:\n%s" % (proc.returncode,
                                                                         (base / "prometheus.log").read_text()[-3000:]))
            try:
                status, _ = _get(url + "/-/ready")
                if status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise AssertionError("prometheus not ready after 120 s:\n%s"
                                     % (base / "prometheus.log").read_text()[-3000:])
            time.sleep(0.2)
        yield {"url": url, "proc": proc, "backfill_s": backfill_s, "ready_s": time.time() - started}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        assert proc.poll() is not None


def _iso(ts):
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan_args(**kw):
    args = dict(CAPS, servers=60, replicas=3, gmin=1, train_days=TRAIN_DAYS, date="2025-02-03",
                at="2025-02-03T13:20:00Z")
    args.update(kw)
    return args


def prom_args(prometheus, history, **kw):
    args = dict(prometheus_url=prometheus["url"], promql={m: "sum(%s)" % PROM_NAME[m] for m in gear.METRICS},
                prometheus_start=_iso(history["first"]), prometheus_end=_iso(history["last"] + INTERVAL))
    args.update(kw)
    return plan_args(**args)


def _query_range_requests(prometheus):
    """Successful /api/v1/query_range calls so far, from Prometheus's own /metrics."""
    _, body = _get(prometheus["url"] + "/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query_range"' in line \
                and 'code="200"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _comparable(res):
    return {k: res[k] for k in ("schedule", "evaluation", "date", "rotation_order", "now")}


def test_backfilled_series_are_served_as_stored(prometheus, history):
    """A range query at the sampling interval returns exactly the backfilled values (sum of hosts)."""
    rows = history["rows"]
    ts = rows[1234][0]
    got = gear.prom_fetch(prometheus["url"], "sum(%s)" % PROM_NAME["read_iops"], ts, ts + 3 * INTERVAL, INTERVAL)
    assert got == {float(rows[i][0]): sum(rows[i][1]["read_iops"]) for i in (1234, 1235, 1236)}


def test_prometheus_carries_the_last_sample_past_the_data(prometheus, history):
    """Why gear_plan's range end is exclusive: at midnight Prometheus still answers with 23:55's sample."""
    last_ts, last_vals = history["rows"][-1]
    query = urllib.parse.urlencode({"query": "sum(%s)" % PROM_NAME["read_iops"], "time": last_ts + INTERVAL})
    status, body = _get(prometheus["url"] + "/api/v1/query?" + query)
    result = json.loads(body)["data"]["result"]
    assert status == 200 and float(result[0]["value"][1]) == sum(last_vals["read_iops"])
    got = gear.prom_fetch(prometheus["url"], "sum(%s)" % PROM_NAME["read_iops"], last_ts - 3600,
                          last_ts + INTERVAL, 60)
    assert max(got) == last_ts + INTERVAL - 60 and len(got) == 65


@pytest.mark.parametrize("step", [INTERVAL, 60])
def test_prometheus_schedule_equals_csv(module_runner, prometheus, history, step):
    from_csv = module_runner("gear_plan", plan_args(load_csv=history["csv"]))
    assert not from_csv.failed, from_csv.get("msg")
    before = _query_range_requests(prometheus)
    from_prom = module_runner("gear_plan", prom_args(prometheus, history, prometheus_step=step))
    assert not from_prom.failed, from_prom.get("msg")
    # 40,320 points at 60 s need four windows of <= 11,000 per metric; 8,064 at 300 s need one.
    assert _query_range_requests(prometheus) - before == 4 * (4 if step == 60 else 1)
    # The history must exercise the whole gear range, or equality proves little.
    gears = {row["gear"] for row in from_csv["schedule"]}
    assert gears == {1, 2, 3}
    assert from_csv["evaluation"]["test_days"] == DAYS - TRAIN_DAYS
    assert _comparable(from_prom) == _comparable(from_csv)
    assert from_prom["input"]["hours_with_data"] == from_csv["input"]["hours_with_data"] == DAYS * 24
    assert from_prom["input"]["dropped_samples"] == 0
    n = DAYS * 86400 // INTERVAL
    assert from_csv["input"]["samples"] == n
    # Step 60 s returns each 5-minute sample five times (lookback); the end is exclusive, so the
    # last sample is not carried to midnight, which would invent an hour on a 29th day.
    assert from_prom["input"]["samples"] == n * INTERVAL // step


def test_prometheus_schedule_equals_csv_in_a_timezone(module_runner, prometheus, history):
    tz = dict(timezone="America/New_York", date="2025-02-03", at="2025-02-03T13:20:00-05:00", train_days=20)
    from_csv = module_runner("gear_plan", plan_args(load_csv=history["csv"], **tz))
    from_prom = module_runner("gear_plan", prom_args(prometheus, history, prometheus_step=INTERVAL, **tz))
    assert not from_csv.failed and not from_prom.failed, (from_csv.get("msg"), from_prom.get("msg"))
    assert _comparable(from_prom) == _comparable(from_csv)


def test_node_exporter_rates_equal_csv(module_runner, prometheus, history):
    """The PromQL of the module's EXAMPLES (rate over node_exporter disk counters) gives the CSV's plan."""
    blocks = history["blocks"]
    args = dict(train_days=COUNTER_TRAIN_DAYS, date="2025-01-13", at="2025-01-13T09:00:00Z")
    from_csv = module_runner("gear_plan", plan_args(load_csv=history["counter_csv"], **args))
    assert not from_csv.failed, from_csv.get("msg")
    from_prom = module_runner("gear_plan", plan_args(
        prometheus_url=prometheus["url"], promql=NODE_PROMQL, prometheus_start=_iso(blocks[0][0]),
        prometheus_end=_iso(blocks[-1][0] + INTERVAL), prometheus_step=INTERVAL, **args))
    assert not from_prom.failed, from_prom.get("msg")
    assert {row["gear"] for row in from_csv["schedule"]} == {1, 2, 3}
    assert from_csv["evaluation"]["test_days"] == COUNTER_DAYS - COUNTER_TRAIN_DAYS
    assert _comparable(from_prom) == _comparable(from_csv)
    assert from_prom["input"]["samples"] == from_csv["input"]["samples"] == len(blocks)
    assert from_prom["input"]["dropped_samples"] == 0


def test_bad_promql_names_the_query(module_runner, prometheus, history):
    promql = {m: "sum(%s)" % PROM_NAME[m] for m in gear.METRICS}
    promql["read_mbps"] = "sum(rate(node_disk_read_bytes_total[5m]) / 1e6"
    res = module_runner("gear_plan", prom_args(prometheus, history, promql=promql))
    assert res.failed
    assert res["msg"].startswith("promql.read_mbps: Prometheus at %s/api/v1/query_range answered HTTP 400"
                                 % prometheus["url"])
    assert "bad_data: " in res["msg"] and "parse error" in res["msg"] and promql["read_mbps"] in res["msg"]


def test_unknown_metric_says_no_samples(module_runner, prometheus, history):
    promql = {m: "sum(%s)" % PROM_NAME[m] for m in gear.METRICS}
    promql["write_mbps"] = "sum(fleetnap_no_such_metric)"
    res = module_runner("gear_plan", prom_args(prometheus, history, promql=promql))
    assert res.failed and "promql.write_mbps" in res["msg"]


def test_bad_range_is_refused_before_any_query(module_runner, prometheus, history):
    before = _query_range_requests(prometheus)
    res = module_runner("gear_plan", prom_args(prometheus, history, prometheus_step=0))
    assert res.failed and res["msg"] == "option prometheus_step: must be >= 1 and <= 86400, got 0"
    res = module_runner("gear_plan", prom_args(prometheus, history, prometheus_start="2025-02-03T00:00:00Z",
                                               prometheus_end="2025-01-06T00:00:00Z"))
    assert res.failed
    assert res["msg"] == ("prometheus_end (2025-01-06T00:00:00+00:00) must be after "
                          "prometheus_start (2025-02-03T00:00:00+00:00)")
    assert _query_range_requests(prometheus) == before


def _schedule_playbook(tmp_path, *extra):
    from conftest import REPO, VENV_BIN
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(REPO / "playbooks/gear_schedule.yml"),
           "-e", "gear_shift_servers=60", "-e", "gear_shift_replicas=3", "-e", "gear_schedule_train_days=%d" % COUNTER_TRAIN_DAYS,
           "-e", "gear_schedule_date=2025-01-13", "-e", "gear_schedule_dry_run=true",
           "-e", "gear_schedule_unit_dir=%s" % (tmp_path / "units"),
           *[a for k, v in CAPS.items() for a in ("-e", "gear_shift_%s=%s" % (k, v))], *extra]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    changes = [ln.strip().strip('",') for ln in proc.stdout.splitlines() if "Changes: " in ln]
    assert len(changes) == 1, proc.stdout[-3000:]
    return changes[0]


def test_gear_schedule_playbook_from_prometheus_equals_csv(prometheus, history, tmp_path):
    """gear_schedule.yml with gear_shift_prometheus_url and its default PromQL (node_exporter disk
    counters) prints the same gear changes as with the CSV of the same rates."""
    blocks = history["blocks"]
    from_csv = _schedule_playbook(tmp_path, "-e", "gear_shift_load_csv=%s" % history["counter_csv"])
    from_prom = _schedule_playbook(
        tmp_path, "-e", "gear_shift_prometheus_url=%s" % prometheus["url"],
        "-e", "gear_shift_prometheus_start=%s" % _iso(blocks[0][0]),
        "-e", "gear_shift_prometheus_end=%s" % _iso(blocks[-1][0] + INTERVAL), "-e", "gear_shift_prometheus_step=%d" % INTERVAL)
    assert from_prom == from_csv
    assert len(from_csv.split("->")) > 2, from_csv   # the day has gear changes, or equality proves little
    assert not (tmp_path / "units").exists()
