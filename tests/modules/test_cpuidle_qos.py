"""cpuidle_qos through Ansible on every captured machine in tests/data/cpuidle (pepc-style)."""

import json
import shutil

import pytest

import hostile
from conftest import dataset_names, materialize, run_batch, snapshot_tree
from datasets import disabled_in, disabled_on_disk, expected_disabled, raw_states, thesis_measurements


def qos(module_runner, root, check=False, diff=False, **args):
    args.setdefault("sysfs_root", str(root))
    return module_runner("cpuidle_qos", args, check=check, diff=diff)


# Every captured machine's runs are forked as the AnsiballZ wrapper runs a module (conftest.run_batch
# via tests/forkrun.py: 216 module runs cost 196 s as tasks of one ansible-playbook, about 30 s
# forked); each machine keeps its own test and verdict. Between the module runs, plain commands
# look at the tree: the files changed since a marker made before the first run (check mode must
# change none), and every disable file set to 1. test_thesis_measurements_through_ansible runs
# its calls through ansible-playbook.
_EVERY: dict = {}


def look(root, marker=None):
    """A command task: the files under root changed since marker, or every disable file that is 1."""
    if marker:
        return {"command": ["find", str(root), "-newer", str(marker), "-not", "-path", str(marker)]}
    return {"command": ["grep", "-rlx", "--include=disable", "1", str(root / "sys/devices/system/cpu")]}


def every_machine(tmp_path_factory):
    if _EVERY:
        return _EVERY
    base = tmp_path_factory.mktemp("every-machine")
    calls, roots = [], {}
    for dataset in dataset_names():
        root = materialize(dataset, base / dataset)
        marker = base / ("%s.marker" % dataset)
        r = {"root": root, "pristine": snapshot_tree(root / "sys"), "first": len(calls)}
        marker.write_text("before the playbook\n")
        roots[dataset] = r
        args = {"sysfs_root": str(root), "max_latency_us": 20}
        calls += [{"module": "cpuidle_qos", "args": args, "check": True, "diff": True}, look(root, marker),
                  {"module": "cpuidle_qos", "args": args}, look(root),
                  {"module": "cpuidle_qos", "args": args},
                  {"module": "cpuidle_qos", "args": {"sysfs_root": str(root), "state": "absent"}}]
    results = run_batch(calls, base, via="fork")
    for dataset, r in roots.items():
        r["results"] = results[r["first"]:r["first"] + 6]
    _EVERY.update(roots)
    return _EVERY


@pytest.mark.parametrize("dataset", dataset_names())
def test_budget_on_every_machine(dataset, tmp_path_factory):
    r = every_machine(tmp_path_factory)[dataset]
    planned, changed_by_plan, applied, disabled, again, absent = r["results"]
    # Check mode: the plan for 20 us, nothing written.
    assert not planned.failed, planned.get("msg")
    assert planned.changed == bool(expected_disabled(dataset, 20))
    assert changed_by_plan["rc"] == 0 and changed_by_plan["stdout"] == "", changed_by_plan["stdout"][:500]
    # Apply, checked file by file on every CPU; a second run changes nothing.
    assert not applied.failed, applied.get("msg")
    assert disabled_in(disabled["stdout"], r["root"]) == expected_disabled(dataset, 20)
    assert not again.changed and again["writes"] == 0
    # absent restores the capture exactly (a machine the budget did not touch has no record).
    assert absent.changed == absent["restored"] == bool(expected_disabled(dataset, 20))
    assert snapshot_tree(r["root"] / "sys") == r["pristine"]


@pytest.mark.parametrize("dataset", ["ivbep1", "spr1", "rome0", "lnl0"])
def test_budget_sequence(dataset, tmp_path):
    """Budgets changed in a row (server and client, Intel and AMD): each one exact, each
    idempotent. Each budget applied, the disable files read, applied again."""
    root = materialize(dataset, tmp_path / "root")
    budgets = (100, 2, 50, None)
    calls = []
    for budget in budgets:
        args = {"sysfs_root": str(root), "max_latency_us": budget, "declared_latency_margin": 1.5}
        calls += [{"module": "cpuidle_qos", "args": args}, look(root), {"module": "cpuidle_qos", "args": args}]
    results = run_batch(calls, tmp_path, via="fork")
    for i, budget in enumerate(budgets):
        res, disabled, again = results[3 * i:3 * i + 3]
        assert not res.failed, res.get("msg")
        assert disabled_in(disabled.get("stdout", ""), root) == expected_disabled(dataset, budget, margin=1.5), budget
        assert not again.changed, budget


def test_diff_shows_what_would_change(tmp_path, module_runner):
    root = materialize("ivbep1", tmp_path / "root")
    res = qos(module_runner, root, check=True, diff=True, max_latency_us=20)
    before, after = res["diff"]["before"], res["diff"]["after"]
    assert before["disabled_cpus_per_state"] == {"POLL": "", "C1": "", "C1E": "", "C3": "", "C6": ""}
    assert after["disabled_cpus_per_state"] == {"POLL": "", "C1": "", "C1E": "", "C3": "0-47", "C6": "0-47"}
    res = qos(module_runner, root, diff=True, max_latency_us=20, cpus="0-3", resume_latency_us=15)
    assert res["diff"]["after"]["disabled_cpus_per_state"]["C6"] == "0-3"
    assert res["diff"]["after"]["pm_qos_resume_latency_us"] == {"0": 15, "1": 15, "2": 15, "3": 15}


def test_thesis_measurements_through_ansible(tmp_path):
    """The thesis's measured maxima vs the driver's declared values, decided side by side (one
    playbook for every run)."""
    thesis = thesis_measurements()
    calls, cases = [], []
    for dataset in ("ivbep1", "hswep0", "bdwep0"):
        measured = {state: m for state, (_d, m) in thesis[dataset].items()}
        for budget in (10, 20, 50, 100):
            root = materialize(dataset, tmp_path / ("%s-%d" % (dataset, budget)))
            cases.append((dataset, budget, measured, root))
            calls += [{"module": "cpuidle_qos", "args": {"sysfs_root": str(root), "max_latency_us": budget},
                       "check": True},
                      {"module": "cpuidle_qos", "args": {"sysfs_root": str(root), "max_latency_us": budget,
                                                         "measured_latency_us": measured}}]
    # The headline: at 20 us Ivy Bridge's C1E (declared 10, measured 21.8) is kept by the
    # driver's numbers and disabled by the measurement.
    headline = materialize("ivbep1", tmp_path / "headline")
    ivb = {state: m for state, (_d, m) in thesis["ivbep1"].items()}
    calls.append({"module": "cpuidle_qos", "args": {"sysfs_root": str(headline), "max_latency_us": 20,
                                                    "measured_latency_us": ivb}})
    results = run_batch(calls, tmp_path / "batch")
    for i, (dataset, budget, measured, root) in enumerate(cases):
        declared, res = results[2 * i:2 * i + 2]
        assert not res.failed, res.get("msg")
        assert disabled_on_disk(root, dataset) == expected_disabled(dataset, budget, measured=measured)
        by_meas = {s["name"]: s for s in res["states"]}
        by_decl = {s["name"]: s for s in declared["states"]}
        for state, m in measured.items():
            assert by_meas[state]["allowed"] == (m <= budget)
            assert by_meas[state]["measured_us"] == pytest.approx(m)
            assert by_decl[state]["allowed"] == (by_decl[state]["declared_us"] <= budget)
    c1e = next(s for s in results[-1]["states"] if s["name"] == "C1E")
    assert c1e["declared_us"] == 10 and not c1e["allowed"] and "measured 21.765 us > budget 20 us" == c1e["reason"]


def test_offline_cpu_without_cpuidle_is_skipped(tmp_path, module_runner):
    root = materialize("skld0", tmp_path / "root")
    cpu = root / "sys/devices/system/cpu"
    (cpu / "online").chmod(0o644)
    (cpu / "online").write_text("0-2,4-15\n")
    shutil.rmtree(cpu / "cpu3/cpuidle")  # the captured kernel removes it for an offline CPU
    (cpu / "cpu5/online").write_text("0\n")  # offline, but its cpuidle directory is still there
    (cpu / "online").write_text("0-2,4,6-15\n")
    res = qos(module_runner, root, max_latency_us=20)
    assert not res.failed, res.get("msg")
    assert res["skipped_cpus"] == "3" and res["cpus"] == "0-2,4-15"
    assert any("offline CPU(s) 3" in w for w in res.get("warnings", []))
    states = raw_states("skld0")
    want = {(c, i) for c, i in expected_disabled("skld0", 20) if c != 3}
    got = set()
    for c in states:
        for i in states[c]:
            f = cpu / ("cpu%d/cpuidle/state%d/disable" % (c, i))
            if f.exists() and f.read_text().strip() == "1":
                got.add((c, i))
    assert got == want


def test_machine_without_cpuidle_driver(tmp_path, module_runner):
    root = materialize("bdwup0", tmp_path / "root")
    cpu = root / "sys/devices/system/cpu"
    (cpu / "cpuidle/current_driver").write_text("none\n")
    for d in cpu.glob("cpu[0-9]*/cpuidle"):
        shutil.rmtree(d)
    res = qos(module_runner, root, max_latency_us=20)
    assert not res.failed and not res.changed and res["driver"] is None and res["states"] == []
    assert any("no cpuidle states" in w for w in res["warnings"])
    res = qos(module_runner, root, max_latency_us=20, disable=["C6"])
    assert res.failed and "no cpuidle states (driver: none)" in res["msg"]


def _unchanged_after_failure(module_runner, tmp_path, args, match, prepare=None, dataset="ivbep1"):
    root = materialize(dataset, tmp_path / "root")
    if prepare:
        prepare(root)
    before = snapshot_tree(root)
    res = qos(module_runner, root, **args)
    assert res.failed, res
    assert match in res["msg"], res["msg"]
    assert snapshot_tree(root) == before
    return res


def test_negative_budget(tmp_path, module_runner):
    _unchanged_after_failure(module_runner, tmp_path, {"max_latency_us": -5}, "max_latency_us must be >= 0")


def test_unknown_state_lists_known_names(tmp_path, module_runner):
    res = _unchanged_after_failure(module_runner, tmp_path, {"max_latency_us": 20, "disable": ["C7"]},
                                   "unknown state(s) C7")
    assert "POLL, C1, C1E, C3, C6" in res["msg"]


def test_non_numeric_latency(tmp_path, module_runner):
    _unchanged_after_failure(module_runner, tmp_path, {"max_latency_us": 20, "measured_latency_us": {"C1": "fast"}},
                             "must be a number of microseconds")
    _unchanged_after_failure(module_runner, tmp_path / "b", {"max_latency_us": "twenty"}, "max_latency_us")


def test_absent_cpus(tmp_path, module_runner):
    _unchanged_after_failure(module_runner, tmp_path, {"max_latency_us": 20, "cpus": "40-63"},
                             "CPU(s) 48-63 do not exist on this host (present: 0-47)")


def test_read_only_sysfs(tmp_path, module_runner):
    def ro(root):
        (root / "sys/devices/system/cpu/cpu17/cpuidle/state3/disable").chmod(0o444)
    res = _unchanged_after_failure(module_runner, tmp_path, {"max_latency_us": 20}, "read-only", prepare=ro)
    assert "cpu17/cpuidle/state3/disable" in res["msg"] and "nothing was changed" in res["msg"]


def test_missing_sysfs(tmp_path, module_runner):
    (tmp_path / "empty").mkdir()
    res = qos(module_runner, tmp_path / "empty", max_latency_us=20)
    assert res.failed and "does not exist" in res["msg"] and str(tmp_path / "empty") in res["msg"]


def test_failed_write_rolls_back(tmp_path, module_runner):
    """An attribute that refuses the value half-way through (append-only: writable by its mode, but
    an open for writing without O_APPEND gets EPERM, as a kernel attribute may answer EINVAL):
    the earlier writes and the originals record are undone. (A link to a real kernel attribute
    out of the tree is refused before any write now: see the hostile tables.)"""
    root = materialize("ivbep1", tmp_path / "root")
    hostile.chattr(root / "sys/devices/system/cpu/cpu30/cpuidle/state4/disable", "+a")
    try:
        before = snapshot_tree(root)
        res = qos(module_runner, root, max_latency_us=20)
        assert res.failed and "cpu30/cpuidle/state4/disable" in res["msg"], res.get("msg")
        assert "change(s) were undone, the host is as it was" in res["msg"], res["msg"]
        assert snapshot_tree(root) == before
        assert not (root / "var/lib/fleetnap/cpuidle_qos.orig.json").exists()
    finally:
        hostile.cleanup()


def test_metrics_that_cannot_be_written_after_the_limits_roll_them_back(tmp_path, module_runner):
    """metrics_dir passes the up-front check (a missing directory is created) but cannot be made
    under /proc: the failure comes after 96 sysfs writes, which are undone, and the message says so."""
    root = materialize("ivbep1", tmp_path / "root")
    before = snapshot_tree(root)
    res = qos(module_runner, root, max_latency_us=20, metrics_dir="/proc/fleetnap-no-such-dir")
    assert res.failed and "writing the metrics failed" in res["msg"] and "/proc/fleetnap-no-such-dir" in res["msg"], \
        res.get("msg")
    assert "this call's 97 change(s) were undone, the host is as it was" in res["msg"], res["msg"]
    assert "Traceback" not in str(res)
    after = snapshot_tree(root)
    assert after == before
    assert not (root / "var/lib/fleetnap/cpuidle_qos.orig.json").exists()


def test_warns_about_other_managers(tmp_path, module_runner):
    root = materialize("ivbep1", tmp_path / "root")
    (root / "proc/cmdline").write_text("ro quiet intel_idle.max_cstate=1 idle=poll\n")
    (root / "etc/tuned").mkdir(parents=True)
    (root / "etc/tuned/active_profile").write_text("latency-performance\n")
    (root / "run/tuned").mkdir(parents=True)
    (root / "run/tuned/tuned.pid").write_text("1234\n")
    (root / "proc/1234").mkdir(parents=True)
    (root / "proc/1234/stat").write_text("1234 (tuned) S 1 1234 1234 0 -1 4194560 5000 0 0 0\n")
    res = qos(module_runner, root, max_latency_us=20)
    text = " ".join(res["warnings"])
    assert "intel_idle.max_cstate=1" in text and "idle=poll" in text and "tuned is running" in text


@pytest.mark.parametrize("process,unit,warned", [
    (None, False, False),                                              # stale pid file, no process
    ("1234 (tuned) Z 1 1234 1234 0 -1 4194560 0 0 0 0\n", False, False),  # a zombie tuned
    ("1234 (sshd) S 1 1234 1234 0 -1 4194560 0 0 0 0\n", False, False),   # the pid reused
    ("1234 (tuned) S 1 1234 1234 0 -1 4194560 0 0 0 0\n", False, True),   # tuned itself
    (None, True, True),                                                # systemd: tuned.service active
])
def test_tuned_is_detected_by_a_live_process_or_an_active_unit(tmp_path, module_runner, process, unit, warned):
    root = materialize("ivbep1", tmp_path / "root")
    (root / "etc/tuned").mkdir(parents=True)
    (root / "etc/tuned/active_profile").write_text("latency-performance\n")
    (root / "run/tuned").mkdir(parents=True)
    (root / "run/tuned/tuned.pid").write_text("1234\n")
    if process:
        (root / "proc/1234").mkdir(parents=True)
        (root / "proc/1234/stat").write_text(process)
    if unit:
        (root / "run/systemd/units").mkdir(parents=True)
        (root / "run/systemd/units/invocation:tuned.service").symlink_to("0123456789abcdef")
    res = qos(module_runner, root, max_latency_us=20, check=True)
    assert not res.failed, res.get("msg")
    assert ("tuned is running" in " ".join(res.get("warnings", []))) is warned, res.get("warnings")


def test_persist_and_global_latency_files(tmp_path, module_runner):
    root = materialize("hswep0", tmp_path / "root")
    res = qos(module_runner, root, max_latency_us=20, persist=True, global_latency_us=20, resume_latency_us=20)
    assert res.changed and not res.failed, res.get("msg")
    unit = root / "etc/systemd/system/fleetnap-cpu-dma-latency.service"
    assert "hold-cpu-dma-latency 20" in unit.read_text()
    assert (root / "etc/systemd/system/multi-user.target.wants/fleetnap-cpuidle.service").is_symlink()
    config = (root / "etc/fleetnap/cpuidle.json").read_text()
    assert '"C3"' in config and '"resume_latency_us": 20' in config
    again = qos(module_runner, root, max_latency_us=20, persist=True, global_latency_us=20, resume_latency_us=20)
    assert not again.changed
    # The boot-time script really applies the config (run it against the tree's sysfs).
    res = qos(module_runner, root, state="absent")
    assert res.changed and not unit.exists() and not (root / "etc/fleetnap/cpuidle.json").exists()


def _twin_states(root):
    """Every CPU of the copy gets two idle states named C2_ACPI (ACPI tables do this on some
    boards): state3 is renamed, and the kernel's default leaves it disabled."""
    for cpu in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*")):
        state3 = cpu / "cpuidle/state3"
        if state3.is_dir():
            for name, value in (("name", "C2_ACPI"), ("disable", "1")):
                (state3 / name).chmod(0o644)
                (state3 / name).write_text(value + "\n")


def test_absent_restores_two_states_of_one_name_byte_for_byte(tmp_path, module_runner):
    """Issue 33: with two same-named states, the second disabled by default, a budget that allows
    everything and then state=absent puts every disable file back as it was (the record keys a
    state by its index and checks its name and latency when it is read back)."""
    root = materialize("lnl0", tmp_path / "root")
    _twin_states(root)
    def disables():
        return {str(p.relative_to(root)): p.read_bytes()
                for p in root.glob("sys/devices/system/cpu/cpu*/cpuidle/state*/disable")}
    before = disables()
    res = qos(module_runner, root, max_latency_us=1000000)
    assert not res.failed and res.changed, res.get("msg")
    assert {v.strip() for v in disables().values()} == {b"0"}
    record = json.loads((root / "var/lib/fleetnap/cpuidle_qos.orig.json").read_text())
    assert record["version"] == 2
    assert record["cpus"]["0"]["states"]["3"] == {"name": "C2_ACPI", "latency_us": 1048, "disable": 1}
    res = qos(module_runner, root, state="absent")
    assert not res.failed and res.changed, res.get("msg")
    after = disables()
    assert {k: v.rstrip(b"\n") for k, v in after.items()} == {k: v.rstrip(b"\n") for k, v in before.items()}
    assert after["sys/devices/system/cpu/cpu0/cpuidle/state2/disable"].strip() == b"0"
    assert after["sys/devices/system/cpu/cpu0/cpuidle/state3/disable"].strip() == b"1"


def test_absent_refuses_a_version_1_record_that_cannot_tell_twins_apart(tmp_path, module_runner):
    """A record written before states were keyed by index names them: with two states of one name
    it cannot say which value is whose, so state=absent refuses and changes nothing."""
    root = materialize("lnl0", tmp_path / "root")
    _twin_states(root)
    record = root / "var/lib/fleetnap/cpuidle_qos.orig.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"version": 1, "cpus": {"0": {"states": {"C2_ACPI": 1}}}}))
    before = snapshot_tree(root)
    res = qos(module_runner, root, state="absent")
    assert res.failed and "cpu0 has 2 states named C2_ACPI (state2, state3): it cannot say which" in res["msg"], \
        res.get("msg")
    assert "nothing was changed" in res["msg"]
    assert snapshot_tree(root) == before
