"""Issue 33: no writer of a controller record writes through a link planted at a temporary name.

The lock (shiftlock.create), the state file and the power figures (fileio.atomic_write, as
gear_state and gear_energy call it) and gear_record's journal of one call (gearrecord.Writes)
create their temporary files with tempfile.mkstemp in the target's directory. Which names a
writer could choose is decided by tempfile's name generator: here it is made to offer a known
sequence, and a link to a victim file is planted at EVERY name of that sequence but the last (and
at the old predictable name PATH.new.PID). The writer must skip every planted name (O_EXCL never
opens an existing link), the victim must be byte for byte as it was, and no temporary file may
stay behind. The generator is the only thing replaced; every file operation is real.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile

import pytest

from ansible.module_utils.fleetnap import fileio, gearrecord, shiftlock

NAMES = ["planted%03d" % i for i in range(40)] + ["free0001"]


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """(directory, victim): links to the victim at .fleetnap-NAME for every NAME but the last."""
    gear = tmp_path / "gear"
    gear.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim, as it was\n")
    for name in NAMES[:-1]:
        (gear / (".fleetnap-" + name)).symlink_to(victim)
    for pid in range(os.getpid() - 50, os.getpid() + 50):         # the old PATH.new.PID names
        (gear / ("shift.lock.new.%d" % pid)).symlink_to(victim)

    def names():
        return iter(NAMES)
    monkeypatch.setattr(tempfile, "_get_candidate_names", names)
    return gear, victim


def _left(gear):
    """Temporary files left behind: anything but the planted links, the targets and the guard."""
    return sorted(p.name for p in gear.iterdir() if not p.is_symlink()
                  and p.name not in ("shift.lock", "state.json", "power_w.json", "history.jsonl", "shift.lock.guard"))


def test_lock_is_not_written_through_a_planted_link(planted):
    gear, victim = planted
    me = {"pid": os.getpid(), "start_time": 1, "cmdline": ["ansible-playbook"], "since": "x", "purpose": ""}
    assert shiftlock.create(str(gear / "shift.lock"), me) is True
    assert victim.read_text() == "the victim, as it was\n"
    assert json.loads((gear / "shift.lock").read_text())["pid"] == os.getpid()
    assert not (gear / "shift.lock").is_symlink()
    assert _left(gear) == []


def test_state_file_is_not_written_through_a_planted_link(planted):
    gear, victim = planted
    assert fileio.atomic_write(str(gear / "state.json"), '{"hosts": {}}\n', 0o644, str(gear)) is True
    assert victim.read_text() == "the victim, as it was\n"
    assert (gear / "state.json").read_text() == '{"hosts": {}}\n'
    assert _left(gear) == []


def test_journal_of_gear_record_is_not_written_through_a_planted_link(planted):
    gear, victim = planted
    w = gearrecord.Writes()
    w.replace(str(gear / "state.json"), None, '{"gear": 1}\n')
    w.append(str(gear / "history.jsonl"), '{"gear": 1}\n')
    w.replace(str(gear / "power_w.json"), None, "{}\n")
    assert victim.read_text() == "the victim, as it was\n"
    assert _left(gear) == []
    assert w.rollback() == []                      # and undone: nothing of the call is left
    assert not (gear / "state.json").exists() and not (gear / "history.jsonl").exists()
    assert victim.read_text() == "the victim, as it was\n"


def test_every_name_planted_is_a_clear_error_and_the_victim_is_untouched(tmp_path, monkeypatch):
    """When every name the generator offers is taken by a link, the lock is not created, the
    error names the lock, and the victim is untouched."""
    gear = tmp_path / "gear"
    gear.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("as it was\n")
    for name in NAMES:
        (gear / (".fleetnap-" + name)).symlink_to(victim)
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: itertools.cycle(NAMES))
    with pytest.raises(shiftlock.LockError, match="cannot create lock .*shift.lock"):
        shiftlock.create(str(gear / "shift.lock"), {"pid": 1})
    assert victim.read_text() == "as it was\n"
    assert not (gear / "shift.lock").exists()
