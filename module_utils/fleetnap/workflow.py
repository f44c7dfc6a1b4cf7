# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift laid out as an AWX workflow: a plan job, the waves as slices on execution nodes
that share no disk, a record job. AWX moves state between a workflow's jobs one way only: what a
job publishes with set_stats (its artifacts) becomes the extra variables of the jobs after it,
merged shallowly (a key published by two parallel jobs keeps one of them). So the shift's journal
travels as two kinds of artifact:

- the plan job publishes ``gear_shift_journal``: the shift's token (its lock's lease), the plan and
  the observation it was made from;
- each slice takes the plan for its own hosts (begun as its own local journal, where the wake and
  down phases write their results and read the stop rule as in a one-controller shift) and
  publishes ``gear_shift_slice_NAME``: its hosts, the actions and failures its journal holds;
- the record job checks every slice belongs to this shift and that no host is in two, writes
  their actions into the plan job's journal (the state file beside the lease) and records.

Every artifact arrives as an extra variable: anything could be in it, so each is checked here,
field by field, before it is used. Standard library only."""

from __future__ import annotations

import json
import math
import re

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.gearrecord import RESULTS
from ansible.module_utils.fleetnap.shiftlock import TOKEN
from ansible.module_utils.fleetnap.validate import ParamError

VERSION = 1
PLAN_ARTIFACT = "gear_shift_journal"
SLICE_PREFIX = "gear_shift_slice_"
SLICE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
MAX_HOSTS = 100000

# What a plan artifact keeps of gear_shift_plan's result (not Ansible's keys, not its table).
PLAN_FIELDS = ("gear", "groups_on", "groups_off", "requested", "current_gear", "date", "result", "reason",
               "unhealthy", "rows", "up_hosts", "down_hosts", "back_hosts", "back_actions", "wake_phase_hosts",
               "wake_batches", "down_batches", "power_w", "down_methods", "parked_states", "direction", "counts",
               "power_rows", "bmc_check", "step_hosts")
HOST_LISTS = ("up_hosts", "down_hosts", "back_hosts", "wake_phase_hosts", "unhealthy", "step_hosts")
HOST_MAPS = ("power_w", "down_methods", "parked_states")
DOWN_METHODS = ("suspend", "soft", "off")
PARKED = ("asleep", "off")


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_hosts(value, where):
    """A list of distinct host names."""
    _names(value, where)
    if len(set(value)) != len(value):
        raise ParamError("%s: names a host twice" % where)
    return value


def _names(value, where):
    named = isinstance(value, list) and len(value) <= MAX_HOSTS
    if not named or not all(isinstance(h, str) and 0 < len(h) <= 255 for h in value):
        raise ParamError("%s: must be a list of host names, got %s" % (where, repr(value)[:80]))
    return value


def _dict(value, where):
    if not isinstance(value, dict):
        raise ParamError("%s: must be an object, got %s" % (where, repr(value)[:80]))
    return value


def _text(value, where, limit=200):
    if not isinstance(value, str) or len(value) > limit:
        raise ParamError("%s: must be text of at most %d characters, got %s" % (where, limit, repr(value)[:80]))
    return value


def check_plan(plan, where):
    """gear_shift_plan's result as a plan artifact carries it: every field the phases read, of the
    shape the module returns; every host named anywhere is a host of its rows. Returns the plan
    with only PLAN_FIELDS."""
    _dict(plan, where)
    missing = [k for k in PLAN_FIELDS if k not in plan]
    if missing:
        raise ParamError("%s: not a plan gear_shift_plan returned (missing: %s)" % (where, ", ".join(missing)))
    if not _whole(plan["gear"]) or not 0 <= plan["gear"] <= 1000:
        raise ParamError("%s.gear: must be a whole number in 0..1000, got %s" % (where, repr(plan["gear"])[:40]))
    for key in ("groups_on", "groups_off"):
        if not isinstance(plan[key], list) or not all(_whole(g) for g in plan[key]):
            raise ParamError("%s.%s: must be a list of group numbers" % (where, key))
    if plan["result"] not in RESULTS:
        raise ParamError("%s.result: must be one of %s, got %s" % (where, ", ".join(RESULTS), repr(plan["result"])[:40]))
    rows = plan["rows"]
    if not isinstance(rows, list) or len(rows) > MAX_HOSTS or \
            not all(isinstance(r, dict) and isinstance(r.get("host"), str) for r in rows):
        raise ParamError("%s.rows: must be a list of rows, each with a host name" % where)
    known = set()
    for i, r in enumerate(rows):
        if r["host"] in known:
            raise ParamError("%s.rows[%d]: host %s has two rows" % (where, i, r["host"]))
        known.add(r["host"])
    for key in HOST_LISTS:
        _unknown(_names(plan[key], "%s.%s" % (where, key)), known, "%s.%s" % (where, key))
    for key in ("wake_batches", "down_batches"):
        batches = plan[key]
        if not isinstance(batches, list):
            raise ParamError("%s.%s: must be a list of batches (lists of host names)" % (where, key))
        for i, batch in enumerate(batches):
            _unknown(_names(batch, "%s.%s[%d]" % (where, key, i)), known, "%s.%s[%d]" % (where, key, i))
    backs = plan["back_actions"]
    if not isinstance(backs, list) or not all(isinstance(a, dict) and isinstance(a.get("host"), str) for a in backs):
        raise ParamError("%s.back_actions: must be a list of results, each with a host name" % where)
    _unknown([a["host"] for a in backs], known, "%s.back_actions" % where)
    for key in HOST_MAPS:
        _unknown(list(_dict(plan[key], "%s.%s" % (where, key))), known, "%s.%s" % (where, key))
    for h, m in plan["down_methods"].items():
        if m not in DOWN_METHODS:
            raise ParamError("%s.down_methods.%s: must be one of %s, got %s"
                             % (where, h, ", ".join(DOWN_METHODS), repr(m)[:40]))
    for h, s in plan["parked_states"].items():
        if s not in PARKED:
            raise ParamError("%s.parked_states.%s: must be one of %s, got %s"
                             % (where, h, ", ".join(PARKED), repr(s)[:40]))
    for key in ("requested", "counts", "bmc_check"):
        _dict(plan[key], "%s.%s" % (where, key))
    if not isinstance(plan["power_rows"], list) or not all(isinstance(r, dict) and r.get("host") in known
                                                           for r in plan["power_rows"]):
        raise ParamError("%s.power_rows: must be a list of rows, each of a host of the plan's rows" % where)
    return dict((k, plan[k]) for k in PLAN_FIELDS)


def _unknown(hosts, known, where):
    for h in hosts:
        if h not in known:
            raise ParamError("%s: host %s is not in the plan's rows" % (where, h))


def check_observation(obs, hosts, where):
    """host -> what gear_observe saw of it, for every host of the plan (and no other)."""
    _dict(obs, where)
    for h, seen in obs.items():
        if h not in hosts:
            raise ParamError("%s: host %s is not in the plan's rows" % (where, h))
        _dict(seen, "%s.%s" % (where, h))
    absent = sorted(set(hosts) - set(obs))
    if absent:
        raise ParamError("%s: no observation of %s" % (where, ", ".join(absent[:10])))
    return obs


def plan_artifact(token, plan, observation, started, started_epoch):
    """What the plan job publishes (set_stats ``gear_shift_journal``), checked as a slice will check it."""
    art = {"version": VERSION, "token": token, "started": started, "started_epoch": started_epoch,
           "plan": plan, "observation": observation}
    return check_plan_artifact(art, "the plan job's journal")


def check_plan_artifact(art, where="option journal"):
    """The plan job's artifact, every field checked. ParamError naming the field."""
    _dict(art, where)
    if art.get("version") != VERSION:
        raise ParamError("%s.version: must be %d (this fleetnap's workflow), got %s: the plan job ran another "
                         "fleetnap" % (where, VERSION, repr(art.get("version"))[:40]))
    token = art.get("token")
    if not isinstance(token, str) or not TOKEN.match(token):
        raise ParamError("%s.token: must be the plan job's lease token, got %s" % (where, repr(token)[:80]))
    _text(art.get("started"), where + ".started", 64)
    epoch = art.get("started_epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)) or not math.isfinite(epoch) or \
            not 0 <= epoch < 1e11:
        raise ParamError("%s.started_epoch: must be seconds since the epoch, got %s" % (where, repr(epoch)[:40]))
    plan = check_plan(art.get("plan"), where + ".plan")
    hosts = [r["host"] for r in plan["rows"]]
    obs = check_observation(art.get("observation"), set(hosts), where + ".observation")
    out = {"version": VERSION, "token": token, "started": art["started"], "started_epoch": float(epoch),
           "plan": plan, "observation": obs}
    if len(json.dumps(out, allow_nan=False)) > fileio.RECORD:
        raise ParamError("%s: more than %d bytes" % (where, fileio.RECORD))
    return out


def slice_plan(plan, hosts):
    """The plan for one slice's hosts: every list, batch and map of the plan kept for those hosts
    only (an empty batch dropped), the counts counted again. ParamError naming a host of the
    slice the plan does not know (the plan job ran over other targets)."""
    known = set(r["host"] for r in plan["rows"])
    unknown = [h for h in hosts if h not in known]
    if unknown:
        raise ParamError("option hosts: %s not in the plan (the plan job planned other targets than this slice's "
                         "inventory holds)" % ", ".join(sorted(unknown)[:10]))
    mine = set(hosts)
    out = dict(plan)
    out["rows"] = [r for r in plan["rows"] if r["host"] in mine]
    out["power_rows"] = [r for r in plan["power_rows"] if r["host"] in mine]
    for key in HOST_LISTS:
        out[key] = [h for h in plan[key] if h in mine]
    for key in ("wake_batches", "down_batches"):
        out[key] = [b for b in ([h for h in batch if h in mine] for batch in plan[key]) if b]
    out["back_actions"] = [a for a in plan["back_actions"] if a["host"] in mine]
    for key in HOST_MAPS:
        out[key] = dict((h, v) for h, v in plan[key].items() if h in mine)
    counts = {"up": 0, "down": 0, "none": 0}
    for r in out["rows"]:
        action = r.get("action") if r.get("action") in counts else "none"
        counts[action] += 1
    out["counts"] = dict(plan["counts"], **counts)
    return out


def slice_artifact(token, name, hosts, actions, failed):
    """What a slice publishes (set_stats ``gear_shift_slice_NAME``)."""
    return {"version": VERSION, "token": token, "slice": name, "hosts": list(hosts), "actions": actions,
            "failed": failed}


def check_slice_artifact(art, where):
    _dict(art, where)
    if art.get("version") != VERSION:
        raise ParamError("%s.version: must be %d, got %s" % (where, VERSION, repr(art.get("version"))[:40]))
    token = art.get("token")
    if not isinstance(token, str) or not TOKEN.match(token):
        raise ParamError("%s.token: must be a lease token, got %s" % (where, repr(token)[:80]))
    name = art.get("slice")
    if not isinstance(name, str) or not SLICE_NAME.match(name):
        raise ParamError("%s.slice: must be a slice name (letters, digits, _; at most 64), got %s"
                         % (where, repr(name)[:80]))
    hosts = set(_names(art.get("hosts"), where + ".hosts"))
    for key in ("actions", "failed"):
        items = art.get(key)
        if not isinstance(items, list) or len(items) > MAX_HOSTS * 4 or \
                not all(isinstance(a, dict) and isinstance(a.get("host"), str) for a in items):
            raise ParamError("%s.%s: must be a list of results, each with a host name" % (where, key))
        for a in items:
            if a["host"] not in hosts:
                raise ParamError("%s.%s: host %s is not one of the slice's hosts" % (where, key, a["host"]))
            if key == "actions" and not isinstance(a.get("ok"), bool):
                raise ParamError("%s.actions: the result of %s has no ok (true or false)" % (where, a["host"]))
    return art


def merge_slices(plan_art, slices):
    """The slices' results for the record: {key: slice artifact} as AWX hands them on (one extra
    variable per slice). Each must be of this shift (its token) and hold only hosts of the plan,
    no host in two slices. Returns (by_slice, missing): slice name -> its actions, in the order of
    the keys, and the hosts the plan acts on that no slice reported (a slice that failed before it
    published: the observation after the shift says where they are)."""
    _dict(slices, "option slices")
    known = set(r["host"] for r in plan_art["plan"]["rows"])
    owner, by_slice = {}, {}
    for key in sorted(slices):
        where = "option slices.%s" % key
        art = check_slice_artifact(slices[key], where)
        if art["token"] != plan_art["token"]:
            raise ParamError("%s: belongs to another shift (lease %s; this shift's is %s): a slice of an earlier "
                             "workflow run" % (where, art["token"], plan_art["token"]))
        if art["slice"] in by_slice:
            raise ParamError("%s: a second slice named %s" % (where, art["slice"]))
        for h in art["hosts"]:
            if h not in known:
                raise ParamError("%s.hosts: %s is not in the plan" % (where, h))
            if h in owner:
                raise ParamError("%s.hosts: %s is also a host of slice %s: slices must have disjoint hosts (AWX job "
                                 "slicing gives them)" % (where, h, owner[h]))
            owner[h] = art["slice"]
        by_slice[art["slice"]] = art["actions"]
    plan = plan_art["plan"]
    acting = plan["up_hosts"] + plan["down_hosts"] + plan["back_hosts"]
    missing = [h for h in acting if h not in owner]
    return by_slice, missing
