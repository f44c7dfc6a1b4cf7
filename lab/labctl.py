#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""labctl -- the fleetnap virtual power lab.

Real kernels, real S3, real IPMI over LAN and real magic packets on one machine:
N Debian 12 guests under QEMU (TCG), each with its own ``ipmi_sim`` BMC on 127.0.0.1,
and a Wake-on-LAN relay that turns magic packets into QMP ``system_wakeup`` / BMC power-on.

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
    relay                  run the WoL relay in the foreground (``up`` starts it)

Standard library only (Python 3.11, Debian 12).  Everything runs as root: debootstrap,
chroot and the WoL ports (9 and 7) need it.

Environment: ``LAB_HOSTS`` (6), ``LAB_MEM_MB`` (1024), ``LAB_PORT_BASE`` (22200: SSH of
labN is base+N), ``LAB_BMC_PORT_BASE`` (9620: BMC of labN is base+N, its QEMU link
base+100+N), ``LAB_WOL_PORTS`` (9,7), ``LAB_BOOT_TIMEOUT`` (420 s), ``FLEETNAP_CACHE``
(/var/cache/fleetnap), ``LAB_STATE`` (lab/state), ``LAB_INVENTORY`` (inventories/lab),
``LAB_MIRROR`` (http://deb.debian.org/debian).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bmc

LAB_DIR = Path(__file__).resolve().parent
REPO = LAB_DIR.parent
STATE = Path(os.environ.get("LAB_STATE", LAB_DIR / "state")).resolve()
CACHE_ROOT = Path(os.environ.get("FLEETNAP_CACHE", "/var/cache/fleetnap")) / "lab"
KNOWN_HOSTS = STATE / "known_hosts"
INVENTORY_DIR = Path(os.environ.get("LAB_INVENTORY", REPO / "inventories" / "lab")).resolve()
MIRROR = os.environ.get("LAB_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"
BMC_USER = bmc.USER
RACKS = 3
GEAR_GROUPS = 3

# ---------------------------------------------------------------------------------------------
# The image recipe.  Everything that shapes the image is in here and in the files below, and
# all of it goes into the cache key: change a line and the next build-image rebuilds.
# ---------------------------------------------------------------------------------------------

PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "udev", "kmod", "openssh-server", "python3",
    "iproute2", "ethtool", "linuxptp", "ifupdown", "isc-dhcp-client", "procps",
    "initramfs-tools",
    # observability and measurement: node_exporter (textfile collector for fleetnap_* metrics)
    # and cyclictest (measure_wake_latency.yml); guests cannot download packages later
    "prometheus-node-exporter", "rt-tests",
]
# Initramfs: only what mounting the root needs (virtio_net loads from the root via udev).
INITRAMFS_MODULES = ["virtio_pci", "virtio_blk", "ext4"]
# Kernel module trees a headless VM never needs (keeps the image and mke2fs time down).
PRUNE_MODULE_DIRS = [
    "kernel/sound", "kernel/drivers/gpu", "kernel/drivers/media", "kernel/drivers/staging",
    "kernel/drivers/infiniband", "kernel/drivers/net/wireless", "kernel/net/wireless",
    "kernel/net/mac80211", "kernel/drivers/bluetooth", "kernel/net/bluetooth",
    "kernel/drivers/isdn", "kernel/drivers/iio", "kernel/drivers/input/touchscreen",
    "kernel/drivers/net/ethernet/mellanox", "kernel/drivers/net/ethernet/qlogic",
    "kernel/drivers/net/ethernet/chelsio", "kernel/drivers/net/ethernet/broadcom",
    "kernel/drivers/scsi/lpfc", "kernel/drivers/scsi/qla2xxx", "kernel/fs/ocfs2",
    "kernel/fs/btrfs", "kernel/fs/xfs", "kernel/drivers/md",
]
DROP_PATHS = ["usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
              "var/cache/apt/archives", "var/lib/apt/lists"]
# ifupdown-pre waits for 'udevadm settle' (6 s under TCG) only to hold sshd back: the NICs are
# allow-hotplug, so udev brings them up when they appear and sshd starts without waiting.
MASK_UNITS = ["ifupdown-pre.service", "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer",
              "e2scrub_reap.service", "fstrim.timer", "getty@tty1.service",
              "systemd-journal-flush.service"]

GUEST_FILES = {
    "etc/hostname": "lab\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "etc/fstab": "/dev/vda\t/\text4\trw,errors=remount-ro\t0\t1\n",
    # Stable names whatever the PCI slot: mgmt0 (virtio, SSH) and lan0 (e1000e, PHC, WoL MAC).
    "etc/systemd/network/10-fleetnap-mgmt.link":
        "[Match]\nDriver=virtio_net\n\n[Link]\nNamePolicy=\nName=mgmt0\nMACAddressPolicy=none\n",
    "etc/systemd/network/10-fleetnap-lan.link":
        "[Match]\nDriver=e1000e\n\n[Link]\nNamePolicy=\nName=lan0\nMACAddressPolicy=none\n",
    "etc/network/interfaces":
        "auto lo\niface lo inet loopback\n\n"
        "# management: QEMU user networking (restrict=on), SSH forwarded to 127.0.0.1\n"
        "allow-hotplug mgmt0\niface mgmt0 inet dhcp\n\n"
        "# the e1000e with a PHC (/dev/ptp0): PTP, ETF, and the MAC the WoL relay wakes\n"
        "allow-hotplug lan0\niface lan0 inet manual\n    up ip link set dev $IFACE up\n",
    "etc/ssh/sshd_config.d/fleetnap.conf":
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUseDNS no\n"
        # the lab's own host key only (lab_host_key): known to Ansible through lab/state/known_hosts
        "HostKey /etc/ssh/ssh_host_ed25519_key\n",
    # The ACPI power button (IPMI 'chassis power soft') reaches logind through 'button'.
    "etc/modules-load.d/fleetnap.conf": "button\n",
    "etc/systemd/logind.conf.d/fleetnap.conf":
        "[Login]\nHandlePowerKey=poweroff\nPowerKeyIgnoreInhibited=yes\n",
    "etc/systemd/journald.conf.d/fleetnap.conf": "[Journal]\nStorage=volatile\n",
    "etc/initramfs-tools/modules": "".join(m + "\n" for m in INITRAMFS_MODULES),
    "etc/initramfs-tools/conf.d/fleetnap.conf": "MODULES=list\nCOMPRESS=gzip\n",
    "etc/dhcp/dhclient-enter-hooks.d/fleetnap-no-resolv": "",
    "etc/machine-id": "",
}
RECIPE_VERSION = 5


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
# Image
# ---------------------------------------------------------------------------------------------

def kernel_package() -> str:
    """linux-image-6.1.0-NN-amd64 that linux-image-amd64 points at in the host's apt lists."""
    out = run(["apt-cache", "depends", "linux-image-amd64"]).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[-1]
    raise LabError("apt-cache depends linux-image-amd64 names no kernel; run apt-get update")


def lab_key() -> Path:
    """The lab's SSH key (ed25519), generated once in the cache and baked into the image."""
    key = CACHE_ROOT / "id_ed25519"
    if not key.exists():
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        run([need_bin("ssh-keygen", "openssh-client"), "-q", "-t", "ed25519", "-N", "",
             "-C", "fleetnap-lab", "-f", str(key)])
    key.chmod(0o600)
    return key


def lab_host_key() -> Path:
    """The guests' SSH host key (ed25519), generated once in the cache and baked into the image,
    so the lab knows its guests' key and Ansible checks it (known_hosts_lines)."""
    key = CACHE_ROOT / "ssh_host_ed25519_key"
    if not key.exists():
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        run([need_bin("ssh-keygen", "openssh-client"), "-q", "-t", "ed25519", "-N", "",
             "-C", "fleetnap-lab-host", "-f", str(key)])
    key.chmod(0o600)
    return key


def known_hosts_lines(hosts: list[dict], hostkey_pub: str) -> str:
    """known_hosts for the guests as Ansible reaches them: [127.0.0.1]:<ssh_port> <key>."""
    kind, blob = hostkey_pub.split()[:2]
    return "".join("[127.0.0.1]:%d %s %s\n" % (h["ssh_port"], kind, blob) for h in hosts)


def ssh_options(known_hosts: Path = KNOWN_HOSTS) -> list[str]:
    """SSH options for the guests: their host key is checked against the lab's known_hosts."""
    return ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=%s" % known_hosts,
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def recipe() -> dict:
    return {
        "version": RECIPE_VERSION, "suite": SUITE, "mirror": MIRROR, "packages": PACKAGES,
        "kernel": kernel_package(), "initramfs_modules": INITRAMFS_MODULES,
        "prune": PRUNE_MODULE_DIRS, "drop": DROP_PATHS, "mask": MASK_UNITS, "files": GUEST_FILES,
        "pubkey": Path(str(lab_key()) + ".pub").read_text().strip(),
        "hostkey": Path(str(lab_host_key()) + ".pub").read_text().strip(),
    }


def recipe_hash(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:16]


def image_dir(rec: dict | None = None) -> Path:
    return CACHE_ROOT / "images" / recipe_hash(rec or recipe())


@contextlib.contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def chroot_mounts(root: Path):
    mounted = []
    try:
        for src, dst, args in (("proc", "proc", ["-t", "proc"]), ("sysfs", "sys", ["-t", "sysfs"]),
                               ("/dev", "dev", ["--bind"])):
            target = root / dst
            target.mkdir(exist_ok=True)
            run(["mount"] + args + [src, str(target)])
            mounted.append(target)
        yield
    finally:
        for target in reversed(mounted):
            run(["umount", "-l", str(target)], check=False)


def build_image(force: bool = False) -> dict:
    """Build the guest image into the cache unless a build of the same recipe is there."""
    need_root()
    rec = recipe()
    out = image_dir(rec)
    done = out / "image.json"
    with file_lock(CACHE_ROOT / ".build.lock"):
        if done.exists() and not force:
            info = json.loads(done.read_text())
            info["cached"] = True
            return info
        for tool, pkg in (("debootstrap", "debootstrap"), ("mke2fs", "e2fsprogs"),
                          ("dpkg-deb", "dpkg"), ("apt-get", "apt")):
            need_bin(tool, pkg)
        t0 = time.monotonic()
        work = CACHE_ROOT / ("build-" + recipe_hash(rec))
        if work.exists():
            _rmtree_unmounting(work)
        work.mkdir(parents=True)
        rootfs = work / "rootfs"
        blog = open(work / "build.log", "w")

        def step(name, cmd, **kw):
            log("build: %s" % name)
            blog.write("\n### %s\n$ %s\n" % (name, shlex.join(str(c) for c in cmd)))
            blog.flush()
            proc = subprocess.run(cmd, stdout=blog, stderr=subprocess.STDOUT, **kw)
            if proc.returncode != 0:
                raise LabError("image build step '%s' failed (rc=%d); see %s"
                               % (name, proc.returncode, work / "build.log"))

        debs = CACHE_ROOT / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        step("debootstrap", ["debootstrap", "--variant=minbase", "--cache-dir=%s" % debs,
                             "--include=" + ",".join(PACKAGES), SUITE, str(rootfs), MIRROR])
        kpkg = rec["kernel"]
        kdir = CACHE_ROOT / "kernel"
        kdir.mkdir(parents=True, exist_ok=True)
        kdebs = sorted(kdir.glob("%s_*.deb" % kpkg))
        if not kdebs:
            step("download " + kpkg, ["apt-get", "download", kpkg], cwd=str(kdir))
            kdebs = sorted(kdir.glob("%s_*.deb" % kpkg))
        kx = work / "kernel"
        step("extract kernel", ["dpkg-deb", "-x", str(kdebs[-1]), str(kx)])
        kver = kpkg[len("linux-image-"):]
        # rootfs/lib is a symlink to usr/lib (merged /usr): copy into it, never over it.
        (rootfs / "boot").mkdir(exist_ok=True)
        step("install kernel", ["cp", "-a", "%s/boot/." % kx, str(rootfs / "boot")])
        (rootfs / "lib" / "modules").mkdir(parents=True, exist_ok=True)
        step("install modules", ["cp", "-a", "%s/lib/modules/." % kx, str(rootfs / "lib/modules")])
        mods = rootfs / "lib" / "modules" / kver
        for rel in PRUNE_MODULE_DIRS:
            shutil.rmtree(mods / rel, ignore_errors=True)
        for rel, content in GUEST_FILES.items():
            path = rootfs / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        (rootfs / "etc/dhcp/dhclient-enter-hooks.d/fleetnap-no-resolv").write_text(
            "# the lab has no name service: keep resolv.conf as it is\nmake_resolv_conf() { :; }\n")
        # The host key: the lab's own, not the ones openssh-server's postinst generated.
        for old in (rootfs / "etc" / "ssh").glob("ssh_host_*"):
            old.unlink()
        hk = rootfs / "etc" / "ssh" / "ssh_host_ed25519_key"
        shutil.copyfile(lab_host_key(), hk)
        hk.chmod(0o600)
        (rootfs / "etc" / "ssh" / "ssh_host_ed25519_key.pub").write_text(rec["hostkey"] + "\n")
        ssh_dir = rootfs / "root" / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(rec["pubkey"] + "\n")
        (ssh_dir / "authorized_keys").chmod(0o600)
        with chroot_mounts(rootfs):
            step("depmod", ["chroot", str(rootfs), "depmod", "-a", kver])
            step("mkinitramfs", ["chroot", str(rootfs), "mkinitramfs", "-o",
                                 "/boot/initrd.img-%s" % kver, kver])
            step("mask units", ["chroot", str(rootfs), "systemctl", "mask"] + MASK_UNITS)
            step("lock root password", ["chroot", str(rootfs), "passwd", "-l", "root"])
        for rel in DROP_PATHS:
            path = rootfs / rel
            if path.is_dir():
                shutil.rmtree(path)
                path.mkdir()
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        staging = work / "out"
        staging.mkdir()
        shutil.copy2(rootfs / "boot" / ("vmlinuz-" + kver), staging / "vmlinuz")
        shutil.copy2(rootfs / "boot" / ("initrd.img-" + kver), staging / "initrd.img")
        used = int(run(["du", "-sx", "--block-size=1M", str(rootfs)]).stdout.split()[0])
        size_mb = max(1024, ((used * 2 + 255) // 256) * 256)
        step("mke2fs", ["mke2fs", "-q", "-t", "ext4", "-L", "fleetnap", "-d", str(rootfs),
                        str(staging / "base.img"), "%dM" % size_mb])
        info = {"recipe_hash": recipe_hash(rec), "kernel": kver, "rootfs_mb": used,
                "image_mb": size_mb, "build_seconds": round(time.monotonic() - t0, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "recipe": rec}
        (staging / "image.json").write_text(json.dumps(info, indent=2) + "\n")
        blog.close()
        shutil.copy2(work / "build.log", staging / "build.log")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(out)
        _rmtree_unmounting(work)
        info["cached"] = False
        return info


def _rmtree_unmounting(path: Path) -> None:
    for sub in ("proc", "sys", "dev"):
        target = path / "rootfs" / sub
        if os.path.ismount(target):
            run(["umount", "-l", str(target)], check=False)
    shutil.rmtree(path)



# ---------------------------------------------------------------------------------------------
# The lab's layout
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


# ---------------------------------------------------------------------------------------------
# Secrets, processes, ports
# ---------------------------------------------------------------------------------------------

PASSWORD_FILE = STATE / "bmc-password"


def bmc_password() -> str:
    """The BMC admin password: random, generated once, 0600, never printed, never in argv."""
    STATE.mkdir(parents=True, exist_ok=True)
    if not PASSWORD_FILE.exists():
        alphabet = string.ascii_letters + string.digits
        pw = "".join(secrets.choice(alphabet) for _ in range(16))
        fd = os.open(PASSWORD_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(pw + "\n")
    PASSWORD_FILE.chmod(0o600)
    return PASSWORD_FILE.read_text().strip()


def write_private(path: Path, content: str) -> None:
    """Write a 0600 file atomically (created 0600: never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name)
    with os.fdopen(fd, "w") as fh:
        fh.write(content)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def pid_alive(pidfile: Path, marker: str) -> int | None:
    """The pid in pidfile if that process is alive and its command line contains marker."""
    try:
        pid = int(pidfile.read_text().split()[0])
        cmdline = Path("/proc/%d/cmdline" % pid).read_bytes().replace(b"\0", b" ").decode()
        stat = Path("/proc/%d/stat" % pid).read_text()
    except (OSError, ValueError, IndexError):
        return None
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return None
    return pid if marker in cmdline else None


def wait_gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not Path("/proc/%d" % pid).exists():
            return True
        try:
            if Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not wait_gone(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 5)


LAB_PROGRAMS = ("qemu-system", "ipmi_sim", "wol_relay.py")


def lab_processes() -> list[tuple[int, str]]:
    """Every live (not zombie) process of this lab, whatever its pid files say: QEMU guests,
    ipmi_sim BMCs and the WoL relay, recognised by a program name and a path under STATE on
    their command line (so another lab with its own state directory is not touched)."""
    marker = str(STATE) + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        words = [w.decode("utf-8", "replace") for w in argv if w]
        if state == "Z" or not words:
            continue
        prog = next((name for name in LAB_PROGRAMS
                     if any(Path(w).name.startswith(name) for w in words[:2])), None)
        if prog and any(w == str(STATE) or marker in w for w in words):
            found.append((int(entry.name), prog))
    return sorted(found)


def port_free(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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


def ssh_cmd(host: dict, *command: str, key: Path | None = None) -> list[str]:
    return (["ssh", "-i", str(key or CACHE_ROOT / "id_ed25519"), "-p", str(host["ssh_port"]),
             "-o", "BatchMode=yes"]
            # the known_hosts of the lab the guest belongs to (its state directory)
            + ssh_options(Path(host["dir"]).parent / "known_hosts" if "dir" in host else KNOWN_HOSTS)
            + ["-o", "ConnectTimeout=5", "root@127.0.0.1"] + list(command))


def ssh(host: dict, *command: str, timeout: float = 30, check: bool = True):
    try:
        proc = subprocess.run(ssh_cmd(host, *command), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
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
    try:
        with socket.create_connection(("127.0.0.1", host["ssh_port"]), timeout=timeout) as s:
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


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
# QEMU and ipmi_sim configuration
# ---------------------------------------------------------------------------------------------

def qemu_argv(host: dict, image: Path, cfg: dict) -> list[str]:
    """The one QEMU command line of a guest (ipmi_sim's startcmd runs exactly this)."""
    d = Path(host["dir"])
    append = ("root=/dev/vda rw console=ttyS0,115200 systemd.hostname=%s "
              "systemd.show_status=false" % host["name"])
    return [
        shutil.which("qemu-system-x86_64") or "qemu-system-x86_64",
        "-name", "%s,process=fleetnap-%s" % (host["name"], host["name"]),
        "-accel", "tcg", "-machine", "pc", "-smp", "1", "-m", str(cfg["mem_mb"]),
        "-nodefaults", "-no-user-config", "-display", "none",
        "-kernel", str(image / "vmlinuz"), "-initrd", str(image / "initrd.img"),
        "-append", append,
        "-drive", "file=%s,if=virtio,format=qcow2" % (d / "disk.qcow2"),
        # management NIC: user networking, restrict=on (the guest reaches nothing but slirp)
        "-netdev", "user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22,hostfwd=tcp:127.0.0.1:%d-:9100"
        % (host["ssh_port"], host["metrics_port"]),
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


BMC_EMU = bmc.EMU


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
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise LabError("ipmi_sim for %s exited (rc=%s); see %s"
                           % (host["name"], proc.returncode, d / "ipmi_sim.log"))
        if not port_free(host["bmc_port"], socket.SOCK_DGRAM):
            return proc.pid
        time.sleep(0.1)
    raise LabError("ipmi_sim for %s did not bind 127.0.0.1:%d within 10 s"
                   % (host["name"], host["bmc_port"]))


RELAY_PIDFILE = STATE / "wol-relay.pid"


def relay_alive() -> int | None:
    return pid_alive(RELAY_PIDFILE, "wol_relay.py")


def start_relay() -> int:
    logf = open(STATE / "wol-relay.out", "ab")
    proc = subprocess.Popen([sys.executable, str(LAB_DIR / "wol_relay.py"), "--state", str(STATE)],
                            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True, env=dict(os.environ, LAB_STATE=str(STATE)))
    logf.close()
    RELAY_PIDFILE.write_text("%d\n" % proc.pid)
    ready = STATE / "wol-relay.ready"
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise LabError("the WoL relay exited (rc=%s); see %s"
                           % (proc.returncode, STATE / "wol-relay.out"))
        if ready.exists() and ready.read_text().strip() == str(proc.pid):
            return proc.pid
        time.sleep(0.1)
    raise LabError("the WoL relay did not get ready within 10 s; see %s" % (STATE / "wol-relay.out"))


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
        }
        for g in (h["rack"], "gear_group_%d" % h["gear_group"]):
            groups.setdefault(g, {"hosts": {}})["hosts"][h["name"]] = None
    # Host keys are checked: the guests' key is the lab's (lab_host_key), listed per port in
    # <state>/known_hosts, which up() writes before the guests boot.
    lab_vars = {"ansible_ssh_common_args": " ".join(ssh_options(KNOWN_HOSTS))}
    inv = {"all": {"children": {"lab": {"hosts": hosts, "vars": lab_vars,
                                        "children": dict(sorted(groups.items()))}}}}
    path = INVENTORY_DIR / "hosts.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("# Written by lab/labctl.py up -- do not edit (regenerated on every lab-up).\n"
                   + json.dumps(inv, indent=2) + "\n")
    os.replace(tmp, path)
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
            q = qemu_alive(h)
            if q:   # a QEMU without its BMC: stop it, the BMC must own the guest's power
                stop_pid(q)
                actions.append("%s: stopped an orphan QEMU" % h["name"])
            for port, kind, what in ((h["bmc_port"], socket.SOCK_DGRAM, "BMC (UDP)"),
                                     (h["vm_port"], socket.SOCK_STREAM, "BMC-QEMU link (TCP)"),
                                     (h["ssh_port"], socket.SOCK_STREAM, "SSH forward (TCP)"),
                                     (h["metrics_port"], socket.SOCK_STREAM, "node_exporter forward (TCP)")):
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
            write_private(d / "lan.conf", lan_conf(h, qemu_argv(h, image, cfg), password))
            (d / "bmc.emu").write_text(BMC_EMU)
            start_ipmi_sim(h)
            actions.append("%s: BMC started on 127.0.0.1:%d" % (h["name"], h["bmc_port"]))
        (STATE / "lab.json").write_text(json.dumps(table, indent=2) + "\n")
        if not relay_alive():
            start_relay()
            actions.append("WoL relay started (UDP %s)" % ",".join(map(str, cfg["wol_ports"])))
        to_boot = []
        for h in hosts:
            if not qemu_alive(h):
                ipmi(h, "chassis", "power", "on")
                to_boot.append(h)
                actions.append("%s: powered on through its BMC" % h["name"])
            elif qmp_status(h) == "suspended":
                pass    # a suspended guest is a state the tests and playbooks may want: keep it
        write_private(KNOWN_HOSTS, known_hosts_lines(hosts, info["recipe"]["hostkey"]))
        write_inventory(table)
        boot_t0 = time.monotonic()
        errors = []
        waits = {}
        import concurrent.futures as cf
        with cf.ThreadPoolExecutor(max_workers=len(hosts)) as ex:
            futs = {ex.submit(wait_ssh, h, cfg["boot_timeout"]): h for h in hosts
                    if h in to_boot or qmp_status(h) == "running"}
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
        pid = relay_alive()
        if pid:
            stop_pid(pid)
            stopped.append("wol-relay")
        for h in hosts:
            q = qemu_alive(h)
            if q:
                with contextlib.suppress(OSError, LabError):
                    qmp(h["qmp"], "quit", timeout=3)
                if not wait_gone(q, 5):
                    stop_pid(q)
                stopped.append("%s qemu" % h["name"])
        # Guests before BMCs (a BMC closing its link first would hold its port in TIME_WAIT),
        # including a QEMU whose pid file was lost.
        stopped += stop_strays(("qemu-system",))
        for h in hosts:
            b = ipmi_sim_alive(h)
            if b:
                stop_pid(b)
                stopped.append("%s ipmi_sim" % h["name"])
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
            stop_pid(pid, timeout=max(0.5, min(10.0, end - time.monotonic())))
        left = [(pid, prog) for pid, prog in lab_processes() if prog in programs]
        if left and time.monotonic() >= end:
            raise LabError("these lab processes did not exit within %d s: %s"
                           % (timeout, ", ".join("%s pid %d" % (prog, pid) for pid, prog in left)))
    return stopped


def status() -> list[dict]:
    table = load_table()
    rows = []
    import concurrent.futures as cf

    def one(h):
        alive = ipmi_sim_alive(h)
        return {
            "host": h["name"], "power": bmc_power(h) if alive else "no-bmc",
            "s3": qmp_status(h), "ssh": "yes" if ssh_banner(h) else "no",
            "ssh_port": h["ssh_port"], "bmc_port": h["bmc_port"], "mac": h["wol_mac"],
            "rack": h["rack"], "gear_group": h["gear_group"],
            "qemu_pid": qemu_alive(h), "ipmi_sim_pid": alive,
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
# Per-host actions and the relay's helpers
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
    wait_gone(pid, 5)
    return pid


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
    sub.add_parser("relay", help="run the WoL relay in the foreground")
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
