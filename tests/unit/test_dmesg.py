"""The suspend/resume kernel-log parser (module_utils/fleetnap/dmesg.py).

Golden logs: the two pm-graph logs (kernel 3.15, old callback format) are checked against the
figures sleepgraph itself reports (the data README) and against sleepgraph 5.6 run here, from
its command line and through its own dmesg parser, as the oracle. The QEMU guest log (kernel
6.1, current format) is checked against times read off its marker lines. tests/golden/*.json
hold the rest of our output for these logs (phases, slowest devices, critical path,
recommendations), reviewed by hand when they were written; they guard against regressions.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, REPO
from sleepgraph_oracle import SLEEPGRAPH, load_sleepgraph, sleepgraph_parse
from ansible.module_utils.fleetnap import dmesg
from ansible.module_utils.fleetnap.dmesg import PHASES, ParseError, parse, parse_file

LOGS = DATA / "dmesg"
MEM = LOGS / "pmgraph-skynet-mem-3.15.txt"
FREEZE = LOGS / "pmgraph-skynet-freeze-3.15.txt"
QEMU = LOGS / "qemu-debian-6.1-s3-initramfs.txt"
GOLDEN = REPO / "tests" / "golden"

# sleepgraph's own figures for these logs (dmesg only), from tests/data/dmesg/README.md
README_FIGURES = {
    MEM.name: (1777.196, 298.973),
    FREEZE.name: (11032.364, 163.640),
}


def within(a, b, rel=0.01):
    return abs(a - b) <= rel * abs(b)


# ---------------------------------------------------------------------------------------
# sleepgraph as the oracle
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sleepgraph():
    return load_sleepgraph()


def sg_phase_ms(data):
    """Phase lengths in ms, with sleepgraph's duplicate 'suspend2' folded into 'suspend'."""
    out = {}
    for p in data.sortedPhases():
        base = re.sub(r"\d+$", "", p)
        ms = (data.dmesg[p]["end"] - data.dmesg[p]["start"]) * 1000.0
        out[base] = out.get(base, 0.0) + ms
    return out


def sg_devices(data, phase):
    """{name: length_us} of the device callbacks sleepgraph found in ``phase`` (no actions)."""
    out = {}
    for p in data.sortedPhases():
        if re.sub(r"\d+$", "", p) != phase:
            continue
        for name, dev in data.dmesg[p]["list"].items():
            if dev.get("length", -1) is not None and isinstance(dev.get("length"), int):
                out[name] = dev["length"]
    return out


@pytest.mark.parametrize("log", [MEM, FREEZE], ids=lambda p: p.name)
def test_totals_match_readme_and_sleepgraph_cli(log, tmp_path):
    """suspend/resume totals within 1% of sleepgraph: its published figures and its CLI here."""
    cyc = parse_file(log)[-1]
    sus, res = README_FIGURES[log.name]
    assert within(cyc.suspend_ms, sus), (cyc.suspend_ms, sus)
    assert within(cyc.resume_ms, res), (cyc.resume_ms, res)
    out = tmp_path / "sleepgraph.html"
    proc = subprocess.run([sys.executable, str(SLEEPGRAPH), "-dmesg", str(log), "-o", str(out)],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    sg_sus = float(re.search(r"Kernel Suspend Time: <b>([\d.]+) ms", page).group(1))
    sg_res = float(re.search(r"Kernel Resume Time: <b>([\d.]+) ms", page).group(1))
    assert within(cyc.suspend_ms, sg_sus) and within(cyc.resume_ms, sg_res), \
        (cyc.suspend_ms, sg_sus, cyc.resume_ms, sg_res)
    # the two sleepgraph sources agree with each other too
    assert (sg_sus, sg_res) == (sus, res)


def test_mem_phases_and_devices_match_sleepgraph(sleepgraph):
    ours = parse_file(MEM)[-1]
    theirs = sleepgraph_parse(sleepgraph, MEM)[-1]
    sg_sus, sg_res = theirs.getTimeValues()
    assert abs(ours.suspend_ms - sg_sus) < 0.01 and abs(ours.resume_ms - sg_res) < 0.01
    sg_ph = sg_phase_ms(theirs)
    assert set(sg_ph) == set(PHASES)
    for p in PHASES:
        # sleepgraph ends suspend_machine at the line before the wake marker (1 ms earlier
        # here); everything else is the same boundary
        assert abs(ours.phase_ms(p) - sg_ph[p]) <= max(0.01 * sg_ph[p], 0.02) or \
            (p == "suspend_machine" and within(ours.phase_ms(p), sg_ph[p])), \
            (p, ours.phase_ms(p), sg_ph[p])
    # the same device callbacks, phase by phase, with the same kernel-measured durations
    for p in PHASES:
        mine = {}
        for d in ours.devices:
            if d.phase == p:
                mine[d.name] = round(d.duration_ms * 1000)
        sg = sg_devices(theirs, p)
        assert set(sg) <= set(mine), (p, set(sg) - set(mine))
        for name, us in sg.items():
            assert mine[name] == us, (p, name, mine[name], us)
    # slowest devices: same top five as sleepgraph's by callback length
    sg_all = sorted(((us, n, p) for p in PHASES for n, us in sg_devices(theirs, p).items()),
                    reverse=True)[:5]
    mine_top = [(round(d.duration_ms * 1000), d.name, d.phase) for d in ours.slowest(5)]
    assert mine_top == sg_all


def test_freeze_phases_match_sleepgraph(sleepgraph):
    """No machine-resume marker: totals as sleepgraph; our phases place the wake better."""
    ours = parse_file(FREEZE)[-1]
    theirs = sleepgraph_parse(sleepgraph, FREEZE)[-1]
    sg_sus, sg_res = theirs.getTimeValues()
    assert abs(ours.suspend_ms - sg_sus) < 0.01 and abs(ours.resume_ms - sg_res) < 0.01
    sg_ph = sg_phase_ms(theirs)
    # sleepgraph finds no resume_machine/resume_noirq phase and keeps those callbacks in
    # suspend_machine; ours splits them off at the first resume callback
    assert "resume_noirq" not in sg_ph and "resume_machine" not in sg_ph
    merged = sum(ours.phase_ms(p) for p in ("suspend_machine", "resume_machine", "resume_noirq"))
    assert abs(merged - sg_ph["suspend_machine"]) < 0.01
    for p in ("suspend_prepare", "suspend", "suspend_late", "suspend_noirq", "resume_early",
              "resume", "resume_complete"):
        assert abs(ours.phase_ms(p) - sg_ph[p]) < 0.02, (p, ours.phase_ms(p), sg_ph[p])
    noirq = dict((d.name, round(d.duration_ms * 1000)) for d in ours.devices
                 if d.phase == "resume_noirq")
    assert noirq == sg_devices(theirs, "suspend_machine")
    assert any("no machine-resume marker" in w for w in ours.warnings)
    assert ours.mode == "freeze"


@pytest.mark.parametrize("log", [MEM, FREEZE, QEMU], ids=lambda p: p.name)
def test_golden(log):
    """Our full result against the reviewed golden JSON of the same log."""
    from ansible.module_utils.fleetnap import recommend
    golden = json.loads((GOLDEN / log.name.replace(".txt", ".json")).read_text())
    cyc = parse_file(log)[-1]
    d = cyc.to_dict(top=5, with_devices=False)
    assert d["mode"] == golden["mode"]
    assert d["suspend_ms"] == pytest.approx(golden["suspend_ms"], abs=0.001)
    assert d["resume_ms"] == pytest.approx(golden["resume_ms"], abs=0.001)
    assert d["phases"] == pytest.approx(golden["phases"], abs=0.001)
    assert d["breakdown"]["resume"] == pytest.approx(golden["breakdown"]["resume"], abs=0.001)
    assert d["device_count"] == golden["device_count"]
    assert d["main_pid"] == golden["main_pid"]
    assert [[c["cpu"], c["action"], c["duration_ms"]] for c in d["cpus"]] == golden["cpus"]
    assert [[s["name"], s["phase"], s["duration_ms"], s["on_critical_path"]]
            for s in d["slowest"]] == golden["slowest"]
    assert [[x["phase"], x["name"], x["duration_ms"]] for x in d["critical_path"]
            if x["duration_ms"] >= 1.0] == golden["critical_path_over_1ms"]
    assert [[r["device"], r["category"], r["saving_ms"]]
            for r in recommend.recommend(cyc)] == golden["recommendations"]


def test_mem_breakdown_cpus_noirq_devices():
    """The resume breakdown of source 001: CPUs (serial), noirq, devices."""
    cyc = parse_file(MEM)[-1]
    on = [c for c in cyc.cpus if c.action == "online"]
    off = [c for c in cyc.cpus if c.action == "offline"]
    assert [c.cpu for c in on] == list(range(1, 8)) == [c.cpu for c in off]
    # CPU1 comes up 13.589 ms after "Enabling non-boot CPUs" (552.480676 -> 552.494265)
    assert on[0].duration_ms == pytest.approx(13.589, abs=0.001)
    assert sum(c.duration_ms for c in on) == pytest.approx((552.575354 - 552.480676) * 1000)
    assert sum(c.duration_ms for c in off) == pytest.approx((552.478645 - 551.751512) * 1000)
    bd = cyc.breakdown()["resume"]
    assert bd["noirq_ms"] == pytest.approx((552.597184 - 552.581527) * 1000)
    assert bd["devices_ms"] == pytest.approx((552.778960 - 552.597184) * 1000)
    # the CPUs are the critical path of the machine phases, one after the other
    crit = cyc.critical["resume_machine"]
    assert [c.cpu for c in crit] == list(range(1, 8))


def test_mem_critical_path_through_sound():
    """Resume: the HDA controller (159 ms, async) holds up the rest; r8169 (109 ms) does not."""
    cyc = parse_file(MEM)[-1]
    path = [d.name for d in cyc.critical["resume"]]
    assert path[0] == "0000:00:1b.0" and path[-1] == "input16"
    assert "phy0" in path and "0000:02:00.0" not in path
    byname = dict((d.name, d) for d in cyc.devices if d.phase == "resume")
    assert byname["0000:00:1b.0"].driver == "snd_hda_intel"
    assert byname["0000:00:1b.0"].async_ and byname["0000:00:1b.0"].critical
    assert not byname["0000:02:00.0"].critical
    # suspend: the sd disk (819.7 ms) under ata1, then ata1's controller
    spath = [d.name for d in cyc.critical["suspend"] if d.duration_ms > 0.05]
    assert spath == ["0:0:0:0", "ata1", "0000:00:1f.2"]
    # failing USB callbacks are reported
    assert "1-1: resume callback returned -13" in cyc.warnings


def test_current_format_qemu_guest():
    cyc = parse_file(QEMU)[-1]
    assert cyc.mode == "mem"
    # PM: suspend entry 2.198927, ACPI: PM: Low-level resume complete 2.222231,
    # Restarting tasks 2.264912
    assert cyc.suspend_ms == pytest.approx((2.222231 - 2.198927) * 1000)
    assert cyc.resume_ms == pytest.approx((2.264912 - 2.222231) * 1000)
    counts = dict((p, sum(1 for d in cyc.devices if d.phase == p)) for p in PHASES)
    assert counts == {"suspend_prepare": 0, "suspend": 27, "suspend_late": 5, "suspend_noirq": 5,
                      "suspend_machine": 0, "resume_machine": 0, "resume_noirq": 6,
                      "resume_early": 5, "resume": 27, "resume_complete": 0}
    # phases inferred from callback names: suspend_late starts at the first *_suspend_late call
    assert cyc.phase_start["suspend_late"] == 2.213525
    assert cyc.phase_start["suspend_noirq"] == 2.219205
    assert cyc.phase_start["resume_early"] == 2.230075
    assert cyc.phase_start["resume"] == 2.230781
    assert cyc.phase_start["resume_complete"] == 2.235600  # last resume callback returned
    dev = [d for d in cyc.devices if d.name == "00:04" and d.phase == "resume"][0]
    assert (dev.driver, dev.callback, dev.parent, dev.pid, dev.rc, dev.duration_ms) == \
        ("serial", "pnp_bus_resume+0x0/0xa0", "pnp0", 1, 0, 0.846)
    assert not dev.async_
    pci = [d for d in cyc.devices if d.name == "0000:00:02.0"]
    assert len(pci) == 6 and all(d.async_ and d.pid == 24 for d in pci)
    assert cyc.warnings == []
    # CRLF line ends (serial console capture) are handled
    assert b"\r\n" in QEMU.read_bytes()


def test_the_sum_of_phases_is_the_total():
    for log in (MEM, QEMU):
        cyc = parse_file(log)[-1]
        assert sum(cyc.phase_ms(p) for p in PHASES[:5]) == pytest.approx(cyc.suspend_ms)
        assert sum(cyc.phase_ms(p) for p in PHASES[5:]) == pytest.approx(cyc.resume_ms)


# ---------------------------------------------------------------------------------------
# small hand-made logs
# ---------------------------------------------------------------------------------------
def _log(*lines):
    return "\n".join("[%12.6f] %s" % (t, m) for t, m in lines) + "\n"


OLD_HEAD = [(10.0, "PM: Syncing filesystems ... done."),
            (10.1, "PM: Preparing system for mem sleep"),
            (10.2, "PM: Entering mem sleep")]
OLD_TAIL = [(11.0, "PM: suspend of devices complete after 1 msecs"),
            (11.1, "PM: late suspend of devices complete after 1 msecs"),
            (11.2, "PM: noirq suspend of devices complete after 1 msecs"),
            (11.3, "ACPI: Low-level resume complete"),
            (11.4, "ACPI: Waking up from system sleep state S3"),
            (11.5, "PM: noirq resume of devices complete after 1 msecs"),
            (11.6, "PM: early resume of devices complete after 1 msecs")]
OLD_END = [(12.9, "PM: resume of devices complete after 1 msecs"),
           (13.0, "Restarting tasks ... done.")]


def test_old_format_async_overlap_and_parent_order():
    """Resume: a parent (async) then its child; a sync chain; the child ends last."""
    text = _log(*(OLD_HEAD + OLD_TAIL + [
        (11.700000, "calling  0000:00:1f.2+ @ 50, parent: pci0000:00"),
        (11.700010, "calling  input1+ @ 7, parent: serio0"),
        (11.700020, "call input1+ returned 0 after 10 usecs"),
        (11.700030, "calling  input2+ @ 7, parent: serio0"),
        (11.700040, "call input2+ returned 0 after 10 usecs"),
        (11.900000, "call 0000:00:1f.2+ returned 0 after 200000 usecs"),
        (11.900010, "calling  ata3+ @ 51, parent: 0000:00:1f.2"),
        (12.212010, "call ata3+ returned 0 after 312000 usecs"),
        (12.212020, "calling  input3+ @ 7, parent: serio0"),
        (12.212030, "call input3+ returned 0 after 10 usecs"),
    ] + OLD_END))
    cyc = parse(text)[0]
    res = [d for d in cyc.devices if d.phase == "resume"]
    assert [d.name for d in res] == ["0000:00:1f.2", "input1", "input2", "ata3", "input3"]
    assert cyc.main_pid == 7
    assert [d.async_ for d in res] == [True, False, False, True, False]
    # input3 (sync) waited for ata3, ata3 for its parent; input1/2 ran alongside
    assert [d.name for d in cyc.critical["resume"]] == ["0000:00:1f.2", "ata3", "input3"]
    assert cyc.phase_ms("resume") == pytest.approx(1300.0)
    assert cyc.resume_ms == pytest.approx(1700.0)


def test_return_printed_before_call_is_paired():
    """Same timestamp, return line first: sleepgraph swaps them; so do we."""
    text = _log(*(OLD_HEAD + [
        (10.300000, "call dev9+ returned 0 after 0 usecs"),
        (10.300000, "calling  dev9+ @ 7, parent: platform"),
    ] + OLD_TAIL + OLD_END))
    cyc = parse(text)[0]
    assert [(d.name, d.phase, d.duration_ms) for d in cyc.devices] == [("dev9", "suspend", 0.0)]
    assert cyc.warnings == []


def test_suspend_children_before_parent_critical_path():
    text = _log(*(OLD_HEAD + [
        (10.300, "calling  sda+ @ 60, parent: host0"),
        (10.301, "calling  x1+ @ 7, parent: platform"),
        (10.302, "call x1+ returned 0 after 1000 usecs"),
        (10.800, "call sda+ returned 0 after 500000 usecs"),
        (10.801, "calling  host0+ @ 61, parent: ata1"),
        (10.802, "call host0+ returned 0 after 1000 usecs"),
    ] + OLD_TAIL + OLD_END))
    cyc = parse(text)[0]
    assert [d.name for d in cyc.critical["suspend"]] == ["sda", "host0"]


def test_cycles_all_and_last():
    one = MEM.read_text()
    two = QEMU.read_text()
    cycles = parse(one + two)
    assert len(cycles) == 2
    assert [c.mode for c in cycles] == ["mem", "mem"]
    assert dmesg.select(cycles, "last")[0].suspend_ms == pytest.approx(23.304, abs=0.001)
    assert len(dmesg.select(cycles, "all")) == 2
    with pytest.raises(ValueError):
        dmesg.select(cycles, "first")


def test_since_skips_earlier_cycles():
    text = MEM.read_text() + QEMU.read_text().replace("[    2.", "[  602.")
    assert len(parse(text)) == 2
    cycles = parse(text, since=600.0)
    assert len(cycles) == 1 and cycles[0].suspend_ms == pytest.approx(23.304, abs=0.001)


def test_syslog_and_level_prefixes():
    lines = MEM.read_text().splitlines()
    prefixed = "\n".join(("<6>" + l) if i % 2 else ("Jun 13 13:24:59 skynet kernel: " + l)
                         for i, l in enumerate(lines))
    cyc = parse(prefixed)[-1]
    assert cyc.suspend_ms == pytest.approx(1777.196, abs=0.001)
    assert cyc.resume_ms == pytest.approx(298.973, abs=0.001)


def test_kmsg_records_become_dmesg_lines():
    recs = ["6,1234,2198927,-;PM: suspend entry (deep)\n",
            " SUBSYSTEM=acpi\n",
            "4,1235,12,-;x\n",
            "garbage"]
    assert dmesg.kmsg_to_lines(recs) == ["[    2.198927] PM: suspend entry (deep)",
                                         "[    0.000012] x"]


def test_real_kmsg_matches_dmesg():
    """/dev/kmsg of this machine, converted, has the same lines as util-linux dmesg."""
    try:
        ours = dmesg.read_kmsg()
    except OSError as e:
        pytest.skip("cannot read /dev/kmsg: %s" % e)
    out = subprocess.run(["dmesg"], capture_output=True, text=True, env={"LC_ALL": "C"}).stdout
    theirs = out.splitlines()
    assert ours, "the ring buffer is empty"
    # dmesg may see a few more lines logged in between; the first 50 records must agree
    common = min(len(ours), len(theirs), 50)
    norm = lambda l: re.sub(r"\s+", " ", l).strip()
    assert [norm(l) for l in ours[:common]] == [norm(l) for l in theirs[:common]]


# ---------------------------------------------------------------------------------------
# bad input: clear errors
# ---------------------------------------------------------------------------------------
def test_truncated_log_names_line_and_phase():
    lines = MEM.read_text().splitlines()
    cut = "\n".join(lines[:400])  # ends inside resume_noirq, before 'Restarting tasks'
    with pytest.raises(ParseError) as ei:
        parse(cut)
    msg = str(ei.value)
    assert ei.value.lineno == 400
    assert msg.startswith("line 400: ")
    assert "resume_noirq" in msg and "truncated" in msg and "line 2" in msg
    assert "Restarting tasks" in msg
    # the first callback still waiting for its return is named, with its line
    m = re.search(r"the return of '(.+?)' \(called at line (\d+)\)", msg)
    assert m, msg
    called = lines[int(m.group(2)) - 1]
    assert ("calling  %s+ @" % m.group(1)) in called
    assert not any(("call %s+ returned" % m.group(1)) in l for l in lines[int(m.group(2)):400])


def test_truncated_last_cycle_after_a_complete_one():
    text = MEM.read_text() + "\n".join(QEMU.read_text().splitlines()[:60])
    with pytest.raises(ParseError) as ei:
        parse(text)
    assert "suspend_late" in str(ei.value) or "suspend" in str(ei.value)
    assert "truncated" in str(ei.value)


def test_log_without_suspend():
    boot = _log((0.0, "Linux version 6.1.0-13-amd64"), (0.5, "calling  init_foo+0x0/0x10 @ 1"),
                (1.0, "EXT4-fs (vda): mounted filesystem"))
    with pytest.raises(ParseError) as ei:
        parse(boot)
    assert "no suspend/resume cycle" in str(ei.value)
    assert "pm_print_times" in str(ei.value)


def test_callbacks_without_their_cycle_start():
    lines = MEM.read_text().splitlines()[20:]   # the ring buffer lost the start
    with pytest.raises(ParseError) as ei:
        parse("\n".join(lines))
    assert "wrapped" in str(ei.value)


@pytest.mark.parametrize("text", ["", "no timestamps here\nat all\n",
                                  "Nov 21 08:39:01 host kernel: PM: suspend entry (deep)\n"])
def test_no_timestamps(text):
    with pytest.raises(ParseError) as ei:
        parse(text)
    assert "timestamp" in str(ei.value)


def test_since_after_every_line():
    with pytest.raises(ParseError) as ei:
        parse(MEM.read_text(), since=10000.0)
    assert "since" in str(ei.value)


def test_parse_is_fast_enough_on_the_golden_logs():
    """Not a benchmark (see tests/bench): a sanity bound that catches accidental O(n^2)."""
    import time
    text = MEM.read_text()
    t = time.perf_counter()
    for _ in range(20):
        parse(text)
    assert (time.perf_counter() - t) / 20 < 0.25


# ---------------------------------------------------------------------------------------
# a lab guest (tests/golden/lab1-console-6.1-3cycles.txt: the serial console of lab guest
# lab1, Debian 6.1.0-56, booted and cycled through S3 three times by the virtual lab)
# ---------------------------------------------------------------------------------------
LAB = GOLDEN / "lab1-console-6.1-3cycles.txt"


def test_lab_guest_console_three_cycles():
    text = LAB.read_text()
    lines = text.splitlines()

    def stamps(pattern):
        return [float(re.search(r"\[\s*(\d+\.\d+)\]", l).group(1)) for l in lines
                if re.search(pattern, l)]

    entries = stamps(r"PM: suspend entry")
    wakes = stamps(r"ACPI: PM: Low-level resume complete")
    ends = stamps(r"Restarting tasks")
    cycles = parse(text)
    assert len(cycles) == len(entries) == len(wakes) == len(ends) == 3
    for cyc, t0, tw, te in zip(cycles, entries, wakes, ends):
        assert cyc.mode == "mem"
        assert cyc.suspend_ms == pytest.approx((tw - t0) * 1000)
        assert cyc.resume_ms == pytest.approx((te - tw) * 1000)
        assert sum(cyc.phase_ms(p) for p in PHASES[:5]) == pytest.approx(cyc.suspend_ms)
        assert all(cyc.phase_ms(p) >= 0 for p in PHASES)
        assert cyc.warnings == []
        assert all(d.end is not None and d.duration_ms is not None for d in cyc.devices)
        assert cyc.critical["resume"]
    # every callback line is accounted for, including callbacks in modules ("[scsi_mod]")
    calls = sum(1 for l in lines if "PM: calling " in l)
    assert sum(len(c.devices) for c in cycles) == calls
    mod = [d for d in cycles[0].devices if d.callback.endswith("[button]")]
    assert mod and mod[0].name == "LNXPWRBN:00" and mod[0].driver == "button"


def test_kmsg_record_dictionary_is_not_part_of_the_line():
    """One read() of /dev/kmsg is one record with its dictionary lines after the text (as this
    machine's boot log has them for PCI devices); dmesg prints the text only."""
    rec = ("6,5,441199,-;virtio-pci 0000:00:01.0: enabling device (0000 -> 0002)\n"
           " SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n")
    assert dmesg.kmsg_to_lines([rec]) == ["[    0.441199] virtio-pci 0000:00:01.0: enabling device (0000 -> 0002)"]


def test_kmsg_escapes_are_shown_as_dmesg_shows_them():
    """/dev/kmsg escapes control bytes, bytes >= 0x7f and the backslash as \\xHH; dmesg (and so
    every saved log pm_timeline reads) shows the bytes. A CI machine's boot log has
    'rcu: \\x09RCU restricting CPUs ...' among its first lines."""
    lines = dmesg.kmsg_to_lines(["6,1,250154,-;rcu: \\x09RCU restricting CPUs\n",
                                 "6,2,250155,-;path C:\\x5cboot caf\\xc3\\xa9 \\xff\n",
                                 "6,3,250156,-;plain\n"])
    assert lines == ["[    0.250154] rcu: \tRCU restricting CPUs",
                     "[    0.250155] path C:\\boot caf\u00e9 \ufffd",
                     "[    0.250156] plain"]


BIG = "9" * 5000     # int() refuses more than 4300 digits; float() turns 400 of them into infinity


@pytest.mark.parametrize("log,pattern,what", [
    (QEMU, r"(PM: calling led_suspend\+0x0/0x40 @ )1(, parent: input0)", "a pid"),
    (QEMU, r"(PM: led_suspend\+0x0/0x40 returned )0( after 33 usecs)", "a return code"),
    (QEMU, r"(led_suspend\+0x0/0x40 returned 0 after )33( usecs)", "usecs"),
    (MEM, r"(calling  7-0061\+ @ )4122(, parent: i2c-7)", "an old-format pid"),
    (MEM, r"(call 7-0061\+ returned 0 after )1( usecs)", "old-format usecs"),
    (MEM, r"(smpboot: CPU )\d+( is now offline)", "a CPU"),
    (MEM, r"(\[ *)550\.850408(\])", "a timestamp"),
])
def test_a_number_no_kernel_prints_makes_no_line_and_no_traceback(log, pattern, what):
    """A line whose number has thousands of digits is no kernel line: it is passed over as any
    other line that is not one (the result is the log's with an empty line in its place), never a
    ValueError or an infinite time."""
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if re.search(pattern, line))
    bad = list(lines)
    bad[at] = re.sub(pattern, lambda m: m.group(1) + BIG + m.group(2), lines[at], count=1)
    assert bad[at] != lines[at], what
    without = lines[:at] + [""] + lines[at + 1:]
    got, want = parse(bad), parse(without)
    assert [c.to_dict() if hasattr(c, "to_dict") else repr(c) for c in got] == \
        [c.to_dict() if hasattr(c, "to_dict") else repr(c) for c in want]


def test_a_kmsg_record_with_a_time_no_kernel_keeps_is_passed_over():
    """/dev/kmsg's microseconds are a u64: a record with more digits is not turned into a line."""
    assert dmesg.kmsg_to_lines(["6,1,%s,-;PM: suspend entry (deep)" % BIG, "6,2,1500000,-;PM: x"]) == \
        ["[    1.500000] PM: x"]
