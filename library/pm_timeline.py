#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pm_timeline
short_description: Suspend/resume timeline, critical path and advice from the kernel log
description:
  - Parses the kernel log of a host that suspended with C(/sys/power/pm_print_times) enabled
    (see the C(pm_debug) module) and returns what sleepgraph's dmesg analysis returns, for
    every host of a fleet in one run and one result format.
  - >-
    Totals follow sleepgraph's definitions. RV(suspend_ms) runs from the kernel suspend start
    (C(PM: suspend entry) or C(PM: Syncing filesystems)) to the machine suspend; RV(resume_ms)
    from the machine resume (C(ACPI: Low-level resume complete)) to C(Restarting tasks).
  - Returns the ten phases, every device callback with its parent, thread and async flag, the
    CPU offline/online steps, the critical path of each phase, the slowest devices, and
    recommendations (what a server could drop or defer, with the expected saving). The
    recommendations are advice only; this module never applies them.
  - >-
    Understands the old C(calling X+ @ pid) / C(call X+ returned) format and the current
    C(dev: PM: calling cb @ pid, parent: p) / C(dev: PM: cb returned 0 after N usecs) format.
  - Optionally writes a self-contained HTML timeline (inline SVG, no scripts) of each cycle.
  - Read-only on the host unless O(html_dest) is given.
version_added: "1.0.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  src:
    description:
      - Path on the target of a saved kernel log (the output of C(dmesg), with timestamps).
      - A regular file of at most 64 MiB (a larger one is refused from its size, before it is read;
        a 60 MB log of many cycles is parsed in seconds). A FIFO, a device or a link to one is refused.
      - When omitted the live kernel ring buffer is read with C(dmesg), or from C(/dev/kmsg)
        when C(dmesg) is not installed. Reading it usually needs root (C(become=true)).
    type: path
  since:
    description:
      - Ignore log lines stamped before this many seconds after boot (the kernel timestamp).
    type: float
  cycle:
    description:
      - V(last) analyses the last complete suspend/resume cycle in the log, V(all) every one.
    type: str
    choices: [last, all]
    default: last
  top:
    description: Number of slowest device callbacks to return.
    type: int
    default: 10
  min_saving_ms:
    description: Recommendations whose expected saving is below this are left out.
    type: float
    default: 1.0
  include_devices:
    description:
      - Return every device callback in RV(devices). Turn off for large fleets when only
        totals, the critical path and the slowest devices are needed.
    type: bool
    default: true
  html_dest:
    description:
      - Write the HTML timeline of the analysed cycle to this path on the target (its directory
        must exist). With O(cycle=all) and several cycles, one file per cycle is written, named
        C(STEM-cycleN.html) after O(html_dest).
      - Every page is written atomically; when one cannot be written the pages this call wrote
        before it are put back, and a page that cannot be replaced (immutable, a FIFO, in an
        append-only directory) is refused before anything is written.
      - Use C(delegate_to) with a saved log to write reports on the controller.
    type: path
  title:
    description: Host name shown in the HTML page; defaults to the target's host name.
    type: str
attributes:
  check_mode:
    support: full
    details:
      - In check mode the HTML file is not written; C(changed) says whether it would be.
  diff_mode:
    support: partial
    details:
      - Reports the checksum of the HTML file before and after, not its text.
notes:
  - Enable C(/sys/power/pm_print_times) (module C(pm_debug)) before the suspend you want to
    measure; without it the log has phase markers but no device callbacks.
  - Hibernation (suspend to disk) logs are not analysed.
seealso:
  - name: sleepgraph (pm-graph)
    description: Intel's suspend/resume timeline tool whose definitions the totals follow.
    link: https://github.com/intel/pm-graph
"""

EXAMPLES = r"""
- name: Timeline of the last suspend/resume in the ring buffer
  pm_timeline:
  become: true
  register: timeline

- name: Show the resume breakdown
  ansible.builtin.debug:
    msg: >-
      resume {{ timeline.resume_ms }} ms = CPUs {{ timeline.cpus_ms }} +
      noirq {{ timeline.noirq_ms }} + devices {{ timeline.devices_ms }} ms

- name: Analyse a saved log and write the HTML report beside it
  pm_timeline:
    src: /var/log/fleetnap/dmesg-s3.txt
    html_dest: /var/log/fleetnap/timeline.html
    top: 20

- name: Every cycle of a saved log, parsed on the controller
  pm_timeline:
    src: "{{ playbook_dir }}/logs/{{ inventory_hostname }}.dmesg"
    cycle: all
    include_devices: false
  delegate_to: localhost
"""

RETURN = r"""
suspend_ms:
  description: Kernel suspend time (kernel suspend start to machine suspend), as sleepgraph.
  returned: success
  type: float
  sample: 1777.196
resume_ms:
  description: Kernel resume time (machine resume to C(Restarting tasks)), as sleepgraph.
  returned: success
  type: float
  sample: 298.973
phases:
  description: Length in ms of each of the ten phases, suspend_prepare to resume_complete.
  returned: success
  type: dict
  sample: {"suspend_prepare": 147.409, "suspend": 867.453, "resume_noirq": 15.657}
cpus_ms:
  description: Time to bring the non-boot CPUs back online on resume (serial), in ms.
  returned: success
  type: float
  sample: 94.678
cpus_offline_ms:
  description: Time to take the non-boot CPUs offline on suspend, in ms.
  returned: success
  type: float
  sample: 727.133
noirq_ms:
  description: Length of the noirq resume stage (resume_noirq), in ms.
  returned: success
  type: float
  sample: 15.657
devices_ms:
  description: Device resume after the noirq stage (resume_early + resume + resume_complete).
  returned: success
  type: float
  sample: 181.776
breakdown:
  description: CPUs / noirq / devices split of both sides.
  returned: success
  type: dict
devices:
  description:
    - Every device callback (omitted when O(include_devices=false)). C(start_ms) is relative to
      the kernel suspend start.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "0000:00:1b.0", "phase": "resume", "start_ms": 1894.747,
            "duration_ms": 159.001, "on_critical_path": true, "parent": "pci0000:00",
            "pid": 4400, "async": true, "rc": 0, "callback": null, "driver": "snd_hda_intel"}]
critical_path:
  description:
    - The critical path of every phase in time order; CPU steps in the machine phases.
    - In each phase it is the chain of callbacks ending at the one that returned last, each
      preceded by the callback that returned last among those that could hold it back (same
      thread, its device-tree dependencies, and for synchronous callbacks any callback).
  returned: success
  type: list
  elements: dict
  sample: [{"phase": "resume", "name": "0000:00:1b.0", "kind": "device", "start_ms": 1894.747,
            "duration_ms": 159.001, "async": true, "driver": "snd_hda_intel"}]
slowest:
  description: The O(top) slowest device callbacks, longest first.
  returned: success
  type: list
  elements: dict
recommendations:
  description:
    - Devices on the critical path a server could drop or defer, with the expected saving in ms,
      largest first. Never applied by this module (C(applied) is always false).
  returned: success
  type: list
  elements: dict
  sample: [{"device": "0000:00:1b.0", "driver": "snd_hda_intel", "category": "sound",
            "saving_ms": 51.1, "resume_saving_ms": 51.1, "suspend_saving_ms": 0.0,
            "critical_ms": 159.0, "phases": {"resume": 51.1},
            "message": "0000:00:1b.0 (snd_hda_intel) sound resume is 159.0 ms of the critical path: ...",
            "actions": [{"kind": "blacklist_module", "module": "snd_hda_intel"}],
            "applied": false}]
mode:
  description: Sleep mode of the cycle (mem, freeze, standby) when the log says.
  returned: success
  type: str
  sample: mem
warnings_found:
  description: Things the parser noticed (callbacks that failed, missing markers, skipped cycles).
  returned: success
  type: list
  elements: str
cycle_count:
  description: Number of complete cycles found in the log.
  returned: success
  type: int
  sample: 1
cycles:
  description: With O(cycle=all), the full result of every cycle, oldest first.
  returned: when O(cycle=all)
  type: list
  elements: dict
html_files:
  description: HTML files written (or that would be written in check mode).
  returned: when O(html_dest) is set
  type: list
  elements: str
source:
  description: Where the log came from (the O(src) path, C(dmesg) or C(/dev/kmsg)).
  returned: success
  type: str
  sample: dmesg
"""

import hashlib
import os
import socket

from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.module_utils.fleetnap import command, fileio
from ansible.module_utils.fleetnap.dmesg import ParseError, parse, read_kmsg, select
from ansible.module_utils.fleetnap.recommend import recommend
from ansible.module_utils.fleetnap.timeline_html import render
from ansible.module_utils.fleetnap.validate import (
    ParamError, ansible_module, check_params, number, path, read_text_file, text,
)

# A saved kernel log (fileio.LOG, 64 MiB); the ring buffer is at most a few MB. A 60 MB log of
# 1800 cycles is parsed in seconds (tests/bench/bench_pm_timeline.py); a larger one is refused
# from its size, before it is read.
SRC_LIMIT = fileio.LOG

CHECKS = {
    "src": path(),
    "since": number(lo=0, hi=10 ** 9),              # kernel seconds since boot
    "top": number(lo=0, hi=10000, integer=True),
    "min_saving_ms": number(lo=0, hi=3600 * 1000),
    "html_dest": path(),
    "title": text(max_len=200),
}


def load_log(module):
    src = module.params["src"]
    if src:
        if not os.path.lexists(src) or os.path.isdir(src):
            module.fail_json(msg="src %s does not exist or is not a file on %s: save the log "
                                 "with 'dmesg > FILE' after the resume, or omit src to read "
                                 "the live ring buffer" % (src, socket.gethostname()))
        try:
            size = os.stat(src).st_size if os.path.isfile(src) else 0
        except OSError:
            size = 0
        if size > SRC_LIMIT:
            module.fail_json(msg="src %s is larger than %d MiB (%d bytes), the most pm_timeline reads of a saved "
                                 "kernel log (on %s): save only the cycles to analyse (dmesg after the suspend, "
                                 "or cut the file)" % (src, SRC_LIMIT // (1024 * 1024), size, socket.gethostname()))
        try:
            return read_text_file(src, "src", limit=SRC_LIMIT), src
        except ParamError as e:
            module.fail_json(msg="%s (on %s; run with become: true if it is root-only; a saved "
                                 "'dmesg > FILE' log is text)" % (e, socket.gethostname()))
    dmesg_bin = module.get_bin_path("dmesg")
    if dmesg_bin:
        rc, out, err = command.run([dmesg_bin], {"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg="'dmesg' failed on %s (rc=%d): %s; reading the kernel ring "
                                 "buffer usually needs root (become: true) when "
                                 "kernel.dmesg_restrict=1" % (socket.gethostname(), rc,
                                                              err.strip()))
        return out, "dmesg"
    try:
        return "\n".join(read_kmsg()), "/dev/kmsg"
    except (IOError, OSError, fileio.HostFsError) as e:
        module.fail_json(msg="cannot read /dev/kmsg on %s: %s; install util-linux (dmesg) or "
                             "run with become: true" % (socket.gethostname(), to_native(e)))


def html_targets(dest, cycles):
    if len(cycles) == 1:
        return [dest]
    stem, ext = os.path.splitext(dest)
    return ["%s-cycle%d%s" % (stem, c.index, ext or ".html") for c in cycles]


def sha1(data):
    return hashlib.sha1(data).hexdigest()


def main():
    module = ansible_module(
        argument_spec=dict(
            src=dict(type="path"),
            since=dict(type="float"),
            cycle=dict(type="str", default="last", choices=["last", "all"]),
            top=dict(type="int", default=10),
            min_saving_ms=dict(type="float", default=1.0),
            include_devices=dict(type="bool", default=True),
            html_dest=dict(type="path"),
            title=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    if p["html_dest"]:
        d = os.path.dirname(os.path.abspath(p["html_dest"]))
        if not os.path.isdir(d):
            module.fail_json(msg="html_dest %s: directory %s does not exist on %s; create it "
                                 "first (ansible.builtin.file state=directory)"
                                 % (p["html_dest"], d, socket.gethostname()))
        if os.path.isdir(p["html_dest"]):
            module.fail_json(msg="html_dest %s is a directory; give a file name such as "
                                 "%s/timeline.html" % (p["html_dest"], p["html_dest"].rstrip("/")))

    text, source = load_log(module)
    try:
        cycles = parse(text, since=p["since"])
    except ParseError as e:
        module.fail_json(msg="%s: %s" % (source, to_native(e)), source=source)
    chosen = select(cycles, p["cycle"])

    results = []
    for cyc in chosen:
        res = cyc.to_dict(top=p["top"], with_devices=p["include_devices"])
        bd = res["breakdown"]
        res["cpus_ms"] = bd["resume"]["cpus_ms"]
        res["cpus_offline_ms"] = bd["suspend"]["cpus_ms"]
        res["noirq_ms"] = bd["resume"]["noirq_ms"]
        res["devices_ms"] = bd["resume"]["devices_ms"]
        res["recommendations"] = recommend(cyc, min_saving_ms=p["min_saving_ms"])
        res["warnings_found"] = res.pop("warnings")
        results.append(res)

    result = dict(results[-1])
    result.update(changed=False, source=source, cycle_count=len(cycles))
    if p["cycle"] == "all":
        result["cycles"] = results

    if p["html_dest"]:
        host = p["title"] or socket.gethostname()
        targets = html_targets(p["html_dest"], chosen)
        before, after = {}, {}
        writes = []
        for path, cyc, res in zip(targets, chosen, results):
            page = to_bytes(render(cyc, res["recommendations"], host=host, top=p["top"]))
            old = None
            if os.path.lexists(path):
                try:
                    old = fileio.read_bytes(path, fileio.RECORD, root=os.path.dirname(os.path.abspath(path)),
                                            what="html_dest")
                except (OSError, fileio.HostFsError) as e:
                    module.fail_json(msg="cannot read html_dest %s on %s: %s; nothing was written"
                                         % (path, socket.gethostname(), to_native(e)))
            before[path] = sha1(old) if old is not None else "absent"
            after[path] = sha1(page)
            if old != page:
                writes.append((path, page))
        result["html_files"] = targets
        result["changed"] = bool(writes)
        if module._diff:
            result["diff"] = {"before": before, "after": after}
        for path, page in writes:
            problem = fileio.write_problem(path)
            if problem:
                module.fail_json(msg="cannot write html_dest %s on %s: %s; nothing was written"
                                     % (path, socket.gethostname(), problem))
        if writes and not module.check_mode:
            # Every page of the call in one batch: a failure on the third page puts the first two back.
            changes = fileio.Changes()
            for path, page in writes:
                try:
                    changes.write(path, page, 0o644, module)
                except (OSError, fileio.HostFsError) as e:
                    module.fail_json(msg=changes.failure("cannot write html_dest %s on %s: %s"
                                                         % (path, socket.gethostname(), to_native(e))))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
