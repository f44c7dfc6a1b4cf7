"""node_exporter on the guests and a real Prometheus scraping them.

The guests' node_exporters (role node_exporter) export what fleetnap's modules write on the hosts:
the latency gate's decision, the sleep policy, the resume measurement and the C-state residency
collector the role installs with a systemd timer. (The controller's node_exporter, exporting what
gear_shift.yml writes there, is checked in test_gear_shift.py's S3/WoL cycle.)
"""

from __future__ import annotations

import json

import pytest

from labtools import why
from promtools import query, wait_for
from test_measure_resume import playbook

pytestmark = pytest.mark.lab
RESIDENCY_FILE = "fleetnap_cstate_residency.prom"


# Two guests of different racks and gear groups: the guests are identical, and the role and two
# profile runs on all six TCG guests cost this test eight minutes of a CI run (the role's own
# idempotence and what it leaves on a guest are molecule's node_exporter scenario, verified there
# by testinfra).
OBSERVED = ("lab1", "lab6")


def test_node_exporter_role_and_prometheus_see_fleetnap_metrics(lab, prometheus, tmp_path):
    hosts = sorted(OBSERVED)
    assert set(hosts) <= set(lab.hosts)
    first = hosts[0]
    targets = ("-e", "fleetnap_targets=%s" % ",".join(hosts))
    # One collection costs a TCG guest ~3.5 s of CPU (about 50 ms on hardware): every 60 s here
    # (20 s was measured no faster: the guests' CPU is the test's), and the timer is stopped at
    # the end, so that the suites after this one (molecule's ptp_clock runs on lab6) do not pay
    # for it for the rest of the run.
    interval = ("-e", "node_exporter_residency_interval_s=60")
    try:
        proc = playbook("node_exporter.yml", *targets, *interval)
        assert proc.returncode == 0, why(proc)
        _observe(lab, prometheus, tmp_path, hosts, first, targets)
    finally:
        for h in hosts:
            lab.ssh(h, "systemctl disable --now fleetnap-cstate-residency.timer", check=False)


def _observe(lab, prometheus, tmp_path, hosts, first, targets):
    # The residency collector runs from its systemd timer on every guest (systemd runs there).
    cstates = {}
    for h in hosts:
        out = lab.ssh(h, "systemctl is-enabled fleetnap-cstate-residency.timer; "
                         "systemctl is-active fleetnap-cstate-residency.timer; "
                         "test -e /etc/cron.d/fleetnap-cstate-residency && echo cron || echo nocron; "
                         "ls -d /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]* 2>/dev/null | wc -l").stdout.split()
        assert out[:3] == ["enabled", "active", "nocron"], (h, out)
        # The collector is one generated file (fleetnap's module_utils embedded), nothing else.
        assert lab.ssh(h, "ls -A /usr/local/lib/fleetnap").stdout.split() == ["fleetnap-cstate-residency"], h
        cstates[h] = int(out[3])
    # The gate publishes its decision (lab profile "interactive": 200 us), and the sleep policy.
    # The profile may mask the sleep targets (no resume measurement within budget), which later
    # tests that suspend guests must not inherit: undo it afterwards, whatever happens.
    try:
        proc = playbook("apply_profile.yml", *targets, "-e", "fleetnap_artifacts_dir=%s" % tmp_path)
        assert proc.returncode == 0, why(proc)
        _check_metrics(lab, prometheus, tmp_path, hosts, first, cstates)
    finally:
        undo = playbook("apply_profile.yml", *targets, "-e", "fleetnap_profile_state=absent",
                        "-e", "fleetnap_artifacts_dir=%s" % (tmp_path / "undo"))
    assert undo.returncode == 0, why(undo)


def _check_metrics(lab, prometheus, tmp_path, hosts, first, cstates):
    # The resume measurement is on the hosts (the suite measured them before; else measure one).
    if "resume" not in json.loads(lab.ssh(first, "cat /etc/ansible/facts.d/fleetnap.fact || echo {}").stdout):
        proc = playbook("measure_resume.yml", "-e", "fleetnap_targets=%s" % first, "-e", "resume_measure_cycles=1",
                        "-e", "resume_measure_results_dir=%s" % (tmp_path / "resume"))
        assert proc.returncode == 0, why(proc)
    prometheus = prometheus(hosts=hosts)
    budgets = wait_for(prometheus, "fleetnap_cpuidle_budget_seconds", len(hosts))
    assert budgets == {h: pytest.approx(200e-6) for h in hosts}
    # The resume measurement's metrics agree with what was stored on the host.
    stored = json.loads(lab.ssh(first, "cat /etc/ansible/facts.d/fleetnap.fact").stdout)["resume"]
    got = wait_for(prometheus, 'fleetnap_resume_kernel_seconds{stat="max",host="%s"}' % first, 1)
    assert got[first] == pytest.approx(stored["kernel_ms"] / 1000, rel=1e-6)
    got = wait_for(prometheus, 'fleetnap_resume_end_to_end_seconds{stat="max",host="%s"}' % first, 1)
    assert got[first] == pytest.approx(stored["end_to_end_ms"] / 1000, rel=1e-6)

    # The sleep policy's metrics agree with what sleep_policy left on each guest.
    for h in hosts:
        out = lab.ssh(h, "cat /sys/power/mem_sleep; head -1 /etc/systemd/sleep.conf.d/fleetnap.conf; "
                         "ls -l /etc/systemd/system/ | grep -c 'suspend.target -> /dev/null' || true").stdout
        lines = out.splitlines()
        mode = [w.strip("[]") for w in lines[0].split() if w.startswith("[")][0]
        allow = lines[1].split("allow=")[1].rstrip(").")
        suspend_masked = float(lines[2].strip())
        want_allowed = {"deep": {"deep": 1.0, "s2idle": 1.0}, "s2idle": {"deep": 0.0, "s2idle": 1.0},
                        "none": {"deep": 0.0, "s2idle": 0.0}}[allow]
        for state, value in want_allowed.items():
            got = wait_for(prometheus, 'fleetnap_sleep_state_allowed{host="%s",state="%s"}' % (h, state), 1)
            assert got == {h: value}, (h, allow, state)
        got = wait_for(prometheus, 'fleetnap_sleep_mem_sleep_mode{host="%s",mode="%s"}' % (h, mode), 1)
        assert got == {h: 1.0}
        assert query(prometheus, 'sum by (host) (fleetnap_sleep_mem_sleep_mode{host="%s"})' % h) == {h: 1.0}
        got = wait_for(prometheus, 'fleetnap_sleep_target_masked{host="%s",target="suspend.target"}' % h, 1)
        assert got == {h: suspend_masked}
        # S3 is what the guests offer.
        assert query(prometheus, 'fleetnap_sleep_state_offered{host="%s",state="deep"}' % h) == {h: 1.0}

    # The residency collector: the timer keeps rewriting its file (node_exporter's mtime of it
    # moves), the file parses, and it has one series per CPU and idle state the guest has (TCG
    # guests have no cpuidle driver: none; a real host has them all).
    got = wait_for(prometheus, 'changes(node_textfile_mtime_seconds{file=~".*/%s"}[150s]) >= 1' % RESIDENCY_FILE,
                   len(hosts), timeout=180)
    assert set(got) == set(hosts), got
    for h in hosts:
        series = query(prometheus, 'count(fleetnap_cstate_entries_total{host="%s"}) or vector(0)' % h)
        assert list(series.values()) == [float(cstates[h])], (h, series)
    # node_exporter's own view of the textfile directory: no parse errors.
    errors = wait_for(prometheus, "node_textfile_scrape_error", len(hosts))
    assert set(errors.values()) == {0.0}
