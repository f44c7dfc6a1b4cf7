"""ptp_clock present (the scenario's first phase), verified on lab6 itself (pytest-testinfra): phc2sys
runs as fleetnap's unit on the e1000e's PHC with the TAI offset, the kernel's TAI offset is 37 s,
and the offset the host had before (5 s, set by prepare) is recorded so that state absent can put
it back."""

from __future__ import annotations

import json

from conftest import TAI, same_boot_as_prepare

testinfra_hosts = ["ansible://lab6"]


def test_lab6_kept_the_boot_prepare_marked(host):
    same_boot_as_prepare(host)


def test_phc2sys_unit_is_enabled_and_running(host):
    unit = host.service("fleetnap-phc2sys")
    assert unit.is_enabled and unit.is_running
    assert host.file("/etc/systemd/system/fleetnap-phc2sys.service").is_file


def test_phc2sys_disciplines_the_phc_from_the_system_clock_with_the_tai_offset(host):
    procs = host.process.filter(comm="phc2sys")
    assert len(procs) == 1, [p.args for p in procs]
    args = procs[0].args.split()
    assert args[args.index("-O") + 1] == "37"
    assert any(a.startswith("/dev/ptp") for a in args) and "CLOCK_REALTIME" in args
    phc = [a for a in args if a.startswith("/dev/ptp")][0]
    assert host.file(phc).is_symlink or host.file(phc).exists


def test_the_kernel_tai_offset_is_37_and_the_earlier_one_is_recorded(host):
    assert int(host.check_output(TAI)) == 37
    record = host.file("/var/lib/fleetnap/ptp_clock-tai-before.json")
    assert record.is_file and json.loads(record.content_string) == {"tai_offset_s": 5}


def test_the_tai_helper_is_root_owned_and_executable(host):
    helper = host.file("/usr/local/libexec/fleetnap/set-tai-offset")
    assert helper.is_file and helper.user == "root" and helper.mode & 0o111 and not helper.mode & 0o022
