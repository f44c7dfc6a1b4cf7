"""ptp_clock absent (the scenario's second phase, side_effect), verified on lab6 itself (pytest-
testinfra): nothing of fleetnap's phc2sys is left (process, unit, helper, record), and the kernel's
TAI offset is back at what it was before state present (5 s, set by prepare), not at 0."""

from __future__ import annotations

import pytest

from conftest import TAI, same_boot_as_prepare

testinfra_hosts = ["ansible://lab6"]


def test_lab6_kept_the_boot_prepare_marked(host):
    same_boot_as_prepare(host)


def test_no_phc2sys_runs(host):
    assert host.process.filter(comm="phc2sys") == []
    assert not host.service("fleetnap-phc2sys").is_running


@pytest.mark.parametrize("path", ["/etc/systemd/system/fleetnap-phc2sys.service",
                                  "/usr/local/libexec/fleetnap/set-tai-offset",
                                  "/var/lib/fleetnap/ptp_clock-tai-before.json"])
def test_nothing_of_it_is_left(host, path):
    assert not host.file(path).exists, path


def test_the_tai_offset_is_back_where_it_was(host):
    assert int(host.check_output(TAI)) == 5
