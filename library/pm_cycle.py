#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pm_cycle
short_description: Suspend a host and resume it, keeping the kernel log of every cycle
description:
  - Cycles the host through a system sleep state (S3 by default) and returns, per cycle, the
    kernel's suspend/resume timeline (the same analysis as M(pm_timeline)) and the kernel log
    of that cycle, which is also kept on the host under O(log_dir).
  - Turns C(/sys/power/pm_print_times) on for the cycles (device callbacks with durations) and
    puts it back as it was afterwards, also when a cycle fails.
  - The host must come back by itself (O(wake=rtc), an RTC alarm) or be woken from outside
    (O(wake=external)) while this module waits inside the suspend; run it with C(async) and
    wake the host from the controller (Wake-on-LAN, IPMI, the lab's wake path), as
    C(playbooks/measure_resume.yml) does.
  - After each resume it reads and analyses the kernel log at the lowest CPU priority (nice
    19), so the host's own services, whose end-to-end resume the controller may be timing, do
    not wait for it.
  - Fails before suspending, and changes nothing, when the host does not offer the sleep
    state or has no RTC wake alarm for O(wake=rtc).
version_added: "0.1.0"
author: fleetnap contributors
options:
  mode:
    description: Sleep state written to C(/sys/power/state).
    type: str
    choices: [mem, freeze]
    default: mem
  mem_sleep:
    description:
      - With O(mode=mem), the variant to measure. V(deep) (S3) is selected in
        C(/sys/power/mem_sleep) for the cycles and the previous choice restored afterwards, so a
        host whose sleep policy allows only s2idle can still be measured for S3. V(current) uses
        whatever is selected.
    type: str
    choices: [deep, s2idle, current]
    default: deep
  wake:
    description: V(rtc) sets the RTC wake alarm before each suspend; V(external) waits for a wake from outside.
    type: str
    choices: [rtc, external]
    default: rtc
  rtc_wake_s:
    description: Seconds until the RTC alarm wakes the host (O(wake=rtc)).
    type: int
    default: 5
  cycles:
    description: Number of cycles. With O(wake=external) only 1 (the wake has to come from outside each time).
    type: int
    default: 1
  pause_s:
    description: Seconds between cycles.
    type: float
    default: 2.0
  pm_print_times:
    description: Log every device callback during the cycles (restored afterwards).
    type: bool
    default: true
  log_dir:
    description: Directory on the host where each cycle's kernel log is kept.
    type: path
    default: /var/lib/fleetnap/pm_cycles
  top:
    description: Number of slowest devices to return per cycle.
    type: int
    default: 5
attributes:
  check_mode:
    support: full
    details: Checks that the host can do the cycle and reports it, without suspending.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Needs root. The suspend is real, so run it only on hosts you mean to suspend.
seealso:
  - module: pm_timeline
  - module: pm_debug
"""

EXAMPLES = r"""
- name: Three S3 cycles woken by the RTC
  pm_cycle:
    cycles: 3
    rtc_wake_s: 5

- name: One cycle woken from outside (see playbooks/measure_resume.yml)
  pm_cycle:
    wake: external
  async: 120
  poll: 0
  register: fleetnap__cycle_job
"""

RETURN = r"""
cycles:
  description: One entry per cycle.
  returned: always
  type: list
  elements: dict
  contains:
    cycle: {description: Cycle number from 1, type: int}
    suspend_ms: {description: Kernel suspend time as sleepgraph defines it, type: float}
    resume_ms: {description: Kernel resume time as sleepgraph defines it, type: float}
    cpus_ms: {description: Time to bring non-boot CPUs back, type: float}
    noirq_ms: {description: resume_noirq phase, type: float}
    devices_ms: {description: Device resume phases, type: float}
    slowest: {description: Slowest device callbacks, type: list}
    critical_path: {description: Callbacks on the critical path of each phase, type: list}
    mem_sleep: {description: The mem_sleep variant used, type: str}
    wall_s: {description: Seconds the suspend write blocked (asleep + kernel transitions), type: float}
    woke_at: {description: Unix time when the host was running again, type: float}
    log: {description: The kernel log of the cycle, type: str}
    log_path: {description: Where the log is kept on the host, type: str}
mem_sleep:
  description: The mem_sleep choice before the call (restored).
  returned: always
  type: str
pm_print_times:
  description: The value of pm_print_times before the call (restored).
  returned: always
  type: bool
"""

import os
import socket
import time
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.fleetnap.dmesg import ParseError, parse
from ansible.module_utils.fleetnap.sleep import POWER_DIR, read_sleep
from ansible.module_utils.fleetnap.sysfs import HostFS, write_file_atomic

WAKEALARM = "/sys/class/rtc/rtc0/wakealarm"
PRINT_TIMES = POWER_DIR + "/pm_print_times"
MEM_SLEEP = POWER_DIR + "/mem_sleep"


def kernel_log(module):
    dmesg = module.get_bin_path("dmesg", required=True)
    rc, out, err = module.run_command([dmesg], environ_update={"LC_ALL": "C"})
    if rc != 0:
        raise OSError("dmesg failed (rc=%d): %s" % (rc, err.strip()))
    return out


def since_marker(log, marker):
    pos = log.rfind(marker)
    if pos < 0:
        raise ParseError("the cycle's marker %s is no longer in the kernel ring buffer (buffer too small?)" % marker)
    return log[log.find("\n", pos) + 1:]


def one_cycle(module, fs, index, run_id):
    p = module.params
    marker = "fleetnap-pm-cycle %s %d" % (run_id, index)
    with open("/dev/kmsg", "w") as kmsg:
        kmsg.write(marker + "\n")
    if p["wake"] == "rtc":
        fs.write_raw(WAKEALARM, "0")
        fs.write_raw(WAKEALARM, "+%d" % p["rtc_wake_s"])
    t0 = time.time()
    fs.write_raw(POWER_DIR + "/state", p["mode"])  # blocks until the host has resumed
    woke = time.time()
    # Read and analyse the log at the lowest CPU priority: right after the resume the host's own
    # services (the SSH or service port the controller is timing end to end) must not wait for the
    # tool that measures them.
    os.nice(19)
    log = since_marker(kernel_log(module), marker)
    cycles = parse(log)
    cyc = cycles[-1].to_dict(top=p["top"], with_devices=False)
    bd = cyc["breakdown"]
    out = {
        "cycle": index,
        "suspend_ms": cyc["suspend_ms"],
        "resume_ms": cyc["resume_ms"],
        "cpus_ms": bd["resume"]["cpus_ms"],
        "noirq_ms": bd["resume"]["noirq_ms"],
        "devices_ms": bd["resume"]["devices_ms"],
        "phases": cyc["phases"],
        "slowest": cyc["slowest"],
        "critical_path": cyc["critical_path"],
        "wall_s": round(woke - t0, 3),
        "woke_at": woke,
        "log": log,
    }
    path = os.path.join(p["log_dir"], "%s-%s-%d.log" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime(t0)), run_id, index))
    write_file_atomic(fs, path, log, 0o600, module)
    out["log_path"] = path
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["mem", "freeze"], default="mem"),
            mem_sleep=dict(type="str", choices=["deep", "s2idle", "current"], default="deep"),
            wake=dict(type="str", choices=["rtc", "external"], default="rtc"),
            rtc_wake_s=dict(type="int", default=5),
            cycles=dict(type="int", default=1),
            pause_s=dict(type="float", default=2.0),
            pm_print_times=dict(type="bool", default=True),
            log_dir=dict(type="path", default="/var/lib/fleetnap/pm_cycles"),
            top=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    p = module.params
    host = socket.gethostname()
    fs = HostFS("/")
    offered = read_sleep(fs)
    if p["cycles"] < 1 or (p["wake"] == "external" and p["cycles"] != 1):
        module.fail_json(msg="cycles must be >= 1, and 1 with wake=external (got %d)" % p["cycles"])
    if p["rtc_wake_s"] < 2:
        module.fail_json(msg="rtc_wake_s must be at least 2 seconds (got %d)" % p["rtc_wake_s"])
    if p["mode"] not in offered["states"]:
        module.fail_json(msg="%s will not suspend: %s offers %s, not %r; nothing was changed"
                         % (host, POWER_DIR + "/state",
                            " ".join(offered["states"]) or "nothing", p["mode"]), offered=offered)
    want_variant = None
    if p["mode"] == "mem" and p["mem_sleep"] != "current":
        if p["mem_sleep"] not in offered["mem_sleep_options"]:
            module.fail_json(msg="%s will not suspend to %s: %s offers %s; nothing was changed"
                             % (host, p["mem_sleep"], POWER_DIR + "/mem_sleep",
                                " ".join(offered["mem_sleep_options"]) or "nothing"), offered=offered)
        if p["mem_sleep"] != offered["mem_sleep"]:
            want_variant = p["mem_sleep"]
    if p["wake"] == "rtc" and not fs.exists(WAKEALARM):
        module.fail_json(msg="%s has no RTC wake alarm (%s); use wake=external and wake it from outside"
                         % (host, WAKEALARM))
    if p["pm_print_times"] and offered["pm_print_times"] is None:
        module.warn("%s has no %s: device callbacks will not be timed" % (host, PRINT_TIMES))
    if module.check_mode:
        module.exit_json(changed=True, cycles=[], pm_print_times=offered["pm_print_times"], offered=offered)

    before = offered["pm_print_times"]
    results = []
    run_id = uuid.uuid4().hex[:8]
    try:
        if want_variant:
            fs.write_raw(MEM_SLEEP, want_variant)
        if p["pm_print_times"] and before is False:
            fs.write_raw(PRINT_TIMES, "1")
        for index in range(1, p["cycles"] + 1):
            if index > 1:
                time.sleep(p["pause_s"])
            results.append(one_cycle(module, fs, index, run_id))
            results[-1]["mem_sleep"] = (want_variant or offered["mem_sleep"]) if p["mode"] == "mem" else "s2idle"
    except (OSError, IOError) as exc:
        module.fail_json(msg="%s: suspend cycle %d failed: %s; the host did not suspend or did not log the "
                             "cycle (pm_print_times restored)" % (host, len(results) + 1, to_native(exc)),
                         cycles=results)
    except ParseError as exc:
        module.fail_json(msg="%s: the kernel log of cycle %d cannot be analysed: %s"
                         % (host, len(results) + 1, to_native(exc)), cycles=results)
    finally:
        if p["pm_print_times"] and before is False:
            try:
                fs.write_raw(PRINT_TIMES, "0")
            except (OSError, IOError):
                module.warn("could not restore %s to 0" % PRINT_TIMES)
        if want_variant and offered["mem_sleep"]:
            try:
                fs.write_raw(MEM_SLEEP, offered["mem_sleep"])
            except (OSError, IOError):
                module.warn("could not restore %s to %s" % (MEM_SLEEP, offered["mem_sleep"]))
    module.exit_json(changed=True, cycles=results, pm_print_times=before, mem_sleep=offered["mem_sleep"],
                     offered=offered)


if __name__ == "__main__":
    main()
