#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_nodes
short_description: Power Slurm nodes down or up through slurmctld, verified by Slurm and by the hosts
description:
  - Runs on a host with Slurm's C(scontrol) that reaches slurmctld (the controller or the slurmctld host).
    Internal to role C(gear_shift), called for each wave when C(gear_shift_scheduler) is C(slurm); usable alone.
  - On a Slurm cluster Slurm owns the nodes. A gear shift there asks slurmctld, in one
    C(scontrol update), to power the nodes down with C(POWER_DOWN_ASAP) (Slurm drains a node and
    calls its C(SuspendProgram), fleetnap's role C(slurm_power), which parks it) or up with
    C(POWER_UP) (Slurm calls its C(ResumeProgram), which wakes it), and waits until Slurm shows each
    node powered down (C(IDLE+POWERED_DOWN)) or up again, and, for the hosts given in O(hosts), until
    the host itself is silent or answers with its SSH greeting.
  - fleetnap never parks a node Slurm counts as up. A node Slurm runs jobs on is not asked unless
    O(include_busy) (Slurm then drains it first and powers it down when its jobs end); a node Slurm
    has C(DOWN), C(DRAIN) or powering up is left alone with the reason; a node already in the asked
    state is reported and not asked again; a node Slurm does not know fails the call before anything
    is asked.
  - Each node's result has the shape of M(gear_wave)'s (host, action, ok, method C(slurm), state,
    elapsed_s, msg), so that a gear shift records it as it records its own waves. As with M(gear_wave),
    a node that did not get there is its result (in RV(not_ok)), not a failure of the task; the task
    fails when nothing can be asked (a node Slurm does not know, scontrol failing).
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  action:
    description: C(power_down) or C(power_up).
    type: str
    required: true
    choices: [power_down, power_up]
  nodes:
    description: Slurm node names (the inventory's host names); at most 10000.
    type: list
    elements: str
    required: true
  hosts:
    description:
      - Node -> how to reach the host, C({address, port}) (SSH), and C(parked) (C(asleep) or C(off), the state a
        parked host is recorded in; default O(parked)'s, else C(off)). A node listed here is verified by the host too.
      - Or a list of C({name, address, port[, parked]}), as the C(fleetnap.power.power_records) lookup returns them
        with C(fields=[address, port]).
    type: raw
    default: {}
  parked:
    description: Node -> the state it is parked in (C(asleep) or C(off)), for the O(hosts) that do not say.
    type: dict
    default: {}
  include_busy:
    description: Ask to power down nodes Slurm runs jobs on (C(POWER_DOWN_ASAP) drains them first).
    type: bool
    default: false
  scontrol:
    description: Slurm's scontrol (an absolute path).
    type: path
    default: /usr/bin/scontrol
  conf_file:
    description: slurm.conf of the cluster (C(SLURM_CONF) for scontrol); unset, scontrol's own default.
    type: path
  timeout:
    description: Seconds to wait for every node (1..86400); Slurm's own C(SuspendTimeout) and C(ResumeTimeout) count within it.
    type: float
    default: 600
  poll:
    description: Seconds between looks at Slurm's node states and the hosts (0.2..60).
    type: float
    default: 2
attributes:
  check_mode:
    support: full
    details:
      - Reads Slurm's node states and says which nodes would be asked; asks nothing.
  diff_mode:
    support: none
  platform:
    support: full
    details:
      - Runs where scontrol reaches slurmctld.
seealso:
  - module: gear_wave
"""

EXAMPLES = r"""
- name: Power two nodes down through Slurm, verified by Slurm and by the hosts
  slurm_nodes:
    action: power_down
    nodes: [node3, node6]
    hosts:
      node3: {address: 10.0.0.3, port: 22, parked: asleep}
      node6: {address: 10.0.0.6, port: 22, parked: off}
    timeout: 900
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
hosts:
  description: Node -> its result (host, action C(down)/C(up), ok, method C(slurm), state, slurm_state, elapsed_s, msg).
  returned: always
  type: dict
asked:
  description: The nodes slurmctld was asked for (none in check mode).
  returned: always
  type: list
  elements: str
ok:
  description: The nodes in the asked state (verified), in the order given.
  returned: always
  type: list
  elements: str
not_ok:
  description: The nodes that are not (left alone, DOWN in Slurm, not there in time).
  returned: always
  type: list
  elements: str
command:
  description: The scontrol command that asked (empty when nothing was asked).
  returned: always
  type: list
  elements: str
"""

import os
import subprocess
import time

from ansible.module_utils.fleetnap import hostlist
from ansible.module_utils.fleetnap.observe import answers
from ansible.module_utils.fleetnap.slurmnodes import MAX_NODES, NODE, SlurmError, decide, describe
from ansible.module_utils.fleetnap.slurmnodes import parse_nodes, reached, update_argv
from ansible.module_utils.fleetnap.validate import ParamError, ansible_module, check_params, names, number, path

CHECKS = {
    "nodes": names(NODE.pattern, "a Slurm node name (letters, digits, '.', '_', '-')", max_items=MAX_NODES),
    "scontrol": path(),
    "conf_file": path(),
    "timeout": number(lo=1, hi=86400),
    "poll": number(lo=0.2, hi=60),
}
OUTPUT_LIMIT = 64 * 1024 * 1024


def hosts_by_name(hosts, parked):
    """O(hosts) as node -> {address, port[, parked]}, from a mapping or a list of entries with a name;
    O(parked) for the hosts that do not say. ParamError naming what is wrong."""
    if isinstance(hosts, list):
        if len(hosts) > MAX_NODES:
            raise ParamError("option hosts: more than %d hosts" % MAX_NODES)
        out = {}
        for i, h in enumerate(hosts):
            if not isinstance(h, dict) or not isinstance(h.get("name"), str):
                raise ParamError("option hosts[%d]: must be {name, address, port[, parked]}" % i)
            if h["name"] in out:
                raise ParamError("option hosts[%d]: %s is given twice" % (i, h["name"]))
            out[h["name"]] = dict((k, v) for k, v in h.items() if k != "name")
        hosts = out
    elif not isinstance(hosts, dict):
        raise ParamError("option hosts: must be a mapping of node to {address, port} or a list of entries, got %s"
                         % type(hosts).__name__)
    for name, state in parked.items():
        if name in hosts and isinstance(hosts[name], dict) and "parked" not in hosts[name]:
            hosts[name] = dict(hosts[name], parked=state)
    return hosts


def check_hosts(hosts, nodes):
    out = {}
    if len(hosts) > MAX_NODES:
        raise ParamError("option hosts: more than %d hosts" % MAX_NODES)
    for name, h in hosts.items():
        where = "option hosts.%s" % name
        if name not in nodes:
            raise ParamError("%s: not one of the nodes" % where)
        if not isinstance(h, dict) or set(h) - {"address", "port", "parked"} or not {"address", "port"} <= set(h):
            raise ParamError("%s: must be {address, port[, parked]}" % where)
        addr = h["address"]
        if not isinstance(addr, str) or not addr or len(addr) > 255 or any(c.isspace() or ord(c) < 32 for c in addr):
            raise ParamError("%s.address: must be a host name or address, got %r" % (where, str(addr)[:80]))
        port = number(lo=1, hi=65535, integer=True)("hosts.%s.port" % name, h["port"])
        parked = h.get("parked", "off")
        if parked not in ("asleep", "off"):
            raise ParamError("%s.parked: must be asleep or off, got %r" % (where, str(parked)[:40]))
        out[name] = {"address": addr, "port": int(port), "parked": parked}
    return out


def scontrol(argv, env, timeout=30):
    """(rc, stdout, stderr) of one scontrol call, bounded."""
    try:
        proc = subprocess.run(argv, capture_output=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %d s" % timeout
    except OSError as exc:
        return 127, "", str(exc)
    out = proc.stdout[:OUTPUT_LIMIT].decode("utf-8", "replace")
    return proc.returncode, out, proc.stderr[:4096].decode("utf-8", "replace").strip()


def read_states(cmd, env):
    rc, out, err = scontrol([cmd, "show", "node", "-o"], env)
    if rc != 0:
        raise SlurmError("scontrol show node failed (rc=%d): %s" % (rc, err or out.strip()[:500]))
    return parse_nodes(out)


def host_ok(action, h):
    """The host's own say: silent for a power_down, its SSH greeting for a power_up."""
    greets = answers(h["address"], h["port"], "^SSH-", 3.0, connect_timeout=1.0)
    return not greets if action == "power_down" else greets


def result(name, action, ok, state, st, t0, msg):
    return {"host": name, "action": "down" if action == "power_down" else "up", "ok": ok, "method": "slurm",
            "state": state, "slurm_state": describe(st) if st else "", "attempts": [],
            "elapsed_s": round(time.monotonic() - t0, 3), "msg": msg}


def main():
    module = ansible_module(
        argument_spec=dict(
            action=dict(type="str", required=True, choices=["power_down", "power_up"]),
            nodes=dict(type="list", elements="str", required=True),
            hosts=dict(type="raw", default={}),
            parked=dict(type="dict", default={}),
            include_busy=dict(type="bool", default=False),
            scontrol=dict(type="path", default="/usr/bin/scontrol"),
            conf_file=dict(type="path"),
            timeout=dict(type="float", default=600.0),
            poll=dict(type="float", default=2.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    action = p["action"]
    nodes = hostlist.unique(p["nodes"])
    if not nodes:
        module.fail_json(msg="option nodes: no node (Slurm node names)")
    try:
        hosts = check_hosts(hosts_by_name(p["hosts"], p["parked"]), set(nodes))
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    if not os.path.isfile(p["scontrol"]) or not os.access(p["scontrol"], os.X_OK):
        module.fail_json(msg="option scontrol: %s is not an executable file (Debian: slurm-client)" % p["scontrol"])
    env = dict(os.environ, LC_ALL="C")
    if p["conf_file"]:
        env["SLURM_CONF"] = p["conf_file"]
    t0 = time.monotonic()
    try:
        states = read_states(p["scontrol"], env)
        ask, wait, done, skipped = decide(action, nodes, states, p["include_busy"])
    except SlurmError as exc:
        module.fail_json(msg="%s (nothing was asked)" % exc)
    up_state = "on" if action == "power_up" else None

    def parked_state(name):
        return up_state or hosts.get(name, {}).get("parked", "off")
    out = {}
    for name in done:
        out[name] = result(name, action, True, parked_state(name), states[name], t0,
                           "already %s in Slurm" % ("powered down" if action == "power_down" else "up"))
    for name, why in skipped.items():
        out[name] = result(name, action, False, "on" if action == "power_down" else "off", states[name], t0, why)
    command = update_argv(p["scontrol"], action, ask, hostlist.compress) if ask else []
    if module.check_mode:
        for name in ask + wait:
            out[name] = result(name, action, True, parked_state(name), states[name], t0,
                               "check mode: would ask Slurm" if name in ask else "check mode: already asked of Slurm")
        module.exit_json(changed=bool(ask), hosts=out, asked=[], command=command,
                         ok=[n for n in nodes if out[n]["ok"]], not_ok=[n for n in nodes if not out[n]["ok"]])
    if ask:
        rc, sout, err = scontrol(command, env)
        if rc != 0:
            module.fail_json(msg="scontrol update failed (rc=%d): %s (nothing else was asked)" % (rc, err or sout.strip()[:500]),
                             hosts=out, asked=[], command=command)
    pending = set(ask + wait)
    deadline = t0 + p["timeout"]
    last = dict((n, states[n]) for n in pending)
    last_error = ""
    while pending:
        try:
            states = read_states(p["scontrol"], env)
        except SlurmError as exc:
            states = None
            last_error = str(exc)
        for name in sorted(pending):
            st = (states or {}).get(name)
            if st is None:
                continue
            last[name] = st
            got = reached(action, st)
            if isinstance(got, str):
                out[name] = result(name, action, False, "on" if action == "power_down" else "off", st, t0, got)
                pending.discard(name)
            elif got and (name not in hosts or host_ok(action, hosts[name])):
                out[name] = result(name, action, True, parked_state(name), st, t0,
                                   "powered %s by Slurm%s" % ("down" if action == "power_down" else "up",
                                                              ", verified on the host" if name in hosts else ""))
                pending.discard(name)
        if not pending:
            break
        if time.monotonic() >= deadline:
            for name in sorted(pending):
                st = last[name]
                host = ""
                if name in hosts and reached(action, st) is True:
                    host = ": Slurm shows it %s but the host %s" % (
                        describe(st), "still answers" if action == "power_down" else "does not answer")
                elif states is None:
                    host = ": %s" % last_error
                out[name] = result(name, action, False, "on" if action == "power_down" else "off", st, t0,
                                   "not %s within %g s (Slurm: %s)%s" % (
                                       "powered down" if action == "power_down" else "up", p["timeout"], describe(st), host))
            break
        time.sleep(min(p["poll"], max(0.0, deadline - time.monotonic())))
    not_ok = sorted(n for n, r in out.items() if not r["ok"])
    module.exit_json(changed=bool(ask), hosts=out, asked=ask, command=command,
                     ok=[n for n in nodes if n not in not_ok], not_ok=not_ok)


if __name__ == "__main__":
    main()
