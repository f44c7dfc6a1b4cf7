# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wake-on-LAN magic packets: MAC parsing, SecureOn passwords, build/parse, UDP send.

A magic packet is 6 bytes of 0xFF followed by the target MAC repeated 16 times (102 bytes),
optionally followed by a SecureOn password of 4 or 6 bytes (106 or 108 bytes), sent as a UDP
datagram (port 9 by convention, 7 also common) to a broadcast or unicast address.

Standard library only.
"""

from __future__ import annotations

import re
import socket
import time

SYNC = b"\xff" * 6
REPEATS = 16
PACKET_LEN = len(SYNC) + 6 * REPEATS  # 102

_COLON = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")
_DASH = re.compile(r"^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2}){5}$")
_DOT = re.compile(r"^[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}$")
_IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")


class WolError(ValueError):
    """Bad MAC, password or address (the message says which and what is accepted)."""


def normalize_mac(text):
    """'aa:bb:cc:dd:ee:ff' for ``aa:bb:..``, ``aa-bb-..`` or ``aabb.ccdd.eeff``; WolError otherwise."""
    if not isinstance(text, str):
        raise WolError("MAC address %r is not a string; write it as aa:bb:cc:dd:ee:ff" % (text,))
    t = text.strip()
    if _COLON.match(t) or _DASH.match(t):
        hexdigits = t.replace(":", "").replace("-", "")
    elif _DOT.match(t):
        hexdigits = t.replace(".", "")
    else:
        raise WolError("MAC address %r is not valid: use aa:bb:cc:dd:ee:ff, aa-bb-cc-dd-ee-ff or "
                       "aabb.ccdd.eeff (12 hex digits)" % (text,))
    hexdigits = hexdigits.lower()
    mac = ":".join(hexdigits[i:i + 2] for i in range(0, 12, 2))
    if mac == "ff:ff:ff:ff:ff:ff" or mac == "00:00:00:00:00:00":
        raise WolError("MAC address %r is the broadcast or null address, not a NIC" % (text,))
    if int(hexdigits[0:2], 16) & 1:
        raise WolError("MAC address %r is a multicast address (odd first byte), not a NIC" % (text,))
    return mac


def mac_bytes(text):
    return bytes.fromhex(normalize_mac(text).replace(":", ""))


def parse_password(text):
    """SecureOn password bytes: 6 bytes as a MAC-style ``aa:bb:cc:dd:ee:ff`` / ``aa-bb-..``,
    4 bytes as dotted decimal ``a.b.c.d`` (ether-wake's forms), or 8/12 plain hex digits."""
    if text is None or text == "":
        return b""
    if not isinstance(text, str):
        raise WolError("SecureOn password must be a string")
    t = text.strip()
    if _COLON.match(t) or _DASH.match(t):
        return bytes.fromhex(t.replace(":", "").replace("-", ""))
    m = _IPV4.match(t)
    if m:
        parts = [int(x) for x in m.groups()]
        if all(0 <= x <= 255 for x in parts):
            return bytes(parts)
    if re.match(r"^[0-9A-Fa-f]{8}$|^[0-9A-Fa-f]{12}$", t):
        return bytes.fromhex(t)
    raise WolError("SecureOn password is not valid: use 6 bytes as aa:bb:cc:dd:ee:ff, 4 bytes as "
                   "a.b.c.d, or 8 or 12 hex digits")


def build_packet(mac, password=None):
    """The magic packet for ``mac`` (102 bytes, plus 4 or 6 password bytes)."""
    pw = password if isinstance(password, bytes) else parse_password(password)
    if len(pw) not in (0, 4, 6):
        raise WolError("SecureOn password must be 4 or 6 bytes, got %d" % len(pw))
    return SYNC + mac_bytes(mac) * REPEATS + pw


def parse_packet(data):
    """(mac, password bytes) from a magic packet; WolError if it is not one."""
    if len(data) not in (PACKET_LEN, PACKET_LEN + 4, PACKET_LEN + 6):
        raise WolError("%d bytes is not a magic packet (102, 106 or 108 bytes)" % len(data))
    if data[:6] != SYNC:
        raise WolError("magic packet does not start with 6 x 0xFF")
    mac = data[6:12]
    if data[6:PACKET_LEN] != mac * REPEATS:
        raise WolError("magic packet does not repeat one MAC 16 times")
    return ":".join("%02x" % b for b in mac), bytes(data[PACKET_LEN:])


def resolve(address, port):
    """(family, sockaddr) for an IPv4/IPv6 address or name; WolError if it does not resolve."""
    if not 0 < int(port) < 65536:
        raise WolError("port %r is not a UDP port (1..65535; WoL uses 9 or 7)" % (port,))
    try:
        infos = socket.getaddrinfo(address, int(port), 0, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    except (socket.gaierror, UnicodeError) as e:
        raise WolError("cannot resolve WoL destination %r: %s" % (address, e))
    family, sockaddr = infos[0][0], infos[0][4]
    return family, sockaddr


def send_packets(packets, address, port=9, repeat=3, interval=0.01, sleep=time.sleep):
    """Send each packet ``repeat`` times to ``address:port``; return datagrams sent.

    SO_BROADCAST is set on IPv4 sockets so limited (255.255.255.255) and directed broadcasts
    work; it has no effect on unicast. Raises WolError naming the destination on failure.
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 100:
        raise WolError("repeat must be a whole number from 1 to 100, got %r" % (repeat,))
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 <= interval <= 10:
        raise WolError("interval must be a number of seconds from 0 to 10, got %r" % (interval,))
    family, sockaddr = resolve(address, port)
    sent = 0
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if family == socket.AF_INET:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        for r in range(repeat):
            for pkt in packets:
                try:
                    sock.sendto(pkt, sockaddr)
                except OSError as e:
                    raise WolError("sending a magic packet to %s port %d failed: %s (check the broadcast "
                                   "address and that a route to it exists)" % (address, port, e.strerror or e))
                sent += 1
            if r + 1 < repeat and interval > 0:
                sleep(interval)
    finally:
        sock.close()
    return sent
