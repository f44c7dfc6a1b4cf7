# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Processes and state files, the way the lab (lab/labctl.py and its parts) and the fleet
simulator (lab/sim.py) handle them: programs started in sessions of their own with their output
appended to a log, pid files checked against /proc, processes stopped with SIGTERM and then
SIGKILL, ports and SSH greetings waited for, state files locked and replaced whole.

Imports nothing of the lab or the simulator: both import it. Callers import its functions by
name (``from proc import terminate``): ``proc`` is also what the lab calls a process handle.
Standard library only (Python 3.11).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------


def proc_state(pid: int) -> str | None:
    """pid's state letter in /proc/PID/stat (R, S, D, Z...), None when there is no such process."""
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """True while pid exists and has not exited (a zombie has)."""
    return proc_state(pid) not in (None, "Z")


def proc_argv(pid: int) -> list[str] | None:
    """pid's command line split at its NUL bytes (so a '' after the last argument; [''] for a
    kernel thread, or while an execve is under way), None when it cannot be read."""
    try:
        return Path("/proc/%d/cmdline" % pid).read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None


def all_processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, proc_argv(pid)) of every process whose command line can be read, except this one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        argv = proc_argv(int(entry.name))
        if argv is not None:
            yield int(entry.name), argv


def read_pid(pidfile: Path) -> int | None:
    """The pid a pid file holds (its first word), None when there is none."""
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pidfile: Path, marker: str) -> int | None:
    """The pid in pidfile if that process runs and its command line (the arguments joined by
    spaces, with a space after the last) contains marker."""
    pid = read_pid(pidfile)
    argv = proc_argv(pid) if pid else None
    if argv is None or not running(pid):
        return None
    return pid if marker in " ".join(argv) else None


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait, at most timeout seconds, until none of pids runs; return the ones still running."""
    left = list(pids)
    end = time.monotonic() + timeout
    while True:
        left = [pid for pid in left if running(pid)]
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.05)


def terminate(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """SIGTERM to pids, SIGKILL to the ones still running after timeout seconds; return the
    ones still running 5 s after that (none, unless a process is stuck in the kernel)."""
    left = list(pids)
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        left = wait_gone(left, wait)
        if not left:
            break
    return left


def spawn(argv: list[str], log: Path, env: dict | None = None, cwd: str | None = None) -> subprocess.Popen:
    """argv started in a session of its own (it outlives the caller), stdin /dev/null, its
    stdout and stderr appended to log."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, env=env, start_new_session=True, close_fds=True)


def wait_for(ready: Callable[[], bool], timeout: float, child: subprocess.Popen | None = None,
             poll: float = 0.1) -> bool:
    """Poll ready() until it says True (True), or timeout seconds pass or child (a process this
    one started) exits (False: child.returncode then tells the two apart)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if child is not None and child.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(poll)
    return False


# ---------------------------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------------------------

def port_free(port: int, kind: int, addr: str = "127.0.0.1") -> bool:
    """True if nothing holds addr:port (kind: socket.SOCK_STREAM for TCP, SOCK_DGRAM for UDP)."""
    with socket.socket(socket.AF_INET, kind) as s:
        if kind == socket.SOCK_STREAM:
            # as QEMU's hostfwd and sshd bind: connections of a guest just stopped, left in
            # TIME-WAIT, do not hold the port (a listener still does)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, port))
        except OSError:
            return False
    return True


def port_held(port: int, kind: int, addr: str = "127.0.0.1") -> bool:
    """True if a socket of this network namespace is bound to addr:port (or to 0.0.0.0:port): a
    UDP socket, or a TCP socket listening. Read from /proc/net/udp or /proc/net/tcp, never by
    binding the port: a probe that binds it can take it in the very moment the program waited
    for binds it (ipmi_sim then exits "Unable to bind to LAN port: Address already in use")."""
    table = "/proc/net/udp" if kind == socket.SOCK_DGRAM else "/proc/net/tcp"
    # The kernel prints the address as the 32-bit word it holds in network order, in host order.
    wanted = {"%08X:%04X" % (int.from_bytes(socket.inet_aton(a), sys.byteorder), port)
              for a in (addr, "0.0.0.0")}
    with open(table, encoding="ascii") as fh:
        next(fh, None)                          # the header line
        for line in fh:
            fields = line.split()
            if len(fields) > 3 and fields[1] in wanted and (kind == socket.SOCK_DGRAM or fields[3] == "0A"):
                return True                     # 0A: TCP_LISTEN
    return False


def wait_port(port: int, kind: int, timeout: float, addr: str = "127.0.0.1",
              child: subprocess.Popen | None = None, poll: float = 0.1) -> bool:
    """wait_for something to hold addr:port (True), at most timeout seconds or until child exits.
    Looks (port_held), never binds: see port_held."""
    return wait_for(lambda: port_held(port, kind, addr), timeout, child=child, poll=poll)


def ssh_greets(addr: str, port: int, timeout: float) -> bool:
    """True if an SSH server greets on addr:port within timeout seconds."""
    try:
        with socket.create_connection((addr, port), timeout=timeout) as s:
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# State files
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive flock on path (created, with its directory) for the with block: one holder
    at a time, the next one waits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_atomic(path: Path, text: str) -> None:
    """Replace path by text at once (through path with the suffix .tmp): a reader sees the old
    file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_private(path: Path, content: str) -> None:
    """Write a 0600 file atomically (created 0600: never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name)
    with os.fdopen(fd, "w") as fh:
        fh.write(content)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
