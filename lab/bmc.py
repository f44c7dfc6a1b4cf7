# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One OpenIPMI ``ipmi_sim`` BMC: its configuration, its password and its process (used by the
lab's guests, lab/guest.py, and by lab/sim.py for the simulated fleet; imports only lab/proc.py).

A BMC answers IPMI 2.0 (lanplus) on ADDR:PORT, holds one admin user with md5 auth, and runs
``startcmd`` on ``chassis power on``; it reports the chassis on exactly while that program is
connected to its VM port (OpenIPMI's VM protocol: QEMU's ipmi-bmc-extern, or lab/simhost.py),
sends it POWEROFF / GRACEFUL_SHUTDOWN / RESET, and kills it when it has not gone after
``poweroff_wait`` seconds (SIGTERM, then SIGKILL after ``kill_wait``). Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import string
import subprocess
from pathlib import Path

from proc import spawn, write_private

IPMI_SIM = "/usr/bin/ipmi_sim"
USER = "admin"

# The emulated management controller: what this ipmi_sim build accepts (it rejects a
# dynamic-sensors flag).
EMU = """\
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02
mc_enable 0x20
"""


def lan_conf(*, name: str, addr: str, port: int, vm_addr: str, vm_port: int, startcmd: str,
             password: str, startnow: bool = False, poweroff_wait: int = 60, kill_wait: int = 5,
             written_by: str, comment: str = "") -> str:
    """lan.conf of one BMC; it holds the admin password: write it mode 0600."""
    return """\
# %(name)s's BMC (ipmi_sim).  Written by %(by)s; holds the admin password: mode 0600.
name "%(name)s"
set_working_mc 0x20
  startlan 1
    addr %(addr)s %(port)d
    priv_limit admin
    allowed_auths_callback md5
    allowed_auths_user md5
    allowed_auths_operator md5
    allowed_auths_admin md5
    guid %(guid)s
  endlan
  serial 15 %(vm_addr)s %(vm_port)d codec VM
  startcmd "%(startcmd)s"
  startnow %(startnow)s
%(comment)s  poweroff_wait %(poweroff_wait)d
  kill_wait %(kill_wait)d
  user 2 true "%(user)s" "%(password)s" admin 10 md5
""" % {"name": name, "by": written_by, "addr": addr, "port": port, "vm_addr": vm_addr,
       "vm_port": vm_port, "guid": hashlib.md5(name.encode()).hexdigest(), "startcmd": startcmd,
       "startnow": "true" if startnow else "false", "poweroff_wait": poweroff_wait,
       "kill_wait": kill_wait, "comment": "  # %s\n" % comment if comment else "",
       "user": USER, "password": password}


def password(path: Path) -> str:
    """The admin password of a set of BMCs (a lab's, a simulator's), kept in path: generated once,
    16 random letters and digits (what ipmi_sim's md5 users hold: IPMI 1.5 passwords, 16 bytes),
    mode 0600. Never printed, never in an argv: ipmitool gets it from IPMI_PASSWORD (-E)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        alphabet = string.ascii_letters + string.digits
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(secrets.choice(alphabet) for _ in range(16)) + "\n")
    path.chmod(0o600)
    return path.read_text().strip()


def write_config(directory: Path, conf: str) -> None:
    """DIRECTORY/lan.conf (it holds the password: written 0600, never readable by others, not
    even briefly; replaced atomically) and DIRECTORY/bmc.emu."""
    write_private(directory / "lan.conf", conf)
    (directory / "bmc.emu").write_text(EMU)


def start(directory: Path, ipmi_sim: str = IPMI_SIM) -> subprocess.Popen:
    """ipmi_sim for DIRECTORY/lan.conf and DIRECTORY/bmc.emu, its state in DIRECTORY/ipmi and its
    output in DIRECTORY/ipmi_sim.log, in a session of its own (it outlives the caller)."""
    (directory / "ipmi").mkdir(exist_ok=True)
    return spawn([ipmi_sim, "-n", "-p", "-c", str(directory / "lan.conf"), "-f", str(directory / "bmc.emu"),
                  "-s", str(directory / "ipmi")], directory / "ipmi_sim.log", cwd=str(directory))
