"""resume_measure, verified on lab3 itself (pytest-testinfra).

prepare.yml left lab3 with s2idle selected, pm_print_times off, no measured resume in its fact
file (a key of the scenario's own instead), no resume metrics, and recorded that state and the
cycle logs already there in /run/fleetnap-molecule/resume_measure.json; converge.yml measured one
S3 cycle. Every test starts from the one cycle log this run left (the `this_run` fixture), so
each fails when the role did not measure, and then checks one effect on the guest: the measured
resume in the fact file, the metrics, pm_print_times on during the cycle and back off, S3
measured and the host's s2idle choice back, no state of this run's cycle and no suspend shell left.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

testinfra_hosts = ["ansible://lab3"]

RECORD = "/run/fleetnap-molecule/resume_measure.json"
LOGS = "/var/lib/fleetnap/pm_cycles"
FACT = "/etc/ansible/facts.d/fleetnap.fact"
PROM = "/var/lib/prometheus/node-exporter/fleetnap_resume.prom"


@pytest.fixture
def prepared(host):
    return json.loads(host.file(RECORD).content_string)


@pytest.fixture
def this_run(host, prepared):
    """The name of the one cycle log this run left (pm_cycle keeps one per cycle, named
    <time>-<run_id>-<cycle>.log) and its run_id."""
    new = sorted(set(host.file(LOGS).listdir()) - set(prepared["logs"])) if host.file(LOGS).is_directory else []
    assert len(new) == 1, "expected the one cycle log of this run in %s, found %s" % (LOGS, new)
    match = re.fullmatch(r"\d{8}T\d{6}-([0-9a-f]{8})-1\.log", new[0])
    assert match, new[0]
    return new[0], match.group(1)


@pytest.fixture
def cycle(host, this_run):
    """The kernel log of the cycle this run measured."""
    return host.file("%s/%s" % (LOGS, this_run[0])).content_string


@pytest.fixture
def resume(host, cycle):
    return json.loads(host.file(FACT).content_string).get("resume")


def test_the_measured_resume_is_stored_where_the_s3_gate_reads_it(host, prepared, resume):
    assert resume is not None, "no resume in %s" % FACT
    assert set(resume) == {"kernel_ms", "end_to_end_ms", "kernel_median_ms", "end_to_end_median_ms", "cycles",
                           "mem_sleep", "measured_at"}
    assert resume["cycles"] == 1 and resume["mem_sleep"] == "deep"
    # One cycle: its figures are the median and the worst. A TCG guest resumes in tens to hundreds
    # of ms; the network answers later than the kernel has resumed.
    assert resume["kernel_median_ms"] == resume["kernel_ms"]
    assert resume["end_to_end_median_ms"] == resume["end_to_end_ms"]
    assert 1 < resume["kernel_ms"] < 5000 and resume["end_to_end_ms"] > resume["kernel_ms"]
    measured = datetime.fromisoformat(resume["measured_at"]).replace(tzinfo=timezone.utc).timestamp()
    assert measured > prepared["prepared_at"]
    # The other keys of the fact file are kept.
    stored = json.loads(host.file(FACT).content_string)
    assert {k: v for k, v in stored.items() if k != "resume"} == prepared["fact"]


def test_the_metrics_hold_the_same_measurement(host, resume):
    prom = host.file(PROM)
    assert prom.is_file and prom.user == "root" and not prom.mode & 0o022
    lines = prom.content_string.splitlines()
    assert "fleetnap_resume_cycles_measured 1" in lines
    assert "# TYPE fleetnap_resume_kernel_seconds gauge" in lines
    value = {m.group(1): float(m.group(2)) for m in (re.match(r'(fleetnap_\w+\{stat="max"\}) (\S+)$', line)
                                                     for line in lines) if m}
    assert value['fleetnap_resume_kernel_seconds{stat="max"}'] == pytest.approx(resume["kernel_ms"] / 1000, rel=1e-6)
    assert value['fleetnap_resume_end_to_end_seconds{stat="max"}'] == pytest.approx(resume["end_to_end_ms"] / 1000,
                                                                                    rel=1e-6)
    assert any(line.startswith("fleetnap_resume_slowest_device_seconds{device=") for line in lines)


def test_device_callbacks_were_timed_during_the_cycle_and_pm_print_times_is_back(host, prepared, cycle):
    # Only with pm_print_times on does the kernel log each device callback and its duration.
    assert re.search(r"PM: calling \S+ @ \d+", cycle) and re.search(r"returned 0 after \d+ usecs", cycle)
    assert prepared["pm_print_times"] == "0"
    assert host.file("/sys/power/pm_print_times").content_string.strip() == prepared["pm_print_times"]
    debug = host.file("/sys/power/pm_debug_messages")
    assert (debug.content_string.strip() if debug.exists else "none") == prepared["pm_debug_messages"]


def test_the_cycle_was_s3_and_the_hosts_s2idle_choice_is_back(host, prepared, cycle):
    assert "PM: suspend entry (deep)" in cycle and "PM: suspend exit" in cycle
    assert prepared["mem_sleep"] == "[s2idle] deep"
    assert host.file("/sys/power/mem_sleep").content_string.strip() == "[s2idle] deep"


# Processes whose command line holds a cycle's marker (the detached shell pm_cycle starts is
# "/bin/sh -c '# fleetnap-pm-cycle RUN_ID ...'"); the marker is built at run time so that this
# command's own command line does not hold it.
ARMED = ("python3 -c \"import glob\nn = ('fleetnap-pm-' + 'cycle ').encode()\nk = 0\n"
         "for p in glob.glob('/proc/[0-9]*/cmdline'):\n"
         "    try:\n        k += n in open(p, 'rb').read()\n    except OSError:\n        pass\nprint(k)\"")


def test_nothing_is_left_armed_or_running(host, this_run):
    # This run's cycle was collected: its state is gone. (A cycle that was never collected, such as
    # the one tests/lab/test_measure_resume.py leaves on lab3 by dropping its wake packet, keeps its
    # files in /run until the next boot; they are not this run's.)
    state = host.file("/run/fleetnap/pm_cycle")
    left = [name for name in (state.listdir() if state.exists else []) if name.startswith(this_run[1] + ".")]
    assert left == [], "the state of this run's cycle %s was left: %s" % (this_run[1], left)
    assert host.check_output(ARMED).strip() == "0", "a cycle's suspend shell is still running"
