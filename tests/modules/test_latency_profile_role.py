"""The latency_profile role on captured machines, each given as a host of one play (one
ansible-playbook run per test): with latency_profile_sleep_policy: advise the PowerNap advice is
decided in the profile's one module call on the host, as the budget rule is, and the curves the
module returns are written on the controller; the role's table of bad inputs (the module checks
them all before it reads the host: the role runs no check of its own on every host)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO, TARGET_PYTHON, VENV_BIN, materialize, snapshot_tree

PLAY = """- hosts: all
  connection: local
  gather_facts: false
  roles:
    - role: latency_profile
  post_tasks:
    - name: Keep the decision
      ansible.builtin.copy:
        content: "{{ latency_profile_decision | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""


def machine(root, stored=None):
    root = materialize("ivbep1", root)
    power = root / "sys" / "power"
    power.mkdir(parents=True, exist_ok=True)
    (power / "state").write_text("freeze mem disk\n")
    (power / "mem_sleep").write_text("[s2idle] deep\n")
    if stored is not None:
        fact = root / "etc/ansible/facts.d/fleetnap.fact"
        fact.parent.mkdir(parents=True, exist_ok=True)
        fact.write_text(json.dumps(stored))
    return root


def run(inventory, play, extra, *args, **env):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"), **env)
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play), "-e", json.dumps(extra),
                           *args], capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)


def test_advise_is_one_module_call_and_writes_the_curves_on_the_controller(tmp_path):
    fast = machine(tmp_path / "fast", {"resume": {"end_to_end_ms": 10}})
    fresh = machine(tmp_path / "fresh", None)
    svg_dir, out_dir = tmp_path / "svg", tmp_path / "out"
    svg_dir.mkdir()
    out_dir.mkdir()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        "fast": {"latency_profile_sysfs_root": str(fast)},
        "fresh": {"latency_profile_sysfs_root": str(fresh)}}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "latency_profile_budget_us": 50,
             "latency_profile_sleep_policy": "advise", "latency_profile_utilization": [0.01, 0.02, 0.015],
             "latency_profile_powernap_svg_dir": str(svg_dir), "out_dir": str(out_dir)}
    proc = run(inventory, play, extra)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    decided = {h: json.loads((out_dir / ("%s.json" % h)).read_text()) for h in ("fast", "fresh")}
    assert decided["fast"]["sleep"] == "deep"
    assert decided["fast"]["sleep_reason"].startswith("powernap_advice: sleep, resume 10 ms at 2 % load (p95 of 3")
    assert decided["fast"]["powernap"]["advice"] == "sleep"
    assert (fast / "sys/power/mem_sleep").read_text().strip() == "deep"    # written (a captured tree, no kernel)
    assert (decided["fresh"]["sleep"], decided["fresh"]["powernap"]) == ("s2idle", {})
    assert decided["fresh"]["sleep_reason"] == "resume latency not measured yet (run measure_resume.yml)"
    assert "<svg xmlns" in (svg_dir / "fast-powernap.svg").read_text()
    assert not (svg_dir / "fresh-powernap.svg").exists()
    # The role's tasks: one module on the host; nothing else of the role runs a module there.
    tasks = [t for t in re.findall(r"^TASK \[latency_profile : ([^\]]+)\]", proc.stdout, re.M)
             if not t.startswith("Validating arguments against arg spec")]
    assert tasks == ["Apply the profile in one module call",
                     "Write the PowerNap curves on the controller (advise, latency_profile_powernap_svg_dir)",
                     "Show the decision (one table for the batch)"], tasks
    assert "powernap_advice: sleep" in proc.stdout      # the table says why
    # a row per C-state, from what the module returned ("-" where a latency is unknown)
    for s in decided["fast"]["states"]:
        cells = [s["name"]] + ["-" if s[k] is None else s[k] for k in ("declared_us", "measured_us", "effective_us")]
        row = "%-10s %11s %11s %12s  %-7s  " % tuple(cells + ["yes" if s["allowed"] else "NO"])
        assert '"' + row in proc.stdout, (row, proc.stdout[-3000:])


# Each host one bad input; every one refused with words naming it, nothing changed on its machine.
BAD = {
    "budget_negative": ({"latency_profile_budget_us": -1}, "max_latency_us must be >= 0"),
    "budget_a_word": ({"latency_profile_budget_us": "fast"}, "latency_profile_budget_us"),
    "resume_budget_negative": ({"latency_profile_resume_budget_ms": -5}, "sleep.resume_budget_ms must be >= 0"),
    "margin_below_1": ({"latency_profile_declared_margin": 0.5}, "declared_latency_margin must be >= 1"),
    "pm_qos_budget_below_1": ({"latency_profile_pm_qos": True, "latency_profile_budget_us": 0.5},
                              "cstates.pm_qos needs cstates.max_latency_us of at least 1 microsecond"),
    "advise_without_utilization": ({"latency_profile_sleep_policy": "advise"},
                                   "sleep.advice.utilization is missing"),
    "advise_utilization_percent": ({"latency_profile_sleep_policy": "advise", "latency_profile_utilization": 45},
                                   "(a percentage? give the busy fraction"),
    "sleep_policy_unknown": ({"latency_profile_sleep_policy": "sometimes"}, "latency_profile_sleep_policy"),
    "unknown_state": ({"latency_profile_disable": ["C9"]}, "unknown state(s) C9"),
}


def test_bad_inputs_are_refused_per_host_and_change_nothing(tmp_path):
    hosts, before = {}, {}
    for name, (bad, _words) in BAD.items():
        root = machine(tmp_path / name)
        before[name] = snapshot_tree(root)
        hosts[name] = dict({"latency_profile_sysfs_root": str(root), "latency_profile_budget_us": 50}, **bad)
    hosts["good"] = {"latency_profile_sysfs_root": str(machine(tmp_path / "good")), "latency_profile_budget_us": 50}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = run(inventory, play, {"ansible_python_interpreter": TARGET_PYTHON, "out_dir": str(out_dir)},
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    report, _end = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.find("{"):])
    failed = {}
    for play_ in report["plays"]:
        for task in play_["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    failed.setdefault(host, str(res.get("msg", "")))
    assert set(failed) == set(BAD), (sorted(failed), proc.stderr[-2000:])
    for name, (_bad, words) in BAD.items():
        assert words in failed[name], (name, failed[name])
        assert "Traceback" not in failed[name]
        assert snapshot_tree(tmp_path / name) == before[name], name
    assert json.loads((out_dir / "good.json").read_text())["disabled_states"]     # the good host went on


def test_apply_profile_with_an_unknown_profile_changes_no_host(tmp_path):
    """apply_profile.yml checks every host's profile name once, before any host is changed: a typo in
    one host's profile stops the run, naming that host, and no machine is changed."""
    roots = {name: machine(tmp_path / name) for name in ("web1", "typo1", "default1")}
    before = {name: snapshot_tree(root) for name, root in roots.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        "web1": {"fleetnap_profile": "web", "latency_profile_sysfs_root": str(roots["web1"])},
        "typo1": {"fleetnap_profile": "wbe", "latency_profile_sysfs_root": str(roots["typo1"])},
        "default1": {"latency_profile_sysfs_root": str(roots["default1"])}}}}))
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "ansible_connection": "local", "ansible_become": False,
             "fleetnap_profiles": {"web": {"budget_us": 50}}, "fleetnap_artifacts_dir": str(tmp_path / "art")}
    proc = run(inventory, REPO / "playbooks" / "apply_profile.yml", extra)
    assert proc.returncode != 0
    assert "unknown profile for typo1, default1; known profiles: web; nothing was changed" in proc.stdout, \
        proc.stdout[-3000:]
    assert {name: snapshot_tree(root) for name, root in roots.items()} == before
    assert "TASK [latency_profile" not in proc.stdout      # the role never started


BAD_PROFILES = [
    # (the profile, words of the refusal)
    ({"budget_us": "fast"}, "latency_profile_budget_us"),
    ({"budget": 50}, "latency_profile_budget"),                  # a key that is no argument: refused, not ignored
    ({"budget_us": 50, "sleep_fallback": "deep"}, "latency_profile_sleep_fallback"),
    ({"budget_us": 50, "pm_qos": "maybe"}, "latency_profile_pm_qos"),
    ({"budget_us": 50, "cpufreq": {"governor": "performance", "turbo_boost": True}}, "turbo_boost"),
    ({"budget_us": 50, "sleep_policy": "advise"}, "latency_profile_sleep_policy"),   # not a profile's key here
]


@pytest.mark.parametrize("profile,words", BAD_PROFILES, ids=[json.dumps(p, sort_keys=True) for p, _w in BAD_PROFILES])
def test_apply_profile_refuses_a_bad_profile_once_before_any_host_changes(tmp_path, profile, words):
    """A profile is checked once, on the controller, against the role's argument spec: a wrong
    value or a key that is no argument stops the run naming it, and no machine is changed."""
    roots = {name: machine(tmp_path / name) for name in ("web1", "web2")}
    before = {name: snapshot_tree(root) for name, root in roots.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        name: {"fleetnap_profile": "web", "latency_profile_sysfs_root": str(root)} for name, root in roots.items()}}}))
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "ansible_connection": "local", "ansible_become": False,
             "fleetnap_profiles": {"web": profile, "unused": {"budget_us": "not checked: no host uses it"}},
             "fleetnap_artifacts_dir": str(tmp_path / "art")}
    proc = run(inventory, REPO / "playbooks" / "apply_profile.yml", extra)
    assert proc.returncode != 0
    refusal = re.search(r"^failed: \[\w+\] \(item=web\) => .*$", proc.stdout, re.M)
    assert refusal and words in refusal.group(0), proc.stdout[-3000:]
    assert "item=unused" not in proc.stdout
    assert "TASK [latency_profile" not in proc.stdout      # the role never started
    assert {name: snapshot_tree(root) for name, root in roots.items()} == before


def test_apply_profile_refuses_a_hosts_own_bad_sleep_policy_once_before_any_host_changes(tmp_path):
    """latency_profile_sleep_policy is the role argument a host gives itself that the module never sees:
    apply_profile.yml checks each value the hosts give once against the role's argument spec (the role's
    own per-host check is off there), so a typo stops the run before any machine is changed."""
    roots = {name: machine(tmp_path / name) for name in ("web1", "web2", "web3")}
    before = {name: snapshot_tree(root) for name, root in roots.items()}
    policies = {"web1": "advice", "web2": "advise", "web3": None}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        name: dict({"fleetnap_profile": "web", "latency_profile_sysfs_root": str(root)},
                   **({"latency_profile_sleep_policy": policies[name]} if policies[name] else {}))
        for name, root in roots.items()}}}))
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "ansible_connection": "local", "ansible_become": False,
             "fleetnap_profiles": {"web": {"budget_us": 50}}, "fleetnap_artifacts_dir": str(tmp_path / "art")}
    proc = run(inventory, REPO / "playbooks" / "apply_profile.yml", extra)
    assert proc.returncode != 0
    refusal = re.search(r"^failed: \[\w+\] \(item=advice\) => .*$", proc.stdout, re.M)
    assert refusal and "latency_profile_sleep_policy" in refusal.group(0) and "advise" in refusal.group(0), \
        proc.stdout[-3000:]
    task = proc.stdout[proc.stdout.index("TASK [Check the hosts' own latency_profile_sleep_policy"):]
    checked = re.findall(r"^(?:ok: \[\w+\] => |failed: \[\w+\] )\(item=(\w+)\)", task, re.M)
    assert sorted(checked) == ["advice", "advise", "budget"], checked      # once per value, not per host
    assert "TASK [latency_profile" not in proc.stdout      # the role never started
    assert {name: snapshot_tree(root) for name, root in roots.items()} == before


def test_apply_profile_checks_exactly_the_arguments_a_profile_sets():
    """The profile check's list of role arguments (__apply_profile_args) is the role's vars that read the
    profile, so no profile key is passed unchecked and none checked is ignored."""
    play = yaml.safe_load((REPO / "playbooks" / "apply_profile.yml").read_text())[0]
    check = next(t for t in play["pre_tasks"] if t["name"].startswith("Check each profile the play uses"))
    role = next(t for t in play["tasks"] if "ansible.builtin.import_role" in t)
    from_profile = sorted(k for k, v in role["vars"].items() if "__apply_profile[" in str(v))
    assert sorted(check["vars"]["__apply_profile_args"]) == from_profile and len(from_profile) == 8


def profile_fleet(tmp_path, names, profiles):
    """Captured machines named ``names`` (a name starting with "batch" has the batch profile, the others
    web), their inventory and apply_profile.yml's extra vars: (roots, inventory, extra, artifacts dir)."""
    roots = {name: machine(tmp_path / name) for name in names}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        name: {"fleetnap_profile": "batch" if name.startswith("batch") else "web", "latency_profile_sysfs_root": str(root)}
        for name, root in roots.items()}}}))
    art = tmp_path / "art"
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "ansible_connection": "local", "ansible_become": False,
             "fleetnap_profiles": profiles, "fleetnap_artifacts_dir": str(art)}
    return roots, inventory, extra, art


def test_apply_profile_check_diff_plans_every_host_and_changes_nothing(tmp_path):
    """The README's plan: `apply_profile.yml --check --diff` runs the same checks and the module in
    check mode, prints each host's decision and diff, and changes no machine and writes no decisions.json."""
    roots, inventory, extra, art = profile_fleet(tmp_path, ("web1", "batch1"),
                                                 {"web": {"budget_us": 50}, "batch": {"budget_us": None}})
    before = {name: snapshot_tree(root) for name, root in roots.items()}
    proc = run(inventory, REPO / "playbooks" / "apply_profile.yml", extra, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"^changed: \[web1\]", proc.stdout, re.M), proc.stdout[-3000:]    # the plan disables states
    assert "disabled_cpus_per_state" in proc.stdout                                     # and shows them (diff)
    assert re.search(r'"web1 +web +50 ', proc.stdout) and re.search(r'"batch1 +batch +none ', proc.stdout)
    assert {name: snapshot_tree(root) for name, root in roots.items()} == before
    assert not (art / "profile" / "decisions.json").exists()


def test_apply_profile_writes_each_hosts_decision_once(tmp_path):
    """One task per host (fleetnap_profile; each profile checked once against the role's argument spec
    before it); decisions.json holds each host's decision with the keys the fleet report reads, the
    summary a line per host."""
    roots, inventory, extra, art = profile_fleet(tmp_path, ("web1", "web2", "batch1"), {
        "web": {"budget_us": 50, "pm_qos": True}, "batch": {"budget_us": None}})
    proc = run(inventory, REPO / "playbooks" / "apply_profile.yml", extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    decisions = json.loads((art / "profile" / "decisions.json").read_text())
    assert sorted(decisions) == ["batch1", "web1", "web2"]
    assert {frozenset(d) for d in decisions.values()} == {frozenset(
        ["budget_us", "driver", "states", "allowed_states", "disabled_states", "sleep", "sleep_reason",
         "resume_budget_ms", "resume_measured_ms", "changed", "powernap", "cpufreq", "profile_drift"])}
    assert decisions["web1"]["budget_us"] == 50 and decisions["web1"]["disabled_states"]
    assert decisions["batch1"]["budget_us"] is None and decisions["batch1"]["disabled_states"] == []
    qos = roots["web2"].glob("sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us")
    assert {p.read_text().strip() for p in qos} == {"50"}
    # The one task that runs on every host: the module. The profiles were checked against the role's
    # argument spec once (a task on the controller), not by a task per host.
    sections = re.split(r"^TASK \[", proc.stdout, flags=re.M)[1:]
    per_host = sorted(sec.split("]", 1)[0] for sec in sections
                      if len(set(re.findall(r"^(?:ok|changed|skipping|fatal): \[(\w+)", sec, re.M))) == len(roots))
    assert per_host == ["latency_profile : Apply the profile in one module call"], per_host
    assert "Validating arguments against arg spec" not in proc.stdout
    checked = re.search(r"^TASK \[Check each profile the play uses against the role's argument spec.*?(?=^TASK )",
                        proc.stdout, re.M | re.S).group(0)
    assert sorted(re.findall(r"^ok: \[\w+\] => \(item=(\w+)\)", checked, re.M)) == ["batch", "web"], checked
    for name in roots:
        assert re.search(r'"%s +(web|batch) +(50|none) ' % name, proc.stdout), name


def test_an_empty_curves_directory_writes_nothing_and_absent_is_never_blocked(tmp_path):
    """latency_profile_powernap_svg_dir "" means no curves (as null does); state absent undoes a
    profile whose PM QoS or advice inputs would be refused when applying."""
    root = machine(tmp_path / "m", {"resume": {"end_to_end_ms": 10}})
    before = snapshot_tree(root)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"m": {"latency_profile_sysfs_root": str(root)}}}}))
    play = tmp_path / "play.yml"
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    play.write_text(PLAY)
    common = {"ansible_python_interpreter": TARGET_PYTHON, "out_dir": str(out_dir), "latency_profile_budget_us": 50,
              "latency_profile_sleep_policy": "advise", "latency_profile_utilization": 0.02}
    proc = run(inventory, play, dict(common, latency_profile_powernap_svg_dir=""))
    assert proc.returncode == 0, proc.stdout[-3000:]
    decision = json.loads((out_dir / "m.json").read_text())
    assert decision["sleep"] == "deep" and "powernap_svg" not in decision
    assert not list(tmp_path.rglob("*-powernap.svg")) and not (REPO / "m-powernap.svg").exists()
    proc = run(inventory, play, dict(common, latency_profile_state="absent", latency_profile_pm_qos=True,
                                     latency_profile_budget_us=0.5, latency_profile_utilization=7))
    assert proc.returncode == 0, proc.stdout[-3000:]
    cpu = {k: v for k, v in snapshot_tree(root).items() if k.startswith("sys/devices/system/cpu/")}
    assert cpu == {k: v for k, v in before.items() if k.startswith("sys/devices/system/cpu/")}
    # mem_sleep written back as the kernel takes it (a captured tree keeps the word written)
    assert (root / "sys/power/mem_sleep").read_text().strip() == "s2idle"


def test_the_cpufreq_part_is_in_the_same_call_and_in_the_table(tmp_path):
    """latency_profile_cpufreq goes into the profile's one module call; the table shows the driver
    and each knob before and after; a host whose driver refuses a value fails alone, unchanged."""
    from conftest import PSTATE_DATA
    roots = {}
    for name, dataset in (("hwp", "cfl-u"), ("passive", "bdwup0")):
        root = materialize(dataset, tmp_path / name)
        materialize(dataset, root, data=PSTATE_DATA)
        (root / "sys/power").mkdir(parents=True, exist_ok=True)
        (root / "sys/power/state").write_text("freeze mem\n")
        (root / "sys/power/mem_sleep").write_text("s2idle [deep]\n")
        roots[name] = root
    before = snapshot_tree(roots["passive"])
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {n: {"latency_profile_sysfs_root": str(r)}
                                                       for n, r in roots.items()}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "out_dir": str(out_dir), "latency_profile_budget_us": 50,
             "latency_profile_cpufreq": {"governor": "performance", "epp": "performance", "turbo": False}}
    proc = run(inventory, play, extra)
    assert proc.returncode != 0
    assert "epp: intel_cpufreq (passive) shows no energy_performance_preference" in proc.stdout, proc.stdout[-3000:]
    assert snapshot_tree(roots["passive"]) == before
    decided = json.loads((out_dir / "hwp.json").read_text())
    assert decided["cpufreq"]["writes"] == 8 + 8 + 1 and decided["disabled_states"]
    assert (roots["hwp"] / "sys/devices/system/cpu/intel_pstate/no_turbo").read_text().strip() == "1"
    for row in ("cpufreq: intel_pstate (active), HWP, 8 policies, 17 file(s) written",
                "%-10s %-30s %s" % ("governors", "['powersave']", "['performance']"),
                "%-10s %-30s %s" % ("turbo", "on", "off")):
        assert row in proc.stdout, (row, proc.stdout[-3000:])
