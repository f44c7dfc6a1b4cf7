"""Which state this verify checks: the phase prepare or side_effect wrote (present, then absent).
Only that phase's test file runs (molecule names every test file on pytest's command line, so the
other phase's tests are deselected, and counted as such); a missing or unknown phase fails the
collection."""

from __future__ import annotations

import os
from pathlib import Path

_PHASE_FILE = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "ptp_clock-phase"
if not _PHASE_FILE.is_file():
    raise RuntimeError("%s is missing: run the scenario through molecule (prepare writes it)" % _PHASE_FILE)
PHASE = _PHASE_FILE.read_text().strip()
if PHASE not in ("present", "absent"):
    raise RuntimeError("%s says %r, not present or absent" % (_PHASE_FILE, PHASE))
OTHER = "test_ptp_clock_%s.py" % ("absent" if PHASE == "present" else "present")


def pytest_collection_modifyitems(config, items):
    other = [item for item in items if item.path.name == OTHER]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item.path.name != OTHER]
    assert items, "no test of phase %s was collected" % PHASE

TAI = ("python3 -c 'import time; print(round(time.clock_gettime(time.CLOCK_TAI)"
       " - time.clock_gettime(time.CLOCK_REALTIME)))'")


def same_boot_as_prepare(host) -> None:
    """prepare marked lab6's boot in /run: a guest restarted since (its TAI offset back at 0) is
    named as such instead of failing as a wrong offset."""
    mark = host.file("/run/fleetnap-molecule-ptp_clock")
    boot = host.file("/proc/sys/kernel/random/boot_id").content_string.strip()
    assert mark.exists and mark.content_string.strip() == boot, \
        "lab6 was restarted after prepare (boot %s, prepare's mark %r)" % (
            boot, mark.content_string.strip() if mark.exists else None)
