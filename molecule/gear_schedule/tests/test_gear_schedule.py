"""gear_schedule role, checked on the controller (pytest-testinfra, local://): for 2030-06-15 the
example week gives gear changes; each has a timer and a service, the timer fires the service at the
change's hour, the service runs gear_shift.yml with that gear and date, systemd-analyze accepts
them, and nothing else is in the directory."""

from __future__ import annotations

import re

testinfra_hosts = ["local://"]

UNITS = "/tmp/fleetnap-molecule-gear-schedule"
NAME = re.compile(r"^fleetnap-gear-20300615-([0-9]{2})[.](timer|service)$")


def test_a_timer_and_a_service_per_gear_change_and_nothing_else(host):
    names = host.run("ls -1 %s" % UNITS).stdout.split()
    assert names and all(NAME.match(n) for n in names), names
    hours = sorted({NAME.match(n).group(1) for n in names})
    assert "00" in hours and len(hours) >= 2, hours           # hour 0 and at least one change
    assert len(names) == 2 * len(hours), names


def test_each_timer_runs_the_shift_to_its_gear_at_its_hour(host):
    gears = []
    for timer in sorted(host.run("ls -1 %s/*.timer" % UNITS).stdout.split()):
        hour = NAME.match(timer.rsplit("/", 1)[1]).group(1)
        content = host.file(timer).content_string
        assert "OnCalendar=2030-06-15 %s:00:00 UTC" % hour in content
        service = host.file(timer[:-len("timer")] + "service").content_string
        m = re.search(r"gear_shift[.]yml -e gear_shift_gear=([0-9]+) -e gear_shift_date=2030-06-15", service)
        assert m and "Type=oneshot" in service, service
        gears.append(int(m.group(1)))
    assert all(a != b for a, b in zip(gears, gears[1:])), gears   # each one a change of gear
    verify = host.run("cd %s && systemd-analyze verify %s/fleetnap-gear-20300615-00.timer" % (UNITS, UNITS))
    assert verify.rc == 0, verify.stderr
