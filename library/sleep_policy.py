#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sleep_policy
short_description: Decide which system sleep states a host may enter (S3, s2idle or none)
description:
  - V(deep) (alias V(mem)) allows suspend-to-RAM (ACPI S3); V(s2idle) allows only suspend-to-idle;
    V(none) forbids system sleep.
  - Sets C(/sys/power/mem_sleep) now, writes a systemd-sleep drop-in
    (C(/etc/systemd/sleep.conf.d/fleetnap.conf)) so C(systemctl suspend) uses the same state, and
    with V(none) masks the systemd sleep targets (as C(systemctl mask) does, a link to
    C(/dev/null)), so nothing suspends the host behind the service's back.
  - Asking for a state the host does not offer fails and changes nothing.
  - The first change records the original mem_sleep choice and which targets were masked, so
    O(state=absent) restores them.
version_added: "0.1.0"
author: fleetnap contributors
options:
  allow:
    description: The deepest sleep state allowed. Required with O(state=present).
    type: str
    choices: [deep, mem, s2idle, none]
  mask_targets:
    description: With O(allow=none), mask C(sleep.target), C(suspend.target), C(hibernate.target),
      C(hybrid-sleep.target) and C(suspend-then-hibernate.target).
    type: bool
    default: true
  state:
    description: V(present) applies the policy; V(absent) restores what was there before fleetnap.
    type: str
    choices: [present, absent]
    default: present
  sysfs_root:
    description: Root under which C(/sys) and C(/etc) are found; V(/) is the live host.
    type: path
    default: /
  metrics_dir:
    description:
      - node_exporter textfile collector directory (an absolute path on the host, not under
        O(sysfs_root)). When set, the policy is published in C(fleetnap_sleep_policy.prom) as
        C(fleetnap_sleep_state_offered) and C(fleetnap_sleep_state_allowed) (label C(state) =
        C(deep), C(s2idle)), C(fleetnap_sleep_mem_sleep_mode) (label C(mode), 1 for the
        selected one) and C(fleetnap_sleep_target_masked) (label C(target)), written atomically.
      - With O(state=absent) the file is removed, since fleetnap no longer holds a policy there.
      - The directory is created when missing; a path that exists and is not a directory fails
        before anything is changed.
    type: path
attributes:
  check_mode:
    support: full
    details: Decides and reports C(changed) (the metrics file included), writes nothing.
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - module: cpuidle_qos
"""

EXAMPLES = r"""
- name: Allow S3 (measured resume latency fits the service's budget)
  sleep_policy:
    allow: deep

- name: This host must never sleep
  sleep_policy:
    allow: none

- name: Allow S3 and publish the policy for node_exporter's textfile collector
  sleep_policy:
    allow: deep
    metrics_dir: /var/lib/prometheus/node-exporter

- name: Restore the host's original sleep configuration (and drop the metrics file)
  sleep_policy:
    state: absent
    metrics_dir: /var/lib/prometheus/node-exporter
"""

RETURN = r"""
allow:
  description: The policy in force after the call (null after state=absent).
  returned: always
  type: str
  sample: deep
offered:
  description: What the kernel offers (/sys/power/state and mem_sleep).
  returned: always
  type: dict
  sample: {states: [freeze, mem], mem_sleep_options: [s2idle, deep], mem_sleep: s2idle,
           s3_available: true, s2idle_available: true}
mem_sleep:
  description: The mem_sleep choice after the call.
  returned: always
  type: str
  sample: deep
masked_targets:
  description: Sleep targets masked after the call.
  returned: always
  type: list
  elements: str
  sample: []
metrics_path:
  description: The metrics file written (or removed with O(state=absent)); only with O(metrics_dir).
  returned: when metrics_dir is set
  type: str
  sample: /var/lib/prometheus/node-exporter/fleetnap_sleep_policy.prom
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.persist import STATE_DIR, UNIT_DIR
from ansible.module_utils.fleetnap.prom import render
from ansible.module_utils.fleetnap.sleep import METRICS_FILE, POWER_DIR, SLEEP_TARGETS, policy_metrics, read_sleep
from ansible.module_utils.fleetnap.sysfs import (
    HostFS, HostFsError, SysfsBatch, remove_path, systemd_running, write_file_atomic,
)

TARGETS = SLEEP_TARGETS
DROP_IN = "/etc/systemd/sleep.conf.d/fleetnap.conf"
ORIGINALS = STATE_DIR + "/sleep_policy.orig.json"

DROP_IN_TEXT = {
    "deep": "SuspendState=mem\nSuspendMode=deep\nMemorySleepMode=deep\n",
    "s2idle": "SuspendState=freeze\nSuspendMode=s2idle\nMemorySleepMode=s2idle\n",
    "none": "AllowSuspend=no\nAllowHibernation=no\nAllowSuspendThenHibernate=no\nAllowHybridSleep=no\n",
}


def drop_in_text(allow):
    return ("# Installed by fleetnap (sleep_policy allow=%s).\n"
            "# SuspendMode= is read by systemd < 256, MemorySleepMode= by systemd >= 256.\n"
            "[Sleep]\n%s" % (allow, DROP_IN_TEXT[allow]))


def masked(fs):
    out = []
    for target in TARGETS:
        real = fs.path("%s/%s" % (UNIT_DIR, target))
        if os.path.islink(real) and os.readlink(real) == "/dev/null":
            out.append(target)
    return out


def view(mem_sleep, masks, drop_in):
    return {"mem_sleep": mem_sleep, "masked_targets": sorted(masks), "drop_in": drop_in}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            allow=dict(type="str", choices=["deep", "mem", "s2idle", "none"]),
            mask_targets=dict(type="bool", default=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            sysfs_root=dict(type="path", default="/"),
            metrics_dir=dict(type="path"),
        ),
        required_if=[("state", "present", ["allow"])],
        supports_check_mode=True,
    )
    p = module.params
    fs = HostFS(p["sysfs_root"])
    metrics_path = None
    if p["metrics_dir"]:
        if not os.path.isabs(p["metrics_dir"]):
            module.fail_json(msg="metrics_dir %r must be an absolute path (node_exporter's textfile collector "
                                 "directory, e.g. /var/lib/prometheus/node-exporter)" % p["metrics_dir"])
        if os.path.lexists(p["metrics_dir"]) and not os.path.isdir(p["metrics_dir"]):
            module.fail_json(msg="metrics_dir %s exists and is not a directory; give node_exporter's textfile "
                                 "collector directory or remove that file" % p["metrics_dir"])
        metrics_path = os.path.join(p["metrics_dir"], METRICS_FILE)
    offered = read_sleep(fs)
    if not fs.exists(POWER_DIR + "/state"):
        module.fail_json(msg="%s does not exist: this kernel has no system sleep support (CONFIG_SUSPEND) "
                             "or sysfs_root %s is wrong" % (fs.path(POWER_DIR + "/state"), fs.root))
    originals = fs.read_json(ORIGINALS)
    current_masks = masked(fs)
    current_drop_in = fs.read(DROP_IN)
    allow = "deep" if p["allow"] == "mem" else p["allow"]
    mem_sleep_path = POWER_DIR + "/mem_sleep"

    # Decide.
    if p["state"] == "absent":
        want_mem_sleep = (originals or {}).get("mem_sleep") or offered["mem_sleep"]
        masked_before = (originals or {}).get("masked_targets", current_masks)
        want_masks = [t for t in current_masks if t in masked_before]
        want_drop_in = None
    else:
        if allow == "deep" and not offered["s3_available"]:
            module.fail_json(msg="allow=deep: this host does not offer S3: %s has %s and %s has %s; "
                                 "use allow=s2idle or allow=none"
                             % (fs.path(POWER_DIR + "/state"), offered["states"] or "nothing",
                                fs.path(mem_sleep_path), offered["mem_sleep_options"] or "nothing"),
                             offered=offered)
        if allow == "s2idle" and not offered["s2idle_available"]:
            module.fail_json(msg="allow=s2idle: this host does not offer suspend-to-idle (%s has %s); use allow=none"
                             % (fs.path(POWER_DIR + "/state"), offered["states"] or "nothing"), offered=offered)
        want_mem_sleep = offered["mem_sleep"]
        if allow in ("deep", "s2idle") and allow in offered["mem_sleep_options"]:
            want_mem_sleep = allow
        masked_before = (originals or {}).get("masked_targets", current_masks)
        if allow == "none" and p["mask_targets"]:
            want_masks = sorted(set(current_masks) | set(TARGETS))
        else:
            want_masks = [t for t in current_masks if t in masked_before]
        want_drop_in = drop_in_text(allow).strip()

    batch = SysfsBatch(fs)
    if want_mem_sleep and want_mem_sleep != offered["mem_sleep"]:
        batch.add(mem_sleep_path, want_mem_sleep, offered["mem_sleep"])
    masks_changed = sorted(want_masks) != sorted(current_masks)
    drop_in_changed = (want_drop_in or None) != (current_drop_in or None)
    changed = bool(len(batch)) or masks_changed or drop_in_changed
    if p["state"] == "absent" and originals is not None:
        changed = True
    try:
        batch.check()
    except HostFsError as exc:
        module.fail_json(msg=str(exc), offered=offered)

    metrics_text = None
    metrics_changed = False
    if metrics_path:
        try:
            with open(metrics_path) as fobj:
                metrics_before = fobj.read()
        except (IOError, OSError):
            metrics_before = None
        if p["state"] == "present":
            metrics_text = render(policy_metrics(allow, offered, want_mem_sleep, want_masks))
        metrics_changed = metrics_before != metrics_text

    if changed and not module.check_mode:
        try:
            if originals is None and p["state"] == "present":
                write_file_atomic(fs, ORIGINALS, json.dumps(
                    {"mem_sleep": offered["mem_sleep"], "masked_targets": current_masks}) + "\n", 0o600, module)
            batch.apply()
            if want_drop_in is None:
                remove_path(fs, DROP_IN)
            else:
                write_file_atomic(fs, DROP_IN, drop_in_text(allow), 0o644, module)
            for target in TARGETS:
                link = fs.path("%s/%s" % (UNIT_DIR, target))
                if target in want_masks and target not in current_masks:
                    if not os.path.isdir(os.path.dirname(link)):
                        os.makedirs(os.path.dirname(link), 0o755)
                    if os.path.lexists(link):
                        module.fail_json(msg="cannot mask %s: %s exists and is not a mask; remove it first"
                                         % (target, link))
                    os.symlink("/dev/null", link)
                elif target in current_masks and target not in want_masks:
                    os.unlink(link)
            if p["state"] == "absent":
                remove_path(fs, ORIGINALS)
            if masks_changed and systemd_running(fs):
                module.run_command([module.get_bin_path("systemctl", required=True), "daemon-reload"],
                                   check_rc=True)
        except (HostFsError, OSError, IOError) as exc:
            module.fail_json(msg="applying the sleep policy failed: %s" % exc, offered=offered)

    if metrics_changed and not module.check_mode:
        try:
            if metrics_text is None:
                os.unlink(metrics_path)
            else:
                write_file_atomic(HostFS("/"), metrics_path, metrics_text, 0o644, module)
        except (OSError, IOError) as exc:
            module.fail_json(msg="the sleep policy is in force, but %s %s failed: %s; check metrics_dir"
                             % ("removing" if metrics_text is None else "writing", metrics_path, exc),
                             offered=offered)

    result = dict(changed=changed or metrics_changed, allow=allow if p["state"] == "present" else None,
                  offered=offered, mem_sleep=want_mem_sleep, masked_targets=sorted(want_masks))
    if metrics_path:
        result["metrics_path"] = metrics_path
    if module._diff:
        result["diff"] = {"before": view(offered["mem_sleep"], current_masks, current_drop_in),
                          "after": view(want_mem_sleep, want_masks, want_drop_in)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
