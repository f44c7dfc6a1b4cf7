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
  - The lock file is created atomically (C(O_CREAT|O_EXCL)) and holds the owner's PID, the
    PID's start time (from C(/proc/PID/stat), so a recycled PID is not mistaken for the owner),
    the owner's command line and the time it was taken.
  - The owner is the C(ansible-playbook) main process this module runs under (found by walking up
    the process tree past Ansible's forked workers, which share its command line), or O(pid).
  - A lock held by a live process refuses with a message naming it. A lock whose owner is gone
    (interrupted run) is taken over with a warning.
  - Releasing removes the file only when this run owns it (or with O(force=true)).
  - Run it on the controller (C(delegate_to=localhost), C(run_once=true)).
version_added: "0.1.0"
author:
  - fleetnap contributors
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
    support: none
  platform:
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

from ansible.module_utils.basic import AnsibleModule


def _stat(pid):
    """(ppid, start_time) of a live pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            data = fh.read()
    except (OSError, ValueError):
        return None
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[19])


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
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else {"pid": None, "raw": text[:200]}
    except ValueError:
        # A half-written lock (a crash between create and write) has no live owner to respect.
        return {"pid": None, "raw": text[:200]}


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
    current = _read(path)
    mine = current is not None and current.get("pid") == pid and current.get("start_time") == st[1]

    if p["state"] == "absent":
        if current is None:
            module.exit_json(changed=False, held=False, owner={})
        if not mine and not p["force"] and _alive(current):
            module.fail_json(msg="lock %s belongs to another live process, %s; not removing it (force: true "
                                 "removes it anyway)" % (path, _describe(current)), owner=current, held=False)
        if not module.check_mode:
            os.unlink(path)
        module.exit_json(changed=True, held=False, owner={})

    if mine:
        module.exit_json(changed=False, held=True, owner=current)
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
        module.exit_json(**result)
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    if current is not None:
        # Replace the stale lock atomically: rename it aside (only one taker wins the rename).
        aside = "%s.stale.%d" % (path, os.getpid())
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            pass
        else:
            moved = _read(aside) or {}
            if (moved.get("pid"), moved.get("start_time")) != (current.get("pid"), current.get("start_time")):
                # Another run replaced the stale lock first: put its lock back and refuse.
                os.rename(aside, path)
                module.fail_json(msg="another shift took the stale lock %s over first: %s" % (path, _describe(moved)),
                                 owner=moved, held=False)
            os.unlink(aside)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        other = _read(path) or {}
        module.fail_json(msg="another shift took the lock %s at the same moment: %s" % (path, _describe(other)),
                         owner=other, held=False)
    except OSError as e:
        module.fail_json(msg="cannot create lock %s: %s (is the directory writable?)" % (path, e))
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(me, indent=2) + "\n")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
