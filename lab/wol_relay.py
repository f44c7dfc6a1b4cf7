#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Wake-on-LAN relay.

Emulated NICs cannot wake a guest, so the relay stands in for the NIC's wake logic: it
receives real magic packets on the host and wakes the guest whose MAC they carry.

Listens on
  - UDP ports LAB_WOL_PORTS (default 9 and 7) on 127.0.0.1 (unicast) and 127.255.255.255
    (the loopback broadcast address: ``wakeonlan -i 127.255.255.255`` arrives here).  Binding
    these two addresses rather than 0.0.0.0 keeps the relay off every other interface.
  - raw Ethernet frames of type 0x0842 on ``lo`` (``etherwake -i lo MAC``).

For every packet it writes one JSON line to lab/state/wol-relay.log: time, transport, source,
port, MAC, host, action (woke / ignored-unknown-mac / ignored-already-running /
ignored-malformed / dropped-by-fault-injection / error) and detail.  Waking: QMP
``system_wakeup`` when QMP says ``suspended``; ``ipmitool ... chassis power on`` (password via
the environment) when the BMC says ``off``.

Fault injection: lab/state/wol-drop holds lines ``MAC COUNT`` (COUNT a number or ``all``);
the next COUNT packets for MAC are dropped and logged as dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the lab's parts (never lab/labctl.py, which starts the relay): state paths, QMP, ipmitool
from guest import bmc_power, ipmi, qmp, qmp_status  # noqa: E402
from layout import STATE, LabError, settings  # noqa: E402
from proc import file_lock, write_atomic  # noqa: E402

ETH_P_WOL = 0x0842
SYNC = b"\xff" * 6


class Malformed(ValueError):
    pass


def parse_magic(data: bytes) -> tuple[str, bytes | None]:
    """(MAC, SecureOn password or None) from a magic packet payload.

    The payload is 6 x 0xFF then the target MAC 16 times, optionally followed by a 4 or 6
    byte SecureOn password (102, 106 or 108 bytes).  Anything else raises Malformed.
    """
    if len(data) not in (102, 106, 108):
        raise Malformed("length %d (a magic packet is 102 bytes, 106/108 with SecureOn)"
                        % len(data))
    if data[:6] != SYNC:
        raise Malformed("no synchronization stream (6 x 0xFF) at the start")
    mac = data[6:12]
    if data[6:102] != mac * 16:
        raise Malformed("the MAC is not repeated 16 times")
    if mac in (b"\xff" * 6, b"\x00" * 6):
        raise Malformed("MAC %s is not a station address" % mac.hex(":"))
    password = data[102:] or None
    return mac.hex(":"), password


class Relay:
    def __init__(self, state: Path):
        self.state = state
        self.log_path = state / "wol-relay.log"
        self.drop_path = state / "wol-drop"
        self.log_lock = threading.Lock()
        self.host_locks: dict[str, threading.Lock] = {}

    # -- bookkeeping -------------------------------------------------------------------------
    def log(self, **entry) -> None:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
                 + ".%03dZ" % (time.time() % 1 * 1000), **entry}
        line = json.dumps(entry, sort_keys=False)
        with self.log_lock, open(self.log_path, "a") as fh:
            fh.write(line + "\n")

    def table(self) -> dict[str, dict]:
        try:
            hosts = json.loads((self.state / "lab.json").read_text())["hosts"]
        except (OSError, ValueError, KeyError):
            return {}
        return {h["wol_mac"].lower(): h for h in hosts}

    def consume_drop(self, mac: str) -> bool:
        """True if a fault-injection entry drops this packet (and count it down)."""
        with file_lock(self.state / ".wol-drop.lock"):
            if not self.drop_path.exists():
                return False
            lines = self.drop_path.read_text().splitlines()
            out, hit = [], False
            for line in lines:
                parts = line.split()
                if not parts or parts[0].lower() != mac or hit:
                    out.append(line)
                    continue
                hit = True
                count = parts[1] if len(parts) > 1 else "1"
                if count == "all":
                    out.append(line)
                elif count.isdigit() and int(count) > 1:
                    out.append("%s %d" % (parts[0], int(count) - 1))
            if hit:
                write_atomic(self.drop_path, "".join(ln + "\n" for ln in out))
            return hit

    # -- the wake decision -------------------------------------------------------------------
    def handle(self, data: bytes, transport: str, source: str, port) -> None:
        base = {"transport": transport, "source": source, "port": port, "bytes": len(data)}
        try:
            mac, password = parse_magic(data)
        except Malformed as exc:
            self.log(**base, mac=None, host=None, action="ignored-malformed", detail=str(exc))
            return
        base["mac"] = mac
        base["secureon"] = password is not None
        host = self.table().get(mac)
        if host is None:
            self.log(**base, host=None, action="ignored-unknown-mac",
                     detail="no lab guest has this MAC")
            return
        base["host"] = host["name"]
        if self.consume_drop(mac):
            self.log(**base, action="dropped-by-fault-injection", detail=str(self.drop_path))
            return
        lock = self.host_locks.setdefault(host["name"], threading.Lock())
        threading.Thread(target=self.wake, args=(host, base, lock), daemon=True).start()

    def wake(self, host: dict, base: dict, lock: threading.Lock) -> None:
        with lock:
            try:
                status = qmp_status(host)
                if status == "suspended":
                    qmp(host["qmp"], "system_wakeup")
                    self.log(**base, action="woke", method="qmp-system_wakeup",
                             detail="was suspended")
                    return
                if status != "off":
                    self.log(**base, action="ignored-already-running",
                             detail="QMP status %s" % status)
                    return
                power = bmc_power(host)
                if power == "off":
                    ipmi(host, "chassis", "power", "on")
                    self.log(**base, action="woke", method="ipmi-power-on",
                             detail="was powered off")
                elif power == "on":
                    self.log(**base, action="ignored-already-running",
                             detail="BMC says on (QEMU starting)")
                else:
                    self.log(**base, action="error", detail="BMC does not answer")
            except (LabError, OSError, ValueError) as exc:
                self.log(**base, action="error", detail=str(exc))


def open_sockets(ports: list[int]) -> list[tuple[socket.socket, str, int | None]]:
    socks = []
    for port in ports:
        for addr in ("127.0.0.1", "127.255.255.255"):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            try:
                s.bind((addr, port))
            except OSError as exc:
                s.close()
                raise SystemExit("wol-relay: cannot bind UDP %s:%d (%s); free it or set "
                                 "LAB_WOL_PORTS" % (addr, port, exc))
            socks.append((s, "udp", port))
    try:
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_WOL))
        raw.bind(("lo", ETH_P_WOL))
        socks.append((raw, "ether", None))
    except OSError as exc:
        print("wol-relay: no raw 0x0842 listener on lo (%s); UDP only" % exc, file=sys.stderr)
    return socks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--state"] and len(argv) == 2:
        # the state directory is in argv so 'ps' shows which lab a relay belongs to
        if Path(argv[1]).resolve() != STATE:
            raise SystemExit("wol-relay: --state %s but LAB_STATE is %s; start it with "
                             "LAB_STATE=%s" % (argv[1], STATE, argv[1]))
    elif argv:
        raise SystemExit("usage: wol_relay.py [--state DIR]")
    state = STATE
    state.mkdir(parents=True, exist_ok=True)
    ports = settings()["wol_ports"]
    try:
        ports = json.loads((state / "lab.json").read_text())["wol_ports"]
    except (OSError, ValueError, KeyError):
        pass
    relay = Relay(state)
    socks = open_sockets(ports)
    sel = selectors.DefaultSelector()
    for s, transport, port in socks:
        sel.register(s, selectors.EVENT_READ, (transport, port))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    (state / "wol-relay.ready").write_text("%d\n" % os.getpid())
    print("wol-relay: pid %d listening on UDP %s (127.0.0.1, 127.255.255.255) and ether 0x0842 on lo"
          % (os.getpid(), ports), flush=True)
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.5):
            transport, port = key.data
            s = key.fileobj
            data, addr = s.recvfrom(2048)
            if transport == "ether":
                if addr[2] == socket.PACKET_OUTGOING:
                    continue    # on lo every frame is seen going out and coming in
                source = addr[4].hex(":")
            else:
                source = "%s:%d" % addr
            relay.handle(data, transport, source, port)
    for s, _, _ in socks:
        s.close()
    with contextlib.suppress(FileNotFoundError):
        (state / "wol-relay.ready").unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
