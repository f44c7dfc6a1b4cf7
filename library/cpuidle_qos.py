#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cpuidle_qos
short_description: Allow only the C-states whose exit latency fits a latency budget
description:
  - The latency gate of fleetnap. For each idle state of the host's cpuidle driver it computes
    an effective exit latency (the measured worst case when one is given, otherwise the driver's
    declared latency times O(declared_latency_margin)), disables the states above
    O(max_latency_us) and enables the others, on every selected CPU, in one batch.
  - C(POLL) always stays enabled. Explicit O(disable) and O(enable) lists win over the budget and
    are checked against the state names the host really has.
  - Optionally sets the per-CPU PM QoS resume latency, holds a global limit on
    C(/dev/cpu_dma_latency) through a small systemd service, and re-applies everything at boot.
  - Everything is validated before the first write; if a write fails, the writes already made are
    rolled back. The first change records the kernel's original values so O(state=absent) can
    restore them.
  - Warns when something else manages the same knobs (tuned, C(intel_idle.max_cstate),
    C(processor.max_cstate), C(idle=), C(cpuidle.off=1) on the kernel command line).
  - Which module to call. This one gates the C-states alone. To apply a whole latency profile
    (C-states and the system sleep state) call M(fleetnap_profile), one call per host, which is
    what the C(latency_profile) role does; this module is for the C-states without a sleep
    policy, and the role's PowerNap C(advise) path, which decides between reading and writing.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  max_latency_us:
    description:
      - Latency budget in microseconds. States whose effective exit latency exceeds it are
        disabled, the others enabled. Omit (or null) for no limit (all states enabled).
    type: float
  measured_latency_us:
    description:
      - Worst measured wake latency per state name, in microseconds (from the measurement
        playbooks or the inventory). Wins over the declared value (see O(combine)).
    type: dict
    default: {}
  declared_latency_margin:
    description:
      - Multiplier applied to declared latencies of states that were not measured. Must be >= 1.
        The C-state thesis measured up to 7x the declared values on Xeons.
    type: float
    default: 1.0
  combine:
    description:
      - How a measured value and the declared one combine. V(measured) takes the measurement
        when there is one; V(worst) takes the larger of measured and declared x margin.
    type: str
    choices: [measured, worst]
    default: measured
  disable:
    description: State names to disable regardless of the budget.
    type: list
    elements: str
    default: []
  enable:
    description: State names to enable regardless of the budget.
    type: list
    elements: str
    default: []
  cpus:
    description:
      - CPUs to act on, as a kernel CPU list (V(0-3,8-11)) or a list of numbers. Default all
        present CPUs. CPUs that are offline and have no cpuidle directory are skipped and reported.
    type: raw
  resume_latency_us:
    description:
      - Per-CPU PM QoS resume latency (C(power/pm_qos_resume_latency_us)) for the selected CPUs.
        V(0) means no constraint. Omit to leave it as it is.
    type: int
  global_latency_us:
    description:
      - Global CPU wake-up latency limit held on C(/dev/cpu_dma_latency) by the service
        C(fleetnap-cpu-dma-latency). Omit to remove a limit set earlier by fleetnap.
    type: int
  governor:
    description:
      - cpuidle governor to switch to (one of the host's C(available_governors)), for example
        V(menu). Omit to keep the current one. The C(haltpoll) governor of KVM guests ignores
        per-state disables, so a budget has no effect under it; the module warns about that.
    type: str
  persist:
    description:
      - Re-apply the state disables and the per-CPU PM QoS at boot (service C(fleetnap-cpuidle),
        states matched by name). V(false) removes the boot-time service if fleetnap installed it.
    type: bool
    default: false
  metrics_dir:
    description:
      - node_exporter textfile collector directory. When set, the decision is published as
        C(fleetnap_cstate_allowed), C(fleetnap_cstate_declared_latency_seconds),
        C(fleetnap_cstate_effective_latency_seconds), C(fleetnap_cpuidle_budget_seconds) and
        C(fleetnap_pm_qos_resume_latency_seconds) in C(fleetnap_cpuidle.prom).
    type: path
  state:
    description:
      - V(present) applies the decision. V(absent) restores the values the kernel had before
        fleetnap first changed them and removes fleetnap's services and files.
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description:
      - Root under which C(/sys), C(/proc/cmdline), C(/etc) and C(/var/lib) are found. V(/) is the
        live host; another directory is a captured or prepared tree (services are then installed
        as files only, never started).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    details:
      - Computes and returns the decision and the diff, writes nothing.
  diff_mode:
    support: full
    details:
      - Before/after of disabled CPUs per state, PM QoS, the global limit and persistence.
  platform:
    support: full
notes:
  - Requires a cpuidle driver for state limits. Without one the module reports no states and
    warns; an explicit state name then fails.
  - Without systemd as PID 1 (containers, image builds) unit files are installed but not started.
seealso:
  - module: cpuidle_info
  - module: sleep_policy
"""

EXAMPLES = r"""
- name: Allow only C-states that wake within 20 us (declared values inflated by 50 %)
  cpuidle_qos:
    max_latency_us: 20
    declared_latency_margin: 1.5

- name: Use the measured worst case per state from the wake-latency playbook
  cpuidle_qos:
    max_latency_us: 50
    measured_latency_us:
      C1: 19.3
      C1E: 21.8
      C3: 78.8

- name: Keep C6 off on the packet-processing CPUs, hold a global 20 us limit, survive reboots
  cpuidle_qos:
    cpus: "2-15"
    disable: [C6]
    global_latency_us: 20
    persist: true

- name: Undo everything fleetnap changed
  cpuidle_qos:
    state: absent
"""

RETURN = r"""
driver:
  description: The cpuidle driver, or null when the host has none.
  returned: always
  type: str
  sample: intel_idle
states:
  description: The decision per state name.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: State name, type: str, sample: C1E}
    index: {description: State index in sysfs, type: int, sample: 2}
    declared_us: {description: Driver's declared exit latency, type: int, sample: 10}
    measured_us: {description: Measured worst case if given, type: float, sample: 21.8}
    effective_us: {description: Latency the budget was compared with, type: float, sample: 21.8}
    allowed: {description: Whether the state stays enabled, type: bool, sample: false}
    reason: {description: Why, type: str, sample: "measured 21.8 us > budget 20 us"}
  sample:
    - {name: POLL, index: 0, declared_us: 0, measured_us: null, effective_us: 0, allowed: true,
       reason: POLL always stays enabled}
cpus:
  description: The CPUs acted on (kernel CPU list).
  returned: always
  type: str
  sample: 0-47
skipped_cpus:
  description: Offline CPUs without a cpuidle directory, which were left alone.
  returned: always
  type: str
  sample: ""
writes:
  description: Number of sysfs attributes written (or that would be in check mode).
  returned: always
  type: int
  sample: 96
governor:
  description: The cpuidle governor after this call.
  returned: always
  type: str
  sample: menu
global_latency_us:
  description: The global limit fleetnap holds after this call, or null.
  returned: always
  type: int
  sample: 20
persist:
  description: Whether the boot-time service is installed after this call.
  returned: always
  type: bool
  sample: false
restored:
  description: With state=absent, whether an original-values record existed and was restored.
  returned: when state=absent
  type: bool
  sample: true
"""

from ansible.module_utils.fleetnap.gate import GATE_ARGS, apply_gate, gate_result, plan_gate
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, path

CHECKS = {"sysfs_root": path(), "metrics_dir": path()}


def main():
    module = ansible_module(argument_spec=GATE_ARGS, supports_check_mode=True)
    check_params(module, CHECKS)
    plan = plan_gate(module, module.params)
    changed = apply_gate(module, plan)
    module.exit_json(**gate_result(module, plan, changed))


if __name__ == "__main__":
    main()
