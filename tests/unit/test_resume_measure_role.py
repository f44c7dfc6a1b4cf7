"""The resume_measure role (roles/resume_measure) without a lab: its contract and its controller side.

- Its argument spec refuses a wrong type or choice before any task runs, naming the variable; its
  input check refuses values the spec cannot express (cycles 0, no Wake-on-LAN MAC) before anything
  is written; without resume_measure_suspend_ok it publishes resume_measure_suspend_required and
  changes nothing. Nothing is suspended in any of these: each would fail long before, since this
  machine's kernel has no suspend.
- What the role does after the cycles (tasks record.yml and fleet.yml), on the cycles the lab
  really produced (tests/golden/lab6-measure-resume-3cycles.json, with a QEMU guest's S3 log from
  tests/data/dmesg): every controller artifact, the host's fact file and metrics. The fact file is
  written by the real fleetnap_fact with only its default path moved under tmp_path (a copy of the
  module in a library directory searched first), so this machine's /etc is not touched.

The cycles themselves (pm_cycle, Wake-on-LAN, the timing) run on the lab:
tests/lab/test_measure_resume.py and molecule/resume_measure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser

import pytest
import yaml

from conftest import REPO, TARGET_PYTHON, VENV_BIN

GOLDEN = REPO / "tests" / "golden" / "lab6-measure-resume-3cycles.json"
LOG = REPO / "tests" / "data" / "dmesg" / "qemu-debian-6.1-s3-initramfs.txt"
FACT_DEFAULT = "/etc/ansible/facts.d/fleetnap.fact"
MAC = "52:54:00:fa:01:09"


def run_play(tmp_path, tasks, extra=None, library=None):
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"name": "resume_measure", "hosts": "localhost", "connection": "local",
                                     "gather_facts": False, "tasks": tasks}], sort_keys=False))
    variables = {"ansible_python_interpreter": TARGET_PYTHON, "fleetnap_wol_macs": [MAC],
                 "resume_measure_results_dir": str(tmp_path / "results"),
                 "resume_measure_metrics_dir": str(tmp_path / "prom")}
    variables.update(extra or {})
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    if library:
        env["ANSIBLE_LIBRARY"] = "%s:%s" % (library, REPO / "library")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", str(play),
                           "-e", json.dumps(variables)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    return proc


ROLE = [{"name": "The role", "ansible.builtin.include_role": {"name": "resume_measure"}}]


@pytest.mark.parametrize("variable,value,message", [
    ("resume_measure_cycles", "abc", "argument 'resume_measure_cycles' is of type str and we were unable to "
                                     "convert to int"),
    ("resume_measure_mode", "disk", "value of resume_measure_mode must be one of: mem, freeze, got: disk"),
    ("resume_measure_suspend_ok", "maybe", "argument 'resume_measure_suspend_ok' is of type str and we were "
                                           "unable to convert to bool"),
    ("resume_measure_timeout_s", "soon", "argument 'resume_measure_timeout_s' is of type str and we were "
                                         "unable to convert to float"),
])
def test_a_wrong_type_or_choice_fails_at_the_argument_spec(tmp_path, variable, value, message):
    proc = run_play(tmp_path, ROLE, {variable: value, "resume_measure_suspend_ok": True} if variable !=
                    "resume_measure_suspend_ok" else {variable: value})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Validating arguments against arg spec 'main'" in out and message in out, out[-3000:]
    # Refused before the role's first task: nothing written on the controller.
    assert "Check the inputs before changing anything" not in out
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("extra,message", [
    ({"resume_measure_cycles": 0}, "resume_measure_cycles must be 1..1000 (got 0)"),
    ({"resume_measure_utilization": 1.5}, "resume_measure_utilization in [0, 1) (got 1.5)"),
    ({"fleetnap_wol_macs": []}, "the host needs fleetnap_wol_macs in the inventory to be woken"),
])
def test_inputs_are_checked_before_anything_is_written(tmp_path, extra, message):
    proc = run_play(tmp_path, ROLE, dict(extra, resume_measure_suspend_ok=True))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0 and message in out, out[-3000:]
    assert not (tmp_path / "results").exists()


def test_without_suspend_ok_it_publishes_that_a_suspend_is_required_and_changes_nothing(tmp_path):
    tasks = ROLE + [{"name": "Show the fact", "ansible.builtin.debug": {
        "msg": "required={{ resume_measure_suspend_required }} summary={{ resume_measure_summary is defined }}"}}]
    proc = run_play(tmp_path, tasks, {"resume_measure_suspend_ok": "false"})   # as -e gives it: a string
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "required=True summary=False" in proc.stdout
    assert "set resume_measure_suspend_ok: true to allow it. Nothing was changed." in " ".join(proc.stdout.split())
    assert "changed=0" in proc.stdout
    assert not (tmp_path / "results").exists() and not (tmp_path / "prom").exists()


def golden_cycles():
    """The lab6 cycles as pm_cycle collect returned them and cycle.yml kept them (with their log)."""
    log = LOG.read_text()
    return [dict({k: v for k, v in c.items() if k not in ("host", "recommendations")}, log=log)
            for c in json.loads(GOLDEN.read_text())["cycles"]]


def test_the_controller_side_on_the_cycles_the_lab_produced(tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    fact = tmp_path / "facts.d" / "fleetnap.fact"
    real = (REPO / "library" / "fleetnap_fact.py").read_text()
    assert real.count(FACT_DEFAULT) >= 1
    (library / "fleetnap_fact.py").write_text(real.replace(FACT_DEFAULT, str(fact)))
    fact.parent.mkdir()
    fact.write_text(json.dumps({"wake_latency_us": {"C1": 2.0}, "resume": {"kernel_ms": 1.0, "stale": True}}))
    cycles = golden_cycles()
    results = tmp_path / "results"
    (results / "localhost").mkdir(parents=True)
    tasks = [
        {"name": "The cycles the lab measured", "ansible.builtin.set_fact": {
            "__resume_measure_cycles": "{{ lookup('ansible.builtin.file', '%s') | from_json }}" % (tmp_path / "c.json"),
            "__resume_measure_measuring": "localhost"}},
        {"name": "Record", "ansible.builtin.include_role": {"name": "resume_measure", "tasks_from": "record.yml"}},
        {"name": "Fleet", "ansible.builtin.include_role": {"name": "resume_measure", "tasks_from": "fleet.yml"}},
    ]
    (tmp_path / "c.json").write_text(json.dumps(cycles))
    proc = run_play(tmp_path, tasks, library=library)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    host = results / "localhost"
    summary = json.loads((results / "summary.json").read_text())
    assert summary["failed"] == [] and [h["host"] for h in summary["hosts"]] == ["localhost"]
    s = summary["hosts"][0]
    assert s["cycles"] == 3 and s["mem_sleep"] == "deep" and s["worst_cycle"] == 3
    assert s["resume_kernel_worst_ms"] == 326.676 and s["resume_kernel_median_ms"] == 285.338
    assert s["resume_end_to_end_worst_ms"] == max(c["end_to_end_ms"] for c in cycles)
    assert set(s["powernap"]) == {"advice", "reason", "crossover_utilization"}
    assert s["powernap"]["advice"] in ("sleep", "stay-awake")
    for c in cycles:
        n = c["cycle"]
        assert (host / ("cycle-%d.log" % n)).read_text() == c["log"]
        saved = json.loads((host / ("cycle-%d.json" % n)).read_text())
        assert "log" not in saved and saved["host"] == "localhost" and isinstance(saved["recommendations"], list)
        assert {k: v for k, v in saved.items() if k not in ("host", "recommendations")} == \
            {k: v for k, v in c.items() if k != "log"}
        page = (host / ("cycle-%d.html" % n)).read_text()
        HTMLParser().feed(page)
        assert "localhost cycle %d" % n in page
    assert (host / "powernap.svg").read_text().lstrip().startswith(("<svg", "<?xml"))
    s3 = json.loads((host / "s3.json").read_text())
    assert s3["ok"] is True and s3["cycles"] == 3 and s3["worst_ms"] == s["resume_end_to_end_worst_ms"]

    stored = json.loads(fact.read_text())
    assert stored["wake_latency_us"] == {"C1": 2.0}                 # other keys kept
    resume = stored["resume"]                                        # the old resume replaced whole
    assert set(resume) == {"kernel_ms", "end_to_end_ms", "kernel_median_ms", "end_to_end_median_ms", "cycles",
                           "mem_sleep", "measured_at"}
    assert (resume["kernel_ms"], resume["end_to_end_ms"], resume["cycles"], resume["mem_sleep"]) == (
        326.676, s["resume_end_to_end_worst_ms"], 3, "deep")

    prom = (tmp_path / "prom" / "fleetnap_resume.prom").read_text().splitlines()
    assert 'fleetnap_resume_kernel_seconds{stat="max"} 0.326676' in prom
    assert "fleetnap_resume_cycles_measured 3" in prom

    index = (results / "index.html").read_text()
    HTMLParser().feed(index)
    assert "1 host(s) measured." in index and 'href="localhost/cycle-3.html">cycle 3</a> (worst)' in index
    table = proc.stdout[proc.stdout.index("resume_ms_med"):]
    assert re.search(r'"localhost +3 +285\.3 +326\.7 +\d+ +0\.0 +16\.6 +307\.5  0000:00:04\.0 resume, ', table), table
