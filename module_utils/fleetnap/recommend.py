# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a server could drop or defer to suspend and resume faster, from one timeline.

Pure data: :func:`recommend` reads a parsed :class:`~dmesg.Cycle` and returns a list of
dicts; nothing here touches the host. Standard library only.

Which devices
-------------
Only callbacks on a phase's critical path (see ``dmesg``) can make a phase shorter. Each is
classified from its name, its driver (when the log names one) and its ancestors and children
in the device tree: ATA ports and the disks behind them, sound, USB hosts and devices,
webcams, wireless, Bluetooth, graphics; anything else on the path is ``other``.

Expected saving
---------------
The saving of a device is how much earlier its phase would end without its callback, by
replaying the phase's critical path: the callbacks after it on the path move earlier, but
none can start before the off-path callbacks it may have waited for (the last one that had
returned by its original start), and the phase cannot end before the last off-path callback
returns. So a 159 ms sound resume that runs alongside a 109 ms network resume saves about
50 ms, not 159 ms. Savings of one device in several phases add up; the list is sorted by
saving, largest first.
"""

from __future__ import annotations

import bisect
import re

from ansible.module_utils.fleetnap.dmesg import PHASE_ORDER, CpuEvent

_RESUME_FROM = PHASE_ORDER["resume_machine"]

# (category, driver regex, device-name regex); first match wins, the device before its
# ancestors. Names alone are ambiguous for some classes (``card0`` is a DRM card or an ALSA
# card), so those rely on the driver or on the children.
_RULES = [
    ("ata", r"^(ahci|ata_piix|libata|pata_\w+|sata_\w+)$", r"^ata\d+(\.\d+)?$"),
    ("sound", r"^(snd[_-]\w+|snd|hda\w*|sound)$", r"^(hdaudio\w*|pcmC\d+\w*|controlC\d+)$"),
    ("webcam", r"^uvcvideo$", None),
    ("wireless", r"^(iwlwifi|iwlmvm|iwldvm|ath\w*|brcm\w*|b43\w*|rtw\w*|rtl8\d{3}\w*|mt7\w*|"
                 r"rt2\w*|mwifiex\w*|wl)$", r"^(phy\d+|ath\d*k?-phy\d+|wlan\d+)$"),
    ("bluetooth", r"^(btusb|btintel|bluetooth)$", r"^hci\d+$"),
    ("usb_host", r"^(xhci_hcd|xhci-pci|ehci-pci|ehci_hcd|ehci-platform|uhci_hcd|ohci-pci|"
                 r"ohci_hcd)$", r"^usb\d+$"),
    ("usb_device", r"^(usb|hub|usb-storage|uas)$", r"^\d+-[\d.]+(:\d+\.\d+)?$"),
    ("graphics", r"^(i915|xe|amdgpu|radeon|nouveau|drm|ast|mgag200|bochs-drm|virtio-gpu|"
                 r"simpledrm|efifb|vesafb)$", r"^(card\d+-.+|controlD\d+)$"),
]
_RULES = [(c, re.compile(d) if d else None, re.compile(n) if n else None) for c, d, n in _RULES]
_SCSI_DEV = re.compile(r"^(\d+:\d+:\d+:\d+|target\d+:\d+:\d+|host\d+)$")

_ADVICE = {
    "ata": ("resume ATA ports asynchronously: keep /sys/power/pm_async at 1 and run a kernel "
            "whose ATA port resume does not block (mainline since 3.13, the patch measured at "
            "5.4-11.6 s -> 0.45-1.1 s in source 003); empty ports can be disabled with "
            "libata.force=<port>:disable"),
    "ata_disk": ("the disk behind an ATA port is stopped (cache flush, spin-down) on suspend and "
                 "started on resume; with asynchronous ATA resume (pm_async=1, kernel 3.13+) its "
                 "start no longer holds up resume, and an SSD has no spin-down/up to wait for"),
    "sound": ("a server needs no sound: blacklist the sound driver (%s) so its resume, slow by "
              "design to avoid pops, leaves the path"),
    "webcam": "unload the webcam driver (uvcvideo) on servers",
    "wireless": "a server uses wired Ethernet: blacklist the wireless driver (%s)",
    "bluetooth": "blacklist Bluetooth (%s) on servers",
    "usb_host": ("servers rarely use USB: disable unused USB controllers in firmware or unbind "
                 "the host controller driver (%s) before suspend, so their resume is deferred "
                 "until needed"),
    "usb_device": ("a USB device on the path: disconnect it or unbind it before suspend; USB "
                   "hosts and devices are deferrable on servers"),
    "graphics": ("a headless server needs no GPU driver: boot with nomodeset or blacklist the "
                 "graphics driver (%s)"),
    "other": "no known server-side fix; look at this driver's suspend/resume callbacks",
}
_DEFAULT_MODULE = {"sound": "snd_hda_intel", "wireless": "the wireless driver",
                   "bluetooth": "btusb", "usb_host": "xhci_hcd", "graphics": "the GPU driver"}
_LABEL = {"ata": "ATA port", "ata_disk": "ATA disk", "sound": "sound", "webcam": "webcam",
          "wireless": "wireless", "bluetooth": "Bluetooth", "usb_host": "USB host controller",
          "usb_device": "USB device", "graphics": "graphics", "other": "device"}


def _match(name, driver):
    for cat, drx, nrx in _RULES:
        if driver and drx is not None and drx.match(driver):
            return cat
        if nrx is not None and nrx.match(name):
            return cat
    return None


def classify(name, driver, parents, drivers, children):
    """Category of device ``name``: itself first, then its children, then its ancestors."""
    cat = _match(name, driver)
    if cat:
        return cat
    for child in children.get(name, ()):
        # a PCI function whose children are DRM connectors is the GPU, and so on
        ccat = _match(child, drivers.get(child))
        if ccat in ("graphics", "sound", "wireless", "ata"):
            return ccat
    node, depth = parents.get(name), 0
    while node and depth < 32:
        cat = _match(node, drivers.get(node))
        if cat:
            if cat == "ata" and _SCSI_DEV.match(name):
                return "ata_disk"
            if cat == "usb_host" and not _match(name, None):
                return "usb_device"
            return cat
        node, depth = parents.get(node), depth + 1
    return None


def _saving(cyc, phase, path, j, off_path_ends):
    """Seconds by which ``phase`` would end earlier without path[j] (see module docstring)."""
    end = path[-1].end
    last_off = off_path_ends[-1] if off_path_ends else None
    d = path[j]
    t = d.end - d.duration_ms / 1000.0
    for i in range(j + 1, len(path)):
        p, prev = path[i], path[i - 1]
        gap = max(0.0, p.start - prev.end)
        k = bisect.bisect_right(off_path_ends, p.start) - 1
        waited = off_path_ends[k] if k >= 0 else None
        start = t + gap
        if waited is not None and waited > start:
            start = waited
        t = start + (p.end - p.start)
    new_end = t if last_off is None else max(t, last_off)
    return max(0.0, end - new_end)


def recommend(cyc, min_saving_ms=1.0):
    """Recommendations for one cycle, sorted by expected saving (ms), largest first."""
    parents, drivers, children = {}, {}, {}
    for dev in cyc.devices:
        if dev.parent and dev.name not in parents:
            parents[dev.name] = dev.parent
            children.setdefault(dev.parent, []).append(dev.name)
        if dev.driver and dev.name not in drivers:
            drivers[dev.name] = dev.driver
    by_device = {}
    for phase, path in cyc.critical.items():
        path = [x for x in path if not isinstance(x, CpuEvent)]
        if not path:
            continue
        on = set(id(x) for x in path)
        off_path_ends = sorted(d.end for d in cyc.devices if d.phase == phase and id(d) not in on)
        for j, dev in enumerate(path):
            saving = _saving(cyc, phase, path, j, off_path_ends) * 1000.0
            if saving < min_saving_ms:
                continue
            rec = by_device.get(dev.name)
            if rec is None:
                driver = dev.driver or drivers.get(dev.name)
                cat = classify(dev.name, driver, parents, drivers, children) or "other"
                rec = by_device[dev.name] = {
                    "device": dev.name, "driver": driver, "category": cat, "phases": {},
                    "critical_ms": 0.0, "saving_ms": 0.0, "suspend_saving_ms": 0.0,
                    "resume_saving_ms": 0.0,
                }
            rec["phases"][phase] = round(saving, 3)
            rec["critical_ms"] += dev.duration_ms
            rec["saving_ms"] += saving
            side = "resume_saving_ms" if PHASE_ORDER[phase] >= _RESUME_FROM else "suspend_saving_ms"
            rec[side] += saving
    out = []
    for rec in by_device.values():
        _describe(rec, parents, drivers)
        for k in ("critical_ms", "saving_ms", "suspend_saving_ms", "resume_saving_ms"):
            rec[k] = round(rec[k], 3)
        out.append(rec)
    out.sort(key=lambda r: (-r["saving_ms"], r["device"]))
    return out


def _module_for(rec, parents, drivers):
    if rec["driver"]:
        return rec["driver"]
    node, depth = parents.get(rec["device"]), 0
    while node and depth < 32:
        if drivers.get(node) and _match(node, drivers[node]) == rec["category"]:
            return drivers[node]
        node, depth = parents.get(node), depth + 1
    return None


def _describe(rec, parents, drivers):
    cat = rec["category"]
    module = _module_for(rec, parents, drivers)
    advice = _ADVICE[cat]
    if "%s" in advice:
        advice = advice % (module or _DEFAULT_MODULE.get(cat, "its driver"))
    phases = sorted(rec["phases"], key=lambda p: PHASE_ORDER[p])
    who = rec["device"] + (" (%s)" % rec["driver"] if rec["driver"] else "")
    rec["message"] = ("%s %s %s is %.1f ms of the critical path: %s; expected saving %.1f ms"
                      % (who, _LABEL[cat], "/".join(p.replace("_", " ") for p in phases),
                         rec["critical_ms"], advice, rec["saving_ms"]))
    actions = []
    if cat in ("sound", "wireless", "bluetooth", "webcam", "graphics") and module:
        actions.append({"kind": "blacklist_module", "module": module.replace("-", "_")})
    if cat == "webcam" and not module:
        actions.append({"kind": "blacklist_module", "module": "uvcvideo"})
    if cat in ("ata", "ata_disk"):
        actions.append({"kind": "sysfs", "path": "/sys/power/pm_async", "value": "1"})
    if cat == "usb_host" and module:
        actions.append({"kind": "unbind_driver", "driver": module, "device": rec["device"]})
    if cat == "graphics":
        actions.append({"kind": "kernel_cmdline", "value": "nomodeset"})
    rec["actions"] = actions
    rec["applied"] = False
