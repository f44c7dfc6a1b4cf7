"""The gear shift's journal as it travels between the jobs of an AWX workflow (module_utils
workflow.py, module gear_journal): a plan made by gear_shift_plan, published, taken by three
slices for their own hosts, their results merged back - and every artifact checked, since an
extra variable can hold anything."""

from __future__ import annotations

import copy
import json
import time

import pytest

from conftest import run_module

from ansible.module_utils.fleetnap import journal, workflow
from ansible.module_utils.fleetnap.validate import ParamError

HOSTS = {"h%d" % n: {"group": (n - 1) % 3 + 1, "state": "on", "up_methods": ["wol"]} for n in range(1, 10)}
_PLANS = {}


def a_plan(gear=1):
    """gear_shift_plan's own result (the module run as Ansible runs it), without Ansible's keys."""
    if gear not in _PLANS:
        res = run_module("gear_shift_plan", {"hosts": HOSTS, "gear": gear, "date": "2026-11-21", "batch_size": 2,
                                             "wake_batch_size": 2})
        assert not res.failed, res
        _PLANS[gear] = dict((k, v) for k, v in res.items() if not k.startswith("_") and k not in ("changed", "invocation"))
    return copy.deepcopy(_PLANS[gear])


def artifact(gear=1, token="wf-1"):
    p = a_plan(gear)
    return workflow.plan_artifact(token, p, {h: {"ssh": True} for h in HOSTS}, "2026-11-29T10:00:00Z", 1.0)


def test_a_plan_is_published_and_cut_into_slices_that_cover_it():
    art = artifact()
    plan = art["plan"]
    assert len(plan["down_hosts"]) == 6 and not plan["up_hosts"]
    names = sorted(HOSTS)
    parts = [workflow.slice_plan(plan, names[i::3]) for i in range(3)]
    assert sorted(h for p in parts for h in p["down_hosts"]) == sorted(plan["down_hosts"])
    for i, p in enumerate(parts):
        mine = set(names[i::3])
        assert {r["host"] for r in p["rows"]} == mine
        assert all(h in mine for b in p["down_batches"] for h in b) and all(p["down_batches"])
        assert set(p["down_methods"]) <= mine and p["counts"]["down"] == len(p["down_hosts"])


def test_a_slice_host_the_plan_does_not_know_is_refused():
    with pytest.raises(ParamError, match="option hosts: stranger not in the plan"):
        workflow.slice_plan(artifact()["plan"], ["h1", "stranger"])


@pytest.mark.parametrize("mutate, words", [
    (lambda a: a.pop("token"), "token: must be the plan job's lease token"),
    (lambda a: a.update(token="../x"), "token: must be the plan job's lease token"),
    (lambda a: a.update(version=2), "version: must be 1"),
    (lambda a: a.update(started_epoch=float("nan")), "started_epoch: must be seconds since the epoch"),
    (lambda a: a.update(started_epoch=True), "started_epoch: must be seconds since the epoch"),
    (lambda a: a["plan"].pop("rows"), "not a plan gear_shift_plan returned (missing: rows)"),
    (lambda a: a["plan"].update(gear="1"), "plan.gear: must be a whole number"),
    (lambda a: a["plan"].update(result="great"), "plan.result: must be one of"),
    (lambda a: a["plan"].update(down_hosts="h1"), "plan.down_hosts: must be a list of host names"),
    (lambda a: a["plan"].update(down_hosts=["nobody"]), "plan.down_hosts: host nobody is not in the plan's rows"),
    (lambda a: a["plan"].update(down_batches=[["h1"], "h2"]), "plan.down_batches[1]: must be a list of host names"),
    (lambda a: a["plan"]["down_methods"].update(h1="explode"), "plan.down_methods.h1: must be one of"),
    (lambda a: a["plan"]["parked_states"].update(h1="melted"), "plan.parked_states.h1: must be one of"),
    (lambda a: a["plan"]["rows"].append(dict(a["plan"]["rows"][0])), "host h1 has two rows"),
    (lambda a: a["plan"].update(back_actions=[{"ok": True}]), "plan.back_actions: must be a list of results"),
    (lambda a: a["observation"].pop("h1"), "observation: no observation of h1"),
    (lambda a: a["observation"].update(h1="up"), "observation.h1: must be an object"),
    (lambda a: a["observation"].update(x={}), "observation: host x is not in the plan's rows"),
    (lambda a: a.update(plan=[]), "plan: must be an object"),
])
def test_a_plan_artifact_is_checked_field_by_field(mutate, words):
    art = copy.deepcopy(artifact())
    mutate(art)
    with pytest.raises(ParamError) as exc:
        workflow.check_plan_artifact(art)
    assert words in str(exc.value)


def slice_art(name, hosts, actions, token="wf-1"):
    return workflow.slice_artifact(token, name, hosts, actions, [a for a in actions if not a["ok"]])


def test_slices_merge_when_they_are_of_this_shift_and_disjoint():
    art = artifact()
    names = sorted(HOSTS)
    slices = {"gear_shift_slice_s%d" % i: slice_art("s%d" % i, names[i::3],
                                                   [{"host": h, "action": "down", "ok": True}
                                                    for h in names[i::3] if h in art["plan"]["down_hosts"]])
              for i in range(3)}
    by_slice, missing = workflow.merge_slices(art, slices)
    assert sorted(by_slice) == ["s0", "s1", "s2"] and not missing
    assert sorted(a["host"] for acts in by_slice.values() for a in acts) == sorted(art["plan"]["down_hosts"])
    # a slice that never published: its hosts are missing, said
    del slices["gear_shift_slice_s1"]
    _, missing = workflow.merge_slices(art, slices)
    assert missing == [h for h in art["plan"]["down_hosts"] if h in names[1::3]]


@pytest.mark.parametrize("make, words", [
    (lambda: {"k": slice_art("s0", ["h1"], [], token="wf-0")}, "belongs to another shift (lease wf-0"),
    (lambda: {"a": slice_art("s0", ["h1"], []), "b": slice_art("s1", ["h1"], [])}, "h1 is also a host of slice s0"),
    (lambda: {"a": slice_art("s0", ["h1"], []), "b": slice_art("s0", ["h2"], [])}, "a second slice named s0"),
    (lambda: {"k": slice_art("s0", ["zz"], [])}, "zz is not in the plan"),
    (lambda: {"k": slice_art("s0", ["h1"], [{"host": "h2", "ok": True}])}, "host h2 is not one of the slice's hosts"),
    (lambda: {"k": slice_art("s0", ["h1"], [{"host": "h1", "ok": "yes"}])}, "has no ok (true or false)"),
    (lambda: {"k": slice_art("s-0", ["h1"], [])}, "slice: must be a slice name"),
    (lambda: {"k": "done"}, "option slices.k: must be an object"),
    (lambda: [], "option slices: must be an object"),
])
def test_a_bad_slice_artifact_is_refused_naming_it(make, words):
    with pytest.raises(ParamError) as exc:
        workflow.merge_slices(artifact(), make())
    assert words in str(exc.value)


def lease(lock, token="wf-1"):
    lock.write_text(json.dumps({"token": token, "since": "2026-11-29T10:00:00Z", "expires": int(time.time()) + 600}))


def test_the_module_end_to_end_plan_slices_record_journal(tmp_path):
    """publish_plan under the plan job's lease; take_plan and publish_slice in three slices, each
    with a state directory and lock of its own; take_slices into the plan job's journal (once:
    a second record job run writes nothing twice)."""
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    lock, state = plan_dir / "shift.lock", plan_dir / "state.json"
    lease(lock)
    p = a_plan()
    doc = {"hosts": {}}
    journal.begin(doc, "lease/wf-1", p, "2026-11-29T10:00:00Z")       # what gear_shift_plan wrote
    state.write_text(json.dumps(doc))
    obs = {h: {"ssh": True} for h in HOSTS}
    pub = run_module("gear_journal", {"action": "publish_plan", "lock_file": str(lock), "plan": p, "observation": obs,
                                      "started": "2026-11-29T10:00:00Z", "started_epoch": 1.0})
    assert not pub.failed and pub["artifact"]["token"] == "wf-1", pub
    names, slices = sorted(HOSTS), {}
    for i in range(3):
        node = tmp_path / ("node%d" % i)
        node.mkdir()
        mine = names[i::3]
        (node / "shift.lock").write_text(json.dumps({"token": "local%d" % i, "expires": int(time.time()) + 600}))
        took = run_module("gear_journal", {"action": "take_plan", "journal": pub["artifact"], "hosts": mine,
                                           "state_file": str(node / "state.json"),
                                           "lock_file": str(node / "shift.lock")})
        assert not took.failed and took["changed"] and {r["host"] for r in took["plan"]["rows"]} == set(mine), took
        again = run_module("gear_journal", {"action": "take_plan", "journal": pub["artifact"], "hosts": mine,
                                            "state_file": str(node / "state.json"),
                                            "lock_file": str(node / "shift.lock")})
        assert not again.failed and not again["changed"]     # the slice's journal was begun already
        assert set(took["observation"]) == set(mine)
        # the wake/down phases write the slice's journal (gear_state); one host's park fails in slice 1
        results = [{"host": h, "action": "down", "ok": not (i == 1 and h == mine[0]), "msg": "x"}
                   for h in took["plan"]["down_hosts"]]
        st = run_module("gear_state", {"path": str(node / "state.json"), "event": "after_down",
                                       "hosts": took["plan"]["down_hosts"], "results": results,
                                       "lock_file": str(node / "shift.lock")})
        assert not st.failed, st
        out = run_module("gear_journal", {"action": "publish_slice", "state_file": str(node / "state.json"),
                                          "lock_file": str(node / "shift.lock"), "hosts": mine, "lease_id": "wf-1",
                                          "slice": "s%d" % i})
        assert not out.failed, out
        assert len(out["artifact"]["actions"]) == len(results)
        # the slice's own failures, said (its job fails with them)
        assert (out["reason"] == "") == (i != 1) and (i != 1 or mine[0] in out["reason"]), out["reason"]
        slices["gear_shift_slice_s%d" % i] = out["artifact"]
    rec = run_module("gear_journal", {"action": "take_slices", "journal": pub["artifact"], "slices": slices,
                                      "state_file": str(state), "lock_file": str(lock)})
    assert not rec.failed and rec["changed"] and rec["stop"] and rec["slices"] == ["s0", "s1", "s2"], rec
    assert "failed" in rec["reason"] and not rec["missing"]
    doc = json.loads(state.read_text())
    assert len(journal.actions(doc, "lease/wf-1")) == len(p["down_hosts"])
    again = run_module("gear_journal", {"action": "take_slices", "journal": pub["artifact"], "slices": slices,
                                        "state_file": str(state), "lock_file": str(lock)})
    assert not again.failed and not again["changed"]
    assert json.loads(state.read_text())["in_progress"]["actions"] == doc["in_progress"]["actions"]


def test_the_record_refuses_a_lease_that_changed_hands_or_a_journal_elsewhere(tmp_path):
    lock, state = tmp_path / "shift.lock", tmp_path / "state.json"
    art = artifact()
    lease(lock, token="someone-else")
    res = run_module("gear_journal", {"action": "take_slices", "journal": art, "slices": {}, "state_file": str(state),
                                      "lock_file": str(lock)})
    assert res.failed and "held by the lease someone-else, not this shift's wf-1" in res["msg"]
    lease(lock)
    res = run_module("gear_journal", {"action": "take_slices", "journal": art, "slices": {}, "state_file": str(state),
                                      "lock_file": str(lock)})
    assert res.failed and "holds no plan of the shift lease/wf-1" in res["msg"]
    assert not state.exists()
    res = run_module("gear_journal", {"action": "publish_plan", "lock_file": str(tmp_path / "none.lock"),
                                      "plan": art["plan"], "observation": art["observation"], "started": "x",
                                      "started_epoch": 1.0})
    assert res.failed and "is not held by a lease" in res["msg"]
