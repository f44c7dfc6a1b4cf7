"""pm_cycle refuses what its options alone make wrong before it reads /sys/power, and a
/sys/power it cannot use by name.

The table runs through tests/badinput.py (one forked server for the table, each case forked as
AnsiballZ runs a module) in a mount namespace of its own whose /sys/power is a tmpfs holding FIFOs
as ``state`` and ``mem_sleep``: a module that read them first would be refused naming the FIFO
(or crash), so the option's own message proves nothing was read. Nothing can suspend this machine
there: /sys/power is not the kernel's. pm_cycle's other bad inputs are in test_bad_inputs.py.
"""

from __future__ import annotations

import os
import shutil

import pytest

from badinput import assert_refused, case_params, run_table

POWER_FIFOS = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs fnpower /sys/power && mkfifo /sys/power/state /sys/power/mem_sleep && exec "$@"',
               "sh"]

TABLE = [
    ("wake external, cycles 2", {"wake": "external", "cycles": 2},
     "cycles must be >= 1, and 1 with wake=external (got 2)"),
    ("wake external, cycles 100, freeze", {"wake": "external", "cycles": 100, "mode": "freeze"},
     "cycles must be >= 1, and 1 with wake=external (got 100)"),
    ("wake external, cycles 3, mem_sleep s2idle", {"wake": "external", "cycles": 3, "mem_sleep": "s2idle"},
     "cycles must be >= 1, and 1 with wake=external (got 3)"),
    # right options: /sys/power is read, and its FIFO refused by name (it used to end in a traceback)
    ("options right, /sys/power/state a FIFO", {"wake": "external"},
     "/sys/power/state is a FIFO, not a regular file: fleetnap does not open it"),
]
CASES = case_params({"pm_cycle": TABLE})


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="a mount namespace with a /sys/power of its own needs root and unshare")
@pytest.mark.parametrize("module,index,words", CASES)
def test_options_refused_before_sys_power_is_read(tmp_path_factory, module, index, words):
    assert_refused(run_table(module, TABLE, tmp_path_factory, wrap=POWER_FIFOS, key="pm_cycle_sys_power_fifos"),
                   index, words)
