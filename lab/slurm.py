# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm in the lab: Debian 12's slurmctld and munged on the controller, slurmd and munged in the
guests named (lab/README.md, 'Slurm'). Nothing of it runs until ``labctl slurm-up``; ``slurm-down``
(and ``labctl down``) stops it.

- One munge key, made by the lab (STATE/slurm/munge.key, 0400), written into each node over SSH's
  stdin (never a command line). The controller's munged has a socket of its own
  (STATE/slurm/munge.sock), so a munged of the machine's own is neither needed nor touched.
- slurmctld runs as root (SlurmUser=root: the programs it calls drive the lab's BMCs and SSH with
  the lab's key and password file, both root's), in the foreground of a session of its own, its
  state, log and pid file under STATE/slurm.
- The network: slurmctld reaches node labN's slurmd at 127.0.0.1:PORT (QEMU forwards the port to
  the guest, where slurmd listens on the same port, its node line's Port); slurmd reaches
  slurmctld at 10.0.2.100 (guest.SLURMCTLD_GUEST_ADDR: QEMU's guestfwd runs socat to the
  controller's port for each connection). The two sides therefore read two slurm.conf files that
  differ in SlurmctldHost's address and the munge socket only (DebugFlags=NO_CONF_HASH says so to
  slurmctld, which would otherwise log each registration as a different configuration).
- STATE/slurm/power.conf is included by the controller's file: what a test (or an operator trying
  the lab) sets for power saving and partitions; slurm-up writes an empty one unless given one.

Imports guest.py, layout.py and proc.py. Standard library only.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

from guest import SLURMCTLD_GUEST_ADDR, ssh
from layout import STATE, LabError, log, need_bin
from proc import pid_alive, spawn, ssh_greets, terminate, wait_for, write_atomic

SLURM_DIR = STATE / "slurm"
KEY = SLURM_DIR / "munge.key"
MUNGE_SOCK = SLURM_DIR / "munge.sock"
MUNGE_PID = SLURM_DIR / "munged.pid"
CTLD_PID = SLURM_DIR / "slurmctld.pid"
CONF = SLURM_DIR / "slurm.conf"
POWER_CONF = SLURM_DIR / "power.conf"
NODES_FILE = SLURM_DIR / "nodes"
CLUSTER = "fleetnaplab"


def env() -> dict:
    """The environment Slurm's commands (scontrol, sinfo, sbatch) need for the lab's cluster."""
    return dict(os.environ, SLURM_CONF=str(CONF))


def scontrol(*args: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([need_bin("scontrol", "slurm-client"), *args], capture_output=True, text=True,
                          env=env(), timeout=timeout)
    if check and proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip()
        raise LabError("scontrol %s failed (rc=%d): %s" % (" ".join(args), proc.returncode, why))
    return proc


def conf_text(hosts: list[dict], guest: bool, partition: bool = True) -> str:
    """slurm.conf for the controller (guest=False) or the nodes (guest=True); partition: one
    partition 'lab' of every node (when the included power.conf defines none)."""
    ctl = socket.gethostname().split(".")[0]
    port = hosts[0]["slurmctld_port"]
    lines = [
        "# Written by lab/slurm.py (labctl slurm-up) -- regenerated on every slurm-up.",
        "ClusterName=%s" % CLUSTER,
        "SlurmctldHost=%s(%s)" % (ctl, SLURMCTLD_GUEST_ADDR if guest else "127.0.0.1"),
        "SlurmctldPort=%d" % port,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "AuthInfo=socket=%s" % ("/run/munge/munge.socket.2" if guest else MUNGE_SOCK),
        "DebugFlags=NO_CONF_HASH",
        "StateSaveLocation=%s" % (SLURM_DIR / "ctld-state"),
        "SlurmctldPidFile=%s" % CTLD_PID,
        "SlurmctldLogFile=%s" % (SLURM_DIR / "slurmctld.log"),
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmdLogFile=/var/log/slurmd.log",
        # debug: each registration and why slurmctld does not take it ("Still waiting for boot of
        # node ..."), which a failed lab test prints (tests/lab/test_slurm_lab.py)
        "SlurmctldDebug=debug",
        "SlurmdDebug=debug",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=0",
        "MinJobAge=600",
        "MailProg=/bin/true",
        # the power-save thread every 2 s (default 10): the tests wait on it
        "SlurmctldParameters=power_save_interval=2,power_save_min_interval=0",
    ]
    for h in hosts:
        lines.append("NodeName=%s NodeAddr=127.0.0.1 Port=%d CPUs=1 State=UNKNOWN" % (h["name"], h["slurmd_port"]))
    if partition:
        lines.append("PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    if not guest:
        lines.append("Include %s" % POWER_CONF)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The controller's daemons
# ---------------------------------------------------------------------------------------------

def munged_alive() -> int | None:
    return pid_alive(MUNGE_PID, str(MUNGE_SOCK))


def ctld_alive() -> int | None:
    return pid_alive(CTLD_PID, str(CONF))


def _start_munged() -> None:
    if munged_alive():
        return
    if not KEY.exists():
        fd = os.open(str(KEY) + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(1024))
        os.replace(str(KEY) + ".tmp", KEY)
    with contextlib.suppress(FileNotFoundError):
        MUNGE_SOCK.unlink()
    # --force: the checkout's parent directories are not checked for being root's alone
    proc = spawn([need_bin("munged", "munge"), "--foreground", "--force", "--socket=%s" % MUNGE_SOCK,
                  "--key-file=%s" % KEY, "--pid-file=%s" % MUNGE_PID, "--log-file=%s" % (SLURM_DIR / "munged.log"),
                  "--seed-file=%s" % (SLURM_DIR / "munged.seed")], SLURM_DIR / "munged.out")
    if not wait_for(lambda: MUNGE_SOCK.exists() and munged_alive() is not None, 10, child=proc):
        raise LabError("munged did not start within 10 s; see %s" % (SLURM_DIR / "munged.out"))


def _start_ctld() -> None:
    if ctld_alive():
        scontrol("reconfigure")
        return
    port = read_conf_port()
    # -c: no state of an earlier run (jobs, nodes powered down) is taken over
    proc = spawn([need_bin("slurmctld", "slurmctld"), "-D", "-c", "-f", str(CONF)], SLURM_DIR / "slurmctld.out")
    if not wait_for(lambda: ctld_alive() is not None and scontrol("ping", check=False).returncode == 0, 30,
                    child=proc, poll=0.5):
        raise LabError("slurmctld did not answer on 127.0.0.1:%d within 30 s; see %s"
                       % (port, SLURM_DIR / "slurmctld.log"))


# ---------------------------------------------------------------------------------------------
# The nodes
# ---------------------------------------------------------------------------------------------

NODE_SCRIPT = """set -e
# the guest's own name without a name service (munged and slurmd look it up: 20 s timeouts else)
grep -q "[[:space:]]$(hostname)\\$" /etc/hosts || echo "127.0.1.1	$(hostname)" >> /etc/hosts
umask 077
mkdir -p /etc/slurm /var/spool/slurmd
base64 -d > /etc/munge/munge.key.new
chown munge:munge /etc/munge/munge.key.new
chmod 0400 /etc/munge/munge.key.new
mv /etc/munge/munge.key.new /etc/munge/munge.key
cat > /etc/slurm/slurm.conf.new <<'FLEETNAP_EOF'
%sFLEETNAP_EOF
chmod 0644 /etc/slurm/slurm.conf.new
mv /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf
# both packages also ship an init script: without SYSTEMCTL_SKIP_SYSV, enable runs update-rc.d too
# (29 s on a TCG guest, 6 s without; the init scripts' links are not read under systemd)
SYSTEMCTL_SKIP_SYSV=1 systemctl enable --quiet munge slurmd
# a slurmd of an earlier slurm-up may be retrying to register with a slurmctld that is gone: on
# SIGTERM it waits for that retry (up to systemd's 90 s), so it is killed
systemctl kill --signal=SIGKILL slurmd.service 2>/dev/null || true
systemctl restart munge
systemctl restart slurmd
"""


def _node_up(h: dict, guest_conf: str) -> None:
    key = base64.b64encode(KEY.read_bytes()).decode() + "\n"
    ssh(h, NODE_SCRIPT % guest_conf, timeout=120, input=key)


def _node_down(h: dict) -> str:
    # killed, not stopped: with slurmctld gone a slurmd waits for its registration retries (see NODE_SCRIPT)
    proc = ssh(h, "systemctl kill --signal=SIGKILL slurmd.service 2>/dev/null; SYSTEMCTL_SKIP_SYSV=1 systemctl disable --quiet --now slurmd munge; "
               "rm -f /etc/slurm/slurm.conf /etc/munge/munge.key",
               timeout=30, check=False)
    return "" if proc.returncode == 0 else "%s: %s" % (h["name"], (proc.stderr or "unreachable").strip()[:200])


def node_states() -> dict[str, str]:
    """node -> its state as sinfo -N -h -o '%N %T' prints it (idle, idle~, down~, ...)."""
    proc = subprocess.run([need_bin("sinfo", "slurm-client"), "-N", "-h", "-o", "%N %T"], capture_output=True,
                          text=True, env=env(), timeout=20)
    if proc.returncode != 0:
        raise LabError("sinfo failed (rc=%d): %s" % (proc.returncode, proc.stderr.strip()))
    return dict(line.split(None, 1) for line in proc.stdout.splitlines() if line.strip())


def up(hosts: list[dict], power_conf: str | None = None, timeout: float = 180) -> dict:
    """Slurm on the controller and slurmd on hosts; returns when every node is idle in sinfo."""
    for tool, pkg in (("slurmctld", "slurmctld"), ("munged", "munge"), ("scontrol", "slurm-client"),
                      ("socat", "socat")):
        need_bin(tool, pkg)
    if not hosts:
        raise LabError("slurm-up needs at least one lab host as a node")
    t0 = time.monotonic()
    SLURM_DIR.mkdir(parents=True, exist_ok=True)
    (SLURM_DIR / "ctld-state").mkdir(exist_ok=True)
    if power_conf is not None or not POWER_CONF.exists():
        write_atomic(POWER_CONF, power_conf or "# power saving and partitions: none set\n")
    partition = "PartitionName" not in POWER_CONF.read_text()
    write_atomic(CONF, conf_text(hosts, guest=False, partition=partition))
    write_atomic(NODES_FILE, "".join(h["name"] + "\n" for h in hosts))
    _start_munged()
    guest_conf = conf_text(hosts, guest=True, partition=partition)
    with cf.ThreadPoolExecutor(max_workers=len(hosts)) as ex:
        for fut in [ex.submit(_node_up, h, guest_conf) for h in hosts]:
            fut.result()
    _start_ctld()
    names = [h["name"] for h in hosts]
    states: dict[str, str] = {}

    def all_idle() -> bool:
        nonlocal states
        states = node_states()
        return all(states.get(n, "").startswith("idle") for n in names)
    if not wait_for(all_idle, timeout, poll=1.0):
        raise LabError("Slurm's nodes are not idle after %d s: %s; see %s"
                       % (timeout, states, SLURM_DIR / "slurmctld.log"))
    log("slurm: %s idle in %.1f s" % (",".join(names), time.monotonic() - t0))
    return {"changed": True, "nodes": names, "states": states, "seconds": round(time.monotonic() - t0, 1),
            "slurm_conf": str(CONF)}


def down(hosts: list[dict], nodes_too: bool = True) -> dict:
    """slurmctld and the controller's munged stopped; on the nodes that answer, slurmd and munged
    stopped and disabled, their configuration removed (a parked node is left as it is)."""
    stopped, errors = [], []
    for name, pid in (("slurmctld", ctld_alive()), ("munged", munged_alive())):
        if pid:
            terminate([pid])
            stopped.append(name)
    names = NODES_FILE.read_text().split() if NODES_FILE.exists() else []
    if nodes_too and names:
        nodes = [h for h in hosts if h["name"] in names and ssh_greets("127.0.0.1", h["ssh_port"], 1.0)]
        with cf.ThreadPoolExecutor(max_workers=max(1, len(nodes))) as ex:
            errors = [e for e in ex.map(_node_down, nodes) if e]
        stopped += ["%s slurmd" % h["name"] for h in nodes]
    with contextlib.suppress(FileNotFoundError):
        NODES_FILE.unlink()
    return {"changed": bool(stopped), "stopped": stopped, "errors": errors}


def read_conf_port(path: Path = CONF) -> int:
    return int(path.read_text().split("SlurmctldPort=")[1].split()[0])
