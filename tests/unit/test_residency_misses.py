"""The governor's misses (issue 38): the residency collector exports the kernel's ``above`` and
``below`` counters per CPU and state, with ``below`` split into what a PM QoS limit caused and
what the governor chose, checked on a captured machine's real counters (cfl-u, pepc's capture: 9 states, POLL to C10)
against an independent reading of the capture and the kernel's rule (cpuidle_enter_state counts
``below`` against the next deeper state that is not disabled; a governor never picks a state
whose exit latency is over the CPU's PM QoS limit)."""

from __future__ import annotations

import re

import pytest

from conftest import CPUIDLE_DATA, materialize
from promcheck import assert_valid_metrics

from ansible.module_utils.fleetnap.cpuidle import governor_misses, qos_limit_us, read_model
from ansible.module_utils.fleetnap.prom import render
from ansible.module_utils.fleetnap.residency import residency_metrics
from ansible.module_utils.fleetnap.sysfs import HostFS

SAMPLE = re.compile(r'^([a-z_]+)\{(.*)\} (\S+)$')


def parse_exposition(text):
    """{name: {"type": t, "samples": [{"labels": {...}, "value": float}]}} of a text (as written here)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _h, _t, name, kind = line.split(" ")
            out.setdefault(name, {"samples": []})["type"] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.setdefault(m.group(1), {"samples": []})["samples"].append({"labels": labels, "value": float(m.group(3))})
    return out


LINE = re.compile(r"^\w+\|/sys/devices/system/cpu/cpu(\d+)/cpuidle/state(\d+)/(\w+)\|(.*)$")


def capture(name):
    """{cpu: {index: {file: value}}} straight from the capture."""
    out = {}
    for line in (CPUIDLE_DATA / ("%s.txt" % name)).read_text().splitlines():
        m = LINE.match(line)
        if m:
            out.setdefault(int(m.group(1)), {}).setdefault(int(m.group(2)), {})[m.group(3)] = m.group(4)
    return out


@pytest.fixture(scope="module")
def cflu(tmp_path_factory):
    """cfl-u with per-CPU PM QoS limits as a profile leaves them: 50 us on CPUs 0, 1, 4 and 5 (C3,
    70 us, out of reach), "n/a" on CPU 2 (no wake-up latency at all), C3 to C10 disabled on CPUs 4
    and 5 (then C1E has no deeper enabled state), no limit on 3, 6 and 7."""
    root = materialize("cfl-u", tmp_path_factory.mktemp("cflu"))
    cpu = root / "sys/devices/system/cpu"
    for n in (0, 1, 4, 5):
        (cpu / ("cpu%d/power/pm_qos_resume_latency_us" % n)).write_text("50\n")
    (cpu / "cpu2/power/pm_qos_resume_latency_us").write_text("n/a\n")
    for n in (4, 5):
        for state in range(3, 9):
            (cpu / ("cpu%d/cpuidle/state%d/disable" % (n, state))).write_text("1\n")
    return root


def expected(raw, cpu):
    """{state index: (above, below by QoS, below by the governor)} for one CPU, from the capture."""
    q = raw["qos"][cpu]
    limit = 0 if q == "n/a" else (None if q == "0" else int(q))
    states = raw["states"][cpu]
    out = {}
    for i in sorted(states):
        deeper = [j for j in sorted(states) if j > i and states[j]["disable"] == "0"]
        by_qos = bool(deeper) and limit is not None and int(states[deeper[0]]["latency"]) > limit
        below = int(states[i]["below"])
        out[i] = (int(states[i]["above"]), below if by_qos else 0, 0 if by_qos else below)
    return out


def test_below_is_split_by_the_cpus_pm_qos_limit_as_the_kernel_counts_it(cflu):
    model = read_model(HostFS(str(cflu)))
    states = capture("cfl-u")
    cpu_dir = cflu / "sys/devices/system/cpu"
    raw = {"states": {}, "qos": {}}
    for cpu, by_index in states.items():
        raw["qos"][cpu] = (cpu_dir / ("cpu%d/power/pm_qos_resume_latency_us" % cpu)).read_text().strip()
        raw["states"][cpu] = {i: dict(files, disable=(cpu_dir / ("cpu%d/cpuidle/state%d/disable" % (cpu, i)))
                                      .read_text().strip()) for i, files in by_index.items()}
    seen_qos = seen_gov = 0
    for cpu in model["cpus"]:
        got = {st["index"]: (a, q, b - q) for st, _bounded, a, b, q in governor_misses(cpu)}
        assert got == expected(raw, cpu["cpu"]), cpu["cpu"]
        seen_qos += sum(q for _a, q, _g in got.values())
        seen_gov += sum(g for _a, _q, g in got.values())
    assert seen_qos > 0 and seen_gov > 0          # the capture has both kinds here
    # CPU 0: C1E's below (1654) is the 50 us limit's (C3 is out of reach); CPU 4 (C3-C10 disabled):
    # C1E has no deeper state, nothing is bounded; CPU 2 ("n/a"): every deeper state is out of reach
    by_cpu = {c["cpu"]: c for c in model["cpus"]}
    assert [m[4] for m in governor_misses(by_cpu[0])][2] == 1654
    assert [m[1] for m in governor_misses(by_cpu[4])] == [False] * 9
    assert [m[1] for m in governor_misses(by_cpu[2])] == [True] * 8 + [False]     # C10 has no deeper state
    assert (qos_limit_us(by_cpu[0]), qos_limit_us(by_cpu[2]), qos_limit_us(by_cpu[7])) == (50, 0, None)
    # the global limit (/dev/cpu_dma_latency) counts too, its default (2000 s) is none
    assert qos_limit_us(by_cpu[7], 20) == 20 and qos_limit_us(by_cpu[7], 2000000000) is None
    # with 20 us: from C1E (C3, 70 us, next) on, every state's next one is out of reach, C10 has none
    assert [m[1] for m in governor_misses(by_cpu[7], 20)] == [False, False] + [True] * 6 + [False]


def test_the_metrics_carry_the_split_and_a_miss_ratio_per_state(cflu):
    text = assert_valid_metrics(render(residency_metrics(read_model(HostFS(str(cflu))))))
    families = parse_exposition(text)
    below = {(s["labels"]["cpu"], s["labels"]["state"], s["labels"]["cause"]): s["value"]
             for s in families["fleetnap_cstate_below_total"]["samples"]}
    assert below[("0", "C1E", "qos")] == 1654 and below[("0", "C1E", "governor")] == 0
    raw = capture("cfl-u")
    assert below[("7", "C1E", "governor")] == int(raw[7][2]["below"]) and below[("7", "C1E", "qos")] == 0
    above = {(s["labels"]["cpu"], s["labels"]["state"]): s["value"] for s in families["fleetnap_cstate_above_total"]["samples"]}
    assert above[("0", "C6")] == 2448
    bounded = {(s["labels"]["cpu"], s["labels"]["state"]): s["value"]
               for s in families["fleetnap_cstate_qos_bounded"]["samples"]}
    assert bounded[("0", "C1E")] == 1 and bounded[("7", "C1E")] == 0 and bounded[("2", "POLL")] == 1
    ratio = {(s["labels"]["state"], s["labels"]["miss"]): s["value"] for s in families["fleetnap_cstate_miss_ratio"]["samples"]}
    entries = sum(int(by_index[4]["usage"]) for by_index in raw.values())
    assert ratio[("C6", "above")] == pytest.approx(sum(int(b[4]["above"]) for b in raw.values()) / entries)
    assert families["fleetnap_cstate_below_total"]["type"] == "counter"


def test_the_advice_names_the_budget_when_the_misses_say_it_costs(tmp_path):
    """cfl-u's real counters: C10, the deepest state, missed its target residency on about half
    of its entries (rule above); with a 5 us PM QoS limit on every CPU, C1's and C1E's next states
    are out of reach and their below is the limit's (rule below_qos, where over 20 % of entries);
    with C8-C10 disabled and no limit, C7s (never entered) is the deepest and nothing is said."""
    from ansible.module_utils.fleetnap.residency import MISS_SHARE, miss_advice
    raw = capture("cfl-u")
    root = materialize("cfl-u", tmp_path / "r")
    cpu_dir = root / "sys/devices/system/cpu"

    def share(index, counter):
        return sum(int(b[index][counter]) for b in raw.values()) / float(sum(int(b[index]["usage"]) for b in raw.values()))

    advice = miss_advice(read_model(HostFS(str(root))))
    assert [(a["state"], a["rule"]) for a in advice] == [("C10", "above")]
    assert advice[0]["share"] == round(share(8, "above"), 4) and "the budget lets the CPUs sleep deeper" in advice[0]["text"]
    for n in raw:
        (cpu_dir / ("cpu%d/power/pm_qos_resume_latency_us" % n)).write_text("5\n")
    advice = miss_advice(read_model(HostFS(str(root))))
    want = [(name, "below_qos") for name, i in (("C1", 1), ("C1E", 2), ("C3", 3), ("C6", 4), ("C7s", 5), ("C8", 6),
                                                 ("C9", 7)) if sum(int(b[i]["usage"]) for b in raw.values())
            and share(i, "below") > MISS_SHARE]
    assert ("C1", "below_qos") in want                       # the capture has one to find
    assert sorted((a["state"], a["rule"]) for a in advice if a["rule"] == "below_qos") == sorted(want)
    for n in raw:
        (cpu_dir / ("cpu%d/power/pm_qos_resume_latency_us" % n)).write_text("0\n")
        for i in (6, 7, 8):
            (cpu_dir / ("cpu%d/cpuidle/state%d/disable" % (n, i))).write_text("1\n")
    assert miss_advice(read_model(HostFS(str(root)))) == []


def test_the_deepest_allowed_state_is_the_deepest_within_the_pm_qos_limit(tmp_path):
    """A profile that limits the wake-up latency by PM QoS (not by disabling states): the deepest
    state within the limit is the one the above rule looks at (the deeper ones are never entered)."""
    from ansible.module_utils.fleetnap.residency import miss_advice
    root = materialize("cfl-u", tmp_path / "r")
    cpu_dir = root / "sys/devices/system/cpu"
    raw = capture("cfl-u")
    for n in raw:
        (cpu_dir / ("cpu%d/power/pm_qos_resume_latency_us" % n)).write_text("100\n")    # C6 (85 us) in reach
        (cpu_dir / ("cpu%d/cpuidle/state4/above" % n)).write_text(raw[n][4]["usage"] + "\n")   # every C6 entry missed
    advice = [a for a in miss_advice(read_model(HostFS(str(root)))) if a["rule"] == "above"]
    assert [a["state"] for a in advice] == ["C6"] and advice[0]["share"] == 1.0


def test_two_states_of_a_cpu_with_one_name_are_two_series(tmp_path):
    """Some boards' ACPI tables give two states one name (lnl0's capture made so: C1_ACPI twice on
    CPU 0). Each is a series of its own (the second labelled with its directory), the exposition is
    valid, and the module writes it (this was a traceback: two samples with the same labels)."""
    from conftest import run_module
    root = materialize("lnl0", tmp_path / "r")
    (root / "sys/devices/system/cpu/cpu0/cpuidle/state2/name").write_text("C1_ACPI\n")
    raw = capture("lnl0")
    text = render(residency_metrics(read_model(HostFS(str(root)))))
    assert_valid_metrics(text)
    usage = {(s["labels"]["cpu"], s["labels"]["state"]): s["value"]
             for s in parse_exposition(text)["fleetnap_cstate_entries_total"]["samples"]}
    assert usage[("0", "C1_ACPI")] == float(raw[0][1]["usage"])
    assert usage[("0", "C1_ACPI (state2)")] == float(raw[0][2]["usage"])
    assert ("1", "C1_ACPI (state2)") not in usage and ("1", "C2_ACPI") in usage     # the other CPUs as they were
    out = tmp_path / "out"
    out.mkdir()
    res = run_module("cstate_residency", {"sysfs_root": str(root), "directory": str(out)})
    assert not res.get("failed"), res
    assert 'state="C1_ACPI (state2)"' in (out / "fleetnap_cstate_residency.prom").read_text()
