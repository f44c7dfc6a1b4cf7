#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_shift_plan
short_description: Decide what every host does in a gear shift, from what was observed on it
description:
  - Internal. A step of the gear_shift role (its plan phase), documented for those who compose the
    role's phases themselves; a playbook of one's own calls C(fleetnap.power.gear_shift).
  - Runs on the controller (C(delegate_to=localhost), C(run_once=true)) and computes; with O(lock_file) it also
    writes the plan into the shift's journal (the state file's C(in_progress)), which is all it writes.
  - The target groups come from O(gear) with the day's group rotation (the rotation of
    M(gear_plan), Sierra section 3.7), or from O(groups_on) (for example M(gear_plan)'s
    C(now.groups_on)).
  - Each host's action follows from its observed state (C(on), C(asleep), C(off), C(unknown)), so a
    shift interrupted halfway converges when run again.
  - Health gate. A host that answered at the end of the last shift (C(hosts.NAME.state) in
    O(state_file); every host when there is none), belongs to a group that must be on after the shift and does not answer is
    unhealthy. If anything would go down while a host is unhealthy, the result is
    C(refused) - the target becomes gear r (every group on), the sleeping hosts are woken and
    nothing goes down. Unhealthy hosts are reported, never acted on.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.gear_target
  - fleetnap.power.attributes
options:
  hosts:
    description:
      - Host name -> C(group) (gear group), C(rack), C(state) (observed C(on), C(asleep), C(off)
        or C(unknown)), C(down_method) (C(auto), C(suspend), C(soft) or C(off)), C(up_methods) (a list
        of C(wol), C(ipmi) and C(redfish), tried in order) and C(bmc_configured) (whether it has a BMC).
      - Instead of C(state), C(ssh) (whether the SSH greeting came) and C(bmc) (the chassis power the
        BMC reported, or null) - silent with chassis on is C(asleep), chassis off is C(off), no BMC
        answer is C(unknown).
      - C(bmc_error) (why the BMC did not answer) and C(bmc_endpoint) (its C(address:port)) name a
        BMC in RV(bmc_check), as M(gear_observe) returns them.
      - C(ssh), C(bmc_configured) and C(s3.ok) are booleans - true/false or Ansible's words (V(yes)/V(no),
        V(1)/V(0), V(on)/V(off)); V("0") and V("no") are false, anything else is refused naming the host.
    type: dict
    required: true
  state_file:
    description: The previous shift's state file (JSON, C(hosts.NAME.state)). Missing means every host is expected on.
    type: path
  resume_dir:
    description:
      - Where measure_resume.yml keeps its results on the controller; each host's S3 record is
        C(RESUME_DIR/NAME/s3.json) (C(ok), C(cycles), C(worst_ms), C(at), C(msg)). Missing = no records.
    type: path
  park_off_after_h:
    description:
      - Hours after which a host asleep by plan (state file C(since)) is powered off by its BMC
        (second tier). Unset = hosts stay in S3.
    type: float
  batch_size:
    description:
      - Hosts per batch going down, a number (C(50)) or a percentage of the hosts going down (C(10%)), counted as
        Ansible's C(serial) counts it (a percentage rounds down and is at least one host, C(0) is every host); RV(down_batches) is the
        result.
    type: str
    default: 100%
  wake_batch_size:
    description: Hosts per wave woken, as O(batch_size), of the hosts the wake phase acts on; RV(wake_batches) is the result.
    type: str
    default: 100%
  wake_health:
    description: Whether the wake phase runs a health command on a host once it is back, for RV(step_hosts).
    type: bool
    default: false
  wake_undrain:
    description:
      - Whether the wake phase runs an undrain hook on a host once it is back, for RV(step_hosts) (not on a Slurm
        cluster, O(scheduler=slurm) - Slurm undrains its nodes, and slurm_power's resume hook puts the host back).
    type: bool
    default: false
  scheduler:
    description: Who owns the nodes (C(slurm)) or no one (C(none)), for RV(step_hosts).
    type: str
    choices: [none, slurm]
    default: none
  lock_file:
    description:
      - The gear-shift lock (M(shift_lock)), held by this shift. Given, the plan and what was observed (per host its
        state, action and method, the gear and its groups) are written into the journal in O(state_file)
        (C(in_progress), atomically), which the shift's batches (M(gear_state)) and its record (M(gear_record)) go on
        with.
      - When the journal holds the C(in_progress) of another shift, that shift was killed before its record (the
        lock was taken over from its dead owner), and this shift resumes it. Its actions are kept for the record
        (RV(resumed)); its failures are reported and are no reason to stop, since this plan comes from what was
        observed now.
      - Omitted, the module writes nothing.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is written; the plan and RV(resumed) are returned as they would be.
  diff_mode:
    support: none
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Plan a shift to gear 1
  gear_shift_plan:
    gear: 1
    replicas: 3
    state_file: "{{ playbook_dir }}/../artifacts/gear/state.json"
    hosts:
      lab1: {group: 1, rack: rack1, state: "on", down_method: suspend, up_methods: [wol, ipmi]}
      lab2: {group: 2, rack: rack1, state: "on", down_method: suspend, up_methods: [wol, ipmi]}
      lab3: {group: 3, rack: rack2, state: asleep, down_method: suspend, up_methods: [wol, ipmi]}
  delegate_to: localhost
  run_once: true
  register: shift

- name: Show it
  ansible.builtin.debug:
    msg: "{{ shift.table.splitlines() }}"
  run_once: true
"""

RETURN = r"""
gear:
  description: The gear the shift goes to (gear r when the health gate refused a lower one).
  returned: success
  type: int
groups_on:
  description: Gear groups on after the shift.
  returned: success
  type: list
  elements: int
groups_off:
  description: Gear groups off after the shift.
  returned: success
  type: list
  elements: int
requested:
  description: What was asked for (gear, groups_on, groups_off) before the health gate.
  returned: success
  type: dict
current_gear:
  description: Groups whose hosts all answer now.
  returned: success
  type: int
result:
  description: C(ok), C(refused) (health gate, waking instead of going lower) or C(degraded) (unhealthy hosts, nothing went lower).
  returned: success
  type: str
reason:
  description: Why the result is not C(ok).
  returned: success
  type: str
unhealthy:
  description: Hosts that should answer and do not.
  returned: success
  type: list
  elements: str
rows:
  description:
    - Per host, sorted by name - host, group, rack, state, expected, target, action (up, down, none), method, why,
      unhealthy, back (see RV(back_hosts)), and since (UTC, when the host entered its state, kept from O(state_file)
      while it is unchanged).
  returned: success
  type: list
  elements: dict
up_hosts:
  description: Hosts to wake.
  returned: success
  type: list
  elements: str
down_hosts:
  description: Hosts to put down.
  returned: success
  type: list
  elements: str
back_hosts:
  description:
    - Hosts that answer, belong to a group that is on and were parked by an earlier shift (O(state_file)) - woken
      outside a shift (by hand, by their BMC). No power action; the shift puts them back in service as after a wake
      (the in-service sleep policy, the health command, the undrain hook).
  returned: success
  type: list
  elements: str
back_actions:
  description:
    - For each host of RV(back_hosts), the wake phase's result as a wave's result reads (C(action=back), C(ok), C(state=on)
      and C(msg)), kept with the wave's results of the woken hosts; a failing step on the host (health command, undrain
      hook) replaces it with a failure.
  returned: success
  type: list
  elements: dict
wake_phase_hosts:
  description: RV(up_hosts) and RV(back_hosts) together, in the order of RV(rows) - every host the wake phase acts on.
  returned: success
  type: list
  elements: str
step_hosts:
  description:
    - The hosts of RV(wake_phase_hosts) on which the wake phase runs a step once they are back - every one with
      O(wake_health) or O(wake_undrain) (on a Slurm cluster only with O(wake_health)), else those parked without the resume hook
      (their in-service sleep policy is put back from the controller). A host not listed is done once it greets.
  returned: success
  type: list
  elements: str
wake_batches:
  description: RV(wake_phase_hosts) cut in waves of O(wake_batch_size), in order (what the wake play's C(serial) makes).
  returned: success
  type: list
  elements: list
wake_waves:
  description:
    - The waves the controller runs alone, one M(gear_wave) call each, when no host of RV(wake_phase_hosts) has a step
      to run (RV(step_hosts) empty) and the shift's own waves wake them (O(scheduler) C(none)); else empty.
    - Per wave (RV(wake_batches), in order) its C(hosts), the hosts it wakes (C(up), of RV(up_hosts)) and the results of
      the hosts it puts back (C(back), of RV(back_actions)).
  returned: success
  type: list
  elements: dict
  sample: [{hosts: [lab2, lab3], up: [lab2], back: [{host: lab3, action: back, ok: true, state: "on"}]}]
wake_play_hosts:
  description:
    - The hosts a play over them must wake (the role's C(wake) phase) - every host of RV(wake_phase_hosts) when one has a
      step to run or Slurm wakes them, else none (RV(wake_waves) wakes them from the controller).
  returned: success
  type: list
  elements: str
wake_play_batches:
  description: RV(wake_play_hosts) cut as RV(wake_batches) (the batches the role's C(main) includes its C(wake) tasks for).
  returned: success
  type: list
  elements: list
down_batches:
  description: RV(down_hosts) cut in batches of O(batch_size), in order (what the down play's C(serial) makes).
  returned: success
  type: list
  elements: list
power_w:
  description: Host -> its power figures (C(power_w) of O(hosts), as given), for M(gear_energy).
  returned: success
  type: dict
down_methods:
  description: Host -> how it is parked (C(suspend), C(soft), C(off)), for the hosts going down.
  returned: success
  type: dict
parked_states:
  description: Host -> the state it is parked in (C(asleep) by C(suspend), C(off) by C(soft) or C(off)), for the hosts going down.
  returned: success
  type: dict
direction:
  description: C(down), C(up), C(mixed) (a new day's rotation swaps groups) or C(none).
  returned: success
  type: str
counts:
  description: Number of hosts per action.
  returned: success
  type: dict
power_rows:
  description: One row per host and power state (on, asleep, off, unknown) with value 1 for the observed state, for textfile_metrics.
  returned: success
  type: list
  elements: dict
bmc_check:
  description:
    - The BMCs this shift needs, checked before anything is powered down. A host going down whose BMC is
      configured (C(bmc_configured)) must have answered (C(bmc) not null), and a host parked by its BMC
      (method C(soft) or C(off)) must have one.
    - C(ok), C(unanswered) and C(missing) (host names), C(reason) (for the record, empty when ok) and
      C(msg) (why a shift stops, naming each BMC, its endpoint and the fix; empty when ok).
  returned: success
  type: dict
  sample: {ok: false, unanswered: [lab3], missing: [], reason: "BMC check failed before anything was powered down: lab3: did not answer",
           msg: "gear shift stopped before powering anything down: the BMC of lab3 (127.0.0.1:9003: did not answer). Fix ..."}
table:
  description: RV(rows) as a fixed-width text table.
  returned: success
  type: str
resumed:
  description:
    - The killed shift this one resumes (see O(lock_file)) - C(shift) (its lock owner), C(since), C(updated),
      C(gear), C(actions) (its batches' results, a failure winning per host and action) and C(failed); null when
      there is none.
  returned: with O(lock_file)
  type: dict
journal_written:
  description: Whether the plan was written into the journal (false without O(lock_file) and in check mode).
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fileio, shiftplan
from ansible.module_utils.fleetnap.gear import GearError
from ansible.module_utils.fleetnap.gearshift import ShiftError
from ansible.module_utils.fleetnap.validate import ParamError, check_params, items

CHECKS = dict({"hosts": items(100000)}, **shiftplan.CHECKS)   # the hosts' size first, as before


def main():
    spec = shiftplan.options()
    spec.update(hosts=dict(type="dict", required=True), lock_file=dict(type="path"))
    module = AnsibleModule(
        argument_spec=spec,
        mutually_exclusive=[("gear", "groups_on")],
        required_by={"lock_file": "state_file"},
        required_one_of=[("gear", "groups_on")],
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    try:
        # the date and the batch sizes' syntax, before plan_from reads the state file and the S3 records
        out = shiftplan.make(p, p["hosts"], shiftplan.day_of(p))
        if p["lock_file"]:
            shiftplan.into_journal(module, p["state_file"], p["lock_file"], out)
    except (ShiftError, GearError, ParamError) as e:
        module.fail_json(msg=str(e))
    except (OSError, fileio.HostFsError) as e:
        module.fail_json(msg="could not write the plan into the journal %s: %s (the file is as it was)"
                             % (p["state_file"], e))
    module.exit_json(changed=out["journal_written"], **out)


if __name__ == "__main__":
    main()
