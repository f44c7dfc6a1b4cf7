"""wake_on_lan through Ansible, received on a real UDP socket on 127.0.0.1."""

from __future__ import annotations

import socket

import pytest

@pytest.fixture
def run(module_runner):
    return module_runner


MACS = ["52:54:00:12:34:56", "52-54-00-12-34-57", "5254.0012.3458"]
NORMAL = ["52:54:00:12:34:56", "52:54:00:12:34:57", "52:54:00:12:34:58"]


@pytest.fixture
def receiver():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(0.5)
    yield rx
    rx.close()


def drain(rx):
    got = []
    while True:
        try:
            got.append(rx.recv(2048))
        except socket.timeout:
            return got


def magic(mac, pw=b""):
    return b"\xff" * 6 + bytes.fromhex(mac.replace(":", "")) * 16 + pw


def test_sends_exact_magic_packets(run, receiver):
    port = receiver.getsockname()[1]
    res = run("wake_on_lan", {"macs": MACS, "broadcast": "127.0.0.1", "port": port, "repeat": 2})
    assert not res.failed and res.changed
    assert res["macs"] == NORMAL and res["datagrams_sent"] == 6 and res["packet_bytes"] == 102
    got = drain(receiver)
    assert sorted(got) == sorted([magic(m) for m in NORMAL] * 2)
    assert all(len(p) == 102 for p in got)


@pytest.mark.parametrize("password,raw", [("11:22:33:44:55:66", bytes.fromhex("112233445566")),
                                          ("10.20.30.40", bytes([10, 20, 30, 40]))])
def test_secureon_password_appended_and_hidden(run, receiver, password, raw):
    port = receiver.getsockname()[1]
    res = run("wake_on_lan", {"mac": NORMAL[0], "broadcast": "127.0.0.1", "port": port,
                                        "password": password, "repeat": 1})
    assert not res.failed
    assert drain(receiver) == [magic(NORMAL[0], raw)]
    assert res["packet_bytes"] == 102 + len(raw)
    assert password not in str(dict(res))


def test_duplicates_sent_once(run, receiver):
    port = receiver.getsockname()[1]
    res = run("wake_on_lan", {"macs": [NORMAL[0], NORMAL[0].upper(), "52-54-00-12-34-56"],
                                        "broadcast": "127.0.0.1", "port": port, "repeat": 1})
    assert res["macs"] == [NORMAL[0]] and drain(receiver) == [magic(NORMAL[0])]


def test_check_mode_sends_nothing(run, receiver):
    port = receiver.getsockname()[1]
    res = run("wake_on_lan", {"macs": MACS, "broadcast": "127.0.0.1", "port": port}, check=True)
    assert not res.failed and res.changed and res["datagrams_sent"] == 0
    assert drain(receiver) == []


@pytest.mark.parametrize("args,match", [
    ({"macs": [NORMAL[0], "52:54:00:12:34"]}, "'52:54:00:12:34' is not valid"),
    ({"macs": [NORMAL[0]], "password": "secret"}, "SecureOn password is not valid"),
    ({"macs": [NORMAL[0]], "repeat": 0}, "option repeat: must be >= 1"),
    ({"macs": [NORMAL[0]], "broadcast": "no-such-host.invalid"}, "cannot resolve WoL destination"),
])
def test_bad_input_fails_and_sends_nothing(run, receiver, args, match):
    port = receiver.getsockname()[1]
    res = run("wake_on_lan", dict({"broadcast": "127.0.0.1", "port": port}, **args))
    assert res.failed and match in res["msg"]
    assert drain(receiver) == []
