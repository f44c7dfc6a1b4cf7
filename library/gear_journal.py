#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gear_journal
short_description: Carry a gear shift's journal between the jobs of an AWX workflow
description:
  - Internal. A step of the C(fleetnap.power.gear_shift) role (its AWX workflow entry points C(workflow_plan),
    C(workflow_slice), C(workflow_slice_finish) and C(workflow_record), which the playbooks
    C(fleetnap.power.gear_shift_workflow_plan), C(fleetnap.power.gear_shift_workflow_slice) and
    C(fleetnap.power.gear_shift_workflow_record) run), documented for those who compose them.
  - A shift for thousands of hosts runs as an AWX workflow - a plan job, the waves as slices on
    execution nodes that share no disk, a record job. AWX hands what a job publishes with
    C(set_stats) to the jobs after it as extra variables, merged shallowly; this module makes and
    checks what travels that way.
  - V(publish_plan) (the plan job) returns RV(artifact), the plan job's journal - the token of its lock's
    lease, the plan and the observation - to publish as C(gear_shift_journal). Writes nothing.
  - V(take_plan) (a slice) checks O(journal) field by field, cuts the plan down to the slice's O(hosts)
    (a host the plan does not know is refused), begins the slice's own journal with it in O(state_file)
    (under the slice's own lock, O(lock_file)), and returns RV(plan), RV(observation), RV(started),
    RV(started_epoch) and RV(token) for the wake and down phases.
  - V(publish_slice) (a slice, last) reads the actions and failures its journal holds and returns
    RV(artifact) to publish as C(gear_shift_slice_NAME) (one key per slice, since AWX's shallow merge
    would keep only one of several slices publishing one key). Writes nothing.
  - V(take_slices) (the record job) checks O(journal) and every artifact of O(slices) (of this shift's lease,
    hosts of the plan, no host in two slices), and writes their actions and failures into the plan job's
    journal in O(state_file) (beside the lease, O(lock_file), which must be this shift's - renew it first
    with M(shift_lock) and the token). A slice already taken is not written twice. Returns RV(plan),
    RV(observation), RV(started), RV(started_epoch), RV(stop), RV(reason) and RV(missing) for the record.
  - Every file is read through fleetnap's file layer (a regular file in its directory, no link out of it,
    bounded, strict JSON); the state file is written atomically.
version_added: "0.2.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  action:
    description: The workflow step (see the description).
    type: str
    choices: [publish_plan, take_plan, publish_slice, take_slices]
    required: true
  state_file:
    description:
      - The gear-shift state file holding the journal (the plan and record jobs' for V(take_slices), the slice's
        own for V(take_plan) and V(publish_slice)). Not used by V(publish_plan).
    type: path
  lock_file:
    description:
      - The gear-shift lock whose owner names the shift - the plan job's lease (V(publish_plan), V(take_slices)),
        the slice's own lock (V(take_plan), V(publish_slice)).
    type: path
    required: true
  plan:
    description: V(publish_plan) - M(gear_shift_plan)'s result.
    type: dict
  observation:
    description: V(publish_plan) - host -> what M(gear_observe) saw before the plan.
    type: dict
  started:
    description: V(publish_plan) - when the shift started (ISO 8601).
    type: str
  started_epoch:
    description: V(publish_plan) - when the shift started (seconds since the epoch).
    type: float
  journal:
    description: V(take_plan), V(take_slices) - the plan job's artifact (RV(artifact) of V(publish_plan)).
    type: dict
  hosts:
    description: V(take_plan), V(publish_slice) - the slice's hosts (its play's).
    type: list
    elements: str
  lease_id:
    description: V(publish_slice) - the shift's token (RV(token) of V(take_plan)).
    type: str
  slice:
    description: V(publish_slice) - the slice's name (letters, digits, C(_); at most 64).
    type: str
  slices:
    description: V(take_slices) - the slices' artifacts, by the extra variable each arrived as.
    type: dict
attributes:
  check_mode:
    support: full
    details:
      - V(take_plan) and V(take_slices) check and return what they would; neither writes the state file.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - Run it on the controller (C(delegate_to=localhost), C(run_once=true)).
"""

EXAMPLES = r"""
- name: The plan job publishes the journal (AWX hands it to the slices and the record job)
  gear_journal:
    action: publish_plan
    lock_file: /var/lib/fleetnap/gear/shift.lock
    plan: "{{ plan }}"
    observation: "{{ observation }}"
    started: "2026-11-29T10:00:00Z"
    started_epoch: 1795946400
  delegate_to: localhost
  run_once: true
  register: journal

- name: Publish it
  ansible.builtin.set_stats:
    data:
      gear_shift_journal: "{{ journal.artifact }}"
"""

RETURN = r"""
artifact:
  description:
    - V(publish_plan) - version, token, started, started_epoch, plan, observation.
    - V(publish_slice) - version, token, slice, hosts, actions, failed.
  returned: with publish_plan and publish_slice
  type: dict
plan:
  description: The plan (V(take_plan) - cut down to the slice's hosts; V(take_slices) - the whole plan).
  returned: with take_plan and take_slices
  type: dict
observation:
  description: Host -> what was seen before the plan (V(take_plan) - the slice's hosts).
  returned: with take_plan and take_slices
  type: dict
started:
  description: When the shift started (the plan job's).
  returned: with take_plan and take_slices
  type: str
started_epoch:
  description: When the shift started, seconds since the epoch.
  returned: with take_plan and take_slices
  type: float
token:
  description: The shift's lease token.
  returned: with take_plan and take_slices
  type: str
slices:
  description: The slices taken, by name, in order.
  returned: with take_slices
  type: list
  elements: str
missing:
  description: Hosts the plan acts on that no slice reported (a slice that failed before it published).
  returned: with take_slices
  type: list
  elements: str
stop:
  description: Whether any action of the shift failed (the journal's failures, the slices' included).
  returned: with take_slices
  type: bool
reason:
  description: The failures, one per host and action (empty when none) - the whole shift's (V(take_slices)) or the slice's
    (V(publish_slice)).
  returned: with publish_slice and take_slices
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import journal, shiftlock, workflow
from ansible.module_utils.fleetnap.fileio import HostFsError
from ansible.module_utils.fleetnap.validate import ParamError, check_params, path, text

CHECKS = {"state_file": path(), "lock_file": path(), "started": text(max_len=64)}
# Stands in for the lease's token while publish_plan's inputs are checked (the longest a token is,
# so the artifact's size is checked as it will be).
UNREAD_TOKEN = "0" * 64
NEEDS = {
    "publish_plan": ("plan", "observation", "started", "started_epoch"),
    "take_plan": ("state_file", "journal", "hosts"),
    "publish_slice": ("state_file", "hosts", "lease_id", "slice"),
    "take_slices": ("state_file", "journal", "slices"),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", required=True, choices=sorted(NEEDS)),
            state_file=dict(type="path"),
            lock_file=dict(type="path", required=True),
            plan=dict(type="dict"),
            observation=dict(type="dict"),
            started=dict(type="str"),
            started_epoch=dict(type="float"),
            journal=dict(type="dict"),
            hosts=dict(type="list", elements="str"),
            lease_id=dict(type="str"),
            slice=dict(type="str"),
            slices=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    absent = [k for k in NEEDS[p["action"]] if p[k] is None]
    if absent:
        module.fail_json(msg="option %s: needed with action=%s" % (", ".join(absent), p["action"]))
    try:
        if p["hosts"] is not None:
            workflow.check_hosts(p["hosts"], "option hosts")
        result = STEPS[p["action"]](module, p)
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    except (OSError, HostFsError) as exc:
        module.fail_json(msg="the state file %s could not be written: %s (it is as it was)" % (p["state_file"], exc))
    module.exit_json(**result)


def _lease(p, where):
    """The token of the lease that holds lock_file (the plan job's). ParamError otherwise."""
    shift = journal.shift_of(p["lock_file"])
    if not shift or not shift.startswith("lease/"):
        raise ParamError("option lock_file: %s is not held by a lease (%s): a workflow's %s needs the plan job's "
                         "lease (shift_lock with lease)" % (p["lock_file"], shift or "no lock", where))
    return shift[len("lease/"):]


def publish_plan(module, p):
    # the plan, the observation and the start, checked before the lock file is read (the lease's
    # token, not known yet, stands in), then the lease's own token in its place
    art = workflow.plan_artifact(UNREAD_TOKEN, p["plan"], p["observation"], p["started"], p["started_epoch"])
    token = _lease(p, "plan")
    if not shiftlock.TOKEN.match(token):
        raise ParamError("option lock_file: %s holds a lease token that is not one (%r): fix or remove the lock"
                         % (p["lock_file"], token[:80]))
    return {"changed": False, "artifact": dict(art, token=token)}


def take_plan(module, p):
    art = workflow.check_plan_artifact(p["journal"])
    plan = workflow.slice_plan(art["plan"], p["hosts"])
    shift = journal.shift_of(p["lock_file"])
    if not shift:
        raise ParamError("option lock_file: %s is not held: take the slice's own lock first (shift_lock)" % p["lock_file"])
    doc = journal.read(p["state_file"])
    begun = journal.progress_of(doc, shift).get("plan") is None     # a second call of the same slice: as it was
    if begun:
        journal.begin(doc, shift, plan, _now())
        if not module.check_mode:
            journal.write(p["state_file"], doc, module)
    mine = set(p["hosts"])
    return {"changed": begun and not module.check_mode, "plan": plan, "token": art["token"], "started": art["started"],
            "started_epoch": art["started_epoch"],
            "observation": dict((h, v) for h, v in art["observation"].items() if h in mine)}


def publish_slice(module, p):
    if not workflow.SLICE_NAME.match(p["slice"]):
        raise ParamError("option slice: must be letters, digits and _ (at most 64), got %r" % p["slice"][:80])
    if not shiftlock.TOKEN.fullmatch(p["lease_id"]):
        raise ParamError("option lease_id: must be the plan job's lease token (letters, digits, '.', '_', '-'; "
                         "at most 64, a letter or digit first), got %r" % p["lease_id"][:80])
    shift = journal.shift_of(p["lock_file"])
    doc = journal.read(p["state_file"])
    art = workflow.slice_artifact(p["lease_id"], p["slice"], p["hosts"], journal.actions(doc, shift),
                                  journal.failed(doc, shift))
    workflow.check_slice_artifact(art, "the slice's artifact")
    return {"changed": False, "artifact": art, "reason": journal.stop_reason(doc, shift)}


def take_slices(module, p):
    art = workflow.check_plan_artifact(p["journal"])
    by_slice, missing = workflow.merge_slices(art, p["slices"])     # the slices checked before the lock is read
    token = _lease(p, "record job")
    if token != art["token"]:
        raise ParamError("option lock_file: held by the lease %s, not this shift's %s: the plan job's lease expired "
                         "and another shift took the lock; nothing was written" % (token, art["token"]))
    names = list(by_slice)
    shift = "lease/" + token
    doc = journal.read(p["state_file"])
    progress = journal.progress_of(doc, shift)
    if progress.get("plan") is None:
        raise ParamError("state file %s holds no plan of the shift %s: run the record job where the plan job ran "
                         "(the same gear_shift_state_dir)" % (p["state_file"], shift))
    taken = [n for n in names if n not in (progress.get("slices") or [])]
    changed = bool(taken)
    if taken:
        journal.note_batch(doc, shift, [a for n in taken for a in by_slice[n]], _now())
        journal.progress_of(doc, shift)["slices"] = list(progress.get("slices") or []) + taken
        if not module.check_mode:
            journal.write(p["state_file"], doc, module)
    if missing:
        module.warn("no slice reported %d host(s) the plan acts on (%s): the observation after the shift says where "
                    "they are" % (len(missing), ", ".join(missing[:10])))
    reason = journal.stop_reason(doc, shift)
    return {"changed": changed and not module.check_mode, "plan": art["plan"], "observation": art["observation"],
            "started": art["started"], "started_epoch": art["started_epoch"], "token": token, "slices": names,
            "missing": missing, "stop": bool(reason), "reason": reason}


def _now():
    return journal.stamp(time.time())


STEPS = {"publish_plan": publish_plan, "take_plan": take_plan, "publish_slice": publish_slice,
         "take_slices": take_slices}


if __name__ == "__main__":
    main()
