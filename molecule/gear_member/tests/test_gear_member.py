"""gear_member down / up / verify, checked on lab3 itself (pytest-testinfra): the host went to S3
(deep, not suspend to idle) once more than prepare noted, although its in-service policy said
s2idle; it came back; and it serves with that policy again, nothing of the parking left in /run."""

from __future__ import annotations

testinfra_hosts = ["ansible://lab3"]


def test_the_host_was_suspended_once_more(host):
    before = int(host.file("/run/fleetnap-molecule/suspend-success").content_string)
    assert int(host.file("/sys/power/suspend_stats/success").content_string) >= before + 1


def test_it_was_s3_not_suspend_to_idle(host):
    start = int(host.file("/run/fleetnap-molecule/dmesg-lines").content_string)
    log = host.check_output("dmesg").splitlines()[start:]
    entries = [ln for ln in log if "PM: suspend entry" in ln]
    assert entries and all("(deep)" in ln for ln in entries), entries
    assert any("PM: suspend exit" in ln for ln in log)


def test_it_serves_with_its_own_sleep_policy_again(host):
    assert "[s2idle]" in host.file("/sys/power/mem_sleep").content_string


def test_nothing_of_the_parking_is_left(host):
    assert not host.file("/run/systemd/sleep.conf.d/zz-fleetnap-park.conf").exists
    assert not host.file("/run/fleetnap/park-mem_sleep").exists
    assert not host.file("/run/fleetnap/park-made-dirs").exists
