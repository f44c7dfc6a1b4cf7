#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_wait
short_description: Wait until a host answers on a TCP service, or until it stops answering
description:
  - Runs on the controller (delegated to localhost). Polls a host's service port and, for a
    service with a greeting (SSH), reads it, so a port that accepts connections for a sleeping
    host (a NAT, a load balancer, QEMU's user networking) does not count as an answer.
  - O(state=answering) waits for the first answer and returns when it came, relative to O(since)
    (for example the moment a wake was sent), which is the end-to-end resume time a user sees.
  - O(state=silent) waits until the host stops answering (gone to sleep or off).
  - Fails after O(timeout) seconds, naming the host and what was last seen.
  - Why not M(ansible.builtin.wait_for). For O(state=answering) it comes close when given
    C(search_regex) (it then reads the greeting too) and delegated to localhost (no Python on the
    host); what this module adds is the time counted from O(since), the moment the wake was sent
    (the end-to-end resume time, not the task's own wait), and a greeting checked against a bounded
    pattern. For O(state=silent) wait_for has no equivalent; its C(state=stopped) waits for the port
    to close, which a NAT, a load balancer or QEMU's user networking keeps open for a sleeping host,
    and its C(search_regex) does not apply there; this module waits until no greeting comes.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  host:
    description: Address of the host.
    type: str
    required: true
  port:
    description: TCP port of the service.
    type: int
    default: 22
  state:
    description: What to wait for.
    type: str
    choices: [answering, silent]
    default: answering
  greeting:
    description:
      - What the service's first bytes must match; empty = a TCP connect is enough.
      - Text without metacharacters is a literal (V(^SSH-) a prefix, V(SSH-) anywhere in the
        greeting) - what an SSH server's greeting needs, without a regular expression.
      - Otherwise a Python regular expression, compiled before the first probe (a bad one fails
        naming this option) and matched against the first 128 characters of the greeting. Shapes
        that can make a match take for ever are refused - a back-reference, a quantifier or an
        alternation inside a quantified group (V(^(a+\)+$)), more than three repeating quantifiers.
    type: str
    default: "^SSH-"
  since:
    description: Unix time to measure from (default the start of this call).
    type: float
  timeout:
    description: Seconds to wait at most.
    type: float
    default: 120
  interval:
    description: Seconds between probes.
    type: float
    default: 0.2
  probe_timeout:
    description: Seconds one probe waits for the connection and the greeting.
    type: float
    default: 3.0
  silent_for:
    description:
      - With O(state=silent), how long the host must stay silent before it counts as gone, so
        a busy host that greets slowly is not taken for a sleeping one.
    type: float
    default: 3.0
attributes:
  check_mode:
    support: full
    details:
      - Only observes; runs the same in check mode.
  diff_mode:
    support: none
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Wake time as a user sees it
  host_wait:
    host: "{{ ansible_host }}"
    port: "{{ ansible_port | default(22) }}"
    since: "{{ fleetnap__wake_sent_at }}"
  delegate_to: localhost
"""

RETURN = r"""
elapsed_s:
  description: Seconds from O(since) to the state being reached.
  returned: success
  type: float
  sample: 2.41
at:
  description: Unix time when the state was reached.
  returned: success
  type: float
probes:
  description: Number of probes made.
  returned: always
  type: int
last_probe:
  description:
    - What the last probe saw, in words - C(no connection (...)), C(connected, no greeting within N s),
      or C(answered "TEXT"...) with the service's first line (printable ASCII, at most 80 characters).
  returned: always
  type: str
  sample: answered "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.observe import compile_greeting, probe
from ansible.module_utils.fleetnap.validate import check_params, name, number

# Every number finite and bounded: a NaN or infinite timeout would wait for ever.
CHECKS = {
    "host": name(r"^[A-Za-z0-9_.:%-]{1,253}$", "a host name or address"),
    "port": number(lo=1, hi=65535, integer=True),
    "since": number(lo=0),
    "timeout": number(lo=0, lo_open=True, hi=86400),
    "interval": number(lo=0, lo_open=True, hi=3600),
    "probe_timeout": number(lo=0, lo_open=True, hi=300),
    "silent_for": number(lo=0, hi=3600),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            port=dict(type="int", default=22),
            state=dict(type="str", choices=["answering", "silent"], default="answering"),
            greeting=dict(type="str", default="^SSH-"),
            since=dict(type="float"),
            timeout=dict(type="float", default=120),
            interval=dict(type="float", default=0.2),
            probe_timeout=dict(type="float", default=3.0),
            silent_for=dict(type="float", default=3.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    try:
        greeting = compile_greeting(p["greeting"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), probes=0, last_probe="")
    start = time.time()
    since = p["since"] if p["since"] is not None else start
    deadline = start + p["timeout"]
    probes, silent_since = 0, None
    while True:
        probes += 1
        probe_start = time.time()
        ok, seen = probe(p["host"], p["port"], greeting, min(p["probe_timeout"], p["timeout"]))
        now = time.time()
        if p["state"] == "answering" and ok:
            module.exit_json(changed=False, elapsed_s=round(now - since, 3), at=now, probes=probes, last_probe=seen)
        if p["state"] == "silent":
            if ok:
                silent_since = None
            elif silent_since is None:
                silent_since = probe_start
            if silent_since is not None and now - silent_since >= p["silent_for"]:
                module.exit_json(changed=False, elapsed_s=round(silent_since - since, 3), at=silent_since,
                                 probes=probes, last_probe=seen)
        if now >= deadline:
            if p["state"] == "answering" and seen.startswith("answered"):
                module.fail_json(msg="%s:%d answered within %g s but not with the greeting expected (%d probes; "
                                     "last probe: %s): check greeting, or that this port is the service meant"
                                 % (p["host"], p["port"], p["timeout"], probes, seen), probes=probes, last_probe=seen)
            module.fail_json(msg="%s:%d did not become %s within %g s (%d probes; last probe: %s)"
                             % (p["host"], p["port"], p["state"], p["timeout"], probes,
                                "answering" if ok else seen), probes=probes, last_probe=seen)
        time.sleep(p["interval"])


if __name__ == "__main__":
    main()
