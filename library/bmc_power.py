#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bmc_power
short_description: Read and set a server's chassis power through its BMC (IPMI over LAN)
description:
  - Runs C(ipmitool -I lanplus) against a BMC. The password reaches ipmitool only through its
    environment (C(-E), C(IPMI_PASSWORD)); it is never on a command line.
  - Reads the power state first and acts only when it differs from the requested one, then
    verifies the state it asked for within O(timeout).
  - Commands to one BMC are serialised and at least O(min_interval) seconds apart, also across
    Ansible's forks (an exclusive lock and a timestamp file per BMC under O(rate_limit_dir)).
    Run the module from one host (usually C(delegate_to=localhost)) so every call sees that lock.
  - A BMC that does not answer is retried O(retries) times with exponential backoff, then the
    module fails naming C(host:port). A rejected login is not retried.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.bmc
  - fleetnap.power.bmc_rate_limit
  - fleetnap.power.attributes
options:
  bmc_port:
    description: UDP port of the BMC's RMCP+ service.
    type: int
    default: 623
  state:
    description:
      - V(status) only reads. V(on) and V(off) are hard power on and off.
      - V(soft) asks the operating system to shut down (ACPI power button) and waits for off;
        it never escalates to a hard off unless O(soft_fallback_hard=true).
      - V(cycle) powers off, verifies off, powers on and verifies on (on a host that is off it
        powers on), each phase within O(timeout), so a BMC that accepted the request and did nothing
        is reported as a failure.
    type: str
    choices: [status, "on", "off", soft, cycle]
    default: status
    aliases: [power]
  read_power:
    description:
      - Read the system's power draw at the end into RV(power_watts), from the BMC's DCMI power
        reading (C(ipmitool dcmi power reading)). A BMC without DCMI (completion code 0xC1, as
        C(ipmi_sim) answers) or with its reading deactivated gives null and says why in
        RV(power_note); not read in check mode.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the BMC to report the requested state after the command.
    type: float
    default: 60
  poll_interval:
    description: Seconds between status reads while waiting (never less than O(min_interval)).
    type: float
    default: 1
  retries:
    description:
      - Retries of an ipmitool run when the BMC does not answer (backoff 0.5 s, 1 s, 2 s ...).
      - An unreachable BMC fails after about (O(retries) + 1) x O(session_timeout) x (O(session_retries) + 1)
        seconds plus the backoff.
    type: int
    default: 2
  interface:
    description: ipmitool interface.
    type: str
    choices: [lanplus, lan]
    default: lanplus
  cipher_suite:
    description:
      - RMCP+ cipher suite for C(lanplus). V(3) (HMAC-SHA1, AES-128) is the widely supported one;
        use V(17) for BMCs that require SHA-256. V(-1) lets ipmitool negotiate (slower, and some
        BMCs do not answer the query).
    type: int
    default: 3
  session_timeout:
    description: ipmitool's timeout per request (C(-N)) in seconds.
    type: int
    default: 2
  session_retries:
    description:
      - ipmitool's own retransmissions per request (C(-R)). At least 1; ipmitool treats 0 as its
        default. Each ipmitool run is also killed after max(10, 3 x O(session_timeout) x (O(session_retries) + 1))
        seconds by coreutils C(timeout) when present.
    type: int
    default: 1
  soft_fallback_hard:
    description: With O(state=soft), hard power off when the host did not go off within O(timeout).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Reads the power state (a read-only IPMI command) and reports what it would change.
  diff_mode:
    support: full
  platform:
    support: full
requirements:
  - ipmitool on the host that runs the module
notes:
  - Tested against OpenIPMI's C(ipmi_sim) with a QEMU guest behind C(ipmi-bmc-extern).
"""

EXAMPLES = r"""
- name: Power a gear group down gracefully, hard off after 5 minutes
  bmc_power:
    bmc_address: "{{ fleetnap_bmc_address }}"
    bmc_user: "{{ fleetnap_bmc_user }}"
    bmc_password: "{{ fleetnap_bmc_password }}"
    state: soft
    timeout: 300
    soft_fallback_hard: true
  delegate_to: localhost
  throttle: 10

- name: Read the power state, password from the controller's environment (never a task's environment:)
  bmc_power:
    bmc_address: 10.0.40.17
    bmc_user: admin
    bmc_password: "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}"
  delegate_to: localhost
  register: bmc

- name: Power on
  bmc_power:
    bmc_address: 10.0.40.17
    bmc_user: admin
    bmc_password: "{{ vault_bmc_password }}"
    state: on
  delegate_to: localhost
"""

RETURN = r"""
power_before:
  description: Power state read before acting.
  returned: success
  type: str
  sample: "off"
power:
  description: Power state at the end (in check mode, the state the module would have set).
  returned: success
  type: str
  sample: "on"
attempts:
  description: ipmitool runs made (status reads, commands and retries).
  returned: always
  type: int
elapsed_s:
  description: Seconds the call took, rate-limit waits included.
  returned: always
  type: float
states_seen:
  description: >-
    Distinct power states read, in order, starting with the one before acting (for O(state=cycle)
    from on, V(on), V(off), V(on): the off phase is always seen).
  returned: when the module acted
  type: list
  elements: str
cycled:
  description: With O(state=cycle), whether the host was seen off and then on again (false when it was off before).
  returned: when O(state=cycle) acted
  type: bool
escalated:
  description: O(state=soft) fell back to a hard power off.
  returned: when O(state=soft)
  type: bool
power_watts:
  description: The system's power draw in watts (DCMI instantaneous reading), null when the BMC offers none.
  returned: when O(read_power=true) and not in check mode
  type: float
  sample: 231.0
power_source:
  description: V(dcmi) when RV(power_watts) is a reading, else null.
  returned: when O(read_power=true) and not in check mode
  type: str
power_note:
  description: Why RV(power_watts) is null (no DCMI on the BMC, or its reading deactivated).
  returned: when O(read_power=true) and not in check mode
  type: str
commands:
  description: Every ipmitool run with start and end (Unix seconds), the rate-limit wait and the exit code.
  returned: always
  type: list
  elements: dict
  sample: [{command: chassis power status, start: 1714557600.1, end: 1714557600.13, waited_s: 0, rc: 0}]
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.ipmi import Bmc, IpmiError, run_local
from ansible.module_utils.fleetnap.secrets import guard, refuse_command_line, unused_env_hint
from ansible.module_utils.fleetnap.validate import check_params, name, number, path

# Every number finite and bounded: a NaN or infinite timeout would wait for ever.
CHECKS = {
    "bmc_address": name(r"^(?!-)[A-Za-z0-9_.:%-]{1,253}$", "a host name or address"),
    "bmc_port": number(lo=1, hi=65535, integer=True),
    # IPMI's user names are 16 bytes at most (ipmi.validate_target, which ipmitool's calls check again)
    "bmc_user": name(r"^(?!-)[^\x00-\x1f]{1,16}$",
                     "a user name of 1-16 printable characters (IPMI's limit), not starting with -"),
    "timeout": number(lo=0, lo_open=True, hi=3600),
    "poll_interval": number(lo=0, hi=60),
    "retries": number(lo=0, hi=10, integer=True),
    "min_interval": number(lo=0, hi=600),
    "cipher_suite": number(lo=0, hi=17, integer=True),
    "session_timeout": number(lo=1, hi=60, integer=True),
    "session_retries": number(lo=1, hi=10, integer=True),
    "rate_limit_dir": path(),
}

TARGET = {"on": "on", "off": "off", "soft": "off", "cycle": "on"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            bmc_address=dict(type="str", required=True, aliases=["bmc_host"],
                             deprecated_aliases=[dict(name="bmc_host", version="1.0.0",
                                                      collection_name="fleetnap.power")]),
            bmc_port=dict(type="int", default=623),
            bmc_user=dict(type="str", required=True),
            bmc_password=dict(type="str", no_log=True),
            state=dict(type="str", default="status", choices=["status", "on", "off", "soft", "cycle"],
                       aliases=["power"]),
            timeout=dict(type="float", default=60),
            poll_interval=dict(type="float", default=1),
            retries=dict(type="int", default=2),
            min_interval=dict(type="float", default=1),
            interface=dict(type="str", default="lanplus", choices=["lanplus", "lan"]),
            cipher_suite=dict(type="int", default=3),
            session_timeout=dict(type="int", default=2),
            session_retries=dict(type="int", default=1),
            soft_fallback_hard=dict(type="bool", default=False),
            rate_limit_dir=dict(type="path", default="~/.cache/fleetnap/bmc"),
            read_power=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # Every result, message and warning scrubbed of every form of the password; a password on a
    # command line (a task's environment:) refused before anything is sent.
    guard(module, [p["bmc_password"]])
    refuse_command_line(module, {"bmc_password": p["bmc_password"]})
    started = time.time()
    check_params(module, CHECKS)
    if not p["bmc_password"]:
        hint = unused_env_hint(("FLEETNAP_BMC_PASSWORD", "IPMI_PASSWORD"))
        module.fail_json(msg="no password for BMC %s:%d: give bmc_password, for example from the controller's "
                             "environment with lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD')%s"
                             % (p["bmc_address"], p["bmc_port"], hint))

    ipmitool = module.get_bin_path("ipmitool", required=True)
    timeout_bin = module.get_bin_path("timeout")  # coreutils; a hard bound on each ipmitool run

    try:
        bmc = Bmc(run_local, ipmitool, p["bmc_address"], p["bmc_port"], p["bmc_user"], p["bmc_password"],
                  interface=p["interface"], cipher_suite=None if p["cipher_suite"] < 0 else p["cipher_suite"],
                  session_timeout=p["session_timeout"], session_retries=p["session_retries"],
                  min_interval=p["min_interval"], retries=p["retries"], state_dir=p["rate_limit_dir"],
                  guard=[timeout_bin] if timeout_bin else None)
    except ValueError as e:
        module.fail_json(msg=str(e))

    result = {"changed": False, "commands": bmc.log}

    def finish(read=True, **kw):
        result.update(kw)
        if read and p["read_power"] and not module.check_mode:
            result["power_watts"] = bmc.power_watts()
            result["power_source"] = bmc.power_source
            result["power_note"] = bmc.power_note
        result["attempts"] = len(bmc.log)
        result["elapsed_s"] = round(time.time() - started, 3)
        return result

    def fail(msg, **kw):
        module.fail_json(msg=msg, **finish(read=False, **kw))

    state = p["state"]
    poll = max(p["poll_interval"], p["min_interval"])
    try:
        before = bmc.status()
        result["power_before"] = before
        if state == "status":
            module.exit_json(**finish(power=before))
        target = TARGET[state]
        if state != "cycle" and before == target:
            module.exit_json(**finish(power=before))
        result["changed"] = True
        if module._diff:
            result["diff"] = {"before": {"power": before}, "after": {"power": target}}
        if module.check_mode:
            module.exit_json(**finish(power=target))

        if state == "on":
            bmc.power("on")
        elif state == "off":
            bmc.power("off")
        elif state == "soft":
            bmc.power("soft")
            result["escalated"] = False
        elif state == "cycle":
            reached, last, seen, phase = bmc.cycle(before, p["timeout"], poll)
            if not reached:
                fail("BMC %s accepted 'chassis power %s' for the power cycle but still reports %s after %.0f s; "
                     "the cycle did not happen" % (bmc.target, phase, last, p["timeout"]),
                     power=last, states_seen=seen)
            module.exit_json(**finish(power=last, states_seen=seen, cycled=before != "off"))
        reached, last, seen = bmc.wait_for(target, p["timeout"], poll)
        if not reached and state == "soft":
            if not p["soft_fallback_hard"]:
                fail("host behind BMC %s did not power off within %.0f s after a soft shutdown request "
                     "(last state seen: %s). The OS must act on the ACPI power button (button module, "
                     "systemd-logind HandlePowerKey); set soft_fallback_hard: true to force a hard off"
                     % (bmc.target, p["timeout"], last), power=last, states_seen=seen)
            bmc.power("off")
            result["escalated"] = True
            reached, last, seen2 = bmc.wait_for("off", p["timeout"], poll)
            seen = seen + [s for s in seen2 if not seen or s != seen[-1]]
        if not reached:
            fail("BMC %s accepted 'chassis power %s' but still reports %s after %.0f s"
                 % (bmc.target, "off" if result.get("escalated") else state, last, p["timeout"]),
                 power=last, states_seen=seen)
        module.exit_json(**finish(power=last, states_seen=seen))
    except IpmiError as e:
        fail(str(e), error_kind=e.kind)


if __name__ == "__main__":
    main()
