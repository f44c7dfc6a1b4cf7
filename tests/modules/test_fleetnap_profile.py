"""fleetnap_profile (the gate and the sleep policy in one call) on captured machines.

The oracle is the two modules it replaces: cpuidle_qos + sleep_policy run on a second copy of
the same machine must leave exactly the same tree (sysfs, fleetnap's records and files).
"""

import json

import pytest

from conftest import materialize, run_batch, snapshot_tree
from datasets import disabled_in, disabled_on_disk, expected_disabled

FACT = "etc/ansible/facts.d/fleetnap.fact"
TARGETS = ["hibernate.target", "hybrid-sleep.target", "sleep.target", "suspend-then-hibernate.target",
           "suspend.target"]


def machine(tmp_path, dataset="ivbep1", states="freeze mem disk", mem_sleep="s2idle [deep]", stored=None):
    """A captured machine plus a /sys/power tree (and optionally stored measurements)."""
    root = materialize(dataset, tmp_path)
    power = root / "sys/power"
    power.mkdir(parents=True, exist_ok=True)
    (power / "state").write_text(states + "\n")
    (power / "mem_sleep").write_text(mem_sleep + "\n")
    if stored is not None:
        (root / FACT).parent.mkdir(parents=True, exist_ok=True)
        (root / FACT).write_text(stored if isinstance(stored, str) else json.dumps(stored))
    return root


def disabled_files(grep_output):
    from pathlib import Path
    return [Path(line) for line in grep_output.splitlines() if line]


def profile(module_runner, root, check=False, diff=False, **args):
    args.setdefault("sysfs_root", str(root))
    return module_runner("fleetnap_profile", args, check=check, diff=diff)


@pytest.mark.parametrize("dataset,budget,resume_budget,want_sleep", [
    ("ivbep1", 20, None, "deep"),
    ("spr1", 2, 0, "s2idle"),     # budget 0 ms, nothing measured: S3 not allowed
    ("rome0", 50, None, "deep"),
])
def test_same_end_state_as_the_two_modules(dataset, budget, resume_budget, want_sleep, tmp_path):
    """One playbook (conftest.run_batch): fleetnap_profile on one copy, the two modules by hand on
    the other, the copies compared by diff -r, then again (idempotent) and absent (restored)."""
    one = machine(tmp_path / "one", dataset)
    two = machine(tmp_path / "two", dataset)
    pristine = snapshot_tree(one / "sys")
    args = {"sysfs_root": str(one), "cstates": {"max_latency_us": budget, "declared_latency_margin": 1.5},
            "sleep": {"resume_budget_ms": resume_budget}}
    res, disabled, kept, gate, sleep, same, again, absent = run_batch([
        {"module": "fleetnap_profile", "args": args},
        {"command": ["grep", "-rlx", "--include=disable", "1", str(one / "sys/devices/system/cpu")]},
        {"command": ["cat", str(one / "var/lib/fleetnap/profile.want")]},
        {"module": "cpuidle_qos", "args": {"max_latency_us": budget, "declared_latency_margin": 1.5,
                                            "sysfs_root": str(two)}},
        {"module": "sleep_policy", "args": {"allow": want_sleep, "sysfs_root": str(two)}},
        # profile.want is fleetnap_profile's own (what it set, for the check after a wake; below)
        {"command": ["diff", "-r", "-x", "profile.want", str(one), str(two)]},
        {"module": "fleetnap_profile", "args": args},
        {"module": "fleetnap_profile", "args": {"sysfs_root": str(one), "state": "absent"}},
    ], tmp_path / "batch")
    assert not res.failed, res.get("msg")
    assert res.changed and res["sleep"] == want_sleep
    assert disabled_in(disabled.get("stdout", ""), one) == expected_disabled(dataset, budget, margin=1.5)
    # The two modules by hand, on the other copy: the same tree.
    assert not gate.failed and not sleep.failed
    assert same["rc"] == 0, same.get("stdout", "")[:2000]
    assert res["states"] == gate["states"] and res["cstates"]["writes"] == gate["writes"]
    assert res["disabled_states"] == [s["name"] for s in gate["states"] if not s["allowed"]]
    assert res["sleep_policy"]["mem_sleep"] == sleep["mem_sleep"]
    # profile.want names every disable file of the machine with the value it holds now.
    want = dict(line.split(" ") for line in kept["stdout"].splitlines() if not line.startswith("#"))
    assert len(want) == len(list((one / "sys/devices/system/cpu").glob("cpu*/cpuidle/state*/disable")))
    assert {k for k, v in want.items() if v == "1"} == {"/" + str(p.relative_to(one)) for p in disabled_files(
        disabled.get("stdout", ""))}
    # Idempotent; absent restores the capture.
    assert not again.changed and again["cstates"]["writes"] == 0
    assert absent.changed and absent["sleep"] is None and absent["states"] == []
    restored = snapshot_tree(one / "sys")
    # A prepared tree holds the word written, the kernel would show "s2idle [deep]" again.
    assert restored.pop("power/mem_sleep") in (b"deep", pristine.pop("power/mem_sleep"))
    assert restored == pristine
    assert not (one / "var/lib/fleetnap/cpuidle_qos.orig.json").exists()
    assert not (one / "var/lib/fleetnap/profile.want").exists()
    assert not (one / "etc/systemd/sleep.conf.d/fleetnap.conf").exists()


def test_stored_measurements_are_used_and_given_ones_win(tmp_path, module_runner):
    stored = {"wake_latency_us": {"C1": 15.0, "C1E": 30.0, "C9": 1.0},   # C9: not a state of ivbep1
              "resume": {"end_to_end_ms": 800, "kernel_ms": 142.6}}
    root = machine(tmp_path / "r", stored=stored)
    # ivbep1 declares C1 1 us, C1E 10 us: the stored values decide; C1E is given -> 5 us wins.
    res = profile(module_runner, root, cstates={"max_latency_us": 10, "measured_latency_us": {"C1E": 5}},
                  sleep={"resume_budget_ms": 500})
    assert not res.failed, res.get("msg")
    assert res["measured_latency_us"] == {"C1": 15.0, "C1E": 5}
    assert res["disabled_states"] == ["C1", "C3", "C6"] and res["allowed_states"] == ["POLL", "C1E"]
    assert disabled_on_disk(root, "ivbep1") == expected_disabled("ivbep1", 10, measured={"C1": 15.0, "C1E": 5})
    assert (res["sleep"], res["sleep_reason"], res["resume_measured_ms"]) == \
        ("s2idle", "resume 800 ms > budget 500 ms", 800)
    assert (root / "sys/power/mem_sleep").read_text().strip() == "s2idle"
    (root / "sys/power/mem_sleep").write_text("[s2idle] deep\n")   # as the kernel shows it after the write
    # The kernel's resume time fits: S3.
    res = profile(module_runner, root, cstates={"max_latency_us": 10, "measured_latency_us": {"C1E": 5}},
                  sleep={"resume_budget_ms": 500, "resume_metric": "kernel"})
    assert (res["sleep"], res["sleep_reason"]) == ("deep", "resume 142.6 ms <= budget 500 ms")
    assert res.changed and (root / "sys/power/mem_sleep").read_text().strip() == "deep"
    # A given resume latency wins over the stored one.
    (root / "sys/power/mem_sleep").write_text("s2idle [deep]\n")
    res = profile(module_runner, root, cstates={"max_latency_us": 10}, sleep={"resume_budget_ms": 500,
                  "resume_measured_ms": 501})
    assert (res["sleep"], res["sleep_reason"]) == ("s2idle", "resume 501 ms > budget 500 ms")
    assert res["measured_latency_us"] == {"C1": 15.0, "C1E": 30.0}
    assert res["disabled_states"] == ["C1", "C1E", "C3", "C6"]


@pytest.mark.parametrize("states,mem_sleep,sleep,want,reason", [
    ("freeze", "[s2idle]", {"resume_budget_ms": 500, "resume_measured_ms": 10}, "s2idle",
     "S3 not offered by this host"),
    ("freeze mem", "s2idle [deep]", {"resume_budget_ms": 500}, "s2idle",
     "resume latency not measured yet (run measure_resume.yml)"),
    ("freeze mem", "s2idle [deep]", {"resume_budget_ms": 5, "resume_measured_ms": 9, "fallback": "none"}, "none",
     "resume 9 ms > budget 5 ms"),
    ("freeze mem", "s2idle [deep]", {}, "deep", "no resume budget"),
])
def test_sleep_decision_in_check_mode(states, mem_sleep, sleep, want, reason, tmp_path, module_runner):
    root = machine(tmp_path / "r", states=states, mem_sleep=mem_sleep)
    before = snapshot_tree(root)
    res = profile(module_runner, root, check=True, diff=True, cstates={"max_latency_us": 20}, sleep=sleep)
    assert not res.failed, res.get("msg")
    assert (res["sleep"], res["sleep_reason"]) == (want, reason)
    assert snapshot_tree(root) == before and not (root / "etc/systemd").exists()
    after = res["diff"]["after"]
    assert after["cstates"]["disabled_cpus_per_state"]["C6"] == "0-47"
    assert after["sleep"]["masked_targets"] == (TARGETS if want == "none" else [])


def test_check_mode_diff_matches_the_real_run(tmp_path, module_runner):
    root = machine(tmp_path / "r")
    args = {"cstates": {"max_latency_us": 20, "resume_latency_us": 20}, "sleep": {"resume_budget_ms": 0,
            "fallback": "none"}}
    before = snapshot_tree(root)
    plan = profile(module_runner, root, check=True, diff=True, **args)
    assert plan.changed and snapshot_tree(root) == before
    assert set(plan["diff"]["before"]) == set(plan["diff"]["after"]) == {"cstates", "sleep"}
    assert plan["diff"]["before"]["sleep"]["masked_targets"] == []
    real = profile(module_runner, root, diff=True, **args)
    assert real.changed and real["diff"] == plan["diff"]
    assert real["sleep"] == "none" and real["sleep_policy"]["masked_targets"] == TARGETS
    assert (root / "sys/devices/system/cpu/cpu5/power/pm_qos_resume_latency_us").read_text().strip() == "20"
    again = profile(module_runner, root, check=True, diff=True, **args)
    assert not again.changed


def test_sleep_unmanaged_and_metrics(tmp_path, module_runner):
    root = machine(tmp_path / "r")
    metrics = tmp_path / "textfile"
    res = profile(module_runner, root, cstates={"max_latency_us": 20}, sleep={"manage": False},
                  metrics_dir=str(metrics))
    assert not res.failed, res.get("msg")
    assert res["sleep"] is None and res["sleep_policy"] == {} and res["sleep_reason"] == "no resume budget"
    assert (root / "sys/power/mem_sleep").read_text().strip() == "s2idle [deep]"
    assert 'fleetnap_cstate_allowed{state="C6"} 0' in (metrics / "fleetnap_cpuidle.prom").read_text()
    assert not (metrics / "fleetnap_sleep_policy.prom").exists()
    res = profile(module_runner, root, cstates={"max_latency_us": 20}, metrics_dir=str(metrics))
    assert res.changed and (metrics / "fleetnap_sleep_policy.prom").exists()


def _unchanged_after_failure(module_runner, root, match, **args):
    before = snapshot_tree(root)
    res = profile(module_runner, root, **args)
    assert res.failed and match in res["msg"], res.get("msg")
    assert snapshot_tree(root) == before
    assert not (root / "var/lib/fleetnap").exists() and not (root / "etc/systemd").exists()
    return res


@pytest.mark.parametrize("args,match", [
    ({"cstates": {"max_latency_us": 20, "disable": ["C7"]}, "sleep": {"resume_budget_ms": 100}},
     "unknown state(s) C7"),
    ({"cstates": {"max_latency_us": -1}}, "max_latency_us must be >= 0"),
    ({"cstates": {"max_latency_us": 20}, "sleep": {"resume_budget_ms": -5}}, "resume_budget_ms must be >= 0"),
    ({"cstates": {"max_latency_us": 20}, "sleep": {"resume_budget_ms": "soon"}},
     "sleep.resume_budget_ms must be a number"),
    ({"cstates": {"max_latency_us": 20, "cpus": "40-63"}}, "CPU(s) 48-63 do not exist"),
])
def test_bad_input_changes_nothing(args, match, tmp_path, module_runner):
    _unchanged_after_failure(module_runner, machine(tmp_path / "r"), match, **args)


def test_bad_stored_measurements_change_nothing(tmp_path, module_runner):
    root = machine(tmp_path / "r", stored="{not json")
    res = _unchanged_after_failure(module_runner, root, "does not hold a JSON object",
                                   cstates={"max_latency_us": 20})
    assert str(root / FACT) in res["msg"]
    root = machine(tmp_path / "s", stored={"resume": {"end_to_end_ms": "slow"}})
    _unchanged_after_failure(module_runner, root, "resume.end_to_end_ms must be a number",
                             cstates={"max_latency_us": 20}, sleep={"resume_budget_ms": 10})


def test_sleep_part_failing_its_plan_stops_the_gate_too(tmp_path, module_runner):
    """The gate would change 96 files; the sleep part cannot write mem_sleep: nothing is written."""
    root = machine(tmp_path / "r", mem_sleep="[s2idle] deep")
    (root / "sys/power/mem_sleep").chmod(0o444)
    res = _unchanged_after_failure(module_runner, root, "read-only", cstates={"max_latency_us": 20})
    assert "mem_sleep" in res["msg"]
    # S3 asked where the host offers none is refused before the gate writes, too.
    root = machine(tmp_path / "s", states="mem", mem_sleep="[s2idle]")
    with_s2idle_only = snapshot_tree(root)
    res = profile(module_runner, root, cstates={"max_latency_us": 20}, sleep={"fallback": "none"})
    assert not res.failed and res["sleep"] == "none" and res["sleep_reason"] == "S3 not offered by this host"
    assert snapshot_tree(root / "sys/power") == {k[len("sys/power/"):]: v for k, v in with_s2idle_only.items()
                                                 if k.startswith("sys/power/")}


def test_failure_while_writing_the_sleep_part_rolls_the_gate_back(tmp_path, module_runner):
    """A fault after the plan: the drop-in directory is a file. The C-state writes are undone."""
    root = machine(tmp_path / "r", mem_sleep="[s2idle] deep")
    (root / "etc/systemd").mkdir(parents=True)
    (root / "etc/systemd/sleep.conf.d").write_text("in the way\n")
    before = snapshot_tree(root)
    res = profile(module_runner, root, cstates={"max_latency_us": 20})
    assert res.failed and "applying the sleep policy failed" in res["msg"], res.get("msg")
    assert "change(s) were undone, the host is as it was" in res["msg"], res["msg"]
    after = snapshot_tree(root)
    # mem_sleep got the word written back ("s2idle"); the kernel would show "[s2idle] deep" again.
    assert after.pop("sys/power/mem_sleep") == b"s2idle" and before.pop("sys/power/mem_sleep") == b"[s2idle] deep"
    assert {k: v for k, v in after.items() if k.startswith("sys/")} == \
        {k: v for k, v in before.items() if k.startswith("sys/")}
    assert not (root / "var/lib/fleetnap/cpuidle_qos.orig.json").exists()


def test_advice_decides_in_the_same_call_as_powernap_advice_would(tmp_path):
    """sleep.advice (the role's advise path, folded): the PowerNap model runs in the profile's one
    call on the host. The oracle is powernap_advice itself, run in the same playbook on the same
    inputs: the same advice and the same reason; S3 only where it advises sleeping."""
    fast = machine(tmp_path / "fast", stored={"resume": {"end_to_end_ms": 10}})
    slow = machine(tmp_path / "slow", stored={"resume": {"end_to_end_ms": 1000}})
    fresh = machine(tmp_path / "fresh")
    no_s3 = machine(tmp_path / "nos3", states="freeze", mem_sleep="[s2idle]",
                    stored={"resume": {"end_to_end_ms": 10}})
    advice = {"utilization": [0.01, 0.02, 0.02, 0.015], "response_time_objective": 1.5}

    def prof(root, **extra):
        return {"module": "fleetnap_profile", "args": {"sysfs_root": str(root), "cstates": {"max_latency_us": 20},
                                                       "sleep": {"advice": dict(advice, **extra),
                                                                 "resume_budget_ms": 0}}}
    res = run_batch([
        prof(fast, svg=True),
        {"module": "powernap_advice", "args": {"transition_latency_s": 0.01, "utilization": advice["utilization"]}},
        prof(slow),
        {"module": "powernap_advice", "args": {"transition_latency_s": 1.0, "utilization": advice["utilization"]}},
        prof(fresh),
        prof(no_s3),
        prof(fast, svg=True),
    ], tmp_path / "batch")
    assert not any(r.failed for r in res), [r.get("msg") for r in res]
    fast_res, fast_oracle, slow_res, slow_oracle, fresh_res, no_s3_res, again = res
    # The budget (0 ms) is not what decides: the advice is.
    assert fast_res["sleep"] == "deep" and fast_oracle["advice"] == "sleep"
    assert fast_res["sleep_reason"] == "powernap_advice: sleep, %s" % fast_oracle["reason"]
    assert fast_res["powernap"]["powernap"] == fast_oracle["powernap"]
    assert (fast / "sys/power/mem_sleep").read_text().strip() == "s2idle [deep]"
    assert "<svg xmlns" in fast_res["powernap_svg"] and "resume 10 ms" in fast_res["powernap_svg"]
    assert slow_oracle["advice"] == "stay-awake"
    assert (slow_res["sleep"], slow_res["sleep_reason"]) == ("s2idle", "powernap_advice: stay-awake, %s"
                                                            % slow_oracle["reason"])
    assert (fresh_res["sleep"], fresh_res["sleep_reason"], fresh_res["powernap"]) == (
        "s2idle", "resume latency not measured yet (run measure_resume.yml)", {})
    assert "powernap_svg" not in fresh_res
    assert (no_s3_res["sleep"], no_s3_res["sleep_reason"]) == ("s2idle", "S3 not offered by this host")
    assert not again.changed and again["sleep"] == "deep"


def test_pm_qos_and_global_latency_derived_from_the_budget(tmp_path):
    """cstates.pm_qos / global_latency: the module derives the PM QoS values from the budget (whole
    microseconds, rounded up), as the role did in Jinja; without a budget PM QoS is 0 (no
    constraint) and no global limit is held."""
    one, two = machine(tmp_path / "one"), machine(tmp_path / "two")
    res = run_batch([
        {"module": "fleetnap_profile", "args": {"sysfs_root": str(one), "cstates": {
            "max_latency_us": 19.2, "pm_qos": True, "global_latency": True}}},
        {"module": "fleetnap_profile", "args": {"sysfs_root": str(two), "cstates": {
            "max_latency_us": None, "pm_qos": True, "global_latency": True}}},
        {"module": "fleetnap_profile", "args": {"sysfs_root": str(one), "cstates": {
            "max_latency_us": 19.2, "resume_latency_us": 20, "global_latency_us": 20}}},
    ], tmp_path / "batch")
    assert not any(r.failed for r in res), [r.get("msg") for r in res]
    derived, unbounded, explicit = res
    assert derived.changed and not explicit.changed      # the same values, given instead of derived
    assert pm_qos(one) == {"20"} and pm_qos(two) == {"0"}
    unit = one / "etc/systemd/system/fleetnap-cpu-dma-latency.service"
    assert "20" in unit.read_text()
    assert not (two / "etc/systemd/system/fleetnap-cpu-dma-latency.service").exists()


def pm_qos(root):
    return {p.read_text().strip() for p in root.glob("sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us")}


def test_every_option_is_checked_before_the_host_is_read(tmp_path, module_runner):
    """A bad advice or PM QoS option is refused naming that option even where the host's own
    measurements file is broken: the options are checked before the host is read."""
    root = machine(tmp_path / "r", stored="{broken")
    res = _unchanged_after_failure(module_runner, root, "option sleep.advice.response_time_objective",
                                   sleep={"advice": {"utilization": 0.1, "response_time_objective": 0.5}})
    assert "fleetnap.fact" not in res["msg"]
    res = _unchanged_after_failure(module_runner, root, "cstates.pm_qos needs cstates.max_latency_us",
                                   cstates={"max_latency_us": 0.2, "pm_qos": True})
    assert "fleetnap.fact" not in res["msg"]


# The module as AnsiballZ runs it (library/fleetnap_profile.py as __main__, its arguments from a
# file), reporting at exit which of fleetnap's module_utils it imported.
IMPORTS = r"""
import atexit, json, runpy, sys
import ansible.module_utils
ansible.module_utils.__path__.append(sys.argv[1])
before = set(sys.modules)
atexit.register(lambda: sys.stderr.write("\nIMPORTED " + json.dumps(sorted(
    m.rsplit(".", 1)[1] for m in set(sys.modules) - before if m.startswith("ansible.module_utils.fleetnap.")))))
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("extra,used,unused", [
    ({}, set(), {"powernap", "prom", "pstate"}),
    ({"sleep": {"advice": {"utilization": [0.01, 0.02]}}}, {"powernap"}, {"prom", "pstate"}),
    ({"metrics_dir": "METRICS"}, {"prom"}, {"powernap", "pstate"}),
    ({"cpufreq": {"turbo": "off"}}, {"pstate"}, {"powernap", "prom"}),
], ids=["plain", "advice", "metrics", "cpufreq"])
def test_a_profile_imports_only_the_code_it_uses(tmp_path, extra, used, unused):
    """Every host compiles what the module imports (AnsiballZ ships source): the PowerNap model only
    for a profile with advice, the Prometheus writer only with metrics, the P-state code only with a
    cpufreq part; the C-states and the sleep policy always."""
    import subprocess
    import sys
    from conftest import PSTATE_DATA, REPO
    root = machine(tmp_path / "m", "spr1")
    materialize("spr1", root, data=PSTATE_DATA)      # its cpufreq part too
    metrics = root / "metrics"
    metrics.mkdir()
    args = dict({"sysfs_root": str(root), "cstates": {"max_latency_us": 20}}, **extra)
    if args.get("metrics_dir") == "METRICS":
        args["metrics_dir"] = str(metrics)
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, "-c", IMPORTS, str(REPO / "module_utils"),
                           str(REPO / "library/fleetnap_profile.py"), str(argfile)],
                          capture_output=True, text=True, timeout=120)
    result = json.loads(proc.stdout)
    assert not result.get("failed"), result
    imported = set(json.loads(proc.stderr.rsplit("IMPORTED ", 1)[1]))
    assert {"gate", "cpuidle", "sleeppolicy", "fileio"} | used <= imported, imported
    assert not imported & unused, imported
