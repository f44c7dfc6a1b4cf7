# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sierra's gear math: load metric, hour-of-day prediction, gear choice, rotation, layout.

Everything here follows Thereska, Donnelly and Narayanan, "Sierra: practical power-proportionality
for data center storage" (EuroSys 2011):

- section 3.4: the load metric ``L`` in units of chunk servers, the hourly load as the peak of
  the hour, the prediction as the mean of the same hour over previous days, the gear
  ``g = ceil(L / (N/r))``, "the servers in the first r-g gear groups are powered down", and the
  daily rotation of the group order;
- section 3.7: the minimum gear ``gmin`` (1 for savings, 2 for availability; gear 0 rejected);
- section 3.3 and Figure 5: power-aware grouping (one replica of every chunk in each of the r
  gear groups), rack-aligned and rotated layouts;
- section 4.1: evaluation - train on the first n days, test on the rest, RMS error normalised by
  the mean load of the test period, gear accuracy against the "oracle" gear chosen from the
  actual load, and the fraction of servers that cannot be switched off.

Conventions fixed here (the gear-shift playbook relies on them):

- Gear groups are numbered ``1..r``.
- Rotation: on a local calendar date ``d`` the group order is
  ``(o+1, o+2, ..., r, 1, ..., o)`` with ``o = d.toordinal() % r`` (proleptic Gregorian day
  number, so the rotation is continuous across year ends, unlike day-of-year). In gear ``g`` the
  first ``r-g`` groups of that order are off, the others on. :func:`groups_for` implements it
  and :func:`groups_at` applies it to a moment in a time zone ("now").
- Hours of day are local hours in the requested time zone (UTC by default). Timestamps with a
  UTC offset (or Unix seconds) are converted; ISO timestamps without an offset are read as wall
  time in that zone. A repeated hour at the end of daylight saving time is one bucket (its peak
  covers both), a skipped hour simply has no sample that day.

Standard library only: this module is shipped to targets by Ansible.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import time
from datetime import date, datetime, timezone as dt_timezone

from ansible.module_utils.fleetnap import fileio, parse

# Tolerance for ceil() on values that are integers up to float rounding (L*r/N == 2.0000000001).
_EPS = 1e-9
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
METRICS = ("read_iops", "write_iops", "read_mbps", "write_mbps")


class GearError(ValueError):
    """Bad input to the gear math (the message names the value and how to fix it)."""


# ---------------------------------------------------------------------------------------------
# Load metric (section 3.4)
# ---------------------------------------------------------------------------------------------

class Capacity(object):
    """One chunk server's benchmarked capacity (section 3.4, Table 4)."""

    __slots__ = ("read_iops", "write_iops", "read_mbps", "write_mbps")

    def __init__(self, read_iops, write_iops, read_mbps, write_mbps):
        for name, value in (("server_read_iops", read_iops), ("server_write_iops", write_iops),
                            ("server_read_mbps", read_mbps), ("server_write_mbps", write_mbps)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                    or math.isinf(value):
                raise GearError("%s must be a positive number (one server's benchmarked capacity), got %r"
                                % (name, value))
        self.read_iops = float(read_iops)
        self.write_iops = float(write_iops)
        self.read_mbps = float(read_mbps)
        self.write_mbps = float(write_mbps)


def load_metric(read_iops, write_iops, read_mbps, write_mbps, capacity, replicas):
    """Sierra's L (section 3.4) in units of chunk servers.

    ``L_nonseq = read_iops/ServerIOPS_read + r * write_iops/ServerIOPS_write``,
    ``L_seq = read_mbps/ServerMBPS_read + r * write_mbps/ServerMBPS_write``,
    ``L = max(L_nonseq, L_seq)``; writes are weighted by r because each is replicated r times.
    """
    nonseq = read_iops / capacity.read_iops + replicas * write_iops / capacity.write_iops
    seq = read_mbps / capacity.read_mbps + replicas * write_mbps / capacity.write_mbps
    return nonseq if nonseq > seq else seq


def validate_fleet(servers, replicas, gmin):
    """Check N, r and gmin; raise GearError naming the bad value."""
    for name, value in (("servers", servers), ("replicas", replicas), ("gmin", gmin)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise GearError("%s must be an integer, got %r" % (name, value))
    if replicas < 1:
        raise GearError("replicas (r, the number of gear groups) must be >= 1, got %d" % replicas)
    if servers < replicas:
        raise GearError("servers (N=%d) must be at least replicas (r=%d): every gear group needs a server"
                        % (servers, replicas))
    if not 1 <= gmin <= replicas:
        raise GearError("gmin must be between 1 and replicas (%d), got %d; gear 0 would power every "
                        "replica down (Sierra section 3.7)" % (replicas, gmin))


def raw_gear(load, servers, replicas):
    """``ceil(L / (N/r))`` before clamping (section 3.4); float rounding tolerated."""
    if load <= 0:
        return 0
    return int(math.ceil(load * replicas / servers - _EPS))


def choose_gear(load, servers, replicas, gmin):
    """The lowest gear that carries ``load``, clamped to ``[gmin, r]`` (sections 3.4, 3.7)."""
    g = raw_gear(load, servers, replicas)
    if g < gmin:
        return gmin
    if g > replicas:
        return replicas
    return g


# ---------------------------------------------------------------------------------------------
# Rotation (section 3.4: "rotates the ordering of the gear groups")
# ---------------------------------------------------------------------------------------------

def rotation_offset(day, replicas):
    """Rotation offset of a calendar date: ``day.toordinal() % r``."""
    return day.toordinal() % replicas


def rotation_order(day, replicas):
    """Group order on ``day``: the first r-g of it are off in gear g."""
    o = rotation_offset(day, replicas)
    return [(o + i) % replicas + 1 for i in range(replicas)]


def groups_for_offset(gear, replicas, offset):
    """(groups_on, groups_off), both sorted, for a gear and a rotation offset."""
    if not 0 <= gear <= replicas:
        raise GearError("gear must be between 0 and %d, got %r" % (replicas, gear))
    order = [(offset + i) % replicas + 1 for i in range(replicas)]
    off = sorted(order[:replicas - gear])
    on = sorted(order[replicas - gear:])
    return on, off


def groups_for(gear, replicas, day):
    """(groups_on, groups_off) for ``gear`` on calendar date ``day``."""
    return groups_for_offset(gear, replicas, rotation_offset(day, replicas))


def get_timezone(name):
    """A tzinfo for ``name`` (IANA name, 'UTC' or None -> UTC); GearError if unknown."""
    if name in (None, "", "UTC", "utc", "Z"):
        return dt_timezone.utc
    try:
        from zoneinfo import ZoneInfo  # Python >= 3.9
    except ImportError:  # pragma: no cover - Debian 12 has 3.11
        raise GearError("timezone %r needs Python >= 3.9 (zoneinfo); use UTC" % name)
    try:
        return ZoneInfo(name)
    except Exception:
        raise GearError("unknown time zone %r: use an IANA name such as 'Europe/Berlin' or 'UTC'" % (name,))


def groups_at(moment, gear, replicas, tz=None):
    """(local date, hour, groups_on, groups_off) for ``gear`` at an aware datetime ``moment``."""
    tzinfo = tz if tz is not None else dt_timezone.utc
    local = moment.astimezone(tzinfo)
    on, off = groups_for(gear, replicas, local.date())
    return local.date(), local.hour, on, off


# ---------------------------------------------------------------------------------------------
# Hourly peaks (section 3.4: "the peak (i.e., maximum) load observed in the hour")
# ---------------------------------------------------------------------------------------------

class HourlyPeaks(object):
    """Peak L per local hour, built in one pass over samples.

    Buckets are local hours since 1970-01-01 00:00 local (``day * 24 + hour`` with ``day`` the
    local date's days since 1970-01-01), stored in a dict so memory is one entry per hour.
    """

    def __init__(self, capacity, replicas, tz=None):
        self.capacity = capacity
        self.replicas = replicas
        self.tz = tz if tz is not None else dt_timezone.utc
        self.utc = self.tz is dt_timezone.utc
        self.peaks = {}
        self.samples = 0
        self._offsets = {}

    def bucket_of_epoch(self, epoch):
        if self.utc:
            return int(epoch // 3600)
        # UTC offsets change only on quarter-hour instants in every real zone: cache per 15 min.
        key = int(epoch // 900)
        off = self._offsets.get(key)
        if off is None:
            off = datetime.fromtimestamp(key * 900, self.tz).utcoffset().total_seconds()
            self._offsets[key] = off
        return int((epoch + off) // 3600)

    def bucket_of_datetime(self, dt):
        if dt.tzinfo is None:
            local = dt  # wall time in self.tz
        else:
            local = dt.astimezone(self.tz)
        return (local.toordinal() - _EPOCH_ORDINAL) * 24 + local.hour

    def add_load(self, bucket, load):
        self.samples += 1
        peaks = self.peaks
        if load > peaks.get(bucket, -1.0):
            peaks[bucket] = load

    def add(self, when, read_iops, write_iops, read_mbps, write_mbps):
        """Add one sample; ``when`` is Unix seconds (int/float) or a datetime."""
        if isinstance(when, datetime):
            bucket = self.bucket_of_datetime(when)
        else:
            bucket = self.bucket_of_epoch(when)
        self.add_load(bucket, load_metric(read_iops, write_iops, read_mbps, write_mbps,
                                          self.capacity, self.replicas))

    def days(self):
        """Sorted local day numbers (days since 1970-01-01) that have at least one sample."""
        return sorted({b // 24 for b in self.peaks})


def day_to_date(day):
    return date.fromordinal(day + _EPOCH_ORDINAL)


def date_to_day(d):
    return d.toordinal() - _EPOCH_ORDINAL


def parse_timestamp(text):
    """Unix seconds (float) or a datetime for an ISO 8601 string; GearError otherwise."""
    try:
        return float(text)
    except ValueError:
        pass
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        raise GearError("timestamp %r is neither Unix seconds nor ISO 8601 (e.g. 2024-05-01T13:00:00Z)" % text)


def _number(text, column, where):
    try:
        value = float(text)
    except ValueError:
        raise GearError("%s: %s is %r, not a number" % (where, column, text))
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise GearError("%s: %s is %r; rates must be finite and >= 0" % (where, column, text))
    return value


CSV_LIMIT = fileio.LOG     # a year of one-minute samples is about 30 MB


def read_load_csv(path, capacity, replicas, tz=None):
    """Read a load CSV in one pass into :class:`HourlyPeaks`.

    Columns: ``timestamp, read_iops, write_iops, read_mbps, write_mbps`` (fleet totals, any
    sampling interval). A header row naming these columns (any order, extra columns ignored)
    is optional; without one the order above is assumed. Blank lines and ``#`` lines are skipped.

    The file is read through the file layer (a regular file, no FIFO or device, at most CSV_LIMIT
    bytes, refused from its size before it is read), strictly UTF-8; every timestamp must lie in
    2000-01-01 .. a year from now, every number in ASCII digits.
    """
    peaks = HourlyPeaks(capacity, replicas, tz)
    cap = capacity
    r = replicas
    try:
        st = os.stat(path)
        if st.st_size > CSV_LIMIT and not os.path.isdir(path):
            raise GearError("load_csv %s is larger than %d MiB (%d bytes), the most gear_plan reads: give it the "
                            "training days only" % (path, CSV_LIMIT // (1024 * 1024), st.st_size))
        data = fileio.read_bytes(path, CSV_LIMIT, what="load_csv")
    except fileio.UnsafeFileError as e:
        raise GearError(str(e))
    except (IOError, OSError) as e:
        raise GearError("cannot read load_csv %s: %s" % (path, e))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GearError("%s line %d is not UTF-8 text: repair or remove it" % (path, data.count(b"\n", 0, e.start) + 1))
    del data
    reader = None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        _read_rows(reader, path, peaks, cap, r, text.isascii())
    except csv.Error as e:
        raise GearError("%s line %d: %s" % (path, reader.line_num if reader else 0, e))
    if not peaks.peaks:
        raise GearError("load_csv %s has no samples" % path)
    return peaks


# Unix seconds of 9999-12-31T00:00:00Z: later times cannot be dates (and local time a day on).
MAX_EPOCH = 253402214400.0


def check_epoch(value, what):
    """value when it is a finite time from 1970 to 9999 in Unix seconds, else GearError."""
    if not 0 <= value <= MAX_EPOCH:
        if not math.isfinite(value):
            raise GearError("%s is not a time (not a finite number)" % what)
        raise GearError("%s is outside 1970-01-01 .. 9999-12-30 (Unix seconds)" % what)
    return value


def _in_window(epoch, where, ts_text):
    """GearError naming the line when a sample's time is outside 2000-01-01 .. a year from now."""
    if not math.isfinite(epoch):
        raise GearError("%s: timestamp %r is not a time (not a finite number)" % (where, ts_text))
    try:
        parse.in_date_window(epoch, "%s: timestamp %r" % (where, ts_text))
    except parse.ParseError as e:
        raise GearError(str(e))


def _read_rows(reader, path, peaks, cap, r, ascii_only=True):
    """The rows of a load CSV into peaks (read_load_csv's loop). ``ascii_only``: the whole file is
    ASCII, so no field can hold digits float() reads but fleetnap does not (Arabic-Indic, fullwidth)."""
    first_date, last_date = parse.DATE_MIN, time.time() + parse.DATE_AHEAD_S
    add_load = peaks.add_load
    by_epoch = peaks.bucket_of_epoch
    by_dt = peaks.bucket_of_datetime
    idx = (0, 1, 2, 3, 4)
    width = 5
    first = True
    for row in reader:
        if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
            continue
        where = "%s line %d" % (path, reader.line_num)
        if first:
            first = False
            names = [c.strip().lower() for c in row]
            if "timestamp" in names or "read_iops" in names:
                missing = [c for c in ("timestamp",) + METRICS if c not in names]
                if missing:
                    raise GearError("%s: header lacks column(s) %s; expected timestamp, read_iops, "
                                    "write_iops, read_mbps, write_mbps" % (where, ", ".join(missing)))
                idx = tuple(names.index(c) for c in ("timestamp",) + METRICS)
                width = max(idx) + 1
                continue
        if len(row) < width:
            raise GearError("%s: %d column(s), expected timestamp, read_iops, write_iops, read_mbps, "
                            "write_mbps" % (where, len(row)))
        if not ascii_only:
            for k, col in enumerate(("timestamp",) + METRICS):
                if not row[idx[k]].isascii():
                    raise GearError("%s: %s is %r: numbers and times in ASCII digits only" % (where, col, row[idx[k]][:40]))
        try:
            ri = float(row[idx[1]])
            wi = float(row[idx[2]])
            rm = float(row[idx[3]])
            wm = float(row[idx[4]])
            ok = ri >= 0 and wi >= 0 and rm >= 0 and wm >= 0 and ri + wi + rm + wm < math.inf
        except ValueError:
            ok = False
        if not ok:
            for k, col in enumerate(METRICS):
                _number(row[idx[k + 1]], col, where)
        ts_text = row[idx[0]]
        try:
            epoch = float(ts_text)
        except ValueError:
            epoch = None
        if epoch is not None:
            if not first_date <= epoch <= last_date:
                _in_window(epoch, where, ts_text)
            bucket = by_epoch(epoch)
        else:
            try:
                when = parse_timestamp(ts_text)
            except GearError as e:
                raise GearError("%s: %s" % (where, e))
            try:
                epoch = (when if when.tzinfo is not None else when.replace(tzinfo=dt_timezone.utc)).timestamp()
            except (OverflowError, ValueError):
                epoch = float("inf")
            if not first_date - 86400 <= epoch <= last_date + 86400:
                _in_window(epoch, where, ts_text)
            try:
                bucket = by_dt(when)
            except (OverflowError, ValueError):
                raise GearError("%s: timestamp %r is outside the dates this zone can show" % (where, ts_text))
        nonseq = ri / cap.read_iops + r * wi / cap.write_iops
        seq = rm / cap.read_mbps + r * wm / cap.write_mbps
        add_load(bucket, nonseq if nonseq > seq else seq)


# ---------------------------------------------------------------------------------------------
# Prometheus range queries (input only; the JSON-to-series part is pure and unit-tested)
# ---------------------------------------------------------------------------------------------

# Prometheus refuses range queries with more than 11,000 points per series.
PROM_MAX_POINTS = 11000


PROM_MAX_ANSWER = 64 * 1024 * 1024     # 11,000 points x 4 series is a few MB


def _prom_parse():
    # Imported here, not at the top: the Prometheus part's own dependencies (the CSV part of this
    # file is edited independently).
    from ansible.module_utils.fleetnap import parse
    from ansible.module_utils.fleetnap.secrets import Scrubber
    return parse, Scrubber


def _prom_sample(pair, query):
    """(timestamp, value) of one sample [unix_time, "value"], or GearError naming the sample.
    The value may be NaN (no data at that step); the timestamp must be a finite number."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise GearError("Prometheus query %r: bad sample %s (expected [unix_time, \"value\"])"
                        % (query, repr(pair)[:80]))
    try:
        ts = _prom_parse()[0].number_of(pair[0], "the sample's time", lo=0, hi=4102444800)
    except ValueError as e:
        raise GearError("Prometheus query %r: bad sample %s (expected [unix_time, \"value\"]): %s"
                        % (query, repr(pair)[:80], e))
    raw = pair[1]
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)) or (isinstance(raw, str) and len(raw) > 64):
        raise GearError("Prometheus query %r: bad sample %s (expected [unix_time, \"value\"])"
                        % (query, repr(pair)[:80]))
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        raise GearError("Prometheus query %r: bad sample %s (its value is not a number)" % (query, repr(pair)[:80]))
    return float(ts), value


def prom_matrix_to_series(payload, query):
    """{timestamp: value} from a /api/v1/query_range response (dict or JSON text).

    Several series in the result are summed (fleet totals); NaN samples are skipped. The answer
    is checked against the shape read here (data.result a list of series, each with a values
    list of [unix_time, "value"] pairs): a wrong one is a GearError naming the query and field.
    """
    if isinstance(payload, (bytes, str)):
        try:
            payload = _prom_parse()[0].loads(payload, "Prometheus answer to %r" % (query,), limit=PROM_MAX_ANSWER)
        except ValueError as e:
            raise GearError("Prometheus answer to %r is not JSON: %s" % (query, e))
    if not isinstance(payload, dict):
        raise GearError("Prometheus answer to %r is not a JSON object" % (query,))
    if payload.get("status") != "success":
        raise GearError("Prometheus query %r failed: %s: %s"
                        % (query, str(payload.get("errorType", "error"))[:100],
                           str(payload.get("error", payload.get("status")))[:300]))
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise GearError("Prometheus query %r did not return a range vector (resultType matrix, got %r); "
                        "use /api/v1/query_range with a query that yields series"
                        % (query, data.get("resultType") if isinstance(data, dict) else data))
    result = data.get("result")
    if result is None:
        result = []
    if not isinstance(result, list):
        raise GearError("Prometheus query %r: data.result is %s, not a list of series"
                        % (query, type(result).__name__))
    out = {}
    for i, series in enumerate(result):
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(values, list):
            raise GearError("Prometheus query %r: series %d has no 'values' list (%s)"
                            % (query, i, "values is %s" % type(values).__name__ if isinstance(series, dict)
                                         else "the series is %s, not an object" % type(series).__name__))
        for pair in values:
            ts, value = _prom_sample(pair, query)
            if math.isnan(value):  # no data at this step (e.g. rate() over a gap)
                continue
            if value < 0 or math.isinf(value):
                raise GearError("Prometheus query %r returned %r at %s; load rates must be finite and >= 0 "
                                "(guard divisions and use rate() on counters)"
                                % (query, pair[1], datetime.fromtimestamp(ts, dt_timezone.utc).isoformat()))
            out[ts] = out.get(ts, 0.0) + value
    return out


def _utc_text(epoch):
    try:
        return datetime.fromtimestamp(epoch, dt_timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return repr(epoch)


def prom_last_point(start, end, step):
    """The last point ``start + k*step`` strictly before ``end`` (the range is ``[start, end)``)."""
    if step <= 0:
        raise GearError("prometheus_step must be > 0 seconds, got %r" % step)
    if end <= start:
        raise GearError("prometheus_end (%s) must be after prometheus_start (%s)"
                        % (_utc_text(end), _utc_text(start)))
    return start + (int(math.ceil((end - start) / float(step))) - 1) * step


def prom_windows(start, end, step, max_points=PROM_MAX_POINTS):
    """Split the points ``start, start+step, ... <= end`` into windows of at most ``max_points`` each.

    Prometheus refuses a range query whose ``(end - start) / step`` exceeds 11,000 ("exceeded
    maximum resolution of 11,000 points per timeseries"); each window here spans at most
    ``(max_points - 1) * step`` and the next one starts one step later, so no point is fetched
    twice and the grid stays ``start + k*step`` across windows.
    """
    if step <= 0:
        raise GearError("prometheus_step must be > 0 seconds, got %r" % step)
    if end < start:
        raise GearError("prometheus_end (%s) must be after prometheus_start (%s)" % (end, start))
    span = step * (max_points - 1)
    windows = []
    t = start
    while t <= end:
        w_end = min(end, t + span)
        windows.append((t, w_end))
        t = w_end + step
    return windows


def _open_url(req, timeout):
    """The request through Ansible's open_url (proxy settings, certificate checks, the user agent
    of Ansible): the same errors as urllib's (HTTPError, URLError)."""
    from ansible.module_utils.urls import open_url
    return open_url(req.full_url, data=req.data, headers=dict(req.header_items()),
                    method=req.get_method(), timeout=timeout)


def prom_fetch(url, query, start, end, step, timeout=30.0, token=None, opener=None):
    """Run one range query over ``[start, end)`` against ``url``; return {timestamp: value}.

    The points are ``start + k*step`` strictly before ``end``: at the point ``end`` itself
    Prometheus would still return the last sample before it (the lookback window, 5 minutes by
    default), which for a range ending at midnight would invent an hour on the next day. Long
    ranges are split into windows of at most :data:`PROM_MAX_POINTS` points
    (:func:`prom_windows`).
    """
    last = prom_last_point(start, end, step)
    from urllib.parse import urlencode
    from urllib.request import Request
    from urllib.error import HTTPError, URLError
    opener = opener or _open_url
    scrub = _prom_parse()[1](token)         # an answer that repeats the token shows none of its forms
    base = url.rstrip("/") + "/api/v1/query_range"
    series = {}
    for w_start, w_end in prom_windows(start, last, step):
        body = urlencode({"query": query, "start": repr(float(w_start)), "end": repr(float(w_end)),
                          "step": repr(float(step))}).encode()
        req = Request(base, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        if token:
            req.add_header("Authorization", "Bearer %s" % token)
        try:
            resp = opener(req, timeout=timeout)
            text = resp.read(PROM_MAX_ANSWER + 1)
        except HTTPError as e:
            detail = ""
            try:
                detail = scrub.text(e.read(65536).decode("utf-8", "replace"))   # before it is cut short
            except Exception:
                pass
            try:  # the API explains errors as {"status": "error", "errorType": ..., "error": ...}
                err = _prom_parse()[0].loads(detail, "the error")
                detail = "%s: %s" % (str(err["errorType"])[:100], str(err["error"])[:300])
            except (ValueError, KeyError, TypeError):
                detail = detail[:300]
            raise GearError("Prometheus at %s answered HTTP %s for %r: %s" % (base, e.code, query, detail))
        except (URLError, OSError) as e:
            raise GearError("cannot reach Prometheus at %s: %s (check prometheus_url)"
                            % (base, scrub.text(getattr(e, "reason", e))))
        if isinstance(text, bytes) and len(text) > PROM_MAX_ANSWER:
            raise GearError("Prometheus answer to %r is larger than %d bytes; use a shorter range or a larger step"
                            % (query, PROM_MAX_ANSWER))
        series.update(prom_matrix_to_series(text, query))
    return series


def peaks_from_series(series_by_metric, capacity, replicas, tz=None):
    """Join four {timestamp: value} series on timestamp into :class:`HourlyPeaks`.

    Returns ``(peaks, dropped)``: timestamps missing from any of the four series are dropped
    (counted), since L needs all four rates.
    """
    for m in METRICS:
        if not series_by_metric.get(m):
            raise GearError("the Prometheus query for %s returned no samples; check promql.%s" % (m, m))
    peaks = HourlyPeaks(capacity, replicas, tz)
    ri, wi, rm, wm = (series_by_metric[m] for m in METRICS)
    dropped = 0
    all_ts = set(ri) | set(wi) | set(rm) | set(wm)
    for ts in sorted(all_ts):
        if ts in ri and ts in wi and ts in rm and ts in wm:
            peaks.add(ts, ri[ts], wi[ts], rm[ts], wm[ts])
        else:
            dropped += 1
    if not peaks.peaks:
        raise GearError("the four Prometheus series share no timestamp; use the same step and range")
    return peaks, dropped


# ---------------------------------------------------------------------------------------------
# Prediction, schedule, evaluation (sections 3.4 and 4.1)
# ---------------------------------------------------------------------------------------------

def split_days(peaks, train_days=None):
    """(training day numbers, test day numbers): the first ``train_days`` days train."""
    days = peaks.days()
    if train_days is None or train_days == 0:
        return days, []
    if isinstance(train_days, bool) or not isinstance(train_days, int) or train_days < 0:
        raise GearError("train_days must be a non-negative integer, got %r" % (train_days,))
    if train_days > len(days):
        raise GearError("train_days=%d but the load data covers only %d day(s) (%s .. %s)"
                        % (train_days, len(days), day_to_date(days[0]), day_to_date(days[-1])))
    return days[:train_days], days[train_days:]


def predict(peaks, train):
    """Predicted load per hour of day: mean of that hour's peaks over the training days."""
    sums = [0.0] * 24
    counts = [0] * 24
    train_set = set(train)
    for bucket, load in peaks.peaks.items():
        if bucket // 24 in train_set:
            h = bucket % 24
            sums[h] += load
            counts[h] += 1
    missing = [h for h in range(24) if counts[h] == 0]
    if missing:
        raise GearError("no load samples for hour(s) %s of day in the training days (%s .. %s); "
                        "supply at least one sample for every hour"
                        % (", ".join("%02d:00" % h for h in missing), day_to_date(train[0]),
                           day_to_date(train[-1])))
    return [sums[h] / counts[h] for h in range(24)]


def schedule(prediction, servers, replicas, gmin, day):
    """24 rows (hour, predicted_load, gear, groups_on, groups_off, overloaded) for ``day``."""
    offset = rotation_offset(day, replicas)
    rows = []
    for h in range(24):
        load = prediction[h]
        g = choose_gear(load, servers, replicas, gmin)
        on, off = groups_for_offset(g, replicas, offset)
        rows.append({"hour": h, "predicted_load": round(load, 6), "gear": g, "groups_on": on,
                     "groups_off": off, "overloaded": load > servers * (1 + _EPS)})
    return rows


def evaluate(peaks, prediction, test, servers, replicas, gmin):
    """Section 4.1 measures over the test days' hours that have samples.

    - ``nrmse``: RMS of (predicted - actual hourly peak) divided by the mean actual load;
    - ``gear_accuracy``: fraction of hours whose predicted gear equals the oracle gear (the gear
      chosen from the actual load);
    - ``powered_fraction``: mean fraction of servers powered (g/r) under the predicted gears, and
      ``oracle_powered_fraction`` the same under the oracle;
    - ``under_provisioned_hours``: hours whose predicted gear is below the oracle's.
    """
    test_set = set(test)
    n = 0
    sq = 0.0
    total = 0.0
    correct = under = 0
    powered = oracle_powered = 0
    for bucket, actual in peaks.peaks.items():
        if bucket // 24 not in test_set:
            continue
        pred = prediction[bucket % 24]
        n += 1
        sq += (pred - actual) ** 2
        total += actual
        g_pred = choose_gear(pred, servers, replicas, gmin)
        g_oracle = choose_gear(actual, servers, replicas, gmin)
        correct += g_pred == g_oracle
        under += g_pred < g_oracle
        powered += g_pred
        oracle_powered += g_oracle
    if n == 0:
        return None
    mean = total / n
    rms = math.sqrt(sq / n)
    return {
        "test_days": len(test),
        "test_hours": n,
        "first_test_date": day_to_date(test[0]).isoformat(),
        "last_test_date": day_to_date(test[-1]).isoformat(),
        "rms_error": rms,
        "mean_load": mean,
        "nrmse": rms / mean if mean > 0 else (0.0 if rms == 0 else float("inf")),
        "gear_accuracy": correct / n,
        "under_provisioned_hours": under,
        "powered_fraction": powered / (n * replicas),
        "oracle_powered_fraction": oracle_powered / (n * replicas),
    }


def plan(peaks, servers, replicas, gmin, train_days=None, day=None):
    """The whole gear_plan core: prediction, schedule for ``day``, evaluation if there are test days."""
    validate_fleet(servers, replicas, gmin)
    train, test = split_days(peaks, train_days)
    prediction = predict(peaks, train)
    if day is None:
        day = day_to_date(peaks.days()[-1] + 1)
    result = {
        "date": day.isoformat(),
        "rotation_offset": rotation_offset(day, replicas),
        "rotation_order": rotation_order(day, replicas),
        "prediction": prediction,
        "schedule": schedule(prediction, servers, replicas, gmin, day),
        "train_days": len(train),
        "first_date": day_to_date(peaks.days()[0]).isoformat(),
        "last_date": day_to_date(peaks.days()[-1]).isoformat(),
        "hours_with_data": len(peaks.peaks),
        "samples": peaks.samples,
        "evaluation": evaluate(peaks, prediction, test, servers, replicas, gmin) if test else None,
    }
    return result


UNIT_PREFIX = re.compile(r"[a-z0-9][a-z0-9-]{0,63}\Z")
_UNIT_DAY = re.compile(r"-([0-9]{8})-[0-9]{2}[.](?:timer|service)\Z")


def day_changes(rows, date_text, prefix=None, cron_command=None):
    """The gear changes of a day's schedule: hour 0 and every hour whose gear differs from the hour
    before, each with its cron time fields (minute hour day month weekday); with ``prefix``, the
    name of the systemd units that run it (PREFIX-YYYYMMDD-HH); with ``cron_command``, its line for
    /etc/cron.d (the time fields, root, the command and -e gear_shift_gear=N)."""
    y, m, d = (int(x) for x in date_text.split("-"))
    out, prev = [], None
    for r in rows:
        if r["gear"] == prev:
            continue
        prev = r["gear"]
        change = {"hour": r["hour"], "gear": r["gear"], "groups_on": r["groups_on"],
                  "predicted_load": r["predicted_load"], "cron": "0 %d %d %d *" % (r["hour"], d, m)}
        if prefix:
            change["unit"] = "%s-%04d%02d%02d-%02d" % (prefix, y, m, d, r["hour"])
        if cron_command:
            change["cron_line"] = "%s root %s -e gear_shift_gear=%d" % (change["cron"], cron_command, r["gear"])
        out.append(change)
    return out


def stale_units(paths, prefix, date_text, changes, today_text):
    """Of the unit files a schedule installed earlier (PREFIX-YYYYMMDD-HH.timer/.service), those to
    remove: a past day's (before ``today_text``, YYYY-MM-DD), and ``date_text``'s that ``changes``
    no longer has. Other files, today's and later days' units are kept."""
    day = date_text.replace("-", "")
    today = today_text.replace("-", "")
    keep = set(c["unit"] for c in changes)
    out = []
    for path in sorted(paths):
        base = path.rsplit("/", 1)[-1]
        m = _UNIT_DAY.search(base)
        if not base.startswith(prefix + "-") or not m or base[len(prefix) + 1:].count("-") != 1:
            continue
        name = base.rsplit(".", 1)[0]
        if m.group(1) < today or (m.group(1) == day and name not in keep):
            out.append(path)
    return out


def table(rows, servers=None, replicas=None):
    """The schedule as a fixed-width text table (one line per hour)."""
    head = ["hour", "pred_load", "gear", "groups_on", "groups_off"]
    if servers and replicas:
        head.append("servers_on")
    lines = []
    body = []
    for row in rows:
        cells = ["%02d:00" % row["hour"], "%.2f" % row["predicted_load"], str(row["gear"]),
                 ",".join(str(g) for g in row["groups_on"]) or "-",
                 ",".join(str(g) for g in row["groups_off"]) or "-"]
        if servers and replicas:
            cells.append("%d" % round(servers * row["gear"] / float(replicas)))
        if row.get("overloaded"):
            cells[1] += "!"
        body.append(cells)
    widths = [max(len(head[i]), *(len(c[i]) for c in body)) if body else len(head[i]) for i in range(len(head))]
    fmt = "  ".join("%%%ds" % w if i in (1, 2, 5) else "%%-%ds" % w for i, w in enumerate(widths))
    lines.append((fmt % tuple(head)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for cells in body:
        lines.append((fmt % tuple(cells)).rstrip())
    if any(row.get("overloaded") for row in rows):
        lines.append("! predicted load exceeds the whole fleet (N servers); gear clamped to r")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Layout checks (section 3.3, Figure 5)
# ---------------------------------------------------------------------------------------------

def check_groups(hosts, replicas):
    """Violations of "every host in one of the groups 1..r, every group non-empty".

    ``hosts``: {name: {"gear_group": int, "rack": str (optional)}}. Returns (groups, violations)
    with ``groups`` {group: sorted host names}.
    """
    groups = dict((g, []) for g in range(1, replicas + 1))
    violations = []
    for name in sorted(hosts, key=str):
        info = hosts[name] or {}
        if not isinstance(info, dict):
            violations.append({"kind": "no_gear_group", "host": name, "value": info,
                               "msg": "host %s is %r, not an object with gear_group (and rack)" % (name, info)})
            continue
        g = info.get("gear_group")
        try:
            gi = int(g)
        except (TypeError, ValueError, OverflowError):
            gi = None
        if gi is None or isinstance(g, bool) or str(g).strip() != str(gi):
            violations.append({"kind": "no_gear_group", "host": name, "value": g,
                               "msg": "host %s has fleetnap_gear_group %r; set an integer 1..%d"
                                      % (name, g, replicas)})
            continue
        if gi not in groups:
            violations.append({"kind": "bad_gear_group", "host": name, "value": gi,
                               "msg": "host %s is in gear group %d; groups are 1..%d (r=%d)"
                                      % (name, gi, replicas, replicas)})
            continue
        groups[gi].append(name)
    for g, members in sorted(groups.items()):
        if not members:
            violations.append({"kind": "empty_group", "group": g,
                               "msg": "gear group %d has no host; with r=%d every group needs servers "
                                      "(each chunk keeps one replica per group)" % (g, replicas)})
    return groups, violations


def layout_kind(hosts, replicas):
    """'rack-aligned', 'rotated', 'mixed' or 'unknown' (Figure 5) and {rack: sorted groups}.

    rack-aligned: every rack holds servers of exactly one gear group. rotated: every rack holds
    servers of every gear group. mixed: anything else. unknown: a host lacks ``rack``.
    """
    racks = {}
    for name, info in hosts.items():
        info = info or {}
        if not isinstance(info, dict):
            return "unknown", {}
        rack = info.get("rack")
        if rack is None or rack == "":
            return "unknown", {}
        try:
            g = int(info.get("gear_group"))
        except (TypeError, ValueError, OverflowError):
            continue
        racks.setdefault(str(rack), set()).add(g)
    if not racks:
        return "unknown", {}
    per_rack = dict((k, sorted(v)) for k, v in sorted(racks.items()))
    if all(len(v) == 1 for v in racks.values()):
        return "rack-aligned", per_rack
    if all(len(v) == replicas for v in racks.values()):
        return "rotated", per_rack
    return "mixed", per_rack


def check_replica_map(replica_map, hosts, replicas, gmin, min_copies=1):
    """Items that lose all (fewer than ``min_copies``) active copies in some gear >= gmin.

    For every gear g in gmin..r and every rotation offset 0..r-1 the groups switched off are
    the first r-g of the rotated order (:func:`groups_for_offset`); an item violates when fewer
    than ``min_copies`` of its hosts are in groups that stay on. Hosts of the replica map that
    are not in ``hosts`` (or have no valid group) are violations of their own. Returns a list
    of dicts: item, gear, rotation, groups_off, hosts (the item's hosts), active (its hosts that
    stay on).
    """
    validate_fleet(replicas, replicas, gmin)
    host_group = {}
    for name, info in hosts.items():
        if not isinstance(info or {}, dict):
            continue
        try:
            g = int((info or {}).get("gear_group"))
        except (TypeError, ValueError, OverflowError):
            continue
        if 1 <= g <= replicas:
            host_group[name] = g
    violations = []
    combos = []
    for gear in range(gmin, replicas + 1):
        for offset in range(replicas):
            on, off = groups_for_offset(gear, replicas, offset)
            combos.append((gear, offset, set(on), off))
    for item in sorted(replica_map, key=str):
        holders = replica_map[item]
        if isinstance(holders, str):
            holders = [holders]
        if not isinstance(holders, (list, tuple, type(None))) or not all(isinstance(h, str) for h in holders or []):
            violations.append({"kind": "unknown_host", "item": item, "hosts": holders, "unknown": [],
                               "msg": "item %s: hosts must be a host name or a list of them, got %r"
                                      % (item, holders)})
            continue
        holders = list(holders or [])
        unknown = [h for h in holders if h not in host_group]
        if unknown or not holders:
            violations.append({"kind": "unknown_host", "item": item, "hosts": holders, "unknown": unknown,
                               "msg": "item %s: %s" % (item, "no hosts listed" if not holders else
                                                       "host(s) %s not in the inventory or without a gear "
                                                       "group" % ", ".join(unknown))})
        known = [h for h in holders if h in host_group]
        for gear, offset, on, off in combos:
            active = [h for h in known if host_group[h] in on]
            if len(active) < min_copies:
                violations.append({"kind": "no_active_copy", "item": item, "gear": gear, "rotation": offset,
                                   "groups_off": off, "hosts": holders, "active": active,
                                   "msg": "item %s keeps %d active cop%s in gear %d with groups %s off "
                                          "(rotation %d); its hosts %s are in groups %s"
                                          % (item, len(active), "y" if len(active) == 1 else "ies", gear,
                                             off, offset, holders,
                                             sorted({host_group[h] for h in known}))})
    return violations


def check_layout(hosts, replicas, gmin, replica_map=None, min_copies=1):
    """All layout checks: {'kind', 'racks', 'groups', 'violations'}."""
    groups, violations = check_groups(hosts, replicas)
    kind, racks = layout_kind(hosts, replicas)
    if replica_map:
        violations.extend(check_replica_map(replica_map, hosts, replicas, gmin, min_copies))
    return {"kind": kind, "racks": racks, "groups": groups, "violations": violations}
