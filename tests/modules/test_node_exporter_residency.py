"""The node_exporter role's C-state residency collector, installed and run on this machine.

This machine has no systemd (PID 1 is not systemd), so the role picks cron; the collector reads
this kernel's real cpuidle (driver haltpoll: POLL and haltpoll). The role runs through the real
ansible-playbook on localhost with every path under tmp_path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

CPU = Path("/sys/devices/system/cpu")
NAME = "fleetnap-cstate-residency"
FILES = ["__init__.py", "cpulist.py", "cpuidle.py", "prom.py", "residency.py", "sysfs.py"]

pytestmark = pytest.mark.skipif(not (CPU / "cpu0/cpuidle/state0").exists(), reason="this kernel has no cpuidle states")


def sysfs_counters():
    """{(cpu, state name): (usage, time_us)} read from this kernel now."""
    out = {}
    for cpudir in sorted(CPU.glob("cpu[0-9]*")):
        for st in sorted((cpudir / "cpuidle").glob("state[0-9]*")):
            name = (st / "name").read_text().strip()
            out[(cpudir.name[3:], name)] = (int((st / "usage").read_text()), int((st / "time").read_text()))
    return out


def prom(path):
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r'^(fleetnap_[a-z_]+)\{cpu="(\d+)",state="([^"]+)"\} (\S+)$', line)
        if m:
            out.setdefault(m.group(1), {})[(m.group(2), m.group(3))] = float(m.group(4))
    return out


def role(tmp_path, **overrides):
    v = {"node_exporter_residency_lib_dir": str(tmp_path / "lib"),
         "node_exporter_textfile_dir": str(tmp_path / "textfile"),
         "node_exporter_residency_cron_file": str(tmp_path / "cron.d" / NAME),
         # this shared test machine gets no cron package; the entry is run by hand below
         "node_exporter_residency_cron_package": ""}
    v.update(overrides)
    (tmp_path / "cron.d").mkdir(exist_ok=True)
    play = [{"name": "residency collector", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [{"name": "Collector", "ansible.builtin.include_role": {"name": "node_exporter",
                                                                              "tasks_from": "residency"},
                        "vars": v}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
                           "-e", "ansible_python_interpreter=/usr/bin/python3", str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout)
    assert recap, proc.stdout[-3000:] + proc.stderr[-2000:]
    proc.changed, proc.failed = int(recap.group(1)), int(recap.group(2))
    return proc


def test_installed_collector_reads_this_kernel_and_cron_runs_it(tmp_path):
    before = sysfs_counters()
    proc = role(tmp_path)
    after = sysfs_counters()
    assert proc.failed == 0 and proc.changed > 0, proc.stdout[-3000:]
    lib = tmp_path / "lib"
    # The same code the modules run: byte-identical copies, nothing else of fleetnap's.
    for f in FILES:
        assert (lib / "ansible/module_utils/fleetnap" / f).read_bytes() == \
            (REPO / "module_utils/fleetnap" / f).read_bytes(), f
    assert sorted(p.name for p in (lib / "ansible/module_utils/fleetnap").iterdir()) == sorted(FILES)

    # The install collected once: every CPU and state of this kernel, counters between two reads.
    out = tmp_path / "textfile/fleetnap_cstate_residency.prom"
    got = prom(out)
    assert set(got["fleetnap_cstate_entries_total"]) == set(before)
    for key, (usage, time_us) in before.items():
        assert usage <= got["fleetnap_cstate_entries_total"][key] <= after[key][0]
        assert time_us / 1e6 <= got["fleetnap_cstate_residency_seconds_total"][key] <= after[key][1] / 1e6
    assert "# TYPE fleetnap_cstate_residency_seconds_total counter" in out.read_text()

    # No systemd here: a cron entry, whose command runs the collector with only the installed code.
    cron = (tmp_path / "cron.d" / NAME).read_text()
    line = [ln for ln in cron.splitlines() if ln and not ln.startswith(("#", "SHELL", "PATH"))]
    assert len(line) == 1 and line[0].split()[:6] == ["*", "*", "*", "*", "*", "root"]
    command = line[0].split()[6:]
    assert command == [str(lib / NAME)]
    stale = sysfs_counters()
    os.utime(out, (0, 0))
    subprocess.run(command, check=True, timeout=60, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert out.stat().st_mtime > 0
    got = prom(out)
    assert all(got["fleetnap_cstate_entries_total"][k] >= stale[k][0] for k in stale)
    assert not list((tmp_path / "textfile").glob(".fleetnap-*"))

    # A second run changes nothing.
    again = role(tmp_path)
    assert again.failed == 0 and again.changed == 0, again.stdout[-3000:]

    # Removal takes everything away, the metrics file included.
    gone = role(tmp_path, node_exporter_residency_collector=False)
    assert gone.failed == 0 and gone.changed > 0
    assert not (lib / "ansible").exists() and not (lib / NAME).exists()
    assert not (tmp_path / "cron.d" / NAME).exists() and not out.exists()


@pytest.mark.parametrize("override,match", [
    ({"node_exporter_residency_scheduler": "anacron"}, "must be auto, systemd or cron"),
    ({"node_exporter_residency_lib_dir": "relative/lib"}, "absolute paths"),
    ({"node_exporter_residency_interval_s": 0}, ">= 1"),
])
def test_bad_settings_fail_before_anything_is_installed(tmp_path, override, match):
    proc = role(tmp_path, **override)
    assert proc.failed == 1 and match in proc.stdout
    assert not (tmp_path / "lib").exists() and not (tmp_path / "textfile").exists()
    assert not list((tmp_path / "cron.d").iterdir())
