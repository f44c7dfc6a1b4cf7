"""slurm_nodes' bad inputs and bad answers from scontrol (tests/badinput.py runs the table, each case
forked as AnsiballZ runs a module): refused naming the option or what scontrol said, no traceback,
bounded, and nothing asked of Slurm (the stand-in scontrol of a case writes a file when it is asked
to update a node: each case's directory is as it was)."""

from __future__ import annotations

import pytest

from badinput import NAN, assert_refused_prepared, case_params, run_prepared

# scontrol show node -o as Debian 12's slurmctld (22.05.8) printed it in the lab (trimmed)
LINES = ("NodeName=lab4 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1 CPUTot=1 NodeAddr=127.0.0.1 "
         "State=IDLE+POWERED_DOWN ThreadsPerCore=1 Partitions=warm Reason=\n"
         "NodeName=lab5 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1 CPUTot=1 NodeAddr=127.0.0.1 "
         "State=IDLE ThreadsPerCore=1 Partitions=warm\n")
OK = {"action": "power_down", "nodes": ["lab5"], "scontrol": "{in}/scontrol", "timeout": 5, "poll": 0.2}


def fake(show=LINES, show_rc=0, update_rc=0):
    """A stand-in scontrol in the case's directory: 'show node -o' prints ``show`` and exits
    ``show_rc``; 'update' exits ``update_rc``, writing the file 'asked' only when it succeeds."""
    def prepare(d):
        (d / "nodes.txt").write_text(show)
        script = d / "scontrol"
        script.write_text('#!/bin/sh\nD=$(dirname "$0")\ncase "$1" in\n'
                          '  show) cat "$D/nodes.txt"; exit %d ;;\n'
                          '  update) [ %d = 0 ] || { echo "slurm_update error: Invalid node state" >&2; exit %d; }; '
                          'echo "$*" >> "$D/asked" ;;\nesac\n' % (show_rc, update_rc, update_rc))
        script.chmod(0o755)
    return prepare


def not_executable(d):
    fake()(d)
    (d / "scontrol").chmod(0o644)


PREPARE = {
    "scontrol not executable": not_executable,
    "scontrol show fails": fake(show="", show_rc=1),
    "a line without State": fake(show="NodeName=lab5 Arch=x86_64\n"),
    "a state that is not one": fake(show="NodeName=lab5 State=idle;rm\n"),
    "a node name that is not one": fake(show="NodeName=lab$5 State=IDLE\n"),
    "a node Slurm does not know": fake(),
    "scontrol update refused": fake(update_rc=1),
}

TABLE = [
    ("action missing", {k: v for k, v in OK.items() if k != "action"}, "action"),
    ("action unknown", dict(OK, action="hibernate"), "action"),
    ("nodes missing", {k: v for k, v in OK.items() if k != "nodes"}, "nodes"),
    ("nodes empty", dict(OK, nodes=[]), "option nodes: no node"),
    ("node name with a space", dict(OK, nodes=["lab 5"]), "option nodes[0]: must be a Slurm node name"),
    ("node name with a newline", dict(OK, nodes=["lab5\nlab6"]), "option nodes[0]: must be a Slurm node name"),
    ("node name a hostlist", dict(OK, nodes=["lab[4-5]"]), "option nodes[0]: must be a Slurm node name"),
    ("node name too long", dict(OK, nodes=["n" * 65]), "option nodes[0]: must be a Slurm node name"),
    ("hosts a list of names", dict(OK, hosts=["lab5"]), "option hosts[0]: must be {name, address, port"),
    ("hosts a string", dict(OK, hosts="lab5"), "option hosts: must be a mapping of node to {address, port} or a list"),
    ("hosts listed twice", dict(OK, hosts=[{"name": "lab5", "address": "a", "port": 22}] * 2),
     "option hosts[1]: lab5 is given twice"),
    ("hosts listed, one not a node", dict(OK, hosts=[{"name": "lab6", "address": "a", "port": 22}]),
     "option hosts.lab6: not one of the nodes"),
    ("parked state unknown", dict(OK, hosts=[{"name": "lab5", "address": "a", "port": 22}], parked={"lab5": "melted"}),
     "option hosts.lab5.parked: must be asleep or off"),
    ("parked not a mapping", dict(OK, parked=["lab5"]), "parked"),
    ("hosts names another node", dict(OK, hosts={"lab6": {"address": "10.0.0.6", "port": 22}}), "option hosts.lab6: not one of the nodes"),
    ("host without port", dict(OK, hosts={"lab5": {"address": "10.0.0.5"}}), "option hosts.lab5: must be {address, port"),
    ("host with an unknown key", dict(OK, hosts={"lab5": {"address": "a", "port": 22, "password": "x"}}), "must be {address, port"),
    ("host port 0", dict(OK, hosts={"lab5": {"address": "a", "port": 0}}), "option hosts.lab5.port: must be >= 1"),
    ("host port 70000", dict(OK, hosts={"lab5": {"address": "a", "port": 70000}}), "option hosts.lab5.port: must be >= 1 and <= 65535"),
    ("host port NaN", dict(OK, hosts={"lab5": {"address": "a", "port": NAN}}), "option hosts.lab5.port: must be a finite number"),
    ("host port a word", dict(OK, hosts={"lab5": {"address": "a", "port": "ssh"}}), "option hosts.lab5.port: must be a number"),
    ("host address with a space", dict(OK, hosts={"lab5": {"address": "a b", "port": 22}}), "option hosts.lab5.address"),
    ("host address empty", dict(OK, hosts={"lab5": {"address": "", "port": 22}}), "option hosts.lab5.address"),
    ("host parked unknown", dict(OK, hosts={"lab5": {"address": "a", "port": 22, "parked": "hibernated"}}),
     "option hosts.lab5.parked: must be asleep or off"),
    ("scontrol relative", dict(OK, scontrol="scontrol"), "option scontrol: must be an absolute path"),
    ("scontrol missing", dict(OK, scontrol="{in}/no-scontrol"), "option scontrol: {in}/no-scontrol is not an executable file"),
    ("scontrol not executable", OK, "is not an executable file"),
    ("conf_file relative", dict(OK, conf_file="slurm.conf"), "option conf_file: must be an absolute path"),
    ("timeout 0", dict(OK, timeout=0), "option timeout: must be >= 1"),
    ("timeout NaN", dict(OK, timeout="{{ 'nan' | float }}"), "option timeout: must be a finite number"),
    ("timeout inf", dict(OK, timeout="{{ 'inf' | float }}"), "option timeout: must be a finite number"),
    ("timeout two days", dict(OK, timeout=172800), "option timeout: must be >= 1 and <= 86400"),
    ("poll 0.1", dict(OK, poll=0.1), "option poll: must be >= 0.2"),
    ("scontrol show fails", OK, "scontrol show node failed (rc=1)"),
    ("a line without State", OK, "scontrol show node line 1 has no NodeName= or State="),
    ("a state that is not one", OK, "has state 'idle;rm', not one Slurm writes"),
    ("a node name that is not one", OK, "'lab$5' is not a node name"),
    ("a node Slurm does not know", dict(OK, nodes=["lab5", "lab9"]), "Slurm knows no node lab9"),
    ("scontrol update refused", OK, "scontrol update failed (rc=1): slurm_update error: Invalid node state"),
]
CASES = case_params({"slurm_nodes": TABLE})


def test_the_table_has_at_least_25_cases():
    assert len(TABLE) >= 25


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    assert_refused_prepared(run_prepared(module, TABLE, PREPARE, tmp_path_factory), index, words)
