#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sleep_policy
short_description: Decide which system sleep states a host may enter (S3, s2idle or none)
description:
  - V(deep) (alias V(mem)) allows suspend-to-RAM (ACPI S3); V(s2idle) allows only suspend-to-idle;
    V(none) forbids system sleep.
  - Sets C(/sys/power/mem_sleep) now, writes a systemd-sleep drop-in
    (C(/etc/systemd/sleep.conf.d/fleetnap.conf)) so C(systemctl suspend) uses the same state
    (C(SuspendState=mem) or C(freeze); C(MemorySleepMode=) for systemd 256 and later, which sets
    mem_sleep itself; no C(SuspendMode=), which systemd before 256 writes to C(/sys/power/disk) and
    refuses to suspend when that file does not offer the value), and
    with V(none) masks the systemd sleep targets (as C(systemctl mask) does, a link to
    C(/dev/null)), so nothing suspends the host behind the service's back.
  - Asking for a state the host does not offer fails and changes nothing.
  - The first change records the original mem_sleep choice and which targets were masked, so
    O(state=absent) restores them.
  - Which module to call. This one sets the sleep state alone. To apply a whole latency profile
    (C-states and the system sleep state) call M(fleetnap_profile), which decides the state from
    the stored resume measurement; this module is for a sleep policy without a C-state gate, and
    for the C(latency_profile) role's PowerNap C(advise) path.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  allow:
    description: The deepest sleep state allowed. Required with O(state=present).
    type: str
    choices: [deep, mem, s2idle, none]
  mask_targets:
    description: With O(allow=none), mask C(sleep.target), C(suspend.target), C(hibernate.target),
      C(hybrid-sleep.target) and C(suspend-then-hibernate.target).
    type: bool
    default: true
  state:
    description: V(present) applies the policy; V(absent) restores what was there before fleetnap.
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description: Root under which C(/sys) and C(/etc) are found; V(/) is the live host.
    type: path
    default: /
  metrics_dir:
    description:
      - node_exporter textfile collector directory (an absolute path on the host, not under
        O(sysfs_root)). When set, the policy is published in C(fleetnap_sleep_policy.prom) as
        C(fleetnap_sleep_state_offered) and C(fleetnap_sleep_state_allowed) (label C(state) =
        C(deep), C(s2idle)), C(fleetnap_sleep_mem_sleep_mode) (label C(mode), 1 for the
        selected one) and C(fleetnap_sleep_target_masked) (label C(target)), written atomically.
      - With O(state=absent) the file is removed, since fleetnap no longer holds a policy there.
      - The directory is created when missing; a path that exists and is not a directory fails
        before anything is changed.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - Decides and reports C(changed) (the metrics file included), writes nothing.
  diff_mode:
    support: full
  platform:
    support: full
seealso:
  - module: cpuidle_qos
"""

EXAMPLES = r"""
- name: Allow S3 (measured resume latency fits the service's budget)
  sleep_policy:
    allow: deep

- name: This host must never sleep
  sleep_policy:
    allow: none

- name: Allow S3 and publish the policy for node_exporter's textfile collector
  sleep_policy:
    allow: deep
    metrics_dir: /var/lib/prometheus/node-exporter

- name: Restore the host's original sleep configuration (and drop the metrics file)
  sleep_policy:
    state: absent
    metrics_dir: /var/lib/prometheus/node-exporter
"""

RETURN = r"""
allow:
  description: The policy in force after the call (null after state=absent).
  returned: always
  type: str
  sample: deep
offered:
  description: What the kernel offers (/sys/power/state and mem_sleep).
  returned: always
  type: dict
  sample: {states: [freeze, mem], mem_sleep_options: [s2idle, deep], mem_sleep: s2idle,
           s3_available: true, s2idle_available: true}
mem_sleep:
  description: The mem_sleep choice after the call.
  returned: always
  type: str
  sample: deep
masked_targets:
  description: Sleep targets masked after the call.
  returned: always
  type: list
  elements: str
  sample: []
metrics_path:
  description: The metrics file written (or removed with O(state=absent)); only with O(metrics_dir).
  returned: when metrics_dir is set
  type: str
  sample: /var/lib/prometheus/node-exporter/fleetnap_sleep_policy.prom
"""

from ansible.module_utils.fleetnap.sleeppolicy import (
    SLEEP_ARGS, SLEEP_REQUIRED_IF, apply_sleep, plan_sleep, sleep_result,
)
from ansible.module_utils.fleetnap.validate import ansible_module, check_params, path

CHECKS = {"sysfs_root": path(), "metrics_dir": path()}


def main():
    module = ansible_module(argument_spec=SLEEP_ARGS, required_if=SLEEP_REQUIRED_IF, supports_check_mode=True)
    check_params(module, CHECKS)
    plan = plan_sleep(module, module.params)
    changed = apply_sleep(module, plan)
    module.exit_json(**sleep_result(module, plan, changed))


if __name__ == "__main__":
    main()
