# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gear-shift lock file on the controller (shift_lock takes and releases it; gear_record
releases it after the record is written): the owner is the ansible-playbook main process, told
apart from a recycled PID by its start time; every decision is taken under an exclusive flock of
PATH.guard. Standard library only (Linux: /proc)."""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import json
import os

__metaclass__ = type


class LockError(Exception):
    """A lock that cannot be taken or released; ``owner`` and ``held`` as shift_lock returns them."""

    def __init__(self, msg, owner=None, held=False):
        super(LockError, self).__init__(msg)
        self.owner = owner or {}
        self.held = held


def stat(pid):
    """(ppid, start_time) of a live pid, or None (no such process, or a zombie: it has exited)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
        rest = data[data.rindex(")") + 2:].split()
        if rest[0] in ("Z", "X"):
            return None
        return int(rest[1]), int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
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


def alive(owner):
    try:
        pid = int(owner.get("pid"))
    except (TypeError, ValueError):
        return False
    st = stat(pid)
    return st is not None and st[1] == owner.get("start_time")


def read(path):
    """The lock's owner record, None without a lock; an unreadable lock (not UTF-8, not JSON, not
    an object: written by hand or by something else) has no live owner to respect."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(65536)
    except FileNotFoundError:
        return None
    text = data.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return {"pid": None, "raw": text[:200]}
    return doc if isinstance(doc, dict) else {"pid": None, "raw": text[:200]}


def create(path, me):
    """Put a complete lock file at path, or return False when one exists: write a temporary file,
    fsync it, hard-link it to path (link fails if path exists), fsync the directory."""
    directory = os.path.dirname(path) or "."
    tmp = "%s.new.%d" % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(me, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return True
    except OSError as e:
        raise LockError("cannot create lock %s: %s (is the directory writable?)" % (path, e), held=False)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def describe(owner):
    return "PID %s (%s) since %s%s" % (owner.get("pid"), " ".join(owner.get("cmdline", []))[:160] or "?",
                                       owner.get("since", "?"),
                                       ", for: %s" % owner["purpose"] if owner.get("purpose") else "")


@contextlib.contextmanager
def guarded(path):
    """Hold the exclusive flock of PATH.guard (read, decide and write cannot interleave between
    two takers, or a taker and a releaser)."""
    try:
        guard = os.open(path + ".guard", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise LockError("cannot open the lock guard %s.guard: %s" % (path, e))
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        yield
    finally:
        os.close(guard)


def release(path, pid, start_time, force=False, check=False):
    """Remove the lock when (pid, start_time) owns it, its owner is gone, or ``force``:
    {'changed', 'held', 'owner'}; LockError when another live process holds it. Call it guarded."""
    current = read(path)
    if current is None:
        return {"changed": False, "held": False, "owner": {}}
    mine = current.get("pid") == pid and current.get("start_time") == start_time
    if not mine and not force and alive(current):
        raise LockError("lock %s belongs to another live process, %s; not removing it (force: true "
                        "removes it anyway)" % (path, describe(current)), owner=current, held=False)
    if not check:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise LockError("cannot remove lock %s: %s" % (path, e), held=True)
    return {"changed": True, "held": False, "owner": {}}
