#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_energy
short_description: Host-hours and energy a fleet's gear shifts did not spend, per day
description:
  - Runs on the controller. Reads the gear history (gear_shift.yml's C(history.jsonl), with every
    host's power state at the end of every shift) and every host's power figures. It returns
    per UTC day the host-hours in each state, the host-hours parked (asleep in S3 or off) and the
    energy used and not spent against staying on (kWh).
  - A host is taken to be in the state a shift left it in until the next shift ended.
  - Every line's C(finished) must lie between 2000-01-01 and a year from now (a line dated in year 1
    is refused naming the file and line, instead of walking every day since); the files are read
    as regular files in their directories (no link out of it, no FIFO or device; the history at
    most 64 MiB, strict JSON per line).
  - Power figures are per host, watts C(on), C(asleep) (S3) and C(off) (soft-off standby).
    O(power_w) (for example each host's C(fleetnap_power_w) from the inventory) is merged into
    O(power_file), which keeps them for the fleet report; a host without figures counts in
    host-hours only and is listed in RV(hosts_without_figures).
  - >-
    The BMC's own readings are the better source where a BMC offers them. With O(measured_file)
    (kept by M(gear_record) from the C(read_power) readings of M(gear_observe): DCMI power reading,
    Redfish C(EnvironmentMetrics), C(Power), C(PowerSubsystem)) a host's measured median per state
    replaces its figure for that state, and RV(figure_sources) says which was used. The lab's and
    the simulator's C(ipmi_sim) answer DCMI with completion code 0xC1 (no reading), so there the
    inventory's figures stay.
version_added: "0.3.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  history_file:
    description: The gear history (one JSON object per line with C(finished) and C(power)). Missing = no shifts yet.
    type: path
    required: true
  power_file:
    description: Where the hosts' power figures are kept (JSON, host -> {on, asleep, off}).
    type: path
    required: true
  measured_file:
    description:
      - The measured watts per host and state, as M(gear_record) keeps them (its C(measured_file)); only read.
      - Missing = none measured.
    type: path
  power_w:
    description: Host -> {on, asleep, off} watts to record (replacing what O(power_file) had for those hosts).
    type: dict
    default: {}
  until:
    description: Unix time the last shift's states are counted to. Default now.
    type: float
attributes:
  check_mode:
    support: full
    details:
      - Computes the same; O(power_file) is not written.
  diff_mode:
    support: full
    details:
      - The figures of O(power_file) before and after.
  platform:
    support: full
    details:
      - Runs on the controller.
seealso:
  - module: fleet_report
"""

EXAMPLES = r"""
- name: Energy not spent, per day
  gear_energy:
    history_file: "{{ playbook_dir }}/../artifacts/gear/history.jsonl"
    power_file: "{{ playbook_dir }}/../artifacts/gear/power_w.json"
    power_w:
      web1: {"on": 130, "asleep": 5, "off": 3}    # quoted: YAML reads on/off unquoted as booleans
  delegate_to: localhost
  run_once: true
  register: energy
"""

RETURN = r"""
days:
  description: Per UTC day, oldest first.
  returned: always
  type: list
  elements: dict
  sample:
    - day: "2026-11-25"
      host_hours: {"on": 40.0, asleep: 30.5, "off": 1.5, unknown: 0.0}
      parked_host_hours: 32.0
      kwh_used: 5.4
      kwh_if_on: 9.36
      kwh_not_spent: 3.96
total:
  description: The days' sums (parked_host_hours, kwh_used, kwh_if_on, kwh_not_spent).
  returned: always
  type: dict
figure_sources:
  description: Host -> state -> where its watts came from, V(inventory), C(measured (SOURCE, DATE)) or V(none).
  returned: always
  type: dict
  sample: {web1: {"on": "measured (dcmi, 2026-11-26)", asleep: inventory, "off": inventory}}
hosts_without_figures:
  description: Hosts in the history without power figures (host-hours only).
  returned: always
  type: list
  elements: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.energy import (
    EnergyError, check_figures, daily, effective_figures, read_history, read_measured_file, read_power_file,
    read_text,
)
from ansible.module_utils.fleetnap.validate import ParamError, check_params, number, path

CHECKS = {
    "history_file": path(),
    "power_file": path(),
    "measured_file": path(),
    "until": number(lo=0, hi=4102444800),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            history_file=dict(type="path", required=True),
            power_file=dict(type="path", required=True),
            power_w=dict(type="dict", default={}),
            measured_file=dict(type="path"),
            until=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    try:
        new = check_figures(p["power_w"], "option power_w")
        kept = read_power_file(p["power_file"])
        measured = read_measured_file(p["measured_file"]) if p["measured_file"] else {}
        history = read_history((read_text(p["history_file"], "gear history") or "").splitlines(),
                               p["history_file"])
    except (EnergyError, ParamError) as exc:
        module.fail_json(msg=str(exc))
    figures = dict(kept, **new)
    changed = figures != kept
    used, sources = effective_figures(figures, measured)
    result = dict(changed=changed, figure_sources=sources,
                  **daily(history, used, p["until"] if p["until"] is not None else time.time()))
    if module._diff:
        result["diff"] = {"before": {"power_w": kept}, "after": {"power_w": figures}}
    if changed and not module.check_mode:
        directory = os.path.dirname(p["power_file"]) or "/"
        if not os.path.isdir(directory):
            module.fail_json(msg="the power file's directory %s does not exist" % directory)
        try:
            fileio.atomic_write(p["power_file"], json.dumps(figures, indent=1, sort_keys=True) + "\n",
                                0o644, directory, module)
        except (fileio.HostFsError, OSError) as exc:
            module.fail_json(msg="could not write the power file %s: %s (it is as it was)" % (p["power_file"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
