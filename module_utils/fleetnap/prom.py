# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus textfile-collector output: one writer for every fleetnap metric.

Rules (node_exporter's textfile collector and Prometheus naming): names start with ``fleetnap_``,
base units in the name (``_seconds``, ``_bytes``, ``_ratio``), ``_total`` for counters, a HELP and a
TYPE line per metric, no timestamps (staleness is ``node_textfile_mtime_seconds``), the file
written beside its target and renamed into place so the collector never reads half a file.
"""

from __future__ import annotations

import math
import re

NAME_RE = re.compile(r"^fleetnap_[a-zA-Z0-9_]+$")
LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("gauge", "counter")


class MetricError(ValueError):
    """A metric that would break the exposition format or the naming rules."""


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return ("%.9g" % number) if number != int(number) else str(int(number))


def rows_to_samples(rows, labels, value, scale=1.0):
    """Samples from a list of dicts: ``labels`` maps label name -> key, ``value`` is a key."""
    out = []
    for row in rows:
        try:
            out.append({"labels": dict((label, row[key]) for label, key in labels.items()),
                        "value": float(row[value]) * scale})
        except (KeyError, TypeError, ValueError):
            raise MetricError("row %r has no numeric %r or lacks one of %s" % (row, value, sorted(labels.values())))
    return out


def render(metrics):
    """metrics: [{name, help, type, samples: [{labels: {..}, value: number}]}] -> exposition text.

    Instead of ``samples`` a metric may give ``rows`` (a list of dicts) with ``row_labels``
    ({label: key}), ``row_value`` (a key) and an optional ``scale`` (e.g. 0.001 for ms -> s).
    """
    out = []
    seen = set()
    for metric in sorted(metrics, key=lambda m: m["name"]):
        name, mtype = metric["name"], metric.get("type", "gauge")
        if not NAME_RE.match(name):
            raise MetricError("metric name %r must match %s" % (name, NAME_RE.pattern))
        if mtype not in TYPES:
            raise MetricError("metric %s: type must be one of %s" % (name, ", ".join(TYPES)))
        if mtype == "counter" and not name.endswith("_total"):
            raise MetricError("counter %s must end in _total" % name)
        if name in seen:
            raise MetricError("metric %s given twice" % name)
        seen.add(name)
        out.append("# HELP %s %s" % (name, metric.get("help", name).replace("\n", " ")))
        out.append("# TYPE %s %s" % (name, mtype))
        samples = list(metric.get("samples") or [])
        if metric.get("rows") is not None:
            samples += rows_to_samples(metric["rows"], metric.get("row_labels") or {}, metric.get("row_value", "value"),
                                       float(metric.get("scale", 1.0)))
        for sample in samples:
            labels = sample.get("labels") or {}
            for key in labels:
                if not LABEL_RE.match(key):
                    raise MetricError("metric %s: bad label name %r" % (name, key))
            text = ",".join('%s="%s"' % (k, _escape(labels[k])) for k in sorted(labels))
            try:
                value = _number(sample["value"])
            except (TypeError, ValueError, KeyError):
                raise MetricError("metric %s: value %r is not a number" % (name, sample.get("value")))
            out.append("%s%s %s" % (name, "{%s}" % text if text else "", value))
    return "\n".join(out) + "\n"
