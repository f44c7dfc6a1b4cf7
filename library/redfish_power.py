#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: redfish_power
short_description: Read and set a server's power through its BMC's Redfish service
description:
  - Talks to the BMC's Redfish service over HTTPS with the Python standard library only; the
    counterpart of M(bmc_power) for BMCs that offer Redfish beside (or instead of) IPMI.
  - Finds the ComputerSystem under the service root (O(system_id) chooses when the BMC manages
    several), logs in with a Redfish session (deleted at the end) or, when the service has no
    session service, HTTP Basic authentication. The password is sent only in the body of the
    session login (or in the C(Authorization) header of a BMC without sessions), never on a command
    line, and it is not in the results; neither is the session token.
  - Reads the power state first and acts only when it differs from the requested one, sends the
    C(#ComputerSystem.Reset) type the BMC allows, follows a task monitor when the BMC answers
    C(202 Accepted), then verifies the state it asked for within O(timeout).
  - Before a power-on it sets a one-time boot override (O(boot_once), V(hdd) by default) so a host
    whose boot order starts with the network does not boot an installer.
  - Requests to one BMC are serialised and at least O(min_interval) seconds apart, also across
    Ansible's forks (a lock and a timestamp file per C(host_port) under O(rate_limit_dir), as
    M(bmc_power) keeps them; IPMI on port 623 and Redfish on 443 of one BMC are limited separately).
    Run the module from one host (usually C(delegate_to=localhost)) so every call sees that lock.
  - A BMC that does not answer, or answers 502/503/504/429, is retried O(retries) times with
    backoff (a C(Retry-After) header is honoured up to 15 s), then the module fails naming
    C(host:port). A refused login (401/403) is not retried. A reset request whose answer was lost
    is not sent again.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.bmc
  - fleetnap.power.bmc_rate_limit.redfish
  - fleetnap.power.attributes
options:
  bmc_port:
    description: TCP port of the BMC's HTTPS (Redfish) service.
    type: int
    default: 443
  system_id:
    description:
      - C(Id) (or last path segment) of the ComputerSystem to control, for BMCs that manage several
        (blade chassis, multi-node enclosures). Without it a BMC with more than one system is an
        error that lists their ids.
    type: str
  state:
    description:
      - V(status) only reads.
      - V(on) sends C(On) (or C(ForceOn) when the BMC allows only that); V(off) sends C(ForceOff).
      - V(soft) sends C(GracefulShutdown) (the operating system shuts down) and waits for off; it never
        escalates to a hard off unless O(soft_fallback_hard=true).
      - V(cycle) from on sends C(PowerCycle) when the BMC declares it in its allowable values (the short
        off phase may not be seen), else C(ForceOff), verifies off, then C(On) and verifies on; from off
        it powers on.
    type: str
    choices: [status, "on", "off", soft, cycle]
    default: status
    aliases: [power]
  timeout:
    description:
      - Seconds to wait, after each reset request, for its task (when the BMC answers with one) and
        for the BMC to report the requested power state.
    type: float
    default: 60
  poll_interval:
    description: Seconds between power state reads while waiting (never less than O(min_interval)).
    type: float
    default: 1
  request_timeout:
    description:
      - Seconds one HTTP request may take (connection, TLS handshake, answer); no request waits longer.
      - An unreachable BMC fails after about (O(retries) + 1) x O(request_timeout) seconds plus the backoff.
    type: float
    default: 10
  retries:
    description: Retries of a request the BMC did not answer or answered with 502, 503, 504 or 429 (backoff 0.5 s, 1 s, 2 s ...).
    type: int
    default: 2
  validate_certs:
    description:
      - Verify the BMC's TLS certificate and that it names O(bmc_address). Set V(false) in a lab only.
    type: bool
    default: true
  ca_path:
    description:
      - Absolute path of a PEM file with the CA certificate(s) that signed the BMC's certificate
        (BMCs usually carry certificates of an organisation's own CA, or self-signed ones). Without it
        the system's trusted CAs are used.
    type: path
  soft_fallback_hard:
    description: With O(state=soft), send C(ForceOff) when the host did not go off within O(timeout).
    type: bool
    default: false
  boot_once:
    description:
      - The device the host boots from at the next boot only (C(BootSourceOverrideEnabled=Once)),
        set before the module powers the host on (O(state=on) from off, O(state=cycle)); read back
        afterwards. V(none) leaves the boot settings alone.
      - V(hdd), the default, is the safe choice for a wake, because a host that boots from the network
        into an installer is the worst outcome of a power-on. When the BMC has no boot override or does not
        allow the device, the module fails before powering on (set V(none) to power on anyway).
      - Some BMCs (the sushy-tools emulator among them) keep reporting C(Continuous); the module then
        warns and returns what it read in RV(boot_override).
    type: str
    choices: [none, hdd, pxe, cd, usb, bios_setup]
    default: hdd
  read_power:
    description:
      - Read the chassis power draw at the end into RV(power_watts) (from C(EnvironmentMetrics), the
        older C(Power) resource or the power supplies of C(PowerSubsystem), whichever the BMC offers).
    type: bool
    default: false
  report_log:
    description:
      - Return in RV(log_entries) the C(Warning) and C(Critical) entries that the system's and its
        managers' log services (for example the SEL) gained while the module acted.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Reads the power state, the reset types and the boot settings (logging in and out) and
        reports what it would send; sends no reset and no boot override.
  diff_mode:
    support: full
  platform:
    support: full
notes:
  - Tested against the sushy-tools Redfish emulator (fake driver) over HTTPS with Basic
    authentication. It offers C(On), C(ForceOn), C(ForceOff), C(GracefulShutdown), C(GracefulRestart),
    C(ForceRestart) and C(Nmi) (no C(PowerCycle), so V(cycle) is C(ForceOff) then C(On)), a boot
    override that ignores C(Once), no session service, no power reading (RV(power_watts) is null) and
    no log service. Sessions, task monitors, power readings and log services are tested against a
    small stand-in service.
seealso:
  - module: bmc_power
  - name: DMTF Redfish specification (DSP0266)
    description: Sessions, task monitors, actions and allowable values.
    link: https://www.dmtf.org/standards/redfish
"""

EXAMPLES = r"""
- name: Power a host on through Redfish, booting from disk once (the default)
  redfish_power:
    bmc_address: "{{ fleetnap_bmc_address }}"
    bmc_user: "{{ fleetnap_bmc_user }}"
    bmc_password: "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}"
    ca_path: /etc/fleetnap/bmc-ca.pem
    state: "on"
    read_power: true
  delegate_to: localhost
  throttle: 10

- name: Shut a gear group down gracefully, hard off after 5 minutes, with the SEL's new warnings
  redfish_power:
    bmc_address: "{{ fleetnap_bmc_address }}"
    bmc_user: "{{ fleetnap_bmc_user }}"
    bmc_password: "{{ vault_bmc_password }}"
    ca_path: /etc/fleetnap/bmc-ca.pem
    state: soft
    timeout: 300
    soft_fallback_hard: true
    report_log: true
  delegate_to: localhost

- name: Read the state of one node of a multi-node enclosure
  redfish_power:
    bmc_address: 10.0.40.17
    bmc_user: admin
    bmc_password: "{{ vault_bmc_password }}"
    ca_path: /etc/fleetnap/bmc-ca.pem
    system_id: System.Embedded.1
  delegate_to: localhost
  register: bmc
"""

RETURN = r"""
state_before:
  description: Power state read before acting (V(on) or V(off); C(PoweringOn) counts as on, C(PoweringOff) as off).
  returned: success
  type: str
  sample: "off"
state:
  description: Power state at the end (in check mode, the state the module would have set).
  returned: success
  type: str
  sample: "on"
power_before:
  description: The same as RV(state_before), under the name M(bmc_power) returns.
  returned: success
  type: str
power:
  description: The same as RV(state), under the name M(bmc_power) returns.
  returned: success
  type: str
reset_type:
  description: >-
    The C(ResetType) sent (or that would be sent in check mode); V(ForceOff+On) for a cycle done in
    two steps; null when nothing was to be done.
  returned: success
  type: str
  sample: "On"
reset_types_allowed:
  description: The reset types the BMC allows (as declared, or the standard set when it declares none).
  returned: when the system was found
  type: list
  elements: str
auth:
  description: How the module authenticated, V(session) or V(basic).
  returned: when the BMC answered
  type: str
states_seen:
  description: >-
    Distinct power states read, in order, starting with the one before acting; transitions show as
    V(powering_on) or V(powering_off).
  returned: when the module acted
  type: list
  elements: str
cycled:
  description: With O(state=cycle), whether the host was on before (false when it was only powered on).
  returned: when O(state=cycle) acted
  type: bool
escalated:
  description: O(state=soft) fell back to a hard power off.
  returned: when O(state=soft) acted
  type: bool
boot_override:
  description: >-
    The boot override read back after setting it (target, enabled, requested, once: whether the BMC
    reports C(Once)); in check mode the override that would be set.
  returned: when the module powered on with O(boot_once) not V(none)
  type: dict
  sample: {target: Hdd, enabled: Once, requested: {target: Hdd, enabled: Once}, once: true}
power_watts:
  description: Chassis power draw in watts, null when the BMC offers no reading.
  returned: when O(read_power=true)
  type: float
  sample: 231.5
power_source:
  description: The resource the reading came from (V(EnvironmentMetrics), V(Power), V(PowerSubsystem)) or null.
  returned: when O(read_power=true)
  type: str
log_entries:
  description: >-
    C(Warning) and C(Critical) log entries that appeared while the module acted (service, id, created,
    severity, message, message_id); empty when nothing was done or the BMC has no log service.
  returned: when O(report_log=true)
  type: list
  elements: dict
requests:
  description: Every HTTP request with method, path, status, start and end (Unix seconds) and the rate-limit wait; no headers, no bodies.
  returned: always
  type: list
  elements: dict
  sample: [{method: GET, path: /redfish/v1/, status: 200, start: 1714557600.1, end: 1714557600.13, waited_s: 0}]
attempts:
  description: HTTP requests made (retries included).
  returned: always
  type: int
elapsed_s:
  description: Seconds the call took.
  returned: always
  type: float
msg:
  description: What was done, or why the module failed (naming the BMC as C(host:port)).
  returned: always
  type: str
error_kind:
  description: >-
    On failure: V(auth) (credentials refused), V(unreachable), V(tls), V(protocol) (an answer without
    what Redfish requires), V(command) (the BMC refused or cannot do it), V(timeout) (a task or the
    power state did not finish in time).
  returned: failure
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.redfish import Redfish, RedfishError
from ansible.module_utils.fleetnap.secrets import guard, refuse_command_line, unused_env_hint
from ansible.module_utils.fleetnap.validate import ParamError, check_params, name, number, path

# Every number finite and bounded: a NaN or infinite timeout would wait for ever.
CHECKS = {
    "bmc_address": name(r"^(?!-)[A-Za-z0-9_.:%-]{1,253}$", "a host name or address"),
    "bmc_port": number(lo=1, hi=65535, integer=True),
    "bmc_user": name(r"^[^\x00-\x1f\x7f]{1,256}$", "a user name of 1-256 printable characters"),
    "system_id": name(r"^[A-Za-z0-9_.:@+-]{1,255}$", "a Redfish system Id (letters, digits, _ . : @ + -)"),
    "timeout": number(lo=0, lo_open=True, hi=3600),
    "poll_interval": number(lo=0.1, hi=60),
    "request_timeout": number(lo=0, lo_open=True, hi=300),
    "retries": number(lo=0, hi=10, integer=True),
    "min_interval": number(lo=0, hi=600),
    "rate_limit_dir": path(),
    "ca_path": path(),
}

TARGET = {"on": "on", "off": "off", "soft": "off", "cycle": "on"}
BOOT = {"hdd": "Hdd", "pxe": "Pxe", "cd": "Cd", "usb": "Usb", "bios_setup": "BiosSetup"}


class Failed(Exception):
    def __init__(self, msg, **extra):
        Exception.__init__(self, msg)
        self.extra = extra


def check_ca_path(ca_path):
    """ca_path exists, is a regular file and is readable (before any network I/O)."""
    if not os.path.exists(ca_path):
        raise ParamError("option ca_path: %s does not exist (give the PEM file of the CA that signed the BMC's "
                         "certificate)" % ca_path)
    if not os.path.isfile(ca_path):
        raise ParamError("option ca_path: %s is not a file" % ca_path)
    if not os.access(ca_path, os.R_OK):
        raise ParamError("option ca_path: %s is not readable by this user" % ca_path)


def join_states(seen, more):
    """seen followed by the states of more, without repeating a state."""
    out = list(seen)
    for s in more:
        if not out or out[-1] != s:
            out.append(s)
    return out


def act(module, client, result):
    """Read, decide, act, verify; fills result. Returns the log marker taken before acting (None
    when nothing was done or report_log is off). Raises Failed or RedfishError."""
    p = module.params
    state = p["state"]
    poll = max(p["poll_interval"], p["min_interval"])
    timeout = p["timeout"]

    before = client.status()
    result.update(state_before=before, power_before=before, auth=client.auth,
                  reset_types_allowed=list(client.reset_types))
    if state == "status" or (state != "cycle" and before == TARGET[state]):
        result.update(state=before, power=before, reset_type=None,
                      msg="BMC %s: the system is %s%s" % (client.target, before,
                                                          "" if state == "status" else ", nothing to do"))
        return None
    target = TARGET[state]
    if state == "cycle":
        rtype = client.reset_type_for("cycle") if before != "off" else client.reset_type_for("on")
        rtype = rtype or "ForceOff+On"
    else:
        rtype = client.reset_type_for(state)
    boot = BOOT.get(p["boot_once"]) if target == "on" else None
    if boot:
        client.check_boot_once(boot)        # fails now, before any change, when it cannot be done
    result.update(changed=True, reset_type=rtype)
    if module._diff:
        result["diff"] = {"before": {"power": before}, "after": {"power": target}}
    if module.check_mode:
        result.update(state=target, power=target,
                      msg="BMC %s: would send %s (the system is %s)" % (client.target, rtype, before))
        if boot:
            result["boot_override"] = {"requested": {"target": boot, "enabled": "Once"}}
        return None

    marker = client.log_marker() if p["report_log"] else None
    if boot:
        result["boot_override"] = client.set_boot_once(boot, timeout=timeout)
        if not result["boot_override"]["once"]:
            module.warn("BMC %s reports BootSourceOverrideEnabled=%s after it was asked for Once: the host boots "
                        "from %s until the override is changed" % (client.target, result["boot_override"]["enabled"],
                                                                   boot))
    if state == "cycle":
        reached, last, seen, phase = client.cycle(before, timeout, poll)
        result.update(states_seen=seen, cycled=before != "off")
        if not reached:
            sent = "ForceOff" if phase == "off" else ("PowerCycle" if rtype == "PowerCycle" else "On")
            raise Failed("BMC %s accepted %s for the power cycle but the system still reports %s after %.0f s; "
                         "the cycle did not finish (phase: %s)" % (client.target, sent, last, timeout, phase),
                         state=last, power=last, states_seen=seen, kind="timeout")
        done = "power cycled (%s)" % client.cycle_method if before != "off" else "powered on (it was off)"
        result.update(state=last, power=last, msg="BMC %s: %s, the system is on" % (client.target, done))
        return marker
    client.reset(rtype, timeout)
    reached, last, seen = client.wait_for(target, timeout, poll)
    seen = join_states([before], seen)
    if state == "soft":
        result["escalated"] = False
        if not reached:
            if not p["soft_fallback_hard"]:
                raise Failed("host behind BMC %s did not power off within %.0f s after GracefulShutdown (last state "
                             "seen: %s). The operating system must act on it (ACPI power button: button module, "
                             "systemd-logind HandlePowerKey); set soft_fallback_hard: true to force a hard off"
                             % (client.target, timeout, last), state=last, power=last, states_seen=seen,
                             kind="timeout")
            rtype = client.reset_type_for("off")
            client.reset(rtype, timeout)
            result.update(escalated=True, reset_type="GracefulShutdown+%s" % rtype)
            reached, last, seen2 = client.wait_for("off", timeout, poll)
            seen = join_states(seen, seen2)
    result["states_seen"] = seen
    if not reached:
        raise Failed("BMC %s accepted ResetType %s but the system still reports %s after %.0f s"
                     % (client.target, rtype, last, timeout), state=last, power=last, kind="timeout")
    result.update(state=last, power=last,
                  msg="BMC %s: sent %s, the system is %s" % (client.target, result["reset_type"], last))
    return marker


def main():
    module = AnsibleModule(
        argument_spec=dict(
            bmc_address=dict(type="str", required=True, aliases=["bmc_host"],
                             deprecated_aliases=[dict(name="bmc_host", version="1.0.0",
                                                      collection_name="fleetnap.power")]),
            bmc_port=dict(type="int", default=443),
            bmc_user=dict(type="str", required=True),
            bmc_password=dict(type="str", no_log=True),
            system_id=dict(type="str"),
            state=dict(type="str", default="status", choices=["status", "on", "off", "soft", "cycle"],
                       aliases=["power"]),
            timeout=dict(type="float", default=60),
            poll_interval=dict(type="float", default=1),
            request_timeout=dict(type="float", default=10),
            retries=dict(type="int", default=2),
            min_interval=dict(type="float", default=0.25),
            rate_limit_dir=dict(type="path", default="~/.cache/fleetnap/bmc"),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            soft_fallback_hard=dict(type="bool", default=False),
            boot_once=dict(type="str", default="hdd", choices=["none"] + sorted(BOOT)),
            read_power=dict(type="bool", default=False),
            report_log=dict(type="bool", default=False),
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
    if p["ca_path"]:
        try:
            check_ca_path(p["ca_path"])
        except ParamError as exc:
            module.fail_json(msg=str(exc))
    if not p["bmc_password"]:
        hint = unused_env_hint(("FLEETNAP_BMC_PASSWORD", "REDFISH_PASSWORD"))
        module.fail_json(msg="no password for BMC %s:%d: give bmc_password, for example from the controller's "
                             "environment with lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD')%s"
                             % (p["bmc_address"], p["bmc_port"], hint))
    if p["ca_path"] and not p["validate_certs"]:
        module.warn("ca_path is not used: validate_certs is false, the BMC's certificate is not checked")

    try:
        client = Redfish(p["bmc_address"], p["bmc_port"], p["bmc_user"], p["bmc_password"], system_id=p["system_id"],
                         validate_certs=p["validate_certs"], ca_path=p["ca_path"],
                         request_timeout=p["request_timeout"], retries=p["retries"], min_interval=p["min_interval"],
                         state_dir=p["rate_limit_dir"], task_timeout=p["timeout"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    except RedfishError as exc:
        module.fail_json(msg=str(exc), error_kind=exc.kind)

    result = {"changed": False, "requests": client.log}
    failure = None
    try:
        marker = act(module, client, result)
        if p["read_power"]:
            result["power_watts"] = client.power_watts()
            result["power_source"] = client.power_source
        if p["report_log"]:
            result["log_entries"] = client.log_entries_since(marker) if marker is not None else []
    except Failed as exc:
        extra = dict(exc.extra)
        failure = (str(exc), extra.pop("kind", "command"), extra)
    except RedfishError as exc:
        failure = (str(exc), exc.kind, {})
    finally:
        client.close()             # the session ends whatever happened
    result["attempts"] = len(client.log)
    result["elapsed_s"] = round(time.time() - started, 3)
    if failure:
        msg, kind, extra = failure
        result.update(extra)
        result.pop("msg", None)
        module.fail_json(msg=msg, error_kind=kind, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
