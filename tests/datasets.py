"""Independent readers of the reference data in tests/data, used as oracles (they do not use fleetnap's code)."""

from __future__ import annotations

import csv
import functools
import re
from collections import defaultdict
from pathlib import Path

from conftest import CPUIDLE_DATA, DATA

STATE_LINE = re.compile(r"/sys/devices/system/cpu/cpu(\d+)/cpuidle/state(\d+)/(name|latency|disable)$")


@functools.lru_cache(maxsize=None)
def raw_states(dataset):
    """{cpu: {index: {"name", "latency", "disable"}}} straight from the capture file."""
    out = defaultdict(lambda: defaultdict(dict))
    for line in (CPUIDLE_DATA / ("%s.txt" % dataset)).read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        _mode, path, value = line.split("|", 2)
        m = STATE_LINE.search(path)
        if m:
            out[int(m.group(1))][int(m.group(2))][m.group(3)] = value
    return {cpu: dict(states) for cpu, states in out.items()}


def expected_disabled(dataset, budget_us, margin=1.0, measured=None):
    """{(cpu, index)} that a budget must disable: effective latency > budget, POLL never."""
    measured = measured or {}
    want = set()
    for cpu, states in raw_states(dataset).items():
        for index, st in states.items():
            if st["name"] == "POLL" or budget_us is None:
                continue
            eff = measured.get(st["name"], int(st["latency"]) * margin)
            if eff > budget_us:
                want.add((cpu, index))
    return want


def disabled_on_disk(root, dataset):
    got = set()
    for cpu, states in raw_states(dataset).items():
        for index in states:
            f = root / ("sys/devices/system/cpu/cpu%d/cpuidle/state%d/disable" % (cpu, index))
            if f.read_text().strip() == "1":
                got.add((cpu, index))
    return got


def disabled_in(listing, root):
    """{(cpu, state index)} from a list of disable files that read 1 (``grep -rlx 1`` over the
    tree's cpu directory, run between module runs of one playbook)."""
    got = set()
    base = Path(root) / "sys/devices/system/cpu"
    for line in listing.splitlines():
        rel = Path(line).relative_to(base)
        got.add((int(rel.parts[0][3:]), int(rel.parts[2][5:])))
    return got


def thesis_measurements():
    """{dataset: {state: (declared_us, measured_max_us)}} from the thesis CSV (Table 6 column)."""
    out = defaultdict(dict)
    path = DATA / "wake-latency" / "thesis-xeon-wake-latency.csv"
    rows = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    for row in csv.DictReader(rows):
        out[row["pepc_dataset"]][row["state"]] = (float(row["declared_us"]), float(row["measured_max_ns"]) / 1000.0)
    return dict(out)


PSTATE_POLICY = re.compile(r"^/sys/devices/system/cpu/cpufreq/policy(\d+)/(\w+)$")
PSTATE_EPB = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/power/energy_perf_bias$")
PSTATE_UNCORE = re.compile(r"^/sys/devices/system/cpu/intel_uncore_frequency/([^/]+)/(\w+)$")
PSTATE_GLOBAL = re.compile(r"^/sys/devices/system/cpu/(intel_pstate|amd_pstate|cpufreq)/(\w+)$")


@functools.lru_cache(maxsize=None)
def raw_pstates(dataset):
    """{"policy": {N: {file: value}}, "epb": {cpu: value}, "uncore": {dir: {file: value}},
    "global": {"intel_pstate/status": value, ...}} straight from tests/data/pstates/NAME.txt."""
    out = {"policy": defaultdict(dict), "epb": {}, "uncore": defaultdict(dict), "global": {}}
    for line in (DATA / "pstates" / ("%s.txt" % dataset)).read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        _mode, path, value = line.split("|", 2)
        m = PSTATE_POLICY.match(path)
        if m:
            out["policy"][int(m.group(1))][m.group(2)] = value
        elif PSTATE_EPB.match(path):
            out["epb"][int(PSTATE_EPB.match(path).group(1))] = value
        elif PSTATE_UNCORE.match(path):
            d, f = PSTATE_UNCORE.match(path).groups()
            out["uncore"][d][f] = value
        elif PSTATE_GLOBAL.match(path):
            out["global"]["%s/%s" % PSTATE_GLOBAL.match(path).groups()] = value
    return {"policy": dict(out["policy"]), "epb": out["epb"], "uncore": dict(out["uncore"]), "global": out["global"]}
