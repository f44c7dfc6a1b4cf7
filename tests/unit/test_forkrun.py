"""tests/forkrun.py, the runner of most bad-input tables: a module's result, an escaped exception
(a traceback on the case's stderr, as Ansible's MODULE FAILURE), a hang (killed at the bound, with
what it started), check mode and peak memory each come back for what they are."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MODULES = {
    "fr_ok": """
        from ansible.module_utils.basic import AnsibleModule
        m = AnsibleModule(argument_spec=dict(n=dict(type="int", required=True)), supports_check_mode=True)
        m.exit_json(changed=not m.check_mode, doubled=2 * m.params["n"])
    """,
    "fr_crash": """
        from ansible.module_utils.basic import AnsibleModule
        m = AnsibleModule(argument_spec=dict())
        raise ValueError("escaped the module")
    """,
    "fr_hang": """
        import subprocess, time
        from ansible.module_utils.basic import AnsibleModule
        m = AnsibleModule(argument_spec=dict(pidfile=dict(type="str")))
        p = subprocess.Popen(["sleep", "600"])
        open(m.params["pidfile"], "w").write(str(p.pid))
        time.sleep(600)
    """,
    "fr_big": """
        from ansible.module_utils.basic import AnsibleModule
        m = AnsibleModule(argument_spec=dict())
        blob = bytearray(120 * 1024 * 1024)
        m.exit_json(changed=False, size=len(blob))
    """,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    lib = tmp_path_factory.mktemp("library")
    for name, body in MODULES.items():
        (lib / (name + ".py")).write_text(textwrap.dedent(body))
    scratch = tmp_path_factory.mktemp("scratch")
    server = subprocess.Popen([sys.executable, str(REPO / "tests/forkrun.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def one(module, args=None, **kw):
        req = dict({"module": module, "args": args or {}, "scratch": str(scratch), "library": str(lib),
                    "timeout": 30}, **kw)
        server.stdin.write(json.dumps(req) + "\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())
    yield one
    server.stdin.close()
    assert server.wait(timeout=30) == 0


def test_a_result_and_check_mode_come_back(run):
    out = run("fr_ok", {"n": 21})
    assert out["rc"] == 0 and not out["killed"] and out["stderr"] == ""
    assert json.loads(out["stdout"])["doubled"] == 42 and json.loads(out["stdout"])["changed"] is True
    assert json.loads(run("fr_ok", {"n": 1}, check_mode=True)["stdout"])["changed"] is False


def test_the_argument_spec_refuses_as_under_ansible(run):
    out = run("fr_ok", {"n": "many"})
    res = json.loads(out["stdout"])
    assert out["rc"] == 1 and res["failed"] and "n" in res["msg"] and "int" in res["msg"]


def test_an_escaped_exception_is_a_traceback_on_stderr(run):
    out = run("fr_crash")
    assert out["rc"] == 1 and "Traceback" in out["stderr"] and "escaped the module" in out["stderr"]


def test_a_hang_is_killed_at_the_bound_with_what_it_started(run, tmp_path):
    pidfile = tmp_path / "pid"
    out = run("fr_hang", {"pidfile": str(pidfile)}, timeout=2)
    assert out["killed"] and 2 <= out["elapsed_s"] < 10 and out["rc"] == -9
    grandchild = int(pidfile.read_text())
    # SIGKILL is delivered at once, but the dying process runs its own exit on a busy 2-core runner
    # (state R for a moment, as CI saw): it has to be gone or a zombie within a generous bound.
    deadline = time.monotonic() + 20
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid):
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_peak_memory_is_the_modules_own(run):
    small, big = run("fr_ok", {"n": 1})["maxrss_kib"], run("fr_big")["maxrss_kib"]
    assert big - small > 100 * 1024 and small < 150 * 1024
