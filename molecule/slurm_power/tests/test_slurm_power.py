"""slurm_power role, checked on the controller (pytest-testinfra, local://): the program under its
three names, its settings and log SlurmUser's and root's only; a program called as slurmctld calls
it (an environment of SLURM_CONF only) returns at once, acts on no node it does not know and on
none for a malformed argument, and logs why."""

from __future__ import annotations

import json

testinfra_hosts = ["local://"]

BASE = "/tmp/fleetnap-molecule-slurm-power"
LOG = BASE + "/log/slurm-power.log"


def call(host, name, arg):
    """As slurmctld calls it: from an environment built from scratch, bounded (a program that does
    not return at once fails here with timeout's 124)."""
    return host.run("cd / && env -i SLURM_CONF=/etc/slurm/slurm.conf timeout 10 %s %s", "%s/lib/%s" % (BASE, name), arg)


def log_tail(host, n):
    return [x.split(" ", 1)[1] for x in host.file(LOG).content_string.splitlines()[-n:]]


def test_the_program_under_its_three_names_and_private_settings(host):
    prog = host.file(BASE + "/lib/fleetnap-slurm-power")
    assert prog.is_file and prog.mode == 0o755
    for name in ("fleetnap-slurm-suspend", "fleetnap-slurm-resume", "fleetnap-slurm-resume-fail"):
        link = host.file("%s/lib/%s" % (BASE, name))
        assert link.is_symlink and link.linked_to == prog.path
    settings = host.file(BASE + "/etc/settings.json")
    assert settings.mode == 0o640 and host.file(BASE + "/etc").mode == 0o750
    doc = json.loads(settings.content_string)
    assert doc["nodes"] == ["lab1", "lab2", "lab3", "lab4", "lab5", "lab6"]
    assert doc["runner"][-2:] == [BASE + "/lib/fleetnap-slurm-power", "run"]


def test_a_malformed_hostlist_acts_on_no_node_and_says_why(host):
    res = call(host, "fleetnap-slurm-suspend", "lab[1-")
    assert res.rc == 1 and res.stdout == ""
    (last,) = log_tail(host, 1)
    assert last.startswith("fleetnap-slurm suspend -: nothing done:") and "lab[1-" in last


def test_nodes_fleetnap_does_not_know_are_left_alone(host):
    res = call(host, "fleetnap-slurm-resume", "gpu[1-2]")
    assert res.rc == 0 and res.stdout == ""
    lines = log_tail(host, 3)
    assert "fleetnap-slurm resume gpu1: skipped: not a node fleetnap knows: left alone" in lines
    assert "fleetnap-slurm resume gpu2: skipped: not a node fleetnap knows: left alone" in lines
    assert any(x.startswith("fleetnap-slurm resume -: note: SLURM_RESUME_FILE is not set") for x in lines)
