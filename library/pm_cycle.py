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
  - The host must come back by itself (O(wake=rtc), an RTC alarm, the module waits inside the
    suspend and analyses each cycle at the lowest CPU priority, nice 19) or be woken from outside
    (O(wake=external)).
  - O(wake=external) is two calls, as the C(resume_measure) role makes them. The first
    starts the cycle and returns at once with its RV(run_id); a detached POSIX shell (no Python,
    so its timing does not depend on the host's load) waits until this module's answer has left,
    then O(start_delay_s), then writes the sleep state. The controller sees the host go silent,
    wakes it (Wake-on-LAN, IPMI, the lab's wake path) and times its answer. The second call,
    with O(collect=<run_id>), reads the kernel log of that cycle and analyses it, after the
    controller has timed the answer, so the analysis cannot delay what is being timed.
  - A cycle whose suspend had not even started when it is collected (the host answered a wake
    it never needed) is cancelled, so the host cannot go to sleep later on its own, and reported
    as failed; a write to C(/sys/power/state) that fails is reported with the kernel's error.
    What the start changed (C(mem_sleep), C(pm_print_times)) is put back by that shell right
    after the resume, also when the cycle is never collected.
  - Fails before suspending, and changes nothing, when the host does not offer the sleep
    state or has no RTC wake alarm for O(wake=rtc).
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
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
  start_delay_s:
    description:
      - With O(wake=external), seconds between the start call's answer leaving the host and the
        write to C(/sys/power/state). 0 to 60.
    type: float
    default: 1.0
  collect:
    description:
      - The RV(run_id) of a cycle started with O(wake=external) on this host, after it was woken;
        returns that cycle (as RV(cycles)) and removes its state from C(/run/fleetnap/pm_cycle).
        The other options except O(top) and O(log_dir) are ignored.
    type: str
  collect_timeout_s:
    description:
      - With O(collect), how long to wait for the suspend write to return once the host runs
        again (it returns as the kernel resumes; the wait covers a host still finishing it).
    type: float
    default: 20.0
attributes:
  check_mode:
    support: full
    details:
      - Checks that the host can do the cycle and reports it, without suspending.
      - With O(collect), analyses the cycle without keeping its log or removing its state.
  diff_mode:
    support: none
  platform:
    support: full
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

- name: Start one cycle to be woken from outside (see the resume_measure role)
  pm_cycle:
    wake: external
  register: fleetnap__cycle

# ... wait until the host is silent, send the magic packet, wait until it answers ...

- name: Collect the cycle's kernel timeline
  pm_cycle:
    collect: "{{ fleetnap__cycle['run_id'] }}"
  register: fleetnap__cycle_result
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
profile_drift:
  description:
    - With O(collect), the latency profile checked again after the wake (module_utils/fleetnap/drift.py).
      The files of C(/var/lib/fleetnap/profile.want) (written by M(fleetnap_profile)) that showed
      another value and were written back (C(put_back)) or could not be (C(stuck)), counted per
      knob; also counted in C(/var/lib/fleetnap/drift.counts) and C(fleetnap_profile_drift_total).
  returned: with O(collect)
  type: dict
  sample: {put_back: {epp: 8}, stuck: {}}
mem_sleep:
  description: The mem_sleep choice before the call (restored).
  returned: unless O(collect) is given
  type: str
run_id:
  description: The cycle's identifier, to pass as O(collect) once the host has been woken.
  returned: with O(wake=external), and with O(collect)
  type: str
  sample: 5c5a09b6
suspend_in_s:
  description: The O(start_delay_s) after which the started cycle writes the sleep state.
  returned: with O(wake=external)
  type: float
mem_sleep_used:
  description: The mem_sleep variant the started cycle suspends to.
  returned: with O(wake=external)
  type: str
pm_print_times:
  description: The value of pm_print_times before the call (restored).
  returned: unless O(collect) is given
  type: bool
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import uuid

from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.fleetnap import command, fileio
from ansible.module_utils.fleetnap.dmesg import ParseError, parse
from ansible.module_utils.fleetnap.drift import recheck, said
from ansible.module_utils.fleetnap.fileio import HostFsError
from ansible.module_utils.fleetnap.parse import parse_int
from ansible.module_utils.fleetnap.sleep import POWER_DIR, read_sleep
from ansible.module_utils.fleetnap.sysfs import HostFS, write_file_atomic
from ansible.module_utils.fleetnap.validate import ParamError, ansible_module, check_params, number, path, read_text_file

# Every number finite and bounded: a NaN or infinite timeout would wait for ever.
CHECKS = {
    "rtc_wake_s": number(lo=2, hi=3600, integer=True),
    "cycles": number(lo=1, hi=100, integer=True),
    "pause_s": number(lo=0, hi=3600),
    "log_dir": path(),
    "top": number(lo=0, hi=1000, integer=True),
    "start_delay_s": number(lo=0, hi=60),
    "collect_timeout_s": number(lo=0, lo_open=True, hi=3600),
}

WAKEALARM = "/sys/class/rtc/rtc0/wakealarm"
PRINT_TIMES = POWER_DIR + "/pm_print_times"
MEM_SLEEP = POWER_DIR + "/mem_sleep"
# Where a wake=external cycle keeps its state between the start and the collect (emptied at boot).
STATE_DIR = "/run/fleetnap/pm_cycle"
RUN_ID = re.compile(r"^[0-9a-f]{8}$")


def kernel_log(module):
    dmesg = module.get_bin_path("dmesg", required=True)
    rc, out, err = command.run([dmesg], {"LC_ALL": "C"})
    if rc != 0:
        raise OSError("dmesg failed (rc=%d): %s" % (rc, err.strip()))
    return out


def since_marker(log, marker):
    pos = log.rfind(marker)
    if pos < 0:
        raise ParseError("the cycle's marker %s is no longer in the kernel ring buffer (buffer too small?)" % marker)
    return log[log.find("\n", pos) + 1:]


def analyse(module, fs, index, run_id, marker, t0, woke):
    """The cycle's kernel log (since its marker) and its timeline, also kept under log_dir."""
    p = module.params
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
    if not module.check_mode:
        write_file_atomic(fs, path, log, 0o600, module)
    out["log_path"] = path
    return out


def write_marker(marker):
    with fileio.open_device("/dev/kmsg", "w") as kmsg:
        kmsg.write(marker + "\n")


def rtc_cycle(module, fs, index, run_id):
    p = module.params
    marker = "fleetnap-pm-cycle %s %d" % (run_id, index)
    write_marker(marker)
    fs.write_raw(WAKEALARM, "0")
    fs.write_raw(WAKEALARM, "+%d" % p["rtc_wake_s"])
    t0 = time.time()
    fs.write_raw(POWER_DIR + "/state", p["mode"])  # blocks until the host has resumed
    woke = time.time()
    # Analyse at the lowest CPU priority: the host's own services come first after a resume.
    os.nice(19)
    return analyse(module, fs, index, run_id, marker, t0, woke)


def state_files(run_id, directory=STATE_DIR):
    base = os.path.join(directory, run_id)
    return dict((k, "%s.%s" % (base, k)) for k in ("json", "pid", "t0", "woke", "rc", "err"))


def restore_commands(restores):
    """POSIX sh lines putting back what the cycle changed (path, value), each allowed to fail."""
    return "".join("printf '%%s' %s > %s 2>/dev/null || :\n" % (shlex.quote(value), shlex.quote(path))
                   for path, value in restores)


def suspend_script(run_id, files, mode, state_path, delay_s, restores, wait_for_pids):
    """The POSIX sh that suspends the host for a wake=external cycle (see start_external)."""
    q = dict((k, shlex.quote(v)) for k, v in files.items())
    alive = " || ".join("kill -0 %d" % pid for pid in wait_for_pids) or "false"
    return (
        "# fleetnap-pm-cycle %(run_id)s\n"
        "echo $$ > %(pid)s\n"
        "i=0\n"
        "while [ $i -lt 150 ] && { %(alive)s; } 2>/dev/null; do sleep 0.2; i=$((i+1)); done\n"
        "sleep %(delay)s\n"
        ": > %(t0)s\n"
        "if printf '%%s' %(mode)s 2> %(err)s > %(state)s; then rc=0; else rc=$?; fi\n"
        ": > %(woke)s\n"
        "%(restore)s"
        "printf '%%s\\n' \"$rc\" > %(rc)s.tmp && mv %(rc)s.tmp %(rc)s\n"
    ) % dict(run_id=run_id, alive=alive, delay="%.3f" % delay_s, mode=shlex.quote(mode),
             state=shlex.quote(state_path), restore=restore_commands(restores), **q)


def start_external(module, fs, run_id, restores, mem_sleep_used):
    """Write the marker and start the suspend in a detached POSIX shell; return at once.

    The shell (no Python: its timing does not depend on the host's load) first waits until this
    module and its parent have exited, so that the module's answer is on its way to the controller
    before anything is frozen, then sleeps start_delay_s, touches <run_id>.t0, writes the sleep
    state (blocking until the host is woken from outside), touches <run_id>.woke, puts back what
    this call changed and records the write's exit status in <run_id>.rc, which collect reads.
    """
    p = module.params
    files = state_files(run_id)
    marker = "fleetnap-pm-cycle %s 1" % run_id
    if not os.path.isdir(STATE_DIR):
        os.makedirs(STATE_DIR, 0o700)
    meta = {"run_id": run_id, "marker": marker, "mode": p["mode"], "restores": restores,
            "mem_sleep": mem_sleep_used, "started_at": time.time(), "start_delay_s": p["start_delay_s"]}
    write_file_atomic(fs, files["json"], json.dumps(meta), 0o600, module)
    script = suspend_script(run_id, files, p["mode"], POWER_DIR + "/state", p["start_delay_s"], restores,
                            (os.getpid(), os.getppid()))
    write_marker(marker)
    try:
        subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
    except (OSError, IOError):
        os.unlink(files["json"])
        raise
    return meta


def armed_shell(files, run_id):
    """The PID of the cycle's waiting shell if it still runs, else None."""
    try:
        pid = parse_int(fileio.read_bytes(files["pid"], fileio.VALUE), files["pid"], 1, 2 ** 22)
        return pid if ("fleetnap-pm-cycle %s" % run_id).encode() in fileio.read_proc(pid, "cmdline") else None
    except (IOError, OSError, ValueError):
        return None


def remove_state(files):
    for path in files.values():
        if os.path.exists(path):
            os.unlink(path)


def _no_constant(name):
    raise ValueError("%s is not a JSON number" % name)


RESTORABLE = {MEM_SLEEP: ("s2idle", "shallow", "deep"), PRINT_TIMES: ("0", "1")}


def check_meta(meta, where):
    """The cycle's record as start_external() wrote it, or ValueError naming the field: collect
    writes its restores back into sysfs, so only the two attributes a cycle changes, with values
    they can hold, are accepted."""
    if not isinstance(meta, dict):
        raise ValueError("%s must hold a JSON object" % where)
    if meta.get("mode") not in ("mem", "freeze"):
        raise ValueError("%s: mode must be mem or freeze, got %r" % (where, meta.get("mode")))
    if not isinstance(meta.get("marker"), str) or len(meta["marker"]) > 200:
        raise ValueError("%s: marker must be a string" % where)
    for key, hi in (("started_at", 1e11), ("start_delay_s", 60)):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= hi:
            raise ValueError("%s: %s must be a number 0-%g, got %r" % (where, key, hi, value))
    restores = meta.get("restores")
    if not isinstance(restores, list) or len(restores) > len(RESTORABLE):
        raise ValueError("%s: restores must be a list of at most %d [path, value] pairs" % (where, len(RESTORABLE)))
    for pair in restores:
        if not (isinstance(pair, list) and len(pair) == 2 and pair[0] in RESTORABLE
                and pair[1] in RESTORABLE[pair[0]]):
            raise ValueError("%s: restore %r is not one a cycle makes (%s)"
                             % (where, pair, "; ".join("%s: %s" % (k, "/".join(v)) for k, v in RESTORABLE.items())))
    if meta.get("mem_sleep") not in (None,) + RESTORABLE[MEM_SLEEP]:
        raise ValueError("%s: mem_sleep must be s2idle, shallow, deep or null, got %r" % (where, meta.get("mem_sleep")))
    return meta


def _small_text(path):
    """A state file's text (its first 64 KB, invalid UTF-8 replaced): rc and err of the cycle."""
    return fileio.read_bytes(path, fileio.RECORD, what="cycle state file")[:65536].decode("utf-8", "replace").strip()


def collect_external(module, fs, run_id):
    """The cycle started by wake=external: its exit status, its times and its kernel timeline."""
    p = module.params
    host = socket.gethostname()
    files = state_files(run_id)
    if not os.path.exists(files["json"]):
        module.fail_json(msg="%s: no suspend cycle %s was started here (%s missing; /run is emptied at boot: "
                             "did the host reboot instead of resuming?)" % (host, run_id, files["json"]))
    try:
        meta = check_meta(json.loads(read_text_file(files["json"], "the cycle record", 1024 * 1024),
                                     parse_constant=_no_constant), files["json"])
    except (ParamError, ValueError) as exc:
        why = str(exc) if files["json"] in str(exc) else "%s: %s" % (files["json"], exc)
        module.fail_json(msg="%s: the record of cycle %s cannot be used: %s; nothing was written (check %s and "
                             "%s by hand, then remove %s.*)"
                         % (host, run_id, why, MEM_SLEEP, PRINT_TIMES, os.path.join(STATE_DIR, run_id)))
    if not os.path.exists(files["t0"]):
        # The host answered before its suspend even started: stop the armed shell, so the host
        # cannot go to sleep later on its own, and put back what the start changed.
        if not module.check_mode:
            pid = armed_shell(files, run_id)
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
            for path, value in meta["restores"]:
                fs.write_raw(path, value)
            remove_state(files)
        module.fail_json(msg="%s: the suspend of cycle %s had not started when it was collected (started "
                             "%.1f s ago, delay %.1f s); it was cancelled and nothing is left changed"
                         % (host, run_id, time.time() - meta["started_at"], meta["start_delay_s"]))
    deadline = time.time() + p["collect_timeout_s"]
    while not os.path.exists(files["rc"]):
        if time.time() > deadline:
            module.fail_json(msg="%s: the suspend of cycle %s started but the write to %s has not returned "
                                 "after %.0f s" % (host, run_id, POWER_DIR + "/state", p["collect_timeout_s"]))
        time.sleep(0.2)
    rc = _small_text(files["rc"])
    if rc != "0":
        err = ""
        if os.path.exists(files["err"]):
            err = _small_text(files["err"])
        if not module.check_mode:
            remove_state(files)
        module.fail_json(msg="%s: suspend cycle %s failed: writing %r to %s exited %s: %s (the host did not "
                             "suspend; what the cycle changed was put back)"
                         % (host, run_id, meta["mode"], POWER_DIR + "/state", rc, err or "no message"))
    t0, woke = os.stat(files["t0"]).st_mtime, os.stat(files["woke"]).st_mtime
    result = analyse(module, fs, 1, run_id, meta["marker"], t0, woke)
    result["mem_sleep"] = meta["mem_sleep"]
    if not module.check_mode:
        remove_state(files)
    return result


def main():
    module = ansible_module(
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
            start_delay_s=dict(type="float", default=1.0),
            collect=dict(type="str"),
            collect_timeout_s=dict(type="float", default=20.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    host = socket.gethostname()
    fs = HostFS("/")
    if p["collect"] is not None:
        if not RUN_ID.match(p["collect"]):
            module.fail_json(msg="collect must be the run_id a wake=external call returned (8 hex digits), got %r"
                             % p["collect"])
        try:
            cycle = collect_external(module, fs, p["collect"])
        except (OSError, IOError) as exc:
            module.fail_json(msg="%s: collecting suspend cycle %s failed: %s" % (host, p["collect"], to_native(exc)))
        except ParseError as exc:
            module.fail_json(msg="%s: the kernel log of cycle %s cannot be analysed: %s"
                             % (host, p["collect"], to_native(exc)))
        # The latency profile again after the wake (issue 38): what drifted is written back and counted.
        try:
            drifted = recheck(fs, module)
        except (HostFsError, OSError, IOError, ValueError) as exc:
            module.fail_json(msg="%s: cycle %s was collected, but checking the latency profile again failed: %s"
                             % (host, p["collect"], to_native(exc)), cycles=[cycle], run_id=p["collect"])
        if said(drifted):
            module.warn(said(drifted))
        module.exit_json(changed=not module.check_mode, cycles=[cycle], run_id=p["collect"], profile_drift=drifted)
    # cycles >= 1, rtc_wake_s and start_delay_s are CHECKS; this combination is refused before /sys/power is read.
    if p["wake"] == "external" and p["cycles"] != 1:
        module.fail_json(msg="cycles must be >= 1, and 1 with wake=external (got %d)" % p["cycles"])
    try:
        offered = read_sleep(fs)
    except (HostFsError, ValueError) as exc:
        module.fail_json(msg="%s: %s; nothing was changed"
                             % (host, exc.reason if isinstance(exc, UnicodeDecodeError) else exc))
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
    mem_sleep_used = (want_variant or offered["mem_sleep"]) if p["mode"] == "mem" else "s2idle"
    # What this call changes, and the value each goes back to.
    restores = []
    if want_variant and offered["mem_sleep"]:
        restores.append((MEM_SLEEP, offered["mem_sleep"]))
    if p["pm_print_times"] and before is False:
        restores.append((PRINT_TIMES, "0"))
    results = []
    run_id = uuid.uuid4().hex[:8]
    started = None
    try:
        if want_variant:
            fs.write_raw(MEM_SLEEP, want_variant)
        if p["pm_print_times"] and before is False:
            fs.write_raw(PRINT_TIMES, "1")
        if p["wake"] == "external":
            started = start_external(module, fs, run_id, restores, mem_sleep_used)
        else:
            for index in range(1, p["cycles"] + 1):
                if index > 1:
                    time.sleep(p["pause_s"])
                results.append(rtc_cycle(module, fs, index, run_id))
                results[-1]["mem_sleep"] = mem_sleep_used
    except (OSError, IOError) as exc:
        module.fail_json(msg="%s: suspend cycle %d failed: %s; the host did not suspend or did not log the "
                             "cycle (pm_print_times restored)" % (host, len(results) + 1, to_native(exc)),
                         cycles=results)
    except ParseError as exc:
        module.fail_json(msg="%s: the kernel log of cycle %d cannot be analysed: %s"
                         % (host, len(results) + 1, to_native(exc)), cycles=results)
    finally:
        if started is None:  # a started external cycle puts these back itself, after its resume
            for path, value in restores:
                try:
                    fs.write_raw(path, value)
                except (OSError, IOError):
                    module.warn("could not restore %s to %s" % (path, value))
    if started is not None:
        module.exit_json(changed=True, cycles=[], run_id=run_id, mem_sleep_used=mem_sleep_used,
                         suspend_in_s=p["start_delay_s"], pm_print_times=before, mem_sleep=offered["mem_sleep"],
                         offered=offered)
    module.exit_json(changed=True, cycles=results, pm_print_times=before, mem_sleep=offered["mem_sleep"],
                     offered=offered)


if __name__ == "__main__":
    main()
