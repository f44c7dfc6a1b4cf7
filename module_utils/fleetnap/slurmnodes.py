# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift on a Slurm cluster goes through Slurm (gear_shift_scheduler: slurm): the nodes
are asked of slurmctld (``scontrol update nodename=... state=POWER_DOWN_ASAP`` / ``POWER_UP``),
Slurm drains them and calls its SuspendProgram / ResumeProgram (fleetnap's, role slurm_power),
and the shift is verified by Slurm's node states and by the hosts themselves (silent / greeting).
fleetnap never parks a node Slurm counts as up: a node with jobs is not asked unless the caller
says so (then Slurm drains it first: POWER_DOWN_ASAP), and a node Slurm has DOWN is left alone.

Reading: ``scontrol show node -o`` (one line per node): ``NodeName=``, ``State=BASE+FLAG+...``,
``Reason=``. Deciding: :func:`decide`. Reaching: :func:`reached`. Standard library only.
"""

from __future__ import annotations

import re

ACTIONS = ("power_down", "power_up")
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
MAX_NODES = 10000
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")
UP = ("IDLE",) + BUSY
# flags: Slurm 22.05's names (slurm_common.c node_state_string_complete)
POWERED_DOWN, POWERING_DOWN, POWERING_UP = "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP"
ASKED_DOWN = ("POWER_DOWN", "POWERING_DOWN")
_STATE = re.compile(r"\A[A-Z_]+(\+[A-Z_]+)*\*?\Z")


class SlurmError(Exception):
    """What Slurm answered cannot be used (the message says which node or line and why)."""


def parse_nodes(text, limit=MAX_NODES):
    """node -> {"state": BASE, "flags": [FLAG, ...], "reason": str} from ``scontrol show node -o``.
    A line without a node name or a state, or with a state that is not one, raises SlurmError."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
        state = re.search(r"(?:^|\s)State=(\S+)", line)
        if not name or not state:
            raise SlurmError("scontrol show node line %d has no NodeName= or State=: %r" % (n, line[:200]))
        if not NODE.match(name.group(1)):
            raise SlurmError("scontrol show node line %d: %r is not a node name" % (n, name.group(1)[:80]))
        if not _STATE.match(state.group(1)):
            raise SlurmError("scontrol show node line %d: node %s has state %r, not one Slurm writes"
                             % (n, name.group(1), state.group(1)[:80]))
        parts = state.group(1).rstrip("*").split("+")
        reason = re.search(r"(?:^|\s)Reason=(.*)$", line)
        out[name.group(1)] = {"state": parts[0], "flags": parts[1:],
                              "reason": " ".join(reason.group(1).split())[:300] if reason else ""}
        if len(out) > limit:
            raise SlurmError("scontrol show node lists more than %d nodes" % limit)
    return out


def describe(st):
    return "+".join([st["state"]] + st["flags"]) + (" (%s)" % st["reason"] if st["reason"] else "")


def decide(action, nodes, states, include_busy=False):
    """(ask, wait, done, skipped): the nodes to ask slurmctld for, those already on their way (asked
    before), those already in the asked state, and node -> why a node is left alone. A node Slurm
    does not know raises SlurmError before anything is asked."""
    if action not in ACTIONS:
        raise SlurmError("unknown action %r" % (action,))
    unknown = [n for n in nodes if n not in states]
    if unknown:
        raise SlurmError("Slurm knows no node %s (scontrol show node lists %d)" % (", ".join(unknown[:20]), len(states)))
    ask, wait, done, skipped = [], [], [], {}
    for name in nodes:
        st = states[name]
        flags = set(st["flags"])
        if action == "power_down":
            if POWERED_DOWN in flags and POWERING_UP not in flags:
                done.append(name)
            elif flags & set(ASKED_DOWN):
                wait.append(name)
            elif st["state"] not in UP or "DRAIN" in flags or POWERING_UP in flags:
                skipped[name] = "Slurm has it %s: not asked to power down" % describe(st)
            elif st["state"] in BUSY and not include_busy:
                skipped[name] = "Slurm runs jobs on it (%s): not asked to power down" % describe(st)
            else:
                ask.append(name)
        else:
            if POWERING_UP in flags:
                wait.append(name)
            elif POWERED_DOWN in flags or flags & set(ASKED_DOWN):
                ask.append(name)
            elif st["state"] in UP:
                done.append(name)
            else:
                skipped[name] = "Slurm has it %s: not asked to power up" % describe(st)
    return ask, wait, done, skipped


def reached(action, st):
    """True when the node shows the asked state, False while it is on its way, and the reason
    (text) when Slurm shows it will not get there (DOWN, or powered down again while powering up)."""
    flags = set(st["flags"])
    if action == "power_down":
        if POWERED_DOWN in flags and not flags & {POWERING_DOWN, POWERING_UP}:
            return True
        if st["state"] in ("DOWN", "FAIL") and not flags & set(ASKED_DOWN + (POWERED_DOWN,)):
            return "Slurm has it %s" % describe(st)
        return False
    if flags & {POWERED_DOWN, POWERING_UP, POWERING_DOWN, "POWER_UP"}:
        if st["state"] in ("DOWN", "FAIL"):
            return "Slurm has it %s" % describe(st)
        return False
    if st["state"] in UP:
        return True
    if st["state"] in ("DOWN", "FAIL"):
        return "Slurm has it %s" % describe(st)
    return False


def update_argv(scontrol, action, nodes, compress):
    state = "POWER_DOWN_ASAP" if action == "power_down" else "POWER_UP"
    return [scontrol, "update", "nodename=%s" % compress(nodes), "state=%s" % state]
