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
        nodes = job.get("nodes_resume", "")
        if not isinstance(nodes, str):
            raise RequestError("resume file %s: jobs[%d].nodes_resume is not a hostlist" % (path, i))
        try:
            out[str(job_id)] = hostlist.expand(nodes) if nodes else []
        except hostlist.HostlistError as exc:
            raise RequestError("resume file %s: jobs[%d].nodes_resume: %s" % (path, i, exc))
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
            null = fileio.open_device(os.devnull, "r+b")
            for fd in (0, 1, 2):
                os.dup2(null.fileno(), fd)
            os.closerange(3, wfd)
            os.closerange(wfd + 1, 65536)
            os.set_inheritable(wfd, False)
            os.chdir(cwd)
            try:
                os.execve(argv[0], argv, environ if environ is not None else os.environ)
            except OSError as exc:
                os.write(wfd, b"exec:%d\n" % exc.errno)
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
    out = b"".join(chunks).decode("ascii", "replace").split()
    if not out or not out[0].isdigit():
        raise OSError("the runner could not be started (fork failed)")
    if len(out) > 1 and out[1].startswith("exec:"):
        errno_ = int(out[1][5:])
        raise OSError(errno_, "the runner %s could not be started: %s" % (argv[0], os.strerror(errno_)))
    return int(out[0])
