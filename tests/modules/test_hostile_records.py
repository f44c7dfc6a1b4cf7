"""Hostile files for the modules that read and write records, histories, reports and the
controller's files (issue 31, and issue 33's shift_lock / gear_state parts), run through Ansible.

One table per module, each ONE ansible-playbook run (tests/badinput.py run_prepared): every case
is refused with words naming the file and what is wrong, no traceback, within the bound, the
module's peak memory under 200 MiB, and nothing changed: the case's {in} and {tmp} directories
are hashed before and after, and every file outside them a case points a link at is compared
byte for byte afterwards (``OUTSIDE``).

Kinds (tests/hostile.py): FIFO, socket, device, link out of the state/artifacts directory, link
to /dev/zero, huge file (2 GiB sparse, kept beside the case directory, ``{in}-big``, so the
hashing of {in} does not read it), 400-digit numbers, Unicode digits, deep JSON, lone
surrogates, a date in year 1, immutable file, append-only directory, full filesystem (a small
tmpfs, filled).

The tables run their modules as ``ansible.legacy.NAME``: the same module, under a name of its own
for the runner's per-session cache (test_bad_inputs*.py run the plain names).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import hostile
from badinput import assert_refused_prepared, case_params, run_prepared
from conftest import REPO

from ansible.module_utils.fleetnap import gearshift as _gs

GOLDEN_LOG = REPO / "tests" / "golden" / "lab1-console-6.1-3cycles.txt"
D400 = "9" * 400
OUTSIDE: dict = {}          # (module, case) -> (relative path beside {in}, bytes it must still hold)


def _w(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def kind(rel, name, content=None):
    """Prepare: ``content`` (if any) written to {in}/rel first, then rel made the hostile kind."""
    def prep(d):
        if content is not None:
            _w(d / rel, content)
        hostile.make(d / rel, name)
    return prep


def link_out(rel, content="as it was outside\n"):
    """{in}/rel becomes a link to a file beside the case directory (outside it), whose content
    must be the same afterwards."""
    def prep(d):
        outside = Path(str(d) + "-outside") / Path(rel).name
        _w(outside, content)
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        hostile.link_out(d / rel, outside)
    prep.outside = (Path(rel).name, content.encode())
    return prep


def huge(rel):
    """A 2 GiB sparse file at {in}-big/rel (beside the case directory, not hashed)."""
    def prep(d):
        target = Path(str(d) + "-big") / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        hostile.huge(target)
    return prep


def full(rel_dir, files=None):
    """{in}/rel_dir a small tmpfs, filled (the files given are put there first)."""
    def prep(d):
        for rel, content in (files or {}).items():
            _w(d / rel_dir / rel, content)
        hostile.full_fs(d / rel_dir)
    return prep


def both(*preps):
    def prep(d):
        for p in preps:
            p(d)
    for p in preps:
        if hasattr(p, "outside"):
            prep.outside = p.outside
    return prep


def table(module, cases):
    """cases: (name, args, words, prepare) -> the runner's table and prepare dict."""
    rows = [(name, args, words) for name, args, words, _p in cases]
    prepare = {name: p for name, _a, _w, p in cases if p is not None}
    for name, _a, _w, p in cases:
        if p is not None and hasattr(p, "outside"):
            OUTSIDE[(module, name)] = p.outside
    return rows, prepare


# --- gear_state: the state file it reads and rewrites ----------------------------------------------

ROWS = [{"host": "n2", "action": "down", "method": "suspend"}]
GS = {"path": "{in}/gear/state.json", "event": "before_down", "hosts": ["n2"], "rows": ROWS}
STATE = '{"hosts": {"n2": {"state": "on"}}}\n'
GEAR_STATE = [
    ("state file a FIFO", GS, "state file {in}/gear/state.json is a FIFO", kind("gear/state.json", "fifo")),
    ("state file a socket", GS, "is a socket, not a regular file", kind("gear/state.json", "socket")),
    ("state file a device", GS, "is a character device, not a regular file", kind("gear/state.json", "device")),
    ("state file a link out of its directory", GS, "leaves the root", link_out("gear/state.json", STATE)),
    ("state file a link to /dev/zero", GS, "leaves the root", kind("gear/state.json", "link to /dev/zero")),
    ("state file 2 GiB", dict(GS, path="{in}-big/gear/state.json"), "is larger than 16 MiB", huge("gear/state.json")),
    ("state file a 400-digit number", GS, "holds a number of 400 digits",
     lambda d: _w(d / "gear/state.json", '{"hosts": {"n2": {"state": "on", "n": %s}}}' % D400)),
    # issue 33: the message names what is wrong with the file it read, not "could not write".
    ("state file 1e999", GS, "state file {in}/gear/state.json holds 1e999, which is not a finite number",
     lambda d: _w(d / "gear/state.json", '{"hosts": {"n2": {"state": "on", "wait_s": 1e999}}}')),
    ("state file nested 600 deep", GS, "nests 600 levels deep", kind("gear/state.json", "deep JSON")),
    ("state file a lone surrogate", GS, "lone surrogate", kind("gear/state.json", "lone surrogate")),
    ("state file immutable", GS, "could not write the state file {in}/gear/state.json",
     kind("gear/state.json", "immutable", STATE)),
    ("state directory append-only", GS, "immutable or append-only",
     lambda d: (_w(d / "gear/state.json", STATE), hostile.append_only_dir(d / "gear"))),
    ("state directory full", GS, "No space left on device", full("gear", {"state.json": STATE})),
    ("host name ending in a newline", dict(GS, hosts=["n2\n"], rows=[dict(ROWS[0], host="n2\n")]),
     "option hosts[0]: must be an inventory host name", lambda d: _w(d / "gear/state.json", STATE)),
    ("host name with a Unicode digit", dict(GS, hosts=["n\u00b2"]), "option hosts[0]: must be an inventory host name",
     lambda d: _w(d / "gear/state.json", STATE)),
]

# --- gear_energy: the history it reads, the power file it rewrites ---------------------------------

GOOD = json.dumps({"finished": "2026-11-25T00:00:00+00:00", "gear": 1, "power": {"h1": "asleep"}}) + "\n"
FIG = {"on": 130, "asleep": 5, "off": 3}
GE = {"history_file": "{in}/gear/history.jsonl", "power_file": "{tmp}/power_w.json"}
GEW = dict(GE, power_file="{in}/gear/power_w.json", power_w={"h1": FIG})
HIST = "gear/history.jsonl"
GEAR_ENERGY = [
    ("history a FIFO", GE, "gear history {in}/gear/history.jsonl is a FIFO", kind(HIST, "fifo")),
    ("history a socket", GE, "is a socket", kind(HIST, "socket")),
    ("history a device", GE, "is a character device", kind(HIST, "device")),
    ("history a link out of its directory", GE, "leaves the root", link_out(HIST, GOOD)),
    ("history a link to /dev/zero", GE, "leaves the root", kind(HIST, "link to /dev/zero")),
    ("history 2 GiB", dict(GE, history_file="{in}-big/gear/history.jsonl"), "is larger than 64 MiB", huge(HIST)),
    # Once a walk over every hour since year 1 (100-130 s); now refused naming the file and line.
    ("history dated in year 1", GE, "{in}/gear/history.jsonl line 2: finished is outside 2000-01-01 .. a year from now (it is 1-01-01)",
     lambda d: _w(d / HIST, GOOD + GOOD.replace("2026-11-25", "0001-01-01"))),
    ("history dated in year 9999", GE, "is outside 2000-01-01 .. a year from now",
     lambda d: _w(d / HIST, GOOD.replace("2026-11-25", "9999-12-31"))),
    ("history a 400-digit number", GE, "holds a number of 400 digits",
     lambda d: _w(d / HIST, GOOD.replace('"gear": 1', '"gear": ' + D400))),
    ("history Unicode digits in a date", GE, "line 1: finished: expected an ISO time in ASCII digits",
     lambda d: _w(d / HIST, GOOD.replace("2026", "\uff12\uff10\uff12\uff16"))),
    ("history line nested 600 deep", GE, "line 1 nests 600 levels deep", kind(HIST, "deep JSON")),
    ("history a lone surrogate", GE, "lone surrogate", kind(HIST, "lone surrogate")),
    ("power file nested 600 deep", dict(GE, power_file="{in}/gear/power_w.json"), "nests 600 levels deep",
     both(lambda d: _w(d / HIST, GOOD), kind("gear/power_w.json", "deep JSON"))),
    ("power file immutable", GEW, "could not write the power file {in}/gear/power_w.json",
     both(lambda d: _w(d / HIST, GOOD), kind("gear/power_w.json", "immutable", "{}\n"))),
    ("power directory append-only", GEW, "immutable or append-only",
     lambda d: (_w(d / HIST, GOOD), _w(d / "gear/power_w.json", "{}\n"), hostile.append_only_dir(d / "gear"))),
    ("power directory full", GEW, "No space left on device", full("gear", {"history.jsonl": GOOD, "power_w.json": "{}\n"})),
]

# --- gear_record: state, history, power and metrics written in one batch ----------------------------

_LAB = {"lab%d" % n: {"group": (n - 1) % 3 + 1, "rack": "r", "state": "on", "down_method": "suspend",
                      "up_methods": ["wol"]} for n in range(1, 7)}
PLAN = _gs.plan_shift(_LAB, 3, 3, [1, 2, 3])
PLAN.update(table=_gs.table(PLAN["rows"]), power_rows=_gs.power_state_rows(PLAN["rows"]), date="2026-11-25")
GR = {"plan": PLAN, "after": PLAN, "actions": [], "started": "2026-11-25T10:00:00+00:00",
      "started_epoch": 1764064800.0, "state_file": "{in}/gear/state.json", "history_file": "{in}/gear/history.jsonl",
      "power_file": "{in}/gear/power_w.json", "metrics_dir": "{in}/metrics"}
OLD_STATE = '{"gear": 3, "hosts": {}}\n'


def gear_dir(d):
    _w(d / "gear/state.json", OLD_STATE)
    _w(d / HIST, GOOD)
    (d / "metrics").mkdir()


_DUP = dict(PLAN, rows=PLAN["rows"] + [PLAN["rows"][0]])
_OBSERVED = {k: v for k, v in GR.items() if k != "after"}
GEAR_RECORD = [
    ("history a FIFO", GR, "option history_file: cannot write {in}/gear/history.jsonl: {in}/gear/history.jsonl is a "
     "FIFO, not a regular file", both(gear_dir, kind(HIST, "fifo"))),
    ("history a link out of its directory", GR, "leaves the root", both(gear_dir, link_out(HIST, GOOD))),
    ("history dated in year 1", GR, "history.jsonl line 1: finished is outside 2000-01-01 .. a year from now (it is 1-01-01)",
     both(gear_dir, lambda d: _w(d / HIST, GOOD.replace("2026-11-25", "0001-01-01")))),
    ("history a lone surrogate", GR, "lone surrogate", both(gear_dir, kind(HIST, "lone surrogate"))),
    ("state file a link out of its directory", GR, "option state_file: {in}/gear/state.json leaves the root",
     both(gear_dir, link_out("gear/state.json", OLD_STATE))),
    ("state file immutable", GR, "option state_file: cannot write {in}/gear/state.json: ",
     both(gear_dir, kind("gear/state.json", "immutable"))),
    ("history immutable", GR, "option history_file: cannot write", both(gear_dir, kind(HIST, "immutable"))),
    ("state directory append-only", GR, "immutable or append-only (lsattr -d shows it",
     both(gear_dir, lambda d: hostile.append_only_dir(d / "gear"))),
    ("power file nested 600 deep", GR, "power file {in}/gear/power_w.json nests 600 levels deep",
     both(gear_dir, kind("gear/power_w.json", "deep JSON"))),
    ("power file a 400-digit number", GR, "holds a number of 400 digits",
     both(gear_dir, lambda d: _w(d / "gear/power_w.json", '{"lab1": {"on": %s, "asleep": 1, "off": 1}}' % D400))),
    # The state file and the history are written, then the metrics fail on a full filesystem:
    # the whole call is undone and the message says so.
    ("metrics directory full after two writes", GR,
     "could not write {in}/metrics/fleetnap_gear.prom: cannot write {in}/metrics/fleetnap_gear.prom: No space left "
     "on device; this call's 2 change(s) were undone, the host is as it was",
     both(gear_dir, lambda d: hostile.full_fs(d / "metrics"))),
    ("two rows for one host", dict(GR, after=_DUP), "two rows for host '%s'" % PLAN["rows"][0]["host"], gear_dir),
    ("a list where a host name belongs", dict(_OBSERVED, plan=dict(PLAN, down_hosts=[]), observed_before=True,
                                              observed={"lab1": {"group": 1, "ssh": True}},
                                              actions=[{"host": ["lab1"], "action": "up", "ok": True}]),
     "option actions[0]: needs a host name (host)", gear_dir),
]

# --- fleet_report: every artifact under artifacts_dir, the page it writes ---------------------------

FR = {"artifacts_dir": "{in}/art", "dest": "{tmp}/report.html"}
STATE_ART = json.dumps({"gear": 1, "target_gear": 1, "hosts": {}})


def art(rel, name=None, content=None):
    def prep(d):
        (d / "art").mkdir(exist_ok=True)
        if content is not None:
            _w(d / "art" / rel, content)
        if name:
            hostile.make(d / "art" / rel, name)
    return prep


FLEET_REPORT = [
    ("state a FIFO", FR, "artifact {in}/art/gear/state.json is a FIFO", art("gear/state.json", "fifo")),
    ("decisions a socket", FR, "decisions.json is a socket", art("profile/decisions.json", "socket")),
    ("summary a device", FR, "summary.json is a character device", art("resume/summary.json", "device")),
    ("summary a link out of artifacts_dir", FR, "leaves the root",
     both(art("resume/summary.json", content="{}"), link_out("art/resume/summary.json", '{"hosts": []}'))),
    ("wake latency a link to /dev/zero", FR, "leaves the root", art("wake-latency/gw1.json", "link to /dev/zero")),
    ("history 2 GiB", dict(FR, artifacts_dir="{in}-big/art"), "is larger than 64 MiB", huge("art/gear/history.jsonl")),
    ("history dated in year 1", FR, "history.jsonl line 1: finished is outside 2000-01-01 .. a year from now (it is 1-01-01)",
     art("gear/history.jsonl", content=GOOD.replace("2026-11-25", "0001-01-01"))),
    ("decisions a 400-digit budget", FR, "holds a number of 400 digits",
     art("profile/decisions.json", content='{"gw1": {"budget_us": %s}}' % D400)),
    ("summary nested 600 deep", FR, "summary.json nests 600 levels deep", art("resume/summary.json", "deep JSON")),
    ("state a lone surrogate", FR, "state.json holds a string with a lone surrogate",
     art("gear/state.json", "lone surrogate")),
    ("dest immutable", dict(FR, dest="{in}/report.html"), "cannot write dest {in}/report.html",
     both(art("gear/state.json", content=STATE_ART), kind("report.html", "immutable"))),
    ("dest directory append-only", dict(FR, dest="{in}/out/report.html"), "immutable or append-only",
     both(art("gear/state.json", content=STATE_ART), lambda d: hostile.append_only_dir(d / "out"))),
    ("dest directory full", dict(FR, dest="{in}/out/report.html"), "No space left on device",
     both(art("gear/state.json", content=STATE_ART), full("out"))),
]

# --- pm_timeline: the saved log it reads, the pages it writes ---------------------------------------

PT = {"src": "{in}/dmesg.txt"}
PTH = dict(PT, html_dest="{in}/out/timeline.html")


def golden(d):
    _w(d / "dmesg.txt", GOLDEN_LOG.read_bytes())


PM_TIMELINE = [
    ("src a FIFO", PT, "src {in}/dmesg.txt is a FIFO", kind("dmesg.txt", "fifo")),
    ("src a socket", PT, "is a socket", kind("dmesg.txt", "socket")),
    ("src a device", PT, "is a character device", kind("dmesg.txt", "device")),
    ("src a link to /dev/zero", PT, "is a character device", kind("dmesg.txt", "link to /dev/zero")),
    ("src 2 GiB", dict(PT, src="{in}-big/dmesg.txt"), "is larger than 64 MiB", huge("dmesg.txt")),
    ("html_dest immutable", PTH, "cannot write html_dest {in}/out/timeline.html",
     both(golden, kind("out/timeline.html", "immutable"))),
    ("html_dest directory append-only", PTH, "immutable or append-only (lsattr -d shows it",
     both(golden, lambda d: hostile.append_only_dir(d / "out"))),
    ("html_dest directory full", PTH, "No space left on device; nothing had been changed", both(golden, full("out"))),
    ("html_dest a FIFO", PTH, "is a FIFO", both(golden, kind("out/timeline.html", "fifo"))),
]

# --- powernap_advice: the SVG it writes, its numbers ------------------------------------------------

PA = {"transition_latency_s": 0.01, "utilization": 0.2}
PAS = dict(PA, svg_dest="{in}/out/p.svg")
POWERNAP_ADVICE = [
    ("svg_dest a FIFO", PAS, "is a FIFO", kind("out/p.svg", "fifo")),
    ("svg_dest a link to /dev/zero", PAS, "leaves the root", kind("out/p.svg", "link to /dev/zero")),
    ("svg_dest immutable", PAS, "cannot write svg_dest {in}/out/p.svg", kind("out/p.svg", "immutable")),
    ("svg_dest directory append-only", PAS, "immutable or append-only",
     lambda d: hostile.append_only_dir(d / "out")),
    ("svg_dest directory full", PAS, "No space left on device", full("out")),
    # Once a ZeroDivisionError at zero utilisation.
    ("tiny dvfs_min_frequency at zero utilisation", dict(PA, utilization=0.0, dvfs_min_frequency=1e-200),
     "option dvfs_min_frequency: must be >= 0.01", None),
    ("utilization a 400-digit number", dict(PA, utilization="[%s]" % D400), "holds a number of 400 digits", None),
    ("utilization Unicode digits", dict(PA, utilization="\u0660.\u0665"), "ASCII digits", None),
    ("utilization nested 600 deep", dict(PA, utilization="[" * 600 + "]" * 600), "nests 600 levels deep", None),
]

# --- shift_lock: the lock, its guard -----------------------------------------------------------------

SL = {"path": "{in}/shift.lock", "pid": os.getpid()}
LOCK = {"pid": 1, "start_time": 1, "cmdline": ["init"], "since": "2026-11-25T10:00:00Z", "purpose": ""}
SHIFT_LOCK = [
    ("lock a FIFO", SL, "lock {in}/shift.lock is a FIFO", kind("shift.lock", "fifo")),
    ("lock a socket", SL, "is a socket", kind("shift.lock", "socket")),
    ("lock a device", SL, "is a character device", kind("shift.lock", "device")),
    # issue 33: once "PID None".
    ("lock a dangling symlink", SL, "is a symbolic link to {in}/nowhere, which does not exist (a dangling link)",
     lambda d: (d / "shift.lock").symlink_to(d / "nowhere")),
    ("lock a link to /dev/zero", SL, "is a symbolic link to /dev/zero", kind("shift.lock", "link to /dev/zero")),
    ("lock 2 GiB", dict(SL, path="{in}-big/shift.lock"), "is larger than 64 KiB", huge("shift.lock")),
    # issue 32: once a TypeError.
    ("lock cmdline a number", SL, "lock {in}/shift.lock: field cmdline must be a list of strings, got 42",
     lambda d: _w(d / "shift.lock", json.dumps(dict(LOCK, cmdline=42)))),
    ("lock pid Unicode digits", SL, "field pid must be a whole number",
     lambda d: _w(d / "shift.lock", json.dumps(dict(LOCK, pid="1\u00b2")))),
    ("lock pid 400 digits", SL, "holds a number of 400 digits",
     lambda d: _w(d / "shift.lock", '{"pid": %s, "start_time": 1}' % D400)),
    ("lock nested 600 deep", SL, "nests 600 levels deep", kind("shift.lock", "deep JSON")),
    ("lock a lone surrogate", SL, "lone surrogate", kind("shift.lock", "lone surrogate")),
    ("guard a link out of the directory", SL, "cannot open the lock guard {in}/shift.lock.guard",
     link_out("shift.lock.guard", "")),
    ("lock directory append-only", SL, "immutable or append-only", lambda d: hostile.append_only_dir(d)),
    ("lock directory full", dict(SL, path="{in}/locks/shift.lock"), "No space left on device", full("locks")),
]

# --- gear_plan: the load CSV ---------------------------------------------------------------------------

CAP = {"server_read_iops": 100, "server_write_iops": 50, "server_read_mbps": 10, "server_write_mbps": 5}
GP = dict(CAP, servers=30, replicas=3, gmin=1, load_csv="{in}/load.csv", date="2024-01-02", at="2024-01-02T10:00:00Z")
HEAD = "timestamp,read_iops,write_iops,read_mbps,write_mbps\n"
GEAR_PLAN = [
    ("load_csv a FIFO", GP, "load_csv {in}/load.csv is a FIFO", kind("load.csv", "fifo")),
    ("load_csv a device", GP, "is a character device", kind("load.csv", "device")),
    ("load_csv 2 GiB", dict(GP, load_csv="{in}-big/load.csv"), "is larger than 64 MiB", huge("load.csv")),
    ("load_csv dated in year 1", GP, "{in}/load.csv line 2: timestamp '0001-01-01T00:30:00Z' is outside "
     "2000-01-01 .. a year from now (it is 1-01-01)", lambda d: _w(d / "load.csv", HEAD + "0001-01-01T00:30:00Z,1,1,1,1\n")),
    ("load_csv Unix seconds 0", GP, "line 2: timestamp '0' is outside 2000-01-01 .. a year from now (it is 1970-01-01)",
     lambda d: _w(d / "load.csv", HEAD + "0,1,1,1,1\n")),
    ("load_csv a 400-digit rate", GP, "line 2: read_iops is", lambda d: _w(d / "load.csv", HEAD + "1704067200,%s,1,1,1\n" % D400)),
    ("load_csv Arabic-Indic digits", GP, "line 2: read_iops is '\u0661\u0660': numbers and times in ASCII digits only",
     lambda d: _w(d / "load.csv", HEAD + "1704067200,\u0661\u0660,1,1,1\n")),
]

TABLES = {}
PREPARE = {}
for _module, _cases in (("gear_state", GEAR_STATE), ("gear_energy", GEAR_ENERGY), ("gear_record", GEAR_RECORD),
                        ("fleet_report", FLEET_REPORT), ("pm_timeline", PM_TIMELINE),
                        ("powernap_advice", POWERNAP_ADVICE), ("shift_lock", SHIFT_LOCK), ("gear_plan", GEAR_PLAN)):
    _key = "ansible.legacy." + _module
    TABLES[_key], PREPARE[_key] = table(_key, _cases)

def _with_guard(prep, where="."):
    def run(d):
        _w(d / where / "shift.lock.guard", "")
        prep(d)
    return run


_key = "ansible.legacy.shift_lock"
for _case in list(PREPARE[_key]):
    if _case == "lock directory full":
        PREPARE[_key][_case] = _with_guard(PREPARE[_key][_case], "locks")
    elif _case != "guard a link out of the directory":
        PREPARE[_key][_case] = _with_guard(PREPARE[_key][_case])

CASES = case_params(TABLES)


@pytest.mark.parametrize("module,index,words", CASES)
def test_hostile_file_is_refused_and_nothing_changes(tmp_path_factory, module, index, words):
    run = run_prepared(module, TABLES[module], PREPARE[module], tmp_path_factory)
    assert_refused_prepared(run, index, words)
    case = TABLES[module][index][0]
    if (module, case) in OUTSIDE:       # the file a planted link leads to is as it was
        name, content = OUTSIDE[(module, case)]
        assert (Path(run["cases"][index]["in_dir"] + "-outside") / name).read_bytes() == content


def test_every_kind_is_covered():
    """Each hostile kind of issue 31 is a case of at least one table here."""
    names = " | ".join(case for table_ in TABLES.values() for case, _a, _w in table_).lower()
    for word in ("fifo", "socket", "device", "link out", "/dev/zero", "2 gib", "400-digit", "unicode digit",
                 "600 deep", "lone surrogate", "year 1", "immutable", "append-only", "full"):
        assert word in names, word
