# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The system sleep policy (module sleep_policy) as plan / apply / result steps.

``sleep_policy`` is these three steps in a row; ``fleetnap_profile`` plans the C-state gate and
the sleep policy first (so bad input anywhere changes nothing) and then applies both.

    plan = plan_sleep(module, params)       # reads, validates, decides; may fail_json, writes nothing
    changed = apply_sleep(module, plan)     # writes (nothing in check mode); may fail_json
    result = sleep_result(module, plan, changed)   # the module's return values, diff included

``params`` holds the keys of SLEEP_ARGS.
"""

from __future__ import annotations

import json
import os

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.persist import STATE_DIR, UNIT_DIR, remove_recorded, write_recorded
from ansible.module_utils.fleetnap.sleep import METRICS_FILE, POWER_DIR, SLEEP_TARGETS, policy_metrics, read_sleep
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, SysfsBatch, systemd_running

TARGETS = SLEEP_TARGETS
DROP_IN = "/etc/systemd/sleep.conf.d/fleetnap.conf"
ORIGINALS = STATE_DIR + "/sleep_policy.orig.json"

# SuspendState= and MemorySleepMode= are lists in systemd: an assignment appends to what
# sleep.conf and earlier drop-ins set, and systemd uses the first entry the kernel offers. An
# empty assignment first clears them, so the list is exactly this policy's.
DROP_IN_TEXT = {
    "deep": "SuspendState=\nSuspendState=mem\nMemorySleepMode=\nMemorySleepMode=deep\n",
    "s2idle": "SuspendState=\nSuspendState=freeze\nMemorySleepMode=\nMemorySleepMode=s2idle\n",
    "none": "AllowSuspend=no\nAllowHibernation=no\nAllowSuspendThenHibernate=no\nAllowHybridSleep=no\n",
}

# The argument spec of sleep_policy (with its required_if in SLEEP_REQUIRED_IF).
SLEEP_ARGS = dict(
    allow=dict(type="str", choices=["deep", "mem", "s2idle", "none"]),
    mask_targets=dict(type="bool", default=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    sysfs_root=dict(type="path", default="/"),
    metrics_dir=dict(type="path"),
)
SLEEP_REQUIRED_IF = [("state", "present", ["allow"])]


def drop_in_text(allow):
    return ("# Installed by fleetnap (sleep_policy allow=%s).\n"
            "# MemorySleepMode= is read by systemd >= 256 (older ones ignore it; the module writes\n"
            "# /sys/power/mem_sleep itself). No SuspendMode=: systemd < 256 writes that to\n"
            "# /sys/power/disk and refuses to suspend when the value is not offered there.\n"
            "[Sleep]\n%s" % (allow, DROP_IN_TEXT[allow]))


def masked(fs):
    out = []
    for target in TARGETS:
        real = fs.path("%s/%s" % (UNIT_DIR, target))
        if os.path.islink(real) and os.readlink(real) == "/dev/null":
            out.append(target)
    return out


def check_record(doc, where):
    """The originals record as apply_sleep() writes it, or ValueError naming the field (state=absent
    writes its mem_sleep into sysfs and keeps its masks)."""
    if not isinstance(doc, dict):
        raise ValueError("%s: must be a JSON object, got %s" % (where, repr(doc)[:60]))
    mem_sleep = doc.get("mem_sleep")
    if mem_sleep is not None and mem_sleep not in ("s2idle", "shallow", "deep"):
        raise ValueError("%s: mem_sleep must be s2idle, shallow, deep or null, got %s" % (where, repr(mem_sleep)[:60]))
    masks = doc.get("masked_targets", [])
    if not isinstance(masks, list) or any(t not in TARGETS for t in masks):
        raise ValueError("%s: masked_targets must be a list of %s, got %s"
                         % (where, ", ".join(TARGETS), repr(masks)[:60]))
    return doc


def view(mem_sleep, masks, drop_in):
    return {"mem_sleep": mem_sleep, "masked_targets": sorted(masks), "drop_in": drop_in}


def plan_sleep(module, p):
    """Read, validate and decide; nothing is written. Returns the plan apply_sleep() and sleep_result() take."""
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
    try:
        offered = read_sleep(fs)
        current_masks = masked(fs)
        current_drop_in = fs.read(DROP_IN, limit=fileio.VALUE)
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s; nothing was changed" % (exc.reason if isinstance(exc, UnicodeDecodeError) else exc))
    if not fs.exists(POWER_DIR + "/state"):
        module.fail_json(msg="%s does not exist: this kernel has no system sleep support (CONFIG_SUSPEND) "
                             "or sysfs_root %s is wrong" % (fs.path(POWER_DIR + "/state"), fs.root))
    try:
        originals = fs.read_json(ORIGINALS)
        if originals is not None:
            check_record(originals, "the record %s" % fs.path(ORIGINALS))
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s; nothing was changed (repair or remove the record; without it state=absent "
                             "restores the kernel's mem_sleep as it is now and no masks)" % exc)
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
    for target in want_masks:
        link = fs.path("%s/%s" % (UNIT_DIR, target))
        if target not in current_masks and os.path.lexists(link):
            module.fail_json(msg="cannot mask %s: %s exists and is not a mask; remove it first" % (target, link),
                             offered=offered)

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
            metrics_before = fileio.read_optional(metrics_path, fileio.RECORD, what="metrics file")
            metrics_before = None if metrics_before is None else metrics_before.decode("utf-8", "replace")
        except (IOError, OSError) as exc:
            module.fail_json(msg="option metrics_dir: %s; nothing was changed" % exc, offered=offered)
        if p["state"] == "present":
            from ansible.module_utils.fleetnap.prom import render   # only with metrics: not compiled on every host
            metrics_text = render(policy_metrics(allow, offered, want_mem_sleep, want_masks))
        metrics_changed = metrics_before != metrics_text

    return dict(
        p=p, fs=fs, allow=allow, offered=offered, originals=originals, current_masks=current_masks,
        current_drop_in=current_drop_in, want_mem_sleep=want_mem_sleep, want_masks=want_masks,
        want_drop_in=want_drop_in, batch=batch, masks_changed=masks_changed, changed=changed,
        metrics_path=metrics_path, metrics_text=metrics_text, metrics_changed=metrics_changed, applied=False,
    )


def apply_sleep(module, plan, changes=None):
    """Write what plan_sleep() decided (nothing in check mode); returns ``changed`` (metrics included).

    Every change (the originals record, mem_sleep, the drop-in, the masks, the metrics file) is
    one of ``changes`` (fileio.Changes; fleetnap_profile passes the one of its whole call, which
    holds the C-state gate's changes too): a failure undoes all of them and the message says
    whether the host is as it was, or which paths stay changed.
    """
    p, fs, offered = plan["p"], plan["fs"], plan["offered"]
    current_masks, want_masks = plan["current_masks"], plan["want_masks"]
    if changes is None:
        changes = fileio.Changes(fs.root)

    def fail(msg):
        module.fail_json(msg=changes.failure(msg), offered=offered)

    def reload_units():
        if systemd_running(fs):
            module.run_command([module.get_bin_path("systemctl", required=True), "daemon-reload"], check_rc=True)

    if plan["changed"] and not module.check_mode:
        try:
            if plan["masks_changed"] and systemd_running(fs):
                # Recorded first, so it runs last on an undo: after the masks are back.
                changes.record("systemctl daemon-reload", reload_units)
            if plan["originals"] is None and p["state"] == "present":
                changes.write(fs.path(ORIGINALS), json.dumps(
                    {"mem_sleep": offered["mem_sleep"], "masked_targets": current_masks}) + "\n", 0o600, module)
            plan["batch"].apply_to(changes)     # one write at most (mem_sleep)
            if plan["want_drop_in"] is None:
                changes.remove(fs.path(DROP_IN))
            else:
                changes.write(fs.path(DROP_IN), drop_in_text(plan["allow"]), 0o644, module)
            for target in TARGETS:
                link = fs.path("%s/%s" % (UNIT_DIR, target))
                if target in want_masks and target not in current_masks:
                    if os.path.lexists(link):
                        fail("cannot mask %s: %s exists and is not a mask; remove it first" % (target, link))
                    changes.link(link, "/dev/null")
                elif target in current_masks and target not in want_masks:
                    changes.remove(link)
            if p["state"] == "absent":
                changes.remove(fs.path(ORIGINALS))
            if plan["masks_changed"]:
                reload_units()
        except (HostFsError, OSError, IOError) as exc:
            fail("applying the sleep policy failed: %s" % exc)

    metrics_path, metrics_text = plan["metrics_path"], plan["metrics_text"]
    if plan["metrics_changed"] and not module.check_mode:
        try:
            if metrics_text is None:
                remove_recorded(changes, metrics_path)
            else:
                write_recorded(changes, metrics_path, metrics_text, 0o644, module)
        except (HostFsError, OSError, IOError) as exc:
            fail("%s %s failed: %s; check metrics_dir" % ("removing" if metrics_text is None else "writing",
                                                          metrics_path, exc))
    return plan["changed"] or plan["metrics_changed"]


def sleep_result(module, plan, changed):
    """The module's return values (the diff too when diff mode is on)."""
    result = dict(changed=changed, allow=plan["allow"] if plan["p"]["state"] == "present" else None,
                  offered=plan["offered"], mem_sleep=plan["want_mem_sleep"], masked_targets=sorted(plan["want_masks"]))
    if plan["metrics_path"]:
        result["metrics_path"] = plan["metrics_path"]
    if module._diff:
        result["diff"] = {"before": view(plan["offered"]["mem_sleep"], plan["current_masks"], plan["current_drop_in"]),
                          "after": view(plan["want_mem_sleep"], plan["want_masks"], plan["want_drop_in"])}
    return result
