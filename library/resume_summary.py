#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: resume_summary
short_description: Summarise one host's measured suspend/resume cycles
description:
  - Internal. A step of the resume_measure role (after its suspend/resume cycles), documented for
    those who compose the role's phases themselves; a playbook of one's own calls
    C(fleetnap.power.resume_measure).
  - Turns the cycles of one host, as M(pm_cycle) collected them and the C(resume_measure) role
    timed them, into the host's summary. The summary holds medians and worst values of kernel resume,
    end-to-end resume and kernel suspend, the resume split of the worst cycle and the slowest
    device callbacks over all cycles.
  - The median is the middle value, or the mean of the two middle values for an even number of
    cycles. The worst cycle is the one with the longest kernel resume (the later one of equals).
  - Each (device, phase) pair is listed once, at its worst, longest first. A device slow on both
    the suspend and the resume side is two slow callbacks.
  - Also returns the summary as C(fleetnap_resume_*) and C(fleetnap_suspend_*) metrics in
    seconds, ready for M(textfile_metrics).
  - Runs on the controller (C(delegate_to=localhost)) and changes nothing.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  cycles:
    description:
      - The host's cycles, one dict each. Each holds C(cycle) (its number, from 1) and
        C(end_to_end_ms) (wake to the service answering, timed on the controller) beside what
        M(pm_cycle) collect returns for it.
      - Used keys are C(resume_ms), C(suspend_ms), C(cpus_ms), C(noirq_ms), C(devices_ms),
        C(slowest) (with C(name), C(phase) and C(duration_ms) per callback) and C(mem_sleep).
        Other keys (the log, for example) are ignored.
      - Every time must be a finite number of milliseconds up to 10,000,000. At most 1000 cycles.
    type: list
    elements: dict
    required: true
  recommendations:
    description:
      - One list per cycle, in the order of O(cycles), of what M(pm_timeline) recommended for
        that cycle. The worst cycle's list is returned.
    type: list
    elements: raw
  host:
    description: The host's name in the summary.
    type: str
    default: ""
  top:
    description: How many of the slowest device callbacks to return (1 to 100).
    type: int
    default: 3
attributes:
  check_mode:
    support: full
    details:
      - Nothing is changed in either mode; the summary is computed as usual.
  diff_mode:
    support: none
    details:
      - Nothing is changed, so there is no diff.
  platform:
    support: full
seealso:
  - module: pm_cycle
  - module: pm_timeline
"""

EXAMPLES = r"""
- name: Summarise the host's cycles
  resume_summary:
    host: "{{ inventory_hostname }}"
    cycles: "{{ measured_cycles }}"
    recommendations: "{{ timelines['results'] | map(attribute='recommendations') | list }}"
  delegate_to: localhost
  register: summary

- name: Publish them for node_exporter's textfile collector
  textfile_metrics:
    name: resume
    metrics: "{{ summary.metrics }}"

- name: Show the medians
  ansible.builtin.debug:
    msg: >-
      resume {{ summary.summary.resume_kernel_median_ms }} ms (kernel),
      {{ summary.summary.resume_end_to_end_median_ms }} ms (end to end)
"""

RETURN = r"""
summary:
  description: The host's summary.
  returned: success
  type: dict
  contains:
    host:
      description: O(host).
      type: str
    cycles:
      description: Number of cycles.
      type: int
      sample: 3
    mem_sleep:
      description: The mem_sleep variant of the worst cycle.
      type: str
      sample: deep
    resume_kernel_median_ms:
      description: Median kernel resume time (sleepgraph's definition), ms.
      type: float
      sample: 1412.5
    resume_kernel_worst_ms:
      description: Longest kernel resume time, ms.
      type: float
    resume_end_to_end_median_ms:
      description: Median time from the wake to the host's service answering, ms.
      type: float
    resume_end_to_end_worst_ms:
      description: Longest time from the wake to the host's service answering, ms.
      type: float
    suspend_kernel_median_ms:
      description: Median kernel suspend time, ms.
      type: float
    suspend_kernel_worst_ms:
      description: Longest kernel suspend time, ms.
      type: float
    cpus_ms:
      description: Time to bring the non-boot CPUs back in the worst cycle, ms.
      type: float
    noirq_ms:
      description: The resume_noirq phase of the worst cycle, ms.
      type: float
    devices_ms:
      description: The device resume phases of the worst cycle, ms.
      type: float
    worst_cycle:
      description: Number of the worst cycle.
      type: int
    recommendations:
      description: What M(pm_timeline) recommended for the worst cycle.
      type: list
      elements: raw
    slowest:
      description: The O(top) slowest device callbacks, each (name, phase) once at its worst, longest first.
      type: list
      elements: dict
metrics:
  description:
    - The summary as metrics for M(textfile_metrics) (its C(metrics) option), in seconds.
      C(fleetnap_resume_kernel_seconds), C(fleetnap_resume_end_to_end_seconds) and
      C(fleetnap_suspend_kernel_seconds) (label C(stat), median and max), C(fleetnap_resume_part_seconds)
      (label C(part), the worst cycle's split), C(fleetnap_resume_slowest_device_seconds) (labels C(device)
      and C(phase)) and C(fleetnap_resume_cycles_measured).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.fleetnap.resumesummary import SummaryError, resume_metrics, summarize
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, number, text

CHECKS = {
    "host": text(max_len=255),
    "top": number(lo=1, hi=100, integer=True),
}


def main():
    module = ansible_module(
        argument_spec=dict(
            cycles=dict(type="list", elements="dict", required=True),
            recommendations=dict(type="list", elements="raw"),
            host=dict(type="str", default=""),
            top=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    try:
        summary = summarize(p["cycles"], p["recommendations"], p["host"], p["top"])
    except SummaryError as e:
        module.fail_json(msg="resume_summary: %s" % e)
    module.exit_json(changed=False, summary=summary, metrics=resume_metrics(summary))


if __name__ == "__main__":
    main()
