#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cstate_residency
short_description: Publish C-state residency per CPU for node_exporter's textfile collector
description:
  - node_exporter has no cpuidle collector. This module reads every CPU's idle-state counters
    (entries and time, from C(/sys/devices/system/cpu/cpu*/cpuidle)) and writes them as
    C(fleetnap_cstate_entries_total), C(fleetnap_cstate_residency_seconds_total) and
    C(fleetnap_cstate_disabled) to C(DIR/fleetnap_cstate_residency.prom), atomically.
  - The idle governor's misses too, where the kernel counts them (C(above), C(below)), as
    C(fleetnap_cstate_above_total), C(fleetnap_cstate_below_total) with C(cause=qos) (the deeper
    state was excluded by the CPU's PM QoS limit, the per-CPU resume latency or the global
    C(/dev/cpu_dma_latency) one) or C(cause=governor), C(fleetnap_cstate_qos_bounded) and the
    share of each state's entries that missed since boot, C(fleetnap_cstate_miss_ratio). The
    module returns advice from them (RV(advice)).
  - The counters change all the time, so every call rewrites the file; schedule the module (or
    a cron job running it) at the scrape interval you need.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.sysfs_root
  - fleetnap.power.attributes
options:
  directory:
    description: node_exporter's textfile collector directory.
    type: path
    default: /var/lib/prometheus/node-exporter
attributes:
  check_mode:
    support: full
    details:
      - Reads and renders, writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
seealso:
  - module: cpuidle_info
  - module: textfile_metrics
"""

EXAMPLES = r"""
- name: Publish C-state residency
  cstate_residency:
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/fleetnap_cstate_residency.prom
samples:
  description: Number of samples written.
  returned: always
  type: int
  sample: 480
advice:
  description:
    - What the misses say of the latency budget, per state over the host's CPUs (more than 20 % of a
      state's entries since boot). Rule C(above) on the deepest allowed state (the CPUs sleep deeper
      than their idle periods pay for), rule C(below_qos) (the PM QoS limit, not the governor,
      keeps them out of a deeper state that would have fitted).
  returned: always
  type: list
  elements: dict
  sample: [{state: C6, rule: above, share: 0.31, entries: 173931,
            text: "31 % of C6's entries were shorter than its target residency: ..."}]
"""

import os

from ansible.module_utils.fleetnap.cpuidle import CpuidleError, read_cpu_dma_latency, read_model
from ansible.module_utils.fleetnap.prom import MetricError, render
from ansible.module_utils.fleetnap.residency import miss_advice, residency_metrics
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, write_file_atomic
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, directory

CHECKS = {
    "directory": directory(),       # checked before anything is read or written
    "sysfs_root": directory(),
}


def main():
    module = ansible_module(
        argument_spec=dict(
            directory=dict(type="path", default="/var/lib/prometheus/node-exporter"),
            sysfs_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    path = os.path.join(module.params["directory"], "fleetnap_cstate_residency.prom")
    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory: remove it, the metrics file goes there" % path)
    fs = HostFS(module.params["sysfs_root"])
    try:
        model = read_model(fs)
        global_us = read_cpu_dma_latency(fs)
        text = render(residency_metrics(model, global_us))
        advice = miss_advice(model, global_us)
    except (CpuidleError, HostFsError) as exc:
        module.fail_json(msg=str(exc))
    except MetricError as exc:
        module.fail_json(msg="the residency metrics cannot be written: %s (read under %s)"
                         % (exc, fs.path("/sys/devices/system/cpu")))
    except UnicodeDecodeError as exc:
        module.fail_json(msg="a file under sysfs_root %s is not UTF-8 text (%s): is sysfs_root a sysfs "
                             "tree?" % (fs.root, exc))
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    changed = False
    if not module.check_mode:
        try:
            changed = write_file_atomic(HostFS("/"), path, text, 0o644, module)
        except (HostFsError, OSError) as exc:
            module.fail_json(msg="%s; the metrics file is as it was" % exc)
    module.exit_json(changed=changed, path=path, samples=samples, advice=advice)


if __name__ == "__main__":
    main()
