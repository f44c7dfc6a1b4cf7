"""Recommendations from a timeline (module_utils/fleetnap/recommend.py)."""

from __future__ import annotations

import pytest

from conftest import DATA
from ansible.module_utils.fleetnap.dmesg import parse, parse_file
from ansible.module_utils.fleetnap.recommend import classify, recommend

MEM = DATA / "dmesg" / "pmgraph-skynet-mem-3.15.txt"
FREEZE = DATA / "dmesg" / "pmgraph-skynet-freeze-3.15.txt"
QEMU = DATA / "dmesg" / "qemu-debian-6.1-s3-initramfs.txt"


def _log(*lines):
    return "\n".join("[%12.6f] %s" % (t, m) for t, m in lines) + "\n"


HEAD = [(10.0, "PM: suspend entry (deep)"),
        (10.1, "printk: Suspending console(s) (use no_console_suspend to debug)"),
        (10.2, "ACPI: PM: Preparing to enter system sleep state S3"),
        (10.3, "ACPI: PM: Low-level resume complete"),
        (10.4, "ACPI: PM: Waking up from system sleep state S3")]
END = [(12.0, "Restarting tasks ... done.")]


def _cb(t, dev, cb, pid, parent, dur_us=None):
    """A current-format call line, or its return line when dur_us is given."""
    if dur_us is None:
        return (t, "%s: PM: calling %s+0x0/0x10 @ %d, parent: %s" % (dev, cb, pid, parent))
    return (t, "%s: PM: %s+0x0/0x10 returned 0 after %d usecs" % (dev, cb, dur_us))


def test_mem_log_recommendations():
    cyc = parse_file(MEM)[-1]
    recs = recommend(cyc)
    assert [r["saving_ms"] for r in recs] == sorted((r["saving_ms"] for r in recs), reverse=True)
    byname = dict((r["device"], r) for r in recs)
    # the disk's 819.7 ms cache flush/spin-down on suspend, behind ata1
    disk = byname["0:0:0:0"]
    assert disk["category"] == "ata_disk" and disk["driver"] == "sd"
    assert disk["suspend_saving_ms"] > 700 and disk["resume_saving_ms"] == 0
    assert {"kind": "sysfs", "path": "/sys/power/pm_async", "value": "1"} in disk["actions"]
    # sound: 159 ms of the resume critical path, but r8169 (109 ms) runs alongside, so
    # removing it saves what the replay says: up to where the rest had to wait anyway
    snd = byname["0000:00:1b.0"]
    assert snd["category"] == "sound" and snd["driver"] == "snd_hda_intel"
    assert snd["critical_ms"] == pytest.approx(159.001)
    # by hand: the path after HDA (input6..input16, 18.089 ms incl. phy0) restarts when
    # r8169 and the sync callbacks before it are done (552.709490) instead of 552.760601
    assert snd["resume_saving_ms"] == pytest.approx((552.760601 - 552.709490) * 1000, abs=0.01)
    assert {"kind": "blacklist_module", "module": "snd_hda_intel"} in snd["actions"]
    assert snd["message"].startswith("0000:00:1b.0 (snd_hda_intel) sound resume is 159.0 ms of "
                                     "the critical path: ")
    wifi = byname["phy0"]
    assert wifi["category"] == "wireless"
    assert {"kind": "blacklist_module", "module": "ath9k"} in wifi["actions"]
    assert wifi["saving_ms"] == pytest.approx(17.598, abs=0.01)
    assert all(r["applied"] is False for r in recs)


def test_freeze_sound_saving_is_smaller_when_network_is_slower():
    """In the freeze cycle r8169 takes 120.8 ms, so dropping sound saves less there."""
    mem = dict((r["device"], r) for r in recommend(parse_file(MEM)[-1]))
    frz = dict((r["device"], r) for r in recommend(parse_file(FREEZE)[-1]))
    assert frz["0000:00:1b.0"]["resume_saving_ms"] < mem["0000:00:1b.0"]["resume_saving_ms"]


def test_ata_port_resume_message_and_saving():
    """The issue's example: an ATA port resume on the critical path, removed by async resume."""
    text = _log(*(HEAD + [
        _cb(10.500000, "ahci 0000:00:1f.2", "pci_pm_resume", 1, "pci0000:00"),
        _cb(10.501000, "ahci 0000:00:1f.2", "pci_pm_resume", None, None, 1000),
        _cb(10.501010, "ata3", "ata_port_pm_resume", 1, "0000:00:1f.2"),
        _cb(10.600000, "xhci_hcd 0000:00:14.0", "pci_pm_resume", 40, "pci0000:00"),
        _cb(10.650000, "xhci_hcd 0000:00:14.0", "pci_pm_resume", None, None, 50000),
        _cb(10.813010, "ata3", "ata_port_pm_resume", None, None, 312000),
        _cb(10.813020, "scsi_disk 2:0:0:0", "scsi_bus_resume", 1, "target2:0:0"),
        _cb(10.813030, "scsi_disk 2:0:0:0", "scsi_bus_resume", None, None, 10),
    ] + END))
    cyc = parse(text)[0]
    recs = recommend(cyc)
    top = recs[0]
    assert top["device"] == "ata3" and top["category"] == "ata"
    # without ata3 the sync chain would go on at 10.501 but the xhci callback ends at 10.650
    assert top["saving_ms"] == pytest.approx((10.813030 - 10.650000 - 0.00001) * 1000, abs=0.02)
    assert top["message"].startswith("ata3 ATA port resume is 312.0 ms of the critical path: "
                                     "resume ATA ports asynchronously")
    # xhci is off the path: no recommendation for it
    assert "0000:00:14.0" not in [r["device"] for r in recs]


@pytest.mark.parametrize("name,driver,parents,drivers,children,want", [
    ("0000:00:14.0", "xhci_hcd", {}, {}, {}, "usb_host"),
    ("usb2", None, {}, {}, {}, "usb_host"),
    ("1-1.4", None, {"1-1.4": "1-1", "1-1": "usb1"}, {}, {}, "usb_device"),
    ("1-1:1.0", "uvcvideo", {}, {}, {}, "webcam"),
    ("0000:03:00.0", "iwlwifi", {}, {}, {}, "wireless"),
    ("phy0", None, {}, {}, {}, "wireless"),
    ("0000:02:00.0", "brcmfmac", {}, {}, {}, "wireless"),
    ("0000:00:1b.0", "snd_hda_intel", {}, {}, {}, "sound"),
    ("hdaudioC0D0", None, {}, {}, {}, "sound"),
    ("ata3", None, {}, {}, {}, "ata"),
    ("2:0:0:0", "sd", {"2:0:0:0": "target2:0:0", "target2:0:0": "host2", "host2": "ata3"},
     {}, {}, "ata_disk"),
    ("card0-HDMI-A-1", None, {}, {}, {}, "graphics"),
    ("0000:00:02.0", None, {}, {}, {"0000:00:02.0": ["card0-DP-1", "i2c-0"]}, "graphics"),
    ("0000:00:02.0", "i915", {}, {}, {}, "graphics"),
    ("hci0", None, {}, {}, {}, "bluetooth"),
    ("serial8250", "serial8250", {}, {}, {}, None),
    ("0000:02:00.0", "r8169", {}, {}, {}, None),
])
def test_classify(name, driver, parents, drivers, children, want):
    assert classify(name, driver, parents, drivers, children) == want


def test_small_guest_has_nothing_worth_doing():
    """The QEMU guest resumes in 43 ms; nothing on its path saves 1 ms on its own."""
    cyc = parse_file(QEMU)[-1]
    assert recommend(cyc) == []
    low = recommend(cyc, min_saving_ms=0.5)
    assert low and all(r["saving_ms"] >= 0.5 for r in low)
    assert all(r["category"] == "other" and r["actions"] == [] for r in low)
