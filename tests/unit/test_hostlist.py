"""Slurm hostlist expressions (issue 37): module_utils/fleetnap/hostlist.py against the real
``scontrol show hostnames`` of Debian 12's Slurm (22.05, package slurm-client) on the same
expressions; broken ones refused (also where Slurm makes up names), bounds kept."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from ansible.module_utils.fleetnap.hostlist import MAX_NAMES, HostlistError, compress, expand, unique

VALID = ["node[1-3,7-8]", "node[3,1]", "n[01-03]", "a[1-2]b[3-4]", "node1,node1", "x[8-11]",
         "r[1-2]-n[001-002],login", "n[0-0]", "a,b,,c", "n[009-011]", "n[9-011]", "n[1-2] m1",
         "n[1-2],n[2-3]", "[1-2]", "n[0001-3]", "n[1-3,5]y[1-2]", " n1", "n1,", "gpu-a_1.x[10-12]",
         "node[98-102]", "c[1-2]r[1-2]n[1-2]", "a[1-2]b[1-2]c[1-2]d[1-2]", "a[1-3]b[1-3]c[1-2]", "a[1-2]b[1-3]", "a\tb[1-2]"]
# Slurm refuses these too ("Invalid hostlist")
REFUSED_BY_BOTH = ["node[3-1]", "n[1-2]x", "n[1-3]:2", "n[]", "n[a-b]", "n[-1]", "n[1-2]]", "n[[1-2]]"]
# Slurm makes up names for these (node[1-3 -> "node]", n[1-] -> n1, n[1,2 -> "n]" "2"); refused here
LENIENT_IN_SLURM = ["node[1-3", "n[1-]", "n[1,2"]


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory):
    binary = shutil.which("scontrol")
    if not binary:
        pytest.skip("scontrol (Debian package slurm-client, installed by make setup) is missing")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=fleetnap\nSlurmctldHost=localhost\nNodeName=node1 CPUs=1 State=UNKNOWN\n"
                    "PartitionName=p Nodes=node1 Default=YES\n")

    def show(expr):
        proc = subprocess.run([binary, "show", "hostnames", expr], capture_output=True, text=True,
                              env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}, timeout=30)
        out = proc.stdout + proc.stderr
        if "Invalid hostlist" in out or "Invalid range" in out:
            return None
        return proc.stdout.split()
    return show


@pytest.mark.parametrize("expr", VALID)
def test_expand_gives_what_scontrol_gives(scontrol, expr):
    assert expand(expr) == scontrol(expr)


@pytest.mark.parametrize("expr", REFUSED_BY_BOTH)
def test_what_slurm_refuses_is_refused(scontrol, expr):
    assert scontrol(expr) is None
    with pytest.raises(HostlistError):
        expand(expr)


@pytest.mark.parametrize("expr", LENIENT_IN_SLURM)
def test_a_broken_expression_slurm_makes_names_of_is_refused(scontrol, expr):
    made_up = scontrol(expr)
    assert made_up, expr                        # Slurm acts on something...
    with pytest.raises(HostlistError) as err:
        expand(expr)                            # ...this module does not
    assert repr(expr) in str(err.value)


def test_compress_round_trips_and_scontrol_reads_it_back(scontrol):
    rnd = random.Random(37)
    for _ in range(40):
        names = unique(rnd.choice(["node%d" % rnd.randint(1, 40), "n%03d" % rnd.randint(90, 110),
                                   "r%d-c%d" % (rnd.randint(1, 3), rnd.randint(1, 12)), "login",
                                   "gpu%02d" % rnd.randint(1, 12)]) for _ in range(rnd.randint(1, 30)))
        text = compress(names)
        assert expand(text) == names, text
        assert scontrol(text) == names, text


def test_names_with_long_numbers_and_long_runs_round_trip_or_are_refused(scontrol):
    long_numbers = ["host-2026112700000000001", "host-2026112700000000002"]
    assert expand(compress(long_numbers)) == long_numbers == scontrol(compress(long_numbers))
    assert expand(compress(["n9", "n10", "n09", "n1", "n01"])) == ["n9", "n10", "n09", "n1", "n01"]
    with pytest.raises(HostlistError):
        compress(["n%d" % i for i in range(MAX_NAMES + 1)])


@pytest.mark.parametrize("expr", ["n1\nn[2-3]", "n1\rn2", "n1\x0bn2", "n1\u00a0n2"])
def test_white_space_slurm_does_not_split_on_is_refused(scontrol, expr):
    with pytest.raises(HostlistError):
        expand(expr)


def test_names_are_kept_in_order_and_unique_drops_repeats():
    assert unique(expand("n[1-3],n2,n[1-2]")) == ["n1", "n2", "n3"]
    assert compress(["n3", "n1", "n2"]) == "n3,n[1-2]"


@pytest.mark.parametrize("bad, words", [
    (None, "a hostlist must be text"),
    (["n1"], "a hostlist must be text"),
    ("x" * 70000, "more than 65536 characters"),
    ("n[1-%d]" % (MAX_NAMES + 1), "more than 65536 names"),
    ("a[1-300]b[1-300]", "more than 65536 names"),
    ("n[1-99999999999999999999]", "is not a number or a range"),
    ("n;reboot", "is not a node name"),
    ("n$(id)", "is not a node name"),
    ("n[1 -2]", "white space inside a bracket"),
    ("n[1\t-2]", "white space inside a bracket"),
    ("n'1", "is not a node name"),
])
def test_bad_expressions_are_refused_naming_what_is_wrong(bad, words):
    with pytest.raises(HostlistError) as err:
        expand(bad)
    assert words in str(err.value)


@pytest.mark.parametrize("bad", [[""], ["n 1"], [1], ["n;x"]])
def test_compress_refuses_what_is_not_a_node_name(bad):
    with pytest.raises(HostlistError):
        compress(bad)
