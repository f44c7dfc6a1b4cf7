"""Hostile files under the host modules (issue 31, 33): what a fleet's filesystems or a hostile
tester put where a module expects a plain file or a sane number. Each case ends in a clear error
naming the file and what is wrong: no traceback, no hang past its bound, no byte written outside
the root, nothing left changed (the prepared tree, the link's target outside it included), the
module's peak memory under 200 MiB.

The kinds (tests/hostile.py): a FIFO, a socket, a device, a link to /dev/zero, a link out of the
root, a huge file (2 GiB, sparse), a 400-digit number, Unicode digits, deep JSON, a lone
surrogate, an immutable file, an append-only directory, a full filesystem (a small tmpfs), and
failures after the first write (which the call undoes).

One ansible-playbook run per table (tests/badinput.py); ``{in}`` is the case's prepared directory.
The captured machine is lnl0 (tests/data/cpuidle); its tree is ``{in}/root`` and a link out of it
points into ``{in}/root-outside``, which is hashed with the rest, so a write through the link fails
the case.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import hostile
from badinput import assert_refused_prepared, case_params, run_prepared
from conftest import materialize

CPU = "root/sys/devices/system/cpu"
S1 = CPU + "/cpu0/cpuidle/state1"
POWER = "root/sys/power"
STATE_DIR = "root/var/lib/fleetnap"


def machine(d):
    """lnl0's sysfs plus sleep files under d/root, an empty metrics directory d/metrics."""
    root = materialize("lnl0", d / "root")
    (root / "sys/power").mkdir(parents=True, exist_ok=True)
    (root / "sys/power/state").write_text("freeze mem disk\n")
    (root / "sys/power/mem_sleep").write_text("s2idle [deep]\n")
    (root / "sys/power/pm_print_times").write_text("0\n")
    (root / "sys/power/pm_debug_messages").write_text("0\n")
    (d / "metrics").mkdir(exist_ok=True)


def link_out(target, outside):
    """target (a file or directory, created if missing) becomes a link to outside, a copy of it
    beside the root: reading through the link would see the same content."""
    if target.is_dir():
        shutil.copytree(target, outside)
        shutil.rmtree(target)
        target.symlink_to(outside)
    else:
        hostile.link_out(target, outside)


def hostile_at(rel, kind, then=None, base=machine):
    """A case's preparation: ``base`` (the captured machine), ``then``, and ``rel`` (under the
    case directory) made ``kind``."""
    def prep(d):
        if base:
            base(d)
        if then:
            then(d)
        target = d / rel
        if kind in ("link out", "link out dir"):
            if kind == "link out dir":
                target.mkdir(parents=True, exist_ok=True)
            link_out(target, hostile.tree_outside(d / "root") / target.name)
        elif kind == "append-only dir":
            hostile.append_only_dir(target)
        elif kind == "append-only file":       # writable by its mode; an open for writing gets EPERM
            hostile.chattr(target, "+a")
        elif kind == "full fs":
            hostile.full_fs(target)
        elif kind == "immutable":
            hostile.immutable(target)
        else:
            hostile.make(target, kind)
    return prep


def write(rel, text):
    def put(d):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return put


class Table(list):
    """Cases of one module: (case, args, words), with their preparations in ``prep``."""

    def __init__(self):
        super().__init__()
        self.prep = {}

    def add(self, case, args, words, prep):
        self.append((case, args, words))
        self.prep[case] = prep


SPECIAL = [("fifo", "is a FIFO, not a regular file"), ("socket", "is a socket, not a regular file"),
           ("device", "is a character device, not a regular file"), ("link to /dev/zero", "leaves the root"),
           ("link out", "leaves the root")]

# --- cpuidle_info: reads only --------------------------------------------------------------------

R = {"sysfs_root": "{in}/root"}
CPUIDLE_INFO = Table()
for kind, words in SPECIAL:
    CPUIDLE_INFO.add("latency " + kind, R, "cpu0/cpuidle/state1/latency " + words if kind != "link out"
                     and kind != "link to /dev/zero" else words, hostile_at(S1 + "/latency", kind))
CPUIDLE_INFO.add("name huge", R, "cpu0/cpuidle/state1/name is larger than 64 KiB", hostile_at(S1 + "/name", "huge file"))
CPUIDLE_INFO.add("usage 400 digits", R, "cpu0/cpuidle/state1/usage: a number of 400 digits",
                 hostile_at(S1 + "/usage", "400-digit number"))
CPUIDLE_INFO.add("latency unicode digits", R, "cpu0/cpuidle/state1/latency: must be a whole number in ASCII digits",
                 hostile_at(S1 + "/latency", "unicode digits"))
CPUIDLE_INFO.add("online unicode digits", R, "cannot parse the CPU list", hostile_at(CPU + "/online", "unicode digits"))
CPUIDLE_INFO.add("pm_qos unicode digits", R, "cpu0/power/pm_qos_resume_latency_us: must be a whole number in ASCII",
                 hostile_at(CPU + "/cpu0/power/pm_qos_resume_latency_us", "unicode digits"))
CPUIDLE_INFO.add("pm_qos 400 digits", R, "pm_qos_resume_latency_us: a number of 400 digits",
                 hostile_at(CPU + "/cpu0/power/pm_qos_resume_latency_us", "400-digit number"))
CPUIDLE_INFO.add("cpuidle directory link out", R, "leaves the root", hostile_at(CPU + "/cpu0/cpuidle", "link out"))
CPUIDLE_INFO.add("mem_sleep fifo", R, "sys/power/mem_sleep is a FIFO", hostile_at(POWER + "/mem_sleep", "fifo"))

# --- cstate_residency: reads sysfs, writes one metrics file ---------------------------------------

CR = {"sysfs_root": "{in}/root", "directory": "{in}/metrics"}
PROM = "metrics/fleetnap_cstate_residency.prom"
CSTATE_RESIDENCY = Table()
CSTATE_RESIDENCY.add("time fifo", CR, "cpu0/cpuidle/state1/time is a FIFO", hostile_at(S1 + "/time", "fifo"))
CSTATE_RESIDENCY.add("usage link to /dev/zero", CR, "leaves the root", hostile_at(S1 + "/usage", "link to /dev/zero"))
CSTATE_RESIDENCY.add("usage 400 digits", CR, "cpu0/cpuidle/state1/usage: a number of 400 digits",
                     hostile_at(S1 + "/usage", "400-digit number"))
CSTATE_RESIDENCY.add("time unicode digits", CR, "state1/time: must be a whole number in ASCII digits",
                     hostile_at(S1 + "/time", "unicode digits"))
CSTATE_RESIDENCY.add("metrics file immutable", CR, "fleetnap_cstate_residency.prom is immutable or append-only",
                     hostile_at(PROM, "immutable"))
CSTATE_RESIDENCY.add("metrics directory append-only", CR, "metrics is immutable or append-only",
                     hostile_at("metrics", "append-only dir"))
CSTATE_RESIDENCY.add("metrics directory full", CR, "No space left on device", hostile_at("metrics", "full fs"))
CSTATE_RESIDENCY.add("metrics file a fifo", CR, "fleetnap_cstate_residency.prom is a FIFO", hostile_at(PROM, "fifo"))
CSTATE_RESIDENCY.add("metrics file a socket", CR, "fleetnap_cstate_residency.prom is a socket",
                     hostile_at(PROM, "socket"))

# --- pm_debug: reads and writes two knobs ----------------------------------------------------------

PD = {"sysfs_root": "{in}/root", "pm_print_times": True, "pm_debug_messages": True}
PM_DEBUG = Table()
for kind, words in SPECIAL:
    PM_DEBUG.add("pm_print_times " + kind, PD, words, hostile_at(POWER + "/pm_print_times", kind))
PM_DEBUG.add("pm_print_times huge", PD, "pm_print_times is larger than 64 bytes",
             hostile_at(POWER + "/pm_print_times", "huge file"))
PM_DEBUG.add("pm_debug_messages unicode digits", PD, "pm_debug_messages holds '1²', not 0 or 1",
             hostile_at(POWER + "/pm_debug_messages", "unicode digits"))
PM_DEBUG.add("power directory link out", PD, "leaves the root", hostile_at(POWER, "link out"))
# The second knob refuses the write (append-only: an open for writing gets EPERM): the first is put back.
PM_DEBUG.add("second knob refuses the write", PD, "pm_debug_messages failed (Operation not permitted); the 1 write(s) "
             "before it were rolled back, the host is as it was",
             hostile_at(POWER + "/pm_debug_messages", "append-only file"))

# --- cpuidle_qos: sysfs, the originals record, units, the metrics file ----------------------------

Q = {"sysfs_root": "{in}/root", "max_latency_us": 50}
QA = {"sysfs_root": "{in}/root", "state": "absent"}
QM = dict(Q, metrics_dir="{in}/metrics")
RECORD = STATE_DIR + "/cpuidle_qos.orig.json"
UNDONE = "change(s) were undone, the host is as it was"
CPUIDLE_QOS = Table()
CPUIDLE_QOS.add("disable link out", Q, "cpu0/cpuidle/state2/disable leaves the root",
                hostile_at(CPU + "/cpu0/cpuidle/state2/disable", "link out"))
CPUIDLE_QOS.add("state directory link out", Q, "leaves the root",
                hostile_at(CPU + "/cpu0/cpuidle/state2", "link out"))
CPUIDLE_QOS.add("disable fifo", Q, "cpu0/cpuidle/state2/disable is a FIFO",
                hostile_at(CPU + "/cpu0/cpuidle/state2/disable", "fifo"))
CPUIDLE_QOS.add("disable a device", Q, "cpu0/cpuidle/state2/disable is a character device",
                hostile_at(CPU + "/cpu0/cpuidle/state2/disable", "device"))
CPUIDLE_QOS.add("latency link to /dev/zero", Q, "leaves the root", hostile_at(S1 + "/latency", "link to /dev/zero"))
CPUIDLE_QOS.add("latency 400 digits", Q, "cpu0/cpuidle/state1/latency: a number of 400 digits",
                hostile_at(S1 + "/latency", "400-digit number"))
CPUIDLE_QOS.add("absent with a unicode pm_qos", QA, "cpu0/power/pm_qos_resume_latency_us: must be a whole number in "
                "ASCII digits, got '1²'", hostile_at(CPU + "/cpu0/power/pm_qos_resume_latency_us", "unicode digits",
                                                     then=write(RECORD, '{"version": 2, "cpus": {}}')))
CPUIDLE_QOS.add("record deep JSON", QA, "cpuidle_qos.orig.json nests 600 levels deep", hostile_at(RECORD, "deep JSON"))
CPUIDLE_QOS.add("record lone surrogate", QA, "cpuidle_qos.orig.json holds a string with a lone surrogate",
                hostile_at(RECORD, "lone surrogate"))
CPUIDLE_QOS.add("record fifo", QA, "cpuidle_qos.orig.json is a FIFO", hostile_at(RECORD, "fifo"))
CPUIDLE_QOS.add("record huge", QA, "cpuidle_qos.orig.json is larger than 16 MiB", hostile_at(RECORD, "huge file"))
CPUIDLE_QOS.add("record 400-digit qos", QA, "cpuidle_qos.orig.json holds a number of 400 digits",
                lambda d: (machine(d), write(RECORD, '{"cpus": {"0": {"pm_qos_resume_latency_us": %s}}}' % ("9" * 400))(d)))
CPUIDLE_QOS.add("record names a renumbered state", QA, "kept cpu0 state2 as C6 (latency 999 us), but the host has",
                lambda d: (machine(d), write(RECORD, json.dumps({"version": 2, "cpus": {"0": {"states": {
                    "2": {"name": "C6", "latency_us": 999, "disable": 1}}}}}))(d)))
CPUIDLE_QOS.add("record directory link out", Q, "var/lib/fleetnap leaves the root", hostile_at(STATE_DIR, "link out dir"))
CPUIDLE_QOS.add("unit directory link out", dict(Q, persist=True),
                "etc/systemd/system/fleetnap-cpu-dma-latency.service leaves the root",
                hostile_at("root/etc/systemd/system", "link out dir"))
# Failures after the sysfs writes: every change of the call is undone.
CPUIDLE_QOS.add("metrics file immutable", QM, "fleetnap_cpuidle.prom is immutable or append-only",
                hostile_at("metrics/fleetnap_cpuidle.prom", "immutable"))
CPUIDLE_QOS.add("metrics directory append-only", QM, UNDONE, hostile_at("metrics", "append-only dir"))
CPUIDLE_QOS.add("metrics directory full", QM, "No space left on device; this call's", hostile_at("metrics", "full fs"))
CPUIDLE_QOS.add("unit file immutable", dict(Q, persist=True), "fleetnap-cpuidle.service is immutable or append-only",
                hostile_at("root/etc/systemd/system/fleetnap-cpuidle.service", "immutable"))
CPUIDLE_QOS.add("state directory full", Q, "No space left on device; nothing had been changed",
                hostile_at(STATE_DIR, "full fs"))
CPUIDLE_QOS.add("a disable file refuses the write half-way", Q,
                "writing '1' to {in}/root/sys/devices/system/cpu/cpu7/cpuidle/state3/disable failed (Operation not "
                "permitted); this call's 16 change(s) were undone, the host is as it was",
                hostile_at(CPU + "/cpu7/cpuidle/state3/disable", "append-only file"))

# --- sleep_policy: mem_sleep, the drop-in, the masks, the record, the metrics file ---------------

SP = {"sysfs_root": "{in}/root", "allow": "s2idle"}
# allow=deep keeps the tree's mem_sleep "s2idle [deep]": a prepared tree shows the word written
# back after an undo ("deep"), where the kernel shows its brackets again.
SD = {"sysfs_root": "{in}/root", "allow": "deep"}
SN = {"sysfs_root": "{in}/root", "allow": "none"}
SPM = dict(SD, metrics_dir="{in}/metrics")
SRECORD = STATE_DIR + "/sleep_policy.orig.json"
DROPDIR = "root/etc/systemd/sleep.conf.d"
SLEEP_POLICY = Table()
SLEEP_POLICY.add("mem_sleep fifo", SP, "sys/power/mem_sleep is a FIFO", hostile_at(POWER + "/mem_sleep", "fifo"))
SLEEP_POLICY.add("mem_sleep link out", SP, "sys/power/mem_sleep leaves the root",
                 hostile_at(POWER + "/mem_sleep", "link out"))
SLEEP_POLICY.add("state link to /dev/zero", SP, "leaves the root", hostile_at(POWER + "/state", "link to /dev/zero"))
SLEEP_POLICY.add("state huge", SP, "sys/power/state is larger than 64 KiB", hostile_at(POWER + "/state", "huge file"))
SLEEP_POLICY.add("record deep JSON", dict(SP, state="absent"), "sleep_policy.orig.json nests 600 levels deep",
                 hostile_at(SRECORD, "deep JSON"))
SLEEP_POLICY.add("record lone surrogate", dict(SP, state="absent"), "holds a string with a lone surrogate",
                 hostile_at(SRECORD, "lone surrogate"))
SLEEP_POLICY.add("record a socket", SP, "sleep_policy.orig.json is a socket", hostile_at(SRECORD, "socket"))
SLEEP_POLICY.add("unit directory link out", SN, "etc/systemd/system leaves the root",
                 hostile_at("root/etc/systemd/system", "link out dir"))
SLEEP_POLICY.add("drop-in directory link out", SD, "sleep.conf.d/fleetnap.conf leaves the root",
                 hostile_at(DROPDIR, "link out dir"))
SLEEP_POLICY.add("drop-in immutable", SD, "fleetnap.conf is immutable or append-only",
                 hostile_at(DROPDIR + "/fleetnap.conf", "immutable"))
SLEEP_POLICY.add("drop-in directory append-only", SD, UNDONE, hostile_at(DROPDIR, "append-only dir"))
SLEEP_POLICY.add("drop-in directory full", SD, "No space left on device; this call's", hostile_at(DROPDIR, "full fs"))
SLEEP_POLICY.add("drop-in a fifo", SD, "fleetnap.conf is a FIFO", hostile_at(DROPDIR + "/fleetnap.conf", "fifo"))
SLEEP_POLICY.add("metrics directory full", SPM, "No space left on device; check metrics_dir; this call's",
                 hostile_at("metrics", "full fs"))
SLEEP_POLICY.add("metrics file a fifo", SPM, "fleetnap_sleep_policy.prom is a FIFO",
                 hostile_at("metrics/fleetnap_sleep_policy.prom", "fifo"))
SLEEP_POLICY.add("mem_sleep refuses the write", SP, "writing 's2idle' to {in}/root/sys/power/mem_sleep failed "
                 "(Operation not permitted); this call's 1 change(s) were undone", hostile_at(POWER + "/mem_sleep", "append-only file"))

# --- fleetnap_profile: the gate and the sleep policy in one call --------------------------------

FP = {"sysfs_root": "{in}/root", "cstates": {"max_latency_us": 50}, "sleep": {"resume_budget_ms": 3000,
                                                                              "resume_measured_ms": 500}}
FACTS = "root/etc/ansible/facts.d/fleetnap.fact"
FLEETNAP_PROFILE = Table()
FLEETNAP_PROFILE.add("measurements fifo", FP, "fleetnap.fact is a FIFO", hostile_at(FACTS, "fifo"))
FLEETNAP_PROFILE.add("measurements deep JSON", FP, "fleetnap.fact nests 600 levels deep", hostile_at(FACTS, "deep JSON"))
FLEETNAP_PROFILE.add("measurements lone surrogate", FP, "holds a string with a lone surrogate",
                     hostile_at(FACTS, "lone surrogate"))
FLEETNAP_PROFILE.add("measurements huge", FP, "fleetnap.fact is larger than 16 MiB", hostile_at(FACTS, "huge file"))
FLEETNAP_PROFILE.add("measured resume 400 digits in the file", dict(FP, sleep={"resume_budget_ms": 3000}),
                     "fleetnap.fact holds a number of 400 digits, beyond any value fleetnap accepts",
                     lambda d: (machine(d), write(FACTS, '{"resume": {"end_to_end_ms": %s}}' % ("9" * 400))(d)))
FLEETNAP_PROFILE.add("budget 400 digits", dict(FP, sleep={"resume_budget_ms": 10 ** 400}),
                     "option sleep.resume_budget_ms: a number of 401 digits", machine)
FLEETNAP_PROFILE.add("max_latency_us 400 digits", dict(FP, cstates={"max_latency_us": 10 ** 400}),
                     "option cstates.max_latency_us: a number of 401 digits", machine)
FLEETNAP_PROFILE.add("cpus unicode digits", dict(FP, cstates={"max_latency_us": 50, "cpus": "0-1\u00b2"}),
                     "bad range '0-1²'", machine)
# After the C-states were written: the sleep part fails, everything is undone.
FLEETNAP_PROFILE.add("mem_sleep refuses the write after the C-states", dict(FP, sleep={"resume_budget_ms": 3000,
                                                                                      "resume_measured_ms": 5000}),
                     "writing 's2idle' to {in}/root/sys/power/mem_sleep failed (Operation not permitted); this call's",
                     hostile_at(POWER + "/mem_sleep", "append-only file"))
FLEETNAP_PROFILE.add("drop-in directory full after the C-states", FP, "No space left on device; this call's",
                     hostile_at(DROPDIR, "full fs"))
FLEETNAP_PROFILE.add("drop-in directory append-only after the C-states", FP, UNDONE,
                     hostile_at(DROPDIR, "append-only dir"))
FLEETNAP_PROFILE.add("metrics directory full after everything", dict(FP, metrics_dir="{in}/metrics"),
                     "No space left on device; this call's", hostile_at("metrics", "full fs"))

# --- fleetnap_fact: one facts file ----------------------------------------------------------------

FF = {"path": "{in}/facts.d/fleetnap.fact", "data": {"resume_ms": 5}}
FFILE = "facts.d/fleetnap.fact"
FLEETNAP_FACT = Table()
for kind, words in SPECIAL[:3]:
    FLEETNAP_FACT.add("facts file " + kind, FF, "fleetnap.fact " + words, hostile_at(FFILE, kind, base=None))
FLEETNAP_FACT.add("facts file link to /dev/zero", FF, "is a character device, not a regular file",
                  hostile_at(FFILE, "link to /dev/zero", base=None))
FLEETNAP_FACT.add("facts file huge", FF, "fleetnap.fact is larger than 4 MiB", hostile_at(FFILE, "huge file", base=None))
FLEETNAP_FACT.add("facts file deep JSON", FF, "fleetnap.fact nests 600 levels deep", hostile_at(FFILE, "deep JSON", base=None))
FLEETNAP_FACT.add("facts file lone surrogate", FF, "lone surrogate", hostile_at(FFILE, "lone surrogate", base=None))
FLEETNAP_FACT.add("facts file 400-digit number", FF, "fleetnap.fact holds a number of 400 digits",
                  lambda d: write(FFILE, '{"resume_ms": %s}' % ("9" * 400))(d))
FLEETNAP_FACT.add("facts file immutable", FF, "fleetnap.fact is immutable or append-only",
                  lambda d: (write(FFILE, "{}\n")(d), hostile.immutable(d / FFILE)))
FLEETNAP_FACT.add("facts directory append-only", FF, "facts.d is immutable or append-only",
                  lambda d: (write(FFILE, "{}\n")(d), hostile.append_only_dir(d / "facts.d")))
FLEETNAP_FACT.add("facts directory full", FF, "No space left on device; the facts file is as it was",
                  lambda d: (write(FFILE, "{}\n")(d), hostile.full_fs(d / "facts.d")))
FLEETNAP_FACT.add("data 400 digits", dict(FF, data={"resume_ms": 10 ** 400}), "option data.resume_ms: a number of 401",
                  lambda d: None)

# --- textfile_metrics: one metrics file -----------------------------------------------------------

M1 = {"name": "fleetnap_x", "samples": [{"labels": {"host": "a"}, "value": 1}]}
TM = {"directory": "{in}/m", "name": "t", "metrics": [M1]}
TPROM = "m/fleetnap_t.prom"
TEXTFILE_METRICS = Table()
TEXTFILE_METRICS.add("output a fifo", TM, "fleetnap_t.prom is a FIFO", hostile_at(TPROM, "fifo", base=None))
TEXTFILE_METRICS.add("output a device", TM, "fleetnap_t.prom is a character device", hostile_at(TPROM, "device", base=None))
TEXTFILE_METRICS.add("output huge", TM, "fleetnap_t.prom is larger than 64 MiB", hostile_at(TPROM, "huge file", base=None))
TEXTFILE_METRICS.add("output immutable", TM, "fleetnap_t.prom is immutable or append-only", hostile_at(TPROM, "immutable", base=None))
TEXTFILE_METRICS.add("directory append-only", TM, "m is immutable or append-only", hostile_at("m", "append-only dir", base=None))
TEXTFILE_METRICS.add("directory full", TM, "No space left on device; the metrics file is as it was",
                     hostile_at("m", "full fs", base=None))
TEXTFILE_METRICS.add("value 400 digits", dict(TM, metrics=[dict(M1, samples=[{"value": 10 ** 400}])]),
                     "option metrics[0].samples[0].value: a number of 401 digits", None)
TEXTFILE_METRICS.add("help a list", dict(TM, metrics=[dict(M1, help=["a"])]),
                     "metric fleetnap_x: help must be a string, got ['a']", None)
TEXTFILE_METRICS.add("metric name with a newline", dict(TM, metrics=[dict(M1, name="fleetnap_x\n")]),
                     "metric name 'fleetnap_x\\n' must match", None)
TEXTFILE_METRICS.add("label names differing in case", dict(TM, metrics=[dict(M1, samples=[
    {"labels": {"host": "a", "Host": "b"}, "value": 1}])]), "label names 'host' and 'Host' differ only in case", None)
TEXTFILE_METRICS.add("two samples with one label set", dict(TM, metrics=[dict(M1, samples=[
    {"labels": {"host": "a"}, "value": 1}, {"labels": {"host": "a"}, "value": 2}])]),
    'two samples with the same labels {host="a"} (values 1 and 2)', None)

# --- pm_timeline: the saved log, the HTML pages ---------------------------------------------------

GOLDEN_LOG = Path(__file__).resolve().parent.parent / "data/dmesg"
LOG = "[  100.000000] PM: suspend entry (deep)\n"
PT = {"src": "{in}/dmesg.txt"}
PTH = dict(PT, html_dest="{in}/html/timeline.html")


def log_and_html(d):
    (d / "dmesg.txt").write_bytes(sorted(GOLDEN_LOG.glob("*.txt"))[0].read_bytes())
    (d / "html").mkdir()


PM_TIMELINE = Table()
for kind, words in SPECIAL[:3]:
    PM_TIMELINE.add("src " + kind, PT, "dmesg.txt " + words, hostile_at("dmesg.txt", kind, base=None))
PM_TIMELINE.add("src link to /dev/zero", PT, "dmesg.txt is a character device", hostile_at("dmesg.txt", "link to /dev/zero", base=None))
PM_TIMELINE.add("src huge", PT, "dmesg.txt is larger than 64 MiB", hostile_at("dmesg.txt", "huge file", base=None))
PM_TIMELINE.add("html_dest a fifo", PTH, "timeline.html is a FIFO",
                lambda d: (log_and_html(d), hostile.fifo(d / "html/timeline.html")))
PM_TIMELINE.add("html_dest immutable", PTH, "timeline.html is immutable or append-only",
                lambda d: (log_and_html(d), hostile.immutable(d / "html/timeline.html")))
PM_TIMELINE.add("html directory append-only", PTH, "html is immutable or append-only",
                lambda d: (log_and_html(d), hostile.append_only_dir(d / "html")))
PM_TIMELINE.add("html directory full", PTH, "No space left on device",
                lambda d: (log_and_html(d), hostile.full_fs(d / "html")))
PM_TIMELINE.add("since 400 digits", dict(PT, since=10 ** 400), "option since: a number of 401 digits", log_and_html)

# --- powernap_advice: numbers, and the SVG ---------------------------------------------------------

PA = {"transition_latency_s": 0.01, "utilization": 0.2}
PAS = dict(PA, svg_dest="{in}/svg/powernap.svg")


def svg_dir(d):
    (d / "svg").mkdir()


POWERNAP_ADVICE = Table()
POWERNAP_ADVICE.add("transition_latency_s 400 digits", dict(PA, transition_latency_s=10 ** 400),
                    "option transition_latency_s: a number of 401 digits", svg_dir)
POWERNAP_ADVICE.add("utilization 400 digits", dict(PA, utilization="9" * 400), "utilization: a number of 400 digits is beyond any value fleetnap accepts",
                    svg_dir)
POWERNAP_ADVICE.add("utilization unicode digits", dict(PA, utilization="0.\u00b2"),
                    "must be a decimal number in ASCII digits, got '0.²'", svg_dir)
POWERNAP_ADVICE.add("tiny fmin at zero utilisation", dict(PA, utilization=0, dvfs_min_frequency=1e-300),
                    "option dvfs_min_frequency: must be >= 0.01 and <= 1", svg_dir)
POWERNAP_ADVICE.add("svg_dest a fifo", PAS, "powernap.svg is a FIFO",
                    lambda d: (svg_dir(d), hostile.fifo(d / "svg/powernap.svg")))
POWERNAP_ADVICE.add("svg_dest immutable", PAS, "powernap.svg is immutable or append-only",
                    lambda d: (svg_dir(d), hostile.immutable(d / "svg/powernap.svg")))
POWERNAP_ADVICE.add("svg directory append-only", PAS, "svg is immutable or append-only",
                    lambda d: (svg_dir(d), hostile.append_only_dir(d / "svg")))
POWERNAP_ADVICE.add("svg directory full", PAS, "powernap.svg: No space left on device",
                    lambda d: (svg_dir(d), hostile.full_fs(d / "svg")))

TABLES = {
    "cpuidle_info": CPUIDLE_INFO,
    "cstate_residency": CSTATE_RESIDENCY,
    "pm_debug": PM_DEBUG,
    "cpuidle_qos": CPUIDLE_QOS,
    "sleep_policy": SLEEP_POLICY,
    "fleetnap_profile": FLEETNAP_PROFILE,
    "fleetnap_fact": FLEETNAP_FACT,
    "textfile_metrics": TEXTFILE_METRICS,
    "pm_timeline": PM_TIMELINE,
    "powernap_advice": POWERNAP_ADVICE,
}
CASES = case_params(TABLES)


@pytest.fixture(scope="module", autouse=True)
def _clean_up_flags_and_mounts():
    yield
    hostile.cleanup()


@pytest.mark.parametrize("module,index,words", CASES)
def test_hostile_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    run = run_prepared(module, TABLES[module], TABLES[module].prep, tmp_path_factory, key="hostile-" + module)
    assert_refused_prepared(run, index, words)


def test_every_hostile_kind_is_in_the_tables():
    """The kinds issue 31 names, each against at least one module here."""
    text = " ".join(case for table in TABLES.values() for case, _a, _w in table)
    for kind in ("fifo", "socket", "device", "link to /dev/zero", "link out", "huge", "400 digits", "unicode digits",
                 "deep JSON", "lone surrogate", "immutable", "append-only", "full", "refuses the write"):
        assert kind in text, kind


# --- every metrics file these modules write is one Prometheus accepts -----------------------------

PROMTOOL = shutil.which("promtool")


def promtool_check(path):
    """``promtool check metrics`` on a written file: its exit status and what it said."""
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=Path(path).read_bytes(), capture_output=True,
                          timeout=60)
    return proc.returncode, (proc.stdout + proc.stderr).decode("utf-8", "replace")


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian package prometheus; make setup installs it)")
def test_metrics_files_pass_promtool(tmp_path, module_runner):
    """HELP with a backslash and a newline, label values with quotes, and the gate's, the sleep
    policy's and the residency collector's files from a captured machine: promtool accepts each
    (node_exporter's textfile collector drops a whole file it would refuse)."""
    machine(tmp_path)
    root, metrics = str(tmp_path / "root"), tmp_path / "metrics"
    tricky = [{"name": "fleetnap_tricky", "help": "a \\ backslash\nand a newline",
               "samples": [{"labels": {"host": 'say "hi"\\', "Zone": "x"}, "value": 1.5}]},
              {"name": "fleetnap_events_total", "type": "counter", "help": "Events.", "samples": [{"value": 3}]}]
    runs = [("textfile_metrics", {"directory": str(metrics), "name": "tricky", "metrics": tricky}),
            ("cstate_residency", {"directory": str(metrics), "sysfs_root": root}),
            ("cpuidle_qos", {"sysfs_root": root, "max_latency_us": 50, "resume_latency_us": 20,
                             "metrics_dir": str(metrics)}),
            ("sleep_policy", {"sysfs_root": root, "allow": "s2idle", "metrics_dir": str(metrics)})]
    for module, args in runs:
        res = module_runner(module, args)
        assert not res.failed, (module, res.get("msg"))
    files = sorted(metrics.glob("*.prom"))
    assert [p.name for p in files] == ["fleetnap_cpuidle.prom", "fleetnap_cstate_residency.prom",
                                       "fleetnap_sleep_policy.prom", "fleetnap_tricky.prom"]
    for path in files:
        rc, said = promtool_check(path)
        assert rc == 0, "%s: promtool says %s\n%s" % (path.name, said, path.read_text()[:2000])
