# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cpuidle model: what a host's idle states are, and which of them a latency budget allows.

Declared vs measured vs effective exit latency:

- *declared* is what the driver puts in ``stateN/latency`` (intel_idle's tables, ACPI _CST):
  an estimate. The C-state wake-latency thesis measured 15-19 us where 1-2 us was declared.
- *measured* is the worst case a measurement playbook (or the operator) recorded for that state.
- *effective* is what the gate compares with the budget: the measured worst case when there is
  one, else declared x margin. With ``combine='worst'`` it is the larger of the two.
"""

from __future__ import annotations

import math
import re
import struct

from ansible.module_utils.fleetnap.cpulist import CpuListError, format_cpulist, parse_cpulist
from ansible.module_utils.fleetnap.fileio import HostFsError, open_device
from ansible.module_utils.fleetnap.parse import ParseError, parse_int

CPU_DIR = "/sys/devices/system/cpu"
STATE_RE = re.compile(r"^state(\d+)$")
CPU_RE = re.compile(r"^cpu(\d+)$")
POLL = "POLL"

# Kernel command line options that take C-state control away from sysfs (or from us).
CMDLINE_CONFLICTS = {
    "intel_idle.max_cstate": "limits intel_idle's deepest state at boot",
    "processor.max_cstate": "limits acpi_idle's deepest state at boot",
    "intel_idle.states_off": "disables intel_idle states at boot",
    "idle": "idle= overrides the cpuidle driver (poll/halt/nomwait)",
    "cpuidle.off": "cpuidle.off=1 turns the cpuidle framework off",
    "cpuidle.governor": "forces a cpuidle governor",
}


class CpuidleError(ValueError):
    """Bad input or a host that cannot do what was asked; the message says which and how to fix."""


# A counter is a u64 (20 digits); a latency or residency far less. More than this is not sysfs.
COUNTER_MAX = 2 ** 64 - 1


def _parsed(fs, path, text, default=None, hi=COUNTER_MAX):
    """The sysfs number in ``text``, read from ``path`` (one parser: ASCII digits, bounded),
    ``default`` when the file was missing (None); anything else is a CpuidleError naming the file
    and what it holds."""
    if text is None:
        return default
    try:
        return parse_int(text, fs.path(path), 0, hi)
    except ParseError as exc:
        raise CpuidleError("%s (is sysfs_root %s a sysfs tree?)" % (exc, fs.root))


COUNTER_FILES = ("default_status", "usage", "time", "above", "below")
# A state's name is a char[CPUIDLE_NAME_LEN] (16) in the kernel, its terminating NUL included.
NAME_MAX = 15


def _state_fields(fs, sdir, counters, index, declared=None):
    """One state's files, read through one descriptor of its directory. ``declared`` (the gate's
    read, counters=False): {(index, name): (desc, residency)} of the CPUs read before; a state with
    the same index and name on a later CPU takes its description and target residency from there
    (the summary of a state shows one of each, the first CPU's) instead of reading two more files
    per state per CPU."""
    path = sdir + "/%s"
    texts = fs.read_many(sdir, ("name", "latency", "disable") + (COUNTER_FILES if counters else ()))
    name = texts["name"] if texts["name"] is not None else ""
    if len(name) > NAME_MAX:
        raise CpuidleError("%s holds a name of %d characters: the kernel's are at most %d (CPUIDLE_NAME_LEN); "
                           "is sysfs_root a sysfs tree?" % (fs.path(path % "name"), len(name), NAME_MAX))
    known = None if declared is None else declared.get((index, name))
    if known is None:
        more = fs.read_many(sdir, ("desc", "residency"))
        known = (more["desc"] or "", _parsed(fs, path % "residency", more["residency"]))
        if declared is not None:
            declared[(index, name)] = known
    fields = {
        "name": name,
        "desc": known[0],
        "latency_us": _parsed(fs, path % "latency", texts["latency"]),
        "residency_us": known[1],
        "disable": _parsed(fs, path % "disable", texts["disable"], hi=1),
        "default_status": None, "usage": None, "time_us": None, "above": None, "below": None,
    }
    if counters:
        fields.update(default_status=texts["default_status"], usage=_parsed(fs, path % "usage", texts["usage"]),
                      time_us=_parsed(fs, path % "time", texts["time"]),
                      above=_parsed(fs, path % "above", texts["above"]),
                      below=_parsed(fs, path % "below", texts["below"]))
    return fields


def read_cpu_dma_latency(fs):
    """The global latency limit the kernel enforces now (us), or None where it cannot be read (a
    captured tree, no PM QoS in the kernel)."""
    if not fs.live:
        return None
    try:
        with open_device("/dev/cpu_dma_latency", "rb") as fobj:
            data = fobj.read(4)
        return struct.unpack("i", data)[0] if len(data) == 4 else None
    except (IOError, OSError):
        return None


def qos_limit_us(cpu, global_us=None):
    """The wake-up latency a CPU's idle governor may not exceed (us), or None for no limit: the
    smaller of its per-CPU PM QoS resume latency (sysfs "0" is no constraint, "n/a" none at all)
    and the global limit (/dev/cpu_dma_latency; its default, 2000 s, is no limit)."""
    qos = cpu.get("pm_qos_resume_latency_us")
    limits = [0] if qos == "n/a" else ([qos] if isinstance(qos, int) and qos > 0 else [])
    if global_us is not None and 0 <= global_us < 2000 * 1000 * 1000:
        limits.append(global_us)
    return min(limits) if limits else None


def governor_misses(cpu, global_us=None):
    """Per state of one CPU, in index order: ``(state, bounded, above, below, below_qos)``. The
    kernel counts ``below`` against the next deeper state that is not disabled
    (cpuidle_enter_state), and the governor never picks a state whose exit latency is over the
    CPU's PM QoS limit: ``bounded`` is True when that next state is excluded so, and then every
    ``below`` of this state is the policy's (below_qos = below), not the governor's. A counter the
    kernel does not show is None."""
    limit = qos_limit_us(cpu, global_us)
    states = sorted(cpu["states"], key=lambda st: st["index"])
    out = []
    for i, st in enumerate(states):
        deeper = next((d for d in states[i + 1:] if not d["disable"]), None)
        bounded = (limit is not None and deeper is not None and deeper["latency_us"] is not None
                   and deeper["latency_us"] > limit)
        below = st["below"]
        out.append((st, bounded, st["above"], below, None if below is None else (below if bounded else 0)))
    return out


def read_model(fs, counters=True):
    """Read the cpuidle part of sysfs into a plain dict (JSON-ready). Anything that cannot be read
    or used (a FIFO, a link out of the root, a file too large, a number that is not one) is a
    CpuidleError naming the file.

    ``counters=False``: a state's usage, time and default_status are not read (None), and its
    desc and residency are read on the first CPU that has the state (same index and name) and
    shared by the others: the gate decides from names, latencies and disable files only, and a
    host has thousands of the others."""
    try:
        return _read_model(fs, counters)
    except (HostFsError, UnicodeDecodeError) as exc:
        raise CpuidleError("%s" % (exc.reason if isinstance(exc, UnicodeDecodeError) else exc))


def _read_model(fs, counters):
    if not fs.isdir(CPU_DIR):
        raise CpuidleError("%s does not exist: is sysfs mounted, or is sysfs_root (%s) right?"
                           % (fs.path(CPU_DIR), fs.root))
    try:
        present = parse_cpulist(fs.read(CPU_DIR + "/present", ""))
        online = parse_cpulist(fs.read(CPU_DIR + "/online", ""))
    except CpuListError as exc:
        raise CpuidleError("cannot parse the CPU list under %s: %s" % (fs.path(CPU_DIR), exc))
    if not present:
        present = sorted(int(m.group(1)) for m in (CPU_RE.match(n) for n in fs.listdir(CPU_DIR)) if m)
    if not fs.read(CPU_DIR + "/online"):
        online = list(present)
    driver = fs.read(CPU_DIR + "/cpuidle/current_driver")
    if driver in ("", "none"):
        driver = None
    governor = fs.read(CPU_DIR + "/cpuidle/current_governor") or fs.read(CPU_DIR + "/cpuidle/current_governor_ro")
    available = (fs.read(CPU_DIR + "/cpuidle/available_governors") or "").split()
    online_set = set(online)
    declared = None if counters else {}
    cpus = []
    for cpu in present:
        cdir = "%s/cpu%d" % (CPU_DIR, cpu)
        states = []
        for entry in fs.listdir(cdir + "/cpuidle"):
            match = STATE_RE.match(entry)
            if not match:
                continue
            index = int(match.group(1))
            state = _state_fields(fs, "%s/cpuidle/%s" % (cdir, entry), counters, index, declared)
            state["index"] = index
            states.append(state)
        states.sort(key=lambda s: s["index"])
        qos_path = cdir + "/power/pm_qos_resume_latency_us"
        qos_text = fs.read(qos_path)
        if qos_text == "n/a":
            qos = qos_text  # "n/a": no wake-up latency tolerated at all
        else:
            qos = _parsed(fs, qos_path, qos_text, hi=2 ** 31 - 1)
        cpus.append({
            "cpu": cpu,
            "online": cpu in online_set,
            "states": states,
            "pm_qos_resume_latency_us": qos,
        })
    return {
        "driver": driver,
        "governor": governor,
        "available_governors": available,
        "present_cpus": format_cpulist(present),
        "online_cpus": format_cpulist(online),
        "offline_cpus": format_cpulist(sorted(set(present) - online_set)),
        "cpus": cpus,
    }


def state_names(model):
    """State names ordered by index (union over CPUs)."""
    seen = {}
    for cpu in model["cpus"]:
        for state in cpu["states"]:
            seen.setdefault(state["name"], state["index"])
    return [name for name, _idx in sorted(seen.items(), key=lambda kv: (kv[1], kv[0]))]


def summarize_states(model, cpus=None):
    """One row per state name: index, desc, declared latency/residency, CPUs with it disabled."""
    wanted = None if cpus is None else set(cpus)
    rows = {}
    for cpu in model["cpus"]:
        if wanted is not None and cpu["cpu"] not in wanted:
            continue
        for state in cpu["states"]:
            row = rows.setdefault(state["name"], {
                "name": state["name"], "index": state["index"], "desc": state["desc"],
                "declared_us": state["latency_us"], "residency_us": state["residency_us"],
                "_cpus": [], "_disabled": [], "usage": 0, "time_us": 0,
            })
            if state["latency_us"] is not None:
                row["declared_us"] = max(row["declared_us"] or 0, state["latency_us"])
            row["_cpus"].append(cpu["cpu"])
            if state["disable"]:
                row["_disabled"].append(cpu["cpu"])
            row["usage"] += state["usage"] or 0
            row["time_us"] += state["time_us"] or 0
    out = []
    for row in sorted(rows.values(), key=lambda r: r["index"]):
        row["cpus"] = format_cpulist(row.pop("_cpus"))
        row["disabled_cpus"] = format_cpulist(row.pop("_disabled"))
        out.append(row)
    return out


def select_cpus(model, cpus_spec):
    """CPUs to act on: all present CPUs, or the given list, each checked to exist."""
    present = [c["cpu"] for c in model["cpus"]]
    if cpus_spec in (None, "", "all"):
        return present
    try:
        wanted = parse_cpulist(cpus_spec)
    except CpuListError as exc:
        raise CpuidleError("cpus: %s" % exc)
    missing = sorted(set(wanted) - set(present))
    if missing:
        raise CpuidleError("cpus: CPU(s) %s do not exist on this host (present: %s)"
                           % (format_cpulist(missing), format_cpulist(present)))
    return wanted


def _number(name, value, where):
    if isinstance(value, bool):
        raise CpuidleError("%s: %s must be a number of microseconds, got %r" % (where, name, value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CpuidleError("%s: %s must be a number of microseconds, got %r" % (where, name, value))
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise CpuidleError("%s: %s must be a finite number >= 0, got %r" % (where, name, value))
    return number


def _check_names(kind, names, known, driver):
    unknown = [n for n in names if n not in known]
    if unknown:
        if not known:
            raise CpuidleError("%s: unknown state(s) %s: this host has no cpuidle states (driver: %s)"
                               % (kind, ", ".join(unknown), driver or "none"))
        raise CpuidleError("%s: unknown state(s) %s; this host's states are: %s"
                           % (kind, ", ".join(unknown), ", ".join(known)))


def check_plan_inputs(max_latency_us=None, measured=None, margin=1.0, disable=(), enable=(),
                      combine="measured", cpus_spec=None):
    """What plan_states and select_cpus are given that needs no host, checked before a host is read:
    the numbers (finite, >= 0), the margin (>= 1), combine, a state both disabled and enabled, POLL
    disabled, the CPU list's syntax. Returns (budget, margin, measured) as numbers; CpuidleError
    naming the input. That the names and CPUs exist on the host is plan_states' and select_cpus'."""
    if max_latency_us is not None:
        max_latency_us = _number("max_latency_us", max_latency_us, "budget")
    margin = _number("declared_latency_margin", margin, "margin")
    if margin < 1:
        raise CpuidleError("declared_latency_margin must be >= 1 (it inflates the driver's estimates; "
                           "1 trusts them), got %r" % margin)
    if combine not in ("measured", "worst"):
        raise CpuidleError("combine must be 'measured' or 'worst', got %r" % combine)
    measured_us = {}
    for name, value in (measured or {}).items():
        measured_us[name] = _number("measured latency of %s" % name, value, "measured_latency_us")
    both = sorted(set(disable) & set(enable))
    if both:
        raise CpuidleError("state(s) %s are listed in both disable and enable" % ", ".join(both))
    if POLL in disable:
        raise CpuidleError("POLL cannot be disabled: it is the state the CPU falls back to when every "
                           "other state is too slow; use a budget or disable deeper states instead")
    if cpus_spec not in (None, "", "all"):
        try:
            parse_cpulist(cpus_spec)
        except CpuListError as exc:
            raise CpuidleError("cpus: %s" % exc)
    return max_latency_us, margin, measured_us


def plan_states(model, max_latency_us=None, measured=None, margin=1.0, disable=(), enable=(),
                combine="measured", cpus=None):
    """Decide, per state name, whether the budget allows it. Validates everything first.

    Returns rows: name, index, declared_us, measured_us, effective_us, allowed, reason.
    """
    max_latency_us, margin, measured_us = check_plan_inputs(max_latency_us, measured, margin, disable, enable,
                                                            combine)
    known = state_names(model)
    _check_names("measured_latency_us", list(measured_us), known, model["driver"])
    _check_names("disable", list(disable), known, model["driver"])
    _check_names("enable", list(enable), known, model["driver"])
    rows = []
    for summary in summarize_states(model, cpus):
        name = summary["name"]
        declared = summary["declared_us"]
        declared_eff = None if declared is None else declared * margin
        meas = measured_us.get(name)
        declared_text = "declared %s us" % _fmt(declared)
        if margin != 1:
            declared_text += " x %g = %s us" % (margin, _fmt(declared_eff))
        if meas is not None and combine == "measured":
            effective, source = meas, "measured %s us" % _fmt(meas)
        elif meas is not None and declared_eff is not None:
            effective = max(meas, declared_eff)
            source = "measured %s us" % _fmt(meas) if meas >= declared_eff else declared_text
        else:
            effective, source = declared_eff, declared_text
        if name == POLL:
            allowed, reason = True, "POLL always stays enabled"
        elif name in disable:
            allowed, reason = False, "explicitly disabled"
        elif name in enable:
            allowed, reason = True, "explicitly enabled"
        elif max_latency_us is None:
            allowed, reason = True, "no latency budget"
        elif effective is None:
            allowed, reason = False, "exit latency unknown"
        elif effective <= max_latency_us:
            allowed, reason = True, "%s <= budget %s us" % (source, _fmt(max_latency_us))
        else:
            allowed, reason = False, "%s > budget %s us" % (source, _fmt(max_latency_us))
        rows.append({
            "name": name,
            "index": summary["index"],
            "desc": summary["desc"],
            "declared_us": declared,
            "measured_us": meas,
            "effective_us": effective,
            "allowed": allowed,
            "reason": reason,
        })
    return rows


def _fmt(value):
    return "?" if value is None else "%g" % value


def disabled_map(model, cpus=None):
    """{state name: CPU list string of CPUs where it is disabled} (for diffs)."""
    return {row["name"]: row["disabled_cpus"] for row in summarize_states(model, cpus)}


def cmdline_conflicts(args):
    """Warnings for kernel command line options that also manage C-states."""
    found = []
    for arg in args:
        key, _sep, value = arg.partition("=")
        if key in CMDLINE_CONFLICTS:
            if key == "cpuidle.off" and value not in ("1", "y", "Y"):
                continue
            found.append("kernel command line has %s: %s; fleetnap's sysfs settings work within it"
                         % (arg, CMDLINE_CONFLICTS[key]))
    return found
