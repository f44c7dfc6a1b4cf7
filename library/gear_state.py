#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_state
short_description: Keep a gear shift's state file true while the shift runs, batch by batch
description:
  - Internal. A step of the gear_shift role (its wake and down phases, once per batch), documented
    for those who compose the role's phases themselves; a playbook of one's own calls
    C(fleetnap.power.gear_shift).
  - Runs on the controller (C(delegate_to=localhost), C(run_once=true)) once per batch of a gear
    shift and updates C(hosts.NAME.state) in the state file that M(gear_shift_plan) reads as the
    previous shift's result. The final record of the shift replaces the whole file.
  - Without it the state file changed only at the end, so after an interrupted shift the hosts it
    had put down were still "expected on", and the next shift took them for failed hosts
    (refused or degraded) instead of converging.
  - V(before_down) marks the batch's hosts that the plan puts down as C(asleep) (suspend) or
    C(off) (BMC) before anything is powered down (write-ahead). A host so marked that is still
    up is only "not expected to answer", which a later shift corrects by observing it.
  - V(after_down) keeps that mark for hosts that went down and puts C(on) back for hosts whose
    down failed while they stayed up. V(after_up) marks C(on) the hosts whose wake was verified.
  - The stop rule of a shift. With O(lock_file), every failure of this shift's batches (a wake that
    failed, a host that could not be parked, a drain hook that failed) is kept in the file's
    C(in_progress) (C(shift), C(failed)); V(before_down) then answers RV(stop) with the reason and
    writes nothing when any is there, so that no batch goes lower after a failure. The shift is
    the one that holds the lock (its owner's PID, start time and when it took the lock), so the
    failures of another shift (one killed before its record) never stop this one.
  - The shift's journal. With O(lock_file), V(after_up) and V(after_down) also write every result of the batch
    (a failure winning per host and action) into C(in_progress.actions), so the shift's phases pass their
    results on in this file, not in facts; M(gear_record) reads them back from it. V(query) writes nothing and
    returns this shift's RV(actions) and, as V(before_down) would, RV(stop) and RV(reason).
  - Hosts the event does not concern are left as they are. The file is written atomically (temp
    file, fsync, rename, directory fsync); the gear-shift lock makes this the only writer.
  - The file it reads must be a regular file in its directory (a link out of it, a FIFO, a device
    or a file over 16 MiB is refused) holding strict JSON (no NaN, Infinity or a number beyond a
    double such as C(1e999), nesting at most 64 deep, no lone surrogates); the error names the
    file and what is wrong with it, and nothing is written.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  path:
    description: The state file (JSON with a C(hosts) object). Created when missing.
    type: path
    required: true
  event:
    description: What just happened to the batch (see the description).
    type: str
    choices: [before_down, after_down, after_up, query]
    required: true
  hosts:
    description: The batch (inventory host names).
    type: list
    elements: str
    required: true
  rows:
    description: M(gear_shift_plan)'s C(rows) (C(host), C(action), C(method)); needed by V(before_down).
    type: list
    elements: dict
    default: []
  results:
    description:
      - The hosts' results after the action (C(host), C(ok), C(state) as gear_member reports them);
        needed by V(after_down) and V(after_up). A host without a result is left as it is.
    type: list
    elements: dict
    default: []
  lock_file:
    description:
      - The gear-shift lock file (the C(path) of M(shift_lock)) held by the running shift; its owner is the
        shift's identity. The failures this call keeps and the ones V(before_down) stops on are this shift's only.
      - Without it, or without a lock there, no failure is kept and nothing stops.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - Reports what would change; writes nothing.
  diff_mode:
    support: full
    details:
      - The hosts' states before and after.
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Mark the batch's hosts going down (before anything is powered down)
  gear_state:
    path: "{{ gear_shift_state_file }}"
    event: before_down
    hosts: "{{ ansible_play_batch }}"
    rows: "{{ __gear_shift_plan.rows }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
actions:
  description: With V(query), this shift's actions in the journal (the hosts' results, a failure winning per host and action).
  returned: with event query
  type: list
  elements: dict
  sample: [{host: lab2, action: up, ok: true, state: "on", method: wol}]
updated:
  description: Host -> the state written for it by this call.
  returned: always
  type: dict
  sample: {lab2: asleep, lab5: asleep}
stop:
  description:
    - With V(before_down) or V(query) and O(lock_file), true when an earlier batch of this shift failed; then nothing was written
      and no host of this batch may be put down.
  returned: always
  type: bool
reason:
  description: Why RV(stop) is true (each failed host and what failed); empty otherwise.
  returned: always
  type: str
  sample: "lab2: up failed (did not come back: wol: did not become answering within 90 s)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fileio, journal
from ansible.module_utils.fleetnap.gearshift import DOWN_METHODS
from ansible.module_utils.fleetnap.validate import ParamError, check_params, path

HOST_NAME = journal.HOST_NAME
CHECKS = {"path": path(), "lock_file": path()}
MAX_HOSTS = journal.MAX_HOSTS
STATES = ("on", "asleep", "off", "unknown")
ROW_ACTIONS = ("none", "up", "down")


def _check_lists(p):
    if len(p["hosts"]) > MAX_HOSTS:
        raise ParamError("option hosts: at most %d hosts, got %d" % (MAX_HOSTS, len(p["hosts"])))
    for i, h in enumerate(p["hosts"]):
        HOST_NAME("hosts[%d]" % i, h)
    for opt in ("rows", "results"):
        if len(p[opt]) > MAX_HOSTS:
            raise ParamError("option %s: at most %d entries, got %d" % (opt, MAX_HOSTS, len(p[opt])))
        for i, item in enumerate(p[opt]):
            if not isinstance(item.get("host"), str):
                raise ParamError("option %s[%d]: needs a host name (host), got %r" % (opt, i, item.get("host")))
    for i, row in enumerate(p["rows"]):
        # a plan's row: its action, and a down row's method (an unknown one would be taken as off)
        if row.get("action") not in ROW_ACTIONS:
            raise ParamError("option rows[%d].action: must be one of %s (gear_shift_plan's rows), got %r"
                             % (i, ", ".join(ROW_ACTIONS), row.get("action")))
        if row["action"] == "down" and row.get("method") is not None and row["method"] not in DOWN_METHODS:
            raise ParamError("option rows[%d].method: a down row's method must be one of %s, got %r"
                             % (i, ", ".join(DOWN_METHODS), row["method"]))
    if p["event"] == "before_down" and not p["rows"] and p["hosts"]:
        raise ParamError("option rows: event before_down needs the plan's rows")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            event=dict(type="str", required=True, choices=["before_down", "after_down", "after_up", "query"]),
            hosts=dict(type="list", elements="str", required=True),
            rows=dict(type="list", elements="dict", default=[]),
            results=dict(type="list", elements="dict", default=[]),
            lock_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    try:
        _check_lists(p)
        real = p["path"]
        doc = journal.read(real)
        shift = journal.shift_of(p["lock_file"])
    except ParamError as exc:
        module.fail_json(msg=str(exc))

    if p["event"] in ("before_down", "query"):
        reason = journal.stop_reason(doc, shift)
        if reason or p["event"] == "query":
            module.exit_json(changed=False, updated={}, stop=bool(reason), reason=reason,
                             actions=journal.actions(doc, shift), diff={"before": {"hosts": {}}, "after": {"hosts": {}}})
    want = journal.batch_states(p["event"], p["hosts"], p["rows"], p["results"])
    try:
        written, updated, diff = journal.note_event(real, doc, shift, p["event"], want, p["results"], module,
                                                    check_mode=module.check_mode)
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    except (fileio.HostFsError, OSError, ValueError) as exc:
        module.fail_json(msg="could not write the state file %s: %s (it is as it was)" % (real, exc))
    if not written:
        module.exit_json(changed=bool(updated), updated=updated, diff=diff, stop=False, reason="")
    module.exit_json(changed=True, updated=updated, diff=diff, stop=False, reason="")


if __name__ == "__main__":
    main()
