"""The simulated host's Wake-on-LAN socket filter (lab/simhost.py): the kernel drops a magic
packet that names another MAC before the host's program wakes, and passes everything that
``magic_packet_mac`` has to judge itself. Real sockets on the loopback, no mock."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[2] / "lab"
spec = importlib.util.spec_from_file_location("simhost_under_test", LAB / "simhost.py")
simhost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(simhost)

OWN = "52:54:00:0a:0b:0c"
OTHER = "52:54:00:0a:0b:0d"
END = b"end" + b"\x00" * 120


def magic(mac: str, lead: bytes = b"") -> bytes:
    raw = bytes(int(p, 16) for p in mac.split(":"))
    return lead + b"\xff" * 6 + raw * 16


def received(payloads: list[bytes], mac: str = OWN) -> list[bytes]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        simhost.attach_filter(rx, simhost.own_mac_filter(mac))
        rx.bind(("127.0.0.1", 0))
        for p in payloads:
            tx.sendto(p, rx.getsockname())
        tx.sendto(END, rx.getsockname())            # not magic: always passed, marks the end
        rx.settimeout(5.0)
        got = []
        while True:
            data = rx.recv(2048)
            if data == END:
                return got
            got.append(data)
    finally:
        rx.close()
        tx.close()


def test_the_kernel_drops_a_magic_packet_for_another_mac_and_passes_the_own():
    own, other = magic(OWN), magic(OTHER)
    assert received([other, own, other]) == [own]
    assert simhost.magic_packet_mac(own) == OWN


def test_what_the_program_must_judge_itself_is_passed():
    # the sync stream not at the start, a non-magic datagram; a MAC that differs only in its last
    # byte or its first is dropped, and so is a datagram too short to name a MAC (the filter's
    # load past its end), which magic_packet_mac refuses as well
    late = magic(OTHER, lead=b"\x00\x01")
    plain = b"hello" + b"\x00" * 100
    short = b"\xff" * 4
    assert received([late, short, plain]) == [late, plain]
    assert simhost.magic_packet_mac(short) is None
    assert simhost.magic_packet_mac(late) == OTHER           # Python still says whose it is
    first = magic("53:54:00:0a:0b:0c")
    assert received([first, magic("52:54:00:0a:0b:0e")]) == []


@pytest.mark.parametrize("mac", ["52:54:00:0a:0b", "zz:54:00:0a:0b:0c", ""])
def test_not_a_mac_is_refused(mac):
    with pytest.raises(ValueError):
        simhost.own_mac_filter(mac)
