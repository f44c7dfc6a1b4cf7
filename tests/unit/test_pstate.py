"""module_utils/fleetnap/pstate.py: a host's CPU frequency policy read from the 35 captured machines
of tests/data/pstates (every driver pepc recorded: intel_pstate with and without HWP, intel_cpufreq,
acpi-cpufreq on Intel and AMD, amd-pstate-epp; legacy and TPMI uncore), checked against an
independent reader of the same files (tests/datasets.py), and refusing files no kernel shows."""

from __future__ import annotations

import os

import pytest

from conftest import PSTATE_DATA, materialize, pstate_names
from datasets import raw_pstates

from ansible.module_utils.fleetnap import pstate
from ansible.module_utils.fleetnap.sysfs import HostFS, UnsafeFileError

POLICY = "sys/devices/system/cpu/cpufreq/policy0"


def _num(value):
    return int(value) if value is not None else None


def _epp(value):
    if value is None:
        return None
    return int(value) if value.isdigit() else value


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("pstates")
    return {name: materialize(name, base / name, PSTATE_DATA) for name in pstate_names()}


@pytest.mark.parametrize("name", pstate_names())
def test_every_captured_machine_reads_as_an_independent_reader_says(trees, name):
    got = pstate.read_pstates(HostFS(str(trees[name])))
    raw = raw_pstates(name)
    assert sorted(got["policies"]) == sorted(raw["policy"])
    assert got["driver"] == {p["scaling_driver"] for p in raw["policy"].values()}.pop()
    for n, files in raw["policy"].items():
        p = got["policies"][n]
        assert p["cpus"] == [int(c) for c in files["affected_cpus"].split()]
        assert (p["governor"], p["driver"]) == (files["scaling_governor"], files["scaling_driver"])
        assert p["governors"] == files["scaling_available_governors"].split()
        assert (p["min_khz"], p["max_khz"]) == (int(files["scaling_min_freq"]), int(files["scaling_max_freq"]))
        assert (p["cpuinfo_min_khz"], p["cpuinfo_max_khz"]) == (int(files["cpuinfo_min_freq"]), int(files["cpuinfo_max_freq"]))
        assert p["base_khz"] == _num(files.get("base_frequency"))
        assert p["epp"] == _epp(files.get("energy_performance_preference"))
        want_epps = files.get("energy_performance_available_preferences")
        assert p["epps"] == (want_epps.split() if want_epps is not None else None)
        freqs = files.get("scaling_available_frequencies")
        assert p["frequencies_khz"] == ([int(f) for f in freqs.split()] if freqs is not None else None)
        assert (p["boost"], p["cpb"]) == (_num(files.get("boost")), _num(files.get("cpb")))
    assert got["epb"] == {cpu: int(v) for cpu, v in raw["epb"].items()}
    g = raw["global"]
    if "intel_pstate/status" in g:
        assert got["intel_pstate"]["status"] == g["intel_pstate/status"]
        assert got["intel_pstate"]["no_turbo"] == int(g["intel_pstate/no_turbo"])
        assert got["intel_pstate"]["min_perf_pct"] == int(g["intel_pstate/min_perf_pct"])
    else:
        assert got["intel_pstate"] is None
    assert got["boost"] == _num(g.get("cpufreq/boost"))
    assert sorted(got["uncore"]) == sorted(raw["uncore"])
    for d, files in raw["uncore"].items():
        u = got["uncore"][d]
        assert (u["min_khz"], u["max_khz"]) == (int(files["min_freq_khz"]), int(files["max_freq_khz"]))
        assert u["initial_max_khz"] == _num(files.get("initial_max_freq_khz"))
        assert u["layout"] == ("tpmi" if d.startswith("uncore") else "legacy")
        if u["layout"] == "tpmi":
            assert u["elc"] == {f: int(v) for f, v in files.items() if f.startswith("elc_")}
            assert u["domain_id"] == int(files["domain_id"])


def test_the_layouts_pepc_recorded_are_all_here(trees):
    """What the later profile fields are decided on: each kind is in the data (a capture lost in an
    update of the data would make the table above pass on fewer layouts)."""
    seen = {}
    for name, tree in trees.items():
        s = pstate.summary(pstate.read_pstates(HostFS(str(tree))))
        seen.setdefault((s["driver"], s["mode"], s["hwp"]), name)
        for layout in s["uncore"]:
            seen.setdefault(("uncore", layout), name)
        if not s["epb"]:
            seen.setdefault(("no epb",), name)
    assert {("intel_pstate", "active", True), ("intel_cpufreq", "passive", False), ("acpi-cpufreq", None, False),
            ("amd-pstate-epp", None, False), ("uncore", "legacy"), ("uncore", "tpmi"), ("no epb",)} <= set(seen), seen
    s = pstate.summary(pstate.read_pstates(HostFS(str(trees["spr1"]))))
    assert s == {"driver": "intel_pstate", "mode": "active", "hwp": True, "governors": ["powersave"],
                 "epp": ["balance_performance"], "epb": [6], "khz": [(800000, 3800000)], "turbo": "on",
                 "uncore": ["legacy"], "policies": 320}


def test_a_host_without_cpufreq_reads_as_none(tmp_path):
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)
    got = pstate.read_pstates(HostFS(str(tmp_path)))
    assert got == {"driver": None, "policies": {}, "intel_pstate": None, "amd_pstate": None, "hwp": False,
                   "boost": None, "epb": {}, "uncore": {}}
    assert pstate.summary(got)["turbo"] is None


def _tree(tmp_path):
    return materialize("dell-9360-kbl", tmp_path / "t", PSTATE_DATA)


@pytest.mark.parametrize("rel,content,words", [
    (POLICY + "/scaling_max_freq", "fast", ["scaling_max_freq", "'fast' is not a whole number"]),
    (POLICY + "/scaling_max_freq", "-5", ["scaling_max_freq", "is not a whole number"]),
    (POLICY + "/scaling_max_freq", "999999999999", ["scaling_max_freq"]),
    (POLICY + "/cpuinfo_min_freq", "4000000", ["cpuinfo_min_freq 4000000 kHz is above cpuinfo_max_freq"]),
    (POLICY + "/scaling_governor", "Perf Ormance", ["scaling_governor", "not a name as the kernel writes one"]),
    (POLICY + "/scaling_governor", "x" * 60, ["scaling_governor"]),
    (POLICY + "/scaling_governor", "", ["scaling_governor", "'' is not a name"]),
    (POLICY + "/scaling_governor", None, ["scaling_governor", "missing or unreadable"]),
    (POLICY + "/affected_cpus", "0-3", ["affected_cpus", "not a list of CPU numbers"]),
    (POLICY + "/affected_cpus", "9000", ["affected_cpus", "below 8192"]),
    (POLICY + "/energy_performance_preference", "256", ["energy_performance_preference"]),
    (POLICY + "/energy_performance_available_preferences", "a " * 70, ["not a list of at most 64 names"]),
    (POLICY + "/scaling_driver", "acpi-cpufreq", ["policies name different drivers"]),
    ("sys/devices/system/cpu/intel_pstate/status", "sleepy", ["status", "one of active, passive, off"]),
    ("sys/devices/system/cpu/intel_pstate/min_perf_pct", "101", ["min_perf_pct"]),
    ("sys/devices/system/cpu/cpu2/power/energy_perf_bias", "16", ["energy_perf_bias"]),
    ("sys/devices/system/cpu/intel_uncore_frequency/package_00_die_00/max_freq_khz", "1e6", ["max_freq_khz"]),
    ("sys/devices/system/cpu/cpufreq/boost", "2", ["boost"]),
])
def test_a_file_no_kernel_shows_is_refused_naming_it(tmp_path, rel, content, words):
    root = _tree(tmp_path)
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        target.unlink()
    else:
        if target.exists():
            target.chmod(0o644)
        target.write_text(content + "\n")
    with pytest.raises(pstate.PstateError) as exc:
        pstate.read_pstates(HostFS(str(root)))
    for w in words:
        assert w in str(exc.value)


@pytest.mark.parametrize("kind", ["fifo", "link out", "device"])
def test_a_file_that_must_not_be_opened_is_refused(tmp_path, kind):
    root = _tree(tmp_path)
    target = root / POLICY / "scaling_governor"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "link out":
        outside = tmp_path / "outside"
        outside.write_text("performance\n")
        target.symlink_to(outside)
    else:
        target.symlink_to("/dev/zero")
    with pytest.raises(UnsafeFileError) as exc:
        pstate.read_pstates(HostFS(str(root)))
    assert "scaling_governor" in str(exc.value)


def test_more_policies_than_allowed_is_refused_before_reading_them(tmp_path):
    root = _tree(tmp_path)
    with pytest.raises(pstate.PstateError) as exc:
        pstate.read_pstates(HostFS(str(root)), max_policies=2)
    assert "4 cpufreq policies, more than the 2 a kernel has" in str(exc.value)


def test_this_machines_kernel_reads_as_its_files_say():
    """The live /sys of the machine running the tests (read only): a VM without a cpufreq driver
    reads as none; a machine with one has every policy its directory lists, as its files say."""
    live = "/sys/devices/system/cpu/cpufreq"
    got = pstate.read_pstates(HostFS("/"))
    dirs = sorted(int(n[6:]) for n in (os.listdir(live) if os.path.isdir(live) else []) if n[6:].isdigit()
                  and n.startswith("policy"))
    assert sorted(got["policies"]) == dirs
    for n in dirs:
        with open("%s/policy%d/scaling_governor" % (live, n)) as fh:
            assert got["policies"][n]["governor"] == fh.read().strip()
        with open("%s/policy%d/cpuinfo_max_freq" % (live, n)) as fh:     # fixed at boot
            assert got["policies"][n]["cpuinfo_max_khz"] == int(fh.read())
    assert (got["driver"] is None) == (not dirs)
