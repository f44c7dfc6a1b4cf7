# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A whole fleet observed from the controller, as M(gear_observe) and M(gear_shift_prepare) do
it: their common options (argument spec and checks), the checks of the host entries before
anything is asked of a host, then every probe and BMC read at once. Standard library and
AnsibleModule's run_command only."""

from __future__ import annotations

import time
from datetime import date as dt_date

from ansible.module_utils.fleetnap.fleethosts import bmc_for, check_hosts, host_options, take_records
from ansible.module_utils.fleetnap.gear import GearError
from ansible.module_utils.fleetnap.gearshift import ShiftError, observation_needs, read_states, target_groups
from ansible.module_utils.fleetnap.ipmi import run_local
from ansible.module_utils.fleetnap.observe import OBSERVED, observe
from ansible.module_utils.fleetnap.secrets import drop_credentials, guard, refuse_command_line
from ansible.module_utils.fleetnap.validate import (
    ParamError, all_of, check_params, items, number, numbers, path, text,
)

CHECKS = {
    "probe_timeout": number(lo=0, lo_open=True, hi=60),
    "parked_probe_timeout": number(lo=0, lo_open=True, hi=60),
    "wake_probe_timeout": number(lo=0, lo_open=True, hi=60),
    "state_file": path(),
    "bmc_concurrency": number(lo=1, hi=256, integer=True),
    "probe_concurrency": number(lo=1, hi=4096, integer=True),
    "min_interval": number(lo=0, hi=600),
    "retries": number(lo=0, hi=10, integer=True),
    "session_timeout": number(lo=1, hi=60, integer=True),
    "rate_limit_dir": path(),
}

# what gear_shift_plan checks of the same values (its CHECKS)
SHIFT_CHECKS = {
    "gear": number(lo=0, hi=100, integer=True),
    "groups_on": all_of(items(100), numbers(lo=1, hi=100, integer=True)),
    "replicas": number(lo=1, hi=100, integer=True),
    "gmin": number(lo=1, hi=100, integer=True),
    "date": text(max_len=32),
}


def options():
    """The observation's options (gear_observe's, less bmc_read and shift), a fresh copy."""
    return dict(
        hosts=dict(type="list", elements="dict", required=True, options=host_options()),
        probe_timeout=dict(type="float", default=3),
        state_file=dict(type="path"),
        parked_probe_timeout=dict(type="float", default=1),
        wake_probe_timeout=dict(type="float", default=0.25),
        read_power=dict(type="bool", default=False),
        bmc_concurrency=dict(type="int", default=4),
        probe_concurrency=dict(type="int", default=256),
        min_interval=dict(type="float", default=1),
        retries=dict(type="int", default=2),
        session_timeout=dict(type="int", default=2),
        rate_limit_dir=dict(type="path", default="~/.cache/fleetnap/bmc"),
    )


def shift_groups(shift):
    """The groups the shift of option shift has on (gear_shift_plan's target_groups, before the
    health gate); ShiftError / ParamError naming shift.* otherwise."""
    for key, check in SHIFT_CHECKS.items():
        if shift.get(key) is not None:
            check("shift." + key, shift[key])
    day = None
    if shift.get("date"):
        try:
            day = dt_date.fromisoformat(shift["date"])
        except ValueError:
            raise ShiftError("option shift.date: %r is not YYYY-MM-DD" % shift["date"])
    try:
        return target_groups(shift["replicas"], shift["gmin"], gear=shift.get("gear"),
                             groups_on=shift.get("groups_on"), day=day)[1]
    except ShiftError as exc:
        raise ShiftError("option shift: %s" % exc)


def power_reading(bmc):
    """(watts, source, why none) from a BMC client (ipmi.Bmc or redfish.Redfish)."""
    watts = bmc.power_watts()
    note = getattr(bmc, "power_note", None)
    if watts is None and not note:
        note = "the BMC offers no power reading"
    return watts, bmc.power_source, note


def check(module, p, before=None, then=None):
    """Every option of the observation checked, before anything is asked of a host: the records
    taken, every result scrubbed of every BMC password, the host entries checked, ``before()``,
    the inventory's keys, ``then()`` (the caller's own checks, each raising ParamError /
    ShiftError / GearError), a password on a command line refused, the credentials among the
    inventory facts dropped (with a warning), and ipmitool found when a host has an IPMI BMC.
    module.fail_json naming the option (or the missing tool) otherwise. Returns (``before()``'s
    value, ``then()``'s value, (ipmitool or None, timeout or None): the tools for run)."""
    try:
        take_records(p["hosts"])
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    # Every result scrubbed of every form of every host's BMC password (a BMC's error text that
    # repeats it included); a password on a command line refused before any BMC is asked.
    guard(module, [h.get("bmc_password") for h in p["hosts"]])
    check_params(module, CHECKS)
    found = [None, None]
    try:
        check_hosts(p["hosts"])
        if before is not None:
            found[0] = before()
        for i, h in enumerate(p["hosts"]):
            # the keys that stay once credentials are dropped (below) must not name what is observed
            clash = sorted(set(drop_credentials(h["inventory"] or {})[0]) & (OBSERVED | set(["name"])))
            if clash:
                raise ParamError("option hosts[%d].inventory: %s name(s) what is observed; use other keys"
                                 % (i, ", ".join(clash)))
        if then is not None:
            found[1] = then()
    except (ParamError, ShiftError, GearError) as exc:
        module.fail_json(msg=str(exc))
    refuse_command_line(module, dict(("hosts[%d].bmc_password" % i, h.get("bmc_password"))
                                     for i, h in enumerate(p["hosts"]) if h.get("bmc_password")))
    dropped = []
    for i, h in enumerate(p["hosts"]):
        h["inventory"], gone = drop_credentials(h["inventory"] or {})
        dropped += ["hosts[%d].inventory.%s" % (i, k) for k in gone]
    if dropped:
        module.warn("left out of the result, as they name credentials: %s%s"
                    % (", ".join(dropped[:10]), " and %d more" % (len(dropped) - 10) if len(dropped) > 10 else ""))
    with_bmc = [h for h in p["hosts"] if h.get("bmc_address") and h["bmc_protocol"] == "ipmi"]
    return found[0], found[1], (module.get_bin_path("ipmitool", required=bool(with_bmc)), module.get_bin_path("timeout"))


def run(module, p, tools, bmc_read, on=None, recorded=None, wake=None):
    """Observe every host of the checked options ``p`` at once, with the ``tools`` check returned:
    ``bmc_read`` is gear_observe's option (``needed`` with ``on``, the groups the shift has on).
    ``recorded``: the state file's entries (read_states) when the caller read them; else the state
    file is read here (ShiftError / GearError / ParamError when it is not one). A BMC command that
    cannot be started is that host's bmc_error, never the module's failure. Returns (hosts,
    elapsed_s): gear_observe's RV(hosts). ``wake``: name -> a callable sending that host's magic
    packets right after its probe's SYN (observe's "wake"; the host gets the short probe of a host
    to be woken)."""
    if recorded is None:
        recorded = read_states(p["state_file"]) if p["state_file"] else {}
    parked = set(n for n, h in recorded.items() if h.get("state") in ("asleep", "off"))
    needs = {}
    if bmc_read == "needed":
        needs = observation_needs(dict((h["name"], (h["inventory"] or {}).get("group")) for h in p["hosts"]),
                                  on, recorded, read_power=p["read_power"])
    wake_probe = min(p["wake_probe_timeout"], p["parked_probe_timeout"])

    wake = wake or {}

    def own_probe(name):
        if (needs.get(name) or {}).get("wake") or name in wake:
            return wake_probe
        return p["parked_probe_timeout"] if name in parked else None
    started = time.time()
    ipmitool, timeout_bin = tools

    targets = [{"name": h["name"], "address": h["address"], "port": h["port"],
                "probe_timeout": own_probe(h["name"]),
                "bmc_read": (needs.get(h["name"]) or {}).get("bmc_read"), "wake": wake.get(h["name"]),
                "bmc": bmc_for(h, run_local, ipmitool, [timeout_bin] if timeout_bin else None,
                               min_interval=p["min_interval"], retries=p["retries"],
                               session_timeout=p["session_timeout"], state_dir=p["rate_limit_dir"])}
               for h in p["hosts"]]
    seen = observe(targets, p["probe_timeout"], lambda bmc: bmc.status(),
                   probe_concurrency=p["probe_concurrency"], bmc_concurrency=p["bmc_concurrency"],
                   bmc_read="always" if bmc_read == "needed" else bmc_read,
                   bmc_power=power_reading if p["read_power"] else None)
    for h in p["hosts"]:
        seen[h["name"]] = dict(h["inventory"], name=h["name"], **seen[h["name"]])
        said = (needs.get(h["name"]) or {}).get("parked_as")
        if said and not seen[h["name"]]["bmc_read"]:
            seen[h["name"]]["parked_as"] = said
        if (recorded.get(h["name"]) or {}).get("resume_hook") is True:
            seen[h["name"]]["resume_hook"] = True
    return seen, round(time.time() - started, 3)
