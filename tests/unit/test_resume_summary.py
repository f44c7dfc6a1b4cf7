"""playbooks/tasks/resume_summary.yml through ansible-playbook, on cycles the lab really produced.

The input is what measure_resume.yml saved for lab6 in a CI run (tests/golden/
lab6-measure-resume-3cycles.json): in each cycle's five slowest callbacks there are only two
devices, each in several phases. The summary used to keep one entry per device name and listed
two "slowest devices" instead of three; it now keeps each (device, phase) once, at its worst.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess

from conftest import REPO, TARGET_PYTHON, VENV_BIN

GOLDEN = REPO / "tests" / "golden" / "lab6-measure-resume-3cycles.json"


def summarise(tmp_path, cycles):
    timelines = {"results": [{"item": {"cycle": c["cycle"]}, "recommendations": c["recommendations"]}
                             for c in cycles]}
    out = tmp_path / "summary.json"
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{
        "name": "Summarise", "hosts": "all", "gather_facts": False,
        "tasks": [{"name": "Summarise the host",
                   "ansible.builtin.include_tasks": str(REPO / "playbooks/tasks/resume_summary.yml")},
                  {"name": "Keep it", "ansible.builtin.copy": {
                      "dest": str(out), "mode": "0644", "content": "{{ measure_resume_summary | to_json }}"}}],
    }]))
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({"__measure_resume_cycles": cycles, "__measure_resume_timelines": timelines,
                                 "ansible_python_interpreter": TARGET_PYTHON}))
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "lab6,", "-c", "local", str(play), "-e", "@%s" % extra],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO),
                          env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_three_slowest_callbacks_when_two_devices_fill_every_cycle(tmp_path):
    cycles = json.loads(GOLDEN.read_text())["cycles"]
    assert all(len({d["name"] for d in c["slowest"]}) == 2 for c in cycles)   # the case that failed in CI
    s = summarise(tmp_path, cycles)
    assert [(d["name"], d["phase"], d["duration_ms"]) for d in s["slowest"]] == [
        ("0000:00:04.0", "resume", 92.717),     # e1000e, cycle 3
        ("0000:00:04.0", "suspend", 15.005),    # the same NIC's suspend, cycle 1 (its worst of three)
        ("0000:00:03.0", "suspend", 14.038),    # virtio-pci, cycle 3
    ]
    assert s["slowest"][0]["driver"] == "e1000e" and s["slowest"][2]["driver"] == "virtio-pci"


def test_medians_worst_and_the_slowest_cycle_split(tmp_path):
    cycles = json.loads(GOLDEN.read_text())["cycles"]
    s = summarise(tmp_path, cycles)
    kernel = [c["resume_ms"] for c in cycles]
    worst = max(cycles, key=lambda c: c["resume_ms"])
    assert s["host"] == "lab6" and s["cycles"] == 3 and s["mem_sleep"] == "deep"
    assert s["resume_kernel_median_ms"] == statistics.median(kernel) == 285.338
    assert s["resume_kernel_worst_ms"] == max(kernel) == 326.676
    assert s["resume_end_to_end_worst_ms"] == max(c["end_to_end_ms"] for c in cycles)
    assert s["suspend_kernel_worst_ms"] == max(c["suspend_ms"] for c in cycles)
    assert s["worst_cycle"] == worst["cycle"] == 3
    assert (s["cpus_ms"], s["noirq_ms"], s["devices_ms"]) == (worst["cpus_ms"], worst["noirq_ms"], worst["devices_ms"])
    assert s["recommendations"] == worst["recommendations"]


def test_a_single_cycle_with_fewer_than_three_callbacks(tmp_path):
    one = json.loads(GOLDEN.read_text())["cycles"][0]
    one = dict(one, slowest=one["slowest"][:2])
    s = summarise(tmp_path, [one])
    assert [(d["name"], d["phase"]) for d in s["slowest"]] == [("0000:00:04.0", "resume"), ("0000:00:04.0", "suspend")]
    assert s["resume_kernel_median_ms"] == s["resume_kernel_worst_ms"] == one["resume_ms"]


def test_cycles_without_device_callbacks_summarise_with_none(tmp_path):
    """A log without device lines (no pm_print_times on that kernel): the rest is still summarised."""
    cycles = [dict(c, slowest=[]) for c in json.loads(GOLDEN.read_text())["cycles"]]
    s = summarise(tmp_path, cycles)
    assert s["slowest"] == [] and s["resume_kernel_worst_ms"] == 326.676
