# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files fleetnap installs on a host so that C-state decisions outlive the Ansible run.

- ``fleetnap-cpu-dma-latency.service`` holds ``/dev/cpu_dma_latency`` open with the global
  wake-up latency limit (the kernel drops the request when the file descriptor closes).
- ``fleetnap-cpuidle.service`` re-applies state disables and per-CPU PM QoS at boot from
  ``/etc/fleetnap/cpuidle.json``; it resolves states by *name*, so a kernel that renumbers
  states still gets the right ones.
"""

from __future__ import annotations

import json
import os
import stat

from ansible.module_utils.fleetnap import command, fileio
from ansible.module_utils.fleetnap.sysfs import systemd_running

LIBEXEC = "/usr/local/libexec/fleetnap"
UNIT_DIR = "/etc/systemd/system"
WANTS_DIR = UNIT_DIR + "/multi-user.target.wants"
CONFIG_DIR = "/etc/fleetnap"
STATE_DIR = "/var/lib/fleetnap"

HOLD_UNIT = "fleetnap-cpu-dma-latency.service"
HOLD_SCRIPT = LIBEXEC + "/hold-cpu-dma-latency"
APPLY_UNIT = "fleetnap-cpuidle.service"
APPLY_SCRIPT = LIBEXEC + "/cpuidle-apply"
APPLY_CONFIG = CONFIG_DIR + "/cpuidle.json"

HOLD_SCRIPT_TEXT = '''#!/usr/bin/python3
# Installed by fleetnap (cpuidle_qos global_latency_us). Holds /dev/cpu_dma_latency open with
# the global CPU wake-up latency limit in microseconds; the limit lapses when this process exits.
import os, signal, struct, sys

value = int(sys.argv[1])
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
os.write(fd, struct.pack("i", value))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
'''

APPLY_SCRIPT_TEXT = '''#!/usr/bin/python3
# Installed by fleetnap (cpuidle_qos persist: true). Re-applies C-state disables and per-CPU
# PM QoS at boot from /etc/fleetnap/cpuidle.json, matching states by name.
import json, os, re, sys

CPU = "/sys/devices/system/cpu"
cfg = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "/etc/fleetnap/cpuidle.json"))

def cpus(spec):
    out = set()
    for part in spec.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.update(range(int(lo), int(hi) + 1))
        elif part:
            out.add(int(part))
    return out

def write(path, value):
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        print("fleetnap: cannot write %s: %s" % (path, exc), file=sys.stderr)
        return 1
    return 0

errors = 0
disabled = set(cfg.get("disabled_states", []))
managed = set(cfg.get("managed_states", []))
qos = cfg.get("resume_latency_us")
for cpu in sorted(cpus(cfg["cpus"])):
    base = "%s/cpu%d" % (CPU, cpu)
    idle = base + "/cpuidle"
    for entry in (os.listdir(idle) if os.path.isdir(idle) else []):
        if not re.match(r"state[0-9]+$", entry):
            continue
        name = open("%s/%s/name" % (idle, entry)).read().strip()
        if name in managed:
            errors += write("%s/%s/disable" % (idle, entry), "1" if name in disabled else "0")
    if qos is not None:
        errors += write(base + "/power/pm_qos_resume_latency_us", str(qos))
sys.exit(1 if errors else 0)
'''


def hold_unit_text(python, value):
    return """# Installed by fleetnap (cpuidle_qos global_latency_us).
[Unit]
Description=fleetnap: global CPU wake-up latency limit of %(value)d us (/dev/cpu_dma_latency)
After=sysinit.target

[Service]
Type=simple
ExecStart=%(python)s %(script)s %(value)d
Restart=on-failure

[Install]
WantedBy=multi-user.target
""" % {"python": python, "script": HOLD_SCRIPT, "value": value}


def apply_unit_text(python):
    return """# Installed by fleetnap (cpuidle_qos persist: true).
[Unit]
Description=fleetnap: re-apply C-state limits and per-CPU PM QoS
After=sysinit.target
ConditionPathExists=%(config)s

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=%(python)s %(script)s %(config)s

[Install]
WantedBy=multi-user.target
""" % {"python": python, "script": APPLY_SCRIPT, "config": APPLY_CONFIG}


def apply_config_text(cpus, disabled_states, managed_states, resume_latency_us):
    return json.dumps({
        "cpus": cpus,
        "disabled_states": sorted(disabled_states),
        "managed_states": sorted(managed_states),
        "resume_latency_us": resume_latency_us,
    }, indent=2, sort_keys=True) + "\n"


class UnitSet(object):
    """A systemd unit with its files: install/enable and remove, offline-safe.

    Files are written under the host root; enabling is a symlink in multi-user.target.wants (what
    ``systemctl enable`` does), so it works in chroots and captured trees. Starting, stopping and
    daemon-reload happen only on a live host where systemd runs.
    """

    def __init__(self, fs, module, unit, files):
        self.fs = fs
        self.module = module
        self.unit = unit
        self.files = files  # [(host_path, content, mode)]

    @property
    def unit_path(self):
        return "%s/%s" % (UNIT_DIR, self.unit)

    @property
    def wants_link(self):
        return "%s/%s" % (WANTS_DIR, self.unit)

    def installed_matches(self):
        for host_path, content, mode in self.files:
            real = self.fs.path(host_path)
            try:
                data = fileio.read_optional(real, fileio.VALUE, self.fs.root, "unit file")
                st = os.lstat(real)
            except OSError:
                return False        # a file that cannot be used is not what we install
            if data != content.encode("utf-8") or not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != mode:
                return False
        return os.path.islink(self.fs.path(self.wants_link))

    def present(self):
        return os.path.exists(self.fs.path(self.unit_path))

    def active(self):
        if not systemd_running(self.fs):
            return None
        rc, out, _err = command.run([self._systemctl(), "is-active", self.unit])
        return out.strip() == "active"

    def _systemctl(self):
        return self.module.get_bin_path("systemctl", required=True)

    def _settle(self, was_active):
        """After this unit's files were put back: systemd reloads them and the service runs again
        as it did before the call (or stays stopped)."""
        systemctl = self._systemctl()
        self.module.run_command([systemctl, "daemon-reload"], check_rc=True)
        if was_active:
            self.module.run_command([systemctl, "restart", self.unit], check_rc=True)
        else:
            self.module.run_command([systemctl, "stop", self.unit])

    def install(self, restart, changes):
        """Write the unit's files and enable it, each change one of ``changes`` (fileio.Changes of
        this call: a later failure puts the files back and the service as it was)."""
        live = systemd_running(self.fs)
        if live:
            was_active = self.active()
            # Recorded first, so it is undone last: after the files are back.
            changes.record("the %s service" % self.unit, lambda: self._settle(was_active))
        changed = False
        for host_path, content, mode in self.files:
            changed |= changes.write(self.fs.path(host_path), content, mode, self.module)
        link = self.fs.path(self.wants_link)
        if not os.path.islink(link):
            changes.link(link, self.unit_path)
            changed = True
        if live:
            systemctl = self._systemctl()
            if changed:
                self.module.run_command([systemctl, "daemon-reload"], check_rc=True)
            if changed or restart or not self.active():
                self.module.run_command([systemctl, "restart", self.unit], check_rc=True)
        return changed

    def remove(self, changes):
        """Stop and remove the unit, each change one of ``changes`` (see install)."""
        if not self.present() and not os.path.islink(self.fs.path(self.wants_link)):
            return False
        live = systemd_running(self.fs)
        if live:
            was_active = self.active()
            changes.record("the %s service" % self.unit, lambda: self._settle(was_active))
            self.module.run_command([self._systemctl(), "stop", self.unit])
        for host_path in [self.wants_link] + [f[0] for f in self.files]:
            changes.remove(self.fs.path(host_path))
        if live:
            self.module.run_command([self._systemctl(), "daemon-reload"])
        return True


def write_recorded(changes, path, content, mode, module, root="/"):
    """fileio.atomic_write of a file outside the call's root (a metrics file in node_exporter's
    directory), recorded in ``changes`` so a later failure of the call puts it back. True when
    something was written."""
    before = fileio.snapshot(path)
    if not fileio.atomic_write(path, content, mode, root, module):
        return False
    changes.record(path, lambda: fileio.put_back(path, before, root))
    return True


def remove_recorded(changes, path, root="/"):
    """fileio.remove of a file outside the call's root, recorded in ``changes`` (see write_recorded)."""
    before = fileio.snapshot(path)
    if not fileio.remove(path, root):
        return False
    changes.record(path, lambda: fileio.put_back(path, before, root))
    return True
