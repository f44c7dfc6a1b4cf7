"""host_wait, fleetnap_fact, textfile_metrics and pm_cycle's refusals, through Ansible, for real."""

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest


class GreetingServer(threading.Thread):
    """A TCP service on loopback that greets like sshd while ``answering`` is set."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.answering = threading.Event()
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            if self.answering.is_set():
                conn.sendall(b"SSH-2.0-fleetnap-test\r\n")
            conn.close()  # silent: accepts, says nothing (like a sleeping guest behind NAT)


@pytest.fixture
def server():
    srv = GreetingServer()
    srv.start()
    yield srv
    srv.stop.set()
    srv.join()
    srv.sock.close()


def test_host_wait_answering_measures_from_since(server, module_runner):
    since = time.time()
    threading.Timer(1.5, server.answering.set).start()
    res = module_runner("host_wait", {"host": "127.0.0.1", "port": server.port, "since": since, "timeout": 20})
    assert not res.failed, res.get("msg")
    assert 1.4 <= res["elapsed_s"] < 15 and res["probes"] >= 2


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
