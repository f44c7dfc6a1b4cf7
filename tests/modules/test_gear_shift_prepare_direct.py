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


def test_a_whole_shift_in_ansibles_process_wakes_records_and_releases_its_lock_also_on_a_failure(tmp_path):
    """Not check mode, in Ansible's process: the lock taken, the parked host woken by a real magic
    packet (sent during the observation), the journal and the record written, the lock released;
    then a record that cannot be written (its directory missing) fails the call naming it, and the
    lock is released all the same."""
    import test_gear_shift_prepare_whole as whole
    parked, on, udp = whole._servers()
    packets = []
    waiter = whole._woken_by_packet(parked, udp, packets)
    try:
        gear = tmp_path / "gear"
        args = whole._args(tmp_path, parked, on, udp)
        (gear / "state.json").write_text(json.dumps(whole.PARKED))
        got, files, _ = _run(tmp_path, args, "true", check=False)
        assert files == [] and not got.get("failed") and got["went_on"] is True, got
        rec = got["record"]
        assert rec["result"] == "ok" and rec["lock_released"] is True and not (gear / "shift.lock").exists(), rec
        (action,) = rec["record"]["actions"]
        assert (action["host"], action["method"]) == ("h1", "wol") and packets == [whole.PACKET] * 3, packets
        assert "(the first during the observation)" in action["attempts"][0]["report"], action
        doc = json.loads((gear / "state.json").read_text())
        assert doc["result"] == "ok" and doc["hosts"]["h1"]["state"] == "on" and "in_progress" not in doc, doc
        # parked again (the host, awake, is put back), the history's directory missing: refused, released
        (gear / "state.json").write_text(json.dumps(whole.PARKED))
        bad = dict(args, whole_shift=dict(args["whole_shift"], history_file=str(gear / "missing" / "history.jsonl")))
        failed, files, _ = _run(tmp_path, bad, "true", check=False)
        assert files == [] and failed.get("failed"), failed
        assert "could not be recorded: option history_file: its directory %s does not exist" % (gear / "missing") \
            in failed["msg"] and failed["msg"].endswith("(the gear-shift lock was released)"), failed["msg"]
        assert failed["lock_released"] is True and not (gear / "shift.lock").exists()
    finally:
        whole._stop(parked, on, udp=udp)
        waiter.join()


def test_a_task_timeout_or_an_environment_of_its_own_runs_the_module_as_a_module(tmp_path):
    """A task with a timeout (its alarm could cut the call between its lock and the lock's release)
    or an environment of its own (the module's process would have it) runs the module the usual
    way: one AnsiballZ payload each; the plain task beside them builds none."""
    port = _refusing_port()
    args = _args(tmp_path, port.getsockname()[1])
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "plain", "gear_shift_prepare": args, "check_mode": True},
        {"name": "with a timeout", "gear_shift_prepare": args, "check_mode": True, "timeout": 60},
        {"name": "with an environment", "gear_shift_prepare": args, "check_mode": True,
         "environment": {"FLEETNAP_TEST": "1"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    remote = tmp_path / "remote"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_KEEP_REMOTE_FILES="1",
               ANSIBLE_REMOTE_TMP=str(remote), ANSIBLE_NOCOLOR="1")
    try:
        proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, str(tmp_path / "play.yml")],
                              capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=180)
    finally:
        port.close()
    assert proc.returncode == 0 and "ok=3" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert len(list(remote.rglob("AnsiballZ_gear_shift_prepare.py"))) == 2, sorted(remote.rglob("*"))
