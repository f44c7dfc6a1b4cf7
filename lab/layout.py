# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the lab lives and what it is made of: its directories (state, cache, inventory: from
the environment), its settings (the LAB_* variables), the host table (ports, MACs, racks, gear
groups), the BMC password, and the error and small helpers every part of the lab uses.

The bottom of the lab's own parts (lab/labctl.py draws them): imports lab/bmc.py only.
Standard library only (Python 3.11).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import bmc

LAB_DIR = Path(__file__).resolve().parent
REPO = LAB_DIR.parent
STATE = Path(os.environ.get("LAB_STATE", LAB_DIR / "state")).resolve()
CACHE_ROOT = Path(os.environ.get("FLEETNAP_CACHE", "/var/cache/fleetnap")) / "lab"
KNOWN_HOSTS = STATE / "known_hosts"
INVENTORY_DIR = Path(os.environ.get("LAB_INVENTORY", REPO / "inventories" / "lab")).resolve()
BMC_USER = bmc.USER
RACKS = 3
GEAR_GROUPS = 3
PASSWORD_FILE = STATE / "bmc-password"


class LabError(Exception):
    """A failure with a message that says what to do."""


def log(msg: str) -> None:
    print("labctl: %s" % msg, file=sys.stderr, flush=True)


def run(cmd, check=True, **kw):
    """Run an argument list; raise LabError with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise LabError("%s failed (rc=%d): %s" % (shlex.join(str(c) for c in cmd), proc.returncode,
                                                   (proc.stderr or proc.stdout).strip()[-2000:]))
    return proc


def need_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (debootstrap, chroot, UDP ports 9/7); run it as root")


def need_bin(name: str, package: str) -> str:
    path = shutil.which(name)
    if not path:
        raise LabError("%s not found: install the Debian package %s (make setup does)" % (name, package))
    return path


# ---------------------------------------------------------------------------------------------
# The lab's hosts
# ---------------------------------------------------------------------------------------------

def _env_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        val = int(raw)
    except ValueError:
        raise LabError("%s=%r is not an integer (allowed %d..%d)" % (name, raw, lo, hi)) from None
    if not lo <= val <= hi:
        raise LabError("%s=%d is out of range: allowed %d..%d" % (name, val, lo, hi))
    return val


def settings() -> dict:
    wol_ports = []
    for part in os.environ.get("LAB_WOL_PORTS", "9,7").split(","):
        if not part.strip().isdigit() or not 1 <= int(part) <= 65535:
            raise LabError("LAB_WOL_PORTS=%r: expected a comma-separated list of UDP ports"
                           % os.environ.get("LAB_WOL_PORTS"))
        wol_ports.append(int(part))
    return {
        "hosts": _env_int("LAB_HOSTS", 6, 1, 32),
        "mem_mb": _env_int("LAB_MEM_MB", 1024, 256, 8192),
        "ssh_base": _env_int("LAB_PORT_BASE", 22200, 1024, 65000),
        "bmc_base": _env_int("LAB_BMC_PORT_BASE", 9620, 1024, 65000),
        "boot_timeout": _env_int("LAB_BOOT_TIMEOUT", 420, 10, 3600),
        # Guests booting at once: one per host CPU. TCG guests over-subscribed boot slower in
        # total, not only each (on 2 cores: 6 at once 256 s to SSH on all, 2 at once 46-53 s).
        "boot_parallel": _env_int("LAB_BOOT_PARALLEL", max(1, os.cpu_count() or 1), 1, 32),
        "wol_ports": wol_ports,
    }


def host_table(cfg: dict) -> list[dict]:
    """labN: ports from the bases, MACs from N, rack and gear group (power-aware layout).

    Gear group g = (N-1) mod r + 1 and rack = the (N-1)*RACKS//hosts-th block: with 6 hosts
    every rack holds hosts of two different groups, so powering one group down never
    empties a rack (see inventories/lab/README.md).
    """
    n = cfg["hosts"]
    hosts = []
    for i in range(1, n + 1):
        name = "lab%d" % i
        hdir = STATE / name
        hosts.append({
            "name": name, "index": i,
            "ssh_port": cfg["ssh_base"] + i,
            "metrics_port": cfg["ssh_base"] + 100 + i,
            "bmc_port": cfg["bmc_base"] + i,
            "vm_port": cfg["bmc_base"] + 100 + i,
            "redfish_port": cfg["bmc_base"] + 200 + i,
            # Slurm (lab/slurm.py): this guest's slurmd, and slurmctld's port on the controller
            "slurmd_port": cfg["ssh_base"] + 200 + i,
            "slurmctld_port": cfg["ssh_base"] + 200,
            "mgmt_mac": "52:54:00:fa:00:%02x" % i,
            "wol_mac": "52:54:00:fa:01:%02x" % i,
            "rack": "rack%d" % ((i - 1) * RACKS // n + 1),
            "gear_group": (i - 1) % GEAR_GROUPS + 1,
            "dir": str(hdir), "qmp": str(hdir / "qmp.sock"),
            "console": str(hdir / "console.log"),
        })
    return hosts


def load_table() -> dict:
    """The running lab's table as 'up' wrote it (state/lab.json)."""
    path = STATE / "lab.json"
    if not path.exists():
        raise LabError("no lab state at %s: run 'make lab-up' (labctl up) first" % path)
    return json.loads(path.read_text())


def find_host(table: dict, name: str) -> dict:
    for h in table["hosts"]:
        if h["name"] == name:
            return h
    raise LabError("unknown lab host %r; the lab has %s"
                   % (name, ", ".join(h["name"] for h in table["hosts"])))


def bmc_password() -> str:
    """The BMC admin password: random, generated once, 0600, never printed, never in argv."""
    return bmc.password(PASSWORD_FILE)
