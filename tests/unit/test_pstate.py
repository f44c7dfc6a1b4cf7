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
                 "uncore": ["legacy"], "policies": 320, "uncore_khz": [(800000, 2500000)], "elc": []}
    # a TPMI machine's ELC settings, as its domains show them (low, high, enable, floor)
    assert pstate.summary(pstate.read_pstates(HostFS(str(trees["srf8"]))))["elc"] == [(11, 95, 1, 800000), (11, 95, 1, 1200000)]


def test_a_host_without_cpufreq_reads_as_none(tmp_path):
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)
    got = pstate.read_pstates(HostFS(str(tmp_path)))
    assert got == {"driver": None, "policies": {}, "inactive_policies": [], "intel_pstate": None, "amd_pstate": None, "hwp": False,
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


# --- plan(): a profile's CPU frequency fields -> the writes, decided on what the host shows ----

def _policy_files(raw):
    return {n: f for n, f in raw["policy"].items()}


def _predict_max_half(raw):
    """Independent: scaling_max_freq at the middle of cpuinfo's range on every policy, unless it
    would fall under scaling_min_freq (then nothing is written and the field is refused)."""
    writes, refused = [], False
    for n, f in sorted(_policy_files(raw).items()):
        lo, hi = int(f["cpuinfo_min_freq"]), int(f["cpuinfo_max_freq"])
        want = lo + (hi - lo) * 50 // 100
        if want < int(f["scaling_min_freq"]):
            refused = True
        elif want != int(f["scaling_max_freq"]):
            writes.append(("/sys/devices/system/cpu/cpufreq/policy%d/scaling_max_freq" % n, str(want), f["scaling_max_freq"]))
    return ([] if refused else writes), refused


@pytest.mark.parametrize("name", pstate_names())
def test_plan_on_every_captured_machine_is_what_an_independent_reader_predicts(trees, name):
    got = pstate.read_pstates(HostFS(str(trees[name])))
    raw = raw_pstates(name)
    g = raw["global"]
    # the frequency cap
    writes, problems = pstate.plan(got, {"max_khz": "50%"})
    want, refused = _predict_max_half(raw)
    assert writes == want and bool(problems) == refused, problems
    # turbo off: intel_pstate's no_turbo where it has one, cpufreq/boost otherwise
    writes, problems = pstate.plan(got, {"turbo": False})
    if "intel_pstate/no_turbo" in g:
        assert problems == [] and writes == ([] if g["intel_pstate/no_turbo"] == "1" else
                                             [("/sys/devices/system/cpu/intel_pstate/no_turbo", "1", "0")])
    elif "cpufreq/boost" in g:
        assert problems == [] and writes == ([] if g["cpufreq/boost"] == "0" else
                                             [("/sys/devices/system/cpu/cpufreq/boost", "0", "1")])
    else:
        assert writes == [] and problems == ["turbo: this host shows neither intel_pstate/no_turbo nor cpufreq/boost"]
    # EPB by name, on every CPU that has one
    writes, problems = pstate.plan(got, {"epb": "power"})
    if raw["epb"]:
        assert problems == []
        assert writes == [("/sys/devices/system/cpu/cpu%d/power/energy_perf_bias" % c, "15", v)
                          for c, v in sorted(raw["epb"].items()) if v != "15"]
    else:
        assert writes == [] and problems[0].startswith("epb: this host shows no energy_perf_bias")
    # EPP by name: where the driver shows EPP, offers the name and the governor allows it
    writes, problems = pstate.plan(got, {"epp": "power"})
    files = _policy_files(raw)
    offers = all("power" in f.get("energy_performance_available_preferences", "").split() for f in files.values())
    performance = any(f["scaling_governor"] == "performance" for f in files.values())
    if offers and not performance:
        assert problems == []
        assert writes == [("/sys/devices/system/cpu/cpufreq/policy%d/energy_performance_preference" % n, "power",
                           f["energy_performance_preference"]) for n, f in sorted(files.items())
                          if f["energy_performance_preference"] != "power"]
    else:
        assert writes == [] and problems and all(p.startswith("epp: ") for p in problems)
    # the uncore's maximum down to its initial minimum, TPMI domains where there are some
    writes, problems = pstate.plan(got, {"uncore_max_khz": "min"})
    tpmi = sorted(d for d in raw["uncore"] if d.startswith("uncore"))
    domains = tpmi or sorted(raw["uncore"])
    if not domains:
        assert writes == [] and problems == ["uncore_max_khz: this host shows no intel_uncore_frequency domains"]
    else:
        want = []
        for d in domains:
            f = raw["uncore"][d]
            lo = f.get("initial_min_freq_khz", f["min_freq_khz"])
            if int(lo) < int(f["min_freq_khz"]):
                want = None      # the minimum above the new maximum: refused
                break
            if lo != f["max_freq_khz"]:
                want.append(("/sys/devices/system/cpu/intel_uncore_frequency/%s/max_freq_khz" % d, lo, f["max_freq_khz"]))
        if want is None:
            assert writes == [] and problems
        else:
            assert problems == [] and writes == want


def test_plan_applied_gives_the_profile_and_a_second_plan_writes_nothing(tmp_path):
    from ansible.module_utils.fleetnap.sysfs import SysfsBatch
    root = materialize("spr1", tmp_path / "spr1", PSTATE_DATA)
    fs = HostFS(str(root))
    fields = {"governor": "performance", "min_khz": "base", "max_khz": "max", "epp": "performance", "turbo": False,
              "epb": "balance-performance", "uncore_min_khz": 1200000, "uncore_max_khz": "max"}
    writes, problems = pstate.plan(pstate.read_pstates(fs), fields)
    assert problems == []
    # governor first on each policy (EPP under performance is checked against the new governor),
    # the minimum raised to base (2.2 GHz, under the maximum 3.8 GHz: the minimum first)
    # turbo first (no_turbo moves cpuinfo_max_freq on intel_pstate)
    assert writes[0] == ("/sys/devices/system/cpu/intel_pstate/no_turbo", "1", "0")
    assert writes[1:4] == [(POLICY.replace("sys", "/sys", 1) + "/scaling_governor", "performance", "powersave"),
                           (POLICY.replace("sys", "/sys", 1) + "/scaling_min_freq", "2200000", "800000"),
                           (POLICY.replace("sys", "/sys", 1) + "/energy_performance_preference", "performance",
                            "balance_performance")]
    batch = SysfsBatch(fs)
    for path, new, old in writes:
        batch.add(path, new, old)
    batch.apply()
    s = pstate.summary(pstate.read_pstates(fs))
    assert (s["governors"], s["epp"], s["epb"], s["khz"], s["turbo"]) == (
        ["performance"], ["performance"], [4], [(2200000, 3800000)], "off")
    assert {(u["min_khz"], u["max_khz"]) for u in pstate.read_pstates(fs)["uncore"].values()} == {(1200000, 2500000)}
    assert pstate.plan(pstate.read_pstates(fs), fields) == ([], [])


def test_a_new_minimum_above_the_old_maximum_raises_the_maximum_first_and_the_reverse(trees):
    got = pstate.read_pstates(HostFS(str(trees["dell-9360-kbl"])))
    p0 = got["policies"][0]
    low = dict(got, policies={0: dict(p0, min_khz=p0["cpuinfo_min_khz"], max_khz=p0["cpuinfo_min_khz"])})
    writes, problems = pstate.plan(low, {"min_khz": "base", "max_khz": "max"})
    assert problems == [] and [w[0].rsplit("/", 1)[1] for w in writes] == ["scaling_max_freq", "scaling_min_freq"]
    # and down: a new maximum under the old minimum lowers the minimum first
    high = dict(got, policies={0: dict(p0, min_khz=p0["cpuinfo_max_khz"], max_khz=p0["cpuinfo_max_khz"])})
    writes, problems = pstate.plan(high, {"min_khz": "min", "max_khz": "min"})
    assert problems == [] and [w[0].rsplit("/", 1)[1] for w in writes] == ["scaling_min_freq", "scaling_max_freq"]


@pytest.mark.parametrize("name,fields,words", [
    ("spr1", {"governor": "ondemand"}, "governor: intel_pstate offers performance, powersave, not ondemand"),
    ("turin0", {"epp": 128}, "epp: amd-pstate-epp takes a name (performance), not a number"),
    ("turin0", {"epp": "power"}, "epp: amd-pstate-epp offers performance, not power"),
    ("bdwep0", {"epp": "power"}, "epp: intel_cpufreq (passive) shows no energy_performance_preference"),
    ("rome0", {"min_khz": "base"}, "min_khz: base needs base_frequency, which acpi-cpufreq does not show"),
    ("spr1", {"max_khz": 9000000}, "max_khz: 9000000 kHz is outside what the CPUs allow, 800000..3800000 kHz"),
    ("spr1", {"min_khz": "max", "max_khz": "min"}, "min_khz, max_khz: the minimum 3800000 kHz would be above the maximum 800000"),
    ("gnr3", {"epp": "power"}, "epp: under the performance governor intel_pstate takes only performance (0), not power"),
    ("spr1", {"governor": "performance", "epp": 128}, "under the performance governor intel_pstate takes only performance"),
    ("rome0", {"uncore_max_khz": "max"}, "uncore_max_khz: this host shows no intel_uncore_frequency domains"),
    ("spr1", {"uncore_max_khz": 9000000}, "uncore_max_khz: 9000000 kHz is outside what the uncore allows"),
    ("milan0", {"epb": 0}, "epb: this host shows no energy_perf_bias"),
    ("spr1", {"elc_low_percent": 10}, "elc_low_percent: this host's uncore has no efficiency latency control"),
    ("gnr3", {"elc_low_percent": 99}, "elc_low_percent, elc_high_percent: the low threshold 99 % would be above the "
                                      "high one 95 %"),
    ("gnr3", {"elc_floor_khz": 9000000}, "elc_floor_khz: 9000000 kHz is outside what the uncore allows"),
])
def test_a_value_the_host_does_not_take_is_refused_naming_the_field_and_nothing_is_planned(trees, name, fields, words):
    writes, problems = pstate.plan(pstate.read_pstates(HostFS(str(trees[name]))), fields)
    assert writes == [] and any(words in p for p in problems), problems
    assert len(problems) == len(set(problems)) and len(problems) < 5     # a sentence per cause, not per CPU


def test_no_cpufreq_driver_refuses_the_policy_fields(tmp_path):
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)
    writes, problems = pstate.plan(pstate.read_pstates(HostFS(str(tmp_path))), {"governor": "performance", "epp": "power"})
    assert writes == [] and problems[0] == ("governor, epp: this host has no cpufreq driver "
                                            "(no /sys/devices/system/cpu/cpufreq/policy*)")


@pytest.mark.parametrize("field,value,words", [
    ("min_khz", True, "give kHz as a whole number"), ("min_khz", "fast", "'fast' is not kHz"),
    ("max_khz", "150%", "not kHz, min, max, base nor a percentage"), ("max_khz", -5, "-5 kHz is not in 1.."),
    ("max_khz", 1.5, "give kHz as a whole number"), ("uncore_max_khz", "base", "the uncore has no base frequency"),
    ("turbo", "yes", "turbo: give true or false"), ("governor", "Perf", "not a governor's name"),
    ("epp", 256, "epp: give a preference's name or a number 0..255"), ("epp", True, "epp: give"),
    ("epb", 16, "epb: give 0..15"), ("epb", "medium", "epb: give 0..15 or one of performance"),
    ("pstates", 1, "pstates: not a CPU frequency field"),
    ("elc_low_percent", 101, "elc_low_percent: give a whole percentage 0..100"),
    ("elc_high_percent", True, "elc_high_percent: give a whole percentage"),
    ("elc_high_enable", 1, "elc_high_enable: give true or false"), ("elc_floor_khz", "base", "no base frequency"),
])
def test_a_field_of_the_wrong_shape_is_refused_before_the_host_is_looked_at(field, value, words):
    with pytest.raises(pstate.FieldError) as exc:
        pstate.plan({"policies": {}}, {field: value})
    assert words in str(exc.value)


def test_turin0_under_performance_takes_only_the_performance_preference(trees):
    """amd-pstate-epp refuses an EPP write under the performance governor (EBUSY, "EPP cannot be
    set under performance policy"), as intel_pstate does: refused in the plan, with the governor
    switched in the same profile allowed."""
    got = pstate.read_pstates(HostFS(str(trees["turin0"])))
    wide = dict(got, policies={n: dict(p, epps=["performance", "power"]) for n, p in got["policies"].items()})
    _w, problems = pstate.plan(wide, {"epp": "power"})
    assert problems == ["epp: under the performance governor amd-pstate-epp takes only performance, not power"]
    writes, problems = pstate.plan(wide, {"governor": "powersave", "epp": "power"})
    assert problems == [] and len(writes) == 2 * len(got["policies"])


def test_a_number_the_kernel_shows_by_name_is_not_written_again(trees):
    """intel_pstate shows EPP 0, 192 and 255 as performance, balance_power and power: asking for
    the number where the name is shown is no change (idempotent on a real kernel)."""
    got = pstate.read_pstates(HostFS(str(trees["spr1"])))
    power = dict(got, policies={n: dict(p, epp="power") for n, p in got["policies"].items()})
    assert pstate.plan(power, {"epp": 255}) == ([], [])
    assert len(pstate.plan(power, {"epp": 254})[0]) == len(got["policies"])


def test_a_number_given_as_text_is_that_number():
    assert pstate.check_field("max_khz", "2000000") == 2000000 and pstate.check_field("epb", "6") == 6
    assert pstate.check_field("epp", "128") == 128 and pstate.check_field("governor", "powersave") == "powersave"
    with pytest.raises(pstate.FieldError, match="max_khz"):
        pstate.check_field("max_khz", "9" * 40)


def _write_all(fs, writes):
    from ansible.module_utils.fleetnap.sysfs import SysfsBatch
    batch = SysfsBatch(fs)
    for path, new, old in writes:
        batch.add(path, new, old)
    batch.apply()


@pytest.mark.parametrize("name,fields", [
    ("cfl-u", {"governor": "performance", "epp": "performance", "min_khz": "max", "epb": 0, "turbo": False,
               "uncore_min_khz": "max"}),
    ("srf8", {"epp": 200, "max_khz": "min", "uncore_max_khz": "min", "elc_low_percent": 30, "elc_high_enable": False,
              "elc_floor_khz": "max"}),
    ("snr0", {"governor": "powersave", "max_khz": "min", "epb": "power"}),
    ("turin0", {"governor": "powersave", "min_khz": "max", "turbo": False}),
])
def test_remembered_then_restored_gives_every_file_back(trees, tmp_path, name, fields):
    """The record keeps each written file's earlier value; restore() on the changed host writes
    exactly those back (test_restore_orders_... checks their order), and applied() predicts what
    a read after the writes shows."""
    import subprocess
    from conftest import snapshot_tree
    root = tmp_path / name
    subprocess.run(["cp", "-a", str(trees[name]), str(root)], check=True)
    fs = HostFS(str(root))
    pristine = snapshot_tree(root)
    before = pstate.read_pstates(fs)
    writes, problems = pstate.plan(before, fields)
    assert problems == [] and writes
    record = pstate.check_record(pstate.remembered(None, writes), "record")
    assert record["values"] == {path: old for path, _new, old in writes}
    _write_all(fs, writes)
    after = pstate.read_pstates(fs)
    assert pstate.summary(pstate.applied(before, writes)) == pstate.summary(after)
    # wanted(): every file the fields govern with the value the host shows now (the check after a
    # wake compares them): the files written among them, each with the value written.
    want = dict(pstate.wanted(after, fields))
    assert {path: new for path, new, _old in writes}.items() <= want.items()
    assert all((root / path.lstrip("/")).read_text().strip() == value for path, value in want.items())
    assert {path.rsplit("/", 1)[1] for path in want} == {path.rsplit("/", 1)[1] for path, _n, _o in writes} | (
        {"scaling_governor"} if "governor" in fields else set())
    assert pstate.remembered(record, writes) is None       # nothing new to keep
    back, problems, gone = pstate.restore(after, record)
    assert problems == [] and gone == [] and len(back) == len(writes)
    _write_all(fs, back)
    assert snapshot_tree(root) == pristine
    assert pstate.restore(pstate.read_pstates(fs), record)[0] == []


def test_restore_orders_a_range_the_kernel_would_refuse_otherwise(trees):
    """A policy left at min=max=cpuinfo_max: putting back min 800000 / max 2000000 lowers the
    minimum first; left at min=max=cpuinfo_min, going back to 2 GHz..3.8 GHz raises the maximum first."""
    got = pstate.read_pstates(HostFS(str(trees["spr1"])))
    p0 = got["policies"][0]
    d = "/sys/devices/system/cpu/cpufreq/policy0/scaling_%s_freq"
    one = dict(got, policies={0: p0}, epb={}, uncore={}, intel_pstate=None)
    rec = {"version": 1, "values": {d % "min": "800000", d % "max": "2000000"}}
    top = dict(one, policies={0: dict(p0, min_khz=3800000, max_khz=3800000)})
    assert [w[0].rsplit("/", 1)[1] for w in pstate.restore(top, rec)[0]] == ["scaling_min_freq", "scaling_max_freq"]
    rec = {"version": 1, "values": {d % "min": "2000000", d % "max": "3800000"}}
    bottom = dict(one, policies={0: dict(p0, min_khz=800000, max_khz=800000)})
    assert [w[0].rsplit("/", 1)[1] for w in pstate.restore(bottom, rec)[0]] == ["scaling_max_freq", "scaling_min_freq"]


def test_a_recorded_file_the_host_no_longer_has_is_named_not_written(trees):
    got = pstate.read_pstates(HostFS(str(trees["spr1"])))
    rec = {"version": 1, "values": {"/sys/devices/system/cpu/cpufreq/policy9999/scaling_governor": "powersave",
                                    "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor": "performance"}}
    writes, problems, gone = pstate.restore(got, rec)
    assert writes == [("/sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "performance", "powersave")]
    assert problems == [] and gone == ["/sys/devices/system/cpu/cpufreq/policy9999/scaling_governor"]


@pytest.mark.parametrize("doc,words", [
    ([], "must be a JSON object with version and values"),
    ({"version": 1}, "must be a JSON object with version and values"),
    ({"version": 2, "values": {}}, "version must be 1, got 2"),
    ({"version": True, "values": {}}, "version must be 1"),
    ({"version": 1, "values": []}, "values must be an object of sysfs paths"),
    ({"version": 1, "values": {"/proc/sys/kernel/panic": "1"}}, "is not a CPU frequency file fleetnap writes"),
    ({"version": 1, "values": {"/sys/devices/system/cpu/cpufreq/policy0/../../../../power/state": "mem"}},
     "is not a CPU frequency file"),
    ({"version": 1, "values": {"/sys/devices/system/cpu/cpufreq/boost": 1}}, "must be a number or a name"),
    ({"version": 1, "values": {"/sys/devices/system/cpu/cpufreq/boost": "1 2"}}, "must be a number or a name"),
])
def test_a_record_no_fleetnap_wrote_is_refused_naming_what(doc, words):
    with pytest.raises(pstate.PstateError) as exc:
        pstate.check_record(doc, "the record R")
    assert str(exc.value).startswith("the record R") and words in str(exc.value)


def test_a_governor_switch_writes_the_epp_even_where_it_shows_the_asked_one(trees):
    """intel_pstate and amd-pstate-epp put an EPP of their own back when the governor changes (the
    one saved for that governor): the EPP is written after the switch even where the host shows
    the asked value now; without a switch it is not."""
    got = pstate.read_pstates(HostFS(str(trees["spr1"])))
    shown = dict(got, policies={n: dict(p, epp="power") for n, p in got["policies"].items()})
    writes, problems = pstate.plan(shown, {"governor": "performance", "epp": "performance"})
    assert problems == [] and [w[0].rsplit("/", 1)[1] for w in writes[:2]] == [
        "scaling_governor", "energy_performance_preference"]
    same = dict(got, policies={n: dict(p, epp="performance") for n, p in got["policies"].items()})
    writes, _p = pstate.plan(same, {"governor": "performance", "epp": "performance"})
    assert len(writes) == 2 * len(got["policies"])
    assert pstate.plan(same, {"epp": "performance"}) == ([], [])


def test_uncore_frequencies_are_on_100_mhz_steps(trees):
    """The uncore driver keeps 100 MHz steps: a computed value is rounded down, a given one off the
    steps refused (it would read back otherwise and be written again on every run)."""
    got = pstate.read_pstates(HostFS(str(trees["srf8"])))
    writes, problems = pstate.plan(got, {"uncore_min_khz": "10%"})      # 800000 + 140000 -> 900000
    assert problems == [] and {w[1] for w in writes} == {"900000"}
    _w, problems = pstate.plan(got, {"uncore_max_khz": 1950000})
    assert problems == ["uncore_max_khz: 1950000 kHz is not a multiple of 100000 (the uncore is set in 100 MHz steps)"]
    _w, problems = pstate.plan(got, {"elc_floor_khz": 850000})
    assert problems and "elc_floor_khz: 850000 kHz is not a multiple of 100000" in problems[0]


def test_an_inactive_policy_is_left_out(tmp_path):
    """A policy whose CPUs are all offline answers EBUSY to every file (here: they are missing):
    it is not read and not planned, and named."""
    root = materialize("cfl-u", tmp_path / "cflu", PSTATE_DATA)
    for f in (root / "sys/devices/system/cpu/cpufreq/policy3").iterdir():
        f.unlink()
    got = pstate.read_pstates(HostFS(str(root)))
    assert sorted(got["policies"]) == [0, 1, 2, 4, 5, 6, 7] and got["inactive_policies"] == [3]
    writes, problems = pstate.plan(got, {"governor": "performance"})
    assert problems == [] and len(writes) == 7


def test_restore_does_not_bound_the_kept_frequencies_by_todays_range(trees):
    """Turbo off lowers intel_pstate's cpuinfo_max_freq: the kept maximum (the turbo one) is above
    today's range. It is the kernel's own earlier value: written back (turbo first), not refused."""
    got = pstate.read_pstates(HostFS(str(trees["spr1"])))
    p0 = got["policies"][0]
    d = "/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq"
    now = dict(got, policies={0: dict(p0, max_khz=2000000, cpuinfo_max_khz=2000000)}, epb={}, uncore={},
               intel_pstate=dict(got["intel_pstate"], no_turbo=1))
    rec = {"version": 1, "values": {d: "3800000", "/sys/devices/system/cpu/intel_pstate/no_turbo": "0"}}
    writes, problems, gone = pstate.restore(now, rec)
    assert problems == [] and gone == []
    assert writes == [("/sys/devices/system/cpu/intel_pstate/no_turbo", "0", "1"), (d, "3800000", "2000000")]
