"""The latency_profile scenario, verified on the guests themselves (pytest-testinfra).

converge.yml applied a 20 us profile with PM QoS to gear group 1 (lab1, lab4). The lab guests run
under TCG without a cpuidle driver, so what is real there is checked: the per-CPU PM QoS resume
latency, the system sleep policy (S3 kept: no resume budget), the drop-in systemd reads, the
records fleetnap keeps to put the host back, and that systemd still offers suspend.
"""

from __future__ import annotations

import json

import pytest

testinfra_hosts = ["ansible://gear_group_1"]


def test_every_cpu_carries_the_20us_pm_qos_limit(host):
    files = host.check_output("ls -d /sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us").split()
    assert files, "no CPU exposes pm_qos_resume_latency_us"
    for path in files:
        assert host.file(path).content_string.strip() == "20", path


def test_s3_stays_allowed_and_selected(host):
    assert "mem" in host.file("/sys/power/state").content_string.split()
    assert "[deep]" in host.file("/sys/power/mem_sleep").content_string.split()


def test_the_sleep_drop_in_says_s3(host):
    drop_in = host.file("/etc/systemd/sleep.conf.d/fleetnap.conf")
    assert drop_in.is_file and drop_in.user == "root"
    lines = drop_in.content_string.splitlines()
    # systemd's lists: an empty assignment first resets what other drop-ins appended
    assert lines[lines.index("SuspendState=") + 1] == "SuspendState=mem"
    assert "MemorySleepMode=deep" in lines and not any(line.startswith("AllowSuspend=no") for line in lines)


@pytest.mark.parametrize("record", ["cpuidle_qos.orig.json", "sleep_policy.orig.json"])
def test_fleetnap_keeps_what_it_changed_to_put_it_back(host, record):
    f = host.file("/var/lib/fleetnap/" + record)
    assert f.is_file and f.mode == 0o600, record
    assert isinstance(json.loads(f.content_string), dict)


def test_systemd_can_still_suspend(host):
    """No sleep target masked by the profile, and systemd's own check passes."""
    for target in ("sleep.target", "suspend.target"):
        assert host.run("systemctl is-enabled %s" % target).stdout.strip() != "masked", target
    assert host.run("systemctl --version").rc == 0
