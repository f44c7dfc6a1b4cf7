"""shift_lock under contention: several takers at the same moment, many rounds, exactly one owner
each round; starting from no lock, a stale lock (dead owner), a zombie owner's lock and an
unreadable lock. The module file runs as Ansible runs it on the controller (python3 MODULE ARGS),
so hundreds of takes cost seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO

MODULE = REPO / "library" / "shift_lock.py"
TAKERS = 4
ROUNDS = 30


# The module as Ansible runs it on the controller, with fleetnap's module_utils importable.
BOOT = ("import sys, runpy, ansible.module_utils as mu; mu.__path__.append(%r); "
        "runpy.run_path(%r, run_name='__main__')" % (str(REPO / "module_utils"), str(MODULE)))


def take(args_file):
    proc = subprocess.run([sys.executable, "-c", BOOT, str(args_file)], capture_output=True, text=True,
                          timeout=60)
    out = proc.stdout[proc.stdout.index("{"):] if "{" in proc.stdout else "{}"
    return json.loads(out), proc


@pytest.fixture
def owners():
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(TAKERS)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def _zombie():
    """A child that has exited and is not reaped: a zombie pid (returned with its Popen)."""
    child = subprocess.Popen(["true"])
    for _ in range(200):
        with open("/proc/%d/stat" % child.pid) as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return child
        time.sleep(0.01)
    raise AssertionError("no zombie")


def test_exactly_one_owner_each_round(tmp_path, owners):
    lock = tmp_path / "gear" / "shift.lock"
    args = []
    for pid in owners:
        f = tmp_path / ("args-%d.json" % pid)
        f.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(lock), "pid": pid, "purpose": "race"}}))
        args.append(f)
    dead = subprocess.Popen(["true"])
    dead.wait()
    zombie = _zombie()
    starts = {
        "no lock": None,
        "stale lock": json.dumps({"pid": dead.pid, "start_time": 1, "cmdline": ["gone"]}),
        "zombie owner": json.dumps({"pid": zombie.pid, "start_time": int(
            open("/proc/%d/stat" % zombie.pid).read().rsplit(")", 1)[1].split()[19])}),
        "empty lock": "",
        "not UTF-8": b"\xff\xfe{",
    }
    tally = {}
    try:
        with ThreadPoolExecutor(max_workers=TAKERS) as pool:
            for rnd in range(ROUNDS):
                name, content = list(starts.items())[rnd % len(starts)]
                if lock.exists():
                    lock.unlink()
                if content is not None:
                    lock.parent.mkdir(parents=True, exist_ok=True)
                    lock.write_bytes(content if isinstance(content, bytes) else content.encode())
                results = list(pool.map(take, args))
                winners = [r for r, _p in results if r.get("held") and not r.get("failed")]
                for r, proc in results:
                    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
                    assert r.get("held") or "another" in r.get("msg", ""), r
                assert len(winners) == 1, (rnd, name, [r for r, _p in results])
                on_disk = json.loads(lock.read_text())
                assert on_disk["pid"] == winners[0]["owner"]["pid"], (rnd, name)
                tally[name] = tally.get(name, 0) + 1
    finally:
        zombie.wait()
    assert set(tally) == set(starts) and sum(tally.values()) == ROUNDS
    # No temporary file left behind (the lock's are .fleetnap-XXXXXXXX beside it; once shift.lock.new.PID).
    assert not [p.name for p in lock.parent.iterdir() if p.name.startswith(".fleetnap-") or ".new." in p.name]
