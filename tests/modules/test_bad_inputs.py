"""Bad input through Ansible, module by module: refused with a message naming what is wrong, never
a traceback, never a hang, nothing changed.

Each module has a table: ``(case, args, words the message must contain)``, run by
tests/badinput.py (these tables through Ansible itself: one ansible-playbook per table, a pytest
test per case; the other test_bad_inputs_*.py and test_hostile_*.py tables run each case in a
forked process as AnsiballZ runs a module, badinput.py says why) which asserts: failed;
the words in the message; no Python traceback in the message or on stderr; done within BOUND_S
seconds; and the directory the module could write to (``{tmp}`` in args is replaced by a case's
own) hashed before and after with no difference. A new module gets the same treatment by adding
its table to TABLES here or in a test_bad_inputs_*.py file of its own.

Modules that act on this machine when the input is good (pm_cycle suspends it) get a second bad
option in every case, checked after the one under test, so a check that stops working fails the
case without suspending anything.
"""

from __future__ import annotations

import pytest

from badinput import INF, NAN, assert_refused, case_params, run_table
from conftest import REPO

HOST_WAIT = [
    ("timeout nan", {"host": "127.0.0.1", "port": 9, "timeout": NAN}, "option timeout: must be a finite number"),
    ("timeout inf", {"host": "127.0.0.1", "port": 9, "timeout": INF}, "option timeout: must be a finite number"),
    ("timeout -inf", {"host": "127.0.0.1", "port": 9, "timeout": "-inf"}, "option timeout: must be a finite"),
    ("timeout 0", {"host": "127.0.0.1", "port": 9, "timeout": 0}, "option timeout: must be > 0"),
    ("timeout a year", {"host": "127.0.0.1", "port": 9, "timeout": 31536000}, "option timeout: must be > 0 and <= 86400"),
    ("timeout text", {"host": "127.0.0.1", "port": 9, "timeout": "soon"}, "timeout"),
    ("interval nan", {"host": "127.0.0.1", "port": 9, "interval": NAN}, "option interval: must be a finite number"),
    ("interval 0", {"host": "127.0.0.1", "port": 9, "interval": 0}, "option interval: must be > 0"),
    ("probe_timeout inf", {"host": "127.0.0.1", "port": 9, "probe_timeout": INF}, "option probe_timeout: must be a finite"),
    ("silent_for nan", {"host": "127.0.0.1", "port": 9, "state": "silent", "silent_for": NAN},
     "option silent_for: must be a finite number"),
    ("silent_for negative", {"host": "127.0.0.1", "port": 9, "state": "silent", "silent_for": -1},
     "option silent_for: must be >= 0"),
    ("since nan", {"host": "127.0.0.1", "port": 9, "since": NAN}, "option since: must be a finite number"),
    ("port 0", {"host": "127.0.0.1", "port": 0}, "option port: must be >= 1 and <= 65535"),
    ("port 70000", {"host": "127.0.0.1", "port": 70000}, "option port: must be >= 1 and <= 65535"),
    ("host with a space", {"host": "lab 1", "port": 22}, "option host: must be a host name or address"),
    ("host empty", {"host": "", "port": 22}, "option host: must be a host name or address"),
    ("state unknown", {"host": "127.0.0.1", "state": "asleep"}, "state"),
]

# The second bad option (collect) is checked after the table: if a check in the table stops
# working, the case fails on it instead of suspending this machine.
_GUARD = {"collect": "not-a-run-id"}
PM_CYCLE = [
    ("collect_timeout_s nan", dict(_GUARD, collect_timeout_s=NAN), "option collect_timeout_s: must be a finite number"),
    ("collect_timeout_s inf", dict(_GUARD, collect_timeout_s=INF), "option collect_timeout_s: must be a finite number"),
    ("collect_timeout_s 0", dict(_GUARD, collect_timeout_s=0), "option collect_timeout_s: must be > 0"),
    ("collect_timeout_s a day", dict(_GUARD, collect_timeout_s=86400), "option collect_timeout_s: must be > 0 and <= 3600"),
    ("pause_s nan", dict(_GUARD, pause_s=NAN), "option pause_s: must be a finite number"),
    ("pause_s negative", dict(_GUARD, pause_s=-1), "option pause_s: must be >= 0"),
    ("start_delay_s inf", dict(_GUARD, start_delay_s=INF), "option start_delay_s: must be a finite number"),
    ("start_delay_s too long", dict(_GUARD, start_delay_s=61), "option start_delay_s: must be >= 0 and <= 60"),
    ("cycles 0", dict(_GUARD, cycles=0), "option cycles: must be >= 1 and <= 100"),
    ("cycles a million", dict(_GUARD, cycles=1000000), "option cycles: must be >= 1 and <= 100"),
    ("rtc_wake_s 1", dict(_GUARD, rtc_wake_s=1), "option rtc_wake_s: must be >= 2"),
    ("rtc_wake_s a week", dict(_GUARD, rtc_wake_s=604800), "option rtc_wake_s: must be >= 2 and <= 3600"),
    ("top negative", dict(_GUARD, top=-1), "option top: must be >= 0"),
    ("log_dir relative", dict(_GUARD, log_dir="var/lib/fleetnap"), "option log_dir: must be an absolute path"),
    ("log_dir with ..", dict(_GUARD, log_dir="{tmp}/../../etc"), "option log_dir: '..' is not allowed"),
    ("mode unknown", dict(_GUARD, mode="hibernate"), "mode"),
    ("collect not a run id", {"collect": "../../etc"}, "collect must be the run_id"),
]

BMC = {"bmc_address": "127.0.0.1", "bmc_port": 9, "bmc_user": "admin", "bmc_password": "Fn7-pw-c9e1b4",
       "state": "status", "rate_limit_dir": "{tmp}/rl"}
BMC_POWER = [
    ("read_power a word", dict(BMC, read_power="sometimes"), "read_power"),
    ("timeout nan", dict(BMC, timeout=NAN), "option timeout: must be a finite number"),
    ("timeout inf", dict(BMC, timeout=INF), "option timeout: must be a finite number"),
    ("timeout 0", dict(BMC, timeout=0), "option timeout: must be > 0"),
    ("timeout two hours", dict(BMC, timeout=7200), "option timeout: must be > 0 and <= 3600"),
    ("poll_interval nan", dict(BMC, poll_interval=NAN), "option poll_interval: must be a finite number"),
    ("poll_interval negative", dict(BMC, poll_interval=-1), "option poll_interval: must be >= 0"),
    ("min_interval inf", dict(BMC, min_interval=INF), "option min_interval: must be a finite number"),
    ("retries 1000", dict(BMC, retries=1000), "option retries: must be >= 0 and <= 10"),
    ("session_timeout 0", dict(BMC, session_timeout=0), "option session_timeout: must be >= 1"),
    ("session_timeout an hour", dict(BMC, session_timeout=3600), "option session_timeout: must be >= 1 and <= 60"),
    ("session_retries 0", dict(BMC, session_retries=0), "option session_retries: must be >= 1"),
    ("cipher_suite 99", dict(BMC, cipher_suite=99), "option cipher_suite: must be >= 0 and <= 17"),
    ("bmc_port 0", dict(BMC, bmc_port=0), "option bmc_port: must be >= 1 and <= 65535"),
    ("bmc_address with a space", dict(BMC, bmc_address="bmc 1"), "option bmc_address: must be a host name or address"),
    ("bmc_user with a newline", dict(BMC, bmc_user="admin\nroot"), "option bmc_user: must be a user name"),
    # IPMI's limits, refused by the option's check before ipmitool is looked for (ipmi.validate_target's)
    ("bmc_user of 17 characters", dict(BMC, bmc_user="a" * 17), "option bmc_user: must be a user name of 1-16"),
    ("bmc_user an option", dict(BMC, bmc_user="-Hevil"), "option bmc_user: must be a user name"),
    ("bmc_address an option", dict(BMC, bmc_address="-oProxy"), "option bmc_address: must be a host name or address"),
    ("rate_limit_dir relative", dict(BMC, rate_limit_dir="cache/bmc"), "option rate_limit_dir: must be an absolute path"),
    ("state unknown", dict(BMC, state="reboot"), "state"),
]

TABLES = {"host_wait": HOST_WAIT, "pm_cycle": PM_CYCLE, "bmc_power": BMC_POWER}
CASES = case_params(TABLES)


def test_every_module_has_a_table():
    """Every module in library/ has its table of bad inputs in one of the test_bad_inputs*.py files."""
    import test_bad_inputs_gear_state
    import test_bad_inputs_readers
    import test_bad_inputs_redfish
    import test_bad_inputs_slurm_conf
    import test_bad_inputs_slurm_nodes
    import test_bad_inputs_writers
    assert test_bad_inputs_gear_state._TABLE                      # that file's table is gear_state's
    assert test_bad_inputs_slurm_conf.TABLE                       # and that one's slurm_conf's
    assert test_bad_inputs_slurm_nodes.TABLE                      # and that one's slurm_nodes'
    tabled = (set(TABLES) | set(test_bad_inputs_readers.TABLES) | set(test_bad_inputs_writers.TABLES)
              | set(test_bad_inputs_redfish.TABLES) | {"gear_state", "slurm_conf", "slurm_nodes"})
    modules = {p.stem for p in (REPO / "library").glob("*.py")}
    assert modules == tabled, "without a table: %s" % sorted(modules - tabled)


def test_every_table_has_at_least_15_cases():
    for module, table in TABLES.items():
        assert len(table) >= 15, module


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    assert_refused(run_table(module, TABLES[module], tmp_path_factory, via="ansible"), index, words)
