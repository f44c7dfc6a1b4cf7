#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleetsim -- a fleet of lightweight simulated hosts on this machine, reached over real SSH.

Each simulated host is one ``sshd`` running inside its own network namespace and its own
mount namespace, so playbooks run over real SSH against N different machines:

* network: namespace ``fleetnap-<name>-<i>``; a veth pair, the root end ``fn<name><i>``
  enslaved to the bridge ``fn<name>br`` in the root namespace, the other end ``eth0`` inside.
  The bridge holds the first address of the subnet (default ``10.251.0.0/16``, so the bridge
  is 10.251.0.1), host i the (i+1)-th: sim1 = 10.251.0.2, sim300 = 10.251.1.45.
* machine: host i is the captured machine number (i-1) mod M of ``tests/data/cpuidle``
  (M machines, sorted by name, or the list in ``SIM_MACHINES``), so neighbours differ.  Each
  capture is materialized once into ``<state>/machines/<machine>/cpu`` (``ro|`` files 0444,
  ``rw|`` files 0644, as sysfs shows them) plus its kernel command line; the same machine's
  CPU frequency capture (``tests/data/pstates``: cpufreq policies, intel_pstate, EPB, uncore)
  goes into the same tree.
* isolation: ``ip netns exec`` + ``unshare --mount --propagation private`` give sshd a private
  mount namespace: ``/sys/devices/system/cpu`` = overlay(captured machine) and ``/sys/power``
  = overlay(a kernel offering S3: ``freeze mem``, ``s2idle [deep]``) on a tmpfs fresh at each
  boot, ``/etc``, ``/var``, ``/root`` = overlay(the real directory) whose upper layers are the
  host's disk (``<host dir>/disk``, kept across power cycles, wiped by reset), ``/run`` a fresh
  tmpfs. Whatever fleetnap writes on a host is private to it; ``/proc/cmdline`` shows the
  captured machine's command line. Nothing is written to the real /etc, /var or /sys.
* sshd: Debian's ``openssh-server`` binary, one per host, ``-D``, its own ed25519 host key,
  key-only root login with the simulator's key (``<state>/id_ed25519``), ``MaxStartups``/
  ``MaxSessions`` high enough for Ansible's ControlPersist multiplexing, internal sftp.
* power: a real ``ipmi_sim`` BMC per host (lab/bmc.py) on the host's BMC address (the upper
  half of the subnet, port 623; admin password in ``<state>/bmc-password``, 0600), whose
  startcmd is lab/simhost.py: the host's power from power-on to power-off (BMC off/soft/reset,
  suspend by the host's own write to /sys/power/state, wake by a magic packet to the subnet's
  broadcast address naming the host's MAC, after the host's resume time; a power-on boots in
  SIM_BOOT seconds). Each host's cgroup (v2) holds its processes: frozen while it sleeps,
  killed at once at power off. One ``simhost.py --standby`` per simulator is the NICs' standby
  power: a magic packet for a host that is off powers it on through its BMC (WoL from soft-off).

Subcommands::

    up [--hosts N]     start hosts 1..N and their BMCs (idempotent: running hosts are kept,
                       extra ones stopped) and write <inventory>/hosts.yml (group ``sim``)
    down               stop every BMC, process, namespace, veth and the bridge (also after a
                       crash: everything is found again by name, not only from the state file)
    status [--json]    host, address, machine, sshd pid, SSH answering, power, BMC, resume time
    reset [HOST...]    restart hosts and their BMCs with pristine captured sysfs and empty disks
                       (benchmarks use it so every run does the same work)
    fault HOST WHAT    drop-wol [N], hang, bmc-down, bmc-up (see fault())
    path HOST PATH     print PATH as HOST sees it (read through /proc/<sshd pid>/root)

Options and environment (an option wins): ``--state``/``SIM_STATE`` (lab/sim-state),
``--inventory``/``SIM_INVENTORY`` (inventories/sim), ``--name``/``SIM_NAME`` (sim, at most 5
letters/digits: it prefixes the namespaces, interfaces and inventory host names),
``--subnet``/``SIM_SUBNET`` (10.251.0.0/16), ``--hosts``/``SIM_HOSTS`` (100),
``--resume``/``SIM_RESUME`` (loguniform:0.05:11 seconds; fixed:S, uniform:A:B),
``SIM_BOOT`` (1: seconds from a power-on until the host answers; not at up),
``SIM_MACHINES`` (comma-separated capture names; default all).  Root only (namespaces, mounts).  Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import ipaddress
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bmc
import simhost
from proc import (all_processes, file_lock, proc_argv, read_pid, running, spawn, ssh_greets, terminate, wait_port,
                  write_atomic)

LAB_DIR = Path(__file__).resolve().parent
REPO = LAB_DIR.parent
CPUIDLE_DATA = REPO / "tests" / "data" / "cpuidle"
PSTATE_DATA = REPO / "tests" / "data" / "pstates"
SSHD = "/usr/sbin/sshd"
CPU_DIR = "/sys/devices/system/cpu"
POWER_DIR = "/sys/power"
# Real directories each host sees through its own writable overlay layer: its disk, kept in
# <host dir>/disk across power cycles (sim reset wipes it). /run is a fresh tmpfs at each boot.
OVERLAID = ("/etc", "/var", "/root")
READY_TIMEOUT = 60.0
SIMHOST = LAB_DIR / "simhost.py"
VM_PORT = 9002           # each BMC's VM port, on the BMC's own address
WOL_PORT = 9
# What every simulated host's kernel offers for sleep (lab/simhost.py watches the state file).
POWER_FILES = {"state": "freeze mem\n", "mem_sleep": "s2idle [deep]\n",
               "disk": "[platform] shutdown reboot suspend test_resume\n",
               "pm_async": "1\n", "pm_freeze_timeout": "20000\n", "pm_print_times": "0\n",
               "pm_debug_messages": "0\n", "wakeup_count": "0\n",
               # the kernel's count of suspends (lab/simhost.py counts each wake as a success)
               "suspend_stats/success": "0\n", "suspend_stats/fail": "0\n"}
POWER_VERSION = "3"
# Resume time of each host (seconds), drawn once per host: the sources measured 50 ms
# (a Chromebook without its slow devices) to 11.6 s (a disk resumed synchronously).
DEFAULT_RESUME = "loguniform:0.05:11"
RACK_SIZE = 12
# The capture format version: bump to re-materialize the machine templates.
TEMPLATE_VERSION = "2"


class SimError(Exception):
    """A problem the operator can fix; the message says how."""


def log(msg: str) -> None:
    print("[sim] %s" % msg, file=sys.stderr, flush=True)


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    proc = subprocess.run(cmd, check=False, **kw)
    if check and proc.returncode != 0:
        raise SimError("%s failed (rc=%d): %s" % (" ".join(map(str, cmd)), proc.returncode,
                                                   (proc.stderr or proc.stdout or "").strip()[-800:]))
    return proc


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

class Settings:
    def __init__(self, state=None, inventory=None, name=None, subnet=None, resume=None):
        self.state = Path(state or os.environ.get("SIM_STATE") or LAB_DIR / "sim-state").resolve()
        self.inventory = Path(inventory or os.environ.get("SIM_INVENTORY")
                              or REPO / "inventories" / "sim").resolve()
        self.name = name or os.environ.get("SIM_NAME") or "sim"
        if not re.fullmatch(r"[a-z][a-z0-9]{0,4}", self.name):
            raise SimError("simulator name %r: use 1-5 lowercase letters/digits, starting with a "
                           "letter (it prefixes interface names, which the kernel limits to 15 "
                           "characters)" % self.name)
        text = subnet or os.environ.get("SIM_SUBNET") or "10.251.0.0/16"
        try:
            self.subnet = ipaddress.IPv4Network(text, strict=True)
        except ValueError as exc:
            raise SimError("subnet %r is not an IPv4 network (%s); e.g. 10.251.0.0/16" % (text, exc))
        if not self.subnet.is_private:
            raise SimError("subnet %s is not a private network; use one from 10.0.0.0/8, "
                           "172.16.0.0/12 or 192.168.0.0/16 that this machine does not route" % self.subnet)
        self.bridge = "fn%sbr" % self.name
        self.resume_text = resume or os.environ.get("SIM_RESUME") or DEFAULT_RESUME
        boot = os.environ.get("SIM_BOOT", "1")
        try:
            self.boot_s = float(boot)
        except ValueError:
            self.boot_s = -1.0
        if not 0 <= self.boot_s <= 600:
            raise SimError("SIM_BOOT %r: seconds from a power-on until the host answers, 0..600" % boot)
        self.resume = parse_resume(self.resume_text)
        self.broadcast = str(self.subnet.broadcast_address)
        self.password_file = self.state / "bmc-password"
        self.table_path = self.state / "sim.json"
        self.key = self.state / "id_ed25519"

    def max_hosts(self) -> int:
        # hosts in the lower half (network, bridge, hosts), their BMCs in the upper half
        return self.subnet.num_addresses // 2 - 2

    def host(self, i: int, machines: list[str]) -> dict:
        ip = self.subnet.network_address + 1 + i
        return {
            "index": i,
            "name": "%s%d" % (self.name, i),
            "netns": "fleetnap-%s-%d" % (self.name, i),
            "veth": "fn%s%d" % (self.name, i),
            "ip": str(ip),
            "machine": machines[(i - 1) % len(machines)],
            "dir": str(self.state / "hosts" / ("%s%d" % (self.name, i))),
            "mac": "02:fe:" + ":".join("%02x" % b for b in ip.packed),
            "bmc_ip": str(self.subnet.network_address + self.subnet.num_addresses // 2 + i),
            "rack": "rack%d" % ((i - 1) // RACK_SIZE + 1),
            "gear_group": (i - 1) % 3 + 1,
            "resume_s": self.resume(self.name, i),
        }


def parse_resume(text: str):
    """SIM_RESUME -> f(sim name, host index) = that host's resume time in seconds (the same
    every run). fixed:S, uniform:A:B or loguniform:A:B, 0 <= A <= B <= 600."""
    parts = text.split(":")
    try:
        nums = [float(p) for p in parts[1:]]
    except ValueError:
        nums = []
    kind = parts[0]
    ok = (kind == "fixed" and len(nums) == 1) or (kind in ("uniform", "loguniform") and len(nums) == 2)
    if ok:
        ok = all(0 <= n <= 600 for n in nums) and (len(nums) == 1 or nums[0] <= nums[1])
        if kind == "loguniform" and ok:
            ok = nums[0] > 0
    if not ok:
        raise SimError("resume distribution %r: use fixed:S, uniform:A:B or loguniform:A:B in seconds "
                       "(0 <= A <= B <= 600; A > 0 for loguniform), e.g. %s" % (text, DEFAULT_RESUME))

    def draw(name: str, i: int) -> float:
        seed = int(hashlib.sha256(("%s/%d/%s" % (name, i, text)).encode()).hexdigest()[:16], 16)
        rng = random.Random(seed)
        if kind == "fixed":
            return round(nums[0], 3)
        if kind == "uniform":
            return round(rng.uniform(nums[0], nums[1]), 3)
        return round(math.exp(rng.uniform(math.log(nums[0]), math.log(nums[1]))), 3)
    return draw


def machine_names() -> list[str]:
    if not CPUIDLE_DATA.is_dir():
        raise SimError("no captured machines: %s does not exist (it is part of the "
                       "repository: a checkout without it is incomplete)" % CPUIDLE_DATA)
    available = sorted(p.stem for p in CPUIDLE_DATA.glob("*.txt"))
    wanted = os.environ.get("SIM_MACHINES", "").strip()
    if not wanted:
        return available
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise SimError("SIM_MACHINES names unknown captures %s; available: %s"
                       % (", ".join(unknown), ", ".join(available)))
    return names


# ---------------------------------------------------------------------------------------------
# State on disk
# ---------------------------------------------------------------------------------------------

def need_root_and_tools() -> None:
    if os.geteuid() != 0:
        raise SimError("the simulator needs root (network and mount namespaces): run it with sudo")
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux"), ("nsenter", "util-linux"),
                          ("mount", "mount"), ("ssh-keygen", "openssh-client"),
                          ("ipmi_sim", "openipmi")):
        if not shutil.which(tool):
            raise SimError("%s not found: apt-get install %s" % (tool, package))
    if not os.access(SSHD, os.X_OK):
        raise SimError("%s not found: apt-get install openssh-server (make setup installs it)" % SSHD)


def load_table(cfg: Settings) -> dict:
    try:
        return json.loads(cfg.table_path.read_text())
    except (OSError, ValueError):
        return {}


def save_table(cfg: Settings, table: dict) -> None:
    write_atomic(cfg.table_path, json.dumps(table, indent=2) + "\n")


def ensure_key(cfg: Settings) -> Path:
    if not cfg.key.exists():
        cfg.state.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleetnap-sim", "-f", str(cfg.key)])
    auth = cfg.state / "authorized_keys"
    pub = (cfg.state / "id_ed25519.pub").read_text()
    if not auth.exists() or auth.read_text() != pub:
        auth.write_text(pub)
        auth.chmod(0o600)
    return cfg.key


def parse_capture(src: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """A captured machine (``tests/data/cpuidle/<machine>.txt``, pepc's format): its kernel
    command line (the ``# cmdline:`` line) and its ``(mode, path, value)`` attribute lines.
    Also used by the tests' materialize (tests/conftest.py)."""
    cmdline, entries = "", []
    for line in src.read_text().splitlines():
        if line.startswith("# cmdline:"):
            cmdline = line.split(":", 1)[1].strip()
        elif line and not line.startswith("#"):
            mode, path, value = line.split("|", 2)
            entries.append((mode, path, value))
    return cmdline, entries


def materialize(machine: str, dest: Path) -> Path:
    """Captured sysfs of ``machine`` -> ``dest/cpu`` (the /sys/devices/system/cpu tree) and
    ``dest/cmdline``; written once (a stamp file records the format version)."""
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text() == TEMPLATE_VERSION:
        return dest
    src = CPUIDLE_DATA / ("%s.txt" % machine)
    tmp = Path(tempfile.mkdtemp(prefix=".%s." % machine, dir=str(dest.parent)))
    cpu = tmp / "cpu"
    cmdline, entries = parse_capture(src)
    freq = PSTATE_DATA / ("%s.txt" % machine)
    if freq.exists():           # the same machine's cpufreq, EPB and uncore files, beside its cpuidle
        entries += parse_capture(freq)[1]
    for mode, path, value in entries:
        if not path.startswith(CPU_DIR + "/"):
            raise SimError("%s: %s is outside %s; the simulator only overlays that tree" % (src, path, CPU_DIR))
        target = cpu / path[len(CPU_DIR) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
        target.chmod(0o444 if mode == "ro" else 0o644)
    (tmp / "cmdline").write_text(cmdline + "\n")
    (tmp / ".complete").write_text(TEMPLATE_VERSION)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def power_template(cfg: Settings) -> Path:
    """The /sys/power every simulated host starts with: a kernel offering S3 (mem, deep) and
    suspend to idle, whatever the kernel running the simulator offers (often nothing)."""
    dest = cfg.state / "power"
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text() == POWER_VERSION:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, value in POWER_FILES.items():
        (dest / name).parent.mkdir(exist_ok=True)
        (dest / name).write_text(value)
        (dest / name).chmod(0o644)
    stamp.write_text(POWER_VERSION)
    return dest


def sshd_config(cfg: Settings, h: dict) -> str:
    return "\n".join([
        "# Written by lab/sim.py for %s (%s); regenerated on every up." % (h["name"], h["machine"]),
        "ListenAddress %s:22" % h["ip"],
        "HostKey %s/ssh_host_ed25519_key" % h["dir"],
        "PidFile none",
        "AuthorizedKeysFile %s" % (cfg.state / "authorized_keys"),
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        # Ansible: one multiplexed master per host (ControlPersist), many sessions over it.
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "LoginGraceTime 60",
        "LogLevel ERROR",
        "AcceptEnv LANG LC_*",
        "Subsystem sftp internal-sftp",
        "",
    ])


def start_script(cfg: Settings, h: dict) -> str:
    """Runs inside the host's namespaces at each power-on (lab/simhost.py starts it): private
    layers, then exec sshd (its pid is the one simhost records). The sysfs layers and /run are
    fresh at every boot; /etc, /var and /root are the host's disk (<host dir>/disk)."""
    m = cfg.state / "machines" / h["machine"]
    lines = [
        "#!/bin/sh",
        "# Written by lab/sim.py for %s: mounts private to this host, then sshd." % h["name"],
        "set -eu",
        "L=%s/layers" % h["dir"],
        "D=%s/disk" % h["dir"],
        "mount -t tmpfs -o mode=0700,size=256m fleetnap-sim-%s \"$L\"" % h["name"],
    ]
    layers = [("cpu", str(m / "cpu"), CPU_DIR, "$L"), ("power", str(cfg.state / "power"), POWER_DIR, "$L")]
    layers += [(d.strip("/"), d, d, "$D") for d in OVERLAID if os.path.isdir(d)]
    for tag, lower, target, base in layers:
        lines.append("mkdir -p \"%s/%s/u\" \"%s/%s/w\"" % (base, tag, base, tag))
        lines.append("mount -t overlay fleetnap-sim -o lowerdir=%s,upperdir=\"%s/%s/u\",workdir=\"%s/%s/w\" %s"
                     % (lower, base, tag, base, tag, target))
    lines += [
        "mount -t tmpfs -o mode=0755,size=64m fleetnap-sim-run /run",
        "mkdir -p /run/sshd",
        "mount --bind -o ro %s/cmdline /proc/cmdline" % m,
        "ip link set lo up",
        "exec %s -D -e -f %s/sshd_config" % (SSHD, h["dir"]),
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Processes and namespaces
# ---------------------------------------------------------------------------------------------

def recorded_sshd_pid(h: dict) -> int | None:
    """The pid simhost recorded for the host's sshd at its last power-on."""
    return read_pid(Path(h["dir"]) / "sshd.pid")


def sshd_alive(h: dict) -> int | None:
    """The recorded sshd pid if it is alive and still this host's sshd."""
    pid = recorded_sshd_pid(h)
    if not pid or not running(pid):
        return None
    argv = proc_argv(pid)
    if argv is None:
        return None
    cmdline = " ".join(argv)
    if not cmdline:
        # In the middle of an execve (ip -> unshare -> sh -> sshd) the new image has no argument
        # area yet and cmdline reads empty; with a cold page cache that lasts milliseconds. A CI
        # run once took a starting sshd for a dead one this way. Alive, not zombie: ours.
        return pid
    # While starting, the pid runs ip netns exec / unshare / start.sh, then execs sshd.
    return pid if ("%s/sshd_config" % h["dir"] in cmdline or "%s/start.sh" % h["dir"] in cmdline) else None


def existing_netns(cfg: Settings) -> list[str]:
    out = run(["ip", "netns", "list"]).stdout
    prefix = "fleetnap-%s-" % cfg.name
    return [line.split()[0] for line in out.splitlines()
            if line.split() and line.split()[0].startswith(prefix)]


def netns_pids(ns: str) -> list[int]:
    proc = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_pids(pids: list[int], timeout: float = 5.0) -> None:
    """SIGTERM, then after timeout seconds SIGKILL (proc.terminate); SimError if any is left."""
    left = terminate(pids, timeout)
    if left:
        raise SimError("processes %s did not exit after SIGKILL" % left)


def our_processes(cfg: Settings, hosts: list[dict] | None = None) -> dict[str, list[int]]:
    """{'ipmi_sim': [...], 'simhost': [...], 'sshd': [...]}: this simulator's BMCs, power
    programs and sshds (of the given hosts, or all), found by their host directory in their
    command line, so also after a crash that lost the state file."""
    dirs = [h["dir"] for h in hosts] if hosts is not None else [str(cfg.state / "hosts")]
    found: dict[str, list[int]] = {"ipmi_sim": [], "simhost": [], "sshd": []}
    for pid, argv in all_processes():
        # an argument that is one of the directories or a path under it (simhost.py HOST_DIR,
        # ipmi_sim -c HOST_DIR/lan.conf, sshd -f HOST_DIR/sshd_config)
        if not any(a == d or a.startswith(d + "/") for a in argv for d in dirs) or not running(pid):
            continue
        prog = os.path.basename(argv[0])
        if prog == "ipmi_sim":
            found["ipmi_sim"].append(pid)
        elif len(argv) > 1 and argv[1].endswith("simhost.py"):
            found["simhost"].append(pid)
        elif "sshd" in prog:
            found["sshd"].append(pid)
    return found


def remove_cgroups(cfg: Settings) -> None:
    """The simulator's cgroups (lab/simhost.py makes one per host under fleetnap-sim/NAME)."""
    try:
        base = simhost.cgroup2_root() / "fleetnap-sim" / cfg.name
    except SystemExit:
        return
    if not base.is_dir():
        return
    for d in sorted(base.iterdir(), reverse=True):
        if d.is_dir():
            with contextlib.suppress(OSError):
                (d / "cgroup.kill").write_text("1")
            end = time.monotonic() + 5
            while time.monotonic() < end:
                with contextlib.suppress(OSError):
                    d.rmdir()
                if not d.exists():
                    break
                time.sleep(0.05)
    with contextlib.suppress(OSError):
        base.rmdir()


def stop_host_processes(cfg: Settings, hosts: list[dict] | None) -> int:
    """The hosts' BMCs first (so none powers a host on again), then their power programs (each
    powers its host off: every process of the host at once), then whatever is left in their
    network namespaces. Returns how many processes were stopped."""
    procs = our_processes(cfg, hosts)
    kill_pids(procs["ipmi_sim"])
    kill_pids(procs["simhost"], timeout=15.0)
    pids = set(procs["sshd"])
    for h in hosts if hosts is not None else []:
        if h.get("netns"):
            pids.update(netns_pids(h["netns"]))
    kill_pids(sorted(pids))
    # Reap our own children (a host started by this process).
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    return sum(len(v) for v in procs.values()) + len(pids - set(procs["sshd"]))


def our_veths(cfg: Settings) -> list[str]:
    names = [line.split(":")[1].strip().split("@")[0]
             for line in run(["ip", "-o", "link", "show"]).stdout.splitlines()]
    return [n for n in names if re.fullmatch(r"fn%s\d+" % cfg.name, n)]


def batch(cmds: list[str], netns: str | None = None) -> None:
    if not cmds:
        return
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, input="\n".join(cmds) + "\n")


def link_exists(name: str) -> bool:
    return run(["ip", "link", "show", "dev", name], check=False).returncode == 0


def setup_network(cfg: Settings, hosts: list[dict]) -> None:
    prefix = cfg.subnet.prefixlen
    root = []
    if not link_exists(cfg.bridge):
        gw = cfg.subnet.network_address + 1
        root += ["link add %s type bridge" % cfg.bridge,
                 "addr add %s/%d brd + dev %s" % (gw, prefix, cfg.bridge),
                 "link set %s up" % cfg.bridge]
        have = set()
    else:
        have = set(re.findall(r"inet (\S+)/", run(["ip", "-o", "-4", "addr", "show", "dev", cfg.bridge]).stdout))
    known = set(existing_netns(cfg))
    for h in hosts:
        if h["netns"] in known:            # a leftover of a crash: start from scratch
            kill_pids(netns_pids(h["netns"]))
            run(["ip", "netns", "del", h["netns"]])
        if link_exists(h["veth"]):
            run(["ip", "link", "del", h["veth"]], check=False)
        root += ["netns add %s" % h["netns"],
                 "link add %s type veth peer name eth0 address %s netns %s" % (h["veth"], h["mac"], h["netns"]),
                 "link set %s master %s" % (h["veth"], cfg.bridge),
                 "link set %s up" % h["veth"]]
        # The host's BMC answers on an address of its own (on the bridge, as a management LAN).
        if h["bmc_ip"] not in have:
            root.append("addr add %s/32 dev %s" % (h["bmc_ip"], cfg.bridge))
    batch(root)
    for h in hosts:
        batch(["link set lo up", "addr add %s/%d brd + dev eth0" % (h["ip"], prefix), "link set eth0 up"],
              netns=h["netns"])


def bmc_password(cfg: Settings) -> str:
    """The simulator's BMC admin password (bmc.password: generated once, mode 0600; the inventory
    reads it with a file lookup, modules hand it to ipmitool through the environment, never argv)."""
    return bmc.password(cfg.password_file)


def start_bmc(cfg: Settings, h: dict, power_on: bool = True) -> subprocess.Popen:
    """The host's BMC (ipmi_sim); with power_on it powers the host on at once (startnow): its
    startcmd is lab/simhost.py, the host's power from power-on to power-off."""
    hdir = Path(h["dir"])
    conf = bmc.lan_conf(name=h["name"], addr=h["bmc_ip"], port=623, vm_addr=h["bmc_ip"], vm_port=VM_PORT,
                        startcmd="/usr/bin/python3 %s %s" % (SIMHOST, h["dir"]), password=bmc_password(cfg),
                        startnow=power_on, poweroff_wait=30, kill_wait=5, written_by="lab/sim.py")
    bmc.write_config(hdir, conf)
    return bmc.start(hdir)


def start_host(cfg: Settings, h: dict) -> subprocess.Popen:
    """Everything the host's power program needs (host.json, sshd config, start script, host
    key), then its BMC, which powers it on."""
    hdir = Path(h["dir"])
    (hdir / "layers").mkdir(parents=True, exist_ok=True)
    key = hdir / "ssh_host_ed25519_key"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h["name"], "-f", str(key)])
    (hdir / "sshd_config").write_text(sshd_config(cfg, h))
    (hdir / "start.sh").write_text(start_script(cfg, h))
    host_json = {k: h[k] for k in ("name", "netns", "veth", "ip", "mac", "bmc_ip", "resume_s")}
    host_json.update({"sim": cfg.name, "vm_port": VM_PORT, "broadcast": cfg.broadcast, "wol_port": WOL_PORT,
                      "power_state": POWER_FILES["state"], "shutdown_s": 1.0, "boot_s": cfg.boot_s,
                      "mem_sleep": POWER_FILES["mem_sleep"].replace("[", "").replace("]", "").split()})
    (hdir / "host.json").write_text(json.dumps(host_json, indent=2) + "\n")
    for f in ("sshd.pid", "power.state", "faults.json"):
        with contextlib.suppress(FileNotFoundError):
            (hdir / f).unlink()
    return start_bmc(cfg, h)


def ssh_answers(ip: str, timeout: float = 1.0) -> bool:
    return ssh_greets(ip, 22, timeout)


def power_state(h: dict) -> dict:
    """What the host's power program last recorded ({} before its first power-on)."""
    try:
        return json.loads((Path(h["dir"]) / "power.state").read_text())
    except (OSError, ValueError):
        return {}


def wait_ready(hosts: list[dict], procs: dict, timeout: float = READY_TIMEOUT) -> list[dict]:
    """Hosts whose sshd greets within timeout; the others are returned with a reason.

    procs: host name -> the Popen of the host's BMC (this process is its parent, so poll() says
    for certain whether it exited, and with which status)."""
    pending = list(hosts)
    end = time.monotonic() + timeout

    def exited(h):
        rc = procs[h["name"]].poll()
        if rc is not None:
            h["exit"] = rc
        return rc is not None

    while pending and time.monotonic() < end:
        still = []
        for h in pending:
            if exited(h):
                continue                   # dead: reported below
            if not ssh_answers(h["ip"], 0.5):
                still.append(h)
        dead = [h for h in pending if exited(h)]
        if dead:
            return dead
        pending = still
        if pending:
            time.sleep(0.1)
    return pending


def host_failure(h: dict) -> str:
    logs = []
    for name in ("ipmi_sim.log", "simhost.log", "sshd.log"):
        with contextlib.suppress(OSError):
            text = (Path(h["dir"]) / name).read_text()[-400:].strip()
            if text:
                logs.append("%s: %s" % (name, text))
    rc = h.pop("exit", None)
    if rc is None:
        how = "its BMC runs; power %s; sshd %s" % (power_state(h).get("state", "never on"),
                                                    "running but not greeting" if sshd_alive(h) else "not running")
    elif rc < 0:
        how = "its BMC (ipmi_sim) was killed by signal %d" % -rc
    else:
        how = "its BMC (ipmi_sim) exited with status %d" % rc
    return "%s (%s, %s): %s; logs in %s: %s" % (h["name"], h["ip"], h["netns"], how, h["dir"],
                                               " | ".join(logs) or "(empty)")


# ---------------------------------------------------------------------------------------------
# Inventory
# ---------------------------------------------------------------------------------------------

def write_known_hosts(cfg: Settings, table: dict) -> Path:
    """<state>/known_hosts: every host's address and its own host key (start_host made it)."""
    lines = []
    for h in table["hosts"]:
        pub = (Path(h["dir"]) / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append("%s %s %s\n" % (h["ip"], pub[0], pub[1]))
    path = cfg.state / "known_hosts"
    write_atomic(path, "".join(lines))
    return path


def write_inventory(cfg: Settings, table: dict) -> Path:
    """<inventory>/hosts.yml (JSON is YAML): group sim, one entry per host (address, captured
    machine, BMC, MAC, rack, gear group), SSH, BMC and Wake-on-LAN settings; a group per rack
    and per gear group, as in the lab."""
    hosts, groups = {}, {}
    for h in table["hosts"]:
        hosts[h["name"]] = {"ansible_host": h["ip"], "fleetnap_sim_machine": h["machine"],
                            "fleetnap_bmc_address": h["bmc_ip"], "fleetnap_wol_macs": [h["mac"]],
                            "fleetnap_rack": h["rack"], "fleetnap_gear_group": h["gear_group"]}
        for g in (h["rack"], "gear_group_%d" % h["gear_group"]):
            groups.setdefault(g, {"hosts": {}})["hosts"][h["name"]] = None
    group_vars = {
        "ansible_user": "root",
        "ansible_port": 22,
        "ansible_ssh_private_key_file": str(cfg.key),
        # Every host has its own host key, generated by start_host; the simulator lists them in
        # <state>/known_hosts and Ansible checks them (nothing goes to ~/.ssh/known_hosts).
        # ControlMaster/ControlPersist come from ansible.cfg's ssh_args (kept, not replaced).
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=%s "
                                   "-o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR"
                                   % write_known_hosts(cfg, table),
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_timeout": 30,
        # A latency budget that disables at least one C-state on every captured machine
        # (snr0's deepest state declares 15 us; everything else has deeper ones).
        "fleetnap_profiles": {
            "sim": {"budget_us": 10, "resume_budget_ms": None, "declared_margin": 1.0},
            "batch": {"budget_us": None, "resume_budget_ms": None},
        },
        "fleetnap_profile": "sim",
        "fleetnap_artifacts_dir": str(cfg.state / "artifacts"),
        # Power: every host has its own ipmi_sim BMC (IPMI 2.0 lanplus on its own address, port
        # 623) and wakes from S3 on a magic packet to the fleet's broadcast address.
        "fleetnap_bmc_user": bmc.USER,
        "fleetnap_bmc_password": "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD', default='') "
                                 "or lookup('ansible.builtin.file', '%s') }}" % cfg.password_file,
        "fleetnap_bmc_cipher_suite": 3,
        "fleetnap_wol_address": cfg.broadcast,
        "fleetnap_wol_port": WOL_PORT,
        "fleetnap_power_methods": ["wol", "ipmi"],
        # Watts on (idle), asleep in S3 and off (soft-off standby), for the energy not spent:
        # the sources' server (S3 draws 5 W of 130 W idle); ipmi_sim offers no DCMI reading.
        "fleetnap_power_w": {"on": 130, "asleep": 5, "off": 3},
    }
    inv = {"all": {"children": {"sim": {"hosts": hosts, "vars": group_vars,
                                        "children": dict(sorted(groups.items()))}}}}
    path = cfg.inventory / "hosts.yml"
    write_atomic(path, "# Written by lab/sim.py up -- do not edit (regenerated on every sim-up).\n"
                 + json.dumps(inv, indent=2) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

def check_table_matches(cfg: Settings, table: dict) -> None:
    if table.get("hosts") and (table.get("subnet") != str(cfg.subnet) or table.get("name") != cfg.name):
        raise SimError("a simulator is recorded in %s with name %s and subnet %s; run `lab/sim.py "
                       "down` first (or use another --state)" % (cfg.table_path, table.get("name"),
                                                                 table.get("subnet")))


def up(cfg: Settings, count: int) -> dict:
    need_root_and_tools()
    if not 1 <= count <= cfg.max_hosts():
        raise SimError("--hosts %d: use 1..%d (subnet %s)" % (count, cfg.max_hosts(), cfg.subnet))
    t0 = time.monotonic()
    table = load_table(cfg)
    check_table_matches(cfg, table)
    machines = machine_names()
    ensure_key(cfg)
    bmc_password(cfg)
    (cfg.state / "machines").mkdir(parents=True, exist_ok=True)
    for m in sorted(set(machines[:count])):
        materialize(m, cfg.state / "machines" / m)
    power_template(cfg)
    t_templates = time.monotonic() - t0

    recorded = {h["name"]: h for h in table.get("hosts", [])}
    wanted = [cfg.host(i, machines) for i in range(1, count + 1)]
    extra = [h for name, h in recorded.items() if name not in {w["name"] for w in wanted}]
    for h in extra:
        stop_host(cfg, h)
    kept, todo = [], []
    for h in wanted:
        old = recorded.get(h["name"])
        if old and dict(old, pid=None) == dict(h, pid=None) and sshd_alive(old) and ssh_answers(h["ip"]) \
                and our_processes(cfg, [old])["ipmi_sim"]:
            kept.append(old)
        else:
            if old:
                stop_host(cfg, old)
            todo.append(h)
    setup_network(cfg, todo)
    t_net = time.monotonic() - t0 - t_templates
    procs = {h["name"]: start_host(cfg, h) for h in todo}
    table = {"name": cfg.name, "subnet": str(cfg.subnet), "bridge": cfg.bridge, "resume": cfg.resume_text,
             "key": str(cfg.key), "hosts": sorted(kept + todo, key=lambda h: h["index"])}
    save_table(cfg, table)
    failed = wait_ready(todo, procs)
    if failed:
        raise SimError("%d host(s) did not start:\n  %s" % (len(failed), "\n  ".join(host_failure(h) for h in failed[:5])))
    for h in todo:
        h["pid"] = recorded_sshd_pid(h)
    save_table(cfg, table)
    start_standby(cfg)
    inv = write_inventory(cfg, table)
    return {"hosts": count, "started": len(todo), "kept": len(kept), "stopped": len(extra),
            "seconds": round(time.monotonic() - t0, 2), "templates_seconds": round(t_templates, 2),
            "network_seconds": round(t_net, 2), "inventory": str(inv)}


def stop_host(cfg: Settings, h: dict) -> None:
    stop_host_processes(cfg, [h])
    if h["netns"] in existing_netns(cfg):
        run(["ip", "netns", "del", h["netns"]])
    if link_exists(h["veth"]):
        run(["ip", "link", "del", h["veth"]], check=False)     # may vanish with the namespace
    for d in ("layers", "disk"):
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(Path(h["dir"]) / d)


def down(cfg: Settings) -> dict:
    need_root_and_tools()
    t0 = time.monotonic()
    table = load_table(cfg)
    names = {h["netns"] for h in table.get("hosts", [])} | set(existing_netns(cfg))
    stopped = stop_host_processes(cfg, None)
    pids = set()
    for ns in names:
        pids.update(netns_pids(ns))
    kill_pids(sorted(pids))
    remove_cgroups(cfg)
    cmds = ["netns del %s" % ns for ns in sorted(names) if ns in set(existing_netns(cfg))]
    batch(cmds)
    # The root end of a veth goes away with its namespace, asynchronously: wait for that, then
    # delete what is left (a crash between "link add" and "netns add" leaves one behind).
    end = time.monotonic() + 3.0
    while True:
        veths = our_veths(cfg)
        if not veths or time.monotonic() > end:
            break
        time.sleep(0.05)
    for v in veths:
        run(["ip", "link", "del", v], check=False)
    left = our_veths(cfg)
    if left:
        raise SimError("could not delete interfaces %s (ip link del %s)" % (", ".join(left), left[0]))
    bridge = link_exists(cfg.bridge)
    if bridge:
        run(["ip", "link", "del", cfg.bridge])
    hosts_dir = cfg.state / "hosts"
    if hosts_dir.exists():
        shutil.rmtree(hosts_dir)
    with contextlib.suppress(FileNotFoundError):
        cfg.table_path.unlink()
    with contextlib.suppress(FileNotFoundError):
        (cfg.inventory / "hosts.yml").unlink()
    return {"stopped_processes": stopped + len(pids), "namespaces_removed": len(cmds),
            "veths_removed": len(veths), "bridge_removed": bridge,
            "seconds": round(time.monotonic() - t0, 2)}


def hosts_named(table: dict, only: list[str]) -> list[dict]:
    if not table.get("hosts"):
        raise SimError("no simulator is running here: run `lab/sim.py up` first")
    hosts = [h for h in table["hosts"] if not only or h["name"] in only]
    unknown = set(only) - {h["name"] for h in hosts}
    if unknown:
        raise SimError("unknown host(s) %s; hosts are %s..%s" % (", ".join(sorted(unknown)),
                                                              table["hosts"][0]["name"], table["hosts"][-1]["name"]))
    return hosts


def reset(cfg: Settings, only: list[str]) -> dict:
    """Restart hosts and their BMCs: fresh sysfs layers = the captured machine as it was, an
    empty disk (/etc, /var, /root layers), powered on."""
    need_root_and_tools()
    t0 = time.monotonic()
    table = load_table(cfg)
    hosts = hosts_named(table, only)
    stop_host_processes(cfg, hosts)
    for h in hosts:
        for d in ("layers", "disk"):
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(Path(h["dir"]) / d)
        run(["ip", "link", "set", h["veth"], "up"])
    procs = {h["name"]: start_host(cfg, h) for h in hosts}
    failed = wait_ready(hosts, procs)
    if failed:
        raise SimError("%d host(s) did not restart:\n  %s" % (len(failed), "\n  ".join(host_failure(h) for h in failed[:5])))
    for h in hosts:
        h["pid"] = recorded_sshd_pid(h)
    save_table(cfg, table)
    return {"reset": len(hosts), "seconds": round(time.monotonic() - t0, 2)}


def fault(cfg: Settings, host: str, what: str, count: int) -> dict:
    """Faults for tests: drop-wol (the next COUNT magic packets for the host are lost), hang
    (the host freezes: silent, deaf to magic packets, only its BMC brings it back), bmc-down
    (its BMC stops answering; the host runs on), bmc-up (the BMC is back, the host's power
    state as it was)."""
    table = load_table(cfg)
    h = hosts_named(table, [host])[0]
    hdir = Path(h["dir"])
    if what == "drop-wol":
        if not 0 <= count <= 1000:
            raise SimError("drop-wol COUNT must be 0..1000")
        simhost.write_faults(hdir, dict(simhost.read_faults(hdir), drop_wol=count))
    elif what == "hang":
        pid = power_state(h).get("pid")
        if not pid or power_state(h).get("state") != "on" or not running(pid):
            raise SimError("%s is not running (power %s): only a running host can hang"
                           % (host, power_state(h).get("state", "off")))
        os.kill(pid, signal.SIGUSR1)
    elif what == "bmc-down":
        kill_pids(our_processes(cfg, [h])["ipmi_sim"])
    elif what == "bmc-up":
        if not our_processes(cfg, [h])["ipmi_sim"]:
            start_bmc(cfg, h, power_on=False)
            wait_port(623, socket.SOCK_DGRAM, 10, addr=h["bmc_ip"], poll=0.05)
    else:
        raise SimError("unknown fault %r: drop-wol, hang, bmc-down, bmc-up" % what)
    return {"host": host, "fault": what, "power": power_state(h).get("state", "off"),
            "bmc": bool(our_processes(cfg, [h])["ipmi_sim"])}


def start_standby(cfg: Settings) -> None:
    """The hosts' NICs on standby power (lab/simhost.py --standby): Wake-on-LAN from soft-off.
    Restarted at every up, so it knows every host."""
    hosts_dir = cfg.state / "hosts"
    for pid in our_processes(cfg)["simhost"]:
        if (proc_argv(pid) or [])[2:3] == ["--standby"]:
            kill_pids([pid])
    spawn(["/usr/bin/python3", str(SIMHOST), "--standby", str(hosts_dir)], cfg.state / "standby.log")


def host_path(cfg: Settings, host: str, path: str) -> Path:
    """PATH as HOST sees it: through its sshd's root, i.e. inside its mount namespace."""
    table = load_table(cfg)
    for h in table.get("hosts", []):
        if h["name"] == host:
            pid = sshd_alive(h)
            if not pid:
                raise SimError("%s is not running (run `lab/sim.py up`)" % host)
            return Path("/proc/%d/root" % pid) / path.lstrip("/")
    raise SimError("unknown host %s (see `lab/sim.py status`)" % host)


def status(cfg: Settings) -> list[dict]:
    table = load_table(cfg)
    rows = []
    for h in table.get("hosts", []):
        pid = sshd_alive(h)
        power = power_state(h)
        rows.append({"host": h["name"], "ip": h["ip"], "machine": h["machine"], "netns": h["netns"],
                     "pid": pid, "ssh": bool(pid) and ssh_answers(h["ip"], 0.5),
                     "power": power.get("state", "off"), "power_since": power.get("since"),
                     "bmc": h["bmc_ip"], "bmc_up": bool(our_processes(cfg, [h])["ipmi_sim"]),
                     "mac": h["mac"], "gear_group": h["gear_group"], "rack": h["rack"],
                     "resume_s": h["resume_s"]})
    return rows


def print_status(cfg: Settings, rows: list[dict]) -> None:
    if not rows:
        print("no simulated hosts (state %s)" % cfg.state)
        return
    print("%-8s %-15s %-24s %-8s %-5s %-7s %-15s %s" % ("host", "address", "machine", "pid", "ssh", "power",
                                                        "bmc", "resume"))
    for r in rows:
        print("%-8s %-15s %-24s %-8s %-5s %-7s %-15s %.3f s" % (
            r["host"], r["ip"], r["machine"], r["pid"] or "-", "up" if r["ssh"] else "DOWN", r["power"],
            r["bmc"] + ("" if r["bmc_up"] else " (down)"), r["resume_s"]))
    up_count = sum(1 for r in rows if r["ssh"])
    print("%d/%d hosts answer SSH; inventory %s" % (up_count, len(rows), cfg.inventory / "hosts.yml"))


def state_lock(cfg: Settings):
    """One up/down/reset at a time per state directory (a second caller waits)."""
    return file_lock(cfg.state / "sim.lock")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="sim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", help="state directory (SIM_STATE, default lab/sim-state)")
    ap.add_argument("--inventory", help="inventory directory (SIM_INVENTORY, default inventories/sim)")
    ap.add_argument("--name", help="prefix of hosts, namespaces and interfaces (SIM_NAME, default sim)")
    ap.add_argument("--subnet", help="private IPv4 subnet (SIM_SUBNET, default 10.251.0.0/16)")
    ap.add_argument("--resume", help="hosts' resume times (SIM_RESUME, default %s)" % DEFAULT_RESUME)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up", help="start N hosts (idempotent) and write the inventory")
    p.add_argument("--hosts", type=int, default=None, help="number of hosts (SIM_HOSTS, default 100)")
    sub.add_parser("down", help="remove every host, namespace, veth, the bridge")
    p = sub.add_parser("status", help="host, address, machine, sshd pid, SSH")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("reset", help="restart hosts with pristine sysfs and empty private layers")
    p.add_argument("hosts", nargs="*")
    p = sub.add_parser("fault", help="inject a fault: drop-wol COUNT, hang, bmc-down, bmc-up")
    p.add_argument("host")
    p.add_argument("what", choices=("drop-wol", "hang", "bmc-down", "bmc-up"))
    p.add_argument("count", type=int, nargs="?", default=1)
    p = sub.add_parser("path", help="print a file as a host sees it")
    p.add_argument("host")
    p.add_argument("path")
    args = ap.parse_args(argv)
    try:
        cfg = Settings(args.state, args.inventory, args.name, args.subnet, args.resume)
        if args.cmd == "up":
            count = args.hosts if args.hosts is not None else int(os.environ.get("SIM_HOSTS", "100"))
            with state_lock(cfg):
                print(json.dumps(up(cfg, count), indent=2))
        elif args.cmd == "down":
            with state_lock(cfg):
                print(json.dumps(down(cfg), indent=2))
        elif args.cmd == "status":
            rows = status(cfg)
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                print_status(cfg, rows)
        elif args.cmd == "reset":
            with state_lock(cfg):
                print(json.dumps(reset(cfg, args.hosts), indent=2))
        elif args.cmd == "fault":
            print(json.dumps(fault(cfg, args.host, args.what, args.count), indent=2))
        elif args.cmd == "path":
            try:
                sys.stdout.write(host_path(cfg, args.host, args.path).read_text())
            except OSError as exc:
                raise SimError("%s on %s: %s" % (args.path, args.host, exc.strerror))
    except SimError as exc:
        print("sim: error: %s" % exc, file=sys.stderr)
        return 1
    except ValueError as exc:
        print("sim: error: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
