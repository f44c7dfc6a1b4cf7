"""Bad input and faults for the modules that change a host (issue 16): cpuidle_qos, sleep_policy,
fleetnap_profile, fleetnap_fact, textfile_metrics, etf_qdisc and wake_latency_probe. Each case is
refused with a message naming what is wrong, no traceback, no MODULE FAILURE, and the prepared
tree it was pointed at (a captured machine's sysfs, a fact file, a metrics directory) unchanged.
Nothing here touches this machine: every sysfs_root, path and directory is the case's own.

The runner is tests/badinput.py (run_prepared): a table is one ansible-playbook run.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from badinput import INF, NAN, assert_refused_prepared, case_params, run_prepared
from conftest import PSTATE_DATA, materialize


def machine(d):
    """A captured machine's sysfs (Lunar Lake, lnl0) plus sleep files, under d/root."""
    root = materialize("lnl0", d / "root")
    power = root / "sys" / "power"
    power.mkdir(parents=True, exist_ok=True)
    (power / "state").write_text("freeze mem disk\n")
    (power / "mem_sleep").write_text("s2idle [deep]\n")
    (d / "metrics").mkdir()


def bad_bytes(rel, data=b"C1\xff\xfe\n"):
    def prep(d):
        machine(d)
        (d / "root" / rel).write_bytes(data)
    return prep


def record(module, text):
    """A captured machine with fleetnap's originals record of ``module`` holding text."""
    def prep(d):
        machine(d)
        target = d / ("root/var/lib/fleetnap/%s.orig.json" % module)
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.write_bytes if isinstance(text, bytes) else target.write_text)(text)
    return prep


R = {"sysfs_root": "{in}/root"}
CQ = dict(R, max_latency_us=50)
CPUIDLE_QOS = [
    ("max_latency_us nan", dict(CQ, max_latency_us=NAN), "max_latency_us must be a finite number >= 0, got nan"),
    ("max_latency_us inf", dict(CQ, max_latency_us=INF), "max_latency_us must be a finite number >= 0, got inf"),
    ("max_latency_us negative", dict(CQ, max_latency_us=-5), "max_latency_us must be >= 0 microseconds"),
    ("max_latency_us an hour", dict(CQ, max_latency_us=3.6e12), "max_latency_us must be <= 2000000000 microseconds"),
    ("declared_latency_margin nan", dict(CQ, declared_latency_margin=NAN), "declared_latency_margin must be a finite"),
    ("declared_latency_margin 0", dict(CQ, declared_latency_margin=0), "declared_latency_margin must be >= 1"),
    ("measured nan", dict(CQ, measured_latency_us={"C1E": NAN}), "measured latency of C1E must be a finite number"),
    ("measured a word", dict(CQ, measured_latency_us={"C1E": "fast"}), "measured latency of C1E must be a number"),
    ("measured negative", dict(CQ, measured_latency_us={"C1E": -1}), "measured latency of C1E must be a finite number >= 0"),
    ("cpus a billion", dict(CQ, cpus="0-999999999"), "beyond the largest a kernel can have (8191)"),
    ("cpus garbage", dict(CQ, cpus="banana"), "bad CPU number 'banana'"),
    ("resume_latency_us negative", dict(CQ, resume_latency_us=-3), "resume_latency_us must be >= 0 microseconds"),
    ("global_latency_us huge", dict(CQ, global_latency_us=10 ** 12), "global_latency_us must be <= 2000000000"),
    ("governor with a slash", dict(CQ, governor="../menu"), "governor: '../menu' is not available on this host"),
    ("sysfs_root relative", dict(CQ, sysfs_root="root"), "option sysfs_root: must be an absolute path"),
    ("sysfs_root with ..", dict(CQ, sysfs_root="{in}/root/.."), "option sysfs_root: '..' is not allowed"),
    ("metrics_dir relative", dict(CQ, metrics_dir="metrics"), "option metrics_dir: must be an absolute path"),
    ("metrics_dir with ..", dict(CQ, metrics_dir="{in}/metrics/.."), "option metrics_dir: '..' is not allowed"),
    ("metrics_dir a file", dict(CQ, metrics_dir="{in}/root/proc/cmdline"), "cmdline exists and is not a directory"),
    ("metrics file a directory", dict(CQ, metrics_dir="{in}/metrics"), "fleetnap_cpuidle.prom is a directory"),
    ("state name not UTF-8", CQ, "cpu0/cpuidle/state1/name is not UTF-8 text"),
    ("latency not UTF-8", CQ, "cpu1/cpuidle/state2/latency is not UTF-8 text"),
    ("disable an unknown state", dict(CQ, disable=["C99"]), "disable: unknown state(s) C99"),
    # state=absent writes the originals record back into sysfs: a corrupt one is refused
    ("record not JSON", dict(R, state="absent"), "cpuidle_qos.orig.json is not valid JSON"),
    ("record not UTF-8", dict(R, state="absent"), "cpuidle_qos.orig.json is not UTF-8 text"),
    ("record a list", dict(R, state="absent"), "cpuidle_qos.orig.json: must be a JSON object"),
    ("record disable a word", dict(R, state="absent"), "cpus.0.states.C1 must be '0' or '1', got 'banana'"),
    ("record cpu a word", dict(R, state="absent"), "cpus key 'all' must be a CPU number"),
    ("record qos NaN", dict(R, state="absent"), "cpuidle_qos.orig.json holds NaN, which is not a JSON number"),
    ("record governor a path", dict(R, state="absent"), "governor must be a cpuidle governor name"),
]
CPUIDLE_QOS_PREP = {c: machine for c, _a, _w in CPUIDLE_QOS}
CPUIDLE_QOS_PREP["state name not UTF-8"] = bad_bytes("sys/devices/system/cpu/cpu0/cpuidle/state1/name")
CPUIDLE_QOS_PREP["metrics file a directory"] = lambda d: (machine(d), (d / "metrics/fleetnap_cpuidle.prom").mkdir())
CPUIDLE_QOS_PREP.update({
    "record not JSON": record("cpuidle_qos", "{"),
    "record not UTF-8": record("cpuidle_qos", b'{"governor": "\xff"}'),
    "record a list": record("cpuidle_qos", "[]"),
    "record disable a word": record("cpuidle_qos", '{"cpus": {"0": {"states": {"C1": "banana"}}}}'),
    "record cpu a word": record("cpuidle_qos", '{"cpus": {"all": {"states": {}}}}'),
    "record qos NaN": record("cpuidle_qos", '{"cpus": {"0": {"pm_qos_resume_latency_us": NaN}}}'),
    "record governor a path": record("cpuidle_qos", '{"governor": "../menu"}'),
})
CPUIDLE_QOS_PREP["latency not UTF-8"] = bad_bytes("sys/devices/system/cpu/cpu1/cpuidle/state2/latency", b"1\xff\n")

SP = dict(R, allow="s2idle")
SLEEP_POLICY = [
    ("allow unknown", dict(SP, allow="hibernate"), "value of allow must be one of"),
    ("sysfs_root relative", dict(SP, sysfs_root="root"), "option sysfs_root: must be an absolute path"),
    ("sysfs_root with ..", dict(SP, sysfs_root="{in}/root/.."), "option sysfs_root: '..' is not allowed"),
    ("sysfs_root missing", dict(SP, sysfs_root="{in}/nope"), "does not exist: this kernel has no system sleep"),
    ("sysfs_root with NUL", dict(SP, sysfs_root="{in}/\x00"), "option sysfs_root: a path cannot hold a NUL byte"),
    ("metrics_dir relative", dict(SP, metrics_dir="m"), "option metrics_dir: must be an absolute path"),
    ("metrics_dir with ..", dict(SP, metrics_dir="{in}/metrics/.."), "option metrics_dir: '..' is not allowed"),
    ("metrics_dir a file", dict(SP, metrics_dir="{in}/root/proc/cmdline"), "exists and is not a directory"),
    ("mem_sleep not UTF-8", SP, "sys/power/mem_sleep is not UTF-8 text"),
    ("state file not UTF-8", SP, "sys/power/state is not UTF-8 text"),
    # the kernel names each state once, one of mem_sleep's in brackets (a repeat was a traceback in
    # the metrics: two samples with the same labels)
    ("mem_sleep a word twice", dict(SP, metrics_dir="{in}/metrics"),
     "sys/power/mem_sleep holds 's2idle', not the kernel's list of sleep states"),
    ("mem_sleep two choices", SP, "sys/power/mem_sleep holds '[deep]', not the kernel's list of sleep states"),
    ("state a long word", SP, "sys/power/state holds 'xxxxxxxxxx"),
    ("deep without S3", dict(SP, allow="deep"), "allow=deep: this host does not offer S3"),
    ("deep with garbage mem_sleep", dict(SP, allow="deep"), "allow=deep: this host does not offer S3"),
    ("mask_targets not a bool", dict(SP, mask_targets="perhaps"), "mask_targets"),
    ("state unknown", dict(SP, state="gone"), "value of state must be one of"),
    ("allow missing", {"sysfs_root": "{in}/root"}, "state is present but all of the following are missing: allow"),
    ("unknown option", dict(SP, mode="deep"), "Unsupported parameters"),
    ("record a list", dict(R, state="absent"), "sleep_policy.orig.json: must be a JSON object"),
    ("record not JSON", dict(R, state="absent"), "sleep_policy.orig.json is not valid JSON"),
    ("record mem_sleep a word", dict(R, state="absent"), "mem_sleep must be s2idle, shallow, deep or null"),
    ("record masks a unit of another", dict(R, state="absent"), "masked_targets must be a list of"),
]
SLEEP_POLICY_PREP = {c: machine for c, _a, _w in SLEEP_POLICY}
SLEEP_POLICY_PREP.update({
    "mem_sleep a word twice": bad_bytes("sys/power/mem_sleep", b"s2idle s2idle [deep]\n"),
    "mem_sleep two choices": bad_bytes("sys/power/mem_sleep", b"[s2idle] [deep]\n"),
    "state a long word": bad_bytes("sys/power/state", b"freeze mem " + b"x" * 2000 + b"\n"),
    "record a list": record("sleep_policy", "[1]"),
    "record not JSON": record("sleep_policy", "{"),
    "record mem_sleep a word": record("sleep_policy", '{"mem_sleep": "off", "masked_targets": []}'),
    "record masks a unit of another": record("sleep_policy", '{"mem_sleep": "deep", "masked_targets": ["ssh.service"]}'),
})
SLEEP_POLICY_PREP["mem_sleep not UTF-8"] = bad_bytes("sys/power/mem_sleep", b"s2idle [de\xffep]\n")
SLEEP_POLICY_PREP["deep with garbage mem_sleep"] = bad_bytes("sys/power/mem_sleep", b"whatever\n")
SLEEP_POLICY_PREP["state file not UTF-8"] = bad_bytes("sys/power/state", b"freeze \xff\n")
SLEEP_POLICY_PREP["deep without S3"] = bad_bytes("sys/power/mem_sleep", b"[s2idle]\n")

FF = {"path": "{in}/fleetnap.fact", "data": {"resume_ms": 5}}
# A real float NaN / infinity inside a dict option (the string "nan" is just a string there).
NAN_F, INF_F = "{{ 'nan' | float }}", "{{ 'inf' | float }}"
FLEETNAP_FACT = [
    ("path relative", dict(FF, path="fleetnap.fact"), "option path: must be an absolute path"),
    ("path with ..", dict(FF, path="{in}/../x.fact"), "option path: '..' is not allowed"),
    ("path with NUL", dict(FF, path="{in}/a\x00.fact"), "option path: a path cannot hold a NUL byte"),
    ("path a directory", dict(FF, path="{in}"), "{in} is a directory, not a facts file"),
    ("path 5000 characters", dict(FF, path="/" + "f" * 5000), "longer than PATH_MAX"),
    ("data nan", dict(FF, data={"resume_ms": NAN_F}), "option data: data.resume_ms is nan"),
    ("data inf nested", dict(FF, data={"a": {"b": [1, INF_F]}}), "option data: data.a.b[1] is inf"),
    ("data missing", {"path": "{in}/fleetnap.fact"}, "missing required arguments: data"),
    ("data a list", dict(FF, data=[1, 2]), "argument 'data' is of type list"),
    ("data of 5 MB", dict(FF, data={"pad": "x" * (5 * 1024 * 1024)}), "option data: the facts file would be"),
    ("existing file not UTF-8", FF, "fleetnap.fact is not UTF-8 text"),
    ("existing file not JSON", dict(FF, recursive=True), "fleetnap.fact is not valid JSON"),
    ("existing file with NaN", FF, "fleetnap.fact holds NaN, which is not a JSON number"),
    ("existing file a list", dict(FF, recursive=True), "fleetnap.fact does not hold a JSON object"),
    ("existing file huge", FF, "fleetnap.fact is larger than 4 MiB"),
    ("recursive not a bool", dict(FF, recursive="deep"), "recursive"),
    ("unknown option", dict(FF, mode="0644"), "Unsupported parameters"),
]
FLEETNAP_FACT_PREP = {
    "existing file not UTF-8": lambda d: (d / "fleetnap.fact").write_bytes(b'{"a": "\xff"}'),
    "existing file not JSON": lambda d: (d / "fleetnap.fact").write_text("{"),
    "existing file with NaN": lambda d: (d / "fleetnap.fact").write_text('{"resume": {"kernel_ms": NaN}}'),
    "existing file a list": lambda d: (d / "fleetnap.fact").write_text("[1]"),
    "existing file huge": lambda d: (d / "fleetnap.fact").write_text('{"p": "' + "x" * (5 * 1024 * 1024) + '"}'),
}

M1 = {"name": "fleetnap_x", "samples": [{"labels": {"host": "a"}, "value": 1}]}
TM = {"directory": "{in}", "name": "fleetnap_test", "metrics": [M1]}
TEXTFILE_METRICS = [
    ("directory relative", dict(TM, directory="m"), "option directory: must be an absolute path"),
    ("directory with ..", dict(TM, directory="{in}/.."), "option directory: '..' is not allowed"),
    ("directory with NUL", dict(TM, directory="{in}/\x00"), "option directory: a path cannot hold"),
    ("directory a file", dict(TM, directory="{in}/marker"), "option directory: {in}/marker is not a directory"),
    ("name with a slash", dict(TM, name="../evil"), "name '../evil': use letters, digits"),
    ("name empty", dict(TM, name=""), "name '': use letters, digits"),
    ("metrics not a list", dict(TM, metrics={"a": 1}), "argument 'metrics' is of type dict"),
    ("metric a string", dict(TM, metrics=["fleetnap_x 1"]), "Elements value for option 'metrics'"),
    ("metric name bad", dict(TM, metrics=[dict(M1, name="fleetnap x")]), "metric name 'fleetnap x' must match"),
    ("metric unknown key", dict(TM, metrics=[dict(M1, value=1)]), "metrics[0] (fleetnap_x) has unknown key(s) value"),
    ("metric type unknown", dict(TM, metrics=[dict(M1, type="histogram")]), "type must be one of gauge, counter"),
    ("counter without _total", dict(TM, metrics=[dict(M1, type="counter")]), "counter fleetnap_x must end in _total"),
    ("metric given twice", dict(TM, metrics=[M1, M1]), "metric fleetnap_x given twice"),
    ("samples not a list", dict(TM, metrics=[dict(M1, samples=5)]), "metric fleetnap_x: samples must be a list"),
    ("sample a string", dict(TM, metrics=[dict(M1, samples=["1"])]), "a sample must be an object"),
    ("sample value a word", dict(TM, metrics=[dict(M1, samples=[{"value": "high"}])]), "value 'high' is not a number"),
    ("sample without value", dict(TM, metrics=[dict(M1, samples=[{"labels": {}}])]), "value None is not a number"),
    ("labels a list", dict(TM, metrics=[dict(M1, samples=[{"labels": ["a"], "value": 1}])]), "labels must be an object"),
    ("label name bad", dict(TM, metrics=[dict(M1, samples=[{"labels": {"a b": "1"}, "value": 1}])]), "bad label name 'a b'"),
    ("rows a string", dict(TM, metrics=[{"name": "fleetnap_x", "rows": "abc", "row_value": "v"}]), "rows must be a list"),
    ("scale nan", dict(TM, metrics=[{"name": "fleetnap_x", "rows": [{"v": 1}], "row_value": "v", "scale": NAN}]),
     "scale must be a finite number"),
    ("twenty thousand metrics", dict(TM, metrics=[{"name": "fleetnap_m%d" % i} for i in range(20000)]),
     "option metrics: at most 10000 metrics"),
    ("output is a directory", TM, "fleetnap_fleetnap_test.prom is a directory"),
]
TEXTFILE_METRICS_PREP = {
    "directory a file": lambda d: (d / "marker").write_text("x"),
    "output is a directory": lambda d: (d / "fleetnap_fleetnap_test.prom").mkdir(),
}

# etf_qdisc runs in a network namespace of its own (etf_namespace below) holding fnq0, a veth
# with 4 TX queues, and fns0 with one: what it would do to an interface stays there, and
# the namespace's qdiscs and fleetnap's persistence directory are compared before and after.
EQ = {"device": "fnq0", "num_tc": 2, "priority_map": [0] * 3 + [1] * 13, "tc_queues": ["1@0", "3@1"],
      "persist": False}
ETF_QDISC = [
    ("device with a slash", dict(EQ, device="../fnq0"), "option device: must be an interface name"),
    ("device empty", dict(EQ, device=""), "option device: must be an interface name"),
    ("device dot dot", dict(EQ, device=".."), "option device: must be an interface name"),
    ("device 300 characters", dict(EQ, device="e" * 300), "option device: must be an interface name"),
    ("device with a space", dict(EQ, device="fnq0 root"), "option device: must be an interface name"),
    ("device missing", dict(EQ, device="fnnone0"), "device 'fnnone0' does not exist"),
    ("device missing, absent", {"device": "fnnone0", "state": "absent"}, "device 'fnnone0' does not exist"),
    ("num_tc 0", dict(EQ, num_tc=0), "option num_tc: must be >= 1 and <= 16, got 0"),
    ("num_tc a billion", dict(EQ, num_tc=10 ** 9), "option num_tc: must be >= 1 and <= 16"),
    ("handle negative", dict(EQ, handle=-1), "option handle: must be >= 1 and <= 65535"),
    ("handle huge", dict(EQ, handle=2 ** 40), "option handle: must be >= 1 and <= 65535"),
    ("priority_map 17 entries", dict(EQ, priority_map=[0] * 17), "option priority_map: at most 16 items"),
    ("priority_map 15 entries", dict(EQ, priority_map=[0] * 15), "priority_map must list 16 traffic classes"),
    ("priority_map class beyond num_tc", dict(EQ, priority_map=[2] * 16), "each 0..num_tc-1"),
    ("tc_queues garbage", dict(EQ, tc_queues=["all", "1@1"]), "option tc_queues[0]: must be COUNT@OFFSET"),
    ("tc_queues a billion queues", dict(EQ, tc_queues=["1@0", "1000000000@1"]),
     "option tc_queues[1]: must be COUNT@OFFSET"),
    ("tc_queues beyond the device", dict(EQ, tc_queues=["1@0", "4@1"]), "need 5 TX queues; fnq0 has 4"),
    ("tc_queues overlap", dict(EQ, tc_queues=["2@0", "2@1"]), "tc_queues 2@0, 2@1 overlap"),
    ("num_tc without the map", {"device": "fnq0", "num_tc": 2, "persist": False}, "go together"),
    ("etf_queues huge", dict(EQ, etf_queues=[10 ** 9]), "option etf_queues[0]: must be >= 0 and <= 4095"),
    ("etf_queues beyond the device", dict(EQ, etf_queues=[7]), "etf_queues [7] do not exist"),
    ("etf_priority negative", dict(EQ, etf_priority=-1), "option etf_priority: must be >= 0 and <= 15"),
    ("delta_ns negative", dict(EQ, delta_ns=-5), "option delta_ns: must be >= 0 and <= 1000000000"),
    ("delta_ns a year", dict(EQ, delta_ns=10 ** 17), "option delta_ns: must be >= 0 and <= 1000000000"),
    ("clockid unknown", dict(EQ, clockid="CLOCK_NOW"), "value of clockid must be one of"),
    ("offload yes", dict(EQ, offload="yes"), "value of offload must be one of"),
    ("offload on without a PHC", dict(EQ, offload="on"), "has no PTP hardware clock"),
    ("root etf on four queues", {"device": "fnq0", "root": "etf", "persist": False},
     "root etf times a single-queue device"),
    ("mqprio on one queue", {"device": "fns0", "persist": False}, "fns0 has 1 TX queue(s)"),
]

# wake_latency_probe disables idle states of the machine that runs it while cyclictest runs, so its
# cases run in check mode: a refusal comes before the check-mode answer, an input wrongly
# accepted answers ok (and fails the case) without touching the host. The host's idle-state
# disables and governor are compared before and after anyway.
# On a kernel without cpuidle states (a VM without a cpuidle driver) the module refuses to
# measure before it reads cpu, states or governor (no_driver: fail); there the cases ask for the
# idle-loop baseline (no_driver: idle_loop), whose checks of the same options they reach.
LIVE_CPUIDLE = Path("/sys/devices/system/cpu/cpu0/cpuidle/state0").exists()
WP = {"cpu": 0, "loops": 10} if LIVE_CPUIDLE else {"cpu": 0, "loops": 10, "no_driver": "idle_loop"}
WAKE_LATENCY_PROBE = [
    ("cpu negative", dict(WP, cpu=-1), "option cpu: must be >= 0 and <= 8191, got -1"),
    ("cpu a million", dict(WP, cpu=10 ** 6), "option cpu: must be >= 0 and <= 8191"),
    ("cpu not on this host", dict(WP, cpu=8000), "CPU 8000 is not an online CPU with cpuidle states"
     if LIVE_CPUIDLE else "CPU 8000 is not online on this host"),
    ("loops 0", dict(WP, loops=0), "option loops: must be >= 1"),
    ("loops a billion", dict(WP, loops=10 ** 9), "option loops: must be >= 1 and <= 10000000"),
    ("interval_us 0", dict(WP, interval_us=0), "option interval_us: must be >= 50"),
    ("interval_us an hour", dict(WP, interval_us=3600 * 10 ** 6), "option interval_us: must be >= 50 and <= 1000000"),
    ("run over an hour", dict(WP, loops=10 ** 7, interval_us=1000), "are 10000 s per state; at most 3600 s"),
    ("priority negative", dict(WP, priority=-1), "option priority: must be >= 0 and <= 99"),
    ("priority 100", dict(WP, priority=100), "option priority: must be >= 0 and <= 99"),
    ("histogram_bin_us nan", dict(WP, histogram_bin_us=NAN), "option histogram_bin_us: must be a finite number"),
    ("histogram_bin_us 0", dict(WP, histogram_bin_us=0), "option histogram_bin_us: must be > 0"),
    ("settle_s nan", dict(WP, settle_s=NAN), "option settle_s: must be a finite number"),
    ("settle_s inf", dict(WP, settle_s=INF), "option settle_s: must be a finite number"),
    ("settle_s negative", dict(WP, settle_s=-1), "option settle_s: must be >= 0 and <= 60"),
    ("states with a slash", dict(WP, states=["../C1"]), "option states[0]: must be a C-state name"),
    ("states name too long", dict(WP, states=["C" * 16]), "option states[0]: must be a C-state name"),
    ("states a hundred", dict(WP, states=["C%d" % i for i in range(100)]), "option states: at most 64 items"),
    ("states unknown", dict(WP, states=["C99"]), "states: unknown C-state(s) C99"
     if LIVE_CPUIDLE else "states: C99 requested, but this host has no cpuidle driver"),
    ("governor with a slash", dict(WP, governor="../x"), "option governor: must be auto, keep or a cpuidle"),
    ("governor not available", dict(WP, governor="nosuch"), "governor: 'nosuch' is not available"),
    ("limit_cpus unknown", dict(WP, limit_cpus="some"), "value of limit_cpus must be one of"),
    ("unknown option", dict(WP, cpus=[0]), "Unsupported parameters"),
]

FACTS = "root/etc/ansible/facts.d/fleetnap.fact"     # measurements_file is read under sysfs_root
FP = dict(R, cstates={"max_latency_us": 50}, sleep={"resume_budget_ms": 3000})
FLEETNAP_PROFILE = [
    ("sysfs_root relative", dict(FP, sysfs_root="root"), "option sysfs_root: must be an absolute path"),
    ("sysfs_root with ..", dict(FP, sysfs_root="{in}/root/.."), "option sysfs_root: '..' is not allowed"),
    ("metrics_dir relative", dict(FP, metrics_dir="m"), "option metrics_dir: must be an absolute path"),
    ("metrics_dir a file", dict(FP, metrics_dir="{in}/root/proc/cmdline"), "exists and is not a directory"),
    ("measurements_file relative", dict(FP, measurements_file="f.fact"), "option measurements_file: must be an absolute"),
    ("measurements not UTF-8", FP, "fleetnap.fact is not UTF-8 text"),
    ("measurements not JSON", FP, "does not hold a JSON object"),
    ("measurements a list", FP, "does not hold a JSON object"),
    ("measurements resume a list", FP, "'resume' must be an object"),
    ("measured resume NaN in the file", FP, "fleetnap.fact holds NaN, which is not a JSON number"),
    ("measured resume a word", FP, "resume.end_to_end_ms must be a number of milliseconds"),
    ("sleep states a FIFO", FP, "sys/power/state is a FIFO, not a regular file: fleetnap does not open it"),
    ("mem_sleep a word twice", dict(FP, metrics_dir="{in}/metrics"),
     "sys/power/mem_sleep holds 's2idle', not the kernel's list of sleep states"),
    ("mem_sleep not UTF-8", FP, "sys/power/mem_sleep is not UTF-8 text"),
    ("cstates max nan", dict(FP, cstates={"max_latency_us": NAN}), "max_latency_us must be a finite number >= 0"),
    ("cstates max negative", dict(FP, cstates={"max_latency_us": -1}), "max_latency_us must be >= 0 microseconds"),
    ("cstates unknown key", dict(FP, cstates={"max_latency": 50}), "Unsupported parameters"),
    ("cstates cpus a billion", dict(FP, cstates={"max_latency_us": 50, "cpus": "0-999999999"}), "beyond the largest"),
    ("sleep budget nan", dict(FP, sleep={"resume_budget_ms": NAN}), "sleep.resume_budget_ms must be a finite number"),
    ("sleep budget inf", dict(FP, sleep={"resume_budget_ms": INF}), "sleep.resume_budget_ms must be a finite number"),
    ("sleep budget negative", dict(FP, sleep={"resume_budget_ms": -1}), "sleep.resume_budget_ms must be >= 0"),
    ("sleep measured a word", dict(FP, sleep={"resume_measured_ms": "slow"}), "sleep.resume_measured_ms must be a number"),
    ("sleep unknown key", dict(FP, sleep={"budget": 5}), "Unsupported parameters"),
    ("advice utilization missing", dict(FP, sleep={"advice": {"utilization_percentile": 90}}),
     "missing required arguments: utilization"),
    ("advice utilization 1.5", dict(FP, sleep={"advice": {"utilization": 1.5}}),
     "sleep.advice.utilization 1.5 is outside [0, 1)"),
    ("advice utilization a word", dict(FP, sleep={"advice": {"utilization": "busy"}}),
     "sleep.advice.utilization"),
    ("advice sample not a number", dict(FP, sleep={"advice": {"utilization": "[0.1, \"x\"]"}}),
     "sleep.advice.utilization[1]"),
    ("advice samples broken JSON", dict(FP, sleep={"advice": {"utilization": "[0.1,"}}),
     "sleep.advice.utilization '[0.1,' is neither a number nor a list of numbers"),
    ("advice too many samples", dict(FP, sleep={"advice": {"utilization": [0.1] * 100001}}),
     "sleep.advice.utilization: at most 100000 samples"),
    ("advice no samples", dict(FP, sleep={"advice": {"utilization": []}}), "utilization is an empty list"),
    ("advice percentile 0", dict(FP, sleep={"advice": {"utilization": [0.1], "utilization_percentile": 0}}),
     "option sleep.advice.utilization_percentile: must be > 0"),
    ("advice objective below 1", dict(FP, sleep={"advice": {"utilization": 0.1, "response_time_objective": 0.5}}),
     "option sleep.advice.response_time_objective: must be >= 1"),
    ("advice service time nan", dict(FP, sleep={"advice": {"utilization": 0.1, "service_time_s": NAN}}),
     "option sleep.advice.service_time_s: must be a finite number"),
    ("advice cv huge", dict(FP, sleep={"advice": {"utilization": 0.1, "service_time_cv": 1e9}}),
     "option sleep.advice.service_time_cv: must be >= 0 and <= 100, got 1000000000"),
    ("pm_qos and a value", dict(FP, cstates={"max_latency_us": 20, "pm_qos": True, "resume_latency_us": 5}),
     "cstates.resume_latency_us and cstates.pm_qos both given"),
    ("global_latency and a value", dict(FP, cstates={"max_latency_us": 20, "global_latency": True,
                                                     "global_latency_us": 5}),
     "cstates.global_latency_us and cstates.global_latency both given"),
    ("pm_qos budget below 1 us", dict(FP, cstates={"max_latency_us": 0.5, "pm_qos": True}),
     "cstates.pm_qos needs cstates.max_latency_us of at least 1 microsecond"),
    ("pm_qos budget beyond PM QoS", dict(FP, cstates={"max_latency_us": 3e9, "pm_qos": True}),
     "max_latency_us must be"),
    ("advice unknown key", dict(FP, sleep={"advice": {"utilization": 0.1, "rho": 0.1}}), "Unsupported parameters"),
    ("state unknown", dict(FP, state="half"), "value of state must be one of"),
    ("state name not UTF-8", FP, "cpu0/cpuidle/state1/name is not UTF-8 text"),
]


def facts(text):
    def prep(d):
        machine(d)
        target = d / FACTS
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.write_bytes if isinstance(text, bytes) else target.write_text)(text)
    return prep


FLEETNAP_PROFILE_PREP = {c: machine for c, _a, _w in FLEETNAP_PROFILE}
FLEETNAP_PROFILE_PREP.update({
    "sleep states a FIFO": lambda d: (machine(d), (d / "root/sys/power/state").unlink(),
                                      os.mkfifo(d / "root/sys/power/state")),
    "mem_sleep not UTF-8": bad_bytes("sys/power/mem_sleep", b"s2idle [de\xffep]\n"),
    "mem_sleep a word twice": bad_bytes("sys/power/mem_sleep", b"s2idle s2idle [deep]\n"),
    "measurements not UTF-8": facts(b'{"a": "\xff"}'),
    "measurements not JSON": facts("{"),
    "measurements a list": facts("[]"),
    "measurements resume a list": facts('{"resume": [1]}'),
    "measured resume NaN in the file": facts('{"resume": {"end_to_end_ms": NaN}}'),
    "measured resume a word": facts('{"resume": {"end_to_end_ms": "slow"}}'),
    "state name not UTF-8": bad_bytes("sys/devices/system/cpu/cpu0/cpuidle/state1/name"),
})

# The profile's CPU frequency part (issue 38): lnl0's cpufreq, EPB and uncore beside its cpuidle.
POL = "root/sys/devices/system/cpu/cpufreq/policy0/"
CF = dict(R, sleep={"manage": False})


def pmachine(d):
    machine(d)
    materialize("lnl0", d / "root", data=PSTATE_DATA)


def pfile(rel, data):
    def prep(d):
        pmachine(d)
        target = d / rel
        if target.exists():
            target.unlink()
        if data is None:
            os.mkfifo(str(target))
        else:
            target.write_bytes(data)
    return prep


def precord(text):
    def prep(d):
        pmachine(d)
        target = d / "root/var/lib/fleetnap/pstate.orig.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return prep


def no_cpufreq(d):
    pmachine(d)
    shutil.rmtree(d / "root/sys/devices/system/cpu/cpufreq")


GOV = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"
FLEETNAP_PROFILE_CPUFREQ = [
    ("cpufreq unknown key", dict(CF, cpufreq={"frequency": 5}), "Unsupported parameters"),
    ("governor not offered", dict(CF, cpufreq={"governor": "ondemand"}),
     "cpufreq: governor: intel_pstate offers performance, powersave, not ondemand; nothing was changed"),
    ("governor not a name", dict(CF, cpufreq={"governor": "Perf mode"}),
     "cpufreq.governor: 'Perf mode' is not a governor's name"),
    ("min_khz negative", dict(CF, cpufreq={"min_khz": -5}), "cpufreq.min_khz: -5 kHz is not in 1..100000000"),
    ("min_khz a fraction", dict(CF, cpufreq={"min_khz": 1.5e6}), "cpufreq.min_khz: give kHz as a whole number"),
    ("min_khz a terahertz", dict(CF, cpufreq={"min_khz": 10 ** 12}), "cpufreq.min_khz: 1000000000000 kHz is not in"),
    ("min_khz a word", dict(CF, cpufreq={"min_khz": "fast"}), "cpufreq.min_khz: 'fast' is not kHz, min, max, base"),
    ("max_khz 150%", dict(CF, cpufreq={"max_khz": "150%"}), "cpufreq.max_khz: '150%' is not kHz"),
    ("max_khz NaN", dict(CF, cpufreq={"max_khz": "{{ 'nan' | float }}"}), "cpufreq.max_khz: give kHz as a whole"),
    ("max_khz beyond the CPU", dict(CF, cpufreq={"max_khz": 9900000}),
     "max_khz: 9900000 kHz is outside what the CPUs allow, 400000..4500000 kHz"),
    ("min above max", dict(CF, cpufreq={"min_khz": "max", "max_khz": "min"}),
     "the minimum 4500000 kHz would be above the maximum 400000 kHz"),
    ("turbo a word", dict(CF, cpufreq={"turbo": "maybe"}), "argument 'turbo' is of type str found in 'cpufreq'"),
    ("epp not offered", dict(CF, cpufreq={"epp": "eco"}), "epp: intel_pstate offers default, performance"),
    ("epp 256", dict(CF, cpufreq={"epp": 256}), "cpufreq.epp: give a preference's name or a number 0..255"),
    ("epp under the performance governor", dict(CF, cpufreq={"governor": "performance", "epp": "power"}),
     "epp: under the performance governor intel_pstate takes only performance (0), not power"),
    ("epb 16", dict(CF, cpufreq={"epb": 16}), "cpufreq.epb: give 0..15 or one of performance"),
    ("epb true", dict(CF, cpufreq={"epb": True}), "cpufreq.epb: give 0..15"),
    ("uncore base", dict(CF, cpufreq={"uncore_min_khz": "base"}), "cpufreq.uncore_min_khz: the uncore has no base"),
    ("uncore beyond its range", dict(CF, cpufreq={"uncore_max_khz": 9000000}),
     "uncore_max_khz: 9000000 kHz is outside what the uncore allows, 400000..4000000 kHz"),
    ("epp without cpufreq", dict(CF, cpufreq={"epp": "power"}), "epp: this host has no cpufreq driver"),
    ("elc on a legacy uncore", dict(CF, cpufreq={"elc_low_percent": 10}),
     "elc_low_percent: this host's uncore has no efficiency latency control"),
    ("elc threshold 150", dict(CF, cpufreq={"elc_high_percent": 150}), "cpufreq.elc_high_percent: give a whole percentage"),
    ("scaling_governor a FIFO", dict(CF, cpufreq={"epp": "power"}), "policy0/scaling_governor"),
    ("scaling_max_freq a word", dict(CF, cpufreq={"epp": "power"}), "policy0/scaling_max_freq: 'fast' is not a whole"),
    ("energy_perf_bias not UTF-8", dict(CF, cpufreq={"epb": 4}),
     "cpu3/power/energy_perf_bias is not UTF-8 text (byte 0); nothing was changed"),
    ("record not JSON", dict(CF, state="absent"), "pstate.orig.json"),
    ("record names another file", dict(CF, state="absent"),
     "'/etc/shadow' is not a CPU frequency file fleetnap writes"),
    ("record value with a newline", dict(CF, state="absent"), "must be a number or a name as sysfs shows it"),
    ("record corrupt beside a profile", dict(CF, cpufreq={"epp": "power"}), "version must be 1"),
]
# One table with the profile's other cases (one ansible-playbook run), each case its own machine.
FLEETNAP_PROFILE += FLEETNAP_PROFILE_CPUFREQ
FLEETNAP_PROFILE_PREP.update({c: pmachine for c, _a, _w in FLEETNAP_PROFILE_CPUFREQ})
FLEETNAP_PROFILE_PREP.update({
    "epp without cpufreq": no_cpufreq,
    "scaling_governor a FIFO": pfile(POL + "scaling_governor", None),
    "scaling_max_freq a word": pfile(POL + "scaling_max_freq", b"fast\n"),
    "energy_perf_bias not UTF-8": pfile("root/sys/devices/system/cpu/cpu3/power/energy_perf_bias", b"\xff\n"),
    "record not JSON": precord("{"),
    "record names another file": precord('{"version": 1, "values": {"/etc/shadow": "x"}}'),
    "record value with a newline": precord(json.dumps({"version": 1, "values": {GOV: "performance\nX"}})),
    "record corrupt beside a profile": precord('{"version": 7, "values": {}}'),
})

TABLES = {
    "cpuidle_qos": CPUIDLE_QOS,
    "sleep_policy": SLEEP_POLICY,
    "fleetnap_fact": FLEETNAP_FACT,
    "textfile_metrics": TEXTFILE_METRICS,
    "fleetnap_profile": FLEETNAP_PROFILE,
    "etf_qdisc": ETF_QDISC,
    "wake_latency_probe": WAKE_LATENCY_PROBE,
}
PREPARE = {
    "cpuidle_qos": CPUIDLE_QOS_PREP,
    "sleep_policy": SLEEP_POLICY_PREP,
    "fleetnap_fact": FLEETNAP_FACT_PREP,
    "textfile_metrics": TEXTFILE_METRICS_PREP,
    "fleetnap_profile": FLEETNAP_PROFILE_PREP,
}
CASES = case_params(TABLES)

# The cases that get past the options need this host's cpuidle (a machine without a driver
# refuses them all with the same message, which is right there too).
NO_CPUIDLE = "no cpuidle driver or no idle states"
if not glob.glob("/sys/devices/system/cpu/cpu0/cpuidle/state0"):
    WAKE_LATENCY_PROBE[:] = [(c, a, NO_CPUIDLE if not w.startswith("option") and "value of" not in w
                              and "Unsupported" not in w else w) for c, a, w in WAKE_LATENCY_PROBE]


def idle_state():
    """The host's idle-state disables and cpuidle governor (what a probe changes while it runs)."""
    out = {}
    for f in sorted(glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable")
                    + glob.glob("/sys/devices/system/cpu/cpuidle/current_governor")):
        out[f] = Path(f).read_text()
    return out


ETF_PERSIST = ("/etc/fleetnap/etf", "/etc/systemd/system")


@contextlib.contextmanager
def etf_namespace():
    """A network namespace with fnq0 (a veth with 4 TX queues) and fns0 (with 1)."""
    ns = "fnbad%d" % os.getpid()
    ip = shutil.which("ip")
    subprocess.run([ip, "netns", "add", ns], check=True)
    try:
        for dev, queues in (("fnq0", 4), ("fns0", 1)):
            subprocess.run([ip, "-n", ns, "link", "add", dev, "numtxqueues", str(queues), "type", "veth",
                            "peer", "name", dev + "p"], check=True)
            subprocess.run([ip, "-n", ns, "link", "set", dev, "up"], check=True)
        yield ns
    finally:
        subprocess.run([ip, "netns", "del", ns], check=False)


def etf_state(ns):
    def state():
        qd = subprocess.run([shutil.which("ip"), "netns", "exec", ns, shutil.which("tc"), "-j", "qdisc", "show"],
                            capture_output=True, text=True, check=True).stdout
        kept = sorted(str(p) for d in ETF_PERSIST for p in Path(d).glob("**/*") if "etf" in p.name) \
            if Path("/etc/systemd/system").exists() else []
        return qd, kept
    return state


def table_run(module, tmp_path_factory):
    prepare = PREPARE.get(module, {})
    if module == "etf_qdisc":
        if not shutil.which("tc") or not shutil.which("ip"):
            pytest.skip("needs iproute2 (ip, tc)")
        with etf_namespace() as ns:
            return run_prepared(module, TABLES[module], prepare, tmp_path_factory,
                                wrap=(shutil.which("ip"), "netns", "exec", ns), state=etf_state(ns))
    if module == "wake_latency_probe":
        return run_prepared(module, TABLES[module], prepare, tmp_path_factory,
                            task_extra={"check_mode": True}, state=idle_state)
    return run_prepared(module, TABLES[module], prepare, tmp_path_factory)


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    assert_refused_prepared(table_run(module, tmp_path_factory), index, words)


def unreadable_host(d):
    """A captured machine whose first CPU's first idle-state name and fleetnap's measurements file
    are FIFOs: a module that reads them refuses the host, naming the FIFO. A case refused for its
    own input before the host is read names the input instead."""
    machine(d)
    name = d / "root/sys/devices/system/cpu/cpu0/cpuidle/state1/name"
    name.unlink()
    os.mkfifo(name)
    (d / FACTS).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(d / FACTS)


# The gate's inputs that need no host, for cpuidle_qos and fleetnap_profile (its cstates): each is
# refused before sysfs or the measurements file is read (they used to be checked only after).
GATE_FIRST = [
    ("budget negative", {"max_latency_us": -1}, "max_latency_us must be >= 0 microseconds"),
    ("budget nan", {"max_latency_us": NAN}, "max_latency_us must be a finite number >= 0, got nan"),
    ("budget over PM QoS", {"max_latency_us": 3.6e12}, "max_latency_us must be <= 2000000000 microseconds"),
    ("margin below 1", {"max_latency_us": 50, "declared_latency_margin": 0.5}, "declared_latency_margin must be >= 1"),
    ("combine unknown", {"max_latency_us": 50, "combine": "best"}, "combine"),
    ("measured a word", {"max_latency_us": 50, "measured_latency_us": {"C1E": "fast"}},
     "measured latency of C1E must be a number"),
    ("disabled and enabled", {"max_latency_us": 50, "disable": ["C6"], "enable": ["C6"]},
     "state(s) C6 are listed in both disable and enable"),
    ("POLL disabled", {"max_latency_us": 50, "disable": ["POLL"]}, "POLL cannot be disabled"),
    ("cpus garbage", {"max_latency_us": 50, "cpus": "banana"}, "bad CPU number 'banana'"),
    ("resume latency negative", {"max_latency_us": 50, "resume_latency_us": -3},
     "resume_latency_us must be >= 0 microseconds"),
    ("global latency huge", {"max_latency_us": 50, "global_latency_us": 10 ** 12},
     "global_latency_us must be <= 2000000000"),
]
GATE_FIRST_TABLES = {
    "cpuidle_qos": [(c, dict(R, **a), w) for c, a, w in GATE_FIRST],
    "fleetnap_profile": [(c, dict(R, cstates=a, sleep={"manage": False}), w) for c, a, w in GATE_FIRST] + [
        # the CPU frequency part's and the advice's inputs that need no host, refused as early
        (case, dict(R, cstates={"max_latency_us": 50}, **args), words) for case, args, words in [
            ("cpufreq min above max", {"cpufreq": {"min_khz": 3000000, "max_khz": 1000000}},
             "cpufreq.min_khz, max_khz: the minimum 3000000 kHz would be above the maximum 1000000 kHz"),
            ("uncore min above max", {"cpufreq": {"uncore_min_khz": 2000000, "uncore_max_khz": 800000}},
             "cpufreq.uncore_min_khz, uncore_max_khz: the minimum 2000000 kHz would be above the maximum"),
            ("uncore kHz off the steps", {"cpufreq": {"uncore_max_khz": 1950000}},
             "cpufreq.uncore_max_khz: 1950000 kHz is not a multiple of 100000"),
            ("elc floor off the steps", {"cpufreq": {"elc_floor_khz": 850000}},
             "cpufreq.elc_floor_khz: 850000 kHz is not a multiple of 100000"),
            ("elc low above high", {"cpufreq": {"elc_low_percent": 90, "elc_high_percent": 20}},
             "cpufreq.elc_low_percent, elc_high_percent: the low threshold 90 % would be above the high one 20 %"),
            ("advice with a resume of days", {"sleep": {"resume_measured_ms": 5000000, "advice": {"utilization": 0.1}}},
             "sleep.resume_measured_ms 5000000 is over an hour"),
        ]],
}


@pytest.mark.parametrize("module,index,words", case_params(GATE_FIRST_TABLES))
def test_the_gates_inputs_are_refused_before_the_host_is_read(tmp_path_factory, module, index, words):
    """Each case's host has FIFOs where the gate's first read goes (sysfs, the measurements file):
    the refusal names the input, so nothing of the host was read before it."""
    table = GATE_FIRST_TABLES[module]
    run = run_prepared(module, table, dict((c, unreadable_host) for c, _a, _w in table), tmp_path_factory,
                       key="gate-first-" + module)
    assert "FIFO" not in str(run["cases"][index]["result"].get("msg"))
    assert_refused_prepared(run, index, words)


def test_every_table_has_at_least_15_cases():
    for module, table in TABLES.items():
        assert len(table) >= 15, "%s: %d cases" % (module, len(table))
