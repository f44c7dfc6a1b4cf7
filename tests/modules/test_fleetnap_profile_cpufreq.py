"""fleetnap_profile's CPU frequency part (issue 38) on captured machines (tests/data/pstates).

The oracle is an independent reading of the captured files (tests/datasets.raw_pstates) and the
kernel's documented rules, written here apart from module_utils/fleetnap/pstate.py: for each
layout (HWP intel_pstate with legacy uncore, intel_pstate passive without HWP, acpi-cpufreq,
amd-pstate-epp, TPMI uncore), a profile's fields give exactly the files and values predicted;
a second run writes nothing; state=absent restores every file byte for byte; check mode writes
nothing. Each group of runs is one ansible-playbook (conftest.run_batch).
"""

from __future__ import annotations

import json

import pytest

from conftest import PSTATE_DATA, materialize, run_batch, snapshot_tree
from datasets import raw_pstates

CPU = "sys/devices/system/cpu/"
EPB = {"performance": 0, "balance-performance": 4, "normal": 6, "balance-power": 8, "power": 15}


def machine(root, name, states="freeze mem", mem_sleep="s2idle [deep]"):
    """A captured machine: its cpuidle capture where there is one, its CPU frequency capture and
    a /sys/power."""
    if (PSTATE_DATA.parent / "cpuidle" / ("%s.txt" % name)).exists():
        materialize(name, root)
    materialize(name, root, data=PSTATE_DATA)
    (root / "sys/power").mkdir(parents=True, exist_ok=True)
    (root / "sys/power/state").write_text(states + "\n")
    (root / "sys/power/mem_sleep").write_text(mem_sleep + "\n")
    return root


def khz(value, lo, hi, base):
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        return lo + (hi - lo) * int(value[:-1]) // 100
    return {"min": lo, "max": hi, "base": base}[value]


def predict(name, fields):
    """{file under the root: value} for every file the fields change, from the captured files."""
    raw = raw_pstates(name)
    out = {}
    for n, files in raw["policy"].items():
        d = CPU + "cpufreq/policy%d/" % n
        if "governor" in fields:
            out[d + "scaling_governor"] = fields["governor"]
        lo, hi = int(files["cpuinfo_min_freq"]), int(files["cpuinfo_max_freq"])
        base = int(files["base_frequency"]) if "base_frequency" in files else None
        for key in ("min", "max"):
            if key + "_khz" in fields:
                out[d + "scaling_%s_freq" % key] = str(khz(fields[key + "_khz"], lo, hi, base))
        if "epp" in fields:
            out[d + "energy_performance_preference"] = str(fields["epp"])
    if "turbo" in fields:
        if "intel_pstate/no_turbo" in raw["global"]:
            out[CPU + "intel_pstate/no_turbo"] = "0" if fields["turbo"] else "1"
        else:
            out[CPU + "cpufreq/boost"] = "1" if fields["turbo"] else "0"
    if "epb" in fields:
        for cpu in raw["epb"]:
            out[CPU + "cpu%d/power/energy_perf_bias" % cpu] = str(EPB.get(fields["epb"], fields["epb"]))
    domains = sorted(d for d in raw["uncore"] if d.startswith("uncore")) or sorted(raw["uncore"])
    for d in domains:
        files = raw["uncore"][d]
        lo, hi = int(files["initial_min_freq_khz"]), int(files["initial_max_freq_khz"])
        for key in ("min", "max"):
            if "uncore_%s_khz" % key in fields:     # the uncore keeps 100 MHz steps: rounded down
                value = khz(fields["uncore_%s_khz" % key], lo, hi, None)
                out[CPU + "intel_uncore_frequency/%s/%s_freq_khz" % (d, key)] = str(value - value % 100000)
        # the efficiency latency control of a TPMI domain that has it
        for field, name in (("elc_low_percent", "elc_low_threshold_percent"),
                            ("elc_high_percent", "elc_high_threshold_percent"),
                            ("elc_high_enable", "elc_high_threshold_enable"), ("elc_floor_khz", "elc_floor_freq_khz")):
            if field in fields and name in files:
                value = fields[field]
                value = int(value) if isinstance(value, bool) else khz(value, lo, hi, None)
                value = value - value % 100000 if name == "elc_floor_freq_khz" else value
                out[CPU + "intel_uncore_frequency/%s/%s" % (d, name)] = str(value)
    return out


# One per layout: the fields a profile of that kind would set there.
LAYOUTS = {
    "cfl-u": {"governor": "performance", "epp": "performance", "epb": "performance", "min_khz": "base",
              "turbo": False, "uncore_min_khz": "max"},                     # HWP, legacy uncore
    "bdwup0": {"governor": "powersave", "max_khz": "50%", "epb": 8, "turbo": False,
               "uncore_max_khz": "min"},                                    # intel_pstate passive, no HWP
    "snr0": {"governor": "performance", "min_khz": 1500000, "epb": "balance-power"},   # acpi-cpufreq
    "turin0": {"governor": "powersave", "max_khz": "80%", "turbo": False},           # amd-pstate-epp
    "srf8": {"epp": 64, "uncore_max_khz": "50%", "uncore_min_khz": "10%", "elc_low_percent": 20,
             "elc_high_percent": 90, "elc_high_enable": False, "elc_floor_khz": "min"},  # TPMI uncore with ELC
}


def changed_files(before, after):
    return {k: after[k].decode() for k in after if before.get(k) != after[k]}


def test_each_layout_gets_exactly_the_predicted_writes_and_absent_restores_them(tmp_path):
    calls, roots = [], {}
    for name, fields in LAYOUTS.items():
        root = machine(tmp_path / name / "root", name)
        roots[name] = (root, snapshot_tree(root / "sys"))
        args = {"sysfs_root": str(root), "cpufreq": fields, "sleep": {"manage": False}}
        absent = {"sysfs_root": str(root), "state": "absent", "sleep": {"manage": False}}
        calls += [
            {"module": "fleetnap_profile", "args": args, "check": True, "diff": True},
            {"command": ["cp", "-a", str(root), str(tmp_path / name / "checked")]},
            {"module": "fleetnap_profile", "args": args, "diff": True},
            {"module": "fleetnap_profile", "args": args},
            {"command": ["cat", str(root / "var/lib/fleetnap/pstate.orig.json")]},
            {"command": ["cp", "-a", str(root / "sys"), str(tmp_path / name / "applied")]},
            {"module": "fleetnap_profile", "args": absent},
            {"module": "fleetnap_profile", "args": absent},
        ]
    results = run_batch(calls, tmp_path / "batch", via="fork")
    for i, (name, fields) in enumerate(LAYOUTS.items()):
        check, _cp, first, again, record, _cp2, absent, absent_again = results[8 * i:8 * i + 8]
        root, pristine = roots[name]
        for r in (check, first, again, absent, absent_again):
            assert not r.failed, (name, r.get("msg"))
        want = {k: v for k, v in predict(name, fields).items() if pristine[k[len("sys/"):]].decode() != v}
        assert want, "%s: the fields change nothing on the capture; the case proves nothing" % name
        # Check mode: nothing written, the writes it would make are the predicted ones.
        checked = tmp_path / name / "checked"
        assert snapshot_tree(checked / "sys") == pristine and not (checked / "var/lib/fleetnap").exists()
        assert check.changed and check["cpufreq"]["writes"] == len(want)
        assert check["diff"]["after"]["cpufreq"] == {"/" + k: v for k, v in want.items()}, name
        # The real run: exactly the predicted files changed, to the predicted values.
        applied = snapshot_tree(tmp_path / name / "applied")
        assert changed_files(pristine, applied) == {k[len("sys/"):]: v for k, v in want.items()}, name
        assert first.changed and first["diff"] == check["diff"] and first["cpufreq"]["after"] == \
            check["cpufreq"]["after"], name
        assert not again.changed and again["cpufreq"]["writes"] == 0, name
        # The record keeps what each file held before, and nothing else.
        kept = json.loads(record["stdout"])["values"]
        assert kept == {"/" + k: pristine[k[len("sys/"):]].decode() for k in want}, name
        # absent: every file as captured, the record gone; a second absent has nothing to do.
        assert absent.changed and absent["cpufreq"]["restored"], name
        assert snapshot_tree(root / "sys") == pristine, name
        assert not (root / "var/lib/fleetnap/pstate.orig.json").exists()
        assert not absent_again.changed and absent_again["cpufreq"] == {}


def test_the_decision_reports_what_the_host_shows(tmp_path, module_runner):
    root = machine(tmp_path / "r", "cfl-u")
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "sleep": {"manage": False},
                                             "cpufreq": {"epp": "balance_power"}}, check=True)
    assert not res.failed, res.get("msg")
    before, after = res["cpufreq"]["before"], res["cpufreq"]["after"]
    assert (before["driver"], before["mode"], before["hwp"], before["policies"]) == ("intel_pstate", "active", True, 8)
    assert (before["epp"], after["epp"]) == (["balance_performance"], ["balance_power"])
    assert before["turbo"] == "on" and before["uncore"] == ["legacy"] and before["epb"] == [6]
    # Services that write the same knobs are reported (systemd's record of an active unit).
    units = root / "run/systemd/units"
    units.mkdir(parents=True)
    (units / "invocation:power-profiles-daemon.service").symlink_to("0123456789abcdef")
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "sleep": {"manage": False},
                                             "cpufreq": {"epp": "balance_power"}}, check=True)
    assert any("power-profiles-daemon.service is active" in w for w in res.get("warnings", [])), res.get("warnings")
    # No field and nothing to restore: the frequency part reads nothing and reports nothing.
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "sleep": {"manage": False}})
    assert not res.failed and res["cpufreq"] == {}


def test_a_later_profile_keeps_the_first_original(tmp_path):
    """Two profiles in a row: the record keeps what the host had before the first, so absent goes
    back to the capture, not to the first profile."""
    root = machine(tmp_path / "r", "cfl-u")
    pristine = snapshot_tree(root / "sys")
    base = {"sysfs_root": str(root), "sleep": {"manage": False}}
    res = run_batch([
        {"module": "fleetnap_profile", "args": dict(base, cpufreq={"epp": "power", "max_khz": 2000000})},
        {"module": "fleetnap_profile",
         "args": dict(base, cpufreq={"epp": "performance", "max_khz": "max", "min_khz": 3000000})},
        {"command": ["cat", str(root / "var/lib/fleetnap/pstate.orig.json")]},
        {"module": "fleetnap_profile", "args": dict(base, state="absent")},
    ], tmp_path / "batch")
    assert not any(r.failed for r in res), [r.get("msg") for r in res]
    kept = json.loads(res[2]["stdout"])["values"]
    assert kept["/" + CPU + "cpufreq/policy3/energy_performance_preference"] == "balance_performance"
    assert kept["/" + CPU + "cpufreq/policy3/scaling_max_freq"] == "3800000"
    assert kept["/" + CPU + "cpufreq/policy3/scaling_min_freq"] == "400000"
    assert snapshot_tree(root / "sys") == pristine


def test_cstates_and_cpufreq_in_one_call_and_one_undo(tmp_path, module_runner):
    """The C-state gate and the frequency part in the same call, and one state=absent undoes both
    (the failure of a write in the middle: test_a_write_refused_in_the_middle_undoes_the_whole_call)."""
    root = machine(tmp_path / "r", "cfl-u")
    pristine = snapshot_tree(root / "sys")
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "sleep": {"manage": False},
                                             "cstates": {"max_latency_us": 2}, "cpufreq": {"epb": "power"}})
    assert not res.failed and res.changed and res["disabled_states"], res.get("msg")
    assert res["cpufreq"]["writes"] == 8
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "state": "absent", "sleep": {"manage": False}})
    assert not res.failed and res.changed
    assert snapshot_tree(root / "sys") == pristine


@pytest.mark.parametrize("fields,words", [
    ({"epp": "performance", "governor": "performance", "max_khz": 99000000},
     "max_khz: 99000000 kHz is outside what the CPUs allow, 400000..3800000 kHz"),
    ({"epp": "balance_power", "governor": "performance"},
     "epp: under the performance governor intel_pstate takes only performance (0), not balance_power"),
    ({"uncore_min_khz": "max", "uncore_max_khz": "min"},       # the domain's initial max, initial min
     "the minimum 3500000 kHz would be above the maximum 400000 kHz"),
])
def test_a_refused_value_changes_nothing_even_beside_good_ones(fields, words, tmp_path, module_runner):
    root = machine(tmp_path / "r", "cfl-u")
    before = snapshot_tree(root)
    res = module_runner("fleetnap_profile", {"sysfs_root": str(root), "cstates": {"max_latency_us": 2},
                                             "sleep": {"manage": False}, "cpufreq": fields})
    assert res.failed and words in res["msg"] and "nothing was changed" in res["msg"], res.get("msg")
    assert snapshot_tree(root) == before


FAULTY = '''
"""fleetnap_profile with one kernel refusal injected (an error path: a mock is allowed): the
first write to {path} fails as a busy sysfs attribute does; every other write, and every undo,
goes to the file."""
import errno
import runpy

from ansible.module_utils.fleetnap import fileio

real = fileio.write_value
failed = []


def write_value(path, value, root="/"):
    if path.endswith("{path}") and not failed:
        failed.append(path)
        raise OSError(errno.EBUSY, "Device or resource busy")
    return real(path, value, root)


fileio.write_value = write_value
runpy.run_module("fleetnap_profile", run_name="__main__")
'''


def test_a_write_refused_in_the_middle_undoes_the_whole_call(tmp_path):
    """The kernel refuses the fifth EPB write (cpu4), after the C-state writes, the sleep policy
    and four EPB writes: every file of the call is as it was, the records too, and the message
    says so."""
    import forkrun
    from conftest import fork_server
    root = machine(tmp_path / "r", "cfl-u", mem_sleep="[s2idle] deep")
    library = tmp_path / "lib"
    library.mkdir()
    (library / "fleetnap_profile_faulty.py").write_text(FAULTY.replace("{path}", "/cpu4/power/energy_perf_bias"))
    before = snapshot_tree(root)
    server = fork_server()
    ran = server.run("fleetnap_profile_faulty", {
        "sysfs_root": str(root), "cstates": {"max_latency_us": 2},
        "cpufreq": {"epb": "power", "epp": "power", "governor": "powersave"}}, server.scratch, library=library)
    res = forkrun.as_result(ran, 300)
    assert res.get("failed") and "Device or resource busy" in res["msg"], res
    assert "cpu4/power/energy_perf_bias" in res["msg"] and "the host is as it was" in res["msg"], res["msg"]
    after = snapshot_tree(root)
    # mem_sleep holds the word written back ("s2idle"); the kernel would show "[s2idle] deep" again.
    assert after.pop("sys/power/mem_sleep") == b"s2idle" and before.pop("sys/power/mem_sleep") == b"[s2idle] deep"
    assert after == before
    assert not (root / "var/lib/fleetnap").exists() or not any((root / "var/lib/fleetnap").iterdir())
