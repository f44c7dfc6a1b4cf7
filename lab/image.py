# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's guest image: Debian 12 by debootstrap, Debian's kernel, an initramfs built in the
chroot, ``mke2fs -d`` (no loop mount); cached under FLEETNAP_CACHE/lab, keyed by a hash of the
whole recipe (lab/README.md, 'Image'). Also the lab's SSH key and the guests' host key.

Imports lab/layout.py and lab/proc.py (lab/labctl.py draws the parts). Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from layout import CACHE_ROOT, LabError, log, need_bin, need_root, run
from proc import file_lock

MIRROR = os.environ.get("LAB_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"

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
    # Slurm's node daemon and its authentication (tests/lab/test_slurm_lab.py): off at boot,
    # 'labctl slurm-up' writes the lab's slurm.conf and munge key and starts them
    "slurmd", "munge",
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
# The rest is boot work no lab test uses: under TCG each unit costs a guest 1-3 s of its one
# vCPU, and six guests boot on two cores (systemd-analyze blame on a guest before they went:
# debug/tracing/hugepages/mqueue/config/fuse/binfmt mounts and modprobe@ units about 2.5 s each).
# Timers are masked too: a timer firing mid-test is a CPU burst beside the measured work.
MASK_UNITS = ["ifupdown-pre.service", "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer",
              "e2scrub_reap.service", "fstrim.timer", "getty@tty1.service", "serial-getty@ttyS0.service",
              "systemd-journal-flush.service", "dpkg-db-backup.timer", "systemd-tmpfiles-clean.timer",
              "dev-hugepages.mount", "dev-mqueue.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount",
              "sys-kernel-config.mount", "sys-fs-fuse-connections.mount", "proc-sys-fs-binfmt_misc.automount",
              "systemd-binfmt.service", "modprobe@drm.service", "modprobe@fuse.service",
              "modprobe@efi_pstore.service", "modprobe@dm_mod.service", "modprobe@loop.service",
              "modprobe@configfs.service", "kmod-static-nodes.service", "systemd-sysusers.service",
              "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service", "systemd-pstore.service"]

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
        # slirp's fixed plan (guest 10.0.2.15, gateway 10.0.2.2): a static address, no DHCP
        # client started on every boot (dhclient held sshd back about 20 s per boot under TCG)
        "allow-hotplug mgmt0\niface mgmt0 inet static\n    address 10.0.2.15/24\n    gateway 10.0.2.2\n\n"
        "# the e1000e with a PHC (/dev/ptp0): PTP, ETF, and the MAC the WoL relay wakes\n"
        "allow-hotplug lan0\niface lan0 inet manual\n    up ip link set dev $IFACE up\n",
    "etc/ssh/sshd_config.d/fleetnap.conf":
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUseDNS no\n"
        # the lab's own host key only (lab_host_key): known to Ansible through lab/state/known_hosts
        "HostKey /etc/ssh/ssh_host_ed25519_key\n",
    # Drivers udev would load for what a TCG 'pc' machine presents and no lab test uses (KVM
    # inside TCG, the AMD crypto coprocessor, the IDE controller with no disk, floppy, PS/2
    # mouse, PC speaker, SMBus, IPMI over SMBus): each a signed module loaded under TCG.
    "etc/modprobe.d/fleetnap-lab.conf": "".join(
        "blacklist %s\n" % m for m in ("kvm_amd", "kvm_intel", "kvm", "ccp", "ata_piix", "ata_generic",
                                       "floppy", "psmouse", "pcspkr", "serio_raw", "i2c_piix4", "ipmi_ssif")),
    # The ACPI power button (IPMI 'chassis power soft') reaches logind through 'button'.
    "etc/modules-load.d/fleetnap.conf": "button\n",
    "etc/systemd/logind.conf.d/fleetnap.conf":
        "[Login]\nHandlePowerKey=poweroff\nPowerKeyIgnoreInhibited=yes\n",
    "etc/systemd/journald.conf.d/fleetnap.conf": "[Journal]\nStorage=volatile\n",
    "etc/initramfs-tools/modules": "".join(m + "\n" for m in INITRAMFS_MODULES),
    "etc/initramfs-tools/conf.d/fleetnap.conf": "MODULES=list\nCOMPRESS=gzip\n",
    # No udev in the initramfs: MODULES=list loads the three modules, devtmpfs has /dev/vda, and
    # initramfs-tools skips 'udevadm settle' when udevadm is absent; systemd mounts /dev itself.
    # Starting udevd and settling it in the initramfs took about 6 s of every TCG boot.
    "etc/initramfs-tools/hooks/zz-fleetnap-no-udev":
        "#!/bin/sh\nset -e\n[ \"$1\" = prereqs ] && { echo; exit 0; }\n"
        "rm -f \"$DESTDIR/usr/bin/udevadm\" \"$DESTDIR/bin/udevadm\" \"$DESTDIR/usr/lib/systemd/systemd-udevd\" "
        "\"$DESTDIR/lib/systemd/systemd-udevd\" \"$DESTDIR/scripts/init-top/udev\" \"$DESTDIR/scripts/init-bottom/udev\"\n",
    "etc/dhcp/dhclient-enter-hooks.d/fleetnap-no-resolv": "",
    "etc/machine-id": "",
    # Compiled module_utils kept between module runs (lab/guest/fleetnap_lab_pyc.py says why).
    "usr/lib/python3/dist-packages/fleetnap_lab_pyc.py":
        (Path(__file__).resolve().parent / "guest" / "fleetnap_lab_pyc.py").read_text(),
    "usr/lib/python3/dist-packages/fleetnap-lab-pyc.pth": "import fleetnap_lab_pyc\n",
}
# Off at boot in the image; the munge key munge's postinst made is removed (the lab writes its own).
SLURM_UNITS = ["munge.service", "slurmd.service"]
RECIPE_VERSION = 7


# ---------------------------------------------------------------------------------------------
# Image
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def kernel_package() -> str:
    """linux-image-6.1.0-NN-amd64 that linux-image-amd64 points at in the host's apt lists (asked
    once per process: apt-cache takes 1.8 s, and 'labctl up' needs the recipe twice)."""
    out = run(["apt-cache", "depends", "linux-image-amd64"]).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[-1]
    raise LabError("apt-cache depends linux-image-amd64 names no kernel; run apt-get update")


def _cached_key(name: str, comment: str) -> Path:
    """An ed25519 key pair CACHE_ROOT/name(.pub), generated once."""
    key = CACHE_ROOT / name
    if not key.exists():
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        run([need_bin("ssh-keygen", "openssh-client"), "-q", "-t", "ed25519", "-N", "",
             "-C", comment, "-f", str(key)])
    key.chmod(0o600)
    return key


def lab_key() -> Path:
    """The lab's SSH key (ed25519), generated once in the cache and baked into the image."""
    return _cached_key("id_ed25519", "fleetnap-lab")


def lab_host_key() -> Path:
    """The guests' SSH host key (ed25519), generated once in the cache and baked into the image,
    so the lab knows its guests' key and Ansible checks it (guest.known_hosts_lines)."""
    return _cached_key("ssh_host_ed25519_key", "fleetnap-lab-host")


def recipe() -> dict:
    return {
        "version": RECIPE_VERSION, "suite": SUITE, "mirror": MIRROR, "packages": PACKAGES,
        "kernel": kernel_package(), "initramfs_modules": INITRAMFS_MODULES,
        "prune": PRUNE_MODULE_DIRS, "drop": DROP_PATHS, "mask": MASK_UNITS, "disable": SLURM_UNITS, "files": GUEST_FILES,
        "pubkey": Path(str(lab_key()) + ".pub").read_text().strip(),
        "hostkey": Path(str(lab_host_key()) + ".pub").read_text().strip(),
    }


def recipe_hash(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:16]


def image_dir(rec: dict | None = None) -> Path:
    return CACHE_ROOT / "images" / recipe_hash(rec or recipe())


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
        (rootfs / "etc/initramfs-tools/hooks/zz-fleetnap-no-udev").chmod(0o755)
        (rootfs / "etc/dhcp/dhclient-enter-hooks.d/fleetnap-no-resolv").write_text(
            "# the lab has no name service: keep resolv.conf as it is\nmake_resolv_conf() { :; }\n")
        (rootfs / "etc/munge/munge.key").unlink(missing_ok=True)
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
            # munged and slurmd only where 'labctl slurm-up' starts them (no boot cost elsewhere)
            step("disable slurm", ["chroot", str(rootfs), "systemctl", "disable"] + SLURM_UNITS)
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
