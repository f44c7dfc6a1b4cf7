#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""labctl -- the fleetnap virtual power lab.

Real kernels, real S3, real IPMI over LAN and real magic packets on one machine:
N Debian 12 guests under QEMU (TCG), each with its own ``ipmi_sim`` BMC on 127.0.0.1 and a
Redfish BMC (sushy-tools, lab/redfish_bmc.py) driving the same guest, and a Wake-on-LAN relay
that turns magic packets into QMP ``system_wakeup`` / BMC power-on.

Subcommands::

    build-image            build (or reuse) the cached guest image
    up                     boot the lab (idempotent: a running lab is left alone)
    down                   stop every process the lab started
    status [--json]        table: host, power, S3 state, SSH, BMC port, MAC, gear group
    suspend HOST           echo mem > /sys/power/state in the guest (fire and forget)
    wake HOST              QMP system_wakeup
    kill HOST              SIGKILL the guest's QEMU from outside (fault injection)
    ssh HOST [CMD...]      run a command in a guest as root
    wol-log [-n N]         print the WoL relay's log
    wol-drop MAC [-c N]    drop the next N magic packets for MAC (fault injection)
    redfish-fault HOST     --busy N (503s) | --task S (slow reset tasks) | --clear
    relay                  run the WoL relay in the foreground (``up`` starts it)
    slurm-up --nodes LIST [--power-conf FILE]
                           slurmctld + munged here, slurmd + munged in the guests LIST (lab/slurm.py)
    slurm-down             stop them (``down`` stops the controller's too)

Standard library only (Python 3.11, Debian 12).  Everything runs as root: debootstrap,
chroot and the WoL ports (9 and 7) need it.

Environment: ``LAB_HOSTS`` (6), ``LAB_MEM_MB`` (1024), ``LAB_PORT_BASE`` (22200: SSH of
labN is base+N), ``LAB_BMC_PORT_BASE`` (9620: BMC of labN is base+N, its QEMU link
base+100+N), ``LAB_WOL_PORTS`` (9,7), ``LAB_BOOT_TIMEOUT`` (420 s), ``FLEETNAP_CACHE``
(/var/cache/fleetnap), ``LAB_STATE`` (lab/state), ``LAB_INVENTORY`` (inventories/lab),
``LAB_MIRROR`` (http://deb.debian.org/debian), ``LAB_BOOT_PARALLEL`` (the host's CPU count:
guests booting at once; the rest are powered on as those reach SSH).
"""

# The lab's parts. Imports go one way, down this list: a part imports only parts below it
# (tests/unit/test_lab_imports.py checks that none imports labctl and that there is no cycle).
# labctl itself is imported only by the lab tests and benches, through tests/lab/labtools.py.
#
#   labctl.py      CLI; up / down / status; the relay's process; the inventory
#    |  wol_relay.py   the WoL relay, a process of its own (`labctl relay`: in the foreground)
#    |  redfish_bmc.py a guest's Redfish BMC, a process of its own (sushy-tools, the venv's Python)
#    |  slurm.py       slurmctld + munged here, slurmd + munged in the guests (`labctl slurm-up`)
#    |  image.py       the guest image, the lab's SSH keys
#    |  guest.py       one guest: QEMU command line, its BMC, QMP, ipmitool, SSH, suspend, kill
#    |  layout.py      paths, LAB_* settings, the host table, the BMC password, LabError
#    |  bmc.py         one ipmi_sim: lan.conf, password file, process      } shared with the
#    v  proc.py        processes, pid files, ports, state-file locks       } fleet simulator
#
#   labctl -> all of them        wol_relay -> guest, layout, proc      image -> layout, proc
#   slurm -> guest, layout, proc
#   redfish_bmc -> guest, layout, proc
#   guest -> layout, bmc, proc   layout -> bmc     bmc -> proc         proc -> (standard library)
#   sim.py, the fleet simulator -> bmc, proc, simhost (ipmi_sim's startcmd; standard library)

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import bmc
import slurm
from guest import (bmc_power, ipmi, ipmi_sim_alive, kill_guest, known_hosts_lines, lan_conf, qemu_alive,
                   qemu_argv, qmp, qmp_status, ssh_banner, ssh_cmd, ssh_options, start_ipmi_sim, suspend, wait_ssh)
from image import build_image, image_dir
from layout import (BMC_USER, CACHE_ROOT, INVENTORY_DIR, KNOWN_HOSTS, LAB_DIR, PASSWORD_FILE, STATE, LabError,
                    bmc_password, find_host, host_table, load_table, log, need_bin, need_root, run, settings)
from proc import (all_processes, file_lock, pid_alive, port_free, running, spawn, terminate, wait_for, wait_gone,
                  write_atomic, write_private)
# Not used here: the lab tests reach them as labctl.ssh and labctl.lab_host_key (tests/lab/labtools.py).
from guest import ssh  # noqa: F401
from image import lab_host_key  # noqa: F401

# ---------------------------------------------------------------------------------------------
# The lab's processes
# ---------------------------------------------------------------------------------------------

LAB_PROGRAMS = ("qemu-system", "ipmi_sim", "wol_relay.py", "redfish_bmc.py", "slurmctld", "munged")


def lab_processes() -> list[tuple[int, str]]:
    """Every live (not zombie) process of this lab, whatever its pid files say: QEMU guests,
    ipmi_sim BMCs and the WoL relay, recognised by a program name and a path under STATE on
    their command line (so another lab with its own state directory is not touched)."""
    marker = str(STATE) + "/"
    found = []
    for pid, argv in all_processes():
        words = [w for w in argv if w]
        if not words or not running(pid):
            continue
        prog = next((name for name in LAB_PROGRAMS
                     if any(Path(w).name.startswith(name) for w in words[:2])), None)
        if prog and any(w == str(STATE) or marker in w for w in words):
            found.append((pid, prog))
    return sorted(found)


RELAY_PIDFILE = STATE / "wol-relay.pid"


def relay_alive() -> int | None:
    return pid_alive(RELAY_PIDFILE, "wol_relay.py")


def start_relay() -> int:
    proc = spawn([sys.executable, str(LAB_DIR / "wol_relay.py"), "--state", str(STATE)],
                 STATE / "wol-relay.out", env=dict(os.environ, LAB_STATE=str(STATE)))
    RELAY_PIDFILE.write_text("%d\n" % proc.pid)
    ready = STATE / "wol-relay.ready"
    if wait_for(lambda: ready.exists() and ready.read_text().strip() == str(proc.pid), 10, child=proc):
        return proc.pid
    if proc.returncode is not None:
        raise LabError("the WoL relay exited (rc=%s); see %s"
                       % (proc.returncode, STATE / "wol-relay.out"))
    raise LabError("the WoL relay did not get ready within 10 s; see %s" % (STATE / "wol-relay.out"))


# ---------------------------------------------------------------------------------------------
# The Redfish BMCs (lab/redfish_bmc.py: sushy-tools with a driver that drives the guest)
# ---------------------------------------------------------------------------------------------

REDFISH_CA = STATE / "redfish-ca.pem"
REDFISH_CERT = STATE / "redfish-server.pem"
REDFISH_KEY = STATE / "redfish-server.key"


def redfish_python() -> str:
    """The venv's Python: sushy-tools is a Python package (requirements.txt), not a Debian one."""
    py = Path(os.environ.get("LAB_REDFISH_PYTHON", LAB_DIR.parent / ".venv" / "bin" / "python"))
    if not py.exists():
        raise LabError("%s is missing: the Redfish BMCs run sushy-tools from the venv; run 'make setup'" % py)
    return str(py)


def redfish_pki() -> None:
    """A CA of this lab and the BMCs' certificate it signed (127.0.0.1, localhost), made once with
    openssl: the clients verify it with fleetnap_bmc_ca_path, as they would a fleet's own CA."""
    if REDFISH_CA.exists() and REDFISH_CERT.exists() and REDFISH_KEY.exists():
        return
    openssl = need_bin("openssl", "openssl")
    ca_key = STATE / "redfish-ca.key"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run([openssl, "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(REDFISH_CA), "-days", "3650",
         "-subj", "/O=fleetnap lab/CN=fleetnap lab BMC CA",
         "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    csr = STATE / "redfish-server.csr"
    run([openssl, "req", "-new", *ec, "-keyout", str(REDFISH_KEY), "-out", str(csr),
         "-subj", "/O=fleetnap lab/CN=127.0.0.1"])
    ext = STATE / "redfish-server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")
    run([openssl, "x509", "-req", "-in", str(csr), "-CA", str(REDFISH_CA), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", "3650", "-out", str(REDFISH_CERT), "-extfile", str(ext)])
    for f in (ca_key, REDFISH_KEY):
        f.chmod(0o600)
    for f in (csr, ext):
        f.unlink()


def redfish_dir(h: dict) -> Path:
    return Path(h["dir"]) / "redfish"


def redfish_alive(h: dict) -> int | None:
    return pid_alive(redfish_dir(h) / "bmc.pid", "redfish_bmc.py")


def start_redfish(h: dict, argv: list[str]) -> subprocess.Popen:
    """The guest's Redfish BMC on 127.0.0.1:redfish_port (HTTPS, user admin, the lab's BMC password)."""
    d = redfish_dir(h)
    d.mkdir(exist_ok=True)
    for f in ("ready", "faults.json"):
        with contextlib.suppress(FileNotFoundError):
            (d / f).unlink()
    # a BMC started afresh keeps nothing of an earlier one (a boot device a test left at Pxe)
    shutil.rmtree(d / "state", ignore_errors=True)
    write_private(d / "bmc.json", json.dumps({
        "port": h["redfish_port"], "cert": str(REDFISH_CERT), "key": str(REDFISH_KEY), "user": BMC_USER,
        "password_file": str(PASSWORD_FILE), "host": h, "argv": argv}, indent=2) + "\n")
    proc = spawn([redfish_python(), str(LAB_DIR / "redfish_bmc.py"), "--dir", str(d)], d / "bmc.log",
                 env=dict(os.environ, LAB_STATE=str(STATE), PYTHONUNBUFFERED="1"))
    (d / "bmc.pid").write_text("%d\n" % proc.pid)
    return proc


def wait_redfish(started: list[tuple[dict, subprocess.Popen]], timeout: float = 30) -> None:
    """Until each BMC accepts a connection on its port (or has exited: its log says why)."""
    def accepts(port):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
        return False
    for h, proc in started:
        if not wait_for(lambda: accepts(h["redfish_port"]), timeout, child=proc):
            raise LabError("%s's Redfish BMC %s on 127.0.0.1:%d; see %s"
                           % (h["name"], "exited (rc=%s)" % proc.returncode if proc.poll() is not None
                              else "did not listen within %d s" % timeout, h["redfish_port"],
                              redfish_dir(h) / "bmc.log"))


def redfish_fault(h: dict, fault: dict | None) -> None:
    """Fault injection on a guest's Redfish BMC (None: none): {'status': 503, 'count': N} or {'task_s': S}."""
    path = redfish_dir(h) / "faults.json"
    if fault is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        write_atomic(path, json.dumps(fault))


# ---------------------------------------------------------------------------------------------
# up / down / status
# ---------------------------------------------------------------------------------------------

def write_inventory(table: dict) -> Path:
    """inventories/lab/hosts.yml (JSON is YAML): hosts, ports, BMCs, MACs, racks, gear groups."""
    hosts = {}
    groups = {}
    for h in table["hosts"]:
        hosts[h["name"]] = {
            "ansible_host": "127.0.0.1", "ansible_port": h["ssh_port"], "ansible_user": "root",
            "ansible_ssh_private_key_file": table["key"],
            "fleetnap_bmc_address": "127.0.0.1", "fleetnap_bmc_port": h["bmc_port"],
            "fleetnap_bmc_user": BMC_USER,
            "fleetnap_wol_macs": [h["wol_mac"]],
            "fleetnap_rack": h["rack"], "fleetnap_gear_group": h["gear_group"],
            "fleetnap_power_methods": ["wol", "ipmi"],
            "fleetnap_lab_qmp": h["qmp"],
            "fleetnap_metrics_address": "127.0.0.1:%d" % h["metrics_port"],
            # the same BMC speaks Redfish too (lab/redfish_bmc.py): a host set to
            # fleetnap_bmc_protocol redfish uses this port and fleetnap_lab_redfish_ca
            "fleetnap_lab_redfish_port": h["redfish_port"],
        }
        for g in (h["rack"], "gear_group_%d" % h["gear_group"]):
            groups.setdefault(g, {"hosts": {}})["hosts"][h["name"]] = None
    # Host keys are checked: the guests' key is the lab's (lab_host_key), listed per port in
    # <state>/known_hosts, which up() writes before the guests boot.
    lab_vars = {"ansible_ssh_common_args": " ".join(ssh_options(KNOWN_HOSTS)),
                "fleetnap_lab_redfish_ca": str(REDFISH_CA),
                # A TCG guest's sshd greets in 0.3-0.4 s alone and in 1-2 s when all six are
                # probed at once on 2 cores, more while the controller starts a playbook beside
                # it: a gear shift's observation gives the lab's hosts 10 s to greet (the role's
                # default, 3 s, is for real hosts, which greet in milliseconds).
                "gear_shift_probe_timeout_s": 10}
    inv = {"all": {"children": {"lab": {"hosts": hosts, "vars": lab_vars,
                                        "children": dict(sorted(groups.items()))}}}}
    path = INVENTORY_DIR / "hosts.yml"
    write_atomic(path, "# Written by lab/labctl.py up -- do not edit (regenerated on every lab-up).\n"
                 + json.dumps(inv, indent=2) + "\n")
    return path


def up() -> dict:
    need_root()
    for tool, pkg in (("qemu-system-x86_64", "qemu-system-x86"), ("qemu-img", "qemu-utils"),
                      ("ipmi_sim", "openipmi"), ("ipmitool", "ipmitool"), ("ssh", "openssh-client")):
        need_bin(tool, pkg)
    cfg = settings()
    info = build_image()
    image = image_dir()
    STATE.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with file_lock(STATE / ".lab.lock"):
        password = bmc_password()
        hosts = host_table(cfg)
        table = {"hosts": hosts, "key": str(CACHE_ROOT / "id_ed25519"), "image": str(image),
                 "kernel": info["kernel"], "wol_ports": cfg["wol_ports"],
                 "password_file": str(PASSWORD_FILE), "state": str(STATE)}
        old = None
        if (STATE / "lab.json").exists():
            old = json.loads((STATE / "lab.json").read_text())
        running = [h for h in (old or {}).get("hosts", []) if ipmi_sim_alive(h) or qemu_alive(h)]
        if running and (old["image"] != table["image"] or len(old["hosts"]) != len(hosts)
                        or old["hosts"][0]["ssh_port"] != hosts[0]["ssh_port"]
                        or old["hosts"][0]["bmc_port"] != hosts[0]["bmc_port"]):
            raise LabError("a lab with another image or layout is running (%s); run "
                           "'make lab-down' first" % ", ".join(h["name"] for h in running))
        fresh = not running
        actions = []
        for h in hosts:
            d = Path(h["dir"])
            d.mkdir(parents=True, exist_ok=True)
            if ipmi_sim_alive(h):
                continue
            r = redfish_alive(h)
            if r:   # a Redfish BMC without its ipmi_sim (a lab half gone): started again below
                terminate([r])
                actions.append("%s: stopped an orphan Redfish BMC" % h["name"])
            q = qemu_alive(h)
            if q:   # a QEMU without its BMC: stop it, the BMC must own the guest's power
                terminate([q])
                actions.append("%s: stopped an orphan QEMU" % h["name"])
            for port, kind, what in ((h["bmc_port"], socket.SOCK_DGRAM, "BMC (UDP)"),
                                     (h["vm_port"], socket.SOCK_STREAM, "BMC-QEMU link (TCP)"),
                                     (h["ssh_port"], socket.SOCK_STREAM, "SSH forward (TCP)"),
                                     (h["metrics_port"], socket.SOCK_STREAM, "node_exporter forward (TCP)"),
                                     (h["slurmd_port"], socket.SOCK_STREAM, "slurmd forward (TCP)")):
                if not port_free(port, kind):
                    raise LabError("port 127.0.0.1:%d for %s's %s is in use; free it or set "
                                   "LAB_PORT_BASE / LAB_BMC_PORT_BASE" % (port, h["name"], what))
            disk = d / "disk.qcow2"
            if fresh or not disk.exists():
                with contextlib.suppress(FileNotFoundError):
                    disk.unlink()
                run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image / "base.img"),
                     "-F", "raw", str(disk)])
                Path(h["console"]).write_text("")
            bmc.write_config(d, lan_conf(h, qemu_argv(h, image, cfg), password))
            start_ipmi_sim(h)
            actions.append("%s: BMC started on 127.0.0.1:%d" % (h["name"], h["bmc_port"]))
        redfish_pki()
        started = []
        for h in hosts:
            if not redfish_alive(h):
                if not port_free(h["redfish_port"], socket.SOCK_STREAM):
                    raise LabError("port 127.0.0.1:%d for %s's Redfish BMC is in use; free it or set "
                                   "LAB_BMC_PORT_BASE" % (h["redfish_port"], h["name"]))
                started.append((h, start_redfish(h, qemu_argv(h, image, cfg))))
                actions.append("%s: Redfish BMC started on 127.0.0.1:%d" % (h["name"], h["redfish_port"]))
        wait_redfish(started)
        (STATE / "lab.json").write_text(json.dumps(table, indent=2) + "\n")
        if not relay_alive():
            start_relay()
            actions.append("WoL relay started (UDP %s)" % ",".join(map(str, cfg["wol_ports"])))
        # a suspended guest is a state the tests and playbooks may want: kept as it is
        to_boot = [h for h in hosts if not qemu_alive(h)]
        booting = [h for h in hosts if h not in to_boot and qmp_status(h) == "running"]
        write_private(KNOWN_HOSTS, known_hosts_lines(hosts, info["recipe"]["hostkey"]))
        write_inventory(table)
        boot_t0 = time.monotonic()
        errors = []
        waits = {}

        def power_on_and_wait(h):
            # Powered on when a boot slot is free (cfg["boot_parallel"] at once), SSH waited for
            # in that slot; the seconds are from the guest's own power-on.
            ipmi(h, "chassis", "power", "on")
            return wait_ssh(h, cfg["boot_timeout"])

        import concurrent.futures as cf
        with cf.ThreadPoolExecutor(max_workers=cfg["boot_parallel"]) as boots, \
                cf.ThreadPoolExecutor(max_workers=max(1, len(booting))) as ex:
            futs = {boots.submit(power_on_and_wait, h): h for h in to_boot}
            futs.update({ex.submit(wait_ssh, h, cfg["boot_timeout"]): h for h in booting})
            actions.extend("%s: powered on through its BMC" % h["name"] for h in to_boot)
            for fut in cf.as_completed(futs):
                try:
                    waits[futs[fut]["name"]] = round(fut.result(), 1)
                except LabError as exc:
                    errors.append(str(exc))
        if errors:
            raise LabError("; ".join(errors))
        result = {"changed": bool(actions), "actions": actions,
                  "image_cached": info.get("cached", True),
                  "booted": [h["name"] for h in to_boot],
                  "up_to_all_ssh_seconds": round(time.monotonic() - t0, 1),
                  "boot_to_all_ssh_seconds": round(time.monotonic() - boot_t0, 1) if to_boot else 0.0,
                  "ssh_seconds": waits, "inventory": str(INVENTORY_DIR / "hosts.yml")}
        (STATE / "last-up.json").write_text(json.dumps(result, indent=2) + "\n")
        return result


def down() -> dict:
    need_root()
    stopped = []
    with file_lock(STATE / ".lab.lock"):
        hosts = []
        if (STATE / "lab.json").exists():
            hosts = json.loads((STATE / "lab.json").read_text())["hosts"]
        else:   # no table: find whatever per-host state there is
            hosts = [{"name": p.name, "dir": str(p), "qmp": str(p / "qmp.sock")}
                     for p in sorted(STATE.glob("lab*")) if p.is_dir()]
        # Slurm first (slurmctld would call its programs on guests going away); the guests are
        # not touched: they are stopped below
        stopped += slurm.down(hosts, nodes_too=False)["stopped"]
        pid = relay_alive()
        if pid:
            terminate([pid])
            stopped.append("wol-relay")
        for h in hosts:     # the Redfish BMCs before the guests (they could start one)
            r = redfish_alive(h) if "dir" in h else None
            if r:
                terminate([r])
                stopped.append("%s redfish_bmc" % h["name"])
        stopped += stop_strays(("redfish_bmc.py",))
        for h in hosts:
            q = qemu_alive(h)
            if q:
                with contextlib.suppress(OSError, LabError):
                    qmp(h["qmp"], "quit", timeout=3)
                if wait_gone([q], 5):
                    terminate([q])
                stopped.append("%s qemu" % h["name"])
        # Guests before BMCs (a BMC closing its link first would hold its port in TIME_WAIT),
        # including a QEMU whose pid file was lost.
        stopped += stop_strays(("qemu-system",))
        for h in hosts:
            b = ipmi_sim_alive(h)
            if b:
                terminate([b])
                stopped.append("%s ipmi_sim" % h["name"])
            with contextlib.suppress(FileNotFoundError):
                (redfish_dir(h) / "bmc.pid").unlink()
            for f in ("qemu.pid", "ipmi_sim.pid", "qmp.sock"):
                with contextlib.suppress(FileNotFoundError):
                    (Path(h["dir"]) / f).unlink()
        for f in ("wol-relay.pid", "wol-relay.ready"):
            with contextlib.suppress(FileNotFoundError):
                (STATE / f).unlink()
        # Down means down: no guest, BMC or relay of this lab is left running, whatever the pid
        # files said (a QEMU whose pid file was lost, a BMC that ignored SIGTERM).
        stopped += stop_strays(LAB_PROGRAMS)
    return {"changed": bool(stopped), "stopped": stopped}


def stop_strays(programs: tuple[str, ...], timeout: float = 30.0) -> list[str]:
    """Stop every live process of this lab running one of programs; return what was stopped.
    Returns only when none is left; raises LabError naming them if they outlive timeout."""
    end = time.monotonic() + timeout
    stopped = []
    left = [(pid, prog) for pid, prog in lab_processes() if prog in programs]
    while left:
        for pid, prog in left:
            if "%s pid %d (not in the lab's pid files)" % (prog, pid) not in stopped:
                stopped.append("%s pid %d (not in the lab's pid files)" % (prog, pid))
            terminate([pid], timeout=max(0.5, min(10.0, end - time.monotonic())))
        left = [(pid, prog) for pid, prog in lab_processes() if prog in programs]
        if left and time.monotonic() >= end:
            raise LabError("these lab processes did not exit within %d s: %s"
                           % (timeout, ", ".join("%s pid %d" % (prog, pid) for pid, prog in left)))
    return stopped


STATUS_SSH_S = 8.0


def status() -> list[dict]:
    table = load_table()
    rows = []
    import concurrent.futures as cf

    def one(h):
        alive = ipmi_sim_alive(h)
        return {
            "host": h["name"], "power": bmc_power(h) if alive else "no-bmc",
            # A TCG guest's sshd forks for each connection: on a busy machine its greeting can take
            # seconds, and the probes run at once; "no" means no greeting within STATUS_SSH_S.
            "s3": qmp_status(h), "ssh": "yes" if ssh_banner(h, STATUS_SSH_S) else "no",
            "ssh_port": h["ssh_port"], "bmc_port": h["bmc_port"], "mac": h["wol_mac"],
            "rack": h["rack"], "gear_group": h["gear_group"],
            "qemu_pid": qemu_alive(h), "ipmi_sim_pid": alive,
            "redfish_port": h.get("redfish_port"), "redfish_pid": redfish_alive(h),
        }
    with cf.ThreadPoolExecutor(max_workers=len(table["hosts"])) as ex:
        rows = list(ex.map(one, table["hosts"]))
    return rows


def print_status(rows: list[dict]) -> None:
    cols = [("host", "HOST"), ("power", "POWER"), ("s3", "S3 STATE"), ("ssh", "SSH"),
            ("ssh_port", "SSH PORT"), ("bmc_port", "BMC PORT"), ("mac", "MAC"),
            ("rack", "RACK"), ("gear_group", "GEAR GROUP")]
    widths = {k: max(len(t), *(len(str(r[k])) for r in rows)) for k, t in cols}
    print("  ".join(t.ljust(widths[k]) for k, t in cols))
    for r in rows:
        print("  ".join(str(r[k]).ljust(widths[k]) for k, _ in cols))
    relay = relay_alive()
    print("wol-relay: %s" % ("running (pid %d)" % relay if relay else "not running"))


# ---------------------------------------------------------------------------------------------
# WoL fault injection
# ---------------------------------------------------------------------------------------------

WOL_LOG = STATE / "wol-relay.log"
WOL_DROP = STATE / "wol-drop"


def wol_drop(mac: str, count: int) -> None:
    """Fault injection: the relay drops the next COUNT packets for MAC (0 = until cleared)."""
    mac = normalize_mac(mac)
    with file_lock(STATE / ".wol-drop.lock"):
        lines = [ln for ln in (WOL_DROP.read_text().splitlines() if WOL_DROP.exists() else [])
                 if ln.split() and ln.split()[0] != mac]
        lines.append("%s %s" % (mac, count if count > 0 else "all"))
        WOL_DROP.write_text("".join(ln + "\n" for ln in lines))


def normalize_mac(mac: str) -> str:
    raw = mac.replace(":", "").replace("-", "").lower()
    if len(raw) != 12 or any(c not in "0123456789abcdef" for c in raw):
        raise LabError("%r is not a MAC address (expected 6 hex bytes, e.g. 52:54:00:fa:01:01)"
                       % mac)
    return ":".join(raw[i:i + 2] for i in range(0, 12, 2))


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="labctl", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build-image", help="build or reuse the cached guest image")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")
    sub.add_parser("up", help="boot the lab (idempotent)")
    sub.add_parser("down", help="stop everything the lab started")
    p = sub.add_parser("status", help="host, power, S3 state, SSH, BMC port, MAC, gear group")
    p.add_argument("--json", action="store_true")
    for name, hlp in (("suspend", "echo mem > /sys/power/state in HOST"),
                      ("wake", "QMP system_wakeup on HOST"),
                      ("kill", "SIGKILL HOST's QEMU from outside (fault injection)")):
        sub.add_parser(name, help=hlp).add_argument("host")
    p = sub.add_parser("ssh", help="run a command in a guest")
    p.add_argument("host")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("wol-log", help="print the WoL relay's log")
    p.add_argument("-n", type=int, default=0, help="only the last N lines")
    p = sub.add_parser("wol-drop", help="drop the next magic packets for MAC (fault injection)")
    p.add_argument("mac", nargs="?")
    p.add_argument("-c", "--count", type=int, default=1, help="packets to drop (0: all)")
    p.add_argument("--clear", action="store_true", help="drop nothing any more")
    p = sub.add_parser("redfish-fault", help="fault injection on HOST's Redfish BMC")
    p.add_argument("host")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--busy", type=int, metavar="N", help="answer the next N requests 503 (Retry-After 1)")
    g.add_argument("--task", type=float, metavar="S", help="resets become 202 tasks that run S seconds")
    g.add_argument("--clear", action="store_true", help="no fault any more")
    sub.add_parser("relay", help="run the WoL relay in the foreground")
    p = sub.add_parser("slurm-up", help="slurmctld here, slurmd in the guests named (lab/slurm.py)")
    p.add_argument("--nodes", required=True, help="comma-separated lab hosts, e.g. lab4,lab5,lab6")
    p.add_argument("--power-conf", help="file included by the controller's slurm.conf (power saving, partitions)")
    sub.add_parser("slurm-down", help="stop Slurm in the lab (slurmctld, munged, the guests' slurmd)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build-image":
            info = build_image(force=args.force)
            print(json.dumps({k: v for k, v in info.items() if k != "recipe"}, indent=2))
        elif args.cmd == "up":
            print(json.dumps(up(), indent=2))
        elif args.cmd == "down":
            print(json.dumps(down(), indent=2))
        elif args.cmd == "status":
            rows = status()
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                print_status(rows)
        elif args.cmd in ("suspend", "wake", "kill", "ssh"):
            host = find_host(load_table(), args.host)
            if args.cmd == "suspend":
                suspend(host)
                print("%s: suspended (QMP query-status: suspended)" % host["name"])
            elif args.cmd == "wake":
                qmp(host["qmp"], "system_wakeup")
                print("%s: system_wakeup sent" % host["name"])
            elif args.cmd == "kill":
                print("%s: killed QEMU pid %d" % (host["name"], kill_guest(host)))
            else:
                proc = subprocess.run(ssh_cmd(host, *args.command))
                return proc.returncode
        elif args.cmd == "wol-log":
            lines = WOL_LOG.read_text().splitlines() if WOL_LOG.exists() else []
            for line in lines[-args.n:] if args.n else lines:
                print(line)
        elif args.cmd == "wol-drop":
            if args.clear:
                with contextlib.suppress(FileNotFoundError):
                    WOL_DROP.unlink()
            elif args.mac:
                wol_drop(args.mac, args.count)
            else:
                ap.error("wol-drop needs a MAC or --clear")
        elif args.cmd == "redfish-fault":
            if args.busy is not None and not 1 <= args.busy <= 10000:
                ap.error("--busy N: 1..10000 requests")
            if args.task is not None and not 0 < args.task <= 3600:
                ap.error("--task S: more than 0 and at most 3600 seconds")
            host = find_host(load_table(), args.host)
            redfish_fault(host, None if args.clear else {"status": 503, "count": args.busy}
                          if args.busy is not None else {"task_s": args.task})
        elif args.cmd == "slurm-up":
            table = load_table()
            hosts = [find_host(table, n.strip()) for n in args.nodes.split(",") if n.strip()]
            power = Path(args.power_conf).read_text() if args.power_conf else None
            print(json.dumps(slurm.up(hosts, power), indent=2))
        elif args.cmd == "slurm-down":
            print(json.dumps(slurm.down(load_table()["hosts"]), indent=2))
        elif args.cmd == "relay":
            sys.path.insert(0, str(LAB_DIR))
            import wol_relay
            return wol_relay.main([])
    except LabError as exc:
        log("error: %s" % exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
