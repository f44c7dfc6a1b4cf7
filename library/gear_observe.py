#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_observe
short_description: Observe a whole fleet's power state at once, from the controller
description:
  - Runs on the controller, once for all hosts (C(run_once), delegated to localhost). For every
    host it probes the SSH greeting and reads the chassis power from its BMC (IPMI over LAN),
    all concurrently in this one process, and returns what it saw per host.
  - This is what a gear shift observes before it plans and after it acted. One call costs one
    probe timeout plus a few BMC round trips, however many hosts; the same questions asked per
    host by M(host_wait) and M(bmc_power) start two Python processes on the controller per
    host.
  - A silent host and an unanswering BMC are observations, not failures; the module fails only
    on bad input. A greeting (not an open port) is an answer, as for M(host_wait), and no
    Python is started on any host.
  - BMC reads are rate-limited per BMC (O(min_interval), shared with M(bmc_power)), retried when
    the BMC does not answer, and at most O(bmc_concurrency) run at a time. Passwords reach
    ipmitool only through its environment (C(-E)), never its command line.
version_added: "0.2.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
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
    description: Seconds a host has to greet (probes are repeated within it while refused).
    type: float
    default: 3
  state_file:
    description:
      - A gear state file (M(gear_shift_plan), M(gear_state)). Hosts it records as parked
        (C(asleep) or C(off)) are expected silent and probed for O(parked_probe_timeout) only; a
        parked host that answers later than that is seen silent and, in a shift that wants it
        on, woken, which it survives (a magic packet to a running host does nothing).
      - Missing file = no host expected silent.
    type: path
  parked_probe_timeout:
    description: Seconds a host the state file records as parked has to greet (at most O(probe_timeout)).
    type: float
    default: 1
  bmc_read:
    description:
      - V(always) reads every host's chassis power.
      - V(silent) reads only the BMCs of hosts that did not greet, after their probe (to tell
        asleep from off); an answering host is on, and its C(bmc) in RV(hosts) is null with
        C(bmc_read) false.
      - V(needed) asks only what the plan of the shift in O(shift) uses (a shift's first
        observation). A host of a group the shift has on that answers stays on, and its BMC is not
        read. One that O(state_file) has parked is to be woken; it is probed for
        O(wake_probe_timeout) only, and when parked asleep its BMC is not read either (C(parked_as)
        in RV(hosts) says the state file's word; the wave wakes it by its methods and asks its BMC
        then, if one of them is a BMC). Every BMC of a host of another group is read at once (an
        answering host goes down, and the plan's BMC check needs its BMC to have answered). With
        O(read_power), every BMC is read.
    type: str
    choices: [always, silent, needed]
    default: always
  shift:
    description:
      - The shift the observation is for, with O(bmc_read=needed) (required then); its gear and
        rotation date, or its groups, as M(gear_shift_plan) is given them. The plan's health gate
        only adds groups to these, so what is not asked for them stays unneeded.
    type: dict
    suboptions:
      gear:
        description: Target gear (the groups come from the rotation of O(shift.date)).
        type: int
      groups_on:
        description: Target groups (M(gear_plan)'s C(now.groups_on)). Exactly one of O(shift.gear) and this.
        type: list
        elements: int
      replicas:
        description: Number of gear groups (r).
        type: int
        default: 3
      gmin:
        description: Lowest gear allowed.
        type: int
        default: 1
      date:
        description: Date (YYYY-MM-DD) whose rotation O(shift.gear) uses. Default today on the controller.
        type: str
  wake_probe_timeout:
    description:
      - With O(bmc_read=needed), seconds a host has to greet that O(state_file) records as parked
        and that the shift wakes (at most O(parked_probe_timeout)). One that answers (woken by hand)
        is seen on; one that answers later is woken, which it survives, and the wake's report says
        how soon it answered.
    type: float
    default: 0.25
  read_power:
    description:
      - Also read the power draw each BMC measures (DCMI power reading over IPMI; Redfish
        C(EnvironmentMetrics), C(Power) or C(PowerSubsystem)), right after its chassis power, into
        C(power_watts), C(power_source) and C(power_note) of RV(hosts). A BMC that offers none gives
        null and says why; a reading that fails is a note, never a failure of the observation.
      - M(gear_record) keeps the readings as the hosts' measured watts per state, which the energy
        figures use instead of the inventory's.
    type: bool
    default: false
  probe_concurrency:
    description: SSH probes in flight at most.
    type: int
    default: 256
attributes:
  check_mode:
    support: full
    details:
      - It only reads; check mode observes the same.
  diff_mode:
    support: none
    details:
      - It changes nothing.
  platform:
    support: full
    details:
      - Runs on the controller; ipmitool is needed there for hosts with a BMC.
seealso:
  - module: host_wait
  - module: bmc_power
"""

EXAMPLES = r"""
- name: Observe every host of the shift at once
  gear_observe:
    hosts: "{{ ansible_play_hosts_all | map('extract', hostvars, '__gear_shift_probe') | list }}"
    probe_timeout: 3
  delegate_to: localhost
  run_once: true
  register: observed
"""

RETURN = r"""
hosts:
  description:
    - What was seen, per host name.
    - A host that O(state_file) records as parked with the gear_member role's resume hook has C(resume_hook=true)
      (it puts its in-service sleep policy back itself on the wake; gear_shift's wake phase then leaves it alone).
    - With O(bmc_read=needed), a host whose BMC was not read because O(state_file) has it parked asleep and
      the shift wakes it has C(parked_as=asleep) (M(gear_shift_plan) takes its state from it).
  returned: always
  type: dict
  sample:
    lab1: {name: lab1, ssh: true, ssh_s: 0.004, probes: 1, bmc: "on", bmc_configured: true, bmc_read: true,
           bmc_error: "", bmc_endpoint: "10.0.1.11:623", group: 1, rack: rack1}
    lab2: {name: lab2, ssh: false, ssh_s: null, probes: 14, bmc: "on", bmc_configured: true, bmc_read: true,
           bmc_error: "", bmc_endpoint: "10.0.1.12:623", group: 2, rack: rack1}
    lab3: {name: lab3, ssh: true, ssh_s: 0.003, probes: 1, bmc: "on", bmc_configured: true, bmc_read: true,
           bmc_error: "", bmc_endpoint: "10.0.1.13:443", power_watts: 374.0, power_source: EnvironmentMetrics,
           power_note: "", group: 3, rack: rack1}
elapsed_s:
  description: Seconds the whole observation took.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fleetobserve
from ansible.module_utils.fleetnap.gear import GearError
from ansible.module_utils.fleetnap.gearshift import ShiftError, read_states
from ansible.module_utils.fleetnap.validate import ParamError


def main():
    spec = fleetobserve.options()
    spec.update(
        bmc_read=dict(type="str", choices=["always", "silent", "needed"], default="always"),
        shift=dict(type="dict", options=dict(
            gear=dict(type="int"),
            groups_on=dict(type="list", elements="int"),
            replicas=dict(type="int", default=3),
            gmin=dict(type="int", default=1),
            date=dict(type="str"),
        )),   # exactly one of gear and groups_on (a null one is not given): target_groups says so
    )
    module = AnsibleModule(argument_spec=spec, required_if=[("bmc_read", "needed", ("shift",))],
                           supports_check_mode=True)
    p = module.params
    # the shift's groups checked with the host entries, the state file read after the inventory's keys
    on, recorded, tools = fleetobserve.check(
        module, p, before=lambda: fleetobserve.shift_groups(p["shift"]) if p["shift"] else None,
        then=lambda: read_states(p["state_file"]) if p["state_file"] else {})
    try:
        seen, elapsed = fleetobserve.run(module, p, tools, p["bmc_read"], on, recorded)
    except (ParamError, ShiftError, GearError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, hosts=seen, elapsed_s=elapsed)


if __name__ == "__main__":
    main()
