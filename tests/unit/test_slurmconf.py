"""slurmconf: slurm.conf's power-saving block from the gear history's measured parks and wakes."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.fleetnap import hostlist as hl
from ansible.module_utils.fleetnap import slurmconf as sc
from ansible.module_utils.fleetnap.energy import MAX_LINE
from conftest import REPO, run_module

GROUPS = {"lab1": 1, "lab2": 2, "lab3": 3, "lab4": 1, "lab5": 2, "lab6": 3}


def line(finished, duration, took):
    return json.dumps({"gear": 1, "target_gear": 1, "requested_gear": 1, "result": "ok", "started": finished,
                       "finished": finished, "duration_s": duration, "power": {}, "took": took})


def took(action, seconds, ok=True, method="wol"):
    return {"action": action, "ok": ok, "method": method, "elapsed_s": seconds}


HISTORY = [
    # down: four parked in 40 s (6/min)
    line("2026-11-27T10:00:00+00:00", 40.0, {h: took("down", s, method="suspend") for h, s in
                                             (("lab2", 8.0), ("lab3", 9.5), ("lab5", 7.0), ("lab6", 12.25))}),
    # up: three woken in 90 s (2/min); lab6's wake failed (not a measurement of a wake)
    line("2026-11-27T11:00:00+00:00", 90.0, {"lab2": took("up", 40.0), "lab3": took("up", 58.2, method="ipmi"),
                                             "lab5": took("up", 35.0), "lab6": took("up", 300.0, ok=False)}),
    # a line written before ``took`` existed
    json.dumps({"finished": "2026-11-26T09:00:00+00:00", "duration_s": 10, "power": {}}),
]


def test_the_block_from_measurements_names_each_source():
    shifts = sc.read_shifts(HISTORY, "history.jsonl")
    assert [s["finished"][:13] for s in shifts] == ["2026-11-26T09", "2026-11-27T10", "2026-11-27T11"]
    text, values = sc.block(GROUPS, 1, "/usr/local/lib/fleetnap-slurm", shifts, source="history.jsonl")
    lines = text.splitlines()
    assert lines[0] == "# fleetnap: Slurm power saving for 6 hosts (at least 2 kept up), from 3 gear shift(s) in history.jsonl"
    assert "SuspendProgram=/usr/local/lib/fleetnap-slurm/fleetnap-slurm-suspend" in lines
    assert "ResumeProgram=/usr/local/lib/fleetnap-slurm/fleetnap-slurm-resume" in lines
    assert "ResumeFailProgram=/usr/local/lib/fleetnap-slurm/fleetnap-slurm-resume-fail" in lines
    # (58.2 + 30) x 1.5 = 132.3 -> 133; the worst verified wake, not lab6's failed 300 s
    assert values["ResumeTimeout"] == 133 and "ResumeTimeout=133" in lines
    assert ("# ResumeTimeout: (worst measured wake 58.2 s, lab3 by ipmi in the shift of 2026-11-27T11:00:00+00:00, "
            "+ slurmd start 30 s, a setting) x 1.5") in lines
    assert "#   no wake measured for lab1,lab4,lab6" in lines     # lab1 and lab4 too: their group's day comes
    # 12.25 x 1.5 = 18.375 -> 19
    assert values["SuspendTimeout"] == 19 and "SuspendTimeout=19" in lines
    assert "# SuspendTimeout: worst measured park 12.2 s (lab6 by suspend in the shift of 2026-11-27T10:00:00+00:00) x 1.5" in lines
    assert values["ResumeRate"] == 2 and values["SuspendRate"] == 6
    assert "# ResumeRate: the slowest measured shift, 3 host(s) in 90.0 s (2026-11-27T11:00:00+00:00)" in lines
    # gmin 1 of 3 groups of two, rotated daily: any host may be parked, two of them always stay up
    hosts, count = values["SuspendExcNodes"].rsplit(":", 1)
    assert hl.expand(hosts) == sorted(GROUPS) and count == "2"
    assert "SuspendExcNodes=%s" % values["SuspendExcNodes"] in lines
    assert values["Weight"] == GROUPS
    assert [ln for ln in lines if ln.startswith("#   Weight=")] == [
        "#   Weight=1: lab1,lab4", "#   Weight=2: lab2,lab5", "#   Weight=3: lab3,lab6"]
    # every value line follows a comment that says where it came from
    for i, ln in enumerate(lines):
        if ln.startswith(("ResumeTimeout=", "SuspendTimeout=", "ResumeRate=", "SuspendRate=", "SuspendExcNodes=")):
            assert lines[i - 1].startswith("#"), ln


def test_nothing_measured_uses_the_settings_and_says_so():
    text, values = sc.block(GROUPS, 1, "/p", [], resume_timeout_s=700, suspend_timeout_s=200)
    assert values["ResumeTimeout"] == 700 and values["SuspendTimeout"] == 200
    assert "# ResumeTimeout: no wake measured yet: the setting (700 s)" in text.splitlines()
    assert "# SuspendTimeout: no park measured yet: the setting (200 s)" in text.splitlines()
    assert "ResumeRate" not in values and "SuspendRate" not in values
    assert "# ResumeRate: not measured (no shift woke hosts yet): Slurm's default" in text.splitlines()
    assert not any(ln.startswith(("ResumeRate=", "SuspendRate=")) for ln in text.splitlines())


def test_the_daily_rotation_parks_every_group_so_every_hosts_wake_counts_and_names_sort_naturally():
    """Group 1 (n2, n10) stays up in gear 1 only on the days the rotation keeps it: on the others it
    is parked like any group, so its 500 s wake is Slurm's ResumeTimeout too (gear.groups_for: the
    group kept in gear 1 changes from day to day)."""
    from datetime import date, timedelta
    from ansible.module_utils.fleetnap.gear import groups_for
    kept = set(tuple(groups_for(1, 2, date(2026, 11, 28) + timedelta(days=d))[0]) for d in range(2))
    assert kept == {(1,), (2,)}
    groups = {"n%d" % i: (1 if i in (2, 10) else 2) for i in range(1, 12)}
    shifts = sc.read_shifts([line("2026-11-27T11:00:00Z", 60, {"n2": took("up", 500.0), "n3": took("up", 20.0)})])
    _, values = sc.block(groups, 1, "/p", shifts, slurmd_start_s=0, margin=1)
    assert values["ResumeTimeout"] == 500
    # the kept group holds 2 hosts one day, 9 the next: Slurm keeps 9 up, never fewer than the shift does
    assert values["SuspendExcNodes"] == "n[1-11]:9"
    assert values["measured"]["unmeasured"] == ["n1"] + ["n%d" % i for i in range(4, 12)]


def test_gmin_that_keeps_every_group_up_leaves_slurm_nothing():
    with pytest.raises(sc.ConfError, match="gmin 3 keeps all 3 gear groups up: nothing for Slurm to power down"):
        sc.block(GROUPS, 3, "/p", [])
    _, values = sc.block(GROUPS, 2, "/p", [])
    assert values["SuspendExcNodes"].endswith(":4")
    text, values = sc.block(GROUPS, 0, "/p", [])
    assert "SuspendExcNodes" not in values and not any(ln.startswith("SuspendExcNodes=") for ln in text.splitlines())
    assert "# SuspendExcNodes: none (gmin 0: the gear shift keeps no gear group up)" in text.splitlines()


@pytest.mark.parametrize("bad,words", [
    ("{", "h.jsonl line 2 is not valid JSON"),
    ("[1]", "line 2: expected a JSON object"),
    (json.dumps({"finished": "yesterday", "duration_s": 1}), "line 2: finished: 'yesterday' is not an ISO time"),
    (json.dumps({"finished": "2026-11-27T11:00:00+02:00", "duration_s": 1}), "is not a UTC time"),
    (json.dumps({"finished": "0001-01-01T00:00:00Z", "duration_s": 1}), "line 2: finished is outside 2000-01-01"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": -1}), "duration_s must be seconds"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": True}), "duration_s must be seconds"),
    ('{"finished": "2026-11-27T11:00:00Z", "duration_s": NaN}', "NaN"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": 1, "took": []}), "took must map hosts"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": 1, "took": {"a": {"action": "sideways", "ok": True}}}),
     "took[a]: must have action (up or down) and ok"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": 1, "took": {"a": took("up", 1e9)}}),
     "took[a]: elapsed_s must be seconds between 0 and 86400"),
    (json.dumps({"finished": "2026-11-27T11:00:00Z", "duration_s": 1, "took": {"a": took("up", "5")}}),
     "took[a]: elapsed_s must be seconds"),
    ("x" * (MAX_LINE + 1), "longer than"),
])
def test_a_bad_history_line_is_named(bad, words):
    with pytest.raises(sc.ConfError) as exc:
        sc.read_shifts(["", bad], "h.jsonl")
    assert words in str(exc.value)
    assert "h.jsonl line 2" in str(exc.value)


def test_no_host_that_may_be_parked_is_refused():
    with pytest.raises(sc.ConfError, match="nothing for Slurm to power down"):
        sc.block({"a": 1}, 1, "/p", [])
    with pytest.raises(sc.ConfError, match="no hosts"):
        sc.block({}, 1, "/p", [])


def test_the_module_writes_the_block_once_and_check_and_diff_are_honest(tmp_path):
    hist = tmp_path / "history.jsonl"
    hist.write_text("\n".join(HISTORY) + "\n")
    dest = tmp_path / "fleetnap-power.conf"
    args = {"gear_groups": GROUPS, "history_file": str(hist), "dest": str(dest)}
    r = run_module("slurm_conf", args, check=True, diff=True)
    assert r["changed"] and not dest.exists() and r["diff"]["before"] == "" and "ResumeTimeout=133" in r["diff"]["after"]
    r = run_module("slurm_conf", args)
    assert r["changed"] and dest.read_text() == r["block"] and r["values"]["ResumeTimeout"] == 133
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    again = run_module("slurm_conf", args, diff=True)
    assert not again["changed"] and again["block"] == r["block"]
    assert run_module("slurm_conf", dict(args, dest=None))["block"] == r["block"]    # no dest: only returned
    assert (REPO / "library" / "slurm_conf.py").exists()
