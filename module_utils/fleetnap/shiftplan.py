# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift's plan as M(gear_shift_plan) and M(gear_shift_prepare) make it from an
observation: their common options (argument spec and checks), the plan with its batches, BMC
check and step hosts, and the plan written into the shift's journal. Standard library only."""

from __future__ import annotations

import time
from datetime import date as dt_date

from ansible.module_utils.fleetnap import journal
from ansible.module_utils.fleetnap.gearshift import ShiftError, batch_count, batches, bmc_check, plan_from
from ansible.module_utils.fleetnap.observe import EARLY_WAKE_MAX_WINDOW_S
from ansible.module_utils.fleetnap.validate import all_of, items, number, numbers, path, text

CHECKS = {
    "replicas": number(lo=1, hi=100, integer=True),
    "gmin": number(lo=1, hi=100, integer=True),
    "gear": number(lo=0, hi=100, integer=True),       # within [gmin, replicas]: checked by the plan
    "groups_on": all_of(items(100), numbers(lo=1, hi=100, integer=True)),
    "date": text(max_len=32),
    "state_file": path(),
    "resume_dir": path(),
    "park_off_after_h": number(lo=0, lo_open=True, hi=24 * 366),
    "batch_size": text(max_len=8),
    "wake_batch_size": text(max_len=8),
    "lock_file": path(),
}


def options():
    """The plan's options (gear_shift_plan's, less hosts and lock_file), a fresh copy."""
    return dict(
        replicas=dict(type="int", default=3),
        gmin=dict(type="int", default=1),
        gear=dict(type="int"),
        groups_on=dict(type="list", elements="int"),
        date=dict(type="str"),
        state_file=dict(type="path"),
        resume_dir=dict(type="path"),
        park_off_after_h=dict(type="float"),
        batch_size=dict(type="str", default="100%"),
        wake_batch_size=dict(type="str", default="100%"),
        wake_health=dict(type="bool", default=False),
        wake_undrain=dict(type="bool", default=False),
        scheduler=dict(type="str", default="none", choices=["none", "slurm"]),
    )


def step_hosts(wake_hosts, observed, health, undrain, scheduler):
    """The hosts of the wake phase that need a step run on them once back (see RV(step_hosts))."""
    if scheduler == "slurm":
        return list(wake_hosts) if health else []
    if health or undrain:
        return list(wake_hosts)
    return [h for h in wake_hosts if (observed.get(h) or {}).get("resume_hook") is not True]


def wake_split(wake_batches, up_hosts, back_actions, steps, scheduler):
    """Where the wake phase runs (see RV(wake_waves), RV(wake_play_hosts), RV(wake_play_batches)):
    (waves, play_hosts, play_batches). When no host it acts on has a step to run (``steps``: the
    plan's step_hosts) and fleetnap's own waves wake them (not Slurm's), every wave is one call on
    the controller: ``waves`` has per batch its hosts, those it wakes and the results of those it
    puts back, and no play over the hosts is needed (play_hosts and play_batches empty). Otherwise
    the wake play runs over every host of the phase, batch by batch, and ``waves`` is empty."""
    if scheduler == "slurm" or steps:
        return [], [h for batch in wake_batches for h in batch], [list(batch) for batch in wake_batches]
    up = set(up_hosts)
    waves = [{"hosts": list(batch), "up": [h for h in batch if h in up],
              "back": [a for a in back_actions if a["host"] in batch]} for batch in wake_batches]
    return waves, [], []


def whole_from_controller(plan, scheduler):
    """Whether the controller can run all of the shift ``plan`` from where it planned it: no host goes
    down, no host of the wake phase has a step to run on it (the plan's wake_waves are the whole
    wake), fleetnap's own waves (not Slurm's), and every BMC the plan needs answered."""
    return (scheduler != "slurm" and not plan["down_hosts"] and not plan["wake_play_hosts"]
            and bool(plan["bmc_check"]["ok"]))


def wake_during_observation(p, on, recorded, check_mode):
    """The hosts whose magic packets may go out during the shift's observation, right after their
    probe's SYN (observe.greeting_after_wake: the wake's half second of the observation's wait for
    a parked host overlaps its resume), in the order of ``p["hosts"]``: only where nothing can
    stop the shift once the packets are out, and only for hosts whose wake restores them:

    - the prepare call is to run the whole shift (``whole_shift``, its ``wake_during_observation``
      not false), the plan goes into the journal (``journal``), not in check mode, fleetnap's own
      waves (not Slurm's), no health command or undrain hook (no step on a woken host);
    - the target ``on`` has every group on (no host goes down: no BMC check can stop the shift, the
      health gate has nothing to add) and one wake batch takes every host (no later batch woken
      early);
    - the parked host's probe is shorter than observe.EARLY_WAKE_MAX_WINDOW_S;
    - the state file (``recorded``, read_states) has the host parked asleep with gear_member's
      resume hook (woken by anything, it is back in its in-service policy by itself).

    Whether the host wakes by Wake-on-LAN first, with its MACs, is the caller's to check (the
    wave's checks of its fields)."""
    whole = p.get("whole_shift")
    if not whole or whole.get("wake_during_observation") is False:
        return []
    if not p["journal"] or check_mode or p["scheduler"] == "slurm" or p["wake_health"] or p["wake_undrain"]:
        return []
    if set(int(g) for g in on) != set(range(1, p["replicas"] + 1)):
        return []
    n = len(p["hosts"])
    if not n or batch_count(p["wake_batch_size"], n, "wake_batch_size") < n:
        return []
    if not min(p["probe_timeout"], p["parked_probe_timeout"], p["wake_probe_timeout"]) < EARLY_WAKE_MAX_WINDOW_S:
        return []
    return [h["name"] for h in p["hosts"]
            if ((recorded or {}).get(h["name"]) or {}).get("state") == "asleep"
            and ((recorded or {}).get(h["name"]) or {}).get("resume_hook") is True]


def day_of(p):
    """The checked options' rotation date (None: today), and the batch sizes' syntax, before
    anything is read: ShiftError naming the option otherwise."""
    day = None
    if p["date"]:
        try:
            day = dt_date.fromisoformat(p["date"])
        except ValueError:
            raise ShiftError("date %r is not YYYY-MM-DD" % p["date"])
    batch_count(p["wake_batch_size"], 1, "wake_batch_size")
    batch_count(p["batch_size"], 1, "batch_size")
    return day


def make(p, hosts, day):
    """The plan of the checked options ``p`` from the observation ``hosts`` (reads the state file
    and the S3 records; ShiftError / GearError / ParamError when they or the hosts are not what
    they must be): gear_shift_plan's result, less the journal's keys."""
    out = plan_from(hosts, p["replicas"], p["gmin"], gear=p["gear"], groups_on=p["groups_on"], day=day,
                    state_file=p["state_file"], resume_dir=p["resume_dir"], park_off_after_h=p["park_off_after_h"])
    out["bmc_check"] = bmc_check(hosts, out)
    out["wake_batches"] = batches(out["wake_phase_hosts"], p["wake_batch_size"], "wake_batch_size")
    out["step_hosts"] = step_hosts(out["wake_phase_hosts"], hosts, p["wake_health"], p["wake_undrain"],
                                   p["scheduler"])
    out["wake_waves"], out["wake_play_hosts"], out["wake_play_batches"] = wake_split(
        out["wake_batches"], out["up_hosts"], out["back_actions"], out["step_hosts"], p["scheduler"])
    out["down_batches"] = batches(out["down_hosts"], p["batch_size"], "batch_size")
    out["journal_written"] = False
    return out


def into_journal(module, state_file, lock_file, out):
    """The plan ``out`` into the journal of the shift holding ``lock_file`` (the state file's
    in_progress, atomically; a killed shift's resumed: RV(resumed)); nothing written in check
    mode. OSError / fileio.HostFsError when it cannot be written (the file is as it was)."""
    doc = journal.read(state_file)
    out["resumed"] = journal.begin(doc, journal.shift_of(lock_file), out, journal.stamp(time.time()))
    if not module.check_mode:
        journal.write(state_file, doc, module)
        out["journal_written"] = True
