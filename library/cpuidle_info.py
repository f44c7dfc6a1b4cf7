#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpuidle_info
short_description: Read a host's cpuidle driver, idle states, PM QoS and sleep states
description:
  - "Reads C(/sys/devices/system/cpu) and C(/sys/power) in one call and returns them as facts
    (C(ansible_facts['fleetnap_cpuidle'])): the cpuidle driver and governor, every CPU's idle
    states (index, name, desc, declared exit latency, target residency, disable, usage, time),
    per-CPU PM QoS resume latency, a per-state summary, and the system sleep states offered."
  - Never changes anything.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.sysfs_root
  - fleetnap.power.attributes
  - fleetnap.power.attributes.facts
options:
  per_cpu:
    description:
      - Include every CPU's states. V(false) returns only the per-state summary, which is enough
        for decisions and much smaller on many-core hosts.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Read-only; runs the same in check mode.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
seealso:
  - module: cpuidle_qos
"""

EXAMPLES = r"""
- name: Read the C-state table
  cpuidle_info:

- name: Show which states exist and their declared exit latency
  ansible.builtin.debug:
    msg: "{{ ansible_facts['fleetnap_cpuidle']['states'] | map(attribute='name') | list }}"

- name: Read a captured machine
  cpuidle_info:
    sysfs_root: /tmp/captured/ivbep1
    per_cpu: false
"""

RETURN = r"""
ansible_facts:
  description: Facts under the key C(fleetnap_cpuidle).
  returned: always
  type: complex
  contains:
    fleetnap_cpuidle:
      description: The cpuidle model.
      returned: always
      type: dict
      contains:
        driver: {description: cpuidle driver or null, type: str, sample: intel_idle}
        governor: {description: cpuidle governor, type: str, sample: menu}
        available_governors: {description: Governors offered, type: list, elements: str, sample: [menu]}
        present_cpus: {description: Present CPUs, type: str, sample: 0-47}
        online_cpus: {description: Online CPUs, type: str, sample: 0-47}
        offline_cpus: {description: Present but offline CPUs, type: str, sample: ""}
        states:
          description: One row per state name, aggregated over CPUs.
          type: list
          elements: dict
          sample:
            - {name: C1E, index: 2, desc: MWAIT 0x01, declared_us: 10, residency_us: 80,
               cpus: 0-47, disabled_cpus: "", usage: 124, time_us: 12934}
        cpus:
          description: >-
            Per CPU (when O(per_cpu)): cpu, online, pm_qos_resume_latency_us and states (index,
            name, desc, latency_us, residency_us, disable, default_status, usage, time_us).
          type: list
          elements: dict
        pm_qos_resume_latency_us:
          description: Per-CPU PM QoS resume latency (0 = no constraint, "n/a" = none tolerated).
          type: dict
          sample: {"0": 0, "1": 0}
        sleep:
          description: Offered sleep states, mem_sleep options and choice, PM debug switches.
          type: dict
          sample: {states: [freeze, mem], mem_sleep_options: [s2idle, deep], mem_sleep: deep,
                   s3_available: true, s2idle_available: true, pm_print_times: false,
                   pm_debug_messages: false}
"""

from ansible.module_utils.fleetnap.cpuidle import CpuidleError, read_model, summarize_states
from ansible.module_utils.fleetnap.fileio import HostFsError
from ansible.module_utils.fleetnap.sleep import read_sleep
from ansible.module_utils.fleetnap.sysfs import HostFS
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, directory

CHECKS = {
    "sysfs_root": directory(),      # absolute, no '..', an existing directory
}


def main():
    module = ansible_module(
        argument_spec=dict(
            per_cpu=dict(type="bool", default=True),
            sysfs_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    fs = HostFS(module.params["sysfs_root"])
    try:
        model = read_model(fs)
        facts = dict((k, v) for k, v in model.items() if k != "cpus")
        facts["states"] = summarize_states(model)
        facts["pm_qos_resume_latency_us"] = dict(
            (str(c["cpu"]), c["pm_qos_resume_latency_us"]) for c in model["cpus"])
        facts["sleep"] = read_sleep(fs)
    except (CpuidleError, HostFsError) as exc:
        module.fail_json(msg=str(exc))
    except UnicodeDecodeError as exc:
        # HostFS.read decodes without naming the file: say at least which tree holds it.
        module.fail_json(msg="a file under sysfs_root %s is not UTF-8 text (%s): is sysfs_root a sysfs "
                             "tree?" % (fs.root, exc))
    if module.params["per_cpu"]:
        facts["cpus"] = model["cpus"]
    module.exit_json(changed=False, ansible_facts={"fleetnap_cpuidle": facts})


if __name__ == "__main__":
    main()
