#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_wave
short_description: Wake or park a whole wave of a gear shift at once, from the controller
description:
  - Runs on the controller, once per wave (C(run_once), delegated to localhost). Every host of
    the wave has its own thread, so a wave costs the slowest host's own transition plus a probe
    interval, however many hosts it has.
  - O(action=up) wakes every host by its methods in order (O(hosts[].up_methods)), C(wol) (magic
    packets to the host's MACs) and C(ipmi) (chassis power on through its BMC), each with a
    bounded wait for the host's SSH greeting, and reports per host which method woke it and every
    attempt. A greeting is the verification that the host is back; no Python is started on it.
    With C(ipmi), a chassis the BMC reports on while the host is silent is asleep or hung and is
    not power-cycled unless O(cycle_unresponsive); a chassis that was off before the wave
    (O(hosts[].chassis_was_off)) and is on now was woken by the method before (WoL from
    soft-off) and is waited for, without a command.
  - O(action=down) powers down through the BMC the hosts whose O(hosts[].down_method) is C(soft)
    (ACPI power button) or C(off) (hard), verifies that the BMC reports the chassis off, and waits
    until every host of the wave is silent for O(silent_for) seconds, also those with
    C(suspend), which the caller has told to suspend themselves before this call (the
    gear_member role's down action, O(hosts[].since) the time it did).
  - One host's failure is that host's result (C(ok=false) with the reason), never the module's;
    the module fails only on bad input. BMC commands are rate-limited per BMC (O(min_interval)),
    retried when the BMC does not answer, at most O(bmc_concurrency) in flight; passwords reach
    ipmitool only through its environment, never its command line.
  - Which module to call. M(gear_observe) looks, this module acts on a wave, M(gear_shift_plan)
    decides; the gear_member role powers one host (its own suspend, which only the host can do).
    M(host_wait), M(wake_on_lan) and M(bmc_power) are the single-host steps for a playbook of
    one's own.
version_added: "0.3.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.fleet_bmc
  - fleetnap.power.bmc_rate_limit
  - fleetnap.power.attributes
options:
  action:
    description: C(up) wakes the wave's hosts, C(down) parks them.
    type: str
    required: true
    choices: [up, down]
  hosts:
    description: The wave's hosts.
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
        description: Address of its BMC; empty or absent = no BMC.
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
          - Not used here (the host entries of M(gear_observe) can be passed as they are).
        type: dict
        default: {}
      up_methods:
        description:
          - With O(action=up), the wake methods in order, one or two of C(wol), C(ipmi), C(redfish), each once.
          - C(ipmi) and C(redfish) power the host on through its BMC, which must speak that protocol
            (O(hosts[].bmc_protocol)).
        type: list
        elements: str
        default: [wol]
      wol_macs:
        description: MACs for C(wol) (as M(wake_on_lan) takes them).
        type: list
        elements: str
        default: []
      wol_address:
        description: Where the magic packets go (a broadcast or unicast address).
        type: str
        default: 255.255.255.255
      wol_port:
        description: UDP port of the magic packets.
        type: int
        default: 9
      chassis_was_off:
        description: The BMC reported the chassis off before this wave (from M(gear_observe)).
        type: bool
        default: false
      boot_once:
        description:
          - Safe power-on. Before a BMC powers the host on, its next boot is set to the disk once
            (Redfish C(BootSourceOverrideTarget=Hdd) with C(Enabled=Once); IPMI C(chassis bootdev disk)),
            then read back; the attempt's report says what the BMC took. A BMC that cannot set it is
            reported, not fatal, unless O(hosts[].boot_once_required).
        type: bool
        default: true
      boot_once_required:
        description:
          - With O(hosts[].boot_once), a BMC that cannot set the next boot to the disk does not power
            the host on (the attempt fails with the BMC's answer; the next method, if any, is tried).
          - OpenIPMI's C(ipmi_sim) takes no boot parameters; many real BMCs do.
        type: bool
        default: false
      event_log:
        description:
          - Before a BMC powers the host on, what its event log holds is noted (IPMI C(sel info),
            Redfish LogServices); after the host answers, the entries added since are returned in
            C(bmc_events) of the host's entry in RV(hosts) and counted in the attempt's report (IPMI, the newest 20, as the SEL
            has no severity; Redfish, Warning and Critical ones). A log that cannot be read is
            reported, never fails the wake.
        type: bool
        default: true
      down_method:
        description: With O(action=down), C(suspend) (the host suspended itself), C(soft) or C(off) (its BMC).
        type: str
        default: suspend
        choices: [suspend, soft, "off"]
      since:
        description: With C(suspend), when (Unix time) the host was told to suspend; the wait is counted from it.
        type: float
      said:
        description:
          - With C(suspend), what the host's own checked suspend command said, that is the registered
            result of the M(ansible.builtin.raw) task of the gear_member role (C(tasks_from=send))
            with its C(rc), C(stdout), C(unreachable), C(msg) and C(skipped).
          - Exit 0 is a scheduled suspend (waited for until silent); exit 4 (no S3 on the host) with
            O(hosts[].no_s3_fallback) and a BMC parks the host by its BMC instead; a refusal
            (an output line starting with C(cannot suspend), then the reason) fails the host with that reason, state C(on); anything else
            fails it, state C(unknown). Without it the host is taken to have scheduled its suspend.
        type: dict
      no_s3_fallback:
        description: With O(hosts[].said), how a host without S3 (exit 4) is parked instead, through its BMC; empty = fail it.
        type: str
        default: ""
        choices: ["", soft, "off"]
  observed:
    description:
      - With O(action=up), what M(gear_observe) returned in its RV(fleetnap.power.gear_observe#module:hosts) (host
        name -> observation), so that a caller passes each host's probe entry as it is and the wake
        fields come from the one place the power record was read.
      - For each host of O(hosts), its observation must be there; where it carries C(up_methods),
        C(wol_macs), C(wol_address), C(wol_port), C(boot_once), C(boot_once_required) or
        C(event_log) (the inventory facts M(gear_observe) passes through), that value is the host's,
        checked as the option of that name is; O(hosts[].chassis_was_off) is whether its BMC
        answered C(off).
      - Unset, each host's entry in O(hosts) says all.
    type: dict
  journal:
    description:
      - The shift's journal (the gear state file, M(gear_state)'s O(fleetnap.power.gear_state#module:path)), written
        by this call once the wave is over, as M(gear_state) writes the wave's event (V(after_up) or
        V(after_down)). The verified wakes are C(on), the verified parks C(asleep) or C(off), a host
        whose down failed while it stayed up C(on); with O(journal.lock_file), every result of the
        batch goes into the running shift's actions and failures. One call instead of a wave and a
        M(gear_state) call.
      - The file is read and checked before any host is acted on. When it cannot be written after
        the wave acted, the call fails, says so, and returns every host's result (RV(hosts)); the
        file is as it was.
      - Nothing is written in check mode.
    type: dict
    suboptions:
      state_file:
        description: The gear state file (absolute; its directory must exist).
        type: path
        required: true
      lock_file:
        description: The gear-shift lock file; its owner is the running shift whose journal the results go into.
        type: path
      batch:
        description:
          - The hosts of the batch the event concerns (a host woken outside a shift and put back in
            service, of the same batch, included). Default the hosts of O(hosts).
        type: list
        elements: str
      results:
        description:
          - Results of the batch beside the wave's own, with the wave's shape (C(host), C(action),
            C(ok), C(state), C(msg)); a host put back in service, a drain hook that failed.
        type: list
        elements: dict
        default: []
  wol_timeout:
    description: Seconds a host has to answer after its magic packets.
    type: float
    default: 90
  ipmi_timeout:
    description: Seconds a host has to answer after its BMC powered it on (a cold boot).
    type: float
    default: 300
  down_timeout:
    description: Seconds a host has to go silent (and its chassis to report off, for C(soft)/C(off)).
    type: float
    default: 120
  silent_for:
    description:
      - Seconds without an answer after which a host counts as gone. A connection that does not greet is given
        O(probe_timeout), unless a new connection tried meanwhile (every O(interval) seconds, at least every half
        second) gets no answer; then the host went to sleep after it accepted, and is silent since that attempt.
      - A probe left less than O(probe_timeout) before O(down_timeout) whose greeting does not come in that time,
        while new connections are still answered, decides nothing (a slow sshd is not taken for a parked host).
    type: float
    default: 2
  probe_timeout:
    description: Seconds a connected probe waits for the greeting.
    type: float
    default: 3
  connect_timeout:
    description:
      - Seconds one connection attempt (one SYN and the kernel's answer) waits. Waiting for a host to answer, a
        new attempt starts every O(interval) seconds while the earlier ones still wait (at most four at once,
        the oldest giving way), so a host that wakes is seen within an interval of its first answer.
    type: float
    default: 1
  interval:
    description: Seconds between two connection attempts (waiting for an answer) or two probes (waiting for silence) of one host.
    type: float
    default: 0.2
  greeting:
    description:
      - What the service's first bytes must match; empty = a connection is enough. Text without
        metacharacters is a literal (V(^SSH-) a prefix); otherwise a regular expression compiled
        before any host is acted on (a bad one fails the call naming this option) and matched
        against the first 128 characters, of the shapes M(host_wait) allows (no back-reference,
        no quantifier or alternation inside a quantified group, at most three repeating quantifiers).
    type: str
    default: "^SSH-"
  cycle_unresponsive:
    description: With C(ipmi), power-cycle a host whose chassis is on but which is silent (a reboot).
    type: bool
    default: false
  soft_fallback_hard:
    description: With C(soft), a hard power off when the OS did not shut down within O(down_timeout).
    type: bool
    default: false
  wol_resend:
    description:
      - Seconds between two sends of a silent host's magic packets while its wake by C(wol) waits; 0 = sent once,
        else at least 1. Two sends are at least O(connect_timeout) + O(probe_timeout) apart, so that a host that
        answers gets its whole greeting's wait.
      - A packet can be lost (UDP), or reach a host that is still on its way into sleep, whose NIC is not yet
        armed for it. A host that answers is sent no more; the attempt's report says how many times they were sent.
        Only the first send's failure fails the attempt; a later one is in its report and the wait goes on.
    type: float
    default: 5
  wol_repeat:
    description: How many times each magic packet is sent (each time the packets are sent).
    type: int
    default: 3
  concurrency:
    description: Hosts handled at once at most (the rest wait for a free thread).
    type: int
    default: 512
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is sent; every host is reported as it would be acted on.
  diff_mode:
    support: none
    details:
      - Power states are reported in the result, not as a diff.
  platform:
    support: full
    details:
      - Runs on the controller; ipmitool is needed there for hosts using their BMC.
seealso:
  - module: gear_observe
  - module: gear_shift_plan
  - module: host_wait
  - module: wake_on_lan
  - module: bmc_power
"""

EXAMPLES = r"""
- name: Wake the batch's hosts (one call for all of them)
  gear_wave:
    action: up
    hosts:
      - name: web1
        address: 10.0.0.11
        up_methods: [wol, ipmi]
        wol_macs: ["52:54:00:12:34:01"]
        wol_address: 10.0.0.255
        bmc_address: 10.0.1.11
        bmc_user: admin
        bmc_password: "{{ vault_bmc_password }}"
    wol_timeout: 60
  delegate_to: localhost
  run_once: true
  register: woken

- name: Wait until the hosts that suspended themselves, and those the BMC powers off, are gone
  gear_wave:
    action: down
    hosts:
      - {name: web2, address: 10.0.0.12, down_method: suspend, since: 1764000000.0}
      - {name: web3, address: 10.0.0.13, down_method: soft, bmc_address: 10.0.1.13, bmc_user: admin,
         bmc_password: "{{ vault_bmc_password }}"}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
hosts:
  description:
    - Every host's result, per host name (the shape of the gear_member role's result).
    - A host powered on by its BMC with O(hosts[].event_log) has C(bmc_events), the BMC event log
      entries added since just before the power-on (C(id), C(created), C(message), C(severity)),
      when the log could be read.
    - A host parked in S3 whose own suspend command said it installed the gear_member role's resume
      hook (it puts its in-service sleep policy back itself on the wake) has C(resume_hook=true).
  returned: always
  type: dict
  sample:
    web1:
      host: web1
      action: up
      ok: true
      method: ipmi
      state: "on"
      attempts:
        - {method: wol, ok: false, elapsed_s: 60.0,
           report: "wol: did not become answering within 60 s (240 probes, magic packets sent 12 times)"}
        - {method: ipmi, ok: true, elapsed_s: 41.2,
           report: "ipmi: next boot from Hdd (once); answered after 41.2 s; no new event log entries"}
      wait_s: 101.2
      elapsed_s: 102.0
      msg: woke by ipmi
ok:
  description: Names of the hosts that reached the state.
  returned: always
  type: list
  elements: str
not_ok:
  description:
    - Names of the hosts that did not. Each one's failure is its own result in RV(hosts), never the
      task's (a key named C(failed) would be taken by Ansible for the task's own failure).
  returned: always
  type: list
  elements: str
elapsed_s:
  description: Seconds the whole wave took.
  returned: always
  type: float
journal:
  description:
    - With O(journal), what was written into the state file (C(written), and C(updated), host -> state it
      was set to).
  returned: when O(journal) is given and the wave ran
  type: dict
  sample: {written: true, updated: {web1: "on"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import wavecall
from ansible.module_utils.fleetnap.fleethosts import host_options, take_records
from ansible.module_utils.fleetnap.secrets import guard, refuse_command_line
from ansible.module_utils.fleetnap.validate import ParamError, check_params


def main():
    spec = dict(
        action=dict(type="str", required=True, choices=["up", "down"]),
        hosts=dict(type="list", elements="dict", required=True, options=host_options(**wavecall.WAVE_OPTIONS)),
        observed=dict(type="dict"),
        journal=dict(type="dict", options=dict(
            state_file=dict(type="path", required=True),
            lock_file=dict(type="path"),
            batch=dict(type="list", elements="str"),
            results=dict(type="list", elements="dict", default=[]),
        )),
    )
    spec.update(wavecall.options())
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    try:
        take_records(p["hosts"], own=wavecall.own_defaults())
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    # Every result scrubbed of every form of every host's BMC password (a BMC's or a suspend
    # command's text that repeats it included); a password on a command line refused.
    scrubber = guard(module, [h.get("bmc_password") for h in p["hosts"]])
    check_params(module, wavecall.CHECKS)
    try:
        # A bad greeting is a bad option, before any host is woken (not a failed wake per host);
        # the journal read and checked before any host is acted on.
        matcher, kept = wavecall.check(p["action"], p["hosts"], p["greeting"], p["observed"], p["journal"])
    except (ParamError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    refuse_command_line(module, dict(("hosts[%d].bmc_password" % i, h.get("bmc_password"))
                                     for i, h in enumerate(p["hosts"]) if h.get("bmc_password")))
    names = [h["name"] for h in p["hosts"]]
    if module.check_mode or (not p["hosts"] and kept is None):
        module.exit_json(changed=bool(p["hosts"]), hosts={}, ok=[], not_ok=[], would=names, elapsed_s=0.0)
    out = wavecall.act(module, p, p["action"], p["hosts"], matcher, kept, p["journal"], scrubber,
                       lambda msg, result: module.fail_json(msg=msg, **result))
    module.exit_json(changed=bool(names) or bool(out.get("journal", {}).get("written")), **out)


if __name__ == "__main__":
    main()
