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
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
            raise MetricError("metrics[%d] must be an object with a name, got %r" % (i, metric))
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
        samples = metric.get("samples") or []
        if not isinstance(samples, list):
            raise MetricError("metric %s: samples must be a list, got %r" % (name, samples))
        samples = list(samples)
        if metric.get("rows") is not None:
            if not isinstance(metric["rows"], list) or not isinstance(metric.get("row_labels") or {}, dict):
                raise MetricError("metric %s: rows must be a list and row_labels an object" % name)
            try:
                scale = float(metric.get("scale", 1.0))
            except (TypeError, ValueError):
                scale = float("nan")
            if not math.isfinite(scale):
                raise MetricError("metric %s: scale must be a finite number, got %r" % (name, metric.get("scale")))
            samples += rows_to_samples(metric["rows"], metric.get("row_labels") or {}, metric.get("row_value", "value"),
                                       scale)
        for sample in samples:
            if not isinstance(sample, dict):
                raise MetricError("metric %s: a sample must be an object with labels and value, got %r" % (name, sample))
            labels = sample.get("labels") or {}
            if not isinstance(labels, dict):
                raise MetricError("metric %s: labels must be an object (name: value), got %r" % (name, labels))
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
