# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The latency profile checked again after a wake (issue 38), where Python runs anyway (pm_cycle
after each measured suspend/resume cycle).

fleetnap_profile keeps ``WANT`` ("PATH VALUE" lines: every file the profile set, with the value
the kernel showed after the write; ``#metrics_dir DIR`` when the profile publishes metrics). A
file that shows anything else after a wake is written back and counted per knob in ``COUNTS``
and, with a metrics directory, in ``fleetnap_profile_drift_total``. gear_member's put-back after a
park does the same in POSIX sh (roles/gear_member/templates/unpark.sh.j2, no Python on the
host there); tests/unit/test_gear_member_precheck.py runs both on one tree and compares them.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.fleetnap.fileio import RECORD, HostFsError
from ansible.module_utils.fleetnap.persist import STATE_DIR
from ansible.module_utils.fleetnap.sysfs import write_file_atomic

WANT = STATE_DIR + "/profile.want"
COUNTS = STATE_DIR + "/drift.counts"
PROM = "fleetnap_profile_drift.prom"
CPU = "/sys/devices/system/cpu/"
# The exact shapes of the files a profile sets, by knob (the sh in unpark.sh.j2 checks the same
# shapes component by component); anything else in WANT is not followed.
SHAPES = (
    ("cstate_disable", re.compile(r"cpu\d+/cpuidle/state\d+/disable")),
    ("epb", re.compile(r"cpu\d+/power/energy_perf_bias")),
    ("governor", re.compile(r"cpufreq/policy\d+/scaling_governor")),
    ("frequency", re.compile(r"cpufreq/policy\d+/scaling_(?:min|max)_freq")),
    ("epp", re.compile(r"cpufreq/policy\d+/energy_performance_preference")),
    ("turbo", re.compile(r"cpufreq/boost|intel_pstate/no_turbo")),
    ("uncore", re.compile(r"intel_uncore_frequency/(?:package_\d\d_die_\d\d/(?:min|max)_freq_khz|"
                          r"uncore\d+/(?:min_freq_khz|max_freq_khz|elc_low_threshold_percent|"
                          r"elc_high_threshold_percent|elc_high_threshold_enable|elc_floor_freq_khz))")),
)
# a value as sysfs shows these files: a number or a name
VALUE = re.compile(r"[a-z0-9_-]+")
COUNT_LINE = re.compile(r"^([a-z_]{1,40}) (\d{1,18})$")


def knob(path):
    """The knob a file of WANT belongs to, or None for a line the check does not follow."""
    if not path.startswith(CPU):
        return None
    rest = path[len(CPU):]
    for name, pattern in SHAPES:
        if pattern.fullmatch(rest):
            return name
    return None


def counts(fs):
    out = {}
    for line in (fs.read(COUNTS, "", limit=RECORD) or "").splitlines():
        m = COUNT_LINE.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def recheck(fs, module=None):
    """Compare every file of WANT with what the host shows and write back what drifted. Returns
    {"put_back": {knob: files}, "stuck": {knob: files}} (both empty when nothing drifted or there
    is no WANT). Nothing is written in check mode (``module.check_mode``)."""
    put_back, stuck = {}, {}
    text = fs.read(WANT, limit=RECORD)
    if not text:
        return {"put_back": put_back, "stuck": stuck}
    metrics_dir = None
    for line in text.splitlines():
        if line.startswith("#metrics_dir /"):
            metrics_dir = line[len("#metrics_dir "):]
            continue
        if not line or line.startswith("#") or " " not in line:
            continue
        path, value = line.split(" ", 1)
        k = knob(path)
        if k is None or not VALUE.fullmatch(value) or not fs.exists(path) or fs.isdir(path):
            continue
        try:
            if fs.read(path) == value:
                continue
        except (HostFsError, ValueError):
            pass
        if module is not None and module.check_mode:
            put_back[k] = put_back.get(k, 0) + 1
            continue
        try:
            fs.write_raw(path, value)
            put_back[k] = put_back.get(k, 0) + 1
        except (IOError, OSError):
            stuck[k] = stuck.get(k, 0) + 1
    if put_back and not (module is not None and module.check_mode):
        counts_now = counts(fs)
        for k, n in put_back.items():
            counts_now[k] = counts_now.get(k, 0) + n
        body = "".join("%s %d\n" % (k, counts_now[k]) for k in sorted(counts_now))
        write_file_atomic(fs, COUNTS, body, 0o644)
        if metrics_dir and fs.isdir(metrics_dir):
            prom = ("# HELP fleetnap_profile_drift_total Files of the latency profile found changed after a wake and "
                    "written back.\n# TYPE fleetnap_profile_drift_total counter\n")
            prom += "".join('fleetnap_profile_drift_total{knob="%s"} %d\n' % (k, counts_now[k])
                            for k in sorted(counts_now))
            write_file_atomic(fs, os.path.join(metrics_dir, PROM), prom, 0o644)
    return {"put_back": put_back, "stuck": stuck}


def said(result):
    """The line the sh script prints ("" when nothing drifted)."""
    def part(d):
        return ", ".join("%s %d" % (k, d[k]) for k in sorted(d))
    if not result["put_back"] and not result["stuck"]:
        return ""
    words = []
    if result["put_back"]:
        words.append("put back " + part(result["put_back"]))
    if result["stuck"]:
        words.append("could not put back " + part(result["stuck"]))
    return "profile drift: " + "; ".join(words)
