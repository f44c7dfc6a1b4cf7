#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""simhost -- one simulated host's power, from power-on to power-off (lab/sim.py).

The host's BMC is a real ``ipmi_sim``; this program is its ``startcmd``, so ``chassis power on``
starts it and the BMC reports the chassis on exactly while it is connected to the BMC's VM port
(OpenIPMI's VM protocol, the one QEMU's ``ipmi-bmc-extern`` speaks). While it runs, it is the
host's hardware:

* power on: the host's processes (its sshd, in its own network and mount namespace) start in a
  cgroup (v2) of their own; its network link comes up.
* suspend: the host writes ``mem`` (or ``freeze``) to its own ``/sys/power/state`` (a file of
  the host's private ``/sys/power`` layer, as the modules write it). The write is seen within
  0.2 s; the host's cgroup is frozen and its link goes down: the host is silent, as a host in
  S3 is. ``mem`` with ``mem_sleep`` on ``deep`` is S3, anything else suspend to idle.
* wake: a magic packet (UDP, to the fleet's broadcast address) naming this host's MAC, while
  it sleeps. After the host's resume time (drawn once per host by lab/sim.py from the
  configured distribution) the suspend is counted (``/sys/power/suspend_stats/success``, as the
  kernel counts it), the cgroup thaws and the link comes up. A socket filter drops the packets
  that name another MAC in the kernel, as a NIC's wake filter does in hardware.
* boot: after a power-on (not the first, at ``sim up``) the host answers after its boot time
  (``boot_s``); the chassis is on meanwhile.
* Wake-on-LAN from soft-off: ``simhost.py --standby HOSTS_DIR`` (one per simulator) is the
  NICs' standby power: a magic packet for a host that is off powers it on through its BMC.
* power off (``chassis power off``: VM command POWEROFF) kills every process of the host at
  once; soft off (``chassis power soft``: GRACEFUL_SHUTDOWN) does the same after the host's
  shutdown time, and only when the host is running (a sleeping or hung OS does not act on the
  power button); reset (``chassis power reset``) restarts the host. /etc, /var and /root
  survive a power cycle (the host's disk), /run and the sysfs layers do not.
* faults, for tests (``lab/sim.py fault``): ``drop_wol`` N drops the next N magic packets for
  this host; ``hang`` freezes the host without a suspend (silent, deaf to magic packets; only
  its BMC brings it back).

Everything the host went through is appended to ``<host dir>/power.jsonl`` (time, state, why):
the simulator's ground truth for tests and for energy figures. Standard library only.

Usage: simhost.py HOST_DIR               (HOST_DIR/host.json, written by lab/sim.py, says the rest)
       simhost.py --standby HOSTS_DIR    (Wake-on-LAN from soft-off for every host in HOSTS_DIR)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

# OpenIPMI's VM protocol (lanserv/README.vm; QEMU hw/ipmi/ipmi_bmc_extern.c).
VM_MSG_CHAR = 0xA0
VM_CMD_CHAR = 0xA1
VM_ESCAPE_CHAR = 0xAA
VM_CMD_VERSION = 0xFF
VM_CMD_POWEROFF = 0x03
VM_CMD_RESET = 0x04
VM_CMD_CAPABILITIES = 0x08
VM_CMD_GRACEFUL_SHUTDOWN = 0x09
VM_CAPABILITIES = 0x01 | 0x02 | 0x20          # power, reset, graceful shutdown

POLL_S = 0.25
RECONNECT_S = 1.0


def read_faults(hdir: Path) -> dict:
    """The faults injected for the host (lab/sim.py fault), {} when none."""
    try:
        return json.loads((hdir / "faults.json").read_text())
    except (OSError, ValueError):
        return {}


def write_faults(hdir: Path, faults: dict) -> None:
    tmp = hdir / "faults.json.tmp"
    tmp.write_text(json.dumps(faults) + "\n")
    os.replace(tmp, hdir / "faults.json")


def take_dropped_packet(hdir: Path) -> bool:
    """True (and one fewer to drop) when the next magic packet for the host is to be lost."""
    faults = read_faults(hdir)
    drop = int(faults.get("drop_wol", 0) or 0)
    if drop <= 0:
        return False
    faults["drop_wol"] = drop - 1
    write_faults(hdir, faults)
    return True


def cgroup2_root() -> Path:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on hybrid)."""
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            if right.split(" ", 1)[0] == "cgroup2":
                return Path(left.split()[4])
    raise SystemExit("simhost: no cgroup2 hierarchy is mounted (the simulator needs one)")


def parse_vm_commands(buf: bytearray) -> list[bytes]:
    """Complete commands (bytes before VM_CMD_CHAR, unescaped) taken off the front of buf;
    messages (ending in VM_MSG_CHAR) are dropped: a simulated host sends no IPMI requests."""
    out = []
    start = 0
    for i, ch in enumerate(buf):
        if ch in (VM_CMD_CHAR, VM_MSG_CHAR):
            raw = bytes(buf[start:i])
            start = i + 1
            if ch == VM_MSG_CHAR:
                continue
            data, esc = bytearray(), False
            for b in raw:
                if esc:
                    data.append(b & ~0x10)
                    esc = False
                elif b == VM_ESCAPE_CHAR:
                    esc = True
                else:
                    data.append(b)
            out.append(bytes(data))
    del buf[:start]
    return out


def magic_packet_mac(payload: bytes) -> str | None:
    """The MAC a Wake-on-LAN magic packet names (6 x 0xFF then 16 x the MAC), or None."""
    at = payload.find(b"\xff" * 6)
    if at < 0:
        return None
    body = payload[at + 6:at + 6 + 96]
    if len(body) < 96:
        return None
    mac = body[:6]
    if body != mac * 16:
        return None
    return ":".join("%02x" % b for b in mac)


SO_ATTACH_FILTER = 26           # asm-generic/socket.h; Python's socket module does not name it


def own_mac_filter(mac: str) -> list[tuple[int, int, int, int]]:
    """A classic BPF program for a UDP socket (offset 0 is the UDP header, the payload at 8) that
    drops a magic packet whose sync stream opens the payload and names another MAC (and a
    datagram too short to name one), and passes everything else to ``magic_packet_mac``: what a
    NIC's wake filter does in hardware. Without it every broadcast of a wave woke every simulated
    host's program (N hosts x packets process wake-ups on the controller's cores), a cost no real
    fleet has."""
    raw = bytes(int(part, 16) for part in mac.split(":"))
    if len(raw) != 6:
        raise ValueError("not a MAC: %r" % mac)
    ld_w, ld_h, jeq, ret = 0x20, 0x28, 0x15, 0x06     # BPF_LD|W|ABS, BPF_LD|H|ABS, JMP|JEQ|K, RET|K
    return [
        (ld_w, 0, 0, 8), (jeq, 0, 6, 0xFFFFFFFF),       # payload[0:4] all ones, else pass
        (ld_h, 0, 0, 12), (jeq, 0, 4, 0xFFFF),          # payload[4:6] all ones, else pass
        (ld_w, 0, 0, 14), (jeq, 0, 3, int.from_bytes(raw[:4], "big")),   # the MAC, else drop
        (ld_h, 0, 0, 18), (jeq, 0, 1, int.from_bytes(raw[4:], "big")),
        (ret, 0, 0, 0xFFFFFFFF),                        # pass
        (ret, 0, 0, 0),                                 # drop
    ]


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    """SO_ATTACH_FILTER with ``program`` (struct sock_fprog: a length, then a pointer)."""
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("HL", len(program), ctypes.addressof(code)))


class Host:
    def __init__(self, hdir: Path):
        self.dir = hdir
        self.cfg = json.loads((hdir / "host.json").read_text())
        self.name = self.cfg["name"]
        self.cg = cgroup2_root() / "fleetnap-sim" / self.cfg["sim"] / self.name
        self.state = "off"
        self.proc: subprocess.Popen | None = None
        self.vm: socket.socket | None = None
        self.vm_buf = bytearray()
        self.next_connect = 0.0
        self.wake_at: float | None = None
        self.boot_at: float | None = None
        self.soft_at: float | None = None
        self.sel = selectors.DefaultSelector()
        self.pending_signal: int | None = None
        self.seen: dict[str, tuple] = {}          # /sys/power file -> (mtime_ns, size) last read

    # -- records ------------------------------------------------------------------------------
    def record(self, state: str, why: str) -> None:
        self.state = state
        line = json.dumps({"t": round(time.time(), 3), "state": state, "why": why})
        with open(self.dir / "power.jsonl", "a") as fh:
            fh.write(line + "\n")
        tmp = self.dir / "power.state.tmp"
        tmp.write_text(json.dumps({"state": state, "why": why, "since": time.time(),
                                   "pid": os.getpid()}) + "\n")
        os.replace(tmp, self.dir / "power.state")

    # -- the host's processes and link --------------------------------------------------------
    def link(self, up: bool) -> None:
        subprocess.run(["ip", "link", "set", self.cfg["veth"], "up" if up else "down"],
                       check=False, capture_output=True)

    def freeze(self, frozen: bool) -> None:
        with contextlib.suppress(OSError):
            (self.cg / "cgroup.freeze").write_text("1" if frozen else "0")

    def kill_all(self) -> None:
        """Every process of the host, at once (cgroup.kill), then wait until none is left."""
        if not self.cg.is_dir():
            return
        self.freeze(False)
        with contextlib.suppress(OSError):
            (self.cg / "cgroup.kill").write_text("1")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                if not (self.cg / "cgroup.procs").read_text().strip():
                    break
            except OSError:
                break
            time.sleep(0.02)
        if self.proc is not None:
            with contextlib.suppress(ChildProcessError, OSError):
                self.proc.wait(timeout=5)
            self.proc = None
        with contextlib.suppress(OSError):
            (self.dir / "sshd.pid").unlink()

    def boot(self, why: str, delay: float = 0.0) -> None:
        self.kill_all()                 # whatever a crash of an earlier run left
        self.cg.mkdir(parents=True, exist_ok=True)
        self.freeze(False)
        self.link(True)
        if delay > 0:
            # the BMC sees the chassis on; the OS answers after the boot time (run() starts it)
            self.record("booting", why)
            self.boot_at = time.monotonic() + delay
            return
        self.start_os(why)

    def start_os(self, why: str) -> None:
        self.boot_at = None
        procs = self.cg / "cgroup.procs"

        def into_cgroup():
            procs.write_text(str(os.getpid()))

        log = open(self.dir / "sshd.log", "ab")
        try:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.cfg["netns"], "unshare", "--mount", "--propagation",
                 "private", "/bin/sh", str(self.dir / "start.sh")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                preexec_fn=into_cgroup)
        finally:
            log.close()
        tmp = self.dir / "sshd.pid.tmp"
        tmp.write_text("%d\n" % self.proc.pid)
        os.replace(tmp, self.dir / "sshd.pid")
        self.record("on", why)

    def power_off(self, why: str) -> None:
        self.kill_all()
        self.link(False)
        self.record("off", why)
        if self.vm is not None:
            with contextlib.suppress(OSError):
                self.sel.unregister(self.vm)
            self.vm.close()
            self.vm = None

    # -- sleep ---------------------------------------------------------------------------------
    def changed(self, power: Path, name: str) -> bool:
        try:
            st = os.stat(power / name)
        except OSError:
            return False
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self.seen.get(name) == key:
            return False
        self.seen[name] = key
        return True

    def mem_sleep(self, power: Path) -> str:
        """The selected mem_sleep mode; a word written to the file (as the kernel takes it) is
        turned into the kernel's own view of the file, the selection in brackets."""
        try:
            text = (power / "mem_sleep").read_text()
        except OSError:
            return "deep"
        self.seen.pop("mem_sleep", None)
        offered = self.cfg["mem_sleep"]
        words = text.split()
        if len(words) == 1 and words[0] in offered:
            view = " ".join("[%s]" % w if w == words[0] else w for w in offered) + "\n"
            with contextlib.suppress(OSError):
                (power / "mem_sleep").write_text(view)
            return words[0]
        for w in words:
            if w.startswith("[") and w.endswith("]"):
                return w[1:-1]
        return "deep"

    def sleep_request(self) -> str | None:
        """'S3' / 's2idle' when the host wrote a sleep state to its /sys/power/state."""
        if self.state != "on" or self.proc is None:
            return None
        power = Path("/proc/%d/root/sys/power" % self.proc.pid)
        # 300 hosts poll a few times a second: a file is read only when it changed since
        if not (self.changed(power, "mem_sleep") or self.changed(power, "state")):
            return None
        selected = self.mem_sleep(power)
        try:
            value = (power / "state").read_text()
        except OSError:
            return None
        offered = self.cfg["power_state"]
        if value == offered:
            return None
        if not value.strip():
            # A write under way (``echo mem >`` truncates, then writes): read again at the next poll.
            # Written back now, the host's word would land inside the kernel's offer and be lost.
            self.seen.pop("state", None)
            return None
        with contextlib.suppress(OSError):
            (power / "state").write_text(offered)        # reads back as the kernel offers it
        words = value.split()
        if len(words) != 1 or words[0] not in offered.split():
            return None                                  # the kernel refuses it: nothing happens
        if words[0] == "mem":
            return "S3" if selected == "deep" else "s2idle"
        return "s2idle"

    def go_to_sleep(self, kind: str, why: str) -> None:
        self.freeze(True)
        self.link(False)
        self.record(kind, why)

    def wake(self, why: str) -> None:
        self.wake_at = None
        self.count_suspend()
        self.link(True)
        self.freeze(False)
        self.record("on", why)

    def count_suspend(self) -> None:
        """A completed suspend, counted as the kernel counts it (/sys/power/suspend_stats/success),
        before the host's processes run again."""
        if self.proc is None:
            return
        path = Path("/proc/%d/root/sys/power/suspend_stats/success" % self.proc.pid)
        with contextlib.suppress(OSError, ValueError):
            path.write_text("%d\n" % (int(path.read_text().strip() or 0) + 1))

    # -- BMC -----------------------------------------------------------------------------------
    def connect_vm(self) -> None:
        self.next_connect = time.monotonic() + RECONNECT_S
        try:
            s = socket.create_connection((self.cfg["bmc_ip"], self.cfg["vm_port"]), timeout=2)
        except OSError:
            return
        s.setblocking(False)
        with contextlib.suppress(OSError):
            s.sendall(bytes([VM_CMD_VERSION, 1, VM_CMD_CHAR,
                             VM_CMD_CAPABILITIES, VM_CAPABILITIES, VM_CMD_CHAR]))
        self.vm = s
        self.sel.register(s, selectors.EVENT_READ, "vm")

    def on_vm(self) -> bool:
        """False once the host is off (the program ends)."""
        try:
            data = self.vm.recv(4096)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            # The BMC went away (crashed, restarted): the host keeps running, as a real one does
            # when its BMC reboots, and connects again when the BMC is back.
            with contextlib.suppress(OSError):
                self.sel.unregister(self.vm)
            self.vm.close()
            self.vm = None
            return True
        self.vm_buf += data
        for cmd in parse_vm_commands(self.vm_buf):
            if not cmd:
                continue
            if cmd[0] == VM_CMD_POWEROFF:
                self.power_off("BMC power off")
                return False
            if cmd[0] == VM_CMD_RESET:
                self.boot("BMC reset", float(self.cfg.get("boot_s", 0.0)))
            elif cmd[0] == VM_CMD_GRACEFUL_SHUTDOWN:
                if self.state == "on" and self.soft_at is None:
                    self.soft_at = time.monotonic() + float(self.cfg.get("shutdown_s", 1.0))
        return True

    # -- Wake-on-LAN ---------------------------------------------------------------------------
    def on_wol(self, sock: socket.socket) -> None:
        try:
            payload = sock.recv(2048)
        except OSError:
            return
        if magic_packet_mac(payload) != self.cfg["mac"]:
            return
        if self.state not in ("S3", "s2idle") or self.wake_at is not None:
            return
        if take_dropped_packet(self.dir):
            with open(self.dir / "power.jsonl", "a") as fh:
                fh.write(json.dumps({"t": round(time.time(), 3), "state": self.state,
                                     "why": "magic packet dropped (fault)"}) + "\n")
            return
        self.wake_at = time.monotonic() + float(self.cfg["resume_s"])

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, lambda signum, _frame: setattr(self, "pending_signal", signum))
        wol = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        wol.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        attach_filter(wol, own_mac_filter(self.cfg["mac"]))
        wol.bind((self.cfg["broadcast"], int(self.cfg["wol_port"])))
        wol.setblocking(False)
        self.sel.register(wol, selectors.EVENT_READ, "wol")
        first = not (self.dir / "power.jsonl").exists()
        self.connect_vm()               # the chassis is on from the start, also while booting
        self.boot("power on", 0.0 if first else float(self.cfg.get("boot_s", 0.0)))
        while True:
            sig, self.pending_signal = self.pending_signal, None
            if sig in (signal.SIGTERM, signal.SIGINT):
                self.power_off("stopped (signal %d)" % sig)
                return 0
            if sig == signal.SIGUSR1 and self.state == "on":       # lab/sim.py fault HOST hang
                self.freeze(True)
                self.link(False)
                self.record("hung", "fault: hang")
            if self.vm is None and time.monotonic() >= self.next_connect:
                self.connect_vm()
            for key, _ in self.sel.select(POLL_S):
                if key.data == "vm" and self.vm is not None:
                    if not self.on_vm():
                        return 0
                elif key.data == "wol":
                    self.on_wol(wol)
            now = time.monotonic()
            if self.boot_at is not None and now >= self.boot_at:
                self.start_os("booted")
            if self.wake_at is not None and now >= self.wake_at:
                self.wake("magic packet")
            if self.soft_at is not None and now >= self.soft_at:
                self.power_off("BMC soft off (the OS shut down)")
                return 0
            kind = self.sleep_request()
            if kind:
                self.go_to_sleep(kind, "the host wrote to /sys/power/state")
            if self.state == "on" and self.proc is not None and self.proc.poll() is not None:
                # The host's sshd is gone: the machine crashed. It stays on, silent, until its BMC
                # powers it off or resets it.
                self.proc = None
                self.link(False)
                self.record("hung", "sshd exited")


def standby(hosts_dir: Path) -> int:
    """Wake-on-LAN from soft-off: a magic packet naming a host that is off (its power program
    not running) powers it on through its BMC, as a NIC on standby power does (the BMC decides:
    a chassis already on is left alone). Lost packets (the host's drop_wol fault) count here too."""
    password = (hosts_dir.parent / "bmc-password").read_text().strip()
    hosts = {}
    for hj in sorted(hosts_dir.glob("*/host.json")):
        cfg = json.loads(hj.read_text())
        hosts[cfg["mac"]] = (hj.parent, cfg)
    if not hosts:
        return 0
    any_cfg = next(iter(hosts.values()))[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((any_cfg["broadcast"], int(any_cfg["wol_port"])))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    powered: dict[str, float] = {}       # MAC -> when this powered it on (a wave repeats packets)
    while True:
        mac = magic_packet_mac(sock.recv(2048))
        if mac not in hosts or time.monotonic() - powered.get(mac, -1e9) < 10:
            continue
        hdir, cfg = hosts[mac]
        try:
            state = json.loads((hdir / "power.state").read_text()).get("state")
        except (OSError, ValueError):
            state = "off"
        if state != "off":
            continue
        if take_dropped_packet(hdir):
            continue
        powered[mac] = time.monotonic()
        with open(hdir / "power.jsonl", "a") as fh:
            fh.write(json.dumps({"t": round(time.time(), 3), "state": "off",
                                 "why": "magic packet while off: the BMC powers it on"}) + "\n")
        subprocess.run(["ipmitool", "-I", "lanplus", "-H", cfg["bmc_ip"], "-U", "admin", "-E", "-C", "3",
                        "-N", "1", "-R", "2", "chassis", "power", "on"],
                       env=dict(os.environ, IPMI_PASSWORD=password), capture_output=True, timeout=30, check=False)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--standby":
        return standby(Path(argv[1]))
    if len(argv) != 1:
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    hdir = Path(argv[0])
    # Whatever goes wrong is in the host's own log, not in its BMC's.
    fd = os.open(str(hdir / "simhost.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return Host(hdir).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
