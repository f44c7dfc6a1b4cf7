"""gear_member down refused on lab3 (suspend.target masked), checked on the guest itself
(pytest-testinfra): no suspend happened, nothing was scheduled, and nothing of a parking was
written (no drop-in, mem_sleep as it was, no record in /run/fleetnap)."""

from __future__ import annotations

testinfra_hosts = ["ansible://lab3"]


def test_no_suspend_happened(host):
    before = int(host.file("/run/fleetnap-molecule/suspend-success").content_string)
    assert int(host.file("/sys/power/suspend_stats/success").content_string) == before


def test_the_mask_is_as_the_operator_left_it(host):
    assert host.file("/run/systemd/system/suspend.target").linked_to == "/dev/null"


def test_nothing_was_scheduled_or_written(host):
    # a scheduled suspend is a transient run-*.timer/.service described by its command
    transient = host.check_output("systemctl list-units --all --no-legend --plain 'run-*'")
    assert "suspend" not in transient, transient
    assert not host.file("/run/systemd/sleep.conf.d/zz-fleetnap-park.conf").exists
    assert not host.file("/run/fleetnap/park-mem_sleep").exists
    assert host.file("/sys/power/mem_sleep").content_string == host.file(
        "/run/fleetnap-molecule/mem_sleep").content_string
