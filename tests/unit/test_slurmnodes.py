"""slurmnodes: Slurm's node states read, what a shift through Slurm asks, and when a node is there.
The state strings are the ones Debian 12's slurmctld (22.05.8) showed in the lab."""

from __future__ import annotations

import pytest

from ansible.module_utils.fleetnap import hostlist
from ansible.module_utils.fleetnap.slurmnodes import SlurmError, decide, parse_nodes, reached, update_argv


def st(state, reason=""):
    parts = state.split("+")
    return {"state": parts[0], "flags": parts[1:], "reason": reason}


def test_scontrol_show_node_lines_are_read_with_state_flags_and_reason():
    text = ("NodeName=lab4 Arch=x86_64 CPUTot=1 State=IDLE+POWERED_DOWN ThreadsPerCore=1 Partitions=warm\n"
            "\n"
            "NodeName=lab5 Arch=x86_64 State=DOWN+POWER_DOWN+NOT_RESPONDING ThreadsPerCore=1 "
            "Reason=fleetnap: lab5 did not come back: wol   failed [root@2026-11-28T19:34:12]\n"
            "NodeName=lab6 State=MIXED* Partitions=cold\n")
    nodes = parse_nodes(text)
    assert nodes["lab4"] == {"state": "IDLE", "flags": ["POWERED_DOWN"], "reason": ""}
    assert nodes["lab5"]["flags"] == ["POWER_DOWN", "NOT_RESPONDING"]
    assert nodes["lab5"]["reason"] == "fleetnap: lab5 did not come back: wol failed [root@2026-11-28T19:34:12]"
    assert nodes["lab6"] == {"state": "MIXED", "flags": [], "reason": ""}      # '*': not responding, kept out


@pytest.mark.parametrize("text,words", [
    ("NodeName=lab4 Arch=x86_64\n", "no NodeName= or State="),
    ("State=IDLE\n", "no NodeName= or State="),
    ("NodeName=lab4 State=idle\n", "not one Slurm writes"),
    ("NodeName=lab4 State=IDLE+$(x)\n", "not one Slurm writes"),
    ("NodeName=-x State=IDLE\n", "is not a node name"),
])
def test_lines_that_are_not_scontrols_are_refused(text, words):
    with pytest.raises(SlurmError, match=None) as exc:
        parse_nodes(text)
    assert words in str(exc.value)


def test_too_many_nodes_are_refused():
    with pytest.raises(SlurmError, match="more than 2 nodes"):
        parse_nodes("".join("NodeName=n%d State=IDLE\n" % i for i in range(3)), limit=2)


def test_power_down_asks_only_idle_nodes_and_never_one_slurm_counts_as_busy_down_or_draining():
    states = {"idle": st("IDLE"), "off": st("IDLE+POWERED_DOWN"), "going": st("IDLE+POWERING_DOWN"),
              "asked": st("IDLE+DRAIN+POWER_DOWN"), "busy": st("ALLOCATED"), "mixed": st("MIXED"),
              "down": st("DOWN", "Not responding"), "drain": st("IDLE+DRAIN"), "waking": st("IDLE+POWERING_UP")}
    ask, wait, done, skipped = decide("power_down", list(states), states)
    assert ask == ["idle"] and wait == ["going", "asked"] and done == ["off"]
    assert sorted(skipped) == ["busy", "down", "drain", "mixed", "waking"]
    assert skipped["busy"] == "Slurm runs jobs on it (ALLOCATED): not asked to power down"
    assert skipped["down"] == "Slurm has it DOWN (Not responding): not asked to power down"
    ask, _w, _d, skipped = decide("power_down", list(states), states, include_busy=True)
    assert ask == ["idle", "busy", "mixed"] and "busy" not in skipped


def test_power_up_asks_powered_down_nodes_and_leaves_up_ones():
    states = {"off": st("IDLE+POWERED_DOWN"), "downoff": st("DOWN+POWERED_DOWN"), "waking": st("IDLE+POWERING_UP"),
              "up": st("IDLE"), "busy": st("ALLOCATED"), "down": st("DOWN")}
    ask, wait, done, skipped = decide("power_up", list(states), states)
    assert ask == ["off", "downoff"] and wait == ["waking"] and done == ["up", "busy"]
    assert skipped == {"down": "Slurm has it DOWN: not asked to power up"}


def test_a_node_slurm_does_not_know_refuses_the_whole_call():
    with pytest.raises(SlurmError, match="Slurm knows no node lab9"):
        decide("power_down", ["lab1", "lab9"], {"lab1": st("IDLE")})


@pytest.mark.parametrize("action,state,expect", [
    ("power_down", "IDLE+POWERED_DOWN", True),
    ("power_down", "IDLE+DRAIN+POWER_DOWN", False),
    ("power_down", "IDLE+POWERING_DOWN", False),
    ("power_down", "IDLE", False),
    ("power_down", "DOWN", "Slurm has it DOWN"),
    ("power_down", "DOWN+POWERED_DOWN", True),
    ("power_up", "IDLE", True),
    ("power_up", "MIXED", True),
    ("power_up", "IDLE+POWERING_UP", False),
    ("power_up", "ALLOCATED+POWERING_UP", False),
    ("power_up", "IDLE+POWERED_DOWN", False),
    ("power_up", "DOWN+POWER_DOWN+NOT_RESPONDING", "Slurm has it DOWN+POWER_DOWN+NOT_RESPONDING"),
    ("power_up", "DOWN", "Slurm has it DOWN"),
])
def test_when_a_node_is_there(action, state, expect):
    assert reached(action, st(state)) == expect


def test_one_update_for_every_node_asked():
    argv = update_argv("/usr/bin/scontrol", "power_down", ["lab4", "lab5", "lab6"], hostlist.compress)
    assert argv[:2] == ["/usr/bin/scontrol", "update"] and argv[3] == "state=POWER_DOWN_ASAP"
    assert hostlist.expand(argv[2].split("=", 1)[1]) == ["lab4", "lab5", "lab6"]
    assert update_argv("s", "power_up", ["n1"], hostlist.compress)[-1] == "state=POWER_UP"
