# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gear-shift lock file on the controller (shift_lock takes and releases it; gear_record
releases it after the record is written): the owner is the ansible-playbook main process, told
apart from a recycled PID by its start time, or a lease (a token and an expiry: a shift that spans
several jobs, as an AWX workflow runs it, whose plan job takes the lock and whose record job
releases it); every decision is taken under an exclusive flock of PATH.guard. Standard library only
(Linux: /proc)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat as stat_mod
import time
import uuid

from ansible.module_utils.fleetnap import fileio, parse


class LockError(Exception):
    """A lock that cannot be taken or released; ``owner`` and ``held`` as shift_lock returns them."""

    def __init__(self, msg, owner=None, held=False):
        super(LockError, self).__init__(msg)
        self.owner = owner or {}
        self.held = held


def stat(pid):
    """(ppid, start_time) of a live pid, or None (no such process, or a zombie: it has exited)."""
    try:
        data = fileio.read_proc(pid, "stat").decode("utf-8", "replace")
        rest = data[data.rindex(")") + 2:].split()
        if rest[0] in ("Z", "X"):
            return None
        return int(rest[1]), int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def cmdline(pid):
    try:
        return [a.decode("utf-8", "replace") for a in fileio.read_proc(pid, "cmdline").split(b"\0") if a]
    except (OSError, ValueError):
        return []


def playbook_ancestor():
    """The ansible-playbook main process above this module.

    Ansible's workers are forks of the main process with the same command line, and a worker
    ends with its task: walk on up while the parent runs the same command line.
    """
    pid = os.getppid()
    while pid > 1:
        args = cmdline(pid)
        st = stat(pid)
        if st is None:
            return None
        if any(os.path.basename(a) == "ansible-playbook" for a in args[:2]):
            while st[0] > 1 and cmdline(st[0]) == args:
                pid = st[0]
                st = stat(pid)
                if st is None:
                    return None
            return pid
        pid = st[0]
    return None


TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def is_lease(owner):
    """A lock held by a lease (a token and an expiry), not by a process."""
    return isinstance(owner, dict) and "token" in owner


def alive(owner, now=None):
    """Whether the lock's owner still holds it: its process runs (the same start time), or its lease
    has not expired."""
    if is_lease(owner):
        expires = owner.get("expires")
        return isinstance(expires, int) and not isinstance(expires, bool) and \
            (time.time() if now is None else now) < expires
    pid = owner.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int):
        return False
    st = stat(pid)
    return st is not None and st[1] == owner.get("start_time")


# What each field of a lock must be (shift_lock writes them so); a lock with a field of another
# shape was not written by fleetnap, and is refused naming the field (never guessed at).
FIELDS = {
    "pid": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2 ** 31),
    "start_time": ("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "cmdline": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v)),
    "since": ("a string", lambda v: isinstance(v, str)),
    "purpose": ("a string", lambda v: isinstance(v, str)),
    "token": ("a token (letters, digits, '.', '_', '-'; at most 64)", lambda v: isinstance(v, str) and bool(TOKEN.match(v))),
    "expires": ("a whole number (seconds since the epoch)",
                lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 40),
}


def read(path):
    """The lock's owner record, None without a lock. A lock that is not UTF-8 JSON text (written by
    hand or by something else) has no live owner to respect: {'pid': None, 'raw': ...}. LockError
    naming the file for a lock that must not be used or guessed at: a symbolic link (a dangling
    one included), a FIFO or other special file, one too large, or a JSON object whose fields are
    not what shift_lock writes (issue 32: a ``cmdline`` that is a number)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LockError("cannot read lock %s: %s" % (path, e.strerror or e))
    if stat_mod.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        gone = "" if os.path.exists(path) else ", which does not exist (a dangling link)"
        raise LockError("lock %s is a symbolic link to %s%s: shift_lock never writes a link; not a lock of a "
                        "running shift. Remove %s and run again" % (path, target, gone, path))
    try:
        data = fileio.read_bytes(path, fileio.VALUE, what="lock")
    except FileNotFoundError:
        return None
    except fileio.UnsafeFileError as e:
        raise LockError("%s; remove it and run again" % e)
    except OSError as e:
        raise LockError("cannot read lock %s: %s" % (path, e.strerror or e))
    text = data.decode("utf-8", "replace")
    try:
        doc = parse.loads(data, "lock %s" % path, limit=fileio.VALUE)
    except parse.ParseError as e:
        # Not JSON at all (empty, cut short, not UTF-8): nothing names an owner, taken over. JSON
        # that names one in a way fleetnap never writes (NaN, a 400-digit number, 600 levels deep,
        # a lone surrogate) is refused: guessing its owner could take a live shift's lock.
        if "is not valid JSON" in str(e) or "is not UTF-8" in str(e):
            return {"pid": None, "raw": text[:200]}
        raise LockError("%s: not a lock shift_lock wrote; remove it and run again" % e)
    if not isinstance(doc, dict):
        return {"pid": None, "raw": text[:200]}
    for field, (kind, ok) in FIELDS.items():
        if field in doc and not ok(doc[field]):
            raise LockError("lock %s: field %s must be %s, got %s: not a lock shift_lock wrote; remove it and run "
                            "again" % (path, field, kind, repr(doc[field])[:60]))
    return doc


def create(path, me):
    """Put a complete lock file at path, or return False when one exists: the lock is written to
    an exclusively created temporary file with an unpredictable name (never through a planted
    link), fsynced, hard-linked to path (link fails if path exists), and the directory fsynced
    (fileio.create_exclusive)."""
    problem = fileio.write_problem(path)
    if problem:     # an append-only directory would keep the temporary file and, later, the lock
        raise LockError("cannot create lock %s: %s" % (path, problem), held=False)
    try:
        return fileio.create_exclusive(path, json.dumps(me, indent=2) + "\n", 0o644)
    except (OSError, fileio.HostFsError) as e:
        raise LockError("cannot create lock %s: %s (is the directory writable?)" % (path, e), held=False)


def describe(owner):
    if owner.get("pid") is None and "raw" in owner:
        return "an unreadable lock (not a JSON object: %r)" % owner["raw"][:60]
    if is_lease(owner):
        return "the lease %s since %s until %s%s" % (
            owner.get("token"), owner.get("since", "?"),
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(owner["expires"])) if isinstance(owner.get("expires"), int) else "?",
            ", for: %s" % owner["purpose"] if owner.get("purpose") else "")
    return "PID %s (%s) since %s%s" % (owner.get("pid"), " ".join(owner.get("cmdline") or [])[:160] or "?",
                                       owner.get("since", "?"),
                                       ", for: %s" % owner["purpose"] if owner.get("purpose") else "")


@contextlib.contextmanager
def guarded(path):
    """Hold the exclusive flock of PATH.guard (read, decide and write cannot interleave between
    two takers, or a taker and a releaser)."""
    try:
        guard = fileio.lock_fd(path + ".guard", 0o644)
    except (OSError, fileio.HostFsError) as e:
        plain = isinstance(e, OSError) and e.strerror and not isinstance(e, fileio.HostFsError)
        raise LockError("cannot open the lock guard %s.guard: %s (a link or a special file there is not "
                        "followed: remove it)" % (path, e.strerror if plain else e))
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        yield
    finally:
        os.close(guard)


def release(path, pid, start_time, force=False, check=False, token=None):
    """Remove the lock when (pid, start_time) owns it - or, given a token, when it is that token's
    lease -, its owner is gone (or its lease expired), or ``force``: {'changed', 'held', 'owner'};
    LockError when another live owner holds it. Call it guarded."""
    current = read(path)
    if current is None:
        return {"changed": False, "held": False, "owner": {}}
    if token is not None:
        mine = is_lease(current) and current.get("token") == token
    else:
        mine = not is_lease(current) and current.get("pid") == pid and current.get("start_time") == start_time
    if not mine and not force and alive(current):
        raise LockError("lock %s belongs to another live %s, %s; not removing it (force: true removes it anyway)"
                        % (path, "lease" if is_lease(current) else "process", describe(current)),
                        owner=current, held=False)
    if not check:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise LockError("cannot remove lock %s: %s" % (path, e), held=True)
    return {"changed": True, "held": False, "owner": {}}


def call(module, p):
    """What M(shift_lock) does with its checked options ``p`` (path, state, pid, purpose, force,
    lease, lease_id): the result ({'changed', 'held', 'owner'} and 'took_over' / 'renewed'), or
    module.fail_json naming what is wrong, before anything is written. gear_shift_prepare takes
    its lock by this too."""
    path = p["path"]
    now = time.time()
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    leased = p["lease"] is not None or p["lease_id"] is not None
    if leased:
        if p["state"] == "present" and p["lease"] is None:
            module.fail_json(msg="option lease_id: taking a lease needs option lease (its length in seconds)", held=False)
        if p["state"] == "absent" and p["lease_id"] is None:
            module.fail_json(msg="option lease: releasing a lease needs option lease_id (the lease's token)", held=False)
        pid, st = None, None
        me = {"token": p["lease_id"] or uuid.uuid4().hex, "since": since, "expires": int(now) + (p["lease"] or 0),
              "purpose": p["purpose"]}
    else:
        pid = p["pid"] if p["pid"] is not None else playbook_ancestor()
        if pid is None:
            module.fail_json(msg="shift_lock: no ansible-playbook process above this module (PID %d); run it from "
                                 "ansible-playbook on the controller (delegate_to: localhost) or set pid" % os.getpid())
        st = stat(pid)
        if st is None:
            module.fail_json(msg="shift_lock: owner PID %d is not a running process" % pid)
        me = {"pid": pid, "start_time": st[1], "cmdline": cmdline(pid), "since": since, "purpose": p["purpose"]}
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        if module.check_mode:
            return {"changed": p["state"] == "present", "held": p["state"] == "present",
                    "owner": me if p["state"] == "present" else {}}
        try:
            # exist_ok: another taker may create it between the check above and this call (the
            # race test's takers did); a file there is still refused
            os.makedirs(directory, 0o755, exist_ok=True)
        except OSError as e:
            module.fail_json(msg="cannot create the lock's directory %s: %s" % (directory, e), held=False)
    # Every decision about the lock is taken holding the guard: read, decide and write cannot
    # interleave between two takers (or a taker and a releaser). Check mode decides and writes
    # nothing (not even the guard).
    try:
        if module.check_mode:
            result = _decide(module, p, path, pid, st, me)
        else:
            with guarded(path):
                result = _decide(module, p, path, pid, st, me)
    except LockError as e:
        module.fail_json(msg=str(e), owner=e.owner, held=e.held)
    return result


def _decide(module, p, path, pid, st, me):
    if p["state"] == "absent":
        return release(path, pid, st[1] if st else None, force=p["force"], check=module.check_mode, token=p["lease_id"])
    current = read(path)
    if "token" in me:
        mine = is_lease(current) and current.get("token") == me["token"]
    else:
        mine = current is not None and not is_lease(current) and current.get("pid") == pid and \
            current.get("start_time") == st[1]

    if mine and "token" not in me:
        return {"changed": False, "held": True, "owner": current}
    result = {"changed": True, "held": True, "owner": me}
    if mine:        # the same lease taken again: renewed from now, since it was first taken
        me["since"] = current.get("since", me["since"])
        result["renewed"] = True
    elif current is not None:
        if alive(current):
            module.fail_json(msg="another shift holds the lock %s: %s. Wait until it finishes; if that %s the next run "
                                 "takes the lock over" % (path, describe(current), "lease expires," if is_lease(current)
                                                          else "process is gone"),
                             owner=current, held=False)
        result["took_over"] = current
        module.warn("lock %s was left by %s, which %s: taking it over"
                    % (path, describe(current), "has expired" if is_lease(current)
                       else "is no longer running (an interrupted run)"))
    if module.check_mode:
        return result
    if current is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if not create(path, me):
        other = read(path) or {}
        module.fail_json(msg="another process created the lock %s at the same moment: %s" % (path, describe(other)),
                         owner=other, held=False)
    return result
