"""A TCP service on loopback that greets like sshd, for the tests of what fleetnap asks of a host's
SSH greeting before it acts (host_wait, gear_member)."""

from __future__ import annotations

import contextlib
import socket
import threading


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
        self.answer_after_first = None     # seconds: start answering this long after the first probe

    def run(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            if self.answering.is_set():
                conn.sendall(b"SSH-2.0-fleetnap-test\r\n")
            elif self.answer_after_first is not None:
                threading.Timer(self.answer_after_first, self.answering.set).start()
                self.answer_after_first = None
            conn.close()  # silent: accepts, says nothing (like a sleeping guest behind NAT)


@contextlib.contextmanager
def serving(answering=True):
    """A GreetingServer running for the block: greeting (``answering``) or silent from the start."""
    srv = GreetingServer()
    if answering:
        srv.answering.set()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop.set()
        srv.join()
        srv.sock.close()
