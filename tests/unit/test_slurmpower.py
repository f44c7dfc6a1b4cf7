"""Slurm's power-saving programs (issue 37): module_utils/fleetnap/slurmpower.py. What a call asks
(the hostlist argument, the nodes fleetnap knows, slurmctld's resume file: a table of bad inputs,
each acting on no node it was not asked for), and the runner handed off so that the program
returns at once: a session of its own, standard streams on /dev/null, slurmctld's read of the
program's output ending with the program (on real processes of this machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible.module_utils.fleetnap import slurmpower
from ansible.module_utils.fleetnap.slurmpower import RequestError, detach, line, request, resume_jobs

REPO = Path(__file__).resolve().parents[2]
KNOWN = ["lab1", "lab2", "lab3", "lab4", "lab5", "lab6"]


def test_nodes_in_the_arguments_order_once_and_unknown_names_left_alone():
    req = request("suspend", ["lab[3,1],lab3,other[1-2],lab2"], {}, KNOWN)
    assert req.nodes == ["lab3", "lab1", "lab2"]
    assert req.skipped == [("other1", "not a node fleetnap knows: left alone"),
                           ("other2", "not a node fleetnap knows: left alone")]
    assert req.notes == [] and req.jobs == {}


def test_resume_reads_the_jobs_from_slurmctlds_resume_file(tmp_path):
    f = tmp_path / "resume.json"
    f.write_text(json.dumps({"all_nodes_resume": "lab[1-2]", "jobs": [
        {"job_id": 41, "nodes_alloc": "lab[1-2]", "nodes_resume": "lab[1-2]", "partition": "debug"},
        {"job_id": 42, "nodes_alloc": "lab2", "nodes_resume": "", "partition": "debug"}]}))
    req = request("resume", ["lab[1-2]"], {"SLURM_RESUME_FILE": str(f)}, KNOWN)
    assert req.nodes == ["lab1", "lab2"] and req.notes == []
    assert req.jobs == {"41": ["lab1", "lab2"], "42": []}
    assert json.loads(json.dumps(req.as_dict()))["jobs"] == req.jobs


def test_resume_reads_slurm_22_05s_resume_file(tmp_path):
    """Debian 12's slurmctld (22.05.8) names a job's nodes 'nodes' (23.02 'nodes_resume'): this is
    the file it wrote in the lab (tests/lab/test_slurm_lab.py logs the job's node from it)."""
    f = tmp_path / "resume.json"
    f.write_text('{"jobs":[{"job_id":5,"nodes":"lab4"}],"all_nodes":"lab4"}')
    req = request("resume", ["lab4"], {"SLURM_RESUME_FILE": str(f)}, KNOWN)
    assert req.nodes == ["lab4"] and req.notes == [] and req.jobs == {"5": ["lab4"]}
    f.write_text('{"jobs":[{"job_id":5,"nodes":"lab[4-"}],"all_nodes":"lab4"}')
    req = request("resume", ["lab4"], {"SLURM_RESUME_FILE": str(f)}, KNOWN)
    assert req.jobs == {} and "jobs[0].nodes: " in req.notes[0] and req.nodes == ["lab4"]


# The call itself is wrong: no node is acted on, and the reason says what is wrong.
BAD_CALLS = [
    ("no argument", "suspend", [], KNOWN, "expected one argument"),
    ("two arguments", "suspend", ["lab1", "lab2"], KNOWN, "got 2"),
    ("malformed hostlist", "suspend", ["lab[1-"], KNOWN, "lab[1-"),
    ("reversed range", "resume", ["lab[3-1]"], KNOWN, "lab[3-1]"),
    ("text after a bracket", "suspend", ["lab[1-2]x"], KNOWN, "lab[1-2]x"),
    ("a newline in the expression", "suspend", ["lab1\nlab2"], KNOWN, ""),
    ("an empty expression", "suspend", [""], KNOWN, "names no node"),
    ("commas only", "resume_fail", [",,"], KNOWN, "names no node"),
    ("unknown action", "hibernate", ["lab1"], KNOWN, "unknown action"),
    ("settings name no node list", "suspend", ["lab1"], "lab1", "no list of nodes"),
    ("a known name that is no name", "suspend", ["lab1"], ["lab1", "../x"], "not one"),
    ("a known name that is no text", "suspend", ["lab1"], ["lab1", 7], "not one"),
]


@pytest.mark.parametrize("case,action,argv,known,words", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_a_bad_call_acts_on_no_node_and_says_why(case, action, argv, known, words):
    with pytest.raises(RequestError) as err:
        request(action, argv, {}, known)
    assert words in str(err.value)


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


# The resume file cannot be used: logged once, the argument's nodes are still woken.
BAD_RESUME_FILES = [
    ("not set", lambda p: None, "is not set"),
    ("relative path", lambda p: "resume.json", "not an absolute path"),
    ("missing", lambda p: str(p / "gone.json"), "could not be read"),
    ("a FIFO (never opened, never waited on)", _fifo, "not a regular file"),
    ("a directory", lambda p: str(p), "not a regular file"),
    ("empty", lambda p: _write(p, b""), "is empty"),
    ("white space only", lambda p: _write(p, b" \n"), "is empty"),
    ("not JSON", lambda p: _write(p, b"{jobs: ["), "not valid JSON"),
    ("not UTF-8", lambda p: _write(p, b'{"jobs": ["\xff"]}'), "not UTF-8"),
    ("a JSON list", lambda p: _write(p, b"[]"), "not a JSON object"),
    ("jobs not a list", lambda p: _write(p, b'{"jobs": {}}'), "'jobs' is not a list"),
    ("a job not an object", lambda p: _write(p, b'{"jobs": [7]}'), "jobs[0] is not an object"),
    ("job_id missing", lambda p: _write(p, b'{"jobs": [{"nodes_resume": "lab1"}]}'), "job_id is not a job id"),
    ("job_id a boolean", lambda p: _write(p, b'{"jobs": [{"job_id": true}]}'), "job_id is not a job id"),
    ("job_id negative", lambda p: _write(p, b'{"jobs": [{"job_id": -1}]}'), "job_id is not a job id"),
    ("job_id a float", lambda p: _write(p, b'{"jobs": [{"job_id": 1.5}]}'), "job_id is not a job id"),
    ("NaN", lambda p: _write(p, b'{"jobs": [{"job_id": NaN}]}'), "not a JSON number"),
    ("nodes_resume not text", lambda p: _write(p, b'{"jobs": [{"job_id": 1, "nodes_resume": 3}]}'), "not a hostlist"),
    ("nodes_resume malformed", lambda p: _write(p, b'{"jobs": [{"job_id": 1, "nodes_resume": "n[1-"}]}'), "nodes_resume"),
    ("too large", lambda p: _write(p, b" " * (slurmpower.RESUME_FILE_LIMIT + 1)), "larger than"),
    ("nested too deep", lambda p: _write(p, b'{"jobs": ' + b"[" * 200 + b"]" * 200 + b"}"), "levels deep"),
]


def _write(tmp_path, data):
    path = tmp_path / "resume.json"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("case,make,words", BAD_RESUME_FILES, ids=[c[0] for c in BAD_RESUME_FILES])
def test_a_resume_file_that_cannot_be_used_is_logged_and_the_nodes_are_still_woken(tmp_path, case, make, words):
    path = make(tmp_path)
    env = {} if path is None else {"SLURM_RESUME_FILE": path}
    t0 = time.monotonic()
    req = request("resume", ["lab[1-2],other"], env, KNOWN)
    assert time.monotonic() - t0 < 5          # a FIFO is not waited on
    assert req.nodes == ["lab1", "lab2"] and req.jobs == {}
    assert len(req.notes) == 1 and words in req.notes[0] and "waking the nodes of the argument" in req.notes[0]
    with pytest.raises(RequestError):
        resume_jobs(env.get("SLURM_RESUME_FILE", ""))


def test_suspend_and_resume_fail_do_not_read_a_resume_file(tmp_path):
    for action in ("suspend", "resume_fail"):
        req = request(action, ["lab1"], {"SLURM_RESUME_FILE": _fifo(tmp_path) if action == "suspend" else "x"}, KNOWN)
        assert req.nodes == ["lab1"] and req.notes == []


def test_a_log_line_stays_one_line_and_names_action_node_and_outcome():
    text = line("resume", "lab2", "not woken", "wol: no answer\nfleetnap-slurm resume lab3: woken")
    assert "\n" not in text
    assert text.split(" ", 1)[1] == ("fleetnap-slurm resume lab2: not woken: wol: no answer "
                                     "fleetnap-slurm resume lab3: woken")
    assert time.strptime(text.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%SZ")


# A program as slurmctld runs it: it detaches a runner that sleeps, and returns.
PROGRAM = r"""
import sys
sys.path[:0] = %(path)r
import ansible.module_utils
ansible.module_utils.__path__.append(%(module_utils)r)
from ansible.module_utils.fleetnap.slurmpower import detach
pid = detach([sys.executable, "-c", %(runner)r, %(out)r], environ={"X": "1"})
print("runner", pid, flush=True)
"""
RUNNER = r"""
import json, os, sys, time
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
links = {fd: os.readlink("/proc/self/fd/%d" % fd) for fd in (0, 1, 2)}
state = {"sid": os.getsid(0), "pgid": os.getpgid(0), "pid": os.getpid(), "fds": fds, "links": links,
         "cwd": os.getcwd(), "env": dict(os.environ)}
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump(state, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(30)
"""


def _ansible_paths():
    import ansible
    return [str(Path(ansible.__file__).resolve().parents[1])]


def test_the_program_returns_at_once_and_its_runner_lives_on_apart(tmp_path):
    out = tmp_path / "runner.json"
    code = PROGRAM % {"path": _ansible_paths(), "runner": RUNNER, "out": str(out),
                      "module_utils": str(REPO / "module_utils")}
    t0 = time.monotonic()
    # slurmctld reads the program's output to EOF: the runner must not hold it open
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={"PYTHONPATH": ""})
    stdout, stderr = proc.communicate(timeout=20)
    took = time.monotonic() - t0
    assert proc.returncode == 0, stderr
    runner_pid = int(stdout.split()[1])
    try:
        assert took < 10, took
        deadline = time.monotonic() + 20
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        state = json.loads(out.read_text())
        assert state["pid"] == runner_pid
        os.kill(runner_pid, 0)                               # alive after the program returned
        # a session and a process group of its own: neither the program's nor this test's
        assert state["pgid"] == state["sid"] and state["sid"] not in (proc.pid, os.getsid(0))
        assert all(v == "/dev/null" for v in state["links"].values()), state["links"]
        assert state["fds"][:3] == [0, 1, 2] and len(state["fds"]) <= 4, state["fds"]   # + the listdir's own
        assert state["cwd"] == "/"
        assert state["env"].get("X") == "1" and set(state["env"]) <= {"X", "LC_CTYPE"}, state["env"]
        # slurmctld kills the program's process group: the runner is not in it
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 15)
        os.kill(runner_pid, 0)
    finally:
        try:
            os.kill(runner_pid, 9)
        except ProcessLookupError:
            pass


def test_a_runner_that_cannot_be_started_is_an_error_of_the_program(tmp_path):
    with pytest.raises(OSError) as err:
        detach([str(tmp_path / "no-such-runner")])
    assert "could not be started" in str(err.value) and "No such file" in str(err.value)


# --- settings ---------------------------------------------------------------------------------

def good_settings(tmp_path, **over):
    doc = {"nodes": KNOWN, "log": str(tmp_path / "slurm-power.log"), "lock_dir": str(tmp_path),
           "runner": ["/usr/bin/python3", "-IB", "/usr/local/lib/fleetnap/fleetnap-slurm-power", "run"],
           "playbook": {"ansible_playbook": "/usr/bin/ansible-playbook", "inventory": "/etc/fleetnap/hosts.yml",
                        "fleetnap_dir": "/opt/fleetnap", "playbook": "", "args": ["-e", "@/etc/fleetnap/vars.yml"]},
           "timeout_s": {"suspend": 120, "resume": 600}, "lock_wait_s": 5, "scontrol": "/usr/bin/scontrol",
           "env": {"PATH": "/usr/bin:/bin", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}}
    doc.update(over)
    for key in [k for k, v in doc.items() if v is None]:
        del doc[key]
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(doc))
    return path


def test_settings_are_read_whole(tmp_path):
    cfg = slurmpower.settings(str(good_settings(tmp_path)))
    assert cfg["nodes"] == KNOWN and cfg["timeout_s"] == {"suspend": 120, "resume": 600} and cfg["lock_wait_s"] == 5
    assert cfg["commands"]["resume"] == ["/usr/bin/ansible-playbook", "-i", "/etc/fleetnap/hosts.yml",
                                         "/opt/fleetnap/playbooks/slurm_power.yml", "-e", "@/etc/fleetnap/vars.yml",
                                         "-e", "slurm_power_action=resume"]
    assert cfg["commands"]["suspend"][-1] == "slurm_power_action=suspend"


BAD_SETTINGS = [
    ("nodes missing", {"nodes": None}, "lacks nodes"),
    ("nodes not a list", {"nodes": "lab1"}, "not a list"),
    ("a node name with a slash", {"nodes": ["lab1", "a/b"]}, "not one"),
    ("log relative", {"log": "slurm.log"}, "log is not an absolute path"),
    ("lock_dir not text", {"lock_dir": 5}, "lock_dir is not an absolute path"),
    ("runner empty", {"runner": []}, "runner (a command) is not a list of 1 to 256 arguments"),
    ("runner relative", {"runner": ["python3", "x"]}, "absolute path"),
    ("runner with a newline", {"runner": ["/usr/bin/python3", "a\nb"]}, "one line"),
    ("playbook not an object", {"playbook": ["/bin/true"]}, "playbook is not an object"),
    ("ansible-playbook relative", {"playbook": {"ansible_playbook": "ansible-playbook", "inventory": "/i",
                                                "playbook": "/p"}}, "playbook.ansible_playbook"),
    ("no playbook, no fleetnap_dir", {"playbook": {"ansible_playbook": "/a", "inventory": "/i"}},
     "playbook.playbook (or fleetnap_dir)"),
    ("inventory missing", {"playbook": {"ansible_playbook": "/a", "playbook": "/p"}}, "playbook.inventory"),
    ("args with a newline", {"playbook": {"ansible_playbook": "/a", "inventory": "/i", "playbook": "/p",
                                          "args": ["-e", "a\nb"]}}, "playbook.args"),
    ("timeout zero", {"timeout_s": {"suspend": 0, "resume": 5}}, "timeout_s.suspend"),
    ("timeout a string", {"timeout_s": {"suspend": "5", "resume": 5}}, "timeout_s.suspend"),
    ("timeout huge", {"timeout_s": {"suspend": 5, "resume": 10 ** 9}}, "timeout_s.resume"),
    ("timeout a boolean", {"timeout_s": {"suspend": True, "resume": 5}}, "timeout_s.suspend"),
    ("lock_wait negative", {"lock_wait_s": -1}, "lock_wait_s"),
    ("scontrol relative", {"scontrol": "scontrol"}, "scontrol is not an absolute path"),
    ("env a list", {"env": ["PATH=/bin"]}, "env is not an object"),
    ("env a bad name", {"env": {"A B": "x"}}, "not a variable"),
    ("env a value with a newline", {"env": {"A": "x\ny"}}, "not a variable"),
]


@pytest.mark.parametrize("case,over,words", BAD_SETTINGS, ids=[c[0] for c in BAD_SETTINGS])
def test_bad_settings_are_refused_before_anything_is_done(tmp_path, case, over, words):
    with pytest.raises(RequestError) as err:
        slurmpower.settings(str(good_settings(tmp_path, **over)))
    assert words in str(err.value)


@pytest.mark.parametrize("content,words", [(None, "No such file"), (b"[]", "not a JSON object"),
                                           (b"{", "not valid JSON"), ("fifo", "not a regular file")])
def test_a_settings_file_that_cannot_be_read_is_named(tmp_path, content, words):
    path = tmp_path / "settings.json"
    if content == "fifo":
        os.mkfifo(path)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(RequestError) as err:
        slurmpower.settings(str(path))
    assert str(path) in str(err.value) and words in str(err.value)


# --- the runner, with a real ansible-playbook and Ansible's JSON callback ------------------------

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Act on the node
      ansible.builtin.fail:
        msg: "no answer from {{ inventory_hostname }}"
      when: inventory_hostname in (failing | default('')).split(',')
    - name: A node in the asked state already (as gear_member says it)
      ansible.builtin.set_fact:
        gear_member_result: {host: "{{ inventory_hostname }}", ok: true, method: none, msg: "silent already"}
      when: inventory_hostname in (idle | default('')).split(',')
"""


def ansible_env(tmp_path):
    venv_bin = str(Path(sys.executable).parent)
    # no ansible.cfg (none.cfg is not there): no notification callback writes to the JSON output
    return {"PATH": "%s:/usr/bin:/bin" % venv_bin, "HOME": str(tmp_path), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(tmp_path / "none.cfg")}


def execute(argv, timeout_s, env):
    # as the runner runs it: from / (detach's cwd), so no ansible.cfg of a working directory applies
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd="/")
    return proc.returncode, proc.stdout, proc.stderr


def runner_cfg(tmp_path, failing="", idle=""):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    inv = tmp_path / "hosts.yml"
    line_ = "    %s: {ansible_connection: local, ansible_python_interpreter: %s}\n"
    inv.write_text("all:\n  hosts:\n" + "".join(line_ % (n, sys.executable) for n in KNOWN))
    scontrol = tmp_path / "scontrol"      # a stand-in: records what Slurm would be told (error path only)
    scontrol.write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s\n" % (tmp_path / "scontrol.calls"))
    scontrol.chmod(0o755)
    playbook = {"ansible_playbook": str(Path(sys.executable).parent / "ansible-playbook"), "inventory": str(inv),
                "playbook": str(tmp_path / "play.yml"), "args": ["-e", "failing=%s" % failing, "-e", "idle=%s" % idle]}
    cfg = slurmpower.settings(str(good_settings(
        tmp_path, playbook=playbook, scontrol=str(scontrol),
        env=ansible_env(tmp_path), timeout_s={"suspend": 300, "resume": 300})))
    return cfg


def test_the_runner_acts_on_the_nodes_and_logs_each(tmp_path):
    lines = []
    got = slurmpower.run("suspend", ["lab1", "lab3"], runner_cfg(tmp_path), execute, lines.append)
    assert got == {"lab1": (True, ""), "lab3": (True, "")}
    assert [x.split(" ", 1)[1] for x in lines] == ["fleetnap-slurm suspend lab1: parked",
                                                   "fleetnap-slurm suspend lab3: parked"]
    assert not (tmp_path / "scontrol.calls").exists()


def test_a_node_in_the_asked_state_already_is_logged_as_nothing_done(tmp_path):
    """gear_member's result with method none (a suspend of a silent node, a resume of one that
    answers): done, and the line says nothing was done and why; Slurm is told nothing."""
    lines = []
    got = slurmpower.run("suspend", ["lab1", "lab3"], runner_cfg(tmp_path, idle="lab3"), execute, lines.append)
    assert got == {"lab1": (True, ""), "lab3": (True, "silent already")}
    assert [x.split(" ", 1)[1] for x in lines] == ["fleetnap-slurm suspend lab1: parked",
                                                   "fleetnap-slurm suspend lab3: nothing done: silent already"]
    assert not (tmp_path / "scontrol.calls").exists()


def test_a_node_not_woken_is_told_to_slurm_as_down_then_powered_down(tmp_path):
    lines = []
    got = slurmpower.run("resume", ["lab1", "lab2"], runner_cfg(tmp_path, failing="lab2"), execute, lines.append)
    assert got == {"lab1": (True, ""), "lab2": (False, "no answer from lab2")}
    assert [x.split(" ", 1)[1] for x in lines] == [
        "fleetnap-slurm resume lab1: woken",
        "fleetnap-slurm resume lab2: failed: no answer from lab2",
        "fleetnap-slurm resume lab2: told Slurm: nodename=lab2 state=DOWN reason=fleetnap: no answer from lab2",
        "fleetnap-slurm resume lab2: told Slurm: nodename=lab2 state=POWER_DOWN"]
    assert (tmp_path / "scontrol.calls").read_text().splitlines() == [
        "update nodename=lab2 state=DOWN reason=fleetnap: no answer from lab2", "update nodename=lab2 state=POWER_DOWN"]


def test_a_failed_park_is_not_told_to_slurm(tmp_path):
    lines = []
    got = slurmpower.run("resume_fail", ["lab2"], runner_cfg(tmp_path, failing="lab2"), execute, lines.append)
    assert got == {"lab2": (False, "no answer from lab2")}
    assert len(lines) == 1 and not (tmp_path / "scontrol.calls").exists()


def test_a_command_that_cannot_run_fails_every_node_and_says_why(tmp_path):
    cfg = runner_cfg(tmp_path)
    cfg["commands"]["suspend"] = [str(tmp_path / "no-such-ansible-playbook")]
    lines = []
    got = slurmpower.run("suspend", ["lab1", "lab2"], cfg, execute, lines.append)
    assert all(not ok and "could not run" in why and "No such file" in why for ok, why in got.values()), got


@pytest.mark.parametrize("stdout,words", [("", "could not be read"), ("{}", "ran no play"), ("[1]", "ran no play"),
                                          ('{"stats": {}}', "did not act on it")])
def test_output_that_says_nothing_of_a_node_is_a_failure(stdout, words):
    got = slurmpower.outcomes(["lab1"], 2, stdout)
    assert got["lab1"][0] is False and words in got["lab1"][1]


def test_a_second_call_for_the_same_node_waits_for_the_first(tmp_path):
    cfg = runner_cfg(tmp_path)
    cfg["lock_wait_s"] = 0.5
    fd = slurmpower._lock(cfg["lock_dir"], "lab1", 0)
    try:
        lines = []
        got = slurmpower.run("resume", ["lab1", "lab2"], cfg, execute, lines.append)
        assert got["lab1"] == (False, "another fleetnap call held its lock for 0.5 s")
        assert got["lab2"] == (True, "")
    finally:
        os.close(fd)
    assert slurmpower.run("resume", ["lab1"], cfg, execute, [].append) == {"lab1": (True, "")}


def test_a_lock_directory_that_is_not_there_is_said_per_node_and_nothing_runs(tmp_path):
    cfg = runner_cfg(tmp_path)
    cfg["lock_dir"] = str(tmp_path / "gone")
    ran, lines = [], []
    got = slurmpower.run("suspend", ["lab1"], cfg, lambda *a: ran.append(a), lines.append)
    assert ran == [] and got["lab1"][0] is False and "lock file could not be opened" in got["lab1"][1]
    assert len(lines) == 1 and "fleetnap-slurm suspend lab1: not acted on: its lock file" in lines[0]


def test_a_failed_exec_is_named_whichever_line_comes_first(tmp_path, monkeypatch):
    """The grandchild's exec:ERRNO can reach the pipe before the child's pid (found under load:
    the error was called a failed fork). Both orders, by a pipe filled here in that order (an
    error path: the fork is replaced)."""
    real_pipe = os.pipe
    for lines in (b"exec:2\n4242\n", b"4242\nexec:2\n"):
        def fake_fork(lines=lines):
            r, w = real_pipe()
            os.write(w, lines)
            os.close(w)
            return r
        rfd = fake_fork()
        monkeypatch.setattr(os, "pipe", lambda rfd=rfd: (rfd, os.open(os.devnull, os.O_WRONLY)))
        monkeypatch.setattr(os, "fork", lambda: 4242)
        monkeypatch.setattr(os, "waitpid", lambda pid, flags: (pid, 0))
        with pytest.raises(OSError) as err:
            detach([str(tmp_path / "no-such-runner")])
        assert "could not be started: No such file" in str(err.value), lines
