"""The cpuidle model on every captured machine, checked against the raw capture files."""

import os

import pytest

from conftest import dataset_names, materialize
from datasets import expected_disabled, raw_states, thesis_measurements
from ansible.module_utils.fleetnap.cpuidle import (
    CpuidleError, cmdline_conflicts, plan_states, read_model, select_cpus, state_names,
)
from ansible.module_utils.fleetnap.sysfs import HostFS

BUDGETS = [None, 0, 2, 10, 20, 50, 100, 200, 1000]


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = materialize(name, tmp_path_factory.mktemp(name))
        return cache[name]
    return get


@pytest.mark.parametrize("dataset", dataset_names())
def test_model_matches_capture(dataset, trees):
    model = read_model(HostFS(str(trees(dataset))))
    raw = raw_states(dataset)
    assert sorted(c["cpu"] for c in model["cpus"]) == sorted(raw) or not raw
    for cpu in model["cpus"]:
        got = {s["index"]: (s["name"], s["latency_us"]) for s in cpu["states"]}
        want = {i: (st["name"], int(st["latency"])) for i, st in raw.get(cpu["cpu"], {}).items()}
        assert got == want
    assert model["driver"] in ("intel_idle", "acpi_idle")


def test_the_gate_model_leaves_the_counters_unread(trees):
    """counters=False: the same model without usage, time, above, below and default_status, and those files are
    not opened (a FIFO in their place, which read_model refuses, is never touched)."""
    root = trees("ivbep1")
    full = read_model(HostFS(str(root)))
    gate = read_model(HostFS(str(root)), counters=False)
    assert any(s["usage"] for cpu in full["cpus"] for s in cpu["states"])
    for cpu in full["cpus"]:
        for s in cpu["states"]:
            s.update(usage=None, time_us=None, default_status=None, above=None, below=None)
    assert gate == full
    usage = root / "sys/devices/system/cpu/cpu0/cpuidle/state1/usage"
    saved = usage.read_text()
    usage.unlink()
    os.mkfifo(usage)
    try:
        assert read_model(HostFS(str(root)), counters=False) == gate
        with pytest.raises(CpuidleError, match="FIFO"):
            read_model(HostFS(str(root)))
    finally:
        usage.unlink()
        usage.write_text(saved)


@pytest.mark.parametrize("dataset", dataset_names())
def test_the_gate_model_reads_a_states_desc_and_residency_once_and_they_are_every_cpus(dataset, trees):
    """counters=False takes a state's desc and residency from the first CPU with that index and name: on every
    captured machine that is what every CPU's own files say (the full read is the reference)."""
    root = trees(dataset)
    full = read_model(HostFS(str(root)))
    gate = read_model(HostFS(str(root)), counters=False)
    assert [[(s["name"], s["desc"], s["residency_us"], s["latency_us"], s["disable"]) for s in c["states"]]
            for c in gate["cpus"]] == \
        [[(s["name"], s["desc"], s["residency_us"], s["latency_us"], s["disable"]) for s in c["states"]]
         for c in full["cpus"]]


def test_the_gate_model_opens_a_later_cpus_desc_only_for_a_state_it_has_not_seen(tmp_path):
    """A later CPU's desc and residency files of a state already read are not opened (a FIFO there is never
    touched); a state with another name at the same index is read from its own files."""
    root = materialize("ivbep1", tmp_path / "ivbep1")
    cpu1 = root / "sys/devices/system/cpu/cpu1/cpuidle"
    for leaf in ("state1/desc", "state1/residency"):
        (cpu1 / leaf).unlink()
        os.mkfifo(cpu1 / leaf)
    gate = read_model(HostFS(str(root)), counters=False)
    first = {s["index"]: s for s in gate["cpus"][0]["states"]}
    second = {s["index"]: s for s in gate["cpus"][1]["states"]}
    assert (second[1]["desc"], second[1]["residency_us"]) == (first[1]["desc"], first[1]["residency_us"])
    with pytest.raises(CpuidleError, match="FIFO"):
        read_model(HostFS(str(root)))
    for leaf, text in (("name", "C1X"), ("desc", "another state"), ("residency", "7")):
        (cpu1 / "state2" / leaf).chmod(0o644)
        (cpu1 / "state2" / leaf).write_text(text + "\n")
    gate = read_model(HostFS(str(root)), counters=False)
    renamed = {s["index"]: s for s in gate["cpus"][1]["states"]}[2]
    assert (renamed["name"], renamed["desc"], renamed["residency_us"]) == ("C1X", "another state", 7)
    assert {s["index"]: s for s in gate["cpus"][2]["states"]}[2]["desc"] == first[2]["desc"]


class _Opened(list):
    many = 0


def _opened(monkeypatch):
    """Every file the model's reads open through HostFS (read_bytes, and each name of read_many), and
    the number of read_many calls (``many``: each opens its directory once)."""
    opened = _Opened()
    one, many = HostFS.read_bytes, HostFS.read_many

    def count(directory, names):
        opened.many += 1
        opened.extend("%s/%s" % (directory, n) for n in names)
    monkeypatch.setattr(HostFS, "read_bytes", lambda self, path, *a, **k: opened.append(path) or one(self, path, *a, **k))
    monkeypatch.setattr(HostFS, "read_many", lambda self, d, names, *a, **k: count(d, names) or many(self, d, names, *a, **k))
    return opened


def test_the_gate_model_reads_three_files_per_state_on_spr1(trees, monkeypatch):
    """The figure docs/benchmarks.md quotes: on spr1's capture (320 CPUs, 1,280 states) the gate's read opens
    name, latency and disable of every state and one PM QoS file per CPU, 4,160 files, and desc and residency of
    each distinct state once; a full read opens 5 files per state (6,720 with the PM QoS files) and the counters.
    Each PM QoS file is opened once (it used to be read twice). A state's files are opened through one
    descriptor of its directory (HostFS.read_many): the gate's read asks for them in two calls at most."""
    opened = _opened(monkeypatch)
    model = read_model(HostFS(str(trees("spr1"))), counters=False)
    states = sum(len(c["states"]) for c in model["cpus"])
    distinct = len({(s["index"], s["name"]) for c in model["cpus"] for s in c["states"]})
    per_state = [p for p in opened if "/cpuidle/state" in p]
    qos = [p for p in opened if p.endswith("/power/pm_qos_resume_latency_us")]
    assert (len(model["cpus"]), states) == (320, 1280)
    assert len(qos) == len(model["cpus"]) and len(set(qos)) == len(qos)
    assert len(per_state) == 3 * states + 2 * distinct and len(per_state) + len(qos) == 4160 + 2 * distinct
    assert opened.many == states + distinct
    opened.clear()
    read_model(HostFS(str(trees("spr1"))))
    qos = [p for p in opened if p.endswith("/power/pm_qos_resume_latency_us")]
    assert len([p for p in opened if p.endswith(("/name", "/desc", "/latency", "/residency", "/disable"))
                and "/cpuidle/state" in p]) + len(qos) == 6720


@pytest.mark.parametrize("dataset", dataset_names())
def test_plan_every_budget(dataset, trees):
    model = read_model(HostFS(str(trees(dataset))))
    for budget in BUDGETS:
        for margin in (1.0, 2.0):
            rows = plan_states(model, max_latency_us=budget, margin=margin)
            disabled_names = {r["name"] for r in rows if not r["allowed"]}
            want = {raw_states(dataset)[cpu][idx]["name"] for cpu, idx in expected_disabled(dataset, budget, margin)}
            assert disabled_names == want, (budget, margin)
            assert all(r["allowed"] for r in rows if r["name"] == "POLL")


def test_thesis_measurements_change_the_decision(trees):
    """Measured worst cases from the thesis vs declared values, side by side (issue 2's example)."""
    thesis = thesis_measurements()
    decisions = {}
    for dataset in ("ivbep1", "hswep0", "bdwep0"):
        model = read_model(HostFS(str(trees(dataset))))
        measured = {state: m for state, (_d, m) in thesis[dataset].items()}
        for budget in (20, 50):
            by_decl = {r["name"]: r["allowed"] for r in plan_states(model, max_latency_us=budget)}
            by_meas = {r["name"]: r["allowed"] for r in plan_states(model, max_latency_us=budget, measured=measured)}
            decisions[(dataset, budget)] = (by_decl, by_meas)
            for state, m in measured.items():
                assert by_meas[state] == (m <= budget), (dataset, budget, state)
    # 20 us: Ivy Bridge's C1E is declared 10 us but measured 21.8 us -> the measurement disables it.
    decl, meas = decisions[("ivbep1", 20)]
    assert decl["C1E"] and not meas["C1E"]
    assert meas["C1"]
    # Haswell and Broadwell keep C1 and C1E (measured 15-19 us) at 20 us.
    for ds in ("hswep0", "bdwep0"):
        decl, meas = decisions[(ds, 20)]
        assert meas["C1"] and meas["C1E"] and not meas["C3"] and not meas["C6"]
    # 50 us: declared C3 (33 / 40 us) would be allowed; measured 59.6 / 71.8 us is not.
    for ds in ("hswep0", "bdwep0"):
        decl, meas = decisions[(ds, 50)]
        assert decl["C3"] and not meas["C3"]


def test_combine_worst_takes_the_larger(trees):
    model = read_model(HostFS(str(trees("hswep0"))))
    # hswep0 C6: declared 133 us, measured 69.7 us.
    rows = {r["name"]: r for r in plan_states(model, max_latency_us=100, measured={"C6": 69.7}, combine="worst")}
    assert rows["C6"]["effective_us"] == 133 and not rows["C6"]["allowed"]
    rows = {r["name"]: r for r in plan_states(model, max_latency_us=100, measured={"C6": 69.7})}
    assert rows["C6"]["effective_us"] == 69.7 and rows["C6"]["allowed"]


def test_explicit_lists_win_and_are_validated(trees):
    model = read_model(HostFS(str(trees("spr1"))))
    names = state_names(model)
    rows = {r["name"]: r for r in plan_states(model, max_latency_us=1000, disable=["C6"], enable=["C1E"])}
    assert not rows["C6"]["allowed"] and rows["C1E"]["allowed"]
    with pytest.raises(CpuidleError) as err:
        plan_states(model, disable=["C7"])
    assert "C7" in str(err.value) and ", ".join(names) in str(err.value)
    with pytest.raises(CpuidleError, match="POLL cannot be disabled"):
        plan_states(model, disable=["POLL"])
    with pytest.raises(CpuidleError, match="both disable and enable"):
        plan_states(model, disable=["C6"], enable=["C6"])


@pytest.mark.parametrize("kwargs,match", [
    ({"max_latency_us": -1}, "finite number >= 0"),
    ({"max_latency_us": "fast"}, "must be a number"),
    ({"measured": {"C1": "fast"}}, "must be a number"),
    ({"measured": {"C1": float("nan")}}, "finite"),
    ({"measured": {"C9": 3}}, "unknown state"),
    ({"margin": 0.5}, ">= 1"),
    ({"combine": "best"}, "combine"),
])
def test_bad_input(trees, kwargs, match):
    model = read_model(HostFS(str(trees("ivbep1"))))
    with pytest.raises(CpuidleError, match=match):
        plan_states(model, **kwargs)


def test_select_cpus(trees):
    model = read_model(HostFS(str(trees("ivbep1"))))
    assert select_cpus(model, None) == list(range(48))
    assert select_cpus(model, "0-3,40") == [0, 1, 2, 3, 40]
    with pytest.raises(CpuidleError, match=r"CPU\(s\) 48-50 do not exist.*present: 0-47"):
        select_cpus(model, "46-50")
    with pytest.raises(CpuidleError, match="bad"):
        select_cpus(model, "x")


def test_missing_sysfs(tmp_path):
    with pytest.raises(CpuidleError, match="does not exist"):
        read_model(HostFS(str(tmp_path)))


def test_cmdline_conflicts():
    found = cmdline_conflicts("ro intel_idle.max_cstate=1 quiet cpuidle.off=0 idle=poll".split())
    assert len(found) == 2
    assert any("intel_idle.max_cstate=1" in w for w in found) and any("idle=poll" in w for w in found)
    assert cmdline_conflicts(["cpuidle.off=1"]) and not cmdline_conflicts(["root=/dev/sda"])
