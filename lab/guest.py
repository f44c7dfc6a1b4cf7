# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One lab guest: its QEMU command line, its BMC (an ipmi_sim whose startcmd is that command
line, so QEMU is always the BMC's child: lab/README.md, 'Guests'), QMP, ipmitool and SSH to it,
and what is done to it from outside (suspend, wake, kill).

Imports lab/layout.py, lab/bmc.py and lab/proc.py (lab/labctl.py draws the parts). Standard
library only (Python 3.11).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import bmc
from layout import BMC_USER, CACHE_ROOT, KNOWN_HOSTS, LabError, bmc_password, need_bin
from proc import pid_alive, ssh_greets, wait_gone, wait_port


# Where a guest reaches slurmctld (the mgmt network's slirp, forwarded to the controller).
SLURMCTLD_GUEST_ADDR = "10.0.2.100"

# ---------------------------------------------------------------------------------------------
# QEMU and its BMC
# ---------------------------------------------------------------------------------------------

def qemu_argv(host: dict, image: Path, cfg: dict) -> list[str]:
    """The one QEMU command line of a guest (ipmi_sim's startcmd runs exactly this)."""
    d = Path(host["dir"])
    append = ("root=/dev/vda rw console=ttyS0,115200 systemd.hostname=%s "
              "systemd.show_status=false mitigations=off" % host["name"])
    return [
        shutil.which("qemu-system-x86_64") or "qemu-system-x86_64",
        "-name", "%s,process=fleetnap-%s" % (host["name"], host["name"]),
        "-accel", "tcg", "-machine", "pc", "-smp", "1", "-m", str(cfg["mem_mb"]),
        "-nodefaults", "-no-user-config", "-display", "none",
        "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
        "-append", append,
        "-drive", "file=%s,if=virtio,format=qcow2" % (d / "disk.qcow2"),
        # management NIC: user networking, restrict=on (the guest reaches nothing but slirp)
        # SSH, node_exporter, and Slurm both ways (lab/slurm.py): slurmctld reaches this guest's
        # slurmd on its own port, and the guest reaches slurmctld at SLURMCTLD_GUEST_ADDR, one
        # socat per connection (restrict=on leaves explicit forwards working)
        "-netdev", "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22,hostfwd=tcp:127.0.0.1:%d-:9100,"
        "hostfwd=tcp:127.0.0.1:%d-:%d,guestfwd=tcp:%s:%d-cmd:%s - TCP:127.0.0.1:%d"
        % (host["ssh_port"], host["metrics_port"], host["slurmd_port"], host["slurmd_port"],
           SLURMCTLD_GUEST_ADDR, host["slurmctld_port"], shutil.which("socat") or "/usr/bin/socat",
           host["slurmctld_port"]),
        "-device", "virtio-net-pci,netdev=mgmt,mac=%s,addr=0x3" % host["mgmt_mac"],
        # the e1000e: a real PHC (/dev/ptp0) and the MAC the WoL relay wakes
        "-netdev", "user,id=lan,restrict=on,net=10.0.3.0/24",
        "-device", "e1000e,netdev=lan,mac=%s,addr=0x4" % host["wol_mac"],
        "-global", "PIIX4_PM.disable_s3=0",
        "-qmp", "unix:%s,server=on,wait=off" % host["qmp"],
        "-chardev", "file,id=con,path=%s,append=on" % host["console"],
        "-serial", "chardev:con",
        "-chardev", "socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=10" % host["vm_port"],
        "-device", "ipmi-bmc-extern,id=bmc0,chardev=ipmi0",
        "-device", "isa-ipmi-bt,bmc=bmc0",
        "-pidfile", str(d / "qemu.pid"),
    ]


def lan_conf(host: dict, argv: list[str], password: str) -> str:
    for arg in argv:
        if any(c in arg for c in "\"'\\$`\n"):
            raise LabError("QEMU argument %r has a quote or shell character; ipmi_sim's "
                           "startcmd cannot carry it (move the lab to a plain path)" % arg)
    startcmd = " ".join("'%s'" % a if " " in a else a for a in argv)
    return bmc.lan_conf(name=host["name"], addr="127.0.0.1", port=host["bmc_port"], vm_addr="127.0.0.1",
                        vm_port=host["vm_port"], startcmd=startcmd, password=password, startnow=False,
                        poweroff_wait=60, kill_wait=5, written_by="lab/labctl.py",
                        comment="soft off: the guest gets the ACPI power button and 60 s to shut down, then SIGTERM")


def ipmi_sim_alive(host: dict) -> int | None:
    return pid_alive(Path(host["dir"]) / "ipmi_sim.pid", str(Path(host["dir"]) / "lan.conf"))


def qemu_alive(host: dict) -> int | None:
    return pid_alive(Path(host["dir"]) / "qemu.pid", "process=fleetnap-%s " % host["name"])


def start_ipmi_sim(host: dict) -> int:
    d = Path(host["dir"])
    proc = bmc.start(d, need_bin("ipmi_sim", "openipmi"))
    (d / "ipmi_sim.pid").write_text("%d\n" % proc.pid)
    # ready when it answers on its LAN port
    if wait_port(host["bmc_port"], socket.SOCK_DGRAM, 10, child=proc):
        return proc.pid
    if proc.returncode is not None:
        raise LabError("ipmi_sim for %s exited (rc=%s); see %s"
                       % (host["name"], proc.returncode, d / "ipmi_sim.log"))
    raise LabError("ipmi_sim for %s did not bind 127.0.0.1:%d within 10 s"
                   % (host["name"], host["bmc_port"]))


# ---------------------------------------------------------------------------------------------
# QMP, IPMI, SSH
# ---------------------------------------------------------------------------------------------

def qmp(sock_path: str, command: str, arguments: dict | None = None, timeout: float = 5.0):
    """Run one QMP command; return its 'return' value.  Raises OSError if QEMU is not there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        fh = s.makefile("rw", encoding="utf-8")
        greeting = json.loads(fh.readline() or "{}")
        if "QMP" not in greeting:
            raise OSError("no QMP greeting on %s" % sock_path)
        for cmd, args in (("qmp_capabilities", None), (command, arguments)):
            msg = {"execute": cmd}
            if args:
                msg["arguments"] = args
            fh.write(json.dumps(msg) + "\n")
            fh.flush()
            while True:
                line = fh.readline()
                if not line:
                    if cmd == "quit":
                        return {}
                    raise OSError("QMP connection closed during %s" % cmd)
                reply = json.loads(line)
                if "error" in reply:
                    raise LabError("QMP %s on %s: %s" % (cmd, sock_path, reply["error"].get("desc")))
                if "return" in reply:
                    break
        return reply["return"]


def qmp_status(host: dict) -> str:
    """running / suspended / paused / ... from QMP query-status, or 'off' if QEMU is not there."""
    try:
        return qmp(host["qmp"], "query-status", timeout=3)["status"]
    except (OSError, ValueError):
        return "off"


def ipmitool_cmd(host: dict, *args: str) -> list[str]:
    # -C 3 (RAKP-HMAC-SHA1): what ipmi_sim offers; -E: the password comes from IPMI_PASSWORD.
    return ["ipmitool", "-I", "lanplus", "-C", "3", "-N", "1", "-R", "2", "-H", "127.0.0.1",
            "-p", str(host["bmc_port"]), "-U", BMC_USER, "-E"] + list(args)


def ipmi(host: dict, *args: str, password: str | None = None, check: bool = True):
    env = dict(os.environ, IPMI_PASSWORD=password if password is not None else bmc_password())
    proc = subprocess.run(ipmitool_cmd(host, *args), capture_output=True, text=True, env=env,
                          timeout=30)
    if check and proc.returncode != 0:
        raise LabError("BMC of %s (127.0.0.1:%d) refused '%s': %s"
                       % (host["name"], host["bmc_port"], " ".join(args),
                          (proc.stderr or proc.stdout).strip()))
    return proc


def bmc_power(host: dict) -> str:
    """on / off as the BMC says, or 'no-bmc' when its ipmi_sim does not answer."""
    proc = ipmi(host, "chassis", "power", "status", check=False)
    out = proc.stdout.strip().lower()
    if proc.returncode == 0 and out.endswith(" on"):
        return "on"
    if proc.returncode == 0 and out.endswith(" off"):
        return "off"
    return "no-bmc"


def known_hosts_lines(hosts: list[dict], hostkey_pub: str) -> str:
    """known_hosts for the guests as Ansible reaches them: [127.0.0.1]:<ssh_port> <key>."""
    kind, blob = hostkey_pub.split()[:2]
    return "".join("[127.0.0.1]:%d %s %s\n" % (h["ssh_port"], kind, blob) for h in hosts)


def ssh_options(known_hosts: Path = KNOWN_HOSTS) -> list[str]:
    """SSH options for the guests: their host key is checked against the lab's known_hosts."""
    return ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % known_hosts,
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def ssh_cmd(host: dict, *command: str, key: Path | None = None) -> list[str]:
    return (["ssh", "-i", str(key or CACHE_ROOT / "id_ed25519"), "-p", str(host["ssh_port"]),
             "-o", "BatchMode=yes"]
            # the known_hosts of the lab the guest belongs to (its state directory)
            + ssh_options(Path(host["dir"]).parent / "known_hosts" if "dir" in host else KNOWN_HOSTS)
            + ["-o", "ConnectTimeout=5", "root@127.0.0.1"] + list(command))


# The lab's own SSH sessions (wait_ssh, the suites' lab.ssh) go over one master connection per
# guest: a fresh SSH connection costs a TCG guest 1.8 s of its CPU (key exchange and login; six at
# once on 2 cores, 4-6 s each), a session over the master 0.2 s. The master is started apart with
# its streams on /dev/null (one that ssh forked itself would hold the caller's pipes open), ends 60 s
# after its last session, and dies with its guest's QEMU (slirp closes the connection); a guest
# that answers no keepalive for 15 s (suspended, rebooted) loses it. Ansible keeps its own.
MUX_DIR = Path(tempfile.gettempdir()) / ("fleetnap-lab-ssh-%d" % os.getuid())


def mux_path(host: dict) -> str:
    return str(MUX_DIR / str(host["ssh_port"]))


def _mux_master(host: dict, timeout: float) -> None:
    """Start the guest's master connection unless one answers; a guest that does not answer gets
    none (the session then connects by itself, and fails as it would have)."""
    path = mux_path(host)
    base = ssh_cmd(host)
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if subprocess.run(base[:1] + ["-o", "ControlPath=" + path, "-O", "check"] + base[1:],
                          timeout=5, **quiet).returncode == 0:
            return
        MUX_DIR.mkdir(mode=0o700, exist_ok=True)
        subprocess.run(base[:1] + ["-f", "-N", "-M", "-o", "ControlPath=" + path, "-o", "ControlPersist=60",
                                   "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"] + base[1:],
                       timeout=max(1.0, min(timeout, 30)), **quiet)
    except (subprocess.TimeoutExpired, OSError):
        pass


def ssh(host: dict, *command: str, timeout: float = 30, check: bool = True, input: str | None = None):
    """Run command in the guest as root; input (never on a command line: keys go this way) is
    its stdin, else /dev/null."""
    deadline = time.monotonic() + timeout
    _mux_master(host, timeout)
    argv = ssh_cmd(host, *command)
    try:
        muxed = argv[:1] + ["-o", "ControlPath=" + mux_path(host), "-o", "ControlMaster=no"] + argv[1:]
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        proc = subprocess.run(muxed, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()),
                              **stdin)
        if proc.returncode == 255 and not proc.stdout and "master" in proc.stderr:
            # The master's connection broke before the session began (its guest rebooted): once
            # more, on a connection of its own.
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()),
                                  **stdin)
    except subprocess.TimeoutExpired:
        if check:
            raise LabError("ssh to %s (127.0.0.1:%d) timed out after %ss"
                           % (host["name"], host["ssh_port"], timeout)) from None
        return subprocess.CompletedProcess([], 255, "", "timeout")
    if check and proc.returncode != 0:
        raise LabError("ssh %s %s failed (rc=%d): %s" % (host["name"], " ".join(command),
                                                          proc.returncode, proc.stderr.strip()))
    return proc


def ssh_banner(host: dict, timeout: float = 1.5) -> bool:
    """True if sshd in the guest answers (a suspended guest accepts on the host side only)."""
    return ssh_greets("127.0.0.1", host["ssh_port"], timeout)


def wait_ssh(host: dict, timeout: float) -> float:
    """Seconds until 'ssh HOST hostname' answers with the host's own name."""
    t0 = time.monotonic()
    while True:
        proc = ssh(host, "hostname", timeout=10, check=False)
        if proc.returncode == 0 and proc.stdout.strip() == host["name"]:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise LabError("%s did not answer SSH on 127.0.0.1:%d within %ds; see %s"
                           % (host["name"], host["ssh_port"], timeout, host["console"]))
        time.sleep(1)


# ---------------------------------------------------------------------------------------------
# From outside: suspend, kill
# ---------------------------------------------------------------------------------------------

def suspend(host: dict) -> None:
    """echo mem > /sys/power/state in the guest, detached so SSH returns before the freeze."""
    ssh(host, "nohup sh -c 'sleep 1; echo mem > /sys/power/state' >/dev/null 2>&1 &", timeout=20)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if qmp_status(host) == "suspended":
            return
        time.sleep(0.2)
    raise LabError("%s did not reach S3 within 30 s (QMP says %s); see %s"
                   % (host["name"], qmp_status(host), host["console"]))


def kill_guest(host: dict) -> int:
    pid = qemu_alive(host)
    if not pid:
        raise LabError("%s has no running QEMU to kill" % host["name"])
    os.kill(pid, signal.SIGKILL)
    wait_gone([pid], 5)
    return pid
