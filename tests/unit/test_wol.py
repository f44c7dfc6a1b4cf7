"""Unit tests of module_utils/fleetnap/wol.py (magic packets, MACs, SecureOn, UDP send)."""

from __future__ import annotations

import socket

import pytest

from ansible.module_utils.fleetnap import wol
from ansible.module_utils.fleetnap.wol import WolError

MAC = "52:54:00:ab:cd:ef"


@pytest.mark.parametrize("text", ["52:54:00:AB:CD:EF", "52-54-00-ab-cd-ef", "5254.00ab.cdef", " 52:54:00:ab:cd:ef "])
def test_normalize_accepts_three_notations(text):
    assert wol.normalize_mac(text) == MAC


@pytest.mark.parametrize("text", ["52:54:00:ab:cd", "52:54:00:ab:cd:ef:00", "525400abcdef", "52:54-00:ab:cd:ef",
                                  "5254.00ab.cdeg", "52:54:00:ab:cd:eg", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00",
                                  "01:00:5e:00:00:01", "", None, 0x525400abcdef])
def test_normalize_rejects(text):
    with pytest.raises(WolError) as e:
        wol.normalize_mac(text)
    assert repr(text)[:10] in str(e.value) or str(text) in str(e.value)


def test_packet_is_6_ff_and_16_macs():
    pkt = wol.build_packet(MAC)
    assert len(pkt) == 102
    assert pkt[:6] == b"\xff" * 6
    assert pkt[6:] == bytes([0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]) * 16
    assert wol.parse_packet(pkt) == (MAC, b"")


@pytest.mark.parametrize("pw,raw", [
    ("11:22:33:44:55:66", b"\x11\x22\x33\x44\x55\x66"),
    ("11-22-33-44-55-66", b"\x11\x22\x33\x44\x55\x66"),
    ("192.168.1.7", b"\xc0\xa8\x01\x07"),
    ("deadbeef", b"\xde\xad\xbe\xef"),
    ("DEADBEEF0102", b"\xde\xad\xbe\xef\x01\x02"),
])
def test_secureon_password(pw, raw):
    pkt = wol.build_packet(MAC, pw)
    assert len(pkt) == 102 + len(raw)
    assert pkt[102:] == raw
    assert wol.parse_packet(pkt) == (MAC, raw)


@pytest.mark.parametrize("pw", ["11:22:33", "300.1.1.1", "deadbee", "secret", "11:22:33:44:55:6g"])
def test_secureon_password_rejected(pw):
    with pytest.raises(WolError, match="SecureOn password is not valid"):
        wol.build_packet(MAC, pw)


@pytest.mark.parametrize("data,match", [
    (b"\xff" * 101, "101 bytes"),
    (b"\xfe" + b"\xff" * 5 + bytes(6) * 16, "6 x 0xFF"),
    (b"\xff" * 6 + bytes(range(6)) * 15 + bytes(6), "16 times"),
])
def test_parse_packet_rejects(data, match):
    with pytest.raises(WolError, match=match):
        wol.parse_packet(data)


def test_send_reaches_a_real_socket():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(2)
    port = rx.getsockname()[1]
    try:
        pkts = [wol.build_packet(MAC), wol.build_packet("52:54:00:00:00:01", "1.2.3.4")]
        assert wol.send_packets(pkts, "127.0.0.1", port, repeat=2, interval=0) == 4
        got = [rx.recv(200) for _ in range(4)]
    finally:
        rx.close()
    assert got == pkts * 2


def test_send_errors():
    with pytest.raises(WolError, match="cannot resolve WoL destination 'no-such-host.invalid'"):
        wol.send_packets([wol.build_packet(MAC)], "no-such-host.invalid", 9)
    with pytest.raises(WolError, match="port 0"):
        wol.send_packets([wol.build_packet(MAC)], "127.0.0.1", 0)
    with pytest.raises(WolError, match="repeat"):
        wol.send_packets([wol.build_packet(MAC)], "127.0.0.1", 9, repeat=0)
