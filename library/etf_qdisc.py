#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etf_qdisc
short_description: Launch-time (ETF) qdiscs for SO_TXTIME packets, persistent across reboots
description:
  - Sets up the Earliest TxTime First (ETF) qdisc the way the C-state wake-latency thesis did on
    its i210 NIC - an C(mqprio) root with one class per TX queue and an C(etf) child on each
    chosen queue - or an C(etf) root on a single-queue device. Packets sent with C(SO_TXTIME)
    then leave at (not before) their launch time.
  - Idempotent by reading C(tc -j qdisc show dev DEVICE); an C(mqprio) root that differs is rebuilt
    (the kernel cannot change it in place). A root qdisc that is neither the kernel default nor one
    this module built is left alone unless O(force=true).
  - Validates before changing anything - the device exists, it has enough TX queues
    (C(/sys/class/net/DEVICE/queues/tx-*)) for the layout, the kernel has C(sch_etf) (and
    C(sch_mqprio)), offload is only asked of a device with a PTP hardware clock. If a tc command
    fails, the device's previous root qdisc is put back.
  - ETF offload support cannot be read from the kernel without trying (no ethtool flag reports it);
    O(offload=auto) tries it and falls back to software ETF when the driver refuses, and the
    result says which (RV(offload_supported)). O(offload=on) fails instead, changing nothing.
  - Persistence - the tc commands are saved in C(/etc/fleetnap/etf/DEVICE.json) and the template
    unit C(fleetnap-etf@.service) re-applies them whenever the device appears (boot, driver
    reload, hot-plug) - the unit is wanted by C(sys-subsystem-net-devices-DEVICE.device). A link
    going down and up (carrier loss, cable, C(ip link set down/up)) keeps qdiscs, so nothing needs
    re-applying then.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  device:
    description: Network interface.
    type: str
    required: true
    aliases: [iface]
  state:
    description: V(present) builds the qdiscs; V(absent) removes them (if this module built them) and the unit.
    type: str
    choices: [present, absent]
    default: present
  root:
    description:
      - V(mqprio) (multi-queue NICs; ETF on O(etf_queues)) or V(etf) (single-queue devices; all traffic timed).
    type: str
    choices: [mqprio, etf]
    default: mqprio
  handle:
    description: Handle of the root qdisc (hexadecimal in tc, for example V(256) is C(100:)).
    type: int
    default: 256
  num_tc:
    description:
      - mqprio traffic classes. With O(priority_map) and O(tc_queues); when all three are omitted the
        layout is socket priority O(etf_priority) -> class 0 -> TX queue 0, everything else -> class 1 ->
        the other queues.
    type: int
  priority_map:
    description: mqprio map, 16 traffic classes (one per socket priority 0-15).
    type: list
    elements: int
  tc_queues:
    description: mqprio queues, one C(COUNT@OFFSET) per traffic class.
    type: list
    elements: str
  etf_priority:
    description: Socket priority (SO_PRIORITY) of timed traffic in the default layout.
    type: int
    default: 3
  etf_queues:
    description: TX queues (0-based) that get an etf child. Ignored with O(root=etf).
    type: list
    elements: int
    default: [0]
  clockid:
    description: Clock of the launch times (C(SO_TXTIME)); offload requires CLOCK_TAI.
    type: str
    choices: [CLOCK_TAI, CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME]
    default: CLOCK_TAI
  delta_ns:
    description: How long before its launch time a packet is handed to the NIC (etf C(delta)), in ns.
    type: int
    default: 300000
  offload:
    description:
      - V(on) uses the NIC's launch-time offload (fails when the driver has none), V(off) software ETF
        (the kernel dequeues at launch time - delta), V(auto) tries offload and falls back.
    type: str
    choices: ['on', 'off', auto]
    default: 'off'
  deadline_mode:
    description: etf C(deadline_mode) (launch time is a deadline; packets go as soon as possible).
    type: bool
    default: false
  skip_sock_check:
    description: etf C(skip_sock_check) (accept packets from sockets without SO_TXTIME).
    type: bool
    default: false
  force:
    description: Replace a root qdisc that another tool configured.
    type: bool
    default: false
  persist:
    description: Install C(fleetnap-etf@DEVICE.service) so the qdiscs come back when the device appears.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Validates and compares; runs no tc command that changes anything and writes no file.
  diff_mode:
    support: full
    details:
      - Before/after of the managed qdisc view and of persistence.
  platform:
    support: full
    platforms: linux
notes:
  - Needs C(tc) (iproute2) and a kernel with C(CONFIG_NET_SCH_ETF) (C(sch_etf)) and, for mqprio,
    C(CONFIG_NET_SCH_MQPRIO). Loadable modules are loaded with modprobe.
  - NICs with launch-time offload include Intel i210 (igb, queues 0 and 1), i225/i226 (igc) and some
    stmmac devices; emulated NICs have none.
  - Without offload (software ETF) the kernel dequeues a packet within [launch time - O(delta_ns), launch
    time], so it can leave up to O(delta_ns) B(before) its launch time; a packet whose launch time has
    passed when the qdisc's timer runs is dropped (C(tc -s qdisc) "dropped"; the C(skb:kfree_skb) tracepoint
    shows C(etf_dequeue_timesortedlist)). Choose O(delta_ns) above the host's timer lateness - on QEMU TCG
    guests 300000 drops about half the packets, 10000000 none (measured in fleetnap's lab). Only offload
    makes a packet leave at, not before, its launch time.
  - Packets reach an etf child only through the mqprio map (socket priority, SO_PRIORITY, O(etf_priority)
    in the default layout); their socket must have C(SO_TXTIME) with the same clockid and deadline mode,
    or O(skip_sock_check), and a non-zero launch time in the future - ETF drops anything else at enqueue.
seealso:
  - module: wake_latency_probe
"""

EXAMPLES = r"""
- name: ETF with offload on TX queue 0 of an i210 (socket priority 3 -> queue 0), as in the thesis
  etf_qdisc:
    device: enp3s0
    offload: 'on'
    delta_ns: 500000

- name: Software ETF on a single-queue NIC
  etf_qdisc:
    device: lan0
    root: etf
    delta_ns: 300000

- name: Remove it
  etf_qdisc:
    device: enp3s0
    state: absent
"""

RETURN = r"""
device: {description: The interface, returned: always, type: str, sample: enp3s0}
tx_queues: {description: Number of TX queues of the device, returned: always, type: int, sample: 4}
phc: {description: "The device's PTP hardware clock, or null.", returned: always, type: str, sample: /dev/ptp0}
offload_supported:
  description: True when launch-time offload is in place, false when the driver refused it, null when not tried.
  returned: always
  type: bool
  sample: false
qdiscs:
  description: The managed view after the call (root kind, handle, mqprio layout, etf per TX queue).
  returned: always
  type: dict
  sample: {root: mqprio, handle: 256, mqprio: {num_tc: 2, priority_map: [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
           tc_queues: ["1@0", "3@1"]}, etf: {"0": {clockid: CLOCK_TAI, delta_ns: 300000, offload: false,
           deadline_mode: false, skip_sock_check: false}}}
commands:
  description: The tc commands that build the configuration (run, or that would run).
  returned: always
  type: list
  elements: list
persist: {description: Whether the re-apply unit is installed after the call, returned: always, type: bool}
"""

import gzip
import json
import os
import sys

from ansible.module_utils.fleetnap import command, fileio
from ansible.module_utils.fleetnap.sysfs import HostFS, remove_path, systemd_running, write_file_atomic
from ansible.module_utils.fleetnap.tc import (
    MAX_QUEUES, TcError, check_config, check_show, commands, current_view, desired_view, is_default, is_ours,
    json_keys, needs_rebuild, validate,
)
from ansible.module_utils.fleetnap.validate import (
    all_of, ansible_module, check_params, items, name, names, number, numbers,
)

CONFIG_DIR = "/etc/fleetnap/etf"
SCRIPT = "/usr/local/libexec/fleetnap/etf-apply"
UNIT = "/etc/systemd/system/fleetnap-etf@.service"

SCRIPT_TEXT = '''#!/usr/bin/python3
# Installed by fleetnap (etf_qdisc persist: true). Re-applies the saved ETF qdisc commands of one
# device: /etc/fleetnap/etf/DEVICE.json = {"device": ..., "modules": [...], "tc": [[args], ...]}.
import json, subprocess, sys

cfg = json.load(open(sys.argv[1]))
for mod in cfg.get("modules", []):
    subprocess.call(["modprobe", "-q", mod])
subprocess.call(["tc", "qdisc", "del", "dev", cfg["device"], "root"], stderr=subprocess.DEVNULL)
for args in cfg["tc"]:
    if subprocess.call(["tc"] + args) != 0:
        print("fleetnap: tc %s failed" % " ".join(args), file=sys.stderr)
        raise SystemExit(1)
'''

UNIT_TEXT = """# Installed by fleetnap (etf_qdisc persist: true).
[Unit]
Description=fleetnap: ETF launch-time qdisc on %%I
BindsTo=sys-subsystem-net-devices-%%i.device
After=sys-subsystem-net-devices-%%i.device
ConditionPathExists=/etc/fleetnap/etf/%%I.json

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=%(python)s %(script)s /etc/fleetnap/etf/%%I.json

[Install]
WantedBy=sys-subsystem-net-devices-%%i.device
"""


def systemd_escape(name):
    return "".join(c if (c.isalnum() or c in ":_.") and ord(c) < 128 else "\\x%02x" % ord(c) for c in name)


def wants_link(device):
    escaped = systemd_escape(device)
    return "/etc/systemd/system/sys-subsystem-net-devices-%s.device.wants/fleetnap-etf@%s.service" % (escaped, escaped)


class Tc(object):
    def __init__(self, module, device):
        self.module = module
        self.device = device
        self.bin = module.get_bin_path("tc", required=True)

    def show(self):
        rc, out, err = command.run([self.bin, "-j", "qdisc", "show", "dev", self.device], {"LC_ALL": "C"})
        if rc != 0:
            self.module.fail_json(msg="tc -j qdisc show dev %s failed: %s" % (self.device, err.strip()))
        try:
            return check_show(json.loads(out or "[]"), self.device)
        except TcError as exc:      # JSON of another shape than tc's: named, not a traceback
            self.module.fail_json(msg=str(exc))
        except ValueError:
            self.module.fail_json(msg="tc -j qdisc show dev %s printed no JSON (iproute2 too old?): %s"
                                  % (self.device, out[:200]))

    def run(self, args):
        rc, out, err = command.run([self.bin] + args, {"LC_ALL": "C"})
        return rc, (err or out).strip()


def cfg_from_view(view):
    """A configuration that rebuilds a view this module made (for rollback)."""
    etf = list(view["etf"].values())[0] if view["etf"] else None
    if not etf:
        return None
    cfg = dict(root=view["root"], handle=view["handle"], etf_queues=sorted(view["etf"]), clockid=etf["clockid"],
               delta_ns=etf["delta_ns"], offload=etf["offload"], deadline_mode=etf["deadline_mode"],
               skip_sock_check=etf["skip_sock_check"], num_tc=None, priority_map=None, tc_queues=None)
    if view["mqprio"]:
        cfg.update(view["mqprio"])
    return cfg


def _kernel_config(name):
    """'y', 'm' or None (not set) for CONFIG_NET_SCH_<X> from /proc/config.gz; '' when unknown."""
    key = "CONFIG_NET_SCH_%s=" % name[4:].upper()
    try:
        text = gzip.decompress(fileio.read_bytes("/proc/config.gz", fileio.RECORD)).decode("utf-8", "replace")
    except (IOError, OSError, EOFError):      # gzip.BadGzipFile is an OSError
        return ""
    for line in text.splitlines():
        if line.startswith(key):
            return line.strip().split("=", 1)[1]
    return None


def kernel_support(module, names, check_mode):
    """Fail clearly when the kernel cannot do these qdiscs; load loadable modules (not in check mode).

    Known from /sys/module (loaded), /proc/config.gz, or /lib/modules (modules.builtin, modprobe -n).
    When none of them can tell, tc's own error decides (mapped to the same message).
    """
    release = os.uname()[2]
    for name in names:
        if os.path.isdir("/sys/module/%s" % name):
            continue
        config = _kernel_config(name)
        if config == "y":
            continue
        moddir = "/lib/modules/%s" % release
        builtin = ""
        try:
            builtin = (fileio.read_optional(moddir + "/modules.builtin", fileio.RECORD) or b"").decode("utf-8", "replace")
        except (IOError, OSError):
            builtin = ""
        if "/%s.ko" % name in builtin:
            continue
        modprobe = module.get_bin_path("modprobe")
        loadable = config == "m" or (modprobe is not None and os.path.isdir(moddir)
                                     and module.run_command([modprobe, "-n", "-q", name])[0] == 0)
        if config is None or (not loadable and (config == "" and os.path.isdir(moddir))):
            module.fail_json(msg="the kernel %s on %s has no %s (CONFIG_NET_SCH_%s is not set): ETF launch-time "
                                 "qdiscs are impossible on it; nothing was changed. Use a kernel built with it "
                                 "(Debian's linux-image-amd64 has it as a module)"
                             % (release, os.uname()[1], name, name[4:].upper()))
        if loadable and not check_mode:
            if not modprobe:
                module.fail_json(msg="%s is a module of kernel %s but modprobe is not installed (package kmod)"
                                 % (name, release))
            rc, _out, err = module.run_command([modprobe, name])
            if rc != 0:
                module.fail_json(msg="modprobe %s failed on kernel %s: %s" % (name, release, err.strip()))


# Interface names: at most 15 bytes (IFNAMSIZ), no '/' or whitespace, not '.' or '..'.
IFNAME = name(r"^(?!\.{1,2}$)[A-Za-z0-9_.:@-]{1,15}$", "an interface name of 1-15 characters (e.g. eth0)")
CHECKS = {
    "device": IFNAME,
    "handle": number(1, 0xffff, integer=True),
    "num_tc": number(1, 16, integer=True),
    "priority_map": all_of(items(16), numbers(0, 15, integer=True)),
    "tc_queues": names(r"^\d{1,4}@\d{1,4}$", "COUNT@OFFSET (e.g. 1@0)", max_items=16),
    "etf_queues": all_of(items(MAX_QUEUES), numbers(0, MAX_QUEUES - 1, integer=True)),
    "etf_priority": number(0, 15, integer=True),
    "delta_ns": number(0, 10 ** 9, integer=True),
}


def main():
    module = ansible_module(
        argument_spec=dict(
            device=dict(type="str", required=True, aliases=["iface"]),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            root=dict(type="str", choices=["mqprio", "etf"], default="mqprio"),
            handle=dict(type="int", default=256),
            num_tc=dict(type="int"),
            priority_map=dict(type="list", elements="int"),
            tc_queues=dict(type="list", elements="str"),
            etf_priority=dict(type="int", default=3),
            etf_queues=dict(type="list", elements="int", default=[0]),
            clockid=dict(type="str", default="CLOCK_TAI",
                         choices=["CLOCK_TAI", "CLOCK_MONOTONIC", "CLOCK_REALTIME", "CLOCK_BOOTTIME"]),
            delta_ns=dict(type="int", default=300000),
            offload=dict(type="str", choices=["on", "off", "auto"], default="off"),
            deadline_mode=dict(type="bool", default=False),
            skip_sock_check=dict(type="bool", default=False),
            force=dict(type="bool", default=False),
            persist=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    device = p["device"]
    host = os.uname()[1]
    cfg = dict((k, p[k]) for k in ("root", "handle", "num_tc", "priority_map", "tc_queues", "etf_priority",
                                   "etf_queues", "clockid", "delta_ns", "deadline_mode", "skip_sock_check"))
    cfg["offload"] = p["offload"] != "off"
    if p["state"] == "present":
        # Everything the configuration says on its own is checked before the device is read.
        try:
            check_config(cfg)
        except TcError as exc:
            module.fail_json(msg="%s (%s)" % (exc, host), device=device)
    fs = HostFS("/")
    netdir = "/sys/class/net/%s" % device
    if "/" in device or not fs.isdir(netdir):
        module.fail_json(msg="device %r does not exist on %s (interfaces: %s)"
                         % (device, host, ", ".join(fs.listdir("/sys/class/net"))))
    tx_queues = len([q for q in fs.listdir(netdir + "/queues") if q.startswith("tx-")])
    ptp = fs.listdir(netdir + "/device/ptp")
    phc = "/dev/%s" % ptp[0] if ptp else None
    result = dict(changed=False, device=device, tx_queues=tx_queues, phc=phc, offload_supported=None)
    if p["state"] == "present":
        try:
            cfg = validate(cfg, tx_queues, device)
        except TcError as exc:
            module.fail_json(msg="%s (%s)" % (exc, host), **result)
        if p["offload"] == "on" and not phc:
            module.fail_json(msg="offload requested but %s has no PTP hardware clock (%s/device/ptp): launch-time "
                                 "offload needs a NIC with its own clock, such as an i210; use offload: 'off' "
                                 "(software ETF)" % (device, netdir), **result)
        if p["offload"] == "auto" and not phc:
            cfg["offload"] = False
            result["offload_supported"] = False
    tc = Tc(module, device)
    config_path = "%s/%s.json" % (CONFIG_DIR, device)
    link = wants_link(device)
    saved = fs.read_json(config_path)
    current = current_view(tc.show())
    result["persist"] = fs.exists(config_path)

    if p["state"] == "absent":
        ours = is_ours(current, p["handle"])
        files = [config_path, link] if (fs.exists(config_path) or os.path.islink(fs.path(link))) else []
        changed = ours or bool(files)
        if changed and not module.check_mode:
            if ours:
                rc, msg = tc.run(["qdisc", "del", "dev", device, "root"])
                if rc != 0:
                    module.fail_json(msg="tc qdisc del dev %s root failed: %s" % (device, msg), **result)
            for path in files:
                remove_path(fs, path)
            if not [f for f in fs.listdir(CONFIG_DIR) if f.endswith(".json")]:
                remove_path(fs, UNIT)
                remove_path(fs, SCRIPT)
            if systemd_running(fs):
                module.run_command([module.get_bin_path("systemctl", required=True), "daemon-reload"])
        after = current_view(tc.show()) if (changed and not module.check_mode) else \
            (current_view([]) if ours else current)
        result.update(changed=changed, qdiscs=json_keys(after), commands=[], persist=False)
        if module._diff:
            result["diff"] = {"before": {"qdiscs": json_keys(current), "persist": bool(files)},
                              "after": {"qdiscs": json_keys(after), "persist": False}}
        module.exit_json(**result)

    if not (is_default(current) or is_ours(current, cfg["handle"]) or p["force"]):
        module.fail_json(msg="%s already has a root qdisc %s (handle %x:) that fleetnap did not build; nothing was "
                             "changed. Remove it, or use force: true to replace it"
                         % (device, current["root"], current["handle"] or 0), **result)
    kmods = ["sch_etf"] + (["sch_mqprio"] if cfg["root"] == "mqprio" else [])
    kernel_support(module, kmods, module.check_mode)

    desired = desired_view(cfg)
    if p["offload"] == "auto":
        # Settled earlier: the driver refused offload (recorded), or software ETF is already in place.
        refused_before = bool(saved) and saved.get("offload_supported") is False
        if refused_before or current == desired_view(dict(cfg, offload=False)):
            cfg["offload"] = False
            result["offload_supported"] = False if refused_before else None
            desired = desired_view(cfg)
    qdisc_change = current != desired
    if not qdisc_change and cfg["offload"]:
        result["offload_supported"] = True
    cmds = commands(cfg, device)
    persisted = {"device": device, "modules": kmods, "tc": cmds,
                 "offload_supported": result["offload_supported"] if p["offload"] == "auto" else None}
    files_change = False
    if p["persist"]:
        script_ok = fs.read(SCRIPT) == SCRIPT_TEXT.strip()
        unit_ok = fs.read(UNIT) == (UNIT_TEXT % {"python": sys.executable, "script": SCRIPT}).strip()
        files_change = not (script_ok and unit_ok and os.path.islink(fs.path(link))) or \
            (not qdisc_change and saved != persisted)
    else:
        files_change = fs.exists(config_path) or os.path.islink(fs.path(link))
    changed = qdisc_change or files_change or (p["persist"] and saved is None)

    after = desired
    if changed and not module.check_mode:
        if qdisc_change:
            after, cfg = apply_qdiscs(module, tc, device, current, cfg, p["offload"], result)
            cmds = commands(cfg, device)
            persisted.update(tc=cmds, offload_supported=result["offload_supported"] if p["offload"] == "auto"
                             else None)
        try:
            if p["persist"]:
                unit_changed = write_file_atomic(fs, SCRIPT, SCRIPT_TEXT, 0o755, module)
                unit_changed |= write_file_atomic(fs, UNIT, UNIT_TEXT % {"python": sys.executable, "script": SCRIPT},
                                                  0o644, module)
                write_file_atomic(fs, config_path, json.dumps(persisted, indent=1, sort_keys=True) + "\n", 0o644, module)
                real_link = fs.path(link)
                if not os.path.islink(real_link):
                    if not os.path.isdir(os.path.dirname(real_link)):
                        os.makedirs(os.path.dirname(real_link), 0o755)
                    os.symlink("/etc/systemd/system/fleetnap-etf@.service", real_link)
                    unit_changed = True
                if unit_changed and systemd_running(fs):
                    module.run_command([module.get_bin_path("systemctl", required=True), "daemon-reload"],
                                       check_rc=True)
            else:
                remove_path(fs, link)
                remove_path(fs, config_path)
        except (IOError, OSError) as exc:
            module.fail_json(msg="the qdiscs on %s were applied, but installing the re-apply unit failed: %s"
                             % (device, exc), **result)
    result.update(changed=changed, qdiscs=json_keys(after), commands=[["tc"] + c for c in cmds],
                  persist=p["persist"])
    if module._diff:
        result["diff"] = {"before": {"qdiscs": json_keys(current), "persist": saved is not None},
                          "after": {"qdiscs": json_keys(after), "persist": p["persist"]}}
    module.exit_json(**result)


def apply_qdiscs(module, tc, device, current, cfg, offload_mode, result):
    """Build the qdiscs; on failure put the previous root back. Returns (view after, cfg used)."""
    old_cfg = cfg_from_view(current) if is_ours(current, current["handle"]) else None
    desired = desired_view(cfg)

    def rollback():
        if not is_default(current_view(tc.show())):
            tc.run(["qdisc", "del", "dev", device, "root"])
        if old_cfg:
            for args in commands(old_cfg, device):
                tc.run(args)

    if needs_rebuild(current, desired) and not is_default(current):
        rc, msg = tc.run(["qdisc", "del", "dev", device, "root"])
        if rc != 0:
            module.fail_json(msg="tc qdisc del dev %s root failed: %s" % (device, msg), **result)
    for attempt in (1, 2):
        failure = None
        for args in commands(cfg, device):
            rc, msg = tc.run(args)
            if rc != 0:
                failure = (args, msg)
                break
        if not failure:
            break
        rollback()
        args, msg = failure
        refused = "not support ETF offload" in msg or "Operation not supported" in msg
        if cfg["offload"] and refused and offload_mode == "auto" and attempt == 1:
            module.warn("%s refused ETF launch-time offload (%s); using software ETF" % (device, msg))
            cfg = dict(cfg, offload=False)
            result["offload_supported"] = False
            continue
        if cfg["offload"] and refused:
            result["offload_supported"] = False
            module.fail_json(msg="offload requested but the driver of %s (%s) does not support ETF launch-time "
                                 "offload (tc: %s); the previous qdiscs were put back. Use offload: 'off' (software "
                                 "ETF) or 'auto', or a NIC with launch-time offload (i210/igb, i225/igc)"
                             % (device, _driver(device), msg), **result)
        if "qdisc kind is unknown" in msg:
            module.fail_json(msg="the kernel %s has no %s qdisc: %s; the previous qdiscs were put back"
                             % (os.uname()[2], args[args.index("etf") if "etf" in args else 6], msg), **result)
        module.fail_json(msg="tc %s failed on %s: %s; the previous qdiscs were put back"
                         % (" ".join(args), os.uname()[1], msg), **result)
    if cfg["offload"]:
        result["offload_supported"] = True
    return current_view(tc.show()), cfg


def _driver(device):
    link = "/sys/class/net/%s/device/driver" % device
    return os.path.basename(os.path.realpath(link)) if os.path.islink(link) else "no driver"


if __name__ == "__main__":
    main()
