# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's CPU frequency policy as sysfs shows it: cpufreq policies, the P-state driver and its
mode, EPP and EPB, turbo, and the uncore frequency (legacy and TPMI layouts).

The reading half of the whole-CPU power policy (issue 38): every file goes through the file layer
(``sysfs.HostFS``: no link out of the root, no FIFO or device, bounded reads), and every value is
checked for the shape the kernel gives it before it is used; a file that holds anything else is an
error naming the file and what it holds, never a guess. A host without cpufreq (a VM, a kernel
without a driver) reads as ``driver: None`` with no policies.

Layouts (Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst,
intel_uncore_frequency):

- ``/sys/devices/system/cpu/cpufreq/policyN/``: ``affected_cpus``/``related_cpus`` (CPU numbers
  separated by spaces), ``scaling_driver``, ``scaling_governor``, ``scaling_available_governors``,
  ``scaling_min_freq``/``scaling_max_freq`` and ``cpuinfo_min_freq``/``cpuinfo_max_freq`` (kHz),
  ``base_frequency`` (intel_pstate, kHz), ``energy_performance_preference`` and
  ``energy_performance_available_preferences`` (intel_pstate with HWP, amd-pstate-epp),
  ``scaling_available_frequencies`` (acpi-cpufreq), ``boost``/``cpb`` (per policy, where offered).
- ``/sys/devices/system/cpu/intel_pstate/``: ``status`` (active, passive, off), ``no_turbo``,
  ``min_perf_pct``, ``max_perf_pct``, ``hwp_dynamic_boost``, ``num_pstates``, ``turbo_pct``.
- ``/sys/devices/system/cpu/amd_pstate/status`` (active, passive, guided, disable).
- ``/sys/devices/system/cpu/cpufreq/boost`` (acpi-cpufreq, amd-pstate).
- ``/sys/devices/system/cpu/cpuN/power/energy_perf_bias`` (0-15).
- ``/sys/devices/system/cpu/intel_uncore_frequency/package_XX_die_YY/`` (legacy) and
  ``uncoreNN/`` (TPMI, with ``package_id``, ``domain_id``, ``fabric_cluster_id`` and the ELC
  files ``elc_*``): ``min_freq_khz``, ``max_freq_khz``, ``initial_min_freq_khz``,
  ``initial_max_freq_khz``.
"""

from __future__ import annotations

import re

from ansible.module_utils.fleetnap.fileio import HostFsError, UnsafeFileError
from ansible.module_utils.fleetnap.parse import ParseError, parse_int

CPU = "/sys/devices/system/cpu"
CPUFREQ = CPU + "/cpufreq"
INTEL_PSTATE = CPU + "/intel_pstate"
AMD_PSTATE = CPU + "/amd_pstate"
UNCORE = CPU + "/intel_uncore_frequency"

# Bounds of what a kernel shows: CPU numbers below NR_CPUS' largest build value, frequencies up
# to 100 GHz in kHz, at most that many policies and uncore domains, names as the kernel spells them.
MAX_CPUS = 8192
MAX_KHZ = 100 * 1000 * 1000
MAX_UNCORE = 1024
MAX_NAMES = 64
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
POLICY_DIR = re.compile(r"^policy(\d{1,4})$")
UNCORE_DIR = re.compile(r"^(?:package_(\d{2})_die_(\d{2})|uncore(\d{2,4}))$")
INTEL_STATUS = ("active", "passive", "off")
AMD_STATUS = ("active", "passive", "guided", "disable")
# intel_pstate's files and their bounds (a number each); status is read apart.
INTEL_NUMBERS = (("no_turbo", 0, 1), ("min_perf_pct", 0, 100), ("max_perf_pct", 0, 100),
                 ("hwp_dynamic_boost", 0, 1), ("num_pstates", 0, 255), ("turbo_pct", 0, 100))
UNCORE_KHZ = ("min_freq_khz", "max_freq_khz", "initial_min_freq_khz", "initial_max_freq_khz")
TPMI_IDS = ("package_id", "domain_id", "fabric_cluster_id")
ELC = re.compile(r"^elc_[a-z_]{1,40}$")
CPUS_WHAT = "a list of CPU numbers below %d" % MAX_CPUS


class PstateError(HostFsError, ValueError):
    """A CPU frequency file that holds what the kernel never shows; the message names it."""


def _text(fs, path, required=False):
    value = fs.read(path)
    if value is None and required:
        raise PstateError("%s: missing or unreadable (every cpufreq policy has it)" % fs.path(path))
    return value


def _number(fs, path, lo, hi, required=False):
    text = _text(fs, path, required)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit():
        raise PstateError("%s: %r is not a whole number" % (fs.path(path), text[:40]))
    try:
        return parse_int(text, fs.path(path), lo, hi)
    except ParseError as exc:
        raise PstateError(str(exc))


def _name(fs, path, required=False, choices=None):
    text = _text(fs, path, required)
    if text is None:
        return None
    if not NAME.match(text) or (choices and text not in choices):
        what = "one of %s" % ", ".join(choices) if choices else "a name as the kernel writes one"
        raise PstateError("%s: %r is not %s" % (fs.path(path), text[:40], what))
    return text


def _names(fs, path):
    text = _text(fs, path)
    if text is None:
        return None
    words = text.split()
    if len(words) > MAX_NAMES or not all(NAME.match(w) for w in words):
        raise PstateError("%s: %r is not a list of at most %d names" % (fs.path(path), text[:80], MAX_NAMES))
    return words


def _ints(fs, path, hi, what, max_items=MAX_CPUS, required=False):
    """Whole numbers separated by spaces, each at most ``hi``, at least one, at most max_items."""
    text = _text(fs, path, required)
    if text is None:
        return None
    words = text.split()
    if not words or len(words) > max_items or not all(
            w.isascii() and w.isdigit() and len(w) <= len(str(hi)) and int(w) <= hi for w in words):
        raise PstateError("%s: %r is not %s" % (fs.path(path), text[:80], what))
    return [int(w) for w in words]


def _epp(fs, path):
    """A name, or the raw number 0-255 intel_pstate shows for a value no name stands for."""
    text = _text(fs, path)
    if text is None:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 3 and int(text) <= 255:
        return int(text)
    return _name(fs, path)


def _policy(fs, number):
    d = "%s/policy%d" % (CPUFREQ, number)
    khz = {key: _number(fs, "%s/%s" % (d, f), 0, MAX_KHZ, required=req)
           for key, f, req in (("min_khz", "scaling_min_freq", True), ("max_khz", "scaling_max_freq", True),
                               ("cpuinfo_min_khz", "cpuinfo_min_freq", True),
                               ("cpuinfo_max_khz", "cpuinfo_max_freq", True), ("base_khz", "base_frequency", False))}
    if khz["cpuinfo_min_khz"] > khz["cpuinfo_max_khz"]:
        raise PstateError("%s: cpuinfo_min_freq %d kHz is above cpuinfo_max_freq %d kHz"
                          % (fs.path(d), khz["cpuinfo_min_khz"], khz["cpuinfo_max_khz"]))
    policy = {
        "cpus": _ints(fs, d + "/affected_cpus", MAX_CPUS - 1, CPUS_WHAT, required=True),
        "related_cpus": _ints(fs, d + "/related_cpus", MAX_CPUS - 1, CPUS_WHAT) or [],
        "driver": _name(fs, d + "/scaling_driver", required=True),
        "governor": _name(fs, d + "/scaling_governor", required=True),
        "governors": _names(fs, d + "/scaling_available_governors") or [],
        "epp": _epp(fs, d + "/energy_performance_preference"),
        "epps": _names(fs, d + "/energy_performance_available_preferences"),
        "frequencies_khz": _ints(fs, d + "/scaling_available_frequencies", MAX_KHZ, "a list of frequencies in kHz",
                                 max_items=512),
        "boost": _number(fs, d + "/boost", 0, 1),
        "cpb": _number(fs, d + "/cpb", 0, 1),
    }
    policy.update(khz)
    return policy


def _uncore(fs, name, m):
    d = "%s/%s" % (UNCORE, name)
    dom = {"layout": "tpmi" if m.group(3) else "legacy"}
    for f in UNCORE_KHZ:
        dom[f.replace("_freq_khz", "_khz")] = _number(fs, "%s/%s" % (d, f), 0, MAX_KHZ, required=f in UNCORE_KHZ[:2])
    if dom["layout"] == "legacy":
        dom["package"], dom["die"] = int(m.group(1)), int(m.group(2))
    else:
        for f in TPMI_IDS:
            dom[f] = _number(fs, "%s/%s" % (d, f), 0, 65535)
        dom["elc"] = {f: _number(fs, "%s/%s" % (d, f), 0, MAX_KHZ, required=True) for f in fs.listdir(d) if ELC.match(f)}
    return dom


def _dirs(fs, parent, pattern, limit, what):
    names = [n for n in fs.listdir(parent) if pattern.match(n)]
    if len(names) > limit:
        raise PstateError("%s: %d %s, more than the %d a kernel has" % (fs.path(parent), len(names), what, limit))
    return names


def read_pstates(fs, max_policies=MAX_CPUS):
    """The host's CPU frequency policy (see the module's docstring). Raises PstateError or
    UnsafeFileError naming the file when one holds what the kernel never shows."""
    policies, inactive = {}, []
    for n in _dirs(fs, CPUFREQ, POLICY_DIR, max_policies, "cpufreq policies"):
        number = int(POLICY_DIR.match(n).group(1))
        d = "%s/%s" % (CPUFREQ, n)
        if fs.read(d + "/scaling_driver") is None and fs.read(d + "/affected_cpus") is None:
            # an inactive policy (all its CPUs offline: the kernel answers EBUSY to every file)
            inactive.append(number)
            continue
        policies[number] = _policy(fs, number)
    drivers = sorted({p["driver"] for p in policies.values()})
    if len(drivers) > 1:
        raise PstateError("%s: policies name different drivers (%s)" % (fs.path(CPUFREQ), ", ".join(drivers)))
    intel = None
    if fs.isdir(INTEL_PSTATE):
        intel = {"status": _name(fs, INTEL_PSTATE + "/status", choices=INTEL_STATUS)}
        intel.update({f: _number(fs, "%s/%s" % (INTEL_PSTATE, f), lo, hi) for f, lo, hi in INTEL_NUMBERS})
    amd = _name(fs, AMD_PSTATE + "/status", choices=AMD_STATUS) if fs.isdir(AMD_PSTATE) else None
    epb = {}
    for n in fs.listdir(CPU):
        m = re.match(r"^cpu(\d{1,4})$", n)
        if m and int(m.group(1)) < MAX_CPUS:
            value = _number(fs, "%s/%s/power/energy_perf_bias" % (CPU, n), 0, 15)
            if value is not None:
                epb[int(m.group(1))] = value
    uncore = {}
    for n in _dirs(fs, UNCORE, UNCORE_DIR, MAX_UNCORE, "uncore frequency domains"):
        uncore[n] = _uncore(fs, n, UNCORE_DIR.match(n))
    return {
        "driver": drivers[0] if drivers else None,
        "policies": policies,
        "inactive_policies": sorted(inactive),
        "intel_pstate": intel,
        "amd_pstate": amd,
        # HWP: intel_pstate in active mode with EPP files (without HWP it shows none)
        "hwp": bool(intel and intel["status"] == "active" and any(p["epp"] is not None for p in policies.values())),
        "boost": _number(fs, CPUFREQ + "/boost", 0, 1),
        "epb": epb,
        "uncore": uncore,
    }


def summary(pstates):
    """One line's worth for a decision table: driver, mode, governors, EPP and EPB values in use,
    the frequency ranges, turbo, the uncore layout (each a sorted set of what the CPUs show)."""
    pol = pstates["policies"].values()
    intel = pstates["intel_pstate"] or {}
    if intel.get("no_turbo") is not None:
        turbo = "off" if intel["no_turbo"] else "on"
    elif pstates["boost"] is not None:
        turbo = "on" if pstates["boost"] else "off"
    else:
        turbo = None
    return {
        "driver": pstates["driver"],
        "mode": intel.get("status") or pstates["amd_pstate"],
        "hwp": pstates["hwp"],
        "governors": sorted({p["governor"] for p in pol}),
        "epp": sorted({str(p["epp"]) for p in pol if p["epp"] is not None}),
        "epb": sorted(set(pstates["epb"].values())),
        "khz": sorted({(p["min_khz"], p["max_khz"]) for p in pol}),
        "turbo": turbo,
        "uncore": sorted({d["layout"] for d in pstates["uncore"].values()}),
        "uncore_khz": sorted({(d["min_khz"], d["max_khz"]) for d in pstates["uncore"].values()}),
        "elc": sorted({tuple(d["elc"].get(f) for f in ELC_ORDER) for d in pstates["uncore"].values() if d.get("elc")}),
        "policies": len(pstates["policies"]),
    }


# ---------------------------------------------------------------------------------------------
# A profile's CPU frequency fields -> the sysfs writes, decided on what the host shows
# ---------------------------------------------------------------------------------------------

FIELDS = ("governor", "min_khz", "max_khz", "turbo", "epp", "epb", "uncore_min_khz", "uncore_max_khz",
          "elc_low_percent", "elc_high_percent", "elc_high_enable", "elc_floor_khz")
# The efficiency latency control of TPMI uncore domains (Granite Rapids, Sierra Forest): below the
# low threshold of utilisation the uncore runs at the floor, above the high one it ramps up.
ELC_ORDER = ("elc_low_threshold_percent", "elc_high_threshold_percent", "elc_high_threshold_enable",
             "elc_floor_freq_khz")
ELC_FILES = {"elc_low_percent": "elc_low_threshold_percent", "elc_high_percent": "elc_high_threshold_percent",
             "elc_high_enable": "elc_high_threshold_enable", "elc_floor_khz": "elc_floor_freq_khz"}
# x86_energy_perf_policy's and the kernel's names for EPB values (Documentation/admin-guide/pm/
# intel_epb.rst): a name is written as its number.
EPB_NAMES = {"performance": 0, "balance-performance": 4, "normal": 6, "balance-power": 8, "power": 15}
FREQ_WORDS = ("min", "max", "base")
# intel_pstate shows a number it has a name for as that name (show_energy_performance_preference);
# balance_performance is 128 unless the CPU model sets another value (then asking 128 where the
# host shows balance_performance is a write each run: give the name).
EPP_NUMBERS = {"performance": 0, "balance_performance": 128, "balance_power": 192, "power": 255}
NUMERIC = ("min_khz", "max_khz", "uncore_min_khz", "uncore_max_khz", "epp", "epb", "elc_low_percent",
           "elc_high_percent", "elc_floor_khz")
PERCENT = re.compile(r"^(\d{1,3})%$")


class FieldError(ValueError):
    """A profile field whose value has the wrong type or shape (before any host is read)."""


def check_field(name, value):
    """The value of one field as plan() uses it (a number given as text, as a template renders
    one, is that number); FieldError naming the field otherwise."""
    if name in NUMERIC and isinstance(value, str) and value.isascii() and value.isdigit():
        try:
            value = parse_int(value, name, 0, MAX_KHZ)
        except ParseError as exc:
            raise FieldError(str(exc))
    if name in ("min_khz", "max_khz", "uncore_min_khz", "uncore_max_khz", "elc_floor_khz"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise FieldError("%s: give kHz as a whole number, min, max, base or a percentage like 50%%, not %r"
                             % (name, value))
        if isinstance(value, int):
            if not 0 < value <= MAX_KHZ:
                raise FieldError("%s: %d kHz is not in 1..%d" % (name, value, MAX_KHZ))
        elif value not in FREQ_WORDS and not (PERCENT.match(value) and int(PERCENT.match(value).group(1)) <= 100):
            raise FieldError("%s: %r is not kHz, min, max, base nor a percentage 0%%..100%%" % (name, value[:40]))
        if name.startswith(("uncore", "elc")) and isinstance(value, str) and value == "base":
            raise FieldError("%s: the uncore has no base frequency; give kHz, min, max or a percentage" % name)
    elif name in ("turbo", "elc_high_enable"):
        if not isinstance(value, bool):
            raise FieldError("%s: give true or false, not %r" % (name, value))
    elif name in ("elc_low_percent", "elc_high_percent"):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
            raise FieldError("%s: give a whole percentage 0..100, not %r" % (name, value))
    elif name == "governor":
        if not isinstance(value, str) or not NAME.match(value):
            raise FieldError("governor: %r is not a governor's name" % (value,))
    elif name == "epp":
        if isinstance(value, bool) or not (isinstance(value, int) and 0 <= value <= 255
                                           or isinstance(value, str) and NAME.match(value)):
            raise FieldError("epp: give a preference's name or a number 0..255, not %r" % (value,))
    elif name == "epb":
        if isinstance(value, bool) or not (isinstance(value, int) and 0 <= value <= 15 or value in EPB_NAMES):
            raise FieldError("epb: give 0..15 or one of %s, not %r" % (", ".join(EPB_NAMES), value))
    else:
        raise FieldError("%s: not a CPU frequency field (%s)" % (name, ", ".join(FIELDS)))
    return value


def check_together(fields):
    """What checked fields (check_field's values) say together that needs no host, before a host is
    read: a minimum above its maximum when both are kHz, uncore kHz off the 100 MHz steps, the ELC's
    low threshold above its high one. FieldError naming the fields; the same rules on values that
    need the host's range (min, max, base, a percentage) are plan()'s."""
    for low, high in (("min_khz", "max_khz"), ("uncore_min_khz", "uncore_max_khz")):
        lo, hi = fields.get(low), fields.get(high)
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            raise FieldError("%s, %s: the minimum %d kHz would be above the maximum %d kHz" % (low, high, lo, hi))
    for name in ("uncore_min_khz", "uncore_max_khz", "elc_floor_khz"):
        value = fields.get(name)
        if isinstance(value, int) and value % UNCORE_STEP_KHZ:
            raise FieldError("%s: %d kHz is not a multiple of %d (the uncore is set in 100 MHz steps)"
                             % (name, value, UNCORE_STEP_KHZ))
    low, high = fields.get("elc_low_percent"), fields.get("elc_high_percent")
    if low is not None and high is not None and low > high:
        raise FieldError("elc_low_percent, elc_high_percent: the low threshold %d %% would be above the high one "
                         "%d %%" % (low, high))


def _khz(value, lo, hi, base):
    """A frequency field's value in kHz for a range lo..hi (cpuinfo's, or the uncore's initial)."""
    if isinstance(value, int):
        return value
    if value == "min":
        return lo
    if value == "max":
        return hi
    if value == "base":
        return base
    return lo + (hi - lo) * int(PERCENT.match(value).group(1)) // 100


def plan(pstates, fields):
    """The writes a profile's CPU frequency ``fields`` need on a host that shows ``pstates``
    (read_pstates): ``(writes, problems)``, writes a list of ``(path, new, old)`` in the order to
    make them (a new minimum above the old maximum raises the maximum first), problems a list of
    sentences naming the field and what the host allows. A field absent or None leaves its knob
    as it is. Writes nothing; when problems is not empty the caller must not write either."""
    fields = {k: check_field(k, v) for k, v in fields.items() if v is not None}
    writes, problems = [], []
    policies = pstates["policies"]
    needs_policy = [f for f in ("governor", "min_khz", "max_khz", "epp") if f in fields]
    if needs_policy and not policies:
        problems.append("%s: this host has no cpufreq driver (no /sys/devices/system/cpu/cpufreq/policy*)"
                        % ", ".join(needs_policy))
    # turbo first: intel_pstate's no_turbo moves cpuinfo_max_freq, which the ranges are then within
    _plan_turbo(pstates, fields, writes, problems)
    for number in sorted(policies):
        _plan_policy(pstates, number, fields, writes, problems)
    _plan_epb(pstates, fields, writes, problems)
    _plan_uncore(pstates, fields, writes, problems)
    _plan_elc(pstates, fields, writes, problems)
    # one sentence per field and cause, not one per CPU
    seen, unique = set(), []
    for p in problems:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return (writes if not unique else []), unique


def _plan_policy(pstates, number, fields, writes, problems):
    p = pstates["policies"][number]
    d = "%s/policy%d" % (CPUFREQ, number)
    governor = fields.get("governor", p["governor"])
    if "governor" in fields:
        if governor not in p["governors"]:
            offered = ", ".join(p["governors"]) or "none"
            problems.append("governor: %s offers %s, not %s" % (p["driver"], offered, governor))
        elif governor != p["governor"]:
            writes.append((d + "/scaling_governor", governor, p["governor"]))
    asked = {}
    for key in ("min", "max"):
        field = key + "_khz"
        if field in fields and fields[field] == "base" and p["base_khz"] is None:
            problems.append("%s: base needs base_frequency, which %s does not show" % (field, p["driver"]))
        elif field in fields:
            asked[key] = (field, fields[field])
    _plan_range(asked, p["cpuinfo_min_khz"], p["cpuinfo_max_khz"], p["base_khz"],
                {"min": p["min_khz"], "max": p["max_khz"]}, "%s/scaling_%%s_freq" % d,
                ("min_khz", "the CPUs allow", "cpuinfo_min_freq..cpuinfo_max_freq"), writes, problems)
    if "epp" in fields:
        _plan_epp(pstates, p, d, governor, fields["epp"], writes, problems)


def _plan_epp(pstates, p, d, governor, epp, writes, problems):
    if p["epp"] is None:
        passive = " (passive)" if p["driver"] == "intel_cpufreq" else ""
        problems.append("epp: %s%s shows no energy_performance_preference (EPP needs intel_pstate with HWP "
                        "or amd-pstate in active mode)" % (p["driver"], passive))
        return
    if isinstance(epp, int):
        if p["driver"] != "intel_pstate":
            problems.append("epp: %s takes a name (%s), not a number" % (p["driver"], ", ".join(p["epps"] or [])))
            return
    elif epp not in (p["epps"] or []):
        problems.append("epp: %s offers %s, not %s" % (p["driver"], ", ".join(p["epps"] or []) or "none", epp))
        return
    if governor == "performance" and p["driver"] in ("intel_pstate", "amd-pstate-epp") and \
            epp not in ("performance", 0):
        # intel_pstate.rst: with the performance governor the EPP is 0 and a write of anything else
        # fails (EBUSY); amd-pstate-epp refuses the same ("EPP cannot be set under performance policy")
        problems.append("epp: under the performance governor %s takes only performance%s, not %s"
                        % (p["driver"], " (0)" if p["driver"] == "intel_pstate" else "", epp))
        return
    same = str(epp) == str(p["epp"]) or EPP_NUMBERS.get(p["epp"], -1) == epp
    # a governor switch makes intel_pstate and amd-pstate-epp put an EPP of their own back (the one
    # saved for that governor): what the host shows now says nothing of what it will show then
    switched = governor != p["governor"] and p["driver"] in ("intel_pstate", "amd-pstate-epp")
    if not same or switched:
        writes.append((d + "/energy_performance_preference", str(epp), str(p["epp"])))


def _plan_turbo(pstates, fields, writes, problems):
    if "turbo" not in fields:
        return
    intel = pstates["intel_pstate"]
    if intel and intel.get("no_turbo") is not None:
        new = "0" if fields["turbo"] else "1"
        if new != str(intel["no_turbo"]):
            writes.append((INTEL_PSTATE + "/no_turbo", new, str(intel["no_turbo"])))
    elif pstates["boost"] is not None:
        new = "1" if fields["turbo"] else "0"
        if new != str(pstates["boost"]):
            writes.append((CPUFREQ + "/boost", new, str(pstates["boost"])))
    else:
        problems.append("turbo: this host shows neither intel_pstate/no_turbo nor cpufreq/boost")


def _plan_epb(pstates, fields, writes, problems):
    if "epb" not in fields:
        return
    if not pstates["epb"]:
        problems.append("epb: this host shows no energy_perf_bias (an Intel CPU with the EPB MSR has one per CPU)")
        return
    want = EPB_NAMES.get(fields["epb"], fields["epb"])
    for cpu in sorted(pstates["epb"]):
        if pstates["epb"][cpu] != want:
            writes.append(("%s/cpu%d/power/energy_perf_bias" % (CPU, cpu), str(want), str(pstates["epb"][cpu])))


def _plan_uncore(pstates, fields, writes, problems):
    asked = [f for f in ("uncore_min_khz", "uncore_max_khz") if f in fields]
    if not asked:
        return
    domains = pstates["uncore"]
    # TPMI domains where the host has them (its legacy package directories then stand for all of a
    # package's domains at once); the legacy ones otherwise
    names = sorted(n for n, u in domains.items() if u["layout"] == "tpmi") or sorted(domains)
    if not names:
        problems.append("%s: this host shows no intel_uncore_frequency domains" % ", ".join(asked))
        return
    for n in names:
        u = domains[n]
        lo = u["initial_min_khz"] if u["initial_min_khz"] is not None else u["min_khz"]
        hi = u["initial_max_khz"] if u["initial_max_khz"] is not None else u["max_khz"]
        _plan_range({f[len("uncore_"):-len("_khz")]: (f, fields[f]) for f in asked}, lo, hi, None,
                    {"min": u["min_khz"], "max": u["max_khz"]}, "%s/%s/%%s_freq_khz" % (UNCORE, n),
                    ("uncore_min_khz", "the uncore allows", "initial_min..initial_max"), writes, problems,
                    step=UNCORE_STEP_KHZ)


def _plan_elc(pstates, fields, writes, problems):
    asked = [f for f in ELC_FILES if f in fields]
    if not asked:
        return
    names = sorted(n for n, u in pstates["uncore"].items() if u["layout"] == "tpmi" and u.get("elc"))
    if not names:
        problems.append("%s: this host's uncore has no efficiency latency control (TPMI uncore domains with elc_* "
                        "files: Granite Rapids, Sierra Forest)" % ", ".join(asked))
        return
    for n in names:
        u = pstates["uncore"][n]
        elc = u["elc"]
        low = fields.get("elc_low_percent", elc.get(ELC_FILES["elc_low_percent"]))
        high = fields.get("elc_high_percent", elc.get(ELC_FILES["elc_high_percent"]))
        if low is not None and high is not None and low > high:
            problems.append("elc_low_percent, elc_high_percent: the low threshold %d %% would be above the high "
                            "one %d %%" % (low, high))
            continue
        for field in asked:
            name = ELC_FILES[field]
            if name not in elc:
                problems.append("%s: %s/%s has no %s" % (field, UNCORE, n, name))
                continue
            value = fields[field]
            if field == "elc_high_enable":
                value = 1 if value else 0
            elif field == "elc_floor_khz":
                lo, hi = u["initial_min_khz"] or 0, u["initial_max_khz"] or MAX_KHZ
                value = _stepped(field, value, _khz(value, lo, hi, None), UNCORE_STEP_KHZ, problems)
                if value is None:
                    continue
                if not lo <= value <= hi:
                    problems.append("elc_floor_khz: %d kHz is outside what the uncore allows, %d..%d kHz "
                                    "(initial_min..initial_max)" % (value, lo, hi))
                    continue
            if value != elc[name]:
                writes.append(("%s/%s/%s" % (UNCORE, n, name), str(value), str(elc[name])))


# The uncore driver keeps its frequencies in 100 MHz steps (it divides what is written by
# UNCORE_FREQ_KHZ_MULTIPLIER and shows the quotient times it again).
UNCORE_STEP_KHZ = 100000


def _stepped(field, value, khz, step, problems):
    """khz on the uncore's 100 MHz steps: a given number off them is refused (it would read back
    otherwise and be written again on every run), a computed one (min, max, a percentage) is
    rounded down."""
    if not step or not khz % step:
        return khz
    if isinstance(value, int):
        problems.append("%s: %d kHz is not a multiple of %d (the uncore is set in 100 MHz steps)" % (field, khz, step))
        return None
    return khz - khz % step


def _plan_range(asked, lo, hi, base, current, path, words, writes, problems, step=None):
    """A minimum and/or maximum in kHz (``asked``: {"min"|"max": (field, value)}) within lo..hi,
    written in the order the kernel takes them: a new minimum above the old maximum raises the
    maximum first, otherwise the minimum goes first. ``path % "min"`` is the file; ``words``: the
    minimum field's name, who allows lo..hi, and what lo..hi are (for the sentences)."""
    min_field, who, bounds = words
    new = {}
    for key, (field, value) in asked.items():
        khz = _stepped(field, value, _khz(value, lo, hi, base), step, problems)
        if khz is None:
            continue
        if not lo <= khz <= hi:
            problems.append("%s: %d kHz is outside what %s, %d..%d kHz (%s)" % (field, khz, who, lo, hi, bounds))
        else:
            new[key] = khz
    low, high = new.get("min", current["min"]), new.get("max", current["max"])
    if low > high:
        problems.append("%s, %s: the minimum %d kHz would be above the maximum %d kHz"
                        % (min_field, min_field.replace("min", "max"), low, high))
        return
    for key in (("max", "min") if low > current["max"] else ("min", "max")):
        if key in new and new[key] != current[key]:
            writes.append((path % key, str(new[key]), str(current[key])))


# ---------------------------------------------------------------------------------------------
# The undo record: what a knob held before fleetnap first wrote it, and how state=absent puts it back
# ---------------------------------------------------------------------------------------------

RECORD_VERSION = 1
# The files plan() writes, and so the only ones a record may name (its values go back into sysfs).
KNOB = re.compile(r"^/sys/devices/system/cpu/(?:"
                  r"cpufreq/policy\d{1,4}/(?:scaling_governor|scaling_min_freq|scaling_max_freq|"
                  r"energy_performance_preference)|intel_pstate/no_turbo|cpufreq/boost|"
                  r"cpu\d{1,4}/power/energy_perf_bias|"
                  r"intel_uncore_frequency/(?:package_\d{2}_die_\d{2}|uncore\d{2,4})/(?:min|max)_freq_khz|"
                  r"intel_uncore_frequency/uncore\d{2,4}/elc_(?:low_threshold_percent|high_threshold_percent|"
                  r"high_threshold_enable|floor_freq_khz))$")
KNOB_VALUE = re.compile(r"^(?:\d{1,9}|[a-z][a-z0-9_-]{0,39})$")


def remembered(record, writes):
    """The record after ``writes`` ((path, new, old) from plan()): a knob keeps the value it held
    before fleetnap first wrote it (a later profile never overwrites it); None when nothing new."""
    values = dict((record or {}).get("values", {}))
    added = False
    for path, _new, old in writes:
        if path not in values:
            values[path] = old
            added = True
    return {"version": RECORD_VERSION, "values": values} if added else None


def check_record(doc, where):
    """The record as remembered() writes it, or PstateError naming the field: its values are
    written back into sysfs by state=absent, so a hand-edited or corrupt one is refused."""
    if not isinstance(doc, dict) or set(doc) != {"version", "values"}:
        raise PstateError("%s: must be a JSON object with version and values, got %s" % (where, repr(doc)[:80]))
    if doc["version"] != RECORD_VERSION or isinstance(doc["version"], bool):
        raise PstateError("%s: version must be %d, got %r" % (where, RECORD_VERSION, doc["version"]))
    values = doc["values"]
    if not isinstance(values, dict) or len(values) > 4 * MAX_CPUS + 2 * MAX_UNCORE + 2:
        raise PstateError("%s: values must be an object of sysfs paths, got %s" % (where, repr(values)[:80]))
    for path, value in values.items():
        if not KNOB.match(path):
            raise PstateError("%s: %r is not a CPU frequency file fleetnap writes" % (where, path[:100]))
        if not isinstance(value, str) or not KNOB_VALUE.match(value):
            raise PstateError("%s: values[%r] must be a number or a name as sysfs shows it, got %s"
                              % (where, path, repr(value)[:60]))
    return doc


def restore(pstates, record):
    """The writes that put back what ``record`` (check_record'ed) kept, on a host that shows
    ``pstates`` now: ``(writes, problems, gone)``; gone lists the recorded files the host no longer
    has (a policy or domain that went away, an inactive policy), problems what cannot be written
    back (a kept value that is no number). Turbo first, governor before EPP, a policy's or domain's
    minimum and maximum in the order the kernel takes them."""
    values = record["values"]
    writes, problems, seen = [], [], set()

    def want(path, now):
        seen.add(path)
        if path in values and values[path] != str(now):
            writes.append((path, values[path], str(now)))

    def span(path_fmt, current, lo, hi, field):
        asked = {}
        for key in ("min", "max"):
            path = path_fmt % key
            if path in values:
                seen.add(path)
                if not values[path].isdigit():
                    problems.append("%s: kept %r, not kHz" % (path, values[path]))
                    continue
                asked[key] = (field % key, int(values[path]))
        _plan_range(asked, lo, hi, None, current, path_fmt, (field % "min", "the host allows", "its range now"),
                    writes, problems)

    # turbo first (intel_pstate's no_turbo moves cpuinfo_max_freq); the kept frequencies are the
    # kernel's own earlier values: not bounded by today's range, the kernel clamps them itself
    intel = pstates["intel_pstate"] or {}
    if intel.get("no_turbo") is not None:
        want(INTEL_PSTATE + "/no_turbo", intel["no_turbo"])
    if pstates["boost"] is not None:
        want(CPUFREQ + "/boost", pstates["boost"])
    for number in sorted(pstates["policies"]):
        p = pstates["policies"][number]
        d = "%s/policy%d" % (CPUFREQ, number)
        switched = len(writes)
        want(d + "/scaling_governor", p["governor"])
        switched = len(writes) > switched and p["driver"] in ("intel_pstate", "amd-pstate-epp")
        span(d + "/scaling_%s_freq", {"min": p["min_khz"], "max": p["max_khz"]}, 0, MAX_KHZ,
             "policy%d scaling_%%s_freq" % number)
        epp = d + "/energy_performance_preference"
        if p["epp"] is not None:
            want(epp, p["epp"])
            if switched and epp in values and not (writes and writes[-1][0] == epp):
                # the governor switch puts an EPP of the driver's own back: write the kept one after it
                writes.append((epp, values[epp], str(p["epp"])))
    for cpu in sorted(pstates["epb"]):
        want("%s/cpu%d/power/energy_perf_bias" % (CPU, cpu), pstates["epb"][cpu])
    for n in sorted(pstates["uncore"]):
        u = pstates["uncore"][n]
        lo = u["initial_min_khz"] if u["initial_min_khz"] is not None else 0
        hi = u["initial_max_khz"] if u["initial_max_khz"] is not None else MAX_KHZ
        span("%s/%s/%%s_freq_khz" % (UNCORE, n), {"min": u["min_khz"], "max": u["max_khz"]}, lo, hi,
             "uncore %s %%s_freq_khz" % n)
        for name, now in sorted((u.get("elc") or {}).items()):
            want("%s/%s/%s" % (UNCORE, n, name), now)
    gone = sorted(set(values) - seen)
    return writes, problems, gone


def wanted(pstates, fields):
    """``(path, value)`` for every file a profile's ``fields`` set, with the value ``pstates`` (the
    host read after the writes) shows: what a check after a wake compares with. Only the files
    plan() would write (TPMI uncore domains where there are any, the turbo file the host has)."""
    fields = {k: v for k, v in fields.items() if v is not None}
    out = []
    keys = (("governor", "scaling_governor", "governor"), ("min_khz", "scaling_min_freq", "min_khz"),
            ("max_khz", "scaling_max_freq", "max_khz"), ("epp", "energy_performance_preference", "epp"))
    for number in sorted(pstates["policies"]):
        p = pstates["policies"][number]
        for field, name, key in keys:
            if field in fields and p[key] is not None:
                out.append(("%s/policy%d/%s" % (CPUFREQ, number, name), str(p[key])))
    if "turbo" in fields:
        intel = pstates["intel_pstate"] or {}
        if intel.get("no_turbo") is not None:
            out.append((INTEL_PSTATE + "/no_turbo", str(intel["no_turbo"])))
        elif pstates["boost"] is not None:
            out.append((CPUFREQ + "/boost", str(pstates["boost"])))
    if "epb" in fields:
        out += [("%s/cpu%d/power/energy_perf_bias" % (CPU, cpu), str(v)) for cpu, v in sorted(pstates["epb"].items())]
    domains = pstates["uncore"]
    names = sorted(n for n, u in domains.items() if u["layout"] == "tpmi") or sorted(domains)
    for n in names:
        for key in ("min", "max"):
            if "uncore_%s_khz" % key in fields:
                out.append(("%s/%s/%s_freq_khz" % (UNCORE, n, key), str(domains[n]["%s_khz" % key])))
        for field, name in sorted(ELC_FILES.items()):
            if field in fields and name in (domains[n].get("elc") or {}):
                out.append(("%s/%s/%s" % (UNCORE, n, name), str(domains[n]["elc"][name])))
    return out


def applied(pstates, writes):
    """A copy of ``pstates`` as it reads once ``writes`` ((path, new, old), plan()'s or restore()'s)
    are made: what check mode predicts (a real run reads the host again instead)."""
    out = dict(pstates, policies={n: dict(p) for n, p in pstates["policies"].items()},
               intel_pstate=dict(pstates["intel_pstate"]) if pstates["intel_pstate"] else None,
               epb=dict(pstates["epb"]), uncore={n: dict(u) for n, u in pstates["uncore"].items()})
    policy_keys = {"scaling_governor": "governor", "scaling_min_freq": "min_khz", "scaling_max_freq": "max_khz",
                   "energy_performance_preference": "epp"}
    for path, new, _old in writes:
        rel = path[len(CPU) + 1:].split("/")
        value = int(new) if new.isdigit() else new
        if rel[0] == "cpufreq" and rel[1].startswith("policy"):
            out["policies"][int(rel[1][len("policy"):])][policy_keys[rel[2]]] = value
        elif rel == ["cpufreq", "boost"]:
            out["boost"] = value
        elif rel == ["intel_pstate", "no_turbo"]:
            out["intel_pstate"]["no_turbo"] = value
        elif rel[0].startswith("cpu") and rel[1:] == ["power", "energy_perf_bias"]:
            out["epb"][int(rel[0][3:])] = value
        elif rel[0] == "intel_uncore_frequency" and rel[2].startswith("elc_"):
            out["uncore"][rel[1]]["elc"] = dict(out["uncore"][rel[1]]["elc"], **{rel[2]: value})
        elif rel[0] == "intel_uncore_frequency":
            out["uncore"][rel[1]][rel[2].replace("_freq_khz", "_khz")] = value
    return out


__all__ = ["FIELDS", "FieldError", "PstateError", "UnsafeFileError", "applied", "check_field", "check_record", "plan",
           "read_pstates", "remembered", "restore", "summary", "wanted"]
