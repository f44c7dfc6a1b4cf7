#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: powernap_advice
short_description: Advise whether a host should sleep between requests (PowerNap vs DVFS)
description:
  - Implements the analysis of the S3 study's section V (after Meisner et al., PowerNap, ASPLOS
    2009) for one host, from its own measurements. Performance is an M/G/1 queue with exceptional
    first service (the first request after an idle period also waits for the resume); power is the
    time-weighted mix of busy, transition and sleep power.
  - DVFS is the alternative. It scales only the CPU's share of the power and stretches service
    times.
  - Returns power and mean response time relative to no power management for PowerNap and DVFS, the
    crossover utilisation below which PowerNap draws less power than DVFS, and an advice (V(sleep)
    or V(stay-awake)) with a one-line reason.
  - The model, every default and its source, and a reproduction of the study's figures are in
    C(docs/powernap.md).
  - Runs on the controller (C(delegate_to=localhost)); it changes nothing but O(svg_dest).
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  transition_latency_s:
    description:
      - Resume latency in seconds, kernel or end to end (from the wake trigger to the service
        answering), as measured by C(measure_resume.yml). The end-to-end value is the one
        requests wait for.
      - Also the suspend latency unless O(suspend_latency_s) is given.
    type: float
    required: true
  suspend_latency_s:
    description:
      - Seconds from the last request to the host being asleep. A request arriving during the
        suspend waits for it to finish, then for the resume. Both are charged at
        O(transition_power_fraction).
      - Default O(transition_latency_s). The study measured both, 680/650 ms and 50/50 ms.
    type: float
  utilization:
    description:
      - Busy fraction of the host without power management, in [0, 1). Either one number or a
        series of recent measurements. For a series, the advice uses its
        O(utilization_percentile) (nearest rank), so busy hours count and the average does not hide
        them.
    type: raw
    required: true
  utilization_percentile:
    description: Percentile of a utilisation series that the advice uses.
    type: float
    default: 95
  service_time_s:
    description:
      - Mean service time of one request, in seconds.
      - The default of 38 ms is the PowerNap Web workload that the study's figures use (see
        C(docs/powernap.md)).
    type: float
    default: 0.038
  service_time_cv:
    description: Coefficient of variation of the service time (0 constant, 1 exponential).
    type: float
    default: 1.0
  idle_power_fraction:
    description: Idle power as a fraction of peak. Idle servers draw about 60 % of peak (PowerNap, and the study's section V).
    type: float
    default: 0.6
  sleep_power_fraction:
    description: Power in S3 as a fraction of peak. The study measured 3.8 % and 6 %.
    type: float
    default: 0.05
  transition_power_fraction:
    description: Power during suspend and resume as a fraction of peak. The default charges peak power, which is conservative.
    type: float
    default: 1.0
  cpu_power_fraction:
    description: The CPU's share of server power, the only part DVFS scales. The study takes 33 %.
    type: float
    default: 0.33
  dvfs_min_frequency:
    description: Lowest DVFS frequency relative to nominal (0.5 is a 2x range), from 0.01 (a 100x range) to 1.
    type: float
    default: 0.5
  dvfs_target_utilization:
    description:
      - DVFS lowers the frequency until the stretched utilisation reaches this value, and never
        below O(dvfs_min_frequency).
    type: float
    default: 0.8
  dvfs_power_exponent:
    description: CPU power scales as frequency to this power (3 = P ~ f V^2 with V ~ f).
    type: float
    default: 3.0
  response_time_objective:
    description:
      - Highest mean response time allowed, relative to no power management (1.5 = at most 1.5x).
    type: float
    default: 1.5
  require_beating_dvfs:
    description:
      - If V(true), advise V(sleep) only below the crossover utilisation, where sleeping saves
        more than DVFS would.
      - If V(false), advise V(sleep) wherever sleeping saves power compared with no power
        management.
    type: bool
    default: true
  svg_dest:
    description:
      - Write the curves to this file as a self-contained SVG. The curves show power and response
        time against utilisation, with one line per latency of O(svg_latencies_s), one for the
        host's latency and one for DVFS. The host's utilisation is marked.
      - The file is written atomically and only when its content changes.
    type: path
  svg_latencies_s:
    description: Transition latencies drawn next to the host's own (the study's 10, 50, 100 and 650 ms by default).
    type: list
    elements: float
    default: [0.01, 0.05, 0.1, 0.65]
  svg_title:
    description: Title of the SVG. Default names the host latency and utilisation.
    type: str
attributes:
  check_mode:
    support: full
    details:
      - The advice is computed as usual. In check mode O(svg_dest) is not written, and C(changed)
        tells whether it would be.
  diff_mode:
    support: full
    details:
      - The diff shows the old and the new SVG text of O(svg_dest).
  platform:
    support: full
notes:
  - The model describes a single server that sleeps whenever it is idle, with Poisson arrivals. Its
    numbers are estimates for a decision, not a forecast of the power bill.
seealso:
  - name: "Meisner, Gold, Wenisch: PowerNap: Eliminating Server Idle Power (ASPLOS 2009)"
    description: The model this module implements.
    link: https://doi.org/10.1145/1508244.1508269
"""

EXAMPLES = r"""
- name: Advise from the measured end-to-end resume latency and a day of utilisation samples
  powernap_advice:
    transition_latency_s: "{{ ansible_facts['ansible_local']['fleetnap']['resume']['end_to_end_ms'] / 1000 }}"
    utilization: "{{ host_utilization_samples }}"
    service_time_s: 0.012
    response_time_objective: 2.0
    svg_dest: "/var/lib/fleetnap/reports/{{ inventory_hostname }}-powernap.svg"
  delegate_to: localhost
  register: nap

- name: Show the advice
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ nap.advice }} ({{ nap.reason }})"

- name: What would a 10 ms resume buy at 30 % load?
  powernap_advice:
    transition_latency_s: 0.01
    utilization: 0.3
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
utilization:
  description: The utilisation the advice is for (the percentile of a series).
  returned: success
  type: float
  sample: 0.31
utilization_summary:
  description: How RV(utilization) was obtained.
  returned: success
  type: str
  sample: p95 of 288 samples
powernap:
  description: The host sleeping whenever it is idle.
  returned: success
  type: dict
  contains:
    power_rel:
      description: Mean power relative to no power management.
      type: float
      sample: 0.82
    response_time_rel:
      description: Mean response time relative to no power management.
      type: float
      sample: 1.9
    power:
      description: Mean power as a fraction of peak.
      type: float
    response_time_s:
      description: Mean response time in seconds.
      type: float
    busy_fraction:
      description: Fraction of time serving.
      type: float
    transition_fraction:
      description: Fraction of time suspending or resuming.
      type: float
    sleep_fraction:
      description: Fraction of time asleep.
      type: float
    setup_delay_s:
      description: Mean extra wait caused by the transitions, in seconds.
      type: float
dvfs:
  description: The host staying awake and scaling its CPU frequency instead.
  returned: success
  type: dict
  contains:
    power_rel:
      description: Mean power relative to no power management.
      type: float
    response_time_rel:
      description: Mean response time relative to no power management.
      type: float
    power:
      description: Mean power as a fraction of peak.
      type: float
    response_time_s:
      description: Mean response time in seconds.
      type: float
    frequency:
      description: Frequency the DVFS model runs at, relative to nominal.
      type: float
baseline:
  description: No power management. Contains C(power) (fraction of peak) and C(response_time_s).
  returned: success
  type: dict
crossover_utilization:
  description:
    - Lowest utilisation at which PowerNap draws at least as much power as DVFS. Below it,
      sleeping draws less.
    - V(null) when sleeping draws less at every utilisation in [0, 1).
  returned: success
  type: float
  sample: 0.16
saves_power:
  description:
    - Whether sleeping draws less power than no power management and, with
      O(require_beating_dvfs), also less than DVFS.
  returned: success
  type: bool
keeps_objective:
  description: Whether PowerNap's relative mean response time is within O(response_time_objective).
  returned: success
  type: bool
advice:
  description: V(sleep) if sleeping saves power and keeps the objective, else V(stay-awake).
  returned: success
  type: str
  sample: stay-awake
reason:
  description: One line with the numbers behind RV(advice).
  returned: success
  type: str
  sample: "resume 650 ms at 31 % load: power 1.21x (DVFS 0.72x, crossover 1.5 %), response 12.97x > objective 1.5x"
model:
  description: All model parameters used, defaults included.
  returned: success
  type: dict
svg_dest:
  description: Where the curves were written (only when O(svg_dest) is given).
  returned: when svg_dest is given
  type: str
"""

import os

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.module_utils.fleetnap.powernapconf import ADVICE_BOUNDS, DEFAULTS
from ansible.module_utils.fleetnap.powernap import (
    PowerNapError,
    advice_svg,
    advise,
    check_latency,
    utilization_input,
)

from ansible.module_utils.fleetnap.validate import (
    all_of, ansible_module, check_params, items, number, numbers, path, text as text_check,
)

MODEL_OPTIONS = tuple(sorted(DEFAULTS))

# Every number finite and bounded: the model raises x ** exponent and squares service times, so an
# absurd value would overflow in the middle of the computation instead of being refused here.
CHECKS = {
    "transition_latency_s": number(lo=0, hi=3600),
    "suspend_latency_s": number(lo=0, hi=3600),
    "idle_power_fraction": number(lo=0, hi=1),
    "sleep_power_fraction": number(lo=0, hi=1),
    "cpu_power_fraction": number(lo=0, hi=1),
    "transition_power_fraction": number(lo=0, hi=100),
    "dvfs_min_frequency": number(lo=0.01, hi=1),
    "dvfs_target_utilization": number(lo=0, lo_open=True, hi=1, hi_open=True),
    "dvfs_power_exponent": number(lo=1, hi=10),
    **dict((k, number(**bounds)) for k, bounds in ADVICE_BOUNDS.items()),
    "svg_dest": path(),
    "svg_latencies_s": all_of(items(50), numbers(lo=0, hi=3600)),
    "svg_title": text_check(max_len=300),
}


def write_svg(module, dest, text):
    """Write ``text`` to ``dest`` atomically (fileio.atomic_write) if it differs; return (changed,
    before). Whatever cannot be replaced (a directory, a FIFO, an immutable file, an append-only
    directory) is refused before anything is written."""
    before = None
    if os.path.isdir(dest):
        module.fail_json(msg="svg_dest %s is a directory; give a file name such as %s"
                             % (dest, os.path.join(dest, "powernap.svg")))
    parent = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(parent):
        module.fail_json(msg="the directory of svg_dest %s does not exist; create %s first" % (dest, parent))
    data = to_bytes(text)
    if fileio.same_content(dest, data, 0o644):
        return False, text
    problem = fileio.write_problem(dest)
    if problem:
        module.fail_json(msg="cannot write svg_dest %s: %s; nothing was written" % (dest, problem))
    if os.path.lexists(dest):
        try:
            old = fileio.read_bytes(dest, fileio.RECORD, root=parent, what="svg_dest")
            before = old.decode("utf-8", "replace")
        except (OSError, fileio.HostFsError) as e:
            module.fail_json(msg="cannot read svg_dest %s: %s" % (dest, to_native(e)))
    if module.check_mode:
        return True, before
    try:
        fileio.atomic_write(dest, data, 0o644, root=parent, module=module)
    except (OSError, fileio.HostFsError) as e:
        module.fail_json(msg="%s (is %s writable?); svg_dest is as it was" % (to_native(e), parent))
    return True, before


def main():
    spec = dict(
        transition_latency_s=dict(type="float", required=True),
        suspend_latency_s=dict(type="float"),
        utilization=dict(type="raw", required=True),
        utilization_percentile=dict(type="float", default=95.0),
        response_time_objective=dict(type="float", default=1.5),
        require_beating_dvfs=dict(type="bool", default=True),
        svg_dest=dict(type="path"),
        svg_latencies_s=dict(type="list", elements="float", default=[0.01, 0.05, 0.1, 0.65]),
        svg_title=dict(type="str"),
    )
    for k in MODEL_OPTIONS:
        spec[k] = dict(type="float", default=DEFAULTS[k])
    module = ansible_module(argument_spec=spec, supports_check_mode=True)
    check_params(module, CHECKS)
    p = module.params
    try:
        p = dict(p, utilization=utilization_input(p["utilization"]))
        out, model, tr, rho = advise(p)
        if p["svg_dest"]:
            latencies = [check_latency(t, "svg_latencies_s") for t in p["svg_latencies_s"]]
            svg = advice_svg(out, model, tr, rho, latencies, p["svg_title"])
    except PowerNapError as e:
        module.fail_json(msg=str(e))
    changed = False
    result = dict(out)
    if p["svg_dest"]:
        changed, before = write_svg(module, p["svg_dest"], svg)
        result["svg_dest"] = p["svg_dest"]
        if module._diff:
            result["diff"] = {"before": before or "", "after": svg,
                              "before_header": p["svg_dest"], "after_header": p["svg_dest"]}
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
