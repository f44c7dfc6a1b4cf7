"""The node_exporter role's C-state residency collector, installed and run on this machine.

This machine has no systemd (PID 1 is not systemd), so the role picks cron; the collector reads
this kernel's real cpuidle (driver haltpoll: POLL and haltpoll). The role runs through the real
ansible-playbook on localhost with every path under tmp_path. The collector is one file: the
template embeds fleetnap's module_utils (read on the controller) and serves them to the import
system under their usual names.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, VENV_BIN
from ansible.module_utils.fleetnap.residency import collect
from ansible.module_utils.fleetnap.sysfs import HostFS

CPU = Path("/sys/devices/system/cpu")
NAME = "fleetnap-cstate-residency"
FILES = ["__init__.py", "cpulist.py", "cpuidle.py", "embedded.py", "fileio.py", "parse.py", "prom.py", "residency.py", "sysfs.py"]

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


def role(tmp_path, role_name="node_exporter", env=None, cwd=REPO, **overrides):
    v = {"node_exporter_residency_lib_dir": str(tmp_path / "lib"),
         "node_exporter_textfile_dir": str(tmp_path / "textfile"),
         "node_exporter_residency_cron_file": str(tmp_path / "cron.d" / NAME),
         # this shared test machine gets no cron package; the entry is run by hand below
         "node_exporter_residency_cron_package": ""}
    v.update(overrides)
    (tmp_path / "cron.d").mkdir(exist_ok=True)
    play = [{"name": "residency collector", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "tasks": [{"name": "Collector", "ansible.builtin.include_role": {"name": role_name,
                                                                              "tasks_from": "residency"},
                        "vars": v}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = env or dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,",
                           "-e", "ansible_python_interpreter=/usr/bin/python3", str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=str(cwd), timeout=300)
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout)
    assert recap, proc.stdout[-3000:] + proc.stderr[-2000:]
    proc.changed, proc.failed = int(recap.group(1)), int(recap.group(2))
    return proc


def embedded(script):
    """PACKAGE and SOURCES of an installed collector script, read without running it."""
    values = {}
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in ("PACKAGE", "SOURCES"):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values["PACKAGE"], values["SOURCES"]


def metric_families(text):
    """The HELP and TYPE lines, and the metric names of the samples."""
    meta = [ln for ln in text.splitlines() if ln.startswith("#")]
    names = {ln.split("{")[0].split()[0] for ln in text.splitlines() if ln and not ln.startswith("#")}
    return meta, names


def old_layout(lib):
    """What the previous version of the role left under lib_dir: module_utils copied under ansible/."""
    mu = lib / "ansible/module_utils/fleetnap"
    mu.mkdir(parents=True)
    for pkg in (lib / "ansible", lib / "ansible/module_utils"):
        (pkg / "__init__.py").write_text("# fleetnap residency collector\n")
    for f in FILES:
        shutil.copy(REPO / "module_utils/fleetnap" / f, mu / f)


def test_installed_collector_reads_this_kernel_and_cron_runs_it(tmp_path):
    before = sysfs_counters()
    proc = role(tmp_path)
    after = sysfs_counters()
    assert proc.failed == 0 and proc.changed > 0, proc.stdout[-3000:]
    lib = tmp_path / "lib"
    # One file on the host, with the same code the modules run embedded verbatim, nothing else.
    assert [p.name for p in lib.iterdir()] == [NAME]
    package, sources = embedded(lib / NAME)
    assert package == "ansible.module_utils.fleetnap"
    assert sources == {f[:-3]: (REPO / "module_utils/fleetnap" / f).read_text() for f in FILES}

    # The install collected once: every CPU and state of this kernel, counters between two reads.
    out = tmp_path / "textfile/fleetnap_cstate_residency.prom"
    got = prom(out)
    assert set(got["fleetnap_cstate_entries_total"]) == set(before)
    for key, (usage, time_us) in before.items():
        assert usage <= got["fleetnap_cstate_entries_total"][key] <= after[key][0]
        # prom.py writes 9 significant digits (%.9g): the bounds widen by that rounding.
        assert time_us / 1e6 * (1 - 5e-9) <= got["fleetnap_cstate_residency_seconds_total"][key] \
            <= after[key][1] / 1e6 * (1 + 5e-9)
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
    # The same families, HELP and TYPE lines as module_utils/fleetnap/residency.py gives here.
    assert metric_families(out.read_text()) == metric_families(collect(HostFS("/")))
    # Samples of the governor's misses where this kernel counts them (cpuidle above/below files).
    misses = {"fleetnap_cstate_above_total", "fleetnap_cstate_below_total", "fleetnap_cstate_qos_bounded",
              "fleetnap_cstate_miss_ratio"} if (CPU / "cpu0/cpuidle/state0/above").exists() else set()
    always = {"fleetnap_cstate_entries_total", "fleetnap_cstate_disabled", "fleetnap_cstate_residency_seconds_total"}
    assert metric_families(out.read_text())[1] == always | misses

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


def test_upgrade_from_the_old_layout_leaves_one_file_and_removal_cleans_an_old_host(tmp_path):
    # A host the previous role version set up: module_utils copied under lib/ansible, an older script.
    lib = tmp_path / "lib"
    old_layout(lib)
    (lib / NAME).write_text("#!/usr/bin/python3\nimport sys\nsys.path.insert(0, %r)\n" % str(lib))
    up = role(tmp_path)
    assert up.failed == 0 and up.changed > 0, up.stdout[-3000:]
    assert [p.name for p in lib.iterdir()] == [NAME]
    assert (tmp_path / "textfile/fleetnap_cstate_residency.prom").exists()
    again = role(tmp_path)
    assert again.failed == 0 and again.changed == 0, again.stdout[-3000:]

    # Removal on a host that still has the old layout (never upgraded): nothing of it is left.
    old = tmp_path / "old"
    old.mkdir()
    old_layout(old / "lib")
    (old / "lib" / NAME).write_text("#!/usr/bin/python3\n")
    (old / "textfile").mkdir()
    (old / "textfile/fleetnap_cstate_residency.prom").write_text("# old\n")
    (old / "cron.d").mkdir()
    (old / "cron.d" / NAME).write_text("* * * * * root %s\n" % (old / "lib" / NAME))
    gone = role(old, node_exporter_residency_collector=False)
    assert gone.failed == 0 and gone.changed > 0, gone.stdout[-3000:]
    assert list((old / "lib").iterdir()) == []
    assert list((old / "textfile").iterdir()) == [] and list((old / "cron.d").iterdir()) == []
    assert role(old, node_exporter_residency_collector=False).changed == 0


def test_a_collector_that_cannot_write_fails_the_install_and_installs_nothing(tmp_path):
    # The textfile directory is a regular file: the collector cannot write its metrics there.
    (tmp_path / "textfile").write_text("not a directory\n")
    proc = role(tmp_path)
    assert proc.failed == 1, proc.stdout[-3000:]
    assert "failed to validate" in proc.stdout and str(tmp_path / "textfile") in proc.stdout, proc.stdout[-3000:]
    assert list((tmp_path / "lib").iterdir()) == []
    assert not list((tmp_path / "cron.d").iterdir())
    assert (tmp_path / "textfile").read_text() == "not a directory\n"


def test_role_from_the_built_collection_embeds_the_collections_module_utils(tmp_path):
    """packaging/build_collection.py moves module_utils to plugins/module_utils and rewrites their
    imports: the role, run from the built collection with nothing of the repository on any path,
    embeds those and serves them under the collection's package."""
    coll = tmp_path / "collections"
    tree = coll / "ansible_collections/fleetnap/power"
    build = subprocess.run([str(VENV_BIN / "python"), str(REPO / "packaging/build_collection.py"),
                            "--out", str(tree), "--no-tarball"], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "ansible.cfg").write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_CONFIG=str(work / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(coll),
               ANSIBLE_NOCOLOR="1", ANSIBLE_HOME=str(tmp_path / "home"))
    for var in ("ANSIBLE_LIBRARY", "ANSIBLE_MODULE_UTILS", "ANSIBLE_ROLES_PATH"):
        env.pop(var, None)
    proc = role(tmp_path, role_name="fleetnap.power.node_exporter", env=env, cwd=work)
    assert proc.failed == 0 and proc.changed > 0, proc.stdout[-3000:]
    package, sources = embedded(tmp_path / "lib" / NAME)
    assert package == "ansible_collections.fleetnap.power.plugins.module_utils"
    assert sources == {f[:-3]: (tree / "plugins/module_utils" / f).read_text() for f in FILES}
    assert "ansible_collections.fleetnap.power.plugins.module_utils.cpuidle import" in sources["residency"]
    out = tmp_path / "textfile/fleetnap_cstate_residency.prom"
    os.unlink(out)
    subprocess.run([str(tmp_path / "lib" / NAME)], check=True, timeout=60, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert metric_families(out.read_text()) == metric_families(collect(HostFS("/")))
    assert role(tmp_path, role_name="fleetnap.power.node_exporter", env=env, cwd=work).changed == 0
