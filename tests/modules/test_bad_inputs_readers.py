"""Bad input and faults for the modules that read, report and plan (issue 16): refused with a
message naming what is wrong, never a traceback, never a hang, nothing changed.

The runner is tests/badinput.py (one ansible-playbook per table, a pytest test per case). Many
cases here need a prepared file (a load history that is not UTF-8, a corrupt state.json, an
artifact of the wrong shape, a sysfs tree with a bad attribute): ``{in}`` in a case's arguments is
replaced by a directory of the case's own, filled by ``PREPARE[(module, case)]`` before the table
runs and hashed before and after it, like ``{tmp}``. Nothing here touches this machine: every
sysfs_root is a prepared tree, Wake-on-LAN packets could only go to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from badinput import INF, NAN, assert_refused_prepared, case_params, run_prepared
from conftest import materialize

CAP = {"server_read_iops": 100, "server_write_iops": 50, "server_read_mbps": 10, "server_write_mbps": 5}
HEAD = "timestamp,read_iops,write_iops,read_mbps,write_mbps\n"


# --- per-case preparation --------------------------------------------------------------------

def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def csv_day():
    rows = ["2024-01-01T%02d:30:00Z,100,10,5,1" % h for h in range(24)]
    return HEAD + "\n".join(rows) + "\n"


def cpu_tree(d, edit=None):
    materialize("lnl0", d / "root")
    if edit:
        edit(d / "root" / "sys/devices/system/cpu")
    return d


def power_tree(d, print_times=b"0\n", debug_messages=b"0\n"):
    _write(d / "root/sys/power/state", "freeze mem disk\n")
    _write(d / "root/sys/power/pm_print_times", print_times)
    _write(d / "root/sys/power/pm_debug_messages", debug_messages)


def artifact(rel, data):
    return lambda d: _write(d / "art" / rel, data if isinstance(data, bytes) else
                            (data if isinstance(data, str) else json.dumps(data)))


def state_file(data):
    return lambda d: _write(d / "state.json", data if isinstance(data, (bytes, str)) else json.dumps(data))


# --- wake_on_lan: sends nothing in any case (127.0.0.1 if a check stopped working) ------------

W = {"macs": ["52:54:00:12:34:56"], "broadcast": "127.0.0.1", "port": 9}
WAKE_ON_LAN = [
    ("mac not hex", dict(W, macs=["zz:54:00:12:34:56"]), "is not valid"),
    ("mac five bytes", dict(W, macs=["52:54:00:12:34"]), "is not valid"),
    ("mac seven bytes", dict(W, macs=["52:54:00:12:34:56:78"]), "is not valid"),
    ("mac broadcast", dict(W, macs=["ff:ff:ff:ff:ff:ff"]), "broadcast or null"),
    ("mac null", dict(W, macs=["00:00:00:00:00:00"]), "broadcast or null"),
    ("mac multicast", dict(W, macs=["01:00:5e:00:00:01"]), "multicast"),
    ("mac with NUL", dict(W, macs=["52:54:00:12:34:56\x00"]), "is not valid"),
    ("one good one bad", dict(W, macs=["52:54:00:12:34:56", "nonsense"]), "is not valid"),
    ("macs empty", dict(W, macs=[]), "macs is empty"),
    ("ten thousand macs", dict(W, macs=["52:54:00:%02x:%02x:%02x" % (i >> 16, (i >> 8) & 255, i & 255)
                                        for i in range(10000)]), "option macs: at most 4096"),
    ("port 0", dict(W, port=0), "option port: must be >= 1 and <= 65535"),
    ("port 70000", dict(W, port=70000), "option port: must be >= 1 and <= 65535"),
    ("port negative", dict(W, port=-9), "option port: must be >= 1"),
    ("repeat 0", dict(W, repeat=0), "option repeat: must be >= 1 and <= 100"),
    ("repeat a billion", dict(W, repeat=10 ** 9), "option repeat: must be >= 1 and <= 100"),
    ("interval nan", dict(W, interval=NAN), "option interval: must be a finite number"),
    ("interval inf", dict(W, interval=INF), "option interval: must be a finite number"),
    ("interval negative", dict(W, interval=-0.5), "option interval: must be >= 0"),
    ("interval an hour", dict(W, interval=3600), "option interval: must be >= 0 and <= 10"),
    ("broadcast empty", dict(W, broadcast=""), "option broadcast: must be an IPv4 or IPv6 address or a host name"),
    ("broadcast with a space", dict(W, broadcast="10.0.0.255 x"), "option broadcast: must be an IPv4"),
    ("broadcast with NUL", dict(W, broadcast="127.0.0.1\x00"), "option broadcast: must be an IPv4"),
    ("broadcast 300 characters", dict(W, broadcast="a" * 300), "option broadcast: must be an IPv4"),
    ("password not hex", dict(W, password="not-a-password"), "SecureOn password is not valid"),
    ("password five bytes", dict(W, password="0011223344"), "SecureOn password is not valid"),
    ("password dotted 300", dict(W, password="300.1.2.3"), "SecureOn password is not valid"),
]

# --- cpuidle_info: read-only, every sysfs_root a prepared tree ----------------------------------

CPUIDLE_INFO = [
    ("sysfs_root relative", {"sysfs_root": "sys-tree"}, "option sysfs_root: must be an absolute path"),
    ("sysfs_root with ..", {"sysfs_root": "{tmp}/../../"}, "option sysfs_root: '..' is not allowed"),
    ("sysfs_root with NUL", {"sysfs_root": "{tmp}/\x00x"}, "option sysfs_root: a path cannot hold a NUL"),
    ("sysfs_root missing", {"sysfs_root": "{tmp}/nope"}, "option sysfs_root: {tmp}/nope is not a directory"),
    ("sysfs_root a file", {"sysfs_root": "{tmp}/marker"}, "is not a directory"),
    ("sysfs_root empty tree", {"sysfs_root": "{tmp}"}, "does not exist: is sysfs mounted"),
    ("per_cpu not a bool", {"sysfs_root": "{in}/root", "per_cpu": "maybe"}, "per_cpu"),
    ("unknown option", {"sysfs_root": "{in}/root", "cpus": "all"}, "Unsupported parameters"),
    ("state name not UTF-8", {"sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("online list garbage", {"sysfs_root": "{in}/root"}, "cannot parse the CPU list"),
    ("online list not UTF-8", {"sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("present list huge range", {"sysfs_root": "{in}/root"}, "cannot parse the CPU list"),
    ("governor not UTF-8", {"sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("latency not UTF-8", {"sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("sysfs_root a symlink loop", {"sysfs_root": "{in}/loop"}, "is not a directory"),
    ("sysfs_root 5000 characters", {"sysfs_root": "/" + "a" * 5000}, "longer than PATH_MAX"),
]

# --- cstate_residency: the output directory is checked before anything is read or written ------

CSTATE_RESIDENCY = [
    ("directory relative", {"directory": "textfile", "sysfs_root": "{in}/root"}, "option directory: must be an absolute"),
    ("directory with ..", {"directory": "{tmp}/../x", "sysfs_root": "{in}/root"}, "option directory: '..' is not allowed"),
    ("directory with NUL", {"directory": "{tmp}/\x00", "sysfs_root": "{in}/root"}, "option directory: a path cannot hold"),
    ("directory missing", {"directory": "{tmp}/nope", "sysfs_root": "{in}/root"}, "option directory: {tmp}/nope is not a directory"),
    ("directory a file", {"directory": "{tmp}/marker", "sysfs_root": "{in}/root"}, "is not a directory"),
    ("directory 5000 characters", {"directory": "/" + "d" * 5000, "sysfs_root": "{in}/root"}, "longer than PATH_MAX"),
    ("sysfs_root relative", {"directory": "{tmp}", "sysfs_root": "sys"}, "option sysfs_root: must be an absolute"),
    ("sysfs_root with ..", {"directory": "{tmp}", "sysfs_root": "{tmp}/.."}, "option sysfs_root: '..' is not allowed"),
    ("sysfs_root missing", {"directory": "{tmp}", "sysfs_root": "{tmp}/nope"}, "is not a directory"),
    ("sysfs_root empty tree", {"directory": "{tmp}", "sysfs_root": "{tmp}"}, "does not exist: is sysfs mounted"),
    ("state name not UTF-8", {"directory": "{tmp}", "sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("online list garbage", {"directory": "{tmp}", "sysfs_root": "{in}/root"}, "cannot parse the CPU list"),
    ("usage not UTF-8", {"directory": "{tmp}", "sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("desc not UTF-8", {"directory": "{tmp}", "sysfs_root": "{in}/root"}, "is not UTF-8 text"),
    ("state name of 2000 characters", {"directory": "{tmp}", "sysfs_root": "{in}/root"},
     "cpu0/cpuidle/state1/name holds a name of 2000 characters: the kernel's are at most 15"),
    ("unknown option", {"directory": "{tmp}", "sysfs_root": "{in}/root", "cpus": "0"}, "Unsupported parameters"),
    ("output name is a directory", {"directory": "{in}/out", "sysfs_root": "{in}/root"}, "is a directory"),
]

# --- pm_debug: every tree prepared, nothing written on a refusal --------------------------------

PD = {"pm_print_times": True, "sysfs_root": "{in}/root"}
PM_DEBUG = [
    ("sysfs_root relative", dict(PD, sysfs_root="root"), "option sysfs_root: must be an absolute path"),
    ("sysfs_root with ..", dict(PD, sysfs_root="{in}/root/.."), "option sysfs_root: '..' is not allowed"),
    ("sysfs_root with NUL", dict(PD, sysfs_root="{in}/\x00"), "option sysfs_root: a path cannot hold"),
    ("sysfs_root missing", dict(PD, sysfs_root="{tmp}/nope"), "option sysfs_root: {tmp}/nope is not a directory"),
    ("sysfs_root a file", dict(PD, sysfs_root="{tmp}/marker"), "is not a directory"),
    ("no knob given", {"sysfs_root": "{in}/root"}, "one of the following is required"),
    ("knob not a bool", dict(PD, pm_print_times="perhaps"), "pm_print_times"),
    ("knob missing", dict(PD, sysfs_root="{tmp}"), "does not exist: this kernel was built without"),
    ("knob not UTF-8", dict(PD), "is not UTF-8 text"),
    ("other knob not UTF-8", dict(PD), "is not UTF-8 text"),
    ("knob holds garbage", dict(PD), "holds 'yes please', not 0 or 1"),
    ("knob holds 2", dict(PD), "holds '2', not 0 or 1"),
    ("knob empty", dict(PD), "holds '', not 0 or 1"),
    ("knob read-only", dict(PD, pm_debug_messages=True), "read-only"),
    ("knob a directory", dict(PD), "is a directory"),
    ("unknown option", dict(PD, pm_trace=True), "Unsupported parameters"),
]

# --- pm_timeline: saved logs prepared per case; html_dest checked before the log is parsed -------

LOG = "[  100.000000] PM: suspend entry (deep)\n"
PM_TIMELINE = [
    ("src relative", {"src": "dmesg.txt"}, "option src: must be an absolute path"),
    ("src with ..", {"src": "{tmp}/../dmesg.txt"}, "option src: '..' is not allowed"),
    ("src missing", {"src": "{tmp}/nope.txt"}, "does not exist or is not a file"),
    ("src a directory", {"src": "{tmp}"}, "does not exist or is not a file"),
    ("src not UTF-8", {"src": "{in}/dmesg.txt"}, "is not UTF-8 text"),
    ("src empty", {"src": "{in}/dmesg.txt"}, "no kernel log lines with a timestamp"),
    ("src binary", {"src": "{in}/dmesg.txt"}, "is not UTF-8 text"),
    ("src cut in the suspend", {"src": "{in}/dmesg.txt"}, "the log ends in the"),
    ("since nan", {"src": "{in}/dmesg.txt", "since": NAN}, "option since: must be a finite number"),
    ("since inf", {"src": "{in}/dmesg.txt", "since": INF}, "option since: must be a finite number"),
    ("since negative", {"src": "{in}/dmesg.txt", "since": -1}, "option since: must be >= 0"),
    ("top negative", {"src": "{in}/dmesg.txt", "top": -1}, "option top: must be >= 0 and <= 10000"),
    ("top a billion", {"src": "{in}/dmesg.txt", "top": 10 ** 9}, "option top: must be >= 0 and <= 10000"),
    ("min_saving_ms nan", {"src": "{in}/dmesg.txt", "min_saving_ms": NAN}, "option min_saving_ms: must be a finite"),
    ("min_saving_ms inf", {"src": "{in}/dmesg.txt", "min_saving_ms": INF}, "option min_saving_ms: must be a finite"),
    ("html_dest relative", {"src": "{in}/dmesg.txt", "html_dest": "t.html"}, "option html_dest: must be an absolute"),
    ("html_dest with ..", {"src": "{in}/dmesg.txt", "html_dest": "{tmp}/../t.html"}, "option html_dest: '..' is not"),
    ("html_dest a directory", {"src": "{in}/dmesg.txt", "html_dest": "{tmp}"}, "is a directory"),
    ("html_dest in a missing directory", {"src": "{in}/dmesg.txt", "html_dest": "{tmp}/no/t.html"}, "does not exist"),
    ("title with control characters", {"src": "{in}/dmesg.txt", "title": "a\x1b[2Jb"}, "option title: control"),
    ("cycle unknown", {"src": "{in}/dmesg.txt", "cycle": "first"}, "cycle"),
]

# --- powernap_advice: pure computation plus an optional SVG -------------------------------------

PA = {"transition_latency_s": 0.01, "utilization": 0.2}
POWERNAP_ADVICE = [
    ("transition nan", dict(PA, transition_latency_s=NAN), "option transition_latency_s: must be a finite"),
    ("transition inf", dict(PA, transition_latency_s=INF), "option transition_latency_s: must be a finite"),
    ("transition negative", dict(PA, transition_latency_s=-1), "option transition_latency_s: must be >= 0"),
    ("transition two hours", dict(PA, transition_latency_s=7200), "option transition_latency_s: must be >= 0 and <= 3600"),
    ("suspend nan", dict(PA, suspend_latency_s=NAN), "option suspend_latency_s: must be a finite"),
    ("utilization nan", dict(PA, utilization=NAN), "must be a finite number"),
    ("utilization 45 (a percentage)", dict(PA, utilization=45), "a percentage?"),
    ("utilization text", dict(PA, utilization="busy"), "must be a number"),
    ("utilization list with inf", dict(PA, utilization=[0.1, INF]), "utilization[1] must be a finite"),
    ("utilization empty list", dict(PA, utilization=[]), "utilization is an empty list"),
    ("utilization a million samples", dict(PA, utilization="[" + ",".join(["0.1"] * 200001) + "]"),
     "utilization: at most 100000 samples"),
    ("utilization a dict", dict(PA, utilization={"a": 0.1}), "must be a number"),
    ("percentile 0", dict(PA, utilization=[0.1], utilization_percentile=0), "option utilization_percentile: must be > 0"),
    ("percentile nan", dict(PA, utilization_percentile=NAN), "option utilization_percentile: must be a finite"),
    ("objective inf", dict(PA, response_time_objective=INF), "option response_time_objective: must be a finite"),
    ("objective 0.5", dict(PA, response_time_objective=0.5), "option response_time_objective: must be >= 1"),
    ("service_time_s huge", dict(PA, service_time_s=1e300), "option service_time_s: must be > 0 and <= 3600"),
    ("dvfs_power_exponent huge", dict(PA, dvfs_power_exponent=1e300), "option dvfs_power_exponent: must be >= 1 and <= 10"),
    ("service_time_cv nan", dict(PA, service_time_cv=NAN), "option service_time_cv: must be a finite"),
    ("svg_dest relative", dict(PA, svg_dest="p.svg"), "option svg_dest: must be an absolute path"),
    ("svg_dest with ..", dict(PA, svg_dest="{tmp}/../p.svg"), "option svg_dest: '..' is not allowed"),
    ("svg_dest a directory", dict(PA, svg_dest="{tmp}"), "is a directory"),
    ("svg_dest in a missing directory", dict(PA, svg_dest="{tmp}/no/p.svg"), "does not exist"),
    ("svg_latencies_s with nan", dict(PA, svg_dest="{tmp}/p.svg", svg_latencies_s=[0.01, NAN]),
     "option svg_latencies_s[1]: must be a finite"),
    ("svg_latencies_s a thousand", dict(PA, svg_dest="{tmp}/p.svg", svg_latencies_s=[0.01] * 1000),
     "option svg_latencies_s: at most 50 items"),
    ("svg_title control characters", dict(PA, svg_dest="{tmp}/p.svg", svg_title="x\x07"), "option svg_title: control"),
]

# --- fleet_report: every artifact read is shape-checked; a bad one fails naming its path --------

FR = {"artifacts_dir": "{in}/art", "dest": "{tmp}/report.html"}
FLEET_REPORT = [
    ("artifacts_dir relative", dict(FR, artifacts_dir="artifacts"), "option artifacts_dir: must be an absolute"),
    ("artifacts_dir with ..", dict(FR, artifacts_dir="{tmp}/.."), "option artifacts_dir: '..' is not allowed"),
    ("artifacts_dir missing", dict(FR, artifacts_dir="{tmp}/nope"), "does not exist: run a fleetnap playbook first"),
    ("dest relative", dict(FR, dest="report.html"), "option dest: must be an absolute path"),
    ("dest a directory", dict(FR, dest="{tmp}"), "is a directory"),
    ("dest in a missing directory", dict(FR, dest="{tmp}/no/report.html"), "does not exist"),
    ("title with control characters", dict(FR, title="\x1b]0;x\x07"), "option title: control characters"),
    ("decisions not UTF-8", FR, "decisions.json is not UTF-8 text"),
    ("decisions a list", FR, "decisions.json: expected a JSON object"),
    ("decision of a host a string", FR, "decisions.json: host gw1: expected an object"),
    ("decision states not a list", FR, "decisions.json: host gw1: states must be a list"),
    ("summary hosts a dict", FR, "summary.json: hosts must be a list"),
    ("summary host ms a string", FR, "summary.json: hosts[0].resume_kernel_worst_ms must be a number"),
    ("summary ms nan", FR, "summary.json holds NaN, which is not a JSON number"),
    ("summary failed not a list", FR, "summary.json: failed must be a list"),
    ("wake latency a list", FR, "gw1.json: expected a JSON object"),
    ("wake latency states entries not objects", FR, "gw1.json: states[0] must be an object"),
    ("wake latency not JSON", FR, "gw1.json is not valid JSON"),
    ("state a list", FR, "state.json: expected a JSON object"),
    ("state hosts a list", FR, "state.json: hosts must be an object"),
    ("history gear a string", FR, "history.jsonl line 1: gear must be a whole number"),
    ("history line a list", FR, "history.jsonl line 2: expected a JSON object"),
    ("history not UTF-8", FR, "history.jsonl is not UTF-8 text"),
    ("old report not UTF-8 is replaced, artifact bad", dict(FR, dest="{in}/old.html"), "state.json: expected a JSON object"),
]

# --- gear_plan: the load history prepared per case ------------------------------------------------

GP = dict(CAP, servers=30, replicas=3, gmin=1, load_csv="{in}/load.csv", date="2024-01-02",
          at="2024-01-02T10:00:00Z")
GEAR_PLAN = [
    ("servers 0", dict(GP, servers=0), "option servers: must be >= 1 and <= 100000"),
    ("servers a billion", dict(GP, servers=10 ** 9), "option servers: must be >= 1 and <= 100000"),
    ("replicas a million", dict(GP, servers=100000, replicas=10 ** 6), "option replicas: must be >= 1 and <= 100"),
    ("gmin 0", dict(GP, gmin=0), "option gmin: must be >= 1 and <= 100"),
    ("capacity nan", dict(GP, server_read_iops=NAN), "option server_read_iops: must be a finite number"),
    ("capacity inf", dict(GP, server_write_mbps=INF), "option server_write_mbps: must be a finite number"),
    ("capacity 0", dict(GP, server_read_mbps=0), "option server_read_mbps: must be > 0"),
    ("train_days a million", dict(GP, train_days=10 ** 6), "option train_days: must be >= 0 and <= 3660"),
    ("min_copies a million", dict(GP, min_copies=10 ** 6), "option min_copies: must be >= 1 and <= 100"),
    ("prometheus_days a billion", dict(CAP, servers=30, prometheus_url="http://127.0.0.1:9", prometheus_days=10 ** 9,
                                       promql={"read_iops": "a", "write_iops": "b", "read_mbps": "c", "write_mbps": "d"}),
     "option prometheus_days: must be >= 1 and <= 366"),
    ("prometheus_step 0", dict(CAP, servers=30, prometheus_url="http://127.0.0.1:9", prometheus_step=0,
                               promql={"read_iops": "a", "write_iops": "b", "read_mbps": "c", "write_mbps": "d"}),
     "option prometheus_step: must be >= 1 and <= 86400"),
    ("prometheus_timeout nan", dict(CAP, servers=30, prometheus_url="http://127.0.0.1:9", prometheus_timeout=NAN,
                                    promql={"read_iops": "a", "write_iops": "b", "read_mbps": "c", "write_mbps": "d"}),
     "option prometheus_timeout: must be a finite number"),
    ("at nan", dict(GP, at="nan"), "at 'nan' is not a time"),
    ("at 1e300", dict(GP, at="1e300"), "at '1e300' is outside"),
    ("prometheus_end inf", dict(CAP, servers=30, prometheus_url="http://127.0.0.1:9", prometheus_end="inf",
                                promql={"read_iops": "a", "write_iops": "b", "read_mbps": "c", "write_mbps": "d"}),
     "prometheus_end 'inf' is not a time"),
    ("date year 10000", dict(GP, date="10000-01-01"), "is not YYYY-MM-DD"),
    ("timezone with ..", dict(GP, timezone="../../etc/passwd"), "option timezone: must be an IANA time zone name"),
    ("load_csv relative", dict(GP, load_csv="load.csv"), "option load_csv: must be an absolute path"),
    ("load_csv with ..", dict(GP, load_csv="{tmp}/../load.csv"), "option load_csv: '..' is not allowed"),
    ("load_csv missing", dict(GP, load_csv="{tmp}/nope.csv"), "cannot read load_csv"),
    ("load_csv not UTF-8", GP, "load.csv line 3 is not UTF-8 text"),
    ("load_csv timestamp nan", GP, "load.csv line 2: timestamp 'nan' is not a time"),
    ("load_csv timestamp inf", GP, "load.csv line 2: timestamp 'inf' is not a time"),
    ("load_csv timestamp 1e300", GP, "load.csv line 2: timestamp '1e300' is outside"),
    ("load_csv huge field", GP, "load.csv line 2: field larger than"),
    ("load_csv rate nan", GP, "rates must be finite and >= 0"),
    ("load_csv NUL byte", GP, "load.csv line 2: read_iops is '1\\x00', not a number"),
    ("layout host a string", dict(GP, layout_hosts={"h1": "2", "h2": {"gear_group": 1}}),
     "host h1 is '2', not an object with gear_group"),
    ("layout gear_group inf", dict(GP, layout_hosts={"h1": {"gear_group": INF}}), "host h1 has fleetnap_gear_group"),
    ("replica_map holders a number", dict(GP, layout_hosts={"h%d" % g: {"gear_group": g} for g in (1, 2, 3)},
                                                  replica_map={"item": 5}),
     "item item: hosts must be a host name or a list"),
    ("unit_prefix with a slash", dict(GP, unit_prefix="../x"), "option unit_prefix: '../x' is not a unit name prefix"),
    ("unit_prefix upper case", dict(GP, unit_prefix="Gear"), "option unit_prefix: 'Gear' is not a unit name prefix"),
    ("installed_units without unit_prefix", dict(GP, installed_units=["/etc/systemd/system/a.timer"]),
     "option installed_units: needs unit_prefix"),
    ("installed_units relative", dict(GP, unit_prefix="g", installed_units=["g-20240101-00.timer"]),
     "option installed_units[0]: must be an absolute path"),
    ("installed_units with ..", dict(GP, unit_prefix="g", installed_units=["/etc/../g-20240101-00.timer"]),
     "option installed_units[0]: '..' is not allowed in a path"),
    ("installed_units a string", dict(GP, unit_prefix="g", installed_units=7), "installed_units"),
    ("cron_command two lines", dict(GP, cron_command="true\nrm -rf /"), "option cron_command: control characters"),
    # The fleet's numbers and replica_map's need of layout_hosts, refused before the input is read:
    # the CSV a FIFO, missing, or Prometheus not listening would each be refused with its own message.
    ("gmin above replicas, load_csv a FIFO", dict(GP, gmin=5),
     "gmin must be between 1 and replicas (3), got 5"),
    ("servers below replicas, Prometheus not listening",
     dict(CAP, servers=2, replicas=3, prometheus_url="http://127.0.0.1:9",
          promql={"read_iops": "a", "write_iops": "b", "read_mbps": "c", "write_mbps": "d"}),
     "servers (N=2) must be at least replicas (r=3)"),
    ("replica_map without layout_hosts, load_csv missing",
     dict(GP, load_csv="{in}/nope.csv", replica_map={"item": ["h1"]}),
     "replica_map needs layout_hosts (host -> gear_group) to be checked"),
]

# --- gear_shift_plan: pure planning, the state file prepared per case -----------------------------

HOSTS = {"lab%d" % n: {"group": (n - 1) % 3 + 1, "state": "on", "up_methods": ["wol"]} for n in range(1, 7)}
GS = {"hosts": HOSTS, "gear": 2, "date": "2026-11-21"}
GEAR_SHIFT_PLAN = [
    ("replicas a billion", dict(GS, replicas=10 ** 9), "option replicas: must be >= 1 and <= 100"),
    ("replicas 0", dict(GS, replicas=0), "option replicas: must be >= 1 and <= 100"),
    ("gmin negative", dict(GS, gmin=-1), "option gmin: must be >= 1"),
    ("gear above replicas", dict(GS, gear=4), "gear 4 is outside [gmin 1, replicas 3]"),
    ("groups_on 10**12", {"hosts": HOSTS, "groups_on": [10 ** 12]}, "option groups_on[0]: must be >= 1 and <= 100"),
    ("date not a date", dict(GS, date="tomorrow"), "is not YYYY-MM-DD"),
    ("host group inf", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], group=INF))), "host lab1: gear group"),
    ("host group 1.5", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], group=1.5))), "host lab1: gear group 1.5 is not"),
    ("host group true", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], group=True))), "host lab1: gear group True is not"),
    ("host a list", dict(GS, hosts=dict(HOSTS, lab1=[1, 2])), "host lab1: expected a dict"),
    ("up_methods a string", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], up_methods="wol"))),
     "host lab1: wake methods 'wol' must be a non-empty list"),
    ("up_methods twice", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], up_methods=["wol", "wol"]))),
     "host lab1: wake methods ['wol', 'wol'] must be a non-empty list of wol, ipmi, redfish, each once"),
    ("batch_size negative", dict(GS, batch_size="-5"), "option batch_size: must be a number of hosts or a percentage"),
    ("batch_size a fraction", dict(GS, batch_size="2.5"), "option batch_size: must be a number of hosts"),
    ("batch_size percent first", dict(GS, batch_size="%10"), "option batch_size: must be a number of hosts"),
    ("batch_size seven digits", dict(GS, batch_size="1234567"), "got '1234567'"),
    ("batch_size too long", dict(GS, batch_size="123456789"), "option batch_size: at most 8 characters"),
    ("wake_batch_size words", dict(GS, wake_batch_size="half"), "option wake_batch_size: must be a number of hosts"),
    ("wake_batch_size a list", dict(GS, wake_batch_size=[5]), "wake_batch_size"),
    ("state_file relative", dict(GS, state_file="state.json"), "option state_file: must be an absolute path"),
    ("state_file with ..", dict(GS, state_file="{tmp}/../state.json"), "option state_file: '..' is not allowed"),
    ("state_file a directory", dict(GS, state_file="{tmp}"), "state file {tmp} is unreadable"),
    ("state not UTF-8", dict(GS, state_file="{in}/state.json"), "state.json is not UTF-8 text"),
    ("state not JSON", dict(GS, state_file="{in}/state.json"), "state.json is unreadable"),
    ("state a list", dict(GS, state_file="{in}/state.json"), "state.json has no 'hosts' object"),
    ("state hosts a list", dict(GS, state_file="{in}/state.json"), "state.json has no 'hosts' object"),
    ("state host a string", dict(GS, state_file="{in}/state.json"), "state.json: hosts.lab1 must be an object"),
    ("state host state unknown word", dict(GS, state_file="{in}/state.json"), "state.json: hosts.lab1.state 'dozing' is not one of"),
    ("state too big", dict(GS, state_file="{in}/state.json"), "state.json is larger than"),
    ("down_method nap", dict(GS, hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], down_method="nap"))),
     "host lab1: down method 'nap' is not one of suspend, soft, off, auto"),
    ("resume_dir relative", dict(GS, resume_dir="artifacts/resume"), "option resume_dir: must be an absolute path"),
    ("s3 record not JSON", dict(GS, resume_dir="{in}"), "lab1/s3.json is unreadable"),
    ("s3 record without ok", dict(GS, resume_dir="{in}"), "lab1/s3.json is not an object with ok"),
    ("lock_file relative", dict(GS, state_file="{tmp}/state.json", lock_file="shift.lock"),
     "option lock_file: must be an absolute path"),
    ("lock_file without state_file", dict(GS, lock_file="{tmp}/shift.lock"), "required by 'lock_file': state_file"),
    ("lock_file not held", dict(GS, state_file="{tmp}/state.json", lock_file="{tmp}/nobody.lock"),
     "take the lock first"),
    ("lock_file a directory", dict(GS, state_file="{tmp}/state.json", lock_file="{tmp}"), "option lock_file:"),
    ("park_off_after_h nan", dict(GS, park_off_after_h=NAN), "option park_off_after_h: must be a finite number"),
    ("park_off_after_h 0", dict(GS, park_off_after_h=0), "option park_off_after_h: must be > 0"),
    ("scheduler unknown", dict(GS, scheduler="kubernetes"), "scheduler"),
    ("wake_health not a bool", dict(GS, wake_health="sometimes"), "wake_health"),
    ("wake_undrain a list", dict(GS, wake_undrain=["hook.yml"]), "wake_undrain"),
    ("parked since not a time", dict(GS, park_off_after_h=12, state_file="{in}/state.json"),
     "hosts.lab1.since 'last night' is not YYYY-MM-DDTHH:MM:SSZ"),
    # the host records and batch sizes are checked before the state file and the S3 records are
    # read: each case's first read would fail otherwise (a directory, a FIFO, a torn record)
    ("host state bogus, the state file a directory",
     dict(GS, state_file="{tmp}", hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], state="bogus"))),
     "host lab1: observed state 'bogus' is not one of"),
    ("host group 1.5, the state file a FIFO",
     dict(GS, state_file="{in}/fifo", hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], group=1.5))),
     "host lab1: gear group 1.5 is not"),
    ("host ssh a word, the state file not JSON",
     dict(GS, state_file="{in}/state.json", hosts=dict(HOSTS, lab1={"group": 1, "ssh": "maybe",
                                                                    "up_methods": ["wol"]})), "host lab1: ssh"),
    ("down_method nap, the s3 record not JSON",
     dict(GS, resume_dir="{in}", hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], down_method="nap"))),
     "host lab1: down method 'nap' is not one of"),
    ("up_methods a string, the state file a directory",
     dict(GS, state_file="{tmp}", hosts=dict(HOSTS, lab1=dict(HOSTS["lab1"], up_methods="wol"))),
     "host lab1: wake methods 'wol' must be a non-empty list"),
    ("batch_size lots, the state file a directory", dict(GS, state_file="{tmp}", batch_size="lots"),
     "option batch_size: must be a number of hosts or a percentage"),
    ("wake_batch_size half, the state file a FIFO", dict(GS, state_file="{in}/fifo", wake_batch_size="half"),
     "option wake_batch_size: must be a number of hosts or a percentage"),
]

# --- shift_lock: path and owner checks, and faults of the lock file -------------------------------

SL = {"path": "{tmp}/shift.lock", "pid": 1}
SHIFT_LOCK = [
    ("path relative", dict(SL, path="shift.lock"), "option path: must be an absolute path"),
    ("path with ..", dict(SL, path="{tmp}/../shift.lock"), "option path: '..' is not allowed"),
    ("path with NUL", dict(SL, path="{tmp}/a\x00b"), "option path: a path cannot hold a NUL"),
    ("path 5000 characters", dict(SL, path="/" + "l" * 5000), "longer than PATH_MAX"),
    ("pid 0", dict(SL, pid=0), "option pid: must be >= 1"),
    ("pid negative", dict(SL, pid=-5), "option pid: must be >= 1"),
    ("pid huge", dict(SL, pid=2 ** 40), "option pid: must be >= 1 and <= 4194304"),
    ("pid text", dict(SL, pid="me"), "pid"),
    ("pid not running", dict(SL, pid=4194300), "is not a running process"),
    ("purpose too long", dict(SL, purpose="p" * 600), "option purpose: at most 500 characters"),
    ("purpose control characters", dict(SL, purpose="a\nb\x1b"), "option purpose: control characters"),
    ("state unknown", dict(SL, state="taken"), "state"),
    ("force not a bool", dict(SL, force="sometimes"), "force"),
    # The lock is PID 1's (alive); the module acts for this test process (alive too).
    ("held by a live process", dict(SL, path="{in}/shift.lock", pid=os.getpid()), "another shift holds the lock"),
    ("release of a live process's lock", dict(SL, path="{in}/shift.lock", state="absent", pid=os.getpid()),
     "belongs to another live process"),
    ("lock directory under a file", dict(SL, path="{tmp}/marker/shift.lock"), "cannot create the lock's directory"),
    ("unknown option", dict(SL, timeout=5), "Unsupported parameters"),
    # a lease: a lock of a shift that spans jobs (an AWX workflow)
    ("lease and pid", dict(SL, lease=60), "mutually exclusive"),
    ("lease 0", {"path": "{tmp}/shift.lock", "lease": 0}, "option lease: must be >= 1"),
    ("lease of a year", {"path": "{tmp}/shift.lock", "lease": 31536000}, "option lease: must be >= 1 and <= 604800"),
    ("lease text", {"path": "{tmp}/shift.lock", "lease": "long"}, "lease"),
    ("lease_id without lease", {"path": "{tmp}/shift.lock", "lease_id": "abc"},
     "option lease_id: taking a lease needs option lease"),
    ("lease_id with a slash", {"path": "{tmp}/shift.lock", "lease": 60, "lease_id": "a/b"}, "option lease_id: must be a token"),
    ("lease_id 65 characters", {"path": "{tmp}/shift.lock", "lease": 60, "lease_id": "t" * 65},
     "option lease_id: must be a token"),
    ("lease_id a newline", {"path": "{tmp}/shift.lock", "state": "absent", "lease_id": "a\nb"},
     "option lease_id: must be a token"),
    ("release a lease without its token", {"path": "{tmp}/shift.lock", "state": "absent", "lease": 60},
     "option lease: releasing a lease needs option lease_id"),
]

# --- resume_summary: pure computation over the cycles measure_resume.yml hands it ---------------

CYC = {"cycle": 1, "resume_ms": 300.0, "suspend_ms": 200.0, "end_to_end_ms": 4000.0, "cpus_ms": 50.0,
       "noirq_ms": 20.0, "devices_ms": 200.0, "mem_sleep": "deep",
       "slowest": [{"name": "0000:00:04.0", "phase": "resume", "duration_ms": 90.0}]}
RS = {"host": "lab1", "cycles": [CYC]}
RESUME_SUMMARY = [
    ("no cycles", dict(RS, cycles=[]), "cycles: must be a non-empty list"),
    ("cycles a string", dict(RS, cycles="three"), "cycles"),
    ("a cycle a number", dict(RS, cycles=[3]), "cycles"),
    ("cycle number 0", dict(RS, cycles=[dict(CYC, cycle=0)]), "cycles[0].cycle: must be a whole number in 1..1000"),
    ("cycle number twice", dict(RS, cycles=[CYC, CYC]), "cycle 1 is given twice"),
    ("two thousand cycles", dict(RS, cycles=[dict(CYC, cycle=i + 1) for i in range(2000)]), "at most 1000 cycles"),
    ("resume nan", dict(RS, cycles=[dict(CYC, resume_ms=NAN)]), "cycles[0].resume_ms: must be a number"),
    ("resume negative", dict(RS, cycles=[dict(CYC, resume_ms=-5)]), "cycles[0].resume_ms: must be a finite number"),
    ("resume a year", dict(RS, cycles=[dict(CYC, resume_ms=3.2e10)]), "in 0..10000000"),
    ("end to end missing", dict(RS, cycles=[{k: v for k, v in CYC.items() if k != "end_to_end_ms"}]),
     "cycles[0].end_to_end_ms: must be a number"),
    ("split a bool", dict(RS, cycles=[dict(CYC, noirq_ms=True)]), "cycles[0].noirq_ms: must be a number"),
    ("mem_sleep unknown", dict(RS, cycles=[dict(CYC, mem_sleep="mem")]), "cycles[0].mem_sleep: must be s2idle"),
    ("slowest a string", dict(RS, cycles=[dict(CYC, slowest="nic")]), "cycles[0].slowest: must be a list"),
    ("callback without name", dict(RS, cycles=[dict(CYC, slowest=[{"phase": "resume", "duration_ms": 1}])]),
     "cycles[0].slowest[0].name"),
    ("callback duration text", dict(RS, cycles=[dict(CYC, slowest=[dict(CYC["slowest"][0], duration_ms="slow")])]),
     "cycles[0].slowest[0].duration_ms"),
    ("recommendations not per cycle", dict(RS, recommendations=[[], []]), "one list per cycle (1)"),
    ("recommendations a dict each", dict(RS, recommendations=[{"a": 1}]), "recommendations[0]: must be a list"),
    ("host with a newline", dict(RS, host="lab1\nlab2"), "option host"),
    ("top 0", dict(RS, top=0), "option top: must be >= 1 and <= 100"),
    ("top a million", dict(RS, top=1000000), "option top: must be >= 1 and <= 100"),
    ("unknown option", dict(RS, dest="/tmp/x"), "Unsupported parameters"),
]

# gear_observe: probes 127.0.0.1:9 (nothing greets there) when an input is wrongly accepted.
OH = {"name": "h1", "address": "127.0.0.1", "port": 9}
OB = dict(OH, bmc_address="127.0.0.1", bmc_port=9, bmc_user="admin", bmc_password="Fn7-pw-c9e1b4")
GO = {"hosts": [OH], "probe_timeout": 0.2, "rate_limit_dir": "{tmp}/rl"}
GEAR_OBSERVE = [
    ("read_power a word", dict(GO, read_power="maybe"), "read_power"),
    ("probe_timeout nan", dict(GO, probe_timeout=NAN), "option probe_timeout: must be a finite number"),
    ("probe_timeout inf", dict(GO, probe_timeout=INF), "option probe_timeout: must be a finite number"),
    ("probe_timeout 0", dict(GO, probe_timeout=0), "option probe_timeout: must be > 0"),
    ("probe_timeout an hour", dict(GO, probe_timeout=3600), "option probe_timeout: must be > 0 and <= 60"),
    ("parked_probe_timeout nan", dict(GO, parked_probe_timeout=NAN), "option parked_probe_timeout: must be a finite"),
    ("parked_probe_timeout 0", dict(GO, parked_probe_timeout=0), "option parked_probe_timeout: must be > 0"),
    ("state_file relative", dict(GO, state_file="gear/state.json"), "option state_file: must be an absolute path"),
    ("state file not JSON", dict(GO, state_file="{in}/state.json"), "state file {in}/state.json is unreadable"),
    ("bmc_read sometimes", dict(GO, bmc_read="sometimes"), "value of bmc_read must be one of"),
    ("bmc_read needed without the shift", dict(GO, bmc_read="needed"), "bmc_read is needed but all of the following are missing: shift"),
    ("shift with neither gear nor groups", dict(GO, bmc_read="needed", shift={"replicas": 3}),
     "option shift: give exactly one of gear (a number) or groups_on"),
    ("shift with gear and groups", dict(GO, bmc_read="needed", shift={"gear": 1, "groups_on": [1]}),
     "option shift: give exactly one of gear (a number) or groups_on"),
    ("shift gear above replicas", dict(GO, bmc_read="needed", shift={"gear": 4, "replicas": 3}),
     "option shift: gear 4 is outside [gmin 1, replicas 3]"),
    ("shift gear a word", dict(GO, bmc_read="needed", shift={"gear": "two"}), "shift"),
    ("shift groups_on 0", dict(GO, bmc_read="needed", shift={"groups_on": [0]}),
     "option shift.groups_on[0]: must be >= 1"),
    ("shift groups_on beyond replicas", dict(GO, bmc_read="needed", shift={"groups_on": [5], "replicas": 3}),
     "option shift: groups_on [5]: gear groups are numbered 1..3"),
    ("shift replicas 0", dict(GO, bmc_read="needed", shift={"gear": 1, "replicas": 0}),
     "option shift.replicas: must be >= 1"),
    ("shift date not a date", dict(GO, bmc_read="needed", shift={"gear": 1, "date": "tomorrow"}),
     "option shift.date: 'tomorrow' is not YYYY-MM-DD"),
    ("shift an unknown key", dict(GO, bmc_read="needed", shift={"gear": 1, "colour": "red"}), "shift.colour"),
    ("wake_probe_timeout 0", dict(GO, wake_probe_timeout=0), "option wake_probe_timeout: must be > 0"),
    ("wake_probe_timeout nan", dict(GO, wake_probe_timeout=NAN), "option wake_probe_timeout: must be a finite number"),
    ("inventory names an observation", dict(GO, hosts=[dict(OH, inventory={"ssh": True, "group": 1})]),
     "option hosts[0].inventory: ssh name(s) what is observed"),
    ("inventory not a dict", dict(GO, hosts=[dict(OH, inventory="group 1")]), "inventory"),
    ("bmc_protocol telnet", dict(GO, hosts=[dict(OB, bmc_protocol="telnet")]), "bmc_protocol"),
    ("bmc_concurrency 0", dict(GO, bmc_concurrency=0), "option bmc_concurrency: must be >= 1"),
    ("bmc_concurrency a million", dict(GO, bmc_concurrency=1000000), "option bmc_concurrency: must be >= 1 and <= 256"),
    ("probe_concurrency 0", dict(GO, probe_concurrency=0), "option probe_concurrency: must be >= 1"),
    ("min_interval nan", dict(GO, min_interval=NAN), "option min_interval: must be a finite number"),
    ("retries 1000", dict(GO, retries=1000), "option retries: must be >= 0 and <= 10"),
    ("session_timeout 0", dict(GO, session_timeout=0), "option session_timeout: must be >= 1"),
    ("rate_limit_dir relative", dict(GO, rate_limit_dir="cache/bmc"), "option rate_limit_dir: must be an absolute path"),
    ("hosts a number", dict(GO, hosts=5), "'hosts' must be a list"),
    ("host with an unknown key", dict(GO, hosts=[dict(OH, colour="red")]), "hosts.colour"),
    ("host without address", dict(GO, hosts=[{"name": "h1"}]), "address"),
    ("host address with a space", dict(GO, hosts=[dict(OH, address="lab 1")]),
     "option hosts[0].address: must be a host name or address"),
    ("host port 0", dict(GO, hosts=[dict(OH, port=0)]), "option hosts[0].port: must be >= 1 and <= 65535"),
    ("host port 70000", dict(GO, hosts=[dict(OH, port=70000)]), "option hosts[0].port: must be >= 1 and <= 65535"),
    ("host name with a newline", dict(GO, hosts=[dict(OH, name="h\n1")]), "option hosts[0].name: must be an inventory name"),
    ("host listed twice", dict(GO, hosts=[OH, dict(OH, address="127.0.0.2")]), "option hosts[1].name: 'h1' is listed twice"),
    ("bmc address with a slash", dict(GO, hosts=[dict(OB, bmc_address="10.0.0.1/24")]),
     "option hosts[0].bmc_address: must be a host name or address"),
    ("bmc port 0", dict(GO, hosts=[dict(OB, bmc_port=0)]), "option hosts[0].bmc_port: must be >= 1 and <= 65535"),
    ("bmc user with a newline", dict(GO, hosts=[dict(OB, bmc_user="admin\nroot")]), "option hosts[0].bmc_user: must be a user name"),
    ("cipher suite 99", dict(GO, hosts=[dict(OB, cipher_suite=99)]), "option hosts[0].cipher_suite: must be >= 0 and <= 17"),
    ("host port text", dict(GO, hosts=[dict(OH, port="ssh")]), "port"),
    # the host's power record (fleetnap_* variables), read by powerrecord
    ("record misspelt password", dict(GO, hosts=[dict(OH, record={"fleetnap_bmc_pasword": "x"})]),
     "hosts.record.fleetnap_bmc_pasword"),
    # refused by AnsibleModule itself, whose message for a suboption dict that is not one names no
    # option (ansible-core 2.19); the roles always pass a dict
    ("record not a dict", dict(GO, hosts=[dict(OH, record="fleetnap_bmc_address 10.0.0.1")]),
     "dictionary requested, could not parse JSON or key=value"),
    ("record bmc address with a slash", dict(GO, hosts=[dict(OH, record={"fleetnap_bmc_address": "10.0.0.1/24"})]),
     "option hosts[0].record.fleetnap_bmc_address: must be a host name or address"),
    ("record bmc port 0", dict(GO, hosts=[dict(OH, record={"fleetnap_bmc_port": 0})]),
     "option hosts[0].record.fleetnap_bmc_port: must be >= 1 and <= 65535"),
    ("record MAC of five bytes", dict(GO, hosts=[dict(OH, record={"fleetnap_wol_macs": ["52:54:00:12:34"]})]),
     "option hosts[0].record.fleetnap_wol_macs[0]:"),
    ("record gear group 0", dict(GO, hosts=[dict(OH, record={"fleetnap_gear_group": 0})]),
     "option hosts[0].record.fleetnap_gear_group: must be"),
    ("record beside bmc options", dict(GO, hosts=[dict(OB, record={"fleetnap_bmc_address": "127.0.0.1"})]),
     "option hosts[0]: bmc_address, bmc_port, bmc_user, bmc_password given beside record"),
    # the inventory's keys are checked before the state file is read (and /proc, ipmitool)
    ("inventory names an observation, the state file not JSON",
     dict(GO, state_file="{in}/state.json", hosts=[dict(OH, inventory={"ssh": 1})]),
     "option hosts[0].inventory: ssh name(s) what is observed"),
    ("inventory names an observation, the state file a directory",
     dict(GO, state_file="{tmp}", hosts=[dict(OH, inventory={"bmc": "on", "group": 1})]),
     "option hosts[0].inventory: bmc name(s) what is observed"),
]


# gear_shift_prepare: the lock a lease (the forked runner has no ansible-playbook above it), every
# host probing 127.0.0.1:9 (nothing greets there) when an input is wrongly accepted. Every option is
# checked before the lock is taken: {tmp} stays as it was. A failure after the lock was taken (a
# state file or an S3 record the plan cannot read) releases it: the lock in {in}, beside the guard
# every use of a lock leaves, is gone again and {in} is as it was.
PH = dict(OH, inventory={"group": 1, "up_methods": ["wol"]})
GP = {"hosts": [PH], "probe_timeout": 0.2, "rate_limit_dir": "{tmp}/rl", "lock_file": "{tmp}/gear/shift.lock",
      "state_file": "{tmp}/gear/state.json", "lease": 60, "gear": 1, "replicas": 1}
GP_IN = dict(GP, lock_file="{in}/shift.lock", state_file="{in}/state.json")
RELEASED = "(the gear-shift lock was released)"
WS = {"history_file": "{tmp}/gear/history.jsonl", "power_file": "{tmp}/gear/power_w.json", "metrics_dir": "{tmp}/m"}
WS_NO_HISTORY = {k: v for k, v in WS.items() if k != "history_file"}
GEAR_SHIFT_PREPARE = [
    ("lock_file missing", {k: v for k, v in GP.items() if k != "lock_file"}, "missing required arguments: lock_file"),
    ("state_file missing", {k: v for k, v in GP.items() if k != "state_file"}, "missing required arguments: state_file"),
    ("lock_file relative", dict(GP, lock_file="gear/shift.lock"), "option lock_file: must be an absolute path"),
    ("state_file with ..", dict(GP, state_file="{tmp}/../state.json"), "option state_file: '..' is not allowed"),
    ("purpose too long", dict(GP, purpose="p" * 600), "option purpose: at most 500 characters"),
    ("lease 0", dict(GP, lease=0), "option lease: must be >= 1"),
    ("lease of a year", dict(GP, lease=31536000), "option lease: must be >= 1 and <= 604800"),
    ("journal a word", dict(GP, journal="perhaps"), "journal"),
    ("gear and groups_on", dict(GP, groups_on=[1]), "mutually exclusive: gear|groups_on"),
    ("neither gear nor groups_on", {k: v for k, v in GP.items() if k != "gear"}, "one of the following is required"),
    ("gear above replicas", dict(GP, gear=4, replicas=3), "gear 4 is outside [gmin 1, replicas 3]"),
    ("date not a date", dict(GP, date="tomorrow"), "date 'tomorrow' is not YYYY-MM-DD"),
    ("batch_size half", dict(GP, batch_size="half"), "option batch_size: must be a number of hosts or a percentage"),
    ("wake_batch_size negative", dict(GP, wake_batch_size="-1"), "option wake_batch_size: must be a number of hosts"),
    ("park_off_after_h 0", dict(GP, park_off_after_h=0), "option park_off_after_h: must be > 0"),
    ("scheduler pbs", dict(GP, scheduler="pbs"), "scheduler"),
    ("probe_timeout nan", dict(GP, probe_timeout=NAN), "option probe_timeout: must be a finite number"),
    ("wake_probe_timeout 0", dict(GP, wake_probe_timeout=0), "option wake_probe_timeout: must be > 0"),
    ("host listed twice", dict(GP, hosts=[PH, PH]), "option hosts[1].name: 'h1' is listed twice"),
    ("inventory names an observation", dict(GP, hosts=[dict(PH, inventory={"ssh": True, "group": 1})]),
     "option hosts[0].inventory: ssh name(s) what is observed"),
    ("record misspelt password", dict(GP, hosts=[dict(OH, record={"fleetnap_bmc_pasword": "x"})]),
     "hosts.record.fleetnap_bmc_pasword"),
    ("unknown option", dict(GP, pid=1), "Unsupported parameters"),
    # whole_shift: the waves' options and the record's files, checked before the lock
    ("whole_shift without history_file", dict(GP, whole_shift=WS_NO_HISTORY), "missing required arguments: history_file"),
    ("whole_shift wol_timeout 0", dict(GP, whole_shift=dict(WS, wol_timeout=0)), "option whole_shift.wol_timeout: must be > 0"),
    ("whole_shift wol_resend half a second", dict(GP, whole_shift=dict(WS, wol_resend=0.5)),
     "option whole_shift.wol_resend: must be 0 (sent once) or at least 1 s"),
    ("whole_shift wol_timeout inf", dict(GP, whole_shift=dict(WS, wol_timeout=INF)),
     "option whole_shift.wol_timeout: must be a finite number"),
    ("whole_shift bmc_concurrency 0", dict(GP, whole_shift=dict(WS, bmc_concurrency=0)),
     "option whole_shift.bmc_concurrency: must be >= 1"),
    ("whole_shift history_file relative", dict(GP, whole_shift=dict(WS, history_file="history.jsonl")),
     "option whole_shift.history_file: must be an absolute path"),
    ("whole_shift metrics_dir with ..", dict(GP, whole_shift=dict(WS, metrics_dir="{tmp}/../metrics")),
     "option whole_shift.metrics_dir: '..' is not allowed"),
    ("whole_shift cycle_unresponsive a word", dict(GP, whole_shift=dict(WS, cycle_unresponsive="sometimes")),
     "cycle_unresponsive"),
    ("whole_shift wake_during_observation a word", dict(GP, whole_shift=dict(WS, wake_during_observation="perhaps")),
     "wake_during_observation"),
    ("whole_shift wake_during_observation a list", dict(GP, whole_shift=dict(WS, wake_during_observation=[True])),
     "wake_during_observation"),
    ("whole_shift unknown key", dict(GP, whole_shift=dict(WS, down_timeout=5)), "Unsupported parameters"),
    # the lock
    ("held by a live process", GP_IN, "another shift holds the lock"),
    ("lock directory under a file", dict(GP, lock_file="{tmp}/marker/shift.lock"), "cannot create the lock's directory"),
    # after the lock: released, and said so
    ("state file not JSON, after the lock", GP_IN, "state file {in}/state.json is unreadable"),
    ("state file not JSON, the lock released", GP_IN, RELEASED),
    ("host without a gear group", dict(GP, hosts=[dict(OH, inventory={"up_methods": ["wol"]})]),
     "host h1: gear group None is not a whole number"),
    ("host wake methods twice", dict(GP, hosts=[dict(OH, inventory={"group": 1, "up_methods": ["wol", "wol"]})]),
     "host h1: wake methods ['wol', 'wol'] must be a non-empty list"),
    ("s3 record not JSON, after the lock", dict(GP_IN, resume_dir="{in}"), "h1/s3.json is unreadable"),
    ("s3 record not JSON, the lock released", dict(GP_IN, resume_dir="{in}"), RELEASED),
]

# gear_wave: every host probes 127.0.0.1:9 (nothing greets there) when an input is wrongly
# accepted; magic packets could only go to 127.0.0.1; no BMC answers on 127.0.0.1:9.
WH = {"name": "h1", "address": "127.0.0.1", "port": 9, "wol_macs": ["02:fe:00:00:00:01"], "wol_address": "127.0.0.1"}
WB = dict(WH, bmc_address="127.0.0.1", bmc_port=9, bmc_user="admin", bmc_password="Fn7-pw-c9e1b4")
GW = {"action": "up", "hosts": [WH], "wol_timeout": 0.3, "rate_limit_dir": "{tmp}/rl"}
GEAR_WAVE = [
    ("action sideways", dict(GW, action="sideways"), "value of action must be one of: up, down"),
    ("journal without a state file", dict(GW, journal={"lock_file": "{tmp}/lock"}), "state_file"),
    ("journal state file relative", dict(GW, journal={"state_file": "gear/state.json"}),
     "option journal.state_file: must be an absolute path"),
    ("journal state file not JSON", dict(GW, journal={"state_file": "{in}/state.json"}),
     "state file {in}/state.json"),
    ("journal lock relative", dict(GW, journal={"state_file": "{tmp}/s.json", "lock_file": "lock"}),
     "option journal.lock_file: must be an absolute path"),
    ("journal batch name with a newline", dict(GW, journal={"state_file": "{tmp}/s.json", "batch": ["h\n1"]}),
     "option journal.batch[0]: must be an inventory host name"),
    ("journal result without a host", dict(GW, journal={"state_file": "{tmp}/s.json", "results": [{"ok": True}]}),
     "option journal.results[0]: needs a host name (host)"),
    ("journal results a word", dict(GW, journal={"state_file": "{tmp}/s.json", "results": "all"}), "results"),
    ("record methods pxe", dict(GW, hosts=[dict(WH, record={"fleetnap_power_methods": ["pxe"]})]),
     "option hosts[0].record.fleetnap_power_methods: must name one or two of wol, ipmi, redfish"),
    ("record validate_certs maybe", dict(GW, hosts=[dict(WH, record={"fleetnap_bmc_validate_certs": "maybe"})]),
     "option hosts[0].record.fleetnap_bmc_validate_certs: must be true or false"),
    ("boot_once_required a word", dict(GW, hosts=[dict(WH, boot_once_required="maybe")]),
     "boot_once_required"),
    ("event_log a list", dict(GW, hosts=[dict(WH, event_log=[1])]), "event_log"),
    ("wol_timeout nan", dict(GW, wol_timeout=NAN), "option wol_timeout: must be a finite number"),
    ("wol_timeout 0", dict(GW, wol_timeout=0), "option wol_timeout: must be > 0"),
    ("ipmi_timeout a day", dict(GW, ipmi_timeout=86400), "option ipmi_timeout: must be > 0 and <= 3600"),
    ("down_timeout inf", dict(GW, down_timeout=INF), "option down_timeout: must be a finite number"),
    ("silent_for negative", dict(GW, silent_for=-1), "option silent_for: must be >= 0"),
    ("probe_timeout 0", dict(GW, probe_timeout=0), "option probe_timeout: must be > 0 and <= 60"),
    ("probe_timeout a minute and more", dict(GW, probe_timeout=61), "option probe_timeout: must be > 0 and <= 60"),
    ("connect_timeout 0", dict(GW, connect_timeout=0), "option connect_timeout: must be > 0"),
    ("interval 0", dict(GW, interval=0), "option interval: must be >= 0.01"),
    ("wol_repeat 0", dict(GW, wol_repeat=0), "option wol_repeat: must be >= 1"),
    ("wol_resend negative", dict(GW, wol_resend=-5), "option wol_resend: must be >= 0"),
    ("wol_resend nan", dict(GW, wol_resend=NAN), "option wol_resend: must be a finite number"),
    ("wol_resend a storm", dict(GW, wol_resend=0.05), "option wol_resend: must be 0 (sent once) or at least 1 s, got 0.05"),
    ("bmc_concurrency 0", dict(GW, bmc_concurrency=0), "option bmc_concurrency: must be >= 1"),
    ("concurrency a million", dict(GW, concurrency=10 ** 6), "option concurrency: must be >= 1 and <= 4096"),
    ("rate_limit_dir relative", dict(GW, rate_limit_dir="rl"), "option rate_limit_dir: must be an absolute path"),
    ("up_methods empty", dict(GW, hosts=[dict(WH, up_methods=[])]),
     "option hosts[0].up_methods: must name one or two of wol, ipmi, redfish, each once; got []"),
    ("up_methods unknown", dict(GW, hosts=[dict(WH, up_methods=["pxe"])]), "option hosts[0].up_methods"),
    ("up_methods twice", dict(GW, hosts=[dict(WH, up_methods=["wol", "wol"])]), "option hosts[0].up_methods"),
    ("wol without MAC", dict(GW, hosts=[dict(WH, wol_macs=[])]),
     "option hosts[0].wol_macs: h1 wakes by wol but has no MAC address"),
    ("MAC broadcast", dict(GW, hosts=[dict(WH, wol_macs=["ff:ff:ff:ff:ff:ff"])]),
     "option hosts[0].wol_macs[0]: MAC address 'ff:ff:ff:ff:ff:ff' is the broadcast"),
    ("MAC garbage", dict(GW, hosts=[dict(WH, wol_macs=["zz"])]), "option hosts[0].wol_macs[0]: MAC address 'zz' is not valid"),
    ("wol_address with a space", dict(GW, hosts=[dict(WH, wol_address="10.0.0 .255")]),
     "option hosts[0].wol_address: must be a broadcast or unicast address"),
    ("wol_address does not resolve", dict(GW, hosts=[dict(WH, wol_address="no-such-host.invalid")]),
     "option hosts[0].wol_address: cannot resolve WoL destination"),
    ("wol_port 0", dict(GW, hosts=[dict(WH, wol_port=0)]), "option hosts[0].wol_port: must be >= 1 and <= 65535"),
    ("down_method nap", dict(GW, action="down", hosts=[dict(WH, down_method="nap")]), "down_method"),
    ("since in the year 3000", dict(GW, action="down", hosts=[dict(WH, since=32503680000.0)]),
     "option hosts[0].since: must be >= 0 and <= 4102444800"),
    ("since with action up", dict(GW, hosts=[dict(WH, since=1.0)]), "option hosts[0].since: only with action=down"),
    ("host listed twice", dict(GW, hosts=[WH, WH]), "option hosts[1].name: 'h1' is listed twice"),
    ("said with action up", dict(GW, hosts=[dict(WH, said={"rc": 0})]),
     "option hosts[0].said: only with action=down and down_method suspend"),
    ("said rc a word", dict(GW, action="down", hosts=[dict(WH, said={"rc": "zero"})]),
     "option hosts[0].said.rc: must be an exit status"),
    ("said unreachable a word", dict(GW, action="down", hosts=[dict(WH, said={"rc": 0, "unreachable": "no"})]),
     "option hosts[0].said.unreachable: must be true or false"),
    ("no_s3_fallback nap", dict(GW, action="down", hosts=[dict(WH, no_s3_fallback="nap")]), "no_s3_fallback"),
    ("redfish method on an IPMI BMC", dict(GW, hosts=[dict(WB, up_methods=["redfish"])]),
     "option hosts[0].up_methods: h1 wakes by redfish but its BMC speaks ipmi (bmc_protocol)"),
    ("bmc_protocol smoke signals", dict(GW, hosts=[dict(WB, bmc_protocol="smoke")]), "bmc_protocol"),
    ("bmc port 0", dict(GW, hosts=[dict(WB, bmc_port=0)]), "option hosts[0].bmc_port: must be >= 1 and <= 65535"),
    ("host with an unknown key", dict(GW, hosts=[dict(WH, colour="red")]), "hosts.colour"),
    ("observed without the host", dict(GW, observed={"h2": {"bmc": "off"}}),
     "option observed: no observation of hosts[0] (h1)"),
    ("observed entry not a dict", dict(GW, observed={"h1": "on"}), "option observed: no observation of hosts[0] (h1)"),
    ("observed up_methods a number", dict(GW, observed={"h1": {"up_methods": 7}}),
     "option observed.h1.up_methods: must be a list, got 7"),
    ("observed up_methods a word", dict(GW, observed={"h1": {"up_methods": "pxe"}}),
     "option hosts[0].up_methods: must name one or two of wol, ipmi, redfish, each once; got ['pxe']"),
    ("observed up_methods unknown", dict(GW, observed={"h1": {"up_methods": ["pxe"]}}),
     "option hosts[0].up_methods: must name one or two of wol, ipmi, redfish"),
    ("observed MACs not text", dict(GW, observed={"h1": {"wol_macs": [1]}}),
     "option observed.h1.wol_macs: must be a list of text"),
    ("observed MAC broadcast", dict(GW, observed={"h1": {"wol_macs": ["ff:ff:ff:ff:ff:ff"]}}),
     "option hosts[0].wol_macs[0]: MAC address 'ff:ff:ff:ff:ff:ff' is the broadcast"),
    ("observed wol_port text", dict(GW, observed={"h1": {"wol_port": "9"}}),
     "option observed.h1.wol_port: must be an integer, got '9'"),
    ("observed wol_port a bool", dict(GW, observed={"h1": {"wol_port": True}}),
     "option observed.h1.wol_port: must be an integer, got True"),
    ("observed wol_port 0", dict(GW, observed={"h1": {"wol_port": 0}}), "option hosts[0].wol_port: must be >= 1"),
    ("observed boot_once a word", dict(GW, observed={"h1": {"boot_once": "yes"}}),
     "option observed.h1.boot_once: must be true or false, got 'yes'"),
    ("observed bmc a number", dict(GW, observed={"h1": {"bmc": 0}}),
     "option observed.h1.bmc: must be the BMC's answer (text), got 0"),
    ("observed with action down", dict(GW, action="down", observed={"h1": {}}), "option observed: only with action=up"),
]

# gear_energy: the history and the power file prepared per case ({in}); power_file under {tmp}
# unless the case is about it (a wrong acceptance would write it: the hash of {tmp} shows that).
GE = {"history_file": "{in}/history.jsonl", "power_file": "{tmp}/power_w.json"}
FIG = {"on": 130, "asleep": 5, "off": 3}
GEAR_ENERGY = [
    ("history_file relative", dict(GE, history_file="history.jsonl"), "option history_file: must be an absolute path"),
    ("power_file with ..", dict(GE, power_file="{tmp}/../p.json"), "option power_file: '..' is not allowed"),
    ("until nan", dict(GE, until=NAN), "option until: must be a finite number"),
    ("until negative", dict(GE, until=-1), "option until: must be >= 0"),
    ("power_w not a dict", dict(GE, power_w={"h1": 130}), "option power_w: h1: expected {on, asleep, off} watts"),
    ("power_w nan", dict(GE, power_w={"h1": dict(FIG, on=NAN)}), "option power_w: h1.on: must be watts"),
    ("power_w a gigawatt", dict(GE, power_w={"h1": dict(FIG, on=1e9)}), "h1.on: must be watts, a number from 0"),
    ("power_w asleep above on", dict(GE, power_w={"h1": dict(FIG, asleep=500)}), "cannot draw more than on"),
    ("power_w missing off", dict(GE, power_w={"h1": {"on": 130, "asleep": 5}}), "h1.off: must be watts"),
    ("power_w unknown key", dict(GE, power_w={"h1": dict(FIG, idle=60)}), "unknown key(s) idle"),
    ("history not JSON", GE, "history.jsonl line 2 is not valid JSON"),
    ("history not UTF-8", GE, "history.jsonl is not UTF-8 text"),
    ("history time not UTC", GE, "is not a UTC time"),
    ("history state unknown word", GE, "power must map hosts to one of on, asleep, off, unknown"),
    ("history too big", GE, "is larger than"),
    ("power file not JSON", dict(GE, power_file="{in}/power_w.json"), "power_w.json is not valid JSON"),
    ("power file wrong shape", dict(GE, power_file="{in}/power_w.json"), "power_w.json: h1.asleep: must be watts"),
    ("power file dir missing", dict(GE, power_file="{tmp}/no/such/power_w.json", power_w={"h1": FIG}),
     "the power file's directory {tmp}/no/such does not exist"),
    ("measured_file relative", dict(GE, measured_file="m.json"), "option measured_file: must be an absolute path"),
    ("measured file not JSON", dict(GE, measured_file="{in}/m.json"), "m.json is not valid JSON"),
    ("measured file reading from a guess", dict(GE, measured_file="{in}/m.json"), "h1.on.source: one of dcmi"),
]

# gear_record: every file under {tmp} (a wrong acceptance writes there: the hash shows it), the
# history prepared per case under {in}.
from ansible.module_utils.fleetnap import gearshift as _gs   # noqa: E402

_LAB = {"lab%d" % n: {"group": (n - 1) % 3 + 1, "rack": "r", "state": "on", "down_method": "suspend",
                      "up_methods": ["wol"]} for n in range(1, 4)}
_PLAN = _gs.plan_shift(_LAB, 3, 3, [1, 2, 3])
_PLAN.update(table=_gs.table(_PLAN["rows"]), power_rows=_gs.power_state_rows(_PLAN["rows"]), date="2026-11-25")
GR = {"plan": _PLAN, "after": _PLAN, "actions": [], "started": "2026-11-25T10:00:00+00:00",
      "started_epoch": 1764064800.0, "state_file": "{tmp}/state.json", "history_file": "{tmp}/history.jsonl",
      "power_file": "{tmp}/power_w.json", "metrics_dir": "{tmp}/metrics"}
_OBS = {n: {"group": h["group"], "rack": "r", "ssh": True, "bmc": None, "down_method": "suspend",
           "up_methods": ["wol"]} for n, h in _LAB.items()}
GEAR_RECORD = [
    ("observe_again_on_failure without the lock", dict(GR, observe_again_on_failure=True),
     "observe_again_on_failure is True but all of the following are missing: lock_file"),
    ("observe_again_on_failure a word", dict(GR, observe_again_on_failure="perhaps"), "observe_again_on_failure"),
    ("plan without rows", dict(GR, plan={k: v for k, v in _PLAN.items() if k != "rows"}),
     "option plan: needs gear_shift_plan's"),
    ("plan result unknown", dict(GR, plan=dict(_PLAN, result="great")), "option plan.result: 'great' is not one of"),
    ("after rows not a list", dict(GR, after=dict(_PLAN, rows="lab1")), "option after.rows: must be a list of rows"),
    ("after down_hosts numbers", dict(GR, after=dict(_PLAN, down_hosts=[1])),
     "option after.down_hosts: must be a list of host names"),
    ("action without ok", dict(GR, actions=[{"host": "lab1"}]), "option actions[0]: needs a host name (host) and ok"),
    ("action ok a string", dict(GR, actions=[{"host": "lab1", "ok": "yes"}]), "option actions[0]"),
    ("result unknown", dict(GR, result="fine"), "value of result must be one of"),
    ("started_epoch nan", dict(GR, started_epoch=NAN), "option started_epoch: must be a finite number"),
    ("started_epoch negative", dict(GR, started_epoch=-5), "option started_epoch: must be >= 0"),
    ("started with a newline", dict(GR, started="2026\nx"), "option started: control characters are not allowed"),
    ("state_file relative", dict(GR, state_file="state.json"), "option state_file: must be an absolute path"),
    ("history_file with ..", dict(GR, history_file="{tmp}/../h.jsonl"), "option history_file: '..' is not allowed"),
    ("state_file directory missing", dict(GR, state_file="{tmp}/no/such/state.json"),
     "option state_file: its directory {tmp}/no/such does not exist"),
    ("metrics_dir a file", dict(GR, metrics_dir="{in}/plain"), "option metrics_dir: {in}/plain is not a directory"),
    ("power figures nan", dict(GR, after=dict(_PLAN, power_w={"lab1": {"on": NAN, "asleep": 5, "off": 3}})),
     "option after.power_w: lab1.on: must be watts"),
    ("history not JSON", dict(GR, history_file="{in}/history.jsonl"), "history.jsonl line 1 is not valid JSON"),
    ("power file not JSON", dict(GR, power_file="{in}/power_w.json"), "power_w.json is not valid JSON"),
    ("state file a directory", dict(GR, state_file="{in}/statedir"), "statedir is a directory, not a file"),
    ("unknown option", dict(GR, colour="red"), "Unsupported parameters"),
    ("lock_file relative", dict(GR, lock_file="shift.lock"), "option lock_file: must be an absolute path"),
    ("after and observed", dict(GR, observed={"lab1": {"group": 1, "ssh": True}}),
     "parameters are mutually exclusive: after|observed"),
    ("neither after nor observed", {k: v for k, v in GR.items() if k != "after"},
     "one of the following is required: after, observed"),
    ("observed_before without observed", dict(GR, observed_before=True),
     "option observed_before: only with observed"),
    ("observed_before a word", dict(GR, observed_before="maybe"), "observed_before"),
    ("observed host without a group", dict({k: v for k, v in GR.items() if k != "after"},
                                           observed={"lab1": {"ssh": True}}), "lab1"),
    ("observed group outside replicas", dict({k: v for k, v in GR.items() if k != "after"},
                                             observed={"lab1": {"group": 7, "ssh": True}}), "lab1"),
    ("observed with a plan without groups_on", dict({k: v for k, v in GR.items() if k != "after"},
                                                    plan={k: v for k, v in _PLAN.items() if k != "groups_on"},
                                                    observed={"lab1": {"group": 1, "ssh": True}}),
     "option plan.groups_on: needs gear_shift_plan's target groups"),
    ("replicas zero", dict({k: v for k, v in GR.items() if k != "after"}, replicas=0,
                           observed={"lab1": {"group": 1, "ssh": True}}), "option replicas: must be >= 1"),
    ("gmin above replicas", dict({k: v for k, v in GR.items() if k != "after"}, gmin=4,
                                 observed={"lab1": {"group": 1, "ssh": True}}), "gmin must be between 1 and replicas"),
    ("measured_file with ..", dict(GR, measured_file="{tmp}/../m.json"), "option measured_file: '..' is not allowed"),
    ("measured file not JSON", dict(GR, measured_file="{in}/m.json"), "m.json is not valid JSON"),
    ("reading not watts", dict({k: v for k, v in GR.items() if k != "after"}, measured_file="{tmp}/m.json",
                               observed=dict(_OBS, lab1=dict(_OBS["lab1"], power_watts="lots", power_source="dcmi"))),
     "lab1: a reading of 'lots' W (on) from 'dcmi' cannot be kept"),
    ("first_observed reading of 9 GW", dict({k: v for k, v in GR.items() if k != "after"}, measured_file="{tmp}/m.json",
                                            observed=_OBS,
                                            first_observed={"lab2": {"ssh": True, "power_watts": 9e9,
                                                                     "power_source": "dcmi"}}),
     "lab2: a reading of 9000000000.0 W (on)"),
    ("first_observed not a dict", dict({k: v for k, v in GR.items() if k != "after"},
                                       observed={"lab1": {"group": 1, "ssh": True}}, first_observed="lab1"),
     "first_observed"),
    # what was given is checked before the lock file and the state file are read: each case's
    # first read would fail otherwise (the lock a directory or a FIFO, the state file a directory)
    ("plan without rows, the lock a directory",
     dict(GR, lock_file="{tmp}", plan={k: v for k, v in _PLAN.items() if k != "rows"}),
     "option plan: needs gear_shift_plan's"),
    ("plan result unknown, the state file a directory",
     dict({k: v for k, v in GR.items() if k != "actions"}, lock_file="{in}/shift.lock", state_file="{in}/statedir",
          plan=dict(_PLAN, result="great")), "option plan.result: 'great' is not one of"),
    ("after down_hosts numbers, the lock a FIFO",
     dict(GR, lock_file="{in}/fifo", after=dict(_PLAN, down_hosts=[1])),
     "option after.down_hosts: must be a list of host names"),
    ("action without ok, the lock a directory", dict(GR, lock_file="{tmp}", actions=[{"host": "lab1"}]),
     "option actions[0]: needs a host name (host) and ok"),
    ("observed_before without observed, the lock a directory",
     dict(GR, lock_file="{tmp}", observed_before=True), "option observed_before: only with observed"),
    ("gmin above replicas, the lock a FIFO",
     dict({k: v for k, v in GR.items() if k != "after"}, lock_file="{in}/fifo", gmin=5,
          observed={"lab1": {"group": 1, "ssh": True}}), "gmin must be between 1 and replicas"),
    ("observed host state bogus, the lock a directory",
     dict({k: v for k, v in GR.items() if k != "after"}, lock_file="{tmp}",
          observed=dict(_OBS, lab1=dict(_OBS["lab1"], state="bogus"))), "host lab1: observed state 'bogus'"),
    ("observed reading not watts, the lock a directory",
     dict({k: v for k, v in GR.items() if k != "after"}, lock_file="{tmp}", measured_file="{tmp}/m.json",
          observed=dict(_OBS, lab1=dict(_OBS["lab1"], power_watts="lots", power_source="dcmi"))),
     "lab1: a reading of 'lots' W (on) from 'dcmi' cannot be kept"),
    ("power figures negative, the lock a directory",
     dict(GR, lock_file="{tmp}", after=dict(_PLAN, power_w={"lab1": {"on": -1, "asleep": 5, "off": 3}})),
     "option after.power_w: lab1.on: must be watts"),
]
PREPARE_GR = {
    "metrics_dir a file": lambda d: _write(d / "plain", "x"),
    "history not JSON": lambda d: _write(d / "history.jsonl", "{gear\n"),
    "power file not JSON": lambda d: _write(d / "power_w.json", "{lab1"),
    "state file a directory": lambda d: (d / "statedir").mkdir(),
    "measured file not JSON": lambda d: _write(d / "m.json", "{lab1"),
    "after down_hosts numbers, the lock a FIFO": lambda d: os.mkfifo(str(d / "fifo")),
    "gmin above replicas, the lock a FIFO": lambda d: os.mkfifo(str(d / "fifo")),
}

# --- gear_journal: the workflow's artifacts, every one an extra variable that may hold anything ----

_J_PLAN = {"gear": 1, "groups_on": [1], "groups_off": [2, 3], "requested": {"gear": 1}, "current_gear": 3,
           "date": "2026-11-21", "result": "ok", "reason": "", "unhealthy": [],
           "rows": [{"host": "lab1", "group": 1, "action": "none"}, {"host": "lab2", "group": 2, "action": "down"}],
           "up_hosts": [], "down_hosts": ["lab2"], "back_hosts": [], "back_actions": [], "wake_phase_hosts": [],
           "wake_batches": [], "down_batches": [["lab2"]], "power_w": {}, "down_methods": {"lab2": "suspend"},
           "parked_states": {"lab2": "asleep"}, "direction": "down", "counts": {"up": 0, "down": 1, "none": 1},
           "power_rows": [], "bmc_check": {"ok": True}, "step_hosts": []}
_J_ART = {"version": 1, "token": "wf-1", "started": "2026-11-29T10:00:00Z", "started_epoch": 1.0, "plan": _J_PLAN,
          "observation": {"lab1": {"ssh": True}, "lab2": {"ssh": True}}}
_J_TAKE = {"action": "take_plan", "journal": _J_ART, "hosts": ["lab2"], "state_file": "{tmp}/state.json",
           "lock_file": "{in}/shift.lock"}
_J_REC = {"action": "take_slices", "journal": _J_ART, "slices": {}, "state_file": "{in}/state.json",
          "lock_file": "{in}/shift.lock"}
_J_SLICE = {"version": 1, "token": "wf-1", "slice": "s1", "hosts": ["lab2"], "actions": [], "failed": []}
GEAR_JOURNAL = [
    ("action unknown", dict(_J_TAKE, action="steal"), "action"),
    ("lock_file missing", {k: v for k, v in _J_TAKE.items() if k != "lock_file"}, "lock_file"),
    ("lock_file relative", dict(_J_TAKE, lock_file="shift.lock"), "option lock_file: must be an absolute path"),
    ("state_file with ..", dict(_J_TAKE, state_file="{tmp}/../state.json"), "option state_file: '..' is not allowed"),
    ("take_plan without journal", {k: v for k, v in _J_TAKE.items() if k != "journal"},
     "option journal: needed with action=take_plan"),
    ("journal not the plan job's", dict(_J_TAKE, journal={"version": 1}), "journal.token: must be the plan job's"),
    ("journal of another fleetnap", dict(_J_TAKE, journal=dict(_J_ART, version=7)), "journal.version: must be 1"),
    ("journal plan without rows", dict(_J_TAKE, journal=dict(_J_ART, plan={k: v for k, v in _J_PLAN.items()
                                                                          if k != "rows"})),
     "not a plan gear_shift_plan returned (missing: rows)"),
    ("journal plan host unknown", dict(_J_TAKE, journal=dict(_J_ART, plan=dict(_J_PLAN, down_hosts=["lab9"]))),
     "plan.down_hosts: host lab9 is not in the plan's rows"),
    ("journal down method forged", dict(_J_TAKE, journal=dict(_J_ART, plan=dict(_J_PLAN, down_methods={"lab2": "rm"}))),
     "plan.down_methods.lab2: must be one of"),
    ("journal epoch infinite", dict(_J_TAKE, journal=dict(_J_ART, started_epoch=float("inf"))),
     "started_epoch: must be seconds since the epoch"),
    ("slice host not planned", dict(_J_TAKE, hosts=["lab2", "lab7"]), "option hosts: lab7 not in the plan"),
    ("slice hosts twice", dict(_J_TAKE, hosts=["lab2", "lab2"]), "option hosts: names a host twice"),
    ("slice lock not held", _J_TAKE, "is not held: take the slice's own lock first"),
    ("publish_slice bad name", {"action": "publish_slice", "state_file": "{tmp}/state.json", "hosts": ["lab2"],
                                "lease_id": "wf-1", "slice": "../x", "lock_file": "{tmp}/shift.lock"},
     "option slice: must be letters, digits and _"),
    ("publish_plan without a lease", {"action": "publish_plan", "lock_file": "{tmp}/shift.lock", "plan": _J_PLAN,
                                      "observation": _J_ART["observation"], "started": "x", "started_epoch": 1.0},
     "is not held by a lease"),
    ("record slice of another shift", dict(_J_REC, slices={"gear_shift_slice_s1": dict(_J_SLICE, token="wf-0")}),
     "belongs to another shift (lease wf-0"),
    ("record slice action not ok/failed", dict(_J_REC, slices={"k": dict(_J_SLICE, actions=[{"host": "lab2"}])}),
     "has no ok (true or false)"),
    ("record slices overlap", dict(_J_REC, slices={"a": _J_SLICE, "b": dict(_J_SLICE, slice="s2")}),
     "lab2 is also a host of slice s1"),
    ("record slices a list", dict(_J_REC, slices=[_J_SLICE]), "slices"),
    ("record lease of another shift", dict(_J_REC, lock_file="{in}/other.lock"),
     "held by the lease wf-2, not this shift's wf-1"),
    ("record without the plan's journal", _J_REC, "holds no plan of the shift lease/wf-1"),
    # the artifacts and options given are checked before the lock file (and state file) are read:
    # each case's lock is missing, a directory or a FIFO
    ("publish_plan plan without rows, no lock",
     {"action": "publish_plan", "lock_file": "{tmp}/shift.lock", "started": "x", "started_epoch": 1.0,
      "plan": {k: v for k, v in _J_PLAN.items() if k != "rows"}, "observation": _J_ART["observation"]},
     "not a plan gear_shift_plan returned (missing: rows)"),
    ("publish_plan started_epoch negative, the lock a directory",
     {"action": "publish_plan", "lock_file": "{tmp}", "started": "x", "started_epoch": -1.0, "plan": _J_PLAN,
      "observation": _J_ART["observation"]}, "started_epoch: must be seconds since the epoch"),
    ("publish_plan observation of an unknown host, the lock a FIFO",
     {"action": "publish_plan", "lock_file": "{in}/fifo", "started": "x", "started_epoch": 1.0, "plan": _J_PLAN,
      "observation": dict(_J_ART["observation"], lab9={"ssh": True})}, "lab9"),
    ("publish_slice lease_id not a token, the lock a directory",
     {"action": "publish_slice", "state_file": "{tmp}/state.json", "hosts": ["lab2"], "lease_id": "bad token!",
      "slice": "s1", "lock_file": "{tmp}"}, "option lease_id: must be the plan job's lease token"),
    ("publish_slice lease_id not a token, the state file a FIFO",
     {"action": "publish_slice", "state_file": "{in}/fifo", "hosts": ["lab2"], "lease_id": "wf-1\n",
      "slice": "s1", "lock_file": "{tmp}/shift.lock"}, "option lease_id: must be the plan job's lease token"),
    ("take_slices overlap, the lock a directory",
     dict(_J_REC, lock_file="{tmp}", slices={"a": _J_SLICE, "b": dict(_J_SLICE, slice="s2")}),
     "lab2 is also a host of slice s1"),
    ("take_slices slice of another shift, no lock",
     dict(_J_REC, lock_file="{tmp}/shift.lock", slices={"k": dict(_J_SLICE, token="wf-0")}),
     "belongs to another shift (lease wf-0"),
    ("take_slices slices a list of lists, the lock a FIFO",
     dict(_J_REC, lock_file="{in}/fifo", slices={"k": [_J_SLICE]}), "option slices.k"),
]


TABLES = {
    "gear_journal": GEAR_JOURNAL,
    "gear_record": GEAR_RECORD,
    "gear_energy": GEAR_ENERGY,
    "gear_wave": GEAR_WAVE,
    "gear_observe": GEAR_OBSERVE,
    "gear_shift_prepare": GEAR_SHIFT_PREPARE,
    "wake_on_lan": WAKE_ON_LAN,
    "cpuidle_info": CPUIDLE_INFO,
    "cstate_residency": CSTATE_RESIDENCY,
    "pm_debug": PM_DEBUG,
    "pm_timeline": PM_TIMELINE,
    "powernap_advice": POWERNAP_ADVICE,
    "resume_summary": RESUME_SUMMARY,
    "fleet_report": FLEET_REPORT,
    "gear_plan": GEAR_PLAN,
    "gear_shift_plan": GEAR_SHIFT_PLAN,
    "shift_lock": SHIFT_LOCK,
}


def _bad_utf8_state(rel):
    def edit(cpu):
        _write(cpu / rel, b"C1\xff\xfe\n")
    return edit


def _live_lock(d):
    # Owned by PID 1 (init, alive) with its real start time: a live owner.
    with open("/proc/1/stat", "rb") as fh:
        start = int(fh.read().decode().rsplit(")", 1)[1].split()[19])
    _write(d / "shift.lock", json.dumps({"pid": 1, "start_time": start, "cmdline": ["init"], "since": "x"}))
    _write(d / "shift.lock.guard", "")     # left by every earlier use of the lock (flock only)


SUMMARY_OK = {"hosts": [{"host": "gw1", "resume_kernel_worst_ms": 1.0, "resume_end_to_end_worst_ms": 2.0}]}

PREPARE = {
    ("cpuidle_info", "per_cpu not a bool"): cpu_tree,
    ("cpuidle_info", "unknown option"): cpu_tree,
    ("cpuidle_info", "state name not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpu0/cpuidle/state1/name")),
    ("cpuidle_info", "online list garbage"): lambda d: cpu_tree(d, lambda c: _write(c / "online", "0-3,banana\n")),
    ("cpuidle_info", "online list not UTF-8"): lambda d: cpu_tree(d, lambda c: _write(c / "online", b"0-\xff\n")),
    ("cpuidle_info", "present list huge range"): lambda d: cpu_tree(d, lambda c: _write(c / "present", "0-99999999999\n")),
    ("cpuidle_info", "governor not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpuidle/current_governor")),
    ("cpuidle_info", "latency not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpu1/cpuidle/state2/latency")),
    ("cpuidle_info", "sysfs_root a symlink loop"): lambda d: (d / "loop").symlink_to(d / "loop"),
    ("cstate_residency", "directory relative"): cpu_tree,
    ("cstate_residency", "directory with .."): cpu_tree,
    ("cstate_residency", "directory with NUL"): cpu_tree,
    ("cstate_residency", "directory missing"): cpu_tree,
    ("cstate_residency", "directory a file"): cpu_tree,
    ("cstate_residency", "directory 5000 characters"): cpu_tree,
    ("cstate_residency", "unknown option"): cpu_tree,
    ("cstate_residency", "state name not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpu0/cpuidle/state1/name")),
    ("cstate_residency", "online list garbage"): lambda d: cpu_tree(d, lambda c: _write(c / "online", "x\n")),
    ("cstate_residency", "usage not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpu0/cpuidle/state1/usage")),
    ("cstate_residency", "desc not UTF-8"): lambda d: cpu_tree(d, _bad_utf8_state("cpu0/cpuidle/state1/desc")),
    ("cstate_residency", "state name of 2000 characters"):
        lambda d: cpu_tree(d, lambda c: _write(c / "cpu0/cpuidle/state1/name", "C" * 2000 + "\n")),
    ("cstate_residency", "output name is a directory"):
        lambda d: (cpu_tree(d), (d / "out/fleetnap_cstate_residency.prom").mkdir(parents=True)),
    ("pm_debug", "no knob given"): power_tree,
    ("pm_debug", "knob not a bool"): power_tree,
    ("pm_debug", "knob not UTF-8"): lambda d: power_tree(d, print_times=b"\xff\n"),
    ("pm_debug", "other knob not UTF-8"): lambda d: power_tree(d, debug_messages=b"1\xc3\n"),
    ("pm_debug", "knob holds garbage"): lambda d: power_tree(d, print_times=b"yes please\n"),
    ("pm_debug", "knob holds 2"): lambda d: power_tree(d, print_times=b"2\n"),
    ("pm_debug", "knob empty"): lambda d: power_tree(d, print_times=b""),
    ("pm_debug", "knob read-only"): lambda d: (power_tree(d), (d / "root/sys/power/pm_debug_messages").chmod(0o444)),
    ("pm_debug", "knob a directory"):
        lambda d: (power_tree(d), (d / "root/sys/power/pm_print_times").unlink(),
                   (d / "root/sys/power/pm_print_times").mkdir()),
    ("pm_debug", "unknown option"): power_tree,
    ("pm_timeline", "src not UTF-8"): lambda d: _write(d / "dmesg.txt", LOG.encode() + b"[  100.1] \xff\xfe\n"),
    ("pm_timeline", "src empty"): lambda d: _write(d / "dmesg.txt", b""),
    ("pm_timeline", "src binary"): lambda d: _write(d / "dmesg.txt", bytes(range(256)) * 64),
    ("pm_timeline", "src cut in the suspend"): lambda d: _write(d / "dmesg.txt", LOG),
}
for _case in ("since nan", "since inf", "since negative", "top negative", "top a billion", "min_saving_ms nan",
              "min_saving_ms inf", "html_dest relative", "html_dest with ..", "html_dest a directory",
              "html_dest in a missing directory", "title with control characters", "cycle unknown"):
    PREPARE[("pm_timeline", _case)] = lambda d: _write(d / "dmesg.txt", LOG)
_FR = {
    "decisions not UTF-8": artifact("profile/decisions.json", b'{"gw1": {"sleep": "\xff"}}'),
    "decisions a list": artifact("profile/decisions.json", [1, 2]),
    "decision of a host a string": artifact("profile/decisions.json", {"gw1": "allowed"}),
    "decision states not a list": artifact("profile/decisions.json", {"gw1": {"states": "C1"}}),
    "summary hosts a dict": artifact("resume/summary.json", {"hosts": {"gw1": {}}}),
    "summary host ms a string": artifact("resume/summary.json", {"hosts": [{"host": "gw1", "resume_kernel_worst_ms": "x"}]}),
    "summary ms nan": artifact("resume/summary.json",
                               '{"hosts": [{"host": "gw1", "resume_end_to_end_worst_ms": NaN}]}'),
    "summary failed not a list": artifact("resume/summary.json", dict(SUMMARY_OK, failed=5)),
    "wake latency a list": artifact("wake-latency/gw1.json", [{"states": []}]),
    "wake latency states entries not objects": artifact("wake-latency/gw1.json", {"host": "gw1", "states": ["C1"]}),
    "wake latency not JSON": artifact("wake-latency/gw1.json", "{"),
    "state a list": artifact("gear/state.json", []),
    "state hosts a list": artifact("gear/state.json", {"gear": 1, "hosts": ["lab1"]}),
    "history gear a string": artifact("gear/history.jsonl", '{"gear": "three"}\n'),
    "history line a list": artifact("gear/history.jsonl", '{"gear": 3}\n[3]\n'),
    "history not UTF-8": artifact("gear/history.jsonl", b'{"gear": 3, "finished": "\xff"}\n'),
    "old report not UTF-8 is replaced, artifact bad":
        lambda d: (_write(d / "old.html", b"\xff\xfe old"), artifact("gear/state.json", [])(d)),
}
for _case in ("artifacts_dir relative", "artifacts_dir with ..", "dest relative", "dest a directory",
              "dest in a missing directory", "title with control characters"):
    _FR[_case] = lambda d: (d / "art").mkdir()
for _case, _prep in _FR.items():
    PREPARE[("fleet_report", _case)] = _prep
_BAD_CSV = {
    "load_csv not UTF-8": HEAD.encode() + b"2024-01-01T00:30:00Z,1,1,1,1\n2024-01-01T01:30:00Z,\xff,1,1,1\n",
    "load_csv timestamp nan": HEAD + "nan,1,1,1,1\n",
    "load_csv timestamp inf": HEAD + "inf,1,1,1,1\n",
    "load_csv timestamp 1e300": HEAD + "1e300,1,1,1,1\n",
    "load_csv huge field": HEAD + "2024-01-01T00:30:00Z," + "1" * 200000 + ",1,1,1\n",
    "load_csv rate nan": HEAD + "2024-01-01T00:30:00Z,nan,1,1,1\n",
    "load_csv NUL byte": HEAD + "2024-01-01T00:30:00Z,1\x00,1,1,1\n",
}
for _case, _text in _BAD_CSV.items():
    PREPARE[("gear_plan", _case)] = (lambda t: lambda d: _write(d / "load.csv", t))(_text)
PREPARE[("gear_plan", "gmin above replicas, load_csv a FIFO")] = lambda d: os.mkfifo(str(d / "load.csv"))
for _case in ("layout host a string", "layout gear_group inf", "replica_map holders a number",
              "servers 0", "servers a billion", "replicas a million", "gmin 0", "capacity nan", "capacity inf",
              "capacity 0", "train_days a million", "min_copies a million", "at nan", "at 1e300",
              "date year 10000", "timezone with ..", "unit_prefix with a slash", "unit_prefix upper case",
              "installed_units without unit_prefix", "installed_units relative", "installed_units with ..",
              "installed_units a string", "cron_command two lines"):
    PREPARE[("gear_plan", _case)] = lambda d: _write(d / "load.csv", csv_day())
_STATES = {
    "state not UTF-8": b'{"hosts": {"lab1": {"state": "on", "note": "\xff"}}}',
    "state not JSON": "{hosts",
    "state a list": [],
    "state hosts a list": {"hosts": ["lab1"]},
    "state host a string": {"hosts": {"lab1": "on"}},
    "state host state unknown word": {"hosts": {"lab1": {"state": "dozing"}}},
    "state too big": ('{"hosts": {}, "pad": "' + "x" * (17 * 1024 * 1024) + '"}'),
}
for _case, _doc in _STATES.items():
    PREPARE[("gear_shift_plan", _case)] = state_file(_doc)
PREPARE[("gear_shift_plan", "parked since not a time")] = state_file({"hosts": {"lab1": {"state": "asleep",
                                                                                        "since": "last night"}}})
_GOOD = json.dumps({"finished": "2026-11-25T00:00:00+00:00", "gear": 1, "power": {"h1": "asleep"}}) + "\n"
_HISTORIES = {
    "history not JSON": _GOOD + "{gear\n",
    "history not UTF-8": _GOOD.encode() + b'{"note": "\xff"}\n',
    "history time not UTC": _GOOD.replace("+00:00", "+02:00"),
    "history state unknown word": _GOOD.replace("asleep", "dozing"),
}
for _case, _text in _HISTORIES.items():
    PREPARE[("gear_energy", _case)] = (lambda t: lambda d: _write(d / "history.jsonl", t))(_text)


def _history_too_big(d):
    # A history may reach 64 MiB (fileio.LOG, a shift history); one a byte over it is refused
    # from its size before it is read (the file is sparse: it costs no disk).
    _write(d / "history.jsonl", _GOOD)
    os.truncate(d / "history.jsonl", 64 * 1024 * 1024 + 1)


PREPARE[("gear_energy", "history too big")] = _history_too_big
for _case in ("power file not JSON", "power file wrong shape"):
    PREPARE[("gear_energy", _case)] = (lambda c: lambda d: (
        _write(d / "history.jsonl", _GOOD),
        _write(d / "power_w.json", "{h1" if c == "power file not JSON" else
               json.dumps({"h1": {"on": 130, "asleep": "five", "off": 3}}))))(_case)
PREPARE[("gear_energy", "measured file not JSON")] = lambda d: (_write(d / "history.jsonl", _GOOD),
                                                               _write(d / "m.json", "{h1"))
PREPARE[("gear_energy", "measured file reading from a guess")] = lambda d: (
    _write(d / "history.jsonl", _GOOD),
    _write(d / "m.json", json.dumps({"h1": {"on": {"watts": 1, "readings": [1], "date": "2026-11-26T10:00:00+00:00",
                                                   "source": "guess"}}})))
PREPARE[("gear_shift_plan", "s3 record not JSON")] = lambda d: _write(d / "lab1" / "s3.json", "{ok")
PREPARE[("gear_shift_plan", "s3 record without ok")] = lambda d: _write(d / "lab1" / "s3.json", '{"cycles": 3}')
PREPARE[("gear_observe", "state file not JSON")] = lambda d: _write(d / "state.json", "{hosts")
PREPARE[("gear_observe", "inventory names an observation, the state file not JSON")] = \
    lambda d: _write(d / "state.json", "{hosts")
PREPARE[("gear_shift_plan", "host group 1.5, the state file a FIFO")] = lambda d: os.mkfifo(str(d / "fifo"))
PREPARE[("gear_shift_plan", "wake_batch_size half, the state file a FIFO")] = lambda d: os.mkfifo(str(d / "fifo"))
PREPARE[("gear_shift_plan", "host ssh a word, the state file not JSON")] = state_file("{hosts")
PREPARE[("gear_shift_plan", "down_method nap, the s3 record not JSON")] = lambda d: _write(d / "lab1" / "s3.json", "{ok")
PREPARE[("gear_record", "plan result unknown, the state file a directory")] = \
    lambda d: (_lease("shift.lock", "wf-1")(d), (d / "statedir").mkdir())
for _case in ("publish_plan observation of an unknown host, the lock a FIFO",
              "publish_slice lease_id not a token, the state file a FIFO",
              "take_slices slices a list of lists, the lock a FIFO"):
    PREPARE[("gear_journal", _case)] = lambda d: os.mkfifo(str(d / "fifo"))
PREPARE[("gear_wave", "journal state file not JSON")] = lambda d: _write(d / "state.json", "{hosts")
for _case, _f in PREPARE_GR.items():
    PREPARE[("gear_record", _case)] = _f
PREPARE[("shift_lock", "held by a live process")] = _live_lock
PREPARE[("gear_shift_prepare", "held by a live process")] = _live_lock
for _case in ("state file not JSON, after the lock", "state file not JSON, the lock released"):
    PREPARE[("gear_shift_prepare", _case)] = lambda d: (_write(d / "state.json", "{hosts"),
                                                        _write(d / "shift.lock.guard", ""))
for _case in ("s3 record not JSON, after the lock", "s3 record not JSON, the lock released"):
    PREPARE[("gear_shift_prepare", _case)] = lambda d: (_write(d / "h1" / "s3.json", "{ok"),
                                                        _write(d / "shift.lock.guard", ""))


def _lease(name, token):
    return lambda d: _write(d / name, json.dumps({"token": token, "since": "2026-11-29T10:00:00Z",
                                                  "expires": int(time.time()) + 3600}))


PREPARE[("gear_journal", "record lease of another shift")] = _lease("other.lock", "wf-2")
PREPARE[("gear_journal", "record without the plan's journal")] = _lease("shift.lock", "wf-1")
for _case in ("record slice of another shift", "record slice action not ok/failed", "record slices overlap",
              "record slices a list"):
    PREPARE[("gear_journal", _case)] = _lease("shift.lock", "wf-1")
PREPARE[("shift_lock", "release of a live process's lock")] = _live_lock


# --- the runner: tests/badinput.py (run_prepared) -----------------------------------------------


CASES = case_params(TABLES)


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    run = run_prepared(module, TABLES[module], {c: f for (m, c), f in PREPARE.items() if m == module},
                       tmp_path_factory)
    assert_refused_prepared(run, index, words)


def test_every_table_has_at_least_15_cases():
    assert set(TABLES) == {"gear_journal", "gear_record", "gear_energy", "gear_wave", "gear_observe",
                           "gear_shift_prepare", "wake_on_lan", "cpuidle_info", "cstate_residency", "pm_debug", "pm_timeline",
                           "powernap_advice", "resume_summary", "fleet_report", "gear_plan", "gear_shift_plan",
                           "shift_lock"}
    for module, table in TABLES.items():
        assert len(table) >= 15, "%s: %d cases" % (module, len(table))


def test_every_prepared_case_exists():
    cases = {(m, c) for m, t in TABLES.items() for c, _a, _w in t}
    assert set(PREPARE) <= cases, set(PREPARE) - cases
