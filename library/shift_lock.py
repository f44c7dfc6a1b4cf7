#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: shift_lock
short_description: An exclusive lock file on the controller, owned by the running ansible-playbook
description:
  - Internal. A step of the gear_shift role (its lock phase, and every phase that releases the
    lock), documented for those who compose the role's phases themselves; a playbook of one's own
    calls C(fleetnap.power.gear_shift).
  - Takes or releases a lock file so that two operations (two gear shifts) cannot overlap.
  - The lock file appears complete or not at all (written to a temporary file created exclusively
    with an unpredictable name, so a link planted beside the lock is never written through,
    synced, then hard-linked into place, which fails when the lock exists), and every take or release
    decides under an exclusive C(flock) of C(PATH.guard), so two takers can never both own it.
    It holds the owner's PID, the
    PID's start time (from C(/proc/PID/stat), so a recycled PID is not mistaken for the owner),
    the owner's command line and the time it was taken.
  - The owner is the C(ansible-playbook) main process this module runs under (found by walking up
    the process tree past Ansible's forked workers, which share its command line), or O(pid).
  - A lock held by a live process refuses with a message naming it. A lock whose owner is gone
    (interrupted run; a zombie counts as gone) or that is not JSON is taken over with a warning.
  - A lock that is a symbolic link (a dangling one included), a FIFO or another special file, or a
    JSON object whose fields are not what this module writes (a C(cmdline) that is a number) is
    refused with a message naming the file and the field; remove it by hand.
  - Releasing removes the file only when this run owns it (or with O(force=true)).
  - With O(lease), the owner is not a process but a lease - a token (O(lease_id), or a new random one,
    returned in RV(owner)) and an expiry O(lease) seconds from now. That is the lock of a shift that
    spans several processes, as an AWX workflow runs it - the plan job takes it with a lease, and
    the record job, given the token, renews it (taking it with the same token) and releases it
    (O(state=absent) with O(lease_id)). A lease is held until it expires or is released; an expired
    lease is taken over as a dead owner's lock is. A process lock that is alive refuses a lease and
    the other way round.
  - Run it on the controller (C(delegate_to=localhost), C(run_once=true)).
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
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
    description: With O(state=absent), remove the lock even when another live owner holds it.
    type: bool
    default: false
  lease:
    description:
      - With O(state=present), hold the lock as a lease of this many seconds (1 to 604800) instead
        of by the C(ansible-playbook) process; taking it again with the same O(lease_id) renews it.
    type: int
  lease_id:
    description:
      - The lease's token (letters, digits, C(.), C(_), C(-); at most 64, a letter or digit first).
        With O(state=present) and O(lease), default a new random one; with O(state=absent), release
        the lease of this token (a lock of another owner is refused unless it expired).
    type: str
attributes:
  check_mode:
    support: full
    details:
      - Reads the lock and reports (or refuses) as it would; writes nothing.
  diff_mode:
    support: none
  platform:
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

- name: A lock for a shift that spans jobs (an AWX workflow's plan job), held two hours
  shift_lock:
    path: /var/lib/fleetnap/gear/shift.lock
    lease: 7200
    purpose: gear shift to gear 1 (AWX workflow)
  delegate_to: localhost
  run_once: true
  register: lease

- name: Release it in the record job (the token travelled as a workflow artifact)
  shift_lock:
    path: /var/lib/fleetnap/gear/shift.lock
    state: absent
    lease_id: "{{ lease.owner.token }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
owner:
  description:
    - The lock's owner after the call (pid, start_time, cmdline, since, purpose; a lease's token, since, expires
      (seconds since the epoch), purpose); empty when released.
  returned: always
  type: dict
took_over:
  description: The previous owner (a dead process, or an expired lease) whose stale lock was replaced.
  returned: when a stale lock was taken over
  type: dict
renewed:
  description: The lease of O(lease_id) was held already and now expires O(lease) seconds from now.
  returned: when a lease was renewed
  type: bool
held:
  description: The lock belongs to this run after the call.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.shiftlock import TOKEN, call
from ansible.module_utils.fleetnap.validate import check_params, name, number, path as path_check, text

CHECKS = {
    "path": path_check(),
    "pid": number(lo=1, hi=2 ** 22, integer=True),
    "purpose": text(max_len=500),
    "lease": number(lo=1, hi=604800, integer=True),
    "lease_id": name(TOKEN.pattern, "a token (letters, digits, '.', '_', '-'; at most 64, a letter or digit first)"),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            pid=dict(type="int"),
            purpose=dict(type="str", default=""),
            force=dict(type="bool", default=False),
            lease=dict(type="int"),
            lease_id=dict(type="str"),
        ),
        mutually_exclusive=[("pid", "lease"), ("pid", "lease_id")],
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    module.exit_json(**call(module, module.params))


if __name__ == "__main__":
    main()
