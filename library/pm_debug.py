#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pm_debug
short_description: Switch the kernel's suspend/resume debug output on or off
description:
  - Sets C(/sys/power/pm_print_times) (log every device suspend/resume callback with its
    duration, what suspend/resume timelines are built from) and C(/sys/power/pm_debug_messages).
  - Both are checked before either is written; a failed write rolls the other back.
  - Returns the values before the call so a playbook can restore them afterwards.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.sysfs_root
  - fleetnap.power.attributes
options:
  pm_print_times:
    description: Value for C(/sys/power/pm_print_times). Omit to leave it alone.
    type: bool
  pm_debug_messages:
    description: Value for C(/sys/power/pm_debug_messages). Omit to leave it alone.
    type: bool
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
notes:
  - The files exist only in kernels built with C(CONFIG_PM_SLEEP_DEBUG) (Debian's kernels are).
seealso:
  - module: pm_timeline
"""

EXAMPLES = r"""
- name: Log every device callback during suspend/resume
  pm_debug:
    pm_print_times: true
  register: fleetnap__pm_debug

- name: Put it back as it was
  pm_debug:
    pm_print_times: "{{ fleetnap__pm_debug.before.pm_print_times }}"
"""

RETURN = r"""
before:
  description: Values before the call (null where the file does not exist).
  returned: always
  type: dict
  sample: {pm_print_times: false, pm_debug_messages: false}
after:
  description: Values after the call (or that would be, in check mode).
  returned: always
  type: dict
  sample: {pm_print_times: true, pm_debug_messages: false}
"""

import os

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.sleep import POWER_DIR
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, SysfsBatch
from ansible.module_utils.fleetnap.validate import ParamError, ansible_module, check_params, directory

KNOBS = ("pm_print_times", "pm_debug_messages")

CHECKS = {
    "sysfs_root": directory(),      # absolute, no '..', an existing directory
}


def read_knob(fs, path):
    """'0' or '1', None when the knob does not exist; ParamError naming the file otherwise."""
    real = fs.path(path)
    if not os.path.lexists(real):
        return None
    if os.path.isdir(real):
        raise ParamError("%s is a directory, not a PM debug knob: is sysfs_root (%s) right?" % (real, fs.root))
    try:
        value = fileio.read_text(real, 64, fs.root, "PM debug knob").strip()
    except (IOError, OSError) as exc:     # the file layer names the file and what is wrong with it
        raise ParamError("%s" % exc if isinstance(exc, fileio.UnsafeFileError)
                         else "cannot read PM debug knob %s: %s" % (real, exc.strerror or exc))
    if value not in ("0", "1"):
        raise ParamError("%s holds %r, not 0 or 1: is sysfs_root (%s) right?" % (real, value, fs.root))
    return value


def main():
    module = ansible_module(
        argument_spec=dict(
            pm_print_times=dict(type="bool"),
            pm_debug_messages=dict(type="bool"),
            sysfs_root=dict(type="path", default="/"),
        ),
        required_one_of=[KNOBS],
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    fs = HostFS(module.params["sysfs_root"])
    before, after = {}, {}
    batch = SysfsBatch(fs)
    for knob in KNOBS:
        path = "%s/%s" % (POWER_DIR, knob)
        try:
            current = read_knob(fs, path)
        except ParamError as exc:
            module.fail_json(msg=str(exc))
        before[knob] = None if current is None else current == "1"
        wanted = module.params[knob]
        after[knob] = before[knob] if wanted is None else wanted
        if wanted is None:
            continue
        if current is None:
            module.fail_json(msg="%s does not exist: this kernel was built without CONFIG_PM_SLEEP_DEBUG "
                                 "(or sysfs_root %s is wrong); suspend/resume debug output is not available"
                                 % (fs.path(path), fs.root), before=before)
        batch.add(path, "1" if wanted else "0", current)
    changed = bool(len(batch))
    try:
        batch.check()
        if changed and not module.check_mode:
            batch.apply()
    except HostFsError as exc:
        module.fail_json(msg=str(exc), before=before)
    result = dict(changed=changed, before=before, after=after)
    if module._diff:
        result["diff"] = {"before": before, "after": after}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
