#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_shift_prepare
short_description: Take the gear-shift lock, observe every host and plan the shift, in one call on the controller
description:
  - Internal. A step of the C(fleetnap.power.gear_shift) role (its prepare phase), documented for those who compose the
    role's phases themselves; a playbook of one's own calls C(fleetnap.power.gear_shift).
  - What M(shift_lock), M(gear_observe) (with C(bmc_read=needed)) and M(gear_shift_plan) (with O(lock_file)) do one
    after the other, in one process on the controller (C(delegate_to=localhost), C(run_once=true)), by the same
    code. A shift's prepare phase costs one module start instead of three, and the observation does not travel
    through Ansible to reach the plan.
  - Every option is checked before anything is done, each host's gear group and methods (its O(hosts[].inventory))
    included, as the plan checks them; then the lock is taken (one shift at a time, a dead owner's lock taken over;
    its directory created), every host observed at once (asking only what the plan uses), the plan made and, with
    O(journal), written into the shift's journal.
  - Whatever fails after this call took the lock (the state file, the S3 records, the plan, the journal's write,
    anything unexpected) releases it before the module fails, and the message says so; the state file is then as
    it was. A BMC command that cannot be started is that host's C(bmc_error), as for M(gear_observe). A lock this
    run held already (taken by an earlier task) is left held.
  - Its action plugin runs it in Ansible's own process when the task runs on the controller (the local connection,
    without become, not async, no task timeout, no C(environment) of the task's own), as C(ansible.netcommon)'s
    direct execution runs network modules - AnsibleModule
    itself, its arguments given directly and its result taken from AnsibleModule's result hook (ansible-core 2.19.1
    or later). No AnsiballZ payload is built (the syntax trees of every module_utils file it sends) and no second Python imports
    them from a zip. The result is the module's, but the controller's Python runs it (not
    C(ansible_python_interpreter)). Elsewhere, or with the variable C(fleetnap_direct_execution=false), it runs as any
    module does.
version_added: "0.4.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.gear_target
  - fleetnap.power.fleet_bmc
  - fleetnap.power.bmc_rate_limit
  - fleetnap.power.attributes
options:
  hosts:
    description: The hosts to observe.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Inventory name (the key of the result).
        type: str
        required: true
      address:
        description: Address the host answers on.
        type: str
        required: true
      port:
        description: TCP port of its SSH service.
        type: int
        default: 22
      bmc_address:
        description:
          - Address of its BMC; empty or absent = no BMC (the result says so).
          - A BMC without O(hosts[].bmc_user) or O(hosts[].bmc_password) is reported as not readable
            (C(bmc_error)), as an unanswering one is.
        type: str
      bmc_port:
        description: UDP port of its BMC.
        type: int
        default: 623
      bmc_user:
        description: BMC user.
        type: str
      bmc_password:
        description: BMC password (never logged, never on a command line).
        type: str
      cipher_suite:
        description: IPMI 2.0 cipher suite.
        type: int
        default: 3
      bmc_protocol:
        description:
          - How the BMC is spoken to, C(ipmi) (IPMI over LAN, ipmitool) or C(redfish) (HTTPS, M(redfish_power)'s client).
          - With C(redfish) a O(hosts[].bmc_port) of 623 (the IPMI default) means 443.
        type: str
        default: ipmi
        choices: [ipmi, redfish]
      bmc_ca_path:
        description: With C(redfish), a PEM file of the CA that signed the BMC's certificate.
        type: path
      bmc_validate_certs:
        description: With C(redfish), verify the BMC's TLS certificate (labs only should turn this off).
        type: bool
        default: true
      record:
        description:
          - The host's power record as the inventory has it (its C(fleetnap_*) variables), read, checked and given its
            defaults in one place (module_utils C(powerrecord)); a variable not listed here is refused, naming it.
          - Its BMC fields are the entry's BMC options (given one by one beside a record, refused); the others join the
            entry's O(hosts[].inventory) facts, under the keys the caller gives there.
          - M(gear_wave) also takes a host's wake fields (methods, MACs, WoL address and port, boot_once, event_log)
            from it where the entry leaves its own at their defaults; with its C(observed), a host's are the observation's.
        type: dict
        suboptions:
          fleetnap_bmc_address:
            description: The BMC's address; absent or empty = no BMC.
            type: raw
          fleetnap_bmc_port:
            description: The BMC's port, 1-65535 (default 623; with C(redfish) 623 means 443).
            type: raw
          fleetnap_bmc_user:
            description: The BMC user.
            type: raw
          fleetnap_bmc_password:
            description:
              - The BMC password (a vault variable); absent or empty = C(FLEETNAP_BMC_PASSWORD) in the controller's
                environment. Never in a result, a log or a command line.
            type: str
          fleetnap_bmc_cipher_suite:
            description: IPMI 2.0 cipher suite, 0-17 (default 3).
            type: raw
          fleetnap_bmc_protocol:
            description: C(ipmi) (default) or C(redfish).
            type: raw
          fleetnap_bmc_ca_path:
            description: With C(redfish), an absolute path to the PEM file of the CA that signed the BMC's certificate.
            type: raw
          fleetnap_bmc_validate_certs:
            description: With C(redfish), verify the BMC's TLS certificate (default true).
            type: raw
          fleetnap_bmc_boot_once:
            description: A power-on by the BMC boots from the disk once (default true).
            type: raw
          fleetnap_bmc_boot_once_required:
            description: Refuse the power-on when the next boot cannot be set (default false).
            type: raw
          fleetnap_bmc_event_log:
            description: Read the BMC's event log after a power-on by it (default true).
            type: raw
          fleetnap_wol_macs:
            description: MACs the magic packets wake (a list, or text with commas; default none).
            type: raw
          fleetnap_wol_address:
            description: Where the magic packets go (default 255.255.255.255).
            type: raw
          fleetnap_wol_port:
            description: UDP port of the magic packets, 1-65535 (default 9).
            type: raw
          fleetnap_power_methods:
            description: Wake methods in order, one or two of C(wol), C(ipmi), C(redfish) (default [wol]).
            type: raw
          fleetnap_power_w:
            description: Watts when on, asleep and off (C({on, asleep, off})), for the energy figures.
            type: raw
          fleetnap_gear_group:
            description: The host's gear group (a whole number from 1).
            type: raw
          fleetnap_rack:
            description: The host's rack.
            type: raw
      inventory:
        description:
          - What the caller knows of the host from its inventory (for a gear shift its gear group,
            rack, methods and power figures).
          - Returned with the observation, as keys of the host's entry in RV(hosts) beside what was seen (a key that
            names an observation field is refused).
          - Keys that name a credential (any depth; a name with password, passwd, passphrase, secret, token,
            credential, auth, cookie, session id, or private/api/access/ssh/bmc key in it) are left out of
            the result, with a warning naming them (not their values).
        type: dict
        default: {}
  probe_timeout:
    description: Seconds a host has to greet, as M(gear_observe)'s.
    type: float
    default: 3
  parked_probe_timeout:
    description: Seconds a host the state file records as parked has to greet, as M(gear_observe)'s.
    type: float
    default: 1
  wake_probe_timeout:
    description:
      - Seconds a host has to greet that O(state_file) records as parked and that the shift wakes, as
        M(gear_observe)'s (at most O(parked_probe_timeout)); with O(whole_shift.wake_during_observation), its
        magic packets go out right after its probe's SYN.
    type: float
    default: 0.25
  read_power:
    description: Also read the power draw each BMC measures, as M(gear_observe)'s (every BMC is read then).
    type: bool
    default: false
  probe_concurrency:
    description: SSH probes in flight at most.
    type: int
    default: 256
  state_file:
    description:
      - The gear state file (M(gear_shift_plan), M(gear_state)). The hosts it records as parked are expected silent
        (M(gear_observe)); its hosts' states are the health gate's and the plan's (M(gear_shift_plan)); the plan goes
        into its journal (O(journal)).
    type: path
    required: true
  resume_dir:
    description: Where measure_resume.yml keeps its results, as M(gear_shift_plan)'s.
    type: path
  park_off_after_h:
    description: Hours after which a host asleep by plan is powered off by its BMC, as M(gear_shift_plan)'s.
    type: float
  batch_size:
    description: Hosts per batch going down, as M(gear_shift_plan)'s.
    type: str
    default: 100%
  wake_batch_size:
    description: Hosts per wave woken, as M(gear_shift_plan)'s.
    type: str
    default: 100%
  wake_health:
    description: Whether the wake phase runs a health command on a host once it is back, as M(gear_shift_plan)'s.
    type: bool
    default: false
  wake_undrain:
    description: Whether the wake phase runs an undrain hook on a host once it is back, as M(gear_shift_plan)'s.
    type: bool
    default: false
  scheduler:
    description: Who owns the nodes (C(slurm)) or no one (C(none)), as M(gear_shift_plan)'s.
    type: str
    choices: [none, slurm]
    default: none
  lock_file:
    description: The gear-shift lock (M(shift_lock)) this shift takes; its directory is created when missing.
    type: path
    required: true
  purpose:
    description: Free text stored in the lock (shown to whoever is refused), as M(shift_lock)'s.
    type: str
    default: ""
  lease:
    description:
      - Hold the lock as a lease of this many seconds (1 to 604800; an AWX workflow's plan job) instead of by the
        C(ansible-playbook) process, as M(shift_lock)'s; RV(lock) has its token.
    type: int
  journal:
    description:
      - Write the plan and the observation into the journal in O(state_file) (as M(gear_shift_plan) with
        its C(lock_file)); a killed shift's journal is resumed (C(resumed) in RV(plan)). Not in
        check mode.
      - V(false) plans only; the lock is still taken (a plan is not made while another shift runs) and kept for the
        caller to release.
    type: bool
    default: true
  whole_shift:
    description:
      - Go on to run the whole shift in this call when the plan lets the controller do all of it - no host goes
        down, none of the hosts it wakes or puts back has a step to run on it (the C(wake_play_hosts) of RV(plan) empty, so its
        C(wake_waves) are the whole wake), not Slurm, every BMC the plan needs answered (its C(bmc_check)),
        O(journal) on and not check mode. Then each of the plan's C(wake_waves) runs as M(gear_wave) runs it
        (C(action=up), the observation as its C(observed), its results written into the journal), then the shift is
        recorded as M(gear_record) records it (from the observation before the shift, C(observed_before)), and the
        lock is released. One process for the shift, no module start for each wave and for the record.
      - The waves take their BMC rate limit from O(min_interval), O(retries), O(session_timeout) and
        O(rate_limit_dir), as the observation does; M(gear_wave)'s other options keep their defaults.
      - Otherwise (or without this option) the call stops after the plan, as before, and RV(went_on) is false.
      - A wave that fails for a host does not stop the next wave; after the waves the record finds the failure in
        the journal, writes nothing, keeps the lock and says to observe again (C(observe_again) in RV(record)), as
        M(gear_record) with C(observe_again_on_failure) does. A journal or record that cannot be written fails the
        call, which says so, releases the lock and returns every wave's result (RV(waves)).
    type: dict
    suboptions:
      wol_timeout:
        description: Seconds a host has to answer after its magic packets (M(gear_wave)'s).
        type: float
        default: 90
      wol_resend:
        description: Seconds between two sends of the magic packets while a host is silent, 0 = once (M(gear_wave)'s).
        type: float
        default: 5
      ipmi_timeout:
        description: Seconds a host has to answer after its BMC powered it on (M(gear_wave)'s).
        type: float
        default: 300
      cycle_unresponsive:
        description: Power-cycle a host whose BMC says on while it stays silent (M(gear_wave)'s).
        type: bool
        default: false
      bmc_concurrency:
        description: BMC commands of the waves in flight at once (M(gear_wave)'s).
        type: int
        default: 4
      history_file:
        description: The gear history (JSON lines) the record appends to (M(gear_record)'s).
        type: path
        required: true
      power_file:
        description: Where the hosts' power figures are kept (M(gear_record)'s).
        type: path
        required: true
      measured_file:
        description: Where the watts the BMCs measured are kept (M(gear_record)'s).
        type: path
      metrics_dir:
        description: The textfile collector's directory for the C(fleetnap_gear*) metrics (M(gear_record)'s).
        type: path
        required: true
      wake_during_observation:
        description:
          - Send a parked host's magic packets during the observation, right after its probe's SYN, so that its
            resume overlaps the observation's wait for it (O(wake_probe_timeout)); its wave then waits for it
            from those packets (the attempt's report says they were sent during the observation, and RV(hosts)
            has its C(wol_sent_at)).
          - Only where nothing can stop the shift once they are out and the host wakes back in service by itself
            - O(journal), not check mode, not Slurm, no O(wake_health) or O(wake_undrain), the target has every
            group on and one wake batch (O(wake_batch_size)) takes every host, the probe shorter than 1 s - and
            only for hosts O(state_file) has parked asleep with gear_member's resume hook that wake by Wake-on-LAN
            first. A failure before the waves says which hosts got packets.
          - The greeting is read only on the connection whose SYN left before the packets. It still says the host
            was awake before them as long as a host they woke cannot greet within the wait - where the controller
            has the host's link-layer address, a sleeping host drops that SYN and the kernel sends it again only
            after 1 s; where the SYN is held for the host instead (a NAT such as QEMU's user networking, a
            hypervisor's queue, a SYN proxy, a neighbour entry still being resolved) it reaches the host once it
            is up, and only a wake longer than the wait (S3 with the link's negotiation, seconds) says so. Set
            this false for hosts that wake faster than the wait.
          - When the observation then finds a host with a step to run (the shift goes through the wake play, not
            this call's waves), the packets were sent all the same, and that wake's wave sends its own and waits
            from them.
        type: bool
        default: true
attributes:
  check_mode:
    support: full
    details:
      - The lock is decided (another live owner refuses) but not taken, the hosts are observed, the plan is made;
        neither the lock, the journal nor the state file is written (the BMC rate limiter keeps its timestamps in
        O(rate_limit_dir), as for M(gear_observe)). O(whole_shift) does not go on.
  diff_mode:
    support: none
  platform:
    support: full
    details:
      - Runs on the controller; ipmitool is needed there for hosts with a BMC.
notes:
  - Needs C(/proc) (Linux) to tell live lock owners from dead ones.
seealso:
  - module: shift_lock
  - module: gear_observe
  - module: gear_shift_plan
  - module: gear_wave
  - module: gear_record
"""

EXAMPLES = r"""
- name: Lock, observe and plan a shift to gear 1
  gear_shift_prepare:
    lock_file: /var/lib/fleetnap/gear/shift.lock
    state_file: /var/lib/fleetnap/gear/state.json
    purpose: gear shift to gear 1
    gear: 1
    replicas: 3
    hosts: "{{ query('fleetnap.power.power_records', *ansible_play_hosts_all) }}"
    parked_probe_timeout: 0.5
  delegate_to: localhost
  run_once: true
  register: prep

- name: The same, and when the plan only wakes hosts from here, wake them and record the shift in this call
  gear_shift_prepare:
    lock_file: /var/lib/fleetnap/gear/shift.lock
    state_file: /var/lib/fleetnap/gear/state.json
    gear: 3
    hosts: "{{ query('fleetnap.power.power_records', *ansible_play_hosts_all) }}"
    whole_shift:
      history_file: /var/lib/fleetnap/gear/history.jsonl
      power_file: /var/lib/fleetnap/gear/power_w.json
      metrics_dir: /var/lib/prometheus/node-exporter
  delegate_to: localhost
  run_once: true
  register: prep
"""

RETURN = r"""
lock:
  description: What M(shift_lock) returns (C(held), C(owner), C(took_over) when a dead owner's lock was taken over).
  returned: success, and a failure after the lock was taken
  type: dict
  sample: {held: true, changed: true, owner: {pid: 4242, start_time: 912345, since: "2026-12-07T01:00:00Z", purpose: ""}}
hosts:
  description:
    - What was observed, per host, as M(gear_observe)'s C(hosts).
    - A host whose magic packets went out during the observation (O(whole_shift.wake_during_observation)) also has
      C(wol_sent_at) (when, in seconds since the epoch; null when sending them failed) and C(wol_error) (why they
      could not be sent, else empty).
  returned: success
  type: dict
observe_elapsed_s:
  description: Seconds the observation took (M(gear_observe)'s C(elapsed_s)).
  returned: success
  type: float
plan:
  description:
    - The plan, as M(gear_shift_plan) returns it (C(gear), C(groups_on), C(actions), C(up_hosts), C(down_hosts),
      C(back_hosts), C(wake_phase_hosts), C(wake_batches), C(wake_waves), C(wake_play_hosts),
      C(wake_play_batches), C(down_batches), C(step_hosts), C(bmc_check),
      C(counts), C(result), C(journal_written) ...; C(resumed) when the journal was written).
  returned: success
  type: dict
started:
  description: When the lock was taken (UTC, ISO 8601), the shift's start for its record.
  returned: success
  type: str
started_epoch:
  description: The same, in seconds since the epoch.
  returned: success
  type: float
went_on:
  description: Whether this call went on to run the whole shift (O(whole_shift)); RV(waves) and RV(record) say how it went.
  returned: success
  type: bool
  sample: false
waves:
  description:
    - With RV(went_on), what each of the plan's C(wake_waves) returned, in order, as M(gear_wave) returns it but for
      its C(hosts) - C(ok), C(not_ok), C(elapsed_s), C(journal). Each host's result (its method, attempts and times)
      is in the journal and in the actions of RV(record)'s C(record).
    - On a failure after the waves ran (a journal or a record that could not be written), the waves that ran (the
      one whose journal could not be written with its C(hosts)).
  returned: success with RV(went_on), and a failure after a wave ran
  type: list
  elements: dict
record:
  description:
    - With RV(went_on), what M(gear_record) returns for the shift (C(result), C(reason), C(report), C(record),
      C(energy), C(lock_released), C(written)), or C(observe_again=true) when a wave failed (nothing written, the lock
      kept; the caller observes again and records).
  returned: success with RV(went_on)
  type: dict
lock_released:
  description: On a failure after the lock was taken, whether this call released it (the message says so too).
  returned: a failure after the lock was taken
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import preparecall


def main():
    preparecall.run(AnsibleModule(**preparecall.module_kwargs()))


if __name__ == "__main__":
    main()
