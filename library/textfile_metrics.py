#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: textfile_metrics
short_description: Write fleetnap metrics for node_exporter's textfile collector
description:
  - Renders metrics in the Prometheus exposition format (HELP and TYPE lines, C(fleetnap_)
    prefix, base units, no timestamps) and writes them atomically to C(DIR/NAME.prom), where
    node_exporter's textfile collector picks them up.
  - Rewrites the file only when its content changes.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  name:
    description: File name without C(.prom), one per concern (C(resume), C(cpuidle), C(gear)).
    type: str
    required: true
  metrics:
    description:
      - List of metrics, each with C(name), C(help), C(type) (gauge or counter) and C(samples),
        a list of C({labels, value}).
      - Instead of C(samples), C(rows) (a list of dicts) with C(row_labels) (label name to key),
        C(row_value) (the key holding the value) and C(scale) (for example 0.001 from ms to s).
    type: list
    elements: dict
    required: true
  directory:
    description: The textfile collector directory.
    type: path
    default: /var/lib/prometheus/node-exporter
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Publish the last resume time
  textfile_metrics:
    name: resume
    metrics:
      - name: fleetnap_resume_kernel_seconds
        help: Kernel resume time of the last measured S3 cycle.
        type: gauge
        samples:
          - {labels: {mode: mem}, value: 0.123}
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/fleetnap_resume.prom
"""

import os

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.prom import MetricError, render
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, path as path_check

CHECKS = {"directory": path_check()}
MAX_METRICS = 10000
MAX_FILE = 64 * 1024 * 1024
METRIC_KEYS = {"name", "help", "type", "samples", "rows", "row_labels", "row_value", "scale"}


def main():
    module = ansible_module(
        argument_spec=dict(
            name=dict(type="str", required=True),
            metrics=dict(type="list", elements="dict", required=True),
            directory=dict(type="path", default="/var/lib/prometheus/node-exporter"),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    if not p["name"].replace("_", "").replace("-", "").isalnum():
        module.fail_json(msg="name %r: use letters, digits, '-' and '_' only" % p["name"])
    if len(p["metrics"]) > MAX_METRICS:
        module.fail_json(msg="option metrics: at most %d metrics in one file, got %d" % (MAX_METRICS, len(p["metrics"])))
    for i, metric in enumerate(p["metrics"]):
        unknown = sorted(set(metric) - METRIC_KEYS)
        if unknown:
            module.fail_json(msg="option metrics: metrics[%d] (%s) has unknown key(s) %s; a metric has %s"
                                 % (i, metric.get("name"), ", ".join(map(str, unknown)), ", ".join(sorted(METRIC_KEYS))))
    try:
        text = render(p["metrics"])
    except MetricError as exc:
        module.fail_json(msg=str(exc))
    if os.path.exists(p["directory"]) and not os.path.isdir(p["directory"]):
        module.fail_json(msg="option directory: %s is not a directory" % p["directory"])
    path = os.path.join(p["directory"], "fleetnap_%s.prom" % p["name"])
    old = None
    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory: fleetnap writes its metrics file there; remove it" % path)
    try:
        # The file is this module's own output: whatever text it holds is replaced; a FIFO, a
        # device or a file too large is refused (the file layer names it).
        old = fileio.read_optional(path, MAX_FILE, what="metrics file")
        old = None if old is None else old.decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot read %s: %s" % (path, exc.strerror or exc))
    changed = old != text
    if changed and not module.check_mode:
        try:
            fileio.atomic_write(path, text, 0o644, module=module)
        except (fileio.HostFsError, OSError) as exc:
            module.fail_json(msg="%s; the metrics file is as it was" % exc)
    result = dict(changed=changed, path=path)
    if module._diff:
        result["diff"] = {"before": old or "", "after": text, "before_header": path, "after_header": path}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
