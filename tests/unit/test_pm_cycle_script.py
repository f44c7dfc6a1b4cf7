"""pm_cycle's wake=external shell, run with the real /bin/sh against files in a temporary directory.

The shell is what suspends a host in measure_resume.yml: it must wait until the module (and its
parent) have gone, write the sleep state, record whether the write worked, and put back what the
start changed whether or not it did.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("pm_cycle_module", REPO / "library" / "pm_cycle.py")
pm_cycle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pm_cycle)


def _run(tmp_path, state_path, restores, wait_for=(), delay=0.0):
    files = pm_cycle.state_files("0badc0de", str(tmp_path))
    script = pm_cycle.suspend_script("0badc0de", files, "mem", str(state_path), delay, restores, wait_for)
    return files, subprocess.Popen(["/bin/sh", "-c", script])


def test_the_write_the_times_the_status_and_the_restores(tmp_path):
    state = tmp_path / "state"
    state.write_text("")
    mem_sleep = tmp_path / "mem sleep"          # a path with a space is quoted
    mem_sleep.write_text("deep")
    files, proc = _run(tmp_path, state, [(str(mem_sleep), "s2idle"), (str(tmp_path / "pm_print_times"), "0")])
    assert proc.wait(10) == 0
    assert state.read_text() == "mem"
    assert Path(files["rc"]).read_text() == "0\n" and not Path(files["rc"] + ".tmp").exists()
    assert mem_sleep.read_text() == "s2idle" and (tmp_path / "pm_print_times").read_text() == "0"
    assert os.stat(files["t0"]).st_mtime <= os.stat(files["woke"]).st_mtime
    assert int(Path(files["pid"]).read_text()) == proc.pid
    # The marker in the script is what collect uses to find (and cancel) the shell by its PID.
    assert "# fleetnap-pm-cycle 0badc0de" in pm_cycle.suspend_script("0badc0de", files, "mem", "/x", 1, [], ())


def test_a_failing_write_is_recorded_with_its_message_and_the_restores_still_run(tmp_path):
    mem_sleep = tmp_path / "mem_sleep"
    mem_sleep.write_text("deep")
    files, proc = _run(tmp_path, tmp_path / "no-such-dir" / "state", [(str(mem_sleep), "s2idle")])
    assert proc.wait(10) == 0
    assert Path(files["rc"]).read_text().strip() not in ("", "0")
    assert "no-such-dir" in Path(files["err"]).read_text()
    assert mem_sleep.read_text() == "s2idle"


def test_nothing_is_written_while_the_module_or_its_parent_still_runs(tmp_path):
    state = tmp_path / "state"
    state.write_text("")
    module = subprocess.Popen(["sleep", "2"])
    files, proc = _run(tmp_path, state, [], wait_for=(module.pid, 999999999))
    time.sleep(0.8)
    assert module.poll() is None and not os.path.exists(files["t0"]) and state.read_text() == ""
    module.wait()
    assert proc.wait(10) == 0 and state.read_text() == "mem"
