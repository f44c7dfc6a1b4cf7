#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_record
short_description: Record a gear shift on the controller in one call (state, history, energy, metrics)
description:
  - Internal. A step of the gear_shift role (its record phase, and its plan phase when a BMC check
    stops the shift), documented for those who compose the role's phases themselves; a playbook of
    one's own calls C(fleetnap.power.gear_shift).
  - Runs on the controller at the end of C(gear_shift.yml) (C(delegate_to=localhost), C(run_once)).
  - Decides the shift's result from the plan, the per-host results and where the hosts are now
    (V(failed) when a host's action failed or a host is not where the plan put it, else the plan's
    own V(ok) or V(degraded)), unless O(result) is given (a shift stopped before it acted).
  - Writes the state file (the document M(gear_shift_plan) reads as the previous shift's result),
    appends the shift to the history (a JSON line with every host's power state at its end),
    keeps the hosts' power figures and computes the energy not spent as M(gear_energy) does,
    and writes the C(fleetnap_gear*) metrics for node_exporter's textfile collector
    (C(fleetnap_gear.prom) in O(metrics_dir)).
  - Every input is checked before anything is read or written. When a write fails, the files
    written before it in this call are put back as they were, and the message says so (or names
    exactly which files could not be put back).
  - A target that could not be written or put back (a directory, a FIFO or device, an immutable
    or append-only file or directory) is refused before anything is written. The files read (the
    history, at most 64 MiB, and the power figures) must be regular files in their directories (no
    link out of it), strict JSON, and every history line's C(finished) must lie between 2000-01-01
    and a year from now (a line dated in year 1 is refused naming the file and line).
  - Two rows for one host in O(after) (or two power rows for one host and state) are refused
    naming both rows (they would make a metrics file node_exporter rejects whole).
version_added: "0.4.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  plan:
    description: M(gear_shift_plan)'s return when the shift was planned.
    type: dict
    required: true
  after:
    description:
      - M(gear_shift_plan)'s return over the hosts as they were observed after the shift.
      - Give this or O(observed).
    type: dict
  observed:
    description:
      - The observation after the shift (the C(hosts) that M(gear_observe) returns, host name -> what was seen),
        from which this module decides where every host is now against the plan's target groups,
        as M(gear_shift_plan) would with its C(groups_on) option (one module call fewer per shift).
      - Give this or O(after). Needs O(replicas) and O(gmin) as the plan had them.
    type: dict
  observed_before:
    description:
      - O(observed) is the observation from before the shift. Every host whose action in O(actions) succeeded is
        taken as the waves verified it - a woken host answering (the wave saw it greet), a host parked asleep silent
        with its chassis on, a host powered off silent with its chassis off (each chassis only where O(observed)
        read that host's BMC) - and its power reading from before is dropped; the others as observed (a failed
        action is not taken as done).
      - Spares a second observation round whose only news would be what the waves just verified. A caller that
        wants the draw of the parked hosts measured (gear_observe C(read_power)) observes again instead.
    type: bool
    default: false
  observe_again_on_failure:
    description:
      - With O(observed_before) and O(lock_file), when the running shift's journal holds a failure (a
        wake, a park or a drain hook that failed, as M(gear_state) answers RV(fleetnap.power.gear_state#module:stop)), nothing is
        written, the lock is kept, and RV(observe_again) is true. The caller then observes every
        host again and calls this module with that observation; a shift whose every action the waves
        verified is recorded in this one call (no query of the journal before it).
    type: bool
    default: false
  replicas:
    description: Number of gear groups, as planned (with O(observed)).
    type: int
    default: 3
  gmin:
    description: The lowest gear, as planned (with O(observed)).
    type: int
    default: 1
  actions:
    description:
      - Per-host results of the shift (C(host), C(ok), C(action), C(method), C(msg), ...).
      - A host with two results for one action (its wake, then a failure after it) is recorded
        once, failed, with the details of both.
      - Omitted, the running shift's own, as its batches wrote them into the state file's journal
        (M(gear_state), the shift holding O(lock_file)); none without O(lock_file).
      - When the running shift resumed one that was killed (M(gear_shift_plan)'s journal), the killed run's actions
        come first, and this run's action for a host and action replaces it; the record's C(resumed) names the
        killed run (its lock owner, when it started, how many actions it did and which failed).
    type: list
    elements: dict
  result:
    description: The result to record instead of deciding it (a shift stopped before it acted).
    type: str
    choices: [ok, degraded, refused, failed]
  reason:
    description: The reason to record with O(result).
    type: str
    default: ""
  started:
    description: When the shift started (ISO 8601 text, as recorded).
    type: str
    required: true
  started_epoch:
    description: When the shift started, Unix time (for its duration).
    type: float
    required: true
  state_file:
    description: The gear state file (JSON). Its directory must exist.
    type: path
    required: true
  history_file:
    description: The gear history (JSON lines), appended to.
    type: path
    required: true
  power_file:
    description: Where the hosts' power figures are kept (JSON, host -> {on, asleep, off} watts).
    type: path
    required: true
  measured_file:
    description:
      - Where the watts the hosts' BMCs measured are kept (JSON, host -> state -> the last five
        readings, their median, the newest's date and its source). The readings of O(observed)
        (M(gear_observe) with C(read_power)) are added, each in the state the observation saw its
        host in. For the energy, a measured median replaces the inventory's figure of that host
        and state; C(figure_sources) in RV(energy) says, per host and state, which was used.
      - Unset, only the inventory's figures are used.
    type: path
  first_observed:
    description:
      - >-
        The observation from before the shift (the C(hosts) of M(gear_observe)), for its power
        readings only. The observation after a shift reads only the BMCs of silent hosts, so the
        hosts on are measured before it; a host read in both keeps the later reading. With
        O(observed_before), O(observed) is that observation, whose readings are taken as they are.
    type: dict
  metrics_dir:
    description: Directory of node_exporter's textfile collector (created when missing).
    type: path
    required: true
  lock_file:
    description:
      - The shift's lock (taken by M(shift_lock)), released once everything is written, as
        M(shift_lock) with C(state=absent) releases it (only when this
        C(ansible-playbook) run owns it, or its owner is gone; a lease only when it is the lease of the shift
        recorded, as the record job of an AWX workflow ends its plan job's lease), saving one module call per shift.
      - Not released when a write failed or in check mode; RV(lock_released) says whether it was
        (a lock that could not be released is a warning, and the caller releases it with M(shift_lock)).
    type: path
attributes:
  check_mode:
    support: full
    details:
      - Returns the record, the energy and the report; writes nothing.
  diff_mode:
    support: none
    details:
      - The record is returned whole.
  platform:
    support: full
    details:
      - Runs on the controller.
seealso:
  - module: gear_shift_plan
  - module: gear_state
  - module: gear_energy
"""

EXAMPLES = r"""
- name: Record the shift from the observation after it, and release its lock
  gear_record:
    plan: "{{ planned }}"              # gear_shift_plan's return before the shift
    observed: "{{ seen_after.hosts }}"  # gear_observe's return after it
    replicas: 3
    gmin: 1
    actions: "{{ gear_results }}"
    started: "{{ shift_started }}"
    started_epoch: "{{ shift_t0 }}"
    state_file: /var/lib/fleetnap/gear/state.json
    history_file: /var/lib/fleetnap/gear/history.jsonl
    power_file: /var/lib/fleetnap/gear/power_w.json
    measured_file: /var/lib/fleetnap/gear/power_measured.json
    metrics_dir: /var/lib/prometheus/node-exporter
    lock_file: /var/lib/fleetnap/gear/shift.lock
  delegate_to: localhost
  run_once: true
  register: gear_recorded

- name: Record a shift whose every action the waves verified, from the observation before it
  gear_record:
    plan: "{{ planned }}"
    observed: "{{ seen_before.hosts }}"
    observed_before: true              # woken hosts answering, parked ones silent, as the waves saw them
    actions: "{{ gear_results }}"
    started: "{{ shift_started }}"
    started_epoch: "{{ shift_t0 }}"
    state_file: /var/lib/fleetnap/gear/state.json
    history_file: /var/lib/fleetnap/gear/history.jsonl
    power_file: /var/lib/fleetnap/gear/power_w.json
    metrics_dir: /var/lib/prometheus/node-exporter
  delegate_to: localhost
  run_once: true

- name: Record a shift that stopped before it acted, with where the hosts were planned from
  gear_record:
    plan: "{{ planned }}"
    after: "{{ planned }}"
    result: failed
    reason: "BMC check failed before anything was powered down"
    started: "{{ shift_started }}"
    started_epoch: "{{ shift_t0 }}"
    state_file: /var/lib/fleetnap/gear/state.json
    history_file: /var/lib/fleetnap/gear/history.jsonl
    power_file: /var/lib/fleetnap/gear/power_w.json
    metrics_dir: /var/lib/prometheus/node-exporter
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
record:
  description:
    - The state file's document (gear, target and requested gear, result, reason, hosts, actions, times).
    - C(resumed) (also in the history line) when the shift resumed a killed one - C(shift), C(since), C(actions)
      (how many) and C(failed).
  returned: always
  type: dict
observe_again:
  description:
    - True when O(observe_again_on_failure) found a failure in the journal; nothing was written then
      (and RV(record), RV(result) and the rest are not returned).
  returned: always
  type: bool
  sample: false
result:
  description: The shift's result.
  returned: always
  type: str
  sample: ok
reason:
  description: Why, when not ok (per failed host, hosts not converged, the health gate).
  returned: always
  type: str
energy:
  description: >-
    M(gear_energy)'s return (days, total, hosts_without_figures) with this shift in the history, and
    C(figure_sources): host -> state -> V(inventory), C(measured (SOURCE, DATE)) or V(none).
  returned: always
  type: dict
report:
  description: The lines to print at the end of the shift (result, the hosts now, every action).
  returned: always
  type: list
  elements: str
lock_released:
  description: Whether O(lock_file) was released (false without O(lock_file), in check mode, or when it could not be).
  returned: always
  type: bool
written:
  description: The files written.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import recordcall
from ansible.module_utils.fleetnap.validate import check_params


def main():
    module = AnsibleModule(argument_spec=recordcall.options(), mutually_exclusive=recordcall.MUTUALLY_EXCLUSIVE,
                           required_one_of=recordcall.REQUIRED_ONE_OF, required_if=recordcall.REQUIRED_IF,
                           supports_check_mode=True)
    check_params(module, recordcall.CHECKS)
    try:
        result = recordcall.run(module, module.params)
    except recordcall.RecordError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
