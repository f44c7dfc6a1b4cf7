#!/usr/bin/env python3
"""Write tests/data/pstates/NAME.txt from a checkout of Intel's pepc (how these files were made).

    python3 tests/data/pstates/extract.py /path/to/pepc [NAME ...]

For each machine of tests/data/cpuidle and turin0 (the one machine of pepc's with amd-pstate in
EPP mode; its C-states are not in tests/data/cpuidle), or those named, reads pepc's
``tests/emul-data/NAME/sys/inlinefiles.txt`` and keeps the lines of the CPU frequency policy:
cpufreq (per policy and global), intel_pstate, amd_pstate, each CPU's energy_perf_bias and the
uncore frequency (legacy ``package_XX_die_YY`` and TPMI ``uncoreNN`` directories, ELC included).
Dropped: what only moves (``scaling_cur_freq``, ``cpuinfo_cur_freq``, ``cpuinfo_avg_freq``,
``current_freq_khz``, ``stats/``) and ``scaling_setspeed``.

The values are pepc's, byte for byte. The ``ro``/``rw`` column is not: pepc's emulation marks most
of these files ``rw`` (and lists a few twice, ``rw`` then ``ro``); here it is the mode the kernel
gives the attribute (``WRITABLE`` below, from cpufreq.c, intel_pstate.c, amd-pstate.c and
intel-uncore-frequency), so that a captured tree refuses a write where a host would. A path pepc
lists twice with two values is an error (none is).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPUIDLE = HERE.parent / "cpuidle"
# Beside the machines of tests/data/cpuidle: amd-pstate-epp (AMD EPYC 9005).
EXTRA = ["turin0"]

KEEP = re.compile(r"^/sys/devices/system/cpu/(cpufreq/|intel_pstate/|amd_pstate/|intel_uncore_frequency/"
                  r"|cpu\d+/power/energy_perf_bias$)")
DROP = re.compile(r"/(scaling_cur_freq|cpuinfo_cur_freq|cpuinfo_avg_freq|current_freq_khz|scaling_setspeed)$|/stats/"
                  r"|^/sys/devices/system/cpu/cpu\d+/cpufreq/")
# The attributes the kernel makes writable (0644); every other kept attribute is 0444.
WRITABLE = re.compile(
    r"/cpufreq/policy\d+/(scaling_governor|scaling_min_freq|scaling_max_freq|energy_performance_preference"
    r"|boost|cpb)$"
    r"|/cpufreq/boost$|/cpufreq/schedutil/rate_limit_us$"
    r"|/cpu\d+/power/energy_perf_bias$"
    r"|/intel_pstate/(status|no_turbo|min_perf_pct|max_perf_pct|hwp_dynamic_boost|energy_efficiency)$"
    r"|/amd_pstate/(status|prefcore)$"
    r"|/intel_uncore_frequency/[^/]+/(min_freq_khz|max_freq_khz|elc_[a-z_]+)$")


def pstate_lines(inline: str, name: str) -> list[str]:
    seen: dict[str, str] = {}
    for line in inline.splitlines():
        if not line or line.startswith("#"):
            continue
        mode, path, value = line.split("|", 2)
        if mode not in ("ro", "rw") or not KEEP.match(path) or DROP.search(path):
            continue
        if path in seen and seen[path] != value:
            raise SystemExit("%s: %s has two values in pepc's data (%r, %r)" % (name, path, seen[path], value))
        seen[path] = value
    return ["%s|%s|%s" % ("rw" if WRITABLE.search(path) else "ro", path, seen[path]) for path in sorted(seen)]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    pepc = Path(argv[0])
    names = argv[1:] or sorted([p.stem for p in CPUIDLE.glob("*.txt")] + EXTRA)
    commit = subprocess.run(["git", "-C", str(pepc), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()

    def show(name, path):
        return subprocess.run(["git", "-C", str(pepc), "show", "HEAD:tests/emul-data/%s/%s" % (name, path)],
                              capture_output=True, text=True, check=True).stdout

    for name in names:
        inline = show(name, "sys/inlinefiles.txt")
        model = [ln.split(":", 1)[1].strip() for ln in show(name, "proc/cpuinfo").splitlines()
                 if ln.startswith("model name")][:1]
        head = ["# machine: %s (source: intel/pepc %s tests/emul-data/%s, BSD-3-Clause; the CPU frequency "
                "part, tests/data/pstates/extract.py)" % (name, commit[:12], name),
                "# cmdline: %s" % show(name, "proc/cmdline").strip(), "# cpu: %s" % (model[0] if model else "?")]
        lines = pstate_lines(inline, name)
        (HERE / ("%s.txt" % name)).write_text("\n".join(head + lines) + "\n")
        print("%s: %d lines" % (name, len(lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
