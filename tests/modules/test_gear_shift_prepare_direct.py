"""gear_shift_prepare's action plugin (action_plugins/gear_shift_prepare.py): on the controller the
module runs in Ansible's own process (no AnsiballZ payload, no second Python), with the same
checks, result, failures and secrets scrubbed as the module run the usual way
(``fleetnap_direct_execution: false``). Real ``ansible`` runs with this repository's ansible.cfg,
the module's real observation of a port on 127.0.0.1 that refuses (check mode: nothing written)."""

from __future__ import annotations

import json
import os
import socket
import subprocess

from conftest import REPO, TARGET_PYTHON, VENV_BIN

SECRET = "s3cr3t-Direct-pw"


def _refusing_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))        # bound, not listening: refused
    return s


def _args(tmp_path, port, **extra):
    return dict({"lock_file": str(tmp_path / "gear" / "shift.lock"), "state_file": str(tmp_path / "gear" / "state.json"),
                 "gear": 1, "replicas": 1, "probe_timeout": 0.2, "lease": 60,    # no ansible-playbook above it
                 "hosts": [{"name": "a", "address": "127.0.0.1", "port": port, "bmc_address": "127.0.0.1",
                            "bmc_password": SECRET,
                            "inventory": {"group": 1, "up_methods": ["wol"], "wol_macs": ["02:00:00:00:00:01"],
                                          "note": "holds %s inside" % SECRET}}]}, **extra)


def _run(tmp_path, args, direct, check=True):
    """(the task's result, every file AnsiballZ left in the remote tmp, the output)."""
    remote = tmp_path / ("remote-%s" % direct)
    cmd = [str(VENV_BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
           "-m", "gear_shift_prepare", "-a", json.dumps(args), "-e", "fleetnap_direct_execution=%s" % direct]
    if check:
        cmd.append("--check")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=str(remote),
               ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    text = proc.stdout[proc.stdout.find("{"):]
    try:
        report = json.JSONDecoder().raw_decode(text)[0]      # the timing callbacks' lines follow it
    except ValueError:
        raise AssertionError("no JSON report (rc=%d)\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    result = report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result, sorted(p.name for p in remote.rglob("AnsiballZ_*")), proc.stdout + proc.stderr


def _same(result):
    """A result without what differs from one run to the next (times, the lock's owner)."""
    out = json.loads(json.dumps(result))
    for key in ("started", "started_epoch", "observe_elapsed_s", "lock", "_ansible_no_log"):
        out.pop(key, None)
    for row in (out.get("plan") or {}).get("rows") or []:
        row.pop("since", None)
    return out


def test_on_the_controller_the_module_runs_in_ansibles_process_with_the_modules_result(tmp_path):
    port = _refusing_port()
    try:
        here, here_files, here_out = _run(tmp_path, _args(tmp_path, port.getsockname()[1]), "true")
        there, there_files, _ = _run(tmp_path, _args(tmp_path, port.getsockname()[1]), "false")
    finally:
        port.close()
    assert not here.get("failed") and not there.get("failed"), (here, there)
    assert here_files == [] and there_files == ["AnsiballZ_gear_shift_prepare.py"], (here_files, there_files)
    assert here["hosts"]["a"]["ssh"] is False and here["plan"]["gear"] == 1 and here["went_on"] is False
    assert _same(here) == _same(there)
    assert SECRET not in json.dumps(here) + here_out and SECRET not in json.dumps(there), here["hosts"]["a"]
    assert not (tmp_path / "gear" / "state.json").exists()           # check mode: nothing written


def test_a_refusal_is_the_same_in_both_and_a_direct_execution_that_is_no_boolean_is_refused(tmp_path):
    port = _refusing_port()
    try:
        bad = _args(tmp_path, port.getsockname()[1], probe_timeout="soon")
        here, _, _ = _run(tmp_path, bad, "true")
        there, _, _ = _run(tmp_path, bad, "false")
        assert here.get("failed") and here["msg"] == there["msg"], (here, there)
        assert "probe_timeout" in here["msg"], here["msg"]
        worse = _args(tmp_path, port.getsockname()[1], probe_timeout=0)
        here, _, _ = _run(tmp_path, worse, "true")
        there, _, _ = _run(tmp_path, worse, "false")
        assert here.get("failed") and here["msg"] == there["msg"] and "probe_timeout" in here["msg"], (here, there)
        odd, _, out = _run(tmp_path, _args(tmp_path, port.getsockname()[1]), "perhaps")
        assert odd.get("failed") and "fleetnap_direct_execution must be true or false, got 'perhaps'" in odd["msg"], \
            odd
    finally:
        port.close()
