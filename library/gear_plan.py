#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_plan
short_description: Plan a day of Sierra gear shifts from a fleet's load history
description:
  - Computes Sierra's load metric (Thereska et al., EuroSys 2011, section 3.4) from fleet-wide
    read/write IOPS and MB/s, takes the peak of every hour, predicts each hour of the day as the
    mean of the same hour over the training days and chooses the lowest gear
    g = ceil(L / (N/r)) that carries it, never below O(gmin) (section 3.7) nor above O(replicas).
  - Gear groups are numbered 1..r. On a local date d the group order is rotated by
    d.toordinal() mod r; in gear g the first r-g groups of that order are powered off.
  - When O(train_days) leaves days to test on, returns the section 4.1 evaluation, RMS error
    normalised by the mean load, gear accuracy against the oracle gear and the fraction of
    server-hours powered.
  - Optionally checks the inventory layout (every gear group non-empty, rack-aligned or rotated
    layout) and a replica map (every item keeps an active copy in every gear >= gmin and every
    rotation).
  - Runs on the controller (C(delegate_to=localhost), C(run_once=true)); it reads a CSV or a
    Prometheus server and changes nothing.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  servers:
    description: Number of storage servers N in the fleet (all gear groups together).
    type: int
    required: true
  replicas:
    description: Replication factor r, which is also the number of gear groups.
    type: int
    default: 3
  gmin:
    description:
      - Lowest gear allowed. Sierra suggests 1 for savings and 2 for availability.
      - Must be between 1 and O(replicas); gear 0 would leave items without a copy.
    type: int
    default: 1
  server_read_iops:
    description: Random reads per second one server sustains (benchmarked).
    type: float
    required: true
  server_write_iops:
    description: Random writes per second one server sustains.
    type: float
    required: true
  server_read_mbps:
    description: Streaming read MB/s one server sustains.
    type: float
    required: true
  server_write_mbps:
    description: Streaming write MB/s one server sustains.
    type: float
    required: true
  train_days:
    description:
      - Use the first O(train_days) days of the data to predict; the remaining days are the test
        period of RV(evaluation).
      - Omitted or V(0) means all days train and there is no evaluation.
    type: int
  load_csv:
    description:
      - CSV of fleet totals with columns C(timestamp), C(read_iops), C(write_iops), C(read_mbps),
        C(write_mbps), at any sampling interval. A header row (any column order, extra columns
        ignored) is optional.
      - Timestamps are Unix seconds or ISO 8601. ISO timestamps without an offset are wall time in
        O(timezone).
    type: path
  prometheus_url:
    description: Base URL of a Prometheus server (for example V(http://prometheus:9090)).
    type: str
  promql:
    description:
      - Four PromQL expressions giving the fleet totals, keyed C(read_iops), C(write_iops),
        C(read_mbps), C(write_mbps). Several series in an answer are summed.
      - 'With node_exporter on every storage server: "sum(rate(node_disk_reads_completed_total[5m]))"
        for read IOPS, "sum(rate(node_disk_read_bytes_total[5m])) / 1e6" for read MB/s, and the
        C(writes_completed) and C(written_bytes) counterparts. Filter devices and hosts with
        label matchers (for example C({job="storage",device=~"sd.+"})).'
      - Run through C(/api/v1/query_range), split into windows of at most 11,000 points (the
        limit Prometheus enforces per series and query).
      - Values must be finite and >= 0; NaN points (no data) are skipped.
    type: dict
  prometheus_start:
    description:
      - Start of the range (ISO 8601 or Unix seconds), the first point. Default O(prometheus_days)
        before the end.
    type: str
  prometheus_end:
    description:
      - End of the range (ISO 8601 or Unix seconds), exclusive. Default now.
      - The points are O(prometheus_start) + k * O(prometheus_step) strictly before the end. Prometheus
        answers a point with the newest sample of the lookback window before it (5 minutes by
        default), so a point at the end would repeat the last sample and, for a range ending at
        midnight, add an hour of the next day.
    type: str
  prometheus_days:
    description: Length of the default range in days, 1 to 366.
    type: int
    default: 7
  prometheus_step:
    description:
      - Query resolution in seconds (the peak of each hour is taken over these points).
      - Use the scrape (or sampling) interval or a divisor of it, and a C(rate()) window of at least
        twice the scrape interval. A step longer than the lookback delta (5 minutes by default) skips
        samples and can miss peaks.
    type: int
    default: 60
  prometheus_timeout:
    description: Seconds to wait for each HTTP answer.
    type: float
    default: 30
  prometheus_token:
    description: Bearer token for Prometheus, if it needs one.
    type: str
  timezone:
    description: IANA time zone whose local hours the schedule uses (for example V(Europe/Berlin)).
    type: str
    default: UTC
  date:
    description: Local date (YYYY-MM-DD) the schedule's rotation is for. Default the date of O(at).
    type: str
  at:
    description:
      - The moment RV(now) describes (ISO 8601 or Unix seconds). Default the controller's clock.
      - The gear-shift playbook uses RV(now) to know which groups must be on.
    type: str
  layout_hosts:
    description:
      - Hosts of the fleet, name -> C({gear_group, rack}), usually built from C(hostvars)
        (C(fleetnap_gear_group), C(fleetnap_rack)). Enables the layout checks of RV(layout).
    type: dict
  replica_map:
    description: Item -> list of hosts holding a copy. Checked for every gear >= O(gmin) and every rotation.
    type: dict
  min_copies:
    description: Active copies every item must keep in every allowed gear.
    type: int
    default: 1
  fail_on_layout_violations:
    description: Fail when the layout checks find violations (they are returned either way).
    type: bool
    default: true
  unit_prefix:
    description:
      - Name the systemd units of each gear change in RV(changes) (C(PREFIX-YYYYMMDD-HH)), as the
        gear_schedule role installs them. Lower-case letters, digits and C(-), at most 64.
    type: str
  cron_command:
    description:
      - The command each gear change runs from cron (the shift, with the date); RV(changes) then has
        C(cron_line), the line for C(/etc/cron.d) with C(-e gear_shift_gear=N) appended.
      - One line of at most 4096 characters.
    type: str
  installed_units:
    description:
      - Paths of unit files an earlier schedule installed (its C(.timer) and C(.service) files, found by
        the caller); RV(stale_units) says which of them to remove. Needs O(unit_prefix).
    type: list
    elements: path
attributes:
  check_mode:
    support: full
    details:
      - The module only reads; check mode runs it unchanged.
  diff_mode:
    support: none
  platform:
    support: full
notes:
  - Load units are servers' worth of load; each term of L is a rate divided by one server's capacity.
  - The Prometheus path uses only the Python standard library (urllib). It was tested against
    Prometheus 2.42 (Debian 12) serving history backfilled with
    C(promtool tsdb create-blocks-from openmetrics); the schedule equals the one from the same
    history as CSV.
"""

EXAMPLES = r"""
- name: Plan tomorrow's gears from a week of exported load
  gear_plan:
    servers: 600
    replicas: 3
    gmin: 1
    server_read_iops: 250
    server_write_iops: 200
    server_read_mbps: 110
    server_write_mbps: 90
    train_days: 6
    load_csv: /var/lib/fleetnap/load.csv
    timezone: Europe/London
    date: "{{ '%Y-%m-%d' | strftime(now().timestamp() + 86400) }}"
  delegate_to: localhost
  run_once: true
  register: plan

- name: Show the schedule
  ansible.builtin.debug:
    msg: "{{ plan.table.splitlines() }}"
  run_once: true

- name: Plan from Prometheus and check the layout of the inventory
  gear_plan:
    servers: "{{ groups['storage'] | length }}"
    server_read_iops: 250
    server_write_iops: 200
    server_read_mbps: 110
    server_write_mbps: 90
    prometheus_url: http://prometheus.example.com:9090
    promql:
      read_iops: sum(rate(node_disk_reads_completed_total{job="storage",device=~"sd.+"}[5m]))
      write_iops: sum(rate(node_disk_writes_completed_total{job="storage",device=~"sd.+"}[5m]))
      read_mbps: sum(rate(node_disk_read_bytes_total{job="storage",device=~"sd.+"}[5m])) / 1e6
      write_mbps: sum(rate(node_disk_written_bytes_total{job="storage",device=~"sd.+"}[5m])) / 1e6
    # Four whole weeks up to last midnight (UTC): the end is exclusive.
    prometheus_start: "{{ '%Y-%m-%dT00:00:00Z' | strftime(now(utc=true).timestamp() - 28 * 86400, utc=true) }}"
    prometheus_end: "{{ '%Y-%m-%dT00:00:00Z' | strftime(utc=true) }}"
    prometheus_step: 60
    train_days: 21
    layout_hosts: "{{ layout_hosts }}"
    replica_map: "{{ lookup('ansible.builtin.file', 'replica_map.json') | from_json }}"
  vars:
    layout_hosts: >-
      {% set out = {} %}{% for h in groups['storage'] %}{% set _ = out.update({h: {
      'gear_group': hostvars[h]['fleetnap_gear_group'], 'rack': hostvars[h]['fleetnap_rack']}}) %}{% endfor %}{{ out }}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
schedule:
  description: One row per local hour of O(date).
  returned: success
  type: list
  elements: dict
  contains:
    hour: {description: Local hour 0..23., type: int}
    predicted_load: {description: Predicted peak load L in servers., type: float}
    gear: {description: Gear (number of groups on)., type: int}
    groups_on: {description: Gear groups powered on., type: list, elements: int}
    groups_off: {description: Gear groups powered off., type: list, elements: int}
    overloaded: {description: The predicted load exceeds N; the gear is clamped to r., type: bool}
  sample: [{hour: 0, predicted_load: 120.5, gear: 1, groups_on: [2], groups_off: [1, 3], overloaded: false}]
table:
  description: RV(schedule) as a fixed-width text table.
  returned: success
  type: str
changes:
  description:
    - The gear changes of RV(date) - hour 0 and every hour whose gear differs from the hour before -
      what a schedule installs (one systemd timer, or one cron line, per change).
  returned: success
  type: list
  elements: dict
  contains:
    hour: {description: Local hour 0..23., type: int}
    gear: {description: The gear from that hour on., type: int}
    groups_on: {description: Gear groups powered on., type: list, elements: int}
    predicted_load: {description: Predicted peak load L in servers., type: float}
    cron: {description: "The cron time fields (minute hour day month weekday) of that hour of RV(date).", type: str}
    unit: {description: "With O(unit_prefix), the name of its units (C(PREFIX-YYYYMMDD-HH)), without suffix.", type: str}
    cron_line: {description: "With O(cron_command), its line for C(/etc/cron.d).", type: str}
  sample: [{hour: 0, gear: 1, groups_on: [2], predicted_load: 120.5, cron: "0 0 2 5 *", unit: fleetnap-gear-20240502-00}]
changes_text:
  description: RV(changes) in one line, for a report.
  returned: success
  type: str
  sample: 0h -> gear 1, 6h -> gear 2, 12h -> gear 3, 18h -> gear 1
stale_units:
  description:
    - With O(installed_units), those to remove - a past day's (before the controller's UTC date) and
      RV(date)'s that RV(changes) no longer has; today's and later days' are kept.
  returned: when O(installed_units) is given
  type: list
  elements: str
date:
  description: The local date of RV(schedule).
  returned: success
  type: str
  sample: "2024-05-02"
rotation_offset:
  description: The proleptic Gregorian ordinal of RV(date) modulo r.
  returned: success
  type: int
rotation_order:
  description: The group order on RV(date); the first r-g are off in gear g.
  returned: success
  type: list
  elements: int
now:
  description: Gear and groups for the hour of O(at) (its own date's rotation).
  returned: success
  type: dict
  sample: {at: "2024-05-02T13:20:00+00:00", date: "2024-05-02", hour: 13, gear: 2, groups_on: [1, 3], groups_off: [2]}
evaluation:
  description:
    - Section 4.1 measures over the test days; V(null) when every day trains.
    - C(nrmse) RMS error / mean load; C(gear_accuracy) fraction of hours with the oracle's gear;
      C(powered_fraction) and C(oracle_powered_fraction) mean g/r; C(under_provisioned_hours).
  returned: success
  type: dict
input:
  description: What was read (source, samples, hours with data, first and last date, train days, dropped samples).
  returned: success
  type: dict
layout:
  description: Layout checks when O(layout_hosts) is given (kind, racks, groups, violations).
  returned: when O(layout_hosts) is given
  type: dict
elapsed_s:
  description: Seconds the computation took (input included).
  returned: success
  type: float
"""

import time
from datetime import datetime, date as dt_date

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.gear import (
    METRICS, Capacity, GearError, check_layout, choose_gear, get_timezone, groups_at,
    check_epoch, parse_timestamp, peaks_from_series, plan, prom_fetch, prom_last_point, read_load_csv, table,
    UNIT_PREFIX, day_changes, stale_units, validate_fleet,
)
from ansible.module_utils.fleetnap.validate import ParamError, check_params, items, name, number, path, text

UNIT_PATH = path()
# Every number finite and bounded before anything is built from it (groups, days, windows).
CHECKS = {
    "servers": number(lo=1, hi=100000, integer=True),
    "replicas": number(lo=1, hi=100, integer=True),
    "gmin": number(lo=1, hi=100, integer=True),
    "server_read_iops": number(lo=0, lo_open=True, hi=1e12),
    "server_write_iops": number(lo=0, lo_open=True, hi=1e12),
    "server_read_mbps": number(lo=0, lo_open=True, hi=1e12),
    "server_write_mbps": number(lo=0, lo_open=True, hi=1e12),
    "train_days": number(lo=0, hi=3660, integer=True),
    "load_csv": path(),
    "prometheus_url": text(max_len=2048),
    "prometheus_start": text(max_len=64),
    "prometheus_end": text(max_len=64),
    "prometheus_days": number(lo=1, hi=366, integer=True),
    "prometheus_step": number(lo=1, hi=86400, integer=True),
    "prometheus_timeout": number(lo=0, lo_open=True, hi=600),
    "timezone": name(r"^[A-Za-z0-9_+-]{1,32}(/[A-Za-z0-9_+-]{1,32}){0,3}$", "an IANA time zone name"),
    "date": text(max_len=32),
    "at": text(max_len=64),
    "layout_hosts": items(100000),
    "replica_map": items(1000000),
    "installed_units": items(100000),
    "cron_command": text(max_len=4096),
    "min_copies": number(lo=1, hi=100, integer=True),
}


def _moment(text, tz, name):
    if text is None:
        return datetime.now(tz)
    try:
        when = parse_timestamp(str(text))
    except GearError:
        raise GearError("%s %r is neither ISO 8601 nor Unix seconds" % (name, text))
    if not isinstance(when, datetime):
        check_epoch(when, "%s %r" % (name, text))
    try:
        if isinstance(when, datetime):
            when = when if when.tzinfo is not None else when.replace(tzinfo=tz)
            when.astimezone(tz)
            return when
        return datetime.fromtimestamp(when, tz)
    except (OverflowError, ValueError, OSError):
        raise GearError("%s %r is outside the dates this time zone can show" % (name, text))


def check_units(p):
    """unit_prefix and installed_units, before anything is read (cron_command: CHECKS, one line)."""
    if p["unit_prefix"] is not None and not UNIT_PREFIX.match(p["unit_prefix"]):
        raise GearError("option unit_prefix: %r is not a unit name prefix (lower-case letters, digits and '-', "
                        "at most 64, starting with a letter or digit)" % p["unit_prefix"])
    if p["installed_units"] is not None:
        if not p["unit_prefix"]:
            raise GearError("option installed_units: needs unit_prefix (the units' names)")
        for i, unit in enumerate(p["installed_units"]):
            try:
                UNIT_PATH("installed_units[%d]" % i, unit)      # the one path check every option has
            except ParamError as exc:
                raise GearError(str(exc))


def run(module):
    p = module.params
    check_units(p)
    # The fleet's numbers and the options that need one another, before the CSV or Prometheus is read.
    validate_fleet(p["servers"], p["replicas"], p["gmin"])
    if p["layout_hosts"] is None and p["replica_map"]:
        raise GearError("replica_map needs layout_hosts (host -> gear_group) to be checked")
    tz = get_timezone(p["timezone"])
    capacity = Capacity(p["server_read_iops"], p["server_write_iops"], p["server_read_mbps"],
                        p["server_write_mbps"])
    at = _moment(p["at"], tz, "at")
    if p["date"]:
        try:
            day = dt_date.fromisoformat(p["date"])
        except ValueError:
            raise GearError("date %r is not YYYY-MM-DD" % p["date"])
    else:
        day = at.astimezone(tz).date()
    if p["min_copies"] < 1:
        raise GearError("min_copies must be >= 1, got %d" % p["min_copies"])

    started = time.time()
    dropped = 0
    if p["load_csv"]:
        peaks = read_load_csv(p["load_csv"], capacity, p["replicas"], tz)
        source = p["load_csv"]
    else:
        promql = p["promql"] or {}
        missing = [m for m in METRICS if not promql.get(m)]
        extra = sorted(set(promql) - set(METRICS))
        if missing or extra:
            raise GearError("promql needs exactly the keys %s (missing: %s, unknown: %s)"
                            % (", ".join(METRICS), ", ".join(missing) or "none", ", ".join(extra) or "none"))
        end = _moment(p["prometheus_end"], tz, "prometheus_end").timestamp()
        if p["prometheus_start"]:
            start = _moment(p["prometheus_start"], tz, "prometheus_start").timestamp()
        else:
            start = end - p["prometheus_days"] * 86400
        prom_last_point(start, end, p["prometheus_step"])  # range and step checked before any query
        series = {}
        for m in METRICS:
            try:
                series[m] = prom_fetch(p["prometheus_url"], promql[m], start, end, p["prometheus_step"],
                                       timeout=p["prometheus_timeout"], token=p["prometheus_token"])
            except GearError as e:
                raise GearError("promql.%s: %s" % (m, e))
        peaks, dropped = peaks_from_series(series, capacity, p["replicas"], tz)
        source = p["prometheus_url"]

    result = plan(peaks, p["servers"], p["replicas"], p["gmin"], p["train_days"], day)
    # The prediction depends only on the hour of day; the groups on the date of "at" (rotation).
    now_gear = choose_gear(result["prediction"][at.astimezone(tz).hour], p["servers"], p["replicas"], p["gmin"])
    now_date, now_hour, on, off = groups_at(at, now_gear, p["replicas"], tz)
    out = {
        "changed": False,
        "schedule": result["schedule"],
        "table": table(result["schedule"], p["servers"], p["replicas"]),
        "date": result["date"],
        "rotation_offset": result["rotation_offset"],
        "rotation_order": result["rotation_order"],
        "now": {"at": at.isoformat(), "date": now_date.isoformat(), "hour": now_hour, "gear": now_gear,
                "groups_on": on, "groups_off": off},
        "evaluation": result["evaluation"],
        "input": {"source": source, "samples": peaks.samples, "hours_with_data": result["hours_with_data"],
                  "days": len(peaks.days()), "first_date": result["first_date"],
                  "last_date": result["last_date"], "train_days": result["train_days"],
                  "dropped_samples": dropped, "timezone": p["timezone"]},
    }
    if p["layout_hosts"] is not None:
        layout = check_layout(p["layout_hosts"], p["replicas"], p["gmin"], p["replica_map"], p["min_copies"])
        layout["groups"] = dict((str(k), v) for k, v in layout["groups"].items())
        out["layout"] = layout
    out["changes"] = day_changes(result["schedule"], result["date"], p["unit_prefix"], p["cron_command"])
    out["changes_text"] = ", ".join("%dh -> gear %d" % (c["hour"], c["gear"]) for c in out["changes"])
    if p["installed_units"] is not None:
        out["stale_units"] = stale_units(p["installed_units"], p["unit_prefix"], result["date"], out["changes"],
                                         time.strftime("%Y-%m-%d", time.gmtime()))
    out["elapsed_s"] = round(time.time() - started, 4)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            servers=dict(type="int", required=True),
            replicas=dict(type="int", default=3),
            gmin=dict(type="int", default=1),
            server_read_iops=dict(type="float", required=True),
            server_write_iops=dict(type="float", required=True),
            server_read_mbps=dict(type="float", required=True),
            server_write_mbps=dict(type="float", required=True),
            train_days=dict(type="int"),
            load_csv=dict(type="path"),
            prometheus_url=dict(type="str"),
            promql=dict(type="dict"),
            prometheus_start=dict(type="str"),
            prometheus_end=dict(type="str"),
            prometheus_days=dict(type="int", default=7),
            prometheus_step=dict(type="int", default=60),
            prometheus_timeout=dict(type="float", default=30),
            prometheus_token=dict(type="str", no_log=True),
            timezone=dict(type="str", default="UTC"),
            date=dict(type="str"),
            at=dict(type="str"),
            layout_hosts=dict(type="dict"),
            replica_map=dict(type="dict"),
            min_copies=dict(type="int", default=1),
            fail_on_layout_violations=dict(type="bool", default=True),
            unit_prefix=dict(type="str"),
            cron_command=dict(type="str"),
            installed_units=dict(type="list", elements="path"),
        ),
        mutually_exclusive=[("load_csv", "prometheus_url")],
        required_one_of=[("load_csv", "prometheus_url")],
        required_together=[("prometheus_url", "promql")],
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    try:
        out = run(module)
    except GearError as e:
        module.fail_json(msg=str(e))
    layout = out.get("layout")
    if layout and layout["violations"] and module.params["fail_on_layout_violations"]:
        n = len(layout["violations"])
        module.fail_json(msg="layout check found %d violation(s); first: %s (set fail_on_layout_violations: "
                             "false to plan anyway)" % (n, layout["violations"][0]["msg"]), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
