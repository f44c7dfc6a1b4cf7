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

from ansible.module_utils.fleetnap.parse import ParseError, number_of

# Prometheus's grammar, matched to the end of the text (``$`` would let a trailing newline through).
NAME_RE = re.compile(r"fleetnap_[a-zA-Z0-9_]+\Z")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("gauge", "counter")
MAX_HELP = 1024


class MetricError(ValueError):
    """A metric that would break the exposition format or the naming rules."""


def _escape(value):
    """A label value as the exposition format writes it (backslash, newline and quote escaped)."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(name, text):
    """A HELP text: a string, escaped as the format wants (backslash and newline only)."""
    if text is None:
        text = name
    if not isinstance(text, str):
        raise MetricError("metric %s: help must be a string, got %r" % (name, text))
    if len(text) > MAX_HELP:
        raise MetricError("metric %s: help of %d characters (at most %d)" % (name, len(text), MAX_HELP))
    _text_ok(text, "metric %s: help" % name)
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _text_ok(text, where):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MetricError("%s holds a lone surrogate, which is not UTF-8" % where)


def _label_value(name, key, value):
    if isinstance(value, (dict, list, tuple, set, bytes)):
        raise MetricError("metric %s: label %s must be a string or a number, got %r" % (name, key, value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number_of(value, "metric %s: label %s" % (name, key))
        except ParseError as exc:
            raise MetricError(str(exc))
    text = str(value)
    _text_ok(text, "metric %s: label %s" % (name, key))
    if len(text) > MAX_HELP:
        raise MetricError("metric %s: label %s of %d characters (at most %d)" % (name, key, len(text), MAX_HELP))
    return text


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) and abs(value) >= 2 ** 63:
        raise ValueError("%d is beyond a metric value" % value)
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
                        "value": float(number_of(row[value], "metric value")) * scale})
        except (KeyError, TypeError, ValueError, OverflowError):
            raise MetricError("row %r has no numeric %r or lacks one of %s" % (row, value, sorted(labels.values())))
    return out


def render(metrics):
    """metrics: [{name, help, type, samples: [{labels: {..}, value: number}]}] -> exposition text.

    Instead of ``samples`` a metric may give ``rows`` (a list of dicts) with ``row_labels``
    ({label: key}), ``row_value`` (a key) and an optional ``scale`` (e.g. 0.001 for ms -> s).
    """
    out = []
    seen = set()
    if not isinstance(metrics, list):
        raise MetricError("metrics must be a list, got %r" % (metrics,))
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
        out.append("# HELP %s %s" % (name, _help(name, metric.get("help", name))))
        out.append("# TYPE %s %s" % (name, mtype))
        samples = metric.get("samples") or []
        if not isinstance(samples, list):
            raise MetricError("metric %s: samples must be a list, got %r" % (name, samples))
        samples = list(samples)
        if metric.get("rows") is not None:
            if not isinstance(metric["rows"], list) or not isinstance(metric.get("row_labels") or {}, dict):
                raise MetricError("metric %s: rows must be a list and row_labels an object" % name)
            try:
                scale = float(number_of(metric.get("scale", 1.0), "scale"))
            except (TypeError, ValueError, OverflowError):
                scale = float("nan")
            if not math.isfinite(scale):
                raise MetricError("metric %s: scale must be a finite number, got %r" % (name, metric.get("scale")))
            samples += rows_to_samples(metric["rows"], metric.get("row_labels") or {}, metric.get("row_value", "value"),
                                       scale)
        series = {}
        for sample in samples:
            if not isinstance(sample, dict):
                raise MetricError("metric %s: a sample must be an object with labels and value, got %r" % (name, sample))
            labels = sample.get("labels") or {}
            if not isinstance(labels, dict):
                raise MetricError("metric %s: labels must be an object (name: value), got %r" % (name, labels))
            folded = {}
            for key in labels:
                if not isinstance(key, str) or not LABEL_RE.match(key) or key.startswith("__"):
                    raise MetricError("metric %s: bad label name %r (letters, digits and _, not starting with a "
                                      "digit or __)" % (name, key))
                if key.lower() in folded:
                    raise MetricError("metric %s: label names %r and %r differ only in case"
                                      % (name, folded[key.lower()], key))
                folded[key.lower()] = key
            values = dict((k, _label_value(name, k, labels[k])) for k in labels)
            text = ",".join('%s="%s"' % (k, _escape(values[k])) for k in sorted(values))
            if text in series:
                raise MetricError("metric %s: two samples with the same labels {%s} (values %s and %s): one series "
                                  "per label set" % (name, text, series[text], sample.get("value")))
            series[text] = sample.get("value")
            try:
                value = _number(sample["value"])
            except (TypeError, ValueError, KeyError, OverflowError):
                raise MetricError("metric %s: value %r is not a number" % (name, sample.get("value")))
            out.append("%s%s %s" % (name, "{%s}" % text if text else "", value))
    return "\n".join(out) + "\n"
