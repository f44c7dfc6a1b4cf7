"""gear_shift down to gear 2 and up to 3, checked on every lab guest (pytest-testinfra) against the
shift's own record on the controller (its history: which hosts the first shift parked): those were
suspended to RAM once more than prepare noted and are back; the others were never suspended; no
guest has anything of a parking left; and the last shift's record has every host on at gear 3."""

from __future__ import annotations

import json
import os
from pathlib import Path

testinfra_hosts = ["ansible://all"]
GEAR = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "gear"


def _history():
    return [json.loads(line) for line in (GEAR / "history.jsonl").read_text().splitlines()]


def _name(host):
    return host.backend.get_hostname()


def test_two_shifts_recorded_the_last_with_every_host_on():
    down, up = _history()[-2:]
    assert down["gear"] == 2 and down["result"] == "ok", down
    assert up["gear"] == 3 and up["result"] == "ok", up
    parked = sorted(h for h, s in down["power"].items() if s == "asleep")
    assert len(parked) == 2, down["power"]            # one gear group of the six guests
    assert set(up["power"].values()) == {"on"}, up["power"]
    state = json.loads((GEAR / "state.json").read_text())
    assert all(h["state"] == "on" for h in state["hosts"].values())
    # each shift records its own actions only (both ran in one ansible-playbook run)
    assert sorted((a["host"], a["action"]) for a in state["actions"]) == [(h, "up") for h in parked], state["actions"]
    # every group on, one wake batch: each parked guest's magic packets went out during the observation,
    # right after its probe's SYN (gear_shift_wake_during_observation), and the probe still saw it asleep
    # (behind QEMU's user networking the guest greets only once resumed, seconds later): woken by the
    # wave (action up above, by wol), not taken for a host woken by hand
    for a in state["actions"]:
        assert a["method"] == "wol" and "(the first during the observation)" in a["attempts"][0]["report"], a
    assert not (GEAR / "shift.lock").exists()


def test_the_parked_hosts_were_in_s3_and_the_others_never_slept(host):
    parked = _history()[-2]["power"][_name(host)] == "asleep"
    before = int(host.file("/run/fleetnap-molecule/suspend-success").content_string)
    now = int(host.file("/sys/power/suspend_stats/success").content_string)
    assert now == before + (1 if parked else 0), (parked, before, now)


def test_nothing_of_a_parking_is_left(host):
    assert not host.file("/run/systemd/sleep.conf.d/zz-fleetnap-park.conf").exists
    assert not host.file("/run/fleetnap/park-mem_sleep").exists
    assert not host.file("/run/fleetnap/park-made-dirs").exists
