# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's power-saving programs (SuspendProgram, ResumeProgram, ResumeFailProgram): what they
are asked, and handing the work to a runner that slurmctld does not wait for.

What slurmctld does to such a program (Slurm's power_save.c and its power-saving guide, 22.05):
it runs it as SlurmUser on the slurmctld host with one argument, a hostlist expression, in an
environment built from scratch (``SLURM_CONF``, and ``SLURM_RESUME_FILE`` for a resume: JSON naming
the jobs and nodes, removed when slurmctld stops; no ``PATH``, no ``HOME``); it reads the program's
standard output to EOF, logs only the exit status, and kills the program's whole process group
when it returns or after max(SuspendTimeout, ResumeTimeout). So a program here:

- reads all it needs at once (:func:`request`): the argument, expanded by
  :mod:`hostlist` (a malformed expression acts on no node); the names against the nodes fleetnap
  knows (an unknown name is logged and left alone); for a resume, the resume file, through the
  one file layer and the one JSON loader (missing, empty, malformed or of another shape: logged,
  the nodes of the argument are still woken, since slurmctld asked for them);
- hands the nodes to a runner in a session of its own with its standard streams on /dev/null
  (:func:`detach`): slurmctld's read of the program's output ends when the program exits, the
  program's process group can be killed without the runner, and the program returns at once.

Every line the programs log says the action, the node and what happened (:func:`line`).
Standard library and fleetnap's module_utils only (embedded into the programs by the
slurm_power role; also imported by modules and by plain pytest).
"""

from __future__ import annotations

import fcntl
import os
import re
import time

from ansible.module_utils.fleetnap import fileio, hostlist, parse

ACTIONS = ("suspend", "resume", "resume_fail")
RESUME_FILE_LIMIT = 4 * 1024 * 1024      # Slurm writes one entry per job being resumed
MAX_JOBS = 100000
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class RequestError(ValueError):
    """What makes a program act on no node at all (the message is the log line's reason)."""


class Request(object):
    """One call of a program: ``nodes`` to act on (known to fleetnap, in the argument's order,
    each once), ``skipped`` (node, reason) for names not acted on, ``notes`` (lines about the call
    itself, such as a resume file that could not be used), ``jobs`` (job id -> nodes it resumes,
    from the resume file)."""

    def __init__(self, action, nodes, skipped, notes, jobs):
        self.action = action
        self.nodes = nodes
        self.skipped = skipped
        self.notes = notes
        self.jobs = jobs

    def as_dict(self):
        return {"action": self.action, "nodes": list(self.nodes), "skipped": [list(s) for s in self.skipped],
                "notes": list(self.notes), "jobs": dict(self.jobs)}


def line(action, node, outcome, detail=""):
    """One log line: ``<UTC time> fleetnap-slurm <action> <node>: <outcome>[: detail]``. Text is
    kept on one line (a newline in a reason would forge a second entry)."""
    text = "%s: %s" % (outcome, detail) if detail else outcome
    text = " ".join(str(text).split())
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return "%s fleetnap-slurm %s %s: %s" % (stamp, action, node or "-", text)


def _known(known):
    if isinstance(known, (str, bytes)) or not hasattr(known, "__iter__"):
        raise RequestError("the programs' settings name no list of nodes")
    names = set()
    for name in known:
        if not isinstance(name, str) or not _NODE.match(name):
            raise RequestError("the programs' settings hold a node name that is not one: %r" % (name,))
        names.add(name)
    return names


def resume_jobs(path):
    """Job id -> node names it resumes, from slurmctld's resume file (SLURM_RESUME_FILE). Raises
    RequestError saying what is wrong with it (the caller logs it and goes on with the argument)."""
    if not path:
        raise RequestError("SLURM_RESUME_FILE is not set (slurmctld sets it for ResumeProgram)")
    if not path.startswith("/"):
        raise RequestError("SLURM_RESUME_FILE %r is not an absolute path" % path[:200])
    try:
        data = fileio.read_bytes(path, limit=RESUME_FILE_LIMIT, what="resume file")
    except (OSError, ValueError) as exc:
        raise RequestError("resume file %s could not be read: %s" % (path, exc))
    if not data.strip():
        raise RequestError("resume file %s is empty" % path)
    try:
        doc = parse.loads(data, "resume file %s" % path, limit=RESUME_FILE_LIMIT)
    except parse.ParseError as exc:
        raise RequestError(str(exc))
    if not isinstance(doc, dict):
        raise RequestError("resume file %s is not a JSON object" % path)
    jobs = doc.get("jobs", [])
    if not isinstance(jobs, list) or len(jobs) > MAX_JOBS:
        raise RequestError("resume file %s: 'jobs' is not a list of at most %d jobs" % (path, MAX_JOBS))
    out = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise RequestError("resume file %s: jobs[%d] is not an object" % (path, i))
        job_id = job.get("job_id")
        if isinstance(job_id, bool) or not isinstance(job_id, int) or not 0 < job_id < 2 ** 32:
            raise RequestError("resume file %s: jobs[%d].job_id is not a job id" % (path, i))
        # Slurm 23.02 and later: nodes_resume (and nodes_alloc); 22.05 (Debian 12): nodes, the
        # job's nodes being resumed (slurmctld 22.05.8 wrote {"jobs":[{"job_id":5,"nodes":"lab4"}],
        # "all_nodes":"lab4"} in the lab)
        key = "nodes_resume" if "nodes_resume" in job else "nodes"
        nodes = job.get(key, "")
        if not isinstance(nodes, str):
            raise RequestError("resume file %s: jobs[%d].%s is not a hostlist" % (path, i, key))
        try:
            out[str(job_id)] = hostlist.expand(nodes) if nodes else []
        except hostlist.HostlistError as exc:
            raise RequestError("resume file %s: jobs[%d].%s: %s" % (path, i, key, exc))
    return out


def request(action, argv, environ, known):
    """The Request of one program call. ``argv`` is the program's arguments (without its name),
    ``environ`` its environment, ``known`` the node names fleetnap may act on. RequestError when
    no node can be acted on because of the call itself (the action, the argument, the settings)."""
    if action not in ACTIONS:
        raise RequestError("unknown action %r (expected one of %s)" % (action, ", ".join(ACTIONS)))
    names = _known(known)
    if len(argv) != 1:
        raise RequestError("expected one argument, a Slurm hostlist expression; got %d" % len(argv))
    try:
        asked = hostlist.unique(hostlist.expand(argv[0]))
    except hostlist.HostlistError as exc:
        raise RequestError(str(exc))
    if not asked:
        raise RequestError("the hostlist expression names no node")
    nodes = [n for n in asked if n in names]
    skipped = [(n, "not a node fleetnap knows: left alone") for n in asked if n not in names]
    notes, jobs = [], {}
    if action == "resume":
        try:
            jobs = resume_jobs(environ.get("SLURM_RESUME_FILE", ""))
        except RequestError as exc:
            notes.append("%s; waking the nodes of the argument" % exc)
    return Request(action, nodes, skipped, notes, jobs)


def detach(argv, environ=None, cwd="/"):
    """Start ``argv`` as a runner slurmctld does not wait for: a grandchild in a session of its
    own (out of the program's process group, which slurmctld kills), standard input, output and
    error on /dev/null (slurmctld's read of the program's output ends with the program), no other
    descriptor inherited, working directory ``cwd``. Returns the runner's pid once it has been
    started (exec failed: OSError). The runner logs for itself."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:        # pragma: no cover - the child's side runs in the forked process
        try:
            os.close(rfd)
            os.setsid()
            grandchild = os.fork()
            if grandchild:
                os.write(wfd, b"%d\n" % grandchild)
                os._exit(0)
            try:
                null = fileio.open_device(os.devnull, "r+b")
                for fd in (0, 1, 2):
                    os.dup2(null.fileno(), fd)
                os.closerange(3, wfd)
                os.closerange(wfd + 1, 65536)
                os.set_inheritable(wfd, False)
                os.chdir(cwd)
                os.execve(argv[0], argv, environ if environ is not None else os.environ)
            except OSError as exc:      # the exec, or what comes before it (the working directory)
                os.write(wfd, b"exec:%d\n" % (exc.errno or 0))
            os._exit(127)
        except BaseException:
            os._exit(126)
    os.close(wfd)
    os.waitpid(pid, 0)
    chunks = []
    try:
        while True:     # until the runner's exec closed the last write end (or it wrote why not)
            chunk = os.read(rfd, 4096)
            if not chunk or sum(map(len, chunks)) > 4096:
                break
            chunks.append(chunk)
    finally:
        os.close(rfd)
    # The child's line (the grandchild's pid) and the grandchild's (exec:ERRNO when its exec
    # failed) come in either order: the grandchild may fail before the child has written.
    out = b"".join(chunks).decode("ascii", "replace").split()
    pids = [w for w in out if w.isdigit()]
    failed = [w for w in out if w.startswith("exec:") and w[5:].isdigit()]
    if failed:
        errno_ = int(failed[0][5:])
        raise OSError(errno_, "the runner %s could not be started: %s" % (argv[0], os.strerror(errno_)))
    if not pids:
        raise OSError("the runner could not be started (fork failed)")
    return int(pids[0])


# --- the programs' settings -------------------------------------------------------------------

SETTINGS_LIMIT = 4 * 1024 * 1024
MAX_NODES = 100000
MAX_TIMEOUT_S = 86400
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def _args(value, where, least=0):
    if not isinstance(value, list) or not least <= len(value) <= 256:
        raise RequestError("%s is not a list of %d to 256 arguments" % (where, least))
    for arg in value:
        if not isinstance(arg, str) or "\0" in arg or "\n" in arg or len(arg) > 4096:
            raise RequestError("%s holds an argument that is not one line of text" % where)
    return list(value)


def _abs_argv(value, where):
    value = _args(value, where + " (a command)", 1)
    if not value[0].startswith("/"):
        raise RequestError("%s does not start with an absolute path (slurmctld gives the programs no PATH)" % where)
    return list(value)


def _abs_path(value, where):
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value or "\n" in value or len(value) > 4096:
        raise RequestError("%s is not an absolute path" % where)
    return value


def settings(path):
    """The programs' settings (written by the slurm_power role), checked whole before anything is
    done: ``nodes`` (names fleetnap may act on), ``log``, ``lock_dir``, ``runner`` (the command that
    runs a job: this program's ``run``), ``playbook`` (what parks and wakes: ``ansible_playbook``,
    ``inventory``, ``playbook`` or else ``fleetnap_dir``'s playbooks/slurm_power.yml, and ``args``;
    the commands :func:`commands` makes of it), ``timeout_s`` (per action), ``lock_wait_s``,
    ``scontrol`` and ``env`` (the environment the runner and the commands get)."""
    try:
        data = fileio.read_bytes(path, limit=SETTINGS_LIMIT, what="settings")
        doc = parse.loads(data, "settings %s" % path, limit=SETTINGS_LIMIT)
    except (OSError, ValueError) as exc:
        raise RequestError("settings %s could not be read: %s" % (path, exc))
    if not isinstance(doc, dict):
        raise RequestError("settings %s is not a JSON object" % path)
    where = "settings %s" % path
    missing = [k for k in ("nodes", "log", "lock_dir", "runner", "playbook", "timeout_s", "scontrol") if k not in doc]
    if missing:
        raise RequestError("%s lacks %s" % (where, ", ".join(missing)))
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
        raise RequestError("%s: nodes is not a list of at most %d names" % (where, MAX_NODES))
    _known(nodes)
    out = {"nodes": list(nodes), "log": _abs_path(doc["log"], where + ": log"),
           "lock_dir": _abs_path(doc["lock_dir"], where + ": lock_dir"),
           "runner": _abs_argv(doc["runner"], where + ": runner"),
           "scontrol": _abs_path(doc["scontrol"], where + ": scontrol")}
    out["commands"] = commands(doc["playbook"], where + ": playbook")
    timeouts = doc["timeout_s"]
    if not isinstance(timeouts, dict) or set(timeouts) != {"suspend", "resume"}:
        raise RequestError("%s: timeout_s must name exactly suspend and resume" % where)
    out["timeout_s"] = {}
    for key, value in timeouts.items():
        try:
            out["timeout_s"][key] = parse.finite(value, "%s: timeout_s.%s" % (where, key), 1, MAX_TIMEOUT_S)
        except parse.ParseError as exc:
            raise RequestError(str(exc))
    try:
        out["lock_wait_s"] = parse.finite(doc.get("lock_wait_s", 600), where + ": lock_wait_s", 0, MAX_TIMEOUT_S)
    except parse.ParseError as exc:
        raise RequestError(str(exc))
    env = doc.get("env", {})
    if not isinstance(env, dict) or len(env) > 256:
        raise RequestError("%s: env is not an object of at most 256 variables" % where)
    for key, value in env.items():
        if not _ENV_NAME.match(key) or not isinstance(value, str) or "\0" in value or "\n" in value:
            raise RequestError("%s: env holds %r, not a variable of one line of text" % (where, key[:64]))
    out["env"] = dict(env)
    return out


def commands(spec, where):
    """The park and wake commands: ``ansible_playbook -i inventory playbook ARGS -e
    slurm_power_action=suspend|resume`` (the runner appends ``-l NODES``). The playbook is
    ``fleetnap_dir``/playbooks/slurm_power.yml unless ``playbook`` names one."""
    if not isinstance(spec, dict):
        raise RequestError("%s is not an object" % where)
    playbook = spec.get("playbook") or ""
    if not playbook and spec.get("fleetnap_dir"):
        playbook = _abs_path(spec["fleetnap_dir"], where + ".fleetnap_dir").rstrip("/") + "/playbooks/slurm_power.yml"
    base = [_abs_path(spec.get("ansible_playbook"), where + ".ansible_playbook"),
            "-i", _abs_path(spec.get("inventory"), where + ".inventory"),
            _abs_path(playbook, where + ".playbook (or fleetnap_dir)")]
    args = _args(spec.get("args", []), where + ".args")
    return dict((a, base + args + ["-e", "slurm_power_action=%s" % a]) for a in ("suspend", "resume"))


# --- the runner ---------------------------------------------------------------------------------

def outcomes(nodes, rc, stdout):
    """node -> (ok, detail) from one run of the park or wake command with Ansible's JSON callback
    (ansible.posix.json): a node is done when the run's stats count no failure and no unreachable
    for it; otherwise the message of its last failed task says why. A node the run does not name
    (the command failed before it ran any) is not done, with the command's exit status. A node done
    with nothing to do (gear_member's result with method ``none``: silent already for a suspend,
    answering already for a resume) has that result's message as its detail; a node parked or
    woken has none."""
    try:
        doc = parse.loads(stdout, "the command's JSON output", limit=64 * 1024 * 1024, max_depth=64)
    except parse.ParseError as exc:
        return dict((n, (False, "the command's output could not be read (rc=%s): %s" % (rc, exc))) for n in nodes)
    stats = doc.get("stats") if isinstance(doc, dict) else None
    if not isinstance(stats, dict):
        return dict((n, (False, "the command ran no play (rc=%s)" % rc)) for n in nodes)
    why, idle = {}, {}
    for play in doc.get("plays") or []:
        for task in (play.get("tasks") or []) if isinstance(play, dict) else []:
            hosts = task.get("hosts") if isinstance(task, dict) else None
            for node, res in (hosts or {}).items() if isinstance(hosts, dict) else []:
                if not isinstance(res, dict):
                    continue
                if (res.get("failed") or res.get("unreachable")) and not res.get("ignore_errors"):
                    msg = res.get("msg") or res.get("stderr") or "failed"
                    why[node] = " ".join(str(msg).split())[:2000]
                facts = res.get("ansible_facts")
                done = facts.get("gear_member_result") if isinstance(facts, dict) else None
                if isinstance(done, dict) and done.get("method") == "none":
                    idle[node] = " ".join(str(done.get("msg") or "nothing to do").split())[:2000]
    out = {}
    for node in nodes:
        st = stats.get(node)
        if not isinstance(st, dict):
            out[node] = (False, "the command did not act on it (rc=%s)" % rc)
        elif st.get("failures") or st.get("unreachable"):
            out[node] = (False, why.get(node, "a task failed"))
        else:
            out[node] = (True, idle.get(node, ""))
    return out


def down_commands(scontrol, node, why):
    """What Slurm is told of a node fleetnap could not wake: DOWN with fleetnap's reason, then
    POWER_DOWN, so sinfo shows it powered down (idle~ once its reason is cleared), not a silent down~."""
    reason = "fleetnap: %s" % " ".join(why.split())
    return [[scontrol, "update", "nodename=%s" % node, "state=DOWN", "reason=%s" % reason[:200]],
            [scontrol, "update", "nodename=%s" % node, "state=POWER_DOWN"]]


def run(action, nodes, cfg, execute, log):
    """Park (suspend, resume_fail) or wake (resume) ``nodes`` with the settings ``cfg``.

    ``execute(argv, timeout_s, env)`` runs a command and returns (rc, stdout, stderr); ``log``
    takes one line. Each node's lock (``lock_dir``/NODE.lock, flock) is held while it is acted on,
    so a second call for the same node (slurmctld restarted and asked again) waits, then finds it
    in the asked state and the command does nothing to it. Returns node -> (ok, detail)."""
    verb = "resume" if action == "resume" else "suspend"
    held, results = {}, {}
    try:
        for node in nodes:
            try:
                fd = _lock(cfg["lock_dir"], node, cfg["lock_wait_s"])
            except (OSError, ValueError) as exc:
                fd, why = None, "its lock file could not be opened: %s" % exc
            else:
                why = "another fleetnap call held its lock for %g s" % cfg["lock_wait_s"]
            if fd is None:
                results[node] = (False, why)
                log(line(action, node, "not acted on", why))
            else:
                held[node] = fd
        todo = [n for n in nodes if n in held]
        if todo:
            argv = cfg["commands"][verb] + ["-l", ",".join(todo)]
            try:
                rc, stdout, stderr = execute(argv, cfg["timeout_s"][verb], cfg["env"])
            except OSError as exc:
                rc, stdout = None, ""
                stderr = str(exc)
            got = outcomes(todo, rc, stdout)
            if rc is None:
                got = dict((n, (False, "the command could not run: %s" % " ".join(stderr.split())[:500])) for n in todo)
            results.update(got)
            for node in todo:
                ok, detail = results[node]
                done = "nothing done" if detail else ("woken" if verb == "resume" else "parked")
                log(line(action, node, done if ok else "failed", detail))
                if not ok and action == "resume":
                    for cmd in down_commands(cfg["scontrol"], node, detail):
                        try:
                            crc, _out, cerr = execute(cmd, 30, cfg["env"])
                        except OSError as exc:
                            crc, cerr = None, str(exc)
                        log(line(action, node, "told Slurm" if crc == 0 else "could not tell Slurm",
                                 " ".join(cmd[2:]) + ("" if crc == 0 else ": rc=%s %s" % (crc, cerr))))
    finally:
        for fd in held.values():
            os.close(fd)
    return results


def _lock(lock_dir, node, wait_s):
    fd = fileio.lock_fd(os.path.join(lock_dir, "%s.lock" % node))
    end = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() >= end:
                os.close(fd)
                return None
            time.sleep(0.2)
