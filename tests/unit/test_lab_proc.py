"""lab/proc.py: the process handling the lab and the fleet simulator share, on real processes,
sockets and files of this machine (no root, no lab)."""

import os
import signal
import socket
import stat
import sys
import threading
import time

import pytest

import bmc
from proc import (all_processes, file_lock, pid_alive, port_free, port_held, read_pid, running, spawn, ssh_greets,
                  terminate, wait_for, wait_gone, wait_port, write_atomic, write_private)

SLEEPER = "import signal, sys, time\n%s\nprint('ready', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def start(tmp_path):
    """start(ignore_term=False) -> (Popen, log): a Python sleeper in a session of its own,
    ready (it printed); whatever is left is killed afterwards."""
    started = []

    def _start(ignore_term=False):
        log = tmp_path / ("out%d.log" % len(started))
        code = SLEEPER % ("signal.signal(signal.SIGTERM, signal.SIG_IGN)" if ignore_term else "")
        child = spawn([sys.executable, "-c", code, "fleetnap-proc-test-%s" % tmp_path.name], log)
        started.append(child)
        assert wait_for(lambda: "ready" in log.read_text(), 20, child=child), log.read_text()
        return child, log

    yield _start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_spawn_runs_detached_and_terminate_stops_it(start, tmp_path):
    child, _ = start()
    assert os.getsid(child.pid) == child.pid          # a session of its own: it outlives its parent
    pidfile = tmp_path / "sleeper.pid"
    pidfile.write_text("%d\n" % child.pid)
    assert pid_alive(pidfile, "fleetnap-proc-test-%s " % tmp_path.name) == child.pid
    assert pid_alive(pidfile, "some other program") is None
    assert child.pid in dict(all_processes())
    assert os.getpid() not in dict(all_processes())
    assert terminate([child.pid], timeout=5) == []
    # not reaped yet: a zombie has exited, so it neither runs nor answers for its pid file
    assert not running(child.pid)
    assert pid_alive(pidfile, "fleetnap-proc-test") is None
    assert child.wait(5) == -signal.SIGTERM


def test_terminate_kills_what_ignores_sigterm(start):
    child, _ = start(ignore_term=True)
    t0 = time.monotonic()
    assert terminate([child.pid], timeout=0.5) == []
    assert time.monotonic() - t0 >= 0.5
    assert child.wait(5) == -signal.SIGKILL


def test_wait_gone_returns_what_still_runs(start):
    child, _ = start()
    assert wait_gone([child.pid], 0.2) == [child.pid]
    assert terminate([]) == [] and wait_gone([], 5) == []


def test_wait_for_stops_when_the_child_exits(tmp_path):
    child = spawn([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "exit.log")
    t0 = time.monotonic()
    assert wait_for(lambda: False, 20, child=child) is False
    assert child.returncode == 3 and time.monotonic() - t0 < 15
    assert wait_for(lambda: True, 1) is True
    assert wait_for(lambda: False, 0.2) is False


@pytest.mark.parametrize("pid_text, pid", [("123\n", 123), ("123 456\n", 123), ("", None), ("x\n", None)])
def test_read_pid(tmp_path, pid_text, pid):
    (tmp_path / "p.pid").write_text(pid_text)
    assert read_pid(tmp_path / "p.pid") == pid
    assert read_pid(tmp_path / "missing.pid") is None


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
@pytest.mark.parametrize("bind_addr", ["127.0.0.1", "0.0.0.0"])
def test_port_free_and_wait_port(kind, bind_addr):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((bind_addr, 0))
        port = s.getsockname()[1]
        if kind == socket.SOCK_STREAM:
            assert not port_held(port, kind)    # bound, not yet listening: nobody to connect to
            s.listen()
        assert not port_free(port, kind)
        assert port_held(port, kind)
        assert wait_port(port, kind, 5)
    assert port_free(port, kind)
    assert not port_held(port, kind)
    assert not wait_port(port, kind, 0.2)


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free():
    """A guest just stopped (labctl down, then up): its forwarded port's connections, closed by
    the server side, sit in TIME-WAIT; QEMU's hostfwd listens with SO_REUSEADDR (so do sshd and
    the BMCs), binds the port again over them, and so the port is free."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn, _ = listener.accept()
        conn.close()                       # the server closes first: its end goes to TIME-WAIT
        assert client.recv(1) == b""
        client.close()
    assert "%04X" % port in open("/proc/net/tcp").read().upper()    # still in the table
    assert port_free(port, socket.SOCK_STREAM)
    assert not port_held(port, socket.SOCK_STREAM)


def test_wait_port_never_binds_the_port_it_waits_for(monkeypatch):
    """The CI failure of 2026-11-27: wait_port probed by binding the port, and ipmi_sim, binding it
    in the same moment, exited 'Unable to bind to LAN port: Address already in use'."""
    def no_bind(*args):
        raise AssertionError("wait_port bound a socket")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        monkeypatch.setattr(socket.socket, "bind", no_bind)
        assert wait_port(port, socket.SOCK_DGRAM, 5)
        assert not wait_port(port + 1 if port < 65535 else port - 1, socket.SOCK_DGRAM, 0.2)


def _server(greeting: bytes):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.sendall(greeting)
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_ssh_greets():
    for greeting, expected in ((b"SSH-2.0-OpenSSH_9.2\r\n", True), (b"HTTP/1.1 400\r\n", False)):
        srv = _server(greeting)
        try:
            assert ssh_greets("127.0.0.1", srv.getsockname()[1], 5) is expected
        finally:
            srv.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert ssh_greets("127.0.0.1", closed, 1) is False


def test_file_lock_makes_the_second_holder_wait(tmp_path):
    lock = tmp_path / "sub" / "x.lock"
    order = []

    def second():
        with file_lock(lock):
            order.append("second")

    with file_lock(lock):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first")
    t.join(10)
    assert order == ["first", "second"]


def test_write_atomic_and_write_private(tmp_path):
    path = tmp_path / "d" / "table.json"
    write_atomic(path, "one\n")
    write_atomic(path, "two\n")
    assert path.read_text() == "two\n" and sorted(p.name for p in path.parent.iterdir()) == ["table.json"]
    secret = tmp_path / "e" / "lan.conf"
    write_private(secret, "password\n")
    assert secret.read_text() == "password\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert sorted(p.name for p in secret.parent.iterdir()) == ["lan.conf"]


def test_bmc_password_is_generated_once_and_private(tmp_path):
    path = tmp_path / "state" / "bmc-password"
    pw = bmc.password(path)
    assert len(pw) == 16 and pw.isalnum()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert bmc.password(path) == pw


def test_bmc_write_config(tmp_path):
    bmc.write_config(tmp_path, "conf\n")
    assert (tmp_path / "lan.conf").read_text() == "conf\n"
    assert stat.S_IMODE((tmp_path / "lan.conf").stat().st_mode) == 0o600
    assert (tmp_path / "bmc.emu").read_text() == bmc.EMU
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bmc.emu", "lan.conf"]
