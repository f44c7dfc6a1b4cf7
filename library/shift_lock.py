#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: shift_lock
short_description: An exclusive lock file on the controller, owned by the running ansible-playbook
description:
  - Takes or releases a lock file so that two operations (two gear shifts) cannot overlap.
  - The lock file appears complete or not at all (written to a temporary file, synced, then
    hard-linked into place, which fails when the lock exists), and every take or release
    decides under an exclusive C(flock) of C(PATH.guard), so two takers can never both own it.
    It holds the owner's PID, the
    PID's start time (from C(/proc/PID/stat), so a recycled PID is not mistaken for the owner),
    the owner's command line and the time it was taken.
  - The owner is the C(ansible-playbook) main process this module runs under (found by walking up
    the process tree past Ansible's forked workers, which share its command line), or O(pid).
  - A lock held by a live process refuses with a message naming it. A lock whose owner is gone
    (interrupted run; a zombie counts as gone) or that is unreadable is taken over with a warning.
  - Releasing removes the file only when this run owns it (or with O(force=true)).
  - Run it on the controller (C(delegate_to=localhost), C(run_once=true)).
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
options:
  path:
    description: The lock file. Its directory is created when missing.
    type: path
    required: true
  state:
    description: V(present) takes the lock, V(absent) releases it.
    type: str
    choices: [present, absent]
    default: present
  pid:
    description: PID of the owner. Default the C(ansible-playbook) process above this module.
    type: int
  purpose:
    description: Free text stored in the lock (shown to whoever is refused).
    type: str
    default: ""
  force:
    description: With O(state=absent), remove the lock even when another live process holds it.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads the lock and reports (or refuses) as it would; writes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
notes:
  - Needs C(/proc) (Linux) to tell live owners from dead ones.
"""

EXAMPLES = r"""
- name: Only one gear shift at a time
  shift_lock:
    path: "{{ playbook_dir }}/../artifacts/gear/shift.lock"
    purpose: gear shift to gear 1
  delegate_to: localhost
  run_once: true

- name: Release it
  shift_lock:
    path: "{{ playbook_dir }}/../artifacts/gear/shift.lock"
    state: absent
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
owner:
  description: The lock's owner after the call (pid, start_time, cmdline, since, purpose); empty when released.
  returned: always
  type: dict
took_over:
  description: The previous owner (a dead process) whose stale lock was replaced.
  returned: when a stale lock was taken over
  type: dict
held:
  description: The lock belongs to this run after the call.
  returned: always
  type: bool
"""

import json
import os
import time

import fcntl

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.validate import check_params, number, path as path_check, text

CHECKS = {
    "path": path_check(),
    "pid": number(lo=1, hi=2 ** 22, integer=True),
    "purpose": text(max_len=500),
}


def _stat(pid):
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


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _playbook_ancestor():
    """The ansible-playbook main process above this module.

    Ansible's workers are forks of the main process with the same command line, and a worker
    ends with its task: walk on up while the parent runs the same command line.
    """
    pid = os.getppid()
    while pid > 1:
        args = _cmdline(pid)
        st = _stat(pid)
        if st is None:
            return None
        if any(os.path.basename(a) == "ansible-playbook" for a in args[:2]):
            while st[0] > 1 and _cmdline(st[0]) == args:
                pid = st[0]
                st = _stat(pid)
                if st is None:
                    return None
            return pid
        pid = st[0]
    return None


def _alive(owner):
    try:
        pid = int(owner.get("pid"))
    except (TypeError, ValueError):
        return False
    st = _stat(pid)
    return st is not None and st[1] == owner.get("start_time")


def _read(path):
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


def _create(module, path, me):
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
        module.fail_json(msg="cannot create lock %s: %s (is the directory writable?)" % (path, e), held=False)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _describe(owner):
    return "PID %s (%s) since %s%s" % (owner.get("pid"), " ".join(owner.get("cmdline", []))[:160] or "?",
                                       owner.get("since", "?"),
                                       ", for: %s" % owner["purpose"] if owner.get("purpose") else "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            pid=dict(type="int"),
            purpose=dict(type="str", default=""),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    path = p["path"]
    pid = p["pid"] if p["pid"] is not None else _playbook_ancestor()
    if pid is None:
        module.fail_json(msg="shift_lock: no ansible-playbook process above this module (PID %d); run it from "
                             "ansible-playbook on the controller (delegate_to: localhost) or set pid" % os.getpid())
    st = _stat(pid)
    if st is None:
        module.fail_json(msg="shift_lock: owner PID %d is not a running process" % pid)
    me = {"pid": pid, "start_time": st[1], "cmdline": _cmdline(pid),
          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "purpose": p["purpose"]}
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        if module.check_mode:
            module.exit_json(changed=p["state"] == "present", held=p["state"] == "present",
                             owner=me if p["state"] == "present" else {})
        try:
            os.makedirs(directory, 0o755)
        except OSError as e:
            module.fail_json(msg="cannot create the lock's directory %s: %s" % (directory, e), held=False)
    if module.check_mode:       # decides, writes nothing (not even the guard)
        module.exit_json(**_decide(module, p, path, pid, st, me))
    # Every decision about the lock is taken holding the guard: read, decide and write cannot
    # interleave between two takers (or a taker and a releaser).
    try:
        guard = os.open(path + ".guard", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        module.fail_json(msg="cannot open the lock guard %s.guard: %s" % (path, e), held=False)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        result = _decide(module, p, path, pid, st, me)
    finally:
        os.close(guard)
    module.exit_json(**result)


def _decide(module, p, path, pid, st, me):
    current = _read(path)
    mine = current is not None and current.get("pid") == pid and current.get("start_time") == st[1]

    if p["state"] == "absent":
        if current is None:
            return {"changed": False, "held": False, "owner": {}}
        if not mine and not p["force"] and _alive(current):
            module.fail_json(msg="lock %s belongs to another live process, %s; not removing it (force: true "
                                 "removes it anyway)" % (path, _describe(current)), owner=current, held=False)
        if not module.check_mode:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                module.fail_json(msg="cannot remove lock %s: %s" % (path, e), held=True)
        return {"changed": True, "held": False, "owner": {}}

    if mine:
        return {"changed": False, "held": True, "owner": current}
    result = {"changed": True, "held": True, "owner": me}
    if current is not None:
        if _alive(current):
            module.fail_json(msg="another shift holds the lock %s: %s. Wait until it finishes; if that process is "
                                 "gone the next run takes the lock over" % (path, _describe(current)),
                             owner=current, held=False)
        result["took_over"] = current
        module.warn("lock %s was left by %s, which is no longer running (an interrupted run): taking it over"
                    % (path, _describe(current)))
    if module.check_mode:
        return result
    if current is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if not _create(module, path, me):
        other = _read(path) or {}
        module.fail_json(msg="another process created the lock %s at the same moment: %s" % (path, _describe(other)),
                         owner=other, held=False)
    return result


if __name__ == "__main__":
    main()
