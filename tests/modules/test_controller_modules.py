"""host_wait, fleetnap_fact, textfile_metrics, and pm_cycle's refusals and collect branches, through Ansible, for real."""

import importlib.util
import json
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import run_module
from greeting import serving


@pytest.fixture
def server():
    with serving(answering=False) as srv:
        yield srv


def test_host_wait_answering_measures_from_since(server, module_runner):
    """Silent at the module's first probe, answering half a second after it (whenever the module
    started: a timer from the test's start raced a slow ansible start): at least two probes, and
    the time counted from ``since``, before the module started."""
    since = time.time()
    server.answer_after_first = 0.5
    res = module_runner("host_wait", {"host": "127.0.0.1", "port": server.port, "since": since, "timeout": 20})
    assert not res.failed, res.get("msg")
    assert res["probes"] >= 2
    assert 0.5 <= res["elapsed_s"] < 15
    assert res["elapsed_s"] == pytest.approx(res["at"] - since, abs=0.05)      # counted from since


def test_host_wait_silent_needs_lasting_silence(server, module_runner):
    server.answering.set()
    threading.Timer(1.0, server.answering.clear).start()
    t0 = time.time()
    res = module_runner("host_wait", {"host": "127.0.0.1", "port": server.port, "state": "silent",
                                      "silent_for": 2, "timeout": 20})
    assert not res.failed, res.get("msg")
    assert res["at"] - t0 >= 0.9 and time.time() - res["at"] >= 1.9


def test_host_wait_times_out_clearly(server, module_runner):
    res = module_runner("host_wait", {"host": "127.0.0.1", "port": server.port, "timeout": 2})
    assert res.failed
    assert "127.0.0.1:%d did not become answering within 2 s" % server.port in res["msg"]


def test_fleetnap_fact_merges(tmp_path, module_runner):
    path = tmp_path / "facts.d" / "fleetnap.fact"
    path.parent.mkdir()
    path.write_text(json.dumps({"wake_latency_us": {"C1": 19.3}}))
    args = {"path": str(path), "data": {"resume": {"kernel_ms": 120.5, "end_to_end_ms": 2300}}}
    res = module_runner("fleetnap_fact", args, check=True, diff=True)
    assert res.changed and json.loads(path.read_text()) == {"wake_latency_us": {"C1": 19.3}}
    res = module_runner("fleetnap_fact", args)
    assert res.changed
    assert json.loads(path.read_text()) == {"wake_latency_us": {"C1": 19.3},
                                            "resume": {"kernel_ms": 120.5, "end_to_end_ms": 2300}}
    assert not module_runner("fleetnap_fact", args).changed
    res = module_runner("fleetnap_fact", {"path": str(path), "recursive": True,
                                          "data": {"wake_latency_us": {"C1E": 21.8}}})
    assert json.loads(path.read_text())["wake_latency_us"] == {"C1": 19.3, "C1E": 21.8}
    path.write_text("{broken")
    res = module_runner("fleetnap_fact", args)
    assert res.failed and "not valid JSON" in res["msg"] and path.read_text() == "{broken"


def test_textfile_metrics_atomic_and_idempotent(tmp_path, module_runner):
    args = {"name": "resume", "directory": str(tmp_path), "metrics": [
        {"name": "fleetnap_resume_kernel_seconds", "help": "h", "samples": [{"labels": {"stat": "max"}, "value": 0.5}]}]}
    res = module_runner("textfile_metrics", args)
    assert res.changed and res["path"] == str(tmp_path / "fleetnap_resume.prom")
    assert 'fleetnap_resume_kernel_seconds{stat="max"} 0.5' in Path(res["path"]).read_text()
    assert not module_runner("textfile_metrics", args).changed
    assert [p.name for p in tmp_path.iterdir()] == ["fleetnap_resume.prom"]  # no temporary left
    bad = dict(args, metrics=[{"name": "resume_seconds", "help": "h"}])
    res = module_runner("textfile_metrics", bad)
    assert res.failed and "must match" in res["msg"]


@pytest.mark.skipif("mem" in Path("/sys/power/state").read_text().split(), reason="this kernel can suspend")
def test_pm_cycle_refuses_a_host_that_cannot_suspend(module_runner):
    """This machine's kernel offers no sleep state: a clear error before anything is touched."""
    res = module_runner("pm_cycle", {"cycles": 1})
    assert res.failed and "will not suspend: /sys/power/state offers nothing, not 'mem'" in res["msg"]
    res = module_runner("pm_cycle", {"wake": "external", "cycles": 2})
    assert res.failed and "1 with wake=external" in res["msg"]


def test_pm_cycle_collect_refuses_what_no_start_left_here(module_runner):
    """collect only reads a cycle that wake=external started on this host, and says so otherwise."""
    res = module_runner("pm_cycle", {"collect": "../../etc"})
    assert res.failed and "collect must be the run_id a wake=external call returned" in res["msg"]
    res = module_runner("pm_cycle", {"collect": "0badc0de"})
    assert res.failed and "no suspend cycle 0badc0de was started here" in res["msg"]
    assert "/run/fleetnap/pm_cycle/0badc0de.json missing" in res["msg"]


# The collect branches that follow a start: the start's shell is unit-tested on the real /bin/sh
# (tests/unit/test_pm_cycle_script.py) and records exactly these files; here they are laid out
# as it leaves them, in the module's real state directory, and collect runs through Ansible.
_spec = importlib.util.spec_from_file_location("pm_cycle_module", Path(__file__).resolve().parents[2] / "library/pm_cycle.py")
pm_cycle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pm_cycle)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the pm_cycle state directory is root's")


@pytest.fixture
def started_cycle():
    """A cycle as a wake=external start leaves it (meta written); returns (run_id, files, write)."""
    run_id = secrets.token_hex(4)
    files = dict((k, Path(v)) for k, v in pm_cycle.state_files(run_id).items())   # the module's own layout
    Path(pm_cycle.STATE_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)

    def write(restores=(), started_ago=0.0, delay=1.0):
        files["json"].write_text(json.dumps({
            "run_id": run_id, "marker": "fleetnap-pm-cycle %s 1" % run_id, "mode": "mem",
            "restores": [list(r) for r in restores], "mem_sleep": "deep",
            "started_at": time.time() - started_ago, "start_delay_s": delay}))
    yield run_id, files, write
    for path in files.values():
        if path.exists():
            path.unlink()


@needs_root
def test_pm_cycle_collect_reports_a_failed_suspend_write_and_clears_it(module_runner, started_cycle):
    run_id, files, write = started_cycle
    write()
    files["t0"].touch()
    files["rc"].write_text("1\n")
    files["err"].write_text("sh: 1: printf: I/O error: Device or resource busy\n")
    res = module_runner("pm_cycle", {"collect": run_id})
    assert res.failed and not res.changed
    assert ("suspend cycle %s failed: writing 'mem' to /sys/power/state exited 1: sh: 1: printf: I/O error: "
            "Device or resource busy (the host did not suspend" % run_id) in res["msg"]
    assert not any(p.exists() for p in files.values())


@needs_root
def test_pm_cycle_collect_gives_up_on_a_write_that_never_returns(module_runner, started_cycle):
    """Suspend started (t0) but no exit status within collect_timeout_s: said so, the state kept."""
    run_id, files, write = started_cycle
    write()
    files["t0"].touch()
    t0 = time.monotonic()
    res = module_runner("pm_cycle", {"collect": run_id, "collect_timeout_s": 1})
    assert res.failed and ("the suspend of cycle %s started but the write to /sys/power/state has not returned "
                           "after 1 s" % run_id) in res["msg"]
    assert time.monotonic() - t0 >= 1
    # Kept: the shell may still finish (a slow resume), and a later collect can read it.
    assert files["json"].exists() and files["t0"].exists()


# The module runs with a /sys/power of its own: a tmpfs mounted over it in a private mount
# namespace, holding mem_sleep as a start left it (this machine's kernel has no mem_sleep); what
# the module wrote there is printed after it exits.
POWER_NS = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs fnpower /sys/power && printf deep > /sys/power/mem_sleep && "$@"; rc=$?; '
            'printf "\\nMEM_SLEEP_AFTER=%s\\n" "$(cat /sys/power/mem_sleep)" >&2; exit $rc', "sh"]


@needs_root
def test_pm_cycle_collect_cancels_an_armed_cycle_and_puts_back_what_it_changed(started_cycle, tmp_path):
    """Collected before its suspend started: the waiting shell is stopped, the changes undone."""
    run_id, files, write = started_cycle
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 60; : fleetnap-pm-cycle %s" % run_id])
    try:
        files["pid"].write_text("%d\n" % shell.pid)
        write(restores=[("/sys/power/mem_sleep", "s2idle")], started_ago=0.5, delay=20)
        res = run_module("pm_cycle", {"collect": run_id}, wrap=POWER_NS)
        assert res.failed and ("the suspend of cycle %s had not started when it was collected" % run_id) in res["msg"]
        assert "delay 20.0 s); it was cancelled and nothing is left changed" in res["msg"]
        assert shell.wait(timeout=10) == -15          # SIGTERM, from the module
        assert "MEM_SLEEP_AFTER=s2idle" in res["_stderr"], res["_stderr"]
        assert not any(p.exists() for p in files.values())
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()


@needs_root
@pytest.mark.parametrize("case, record, words", [
    ("a restore of another file", "VICTIM", "is not one a cycle makes"),
    ("a restore with a value no attribute holds", [["/sys/power/mem_sleep", "mem; reboot"]], "is not one a cycle makes"),
    ("restores not a list", {"/sys/power/mem_sleep": "deep"}, "restores must be a list"),
    ("mode hibernate", "MODE", "mode must be mem or freeze, got 'hibernate'"),
    ("started_at NaN", "NAN", "NaN is not a JSON number"),
    ("not JSON", "{", "cannot be used"),
    ("not UTF-8", b'{"mode": "\xff"}', "is not UTF-8 text"),
    ("a list", "[]", "must hold a JSON object"),
])
def test_pm_cycle_collect_refuses_a_corrupt_record(started_cycle, tmp_path, case, record, words):
    """collect writes the record's restores back into sysfs: a record it did not write that way is
    refused, naming the file, and nothing is written or removed."""
    run_id, files, write = started_cycle
    victim = tmp_path / "victim"
    victim.write_text("as it was\n")
    write(restores=[("/sys/power/mem_sleep", "s2idle")], started_ago=0.5, delay=20)
    good = json.loads(files["json"].read_text())
    if record == "VICTIM":
        good["restores"] = [[str(victim), "0"]]
    elif record == "MODE":
        good["mode"] = "hibernate"
    elif record == "NAN":
        good["started_at"] = float("nan")
    elif isinstance(record, list):
        good["restores"] = record
    elif isinstance(record, dict):
        good["restores"] = record
    text = record if isinstance(record, (str, bytes)) and record not in ("VICTIM", "MODE", "NAN") else json.dumps(good)
    (files["json"].write_bytes if isinstance(text, bytes) else files["json"].write_text)(text)
    before = files["json"].read_bytes()
    res = run_module("pm_cycle", {"collect": run_id}, wrap=POWER_NS)
    assert res.failed and words in res["msg"], res.get("msg")
    assert "the record of cycle %s cannot be used" % run_id in res["msg"] and str(files["json"]) in res["msg"]
    assert "Traceback" not in str(res) and "MODULE FAILURE" not in res["msg"]
    assert "MEM_SLEEP_AFTER=deep" in res["_stderr"]         # nothing written to /sys/power
    assert victim.read_text() == "as it was\n" and files["json"].read_bytes() == before
