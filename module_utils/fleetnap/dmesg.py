# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Suspend/resume timelines from the kernel log (``/sys/power/pm_print_times``).

Standard library only: this module runs on targets as well as on the controller.

Input
-----
Kernel log text as ``dmesg`` prints it (``[ seconds] message``; a syslog or ``<level>``
prefix before the ``[`` is ignored, CR/LF line ends are accepted), or records read from
``/dev/kmsg`` (:func:`kmsg_to_lines`). Two callback formats are understood:

* old (``initcall_debug`` style, kernels before 5.x)::

      calling  0000:00:1f.2+ @ 4274, parent: pci0000:00
      call 0000:00:1f.2+ returned 0 after 13578 usecs

* current (``pm_print_times``, 5.x and later)::

      pci 0000:00:02.0: PM: calling pci_pm_suspend+0x0/0x170 @ 24, parent: pci0000:00
      pci 0000:00:02.0: PM: pci_pm_suspend+0x0/0x170 returned 0 after 73 usecs

Cycles and phases
-----------------
A cycle starts at ``PM: Syncing filesystems`` (old) or ``PM: suspend entry`` (current) and
ends at ``Restarting tasks``. It is cut into the ten phases sleepgraph uses, in order:
suspend_prepare, suspend, suspend_late, suspend_noirq, suspend_machine, resume_machine,
resume_noirq, resume_early, resume, resume_complete. A phase starts at its kernel marker
(``PM: suspend of devices complete after`` starts suspend_late, ``ACPI: Low-level resume
complete`` starts resume_machine, and so on) and ends where the next one starts; phases only
move forward. Current kernels print the ``... of devices complete`` markers only with
``pm_debug_messages``; without them a phase starts at its first callback, recognised by the
callback's name (``*_suspend_late``, ``*_noirq``, ``*_resume_early``; any other resume
callback after the noirq or early ones starts ``resume``), and resume_complete starts when the last
resume callback returns.

Totals (sleepgraph's definitions, dmesg-only analysis)
------------------------------------------------------
* ``suspend_ms`` = machine suspend - kernel suspend start, where the kernel suspend start is
  the cycle's first line and machine suspend is the machine-resume marker line for ``mem``
  (the clock stands still while the machine sleeps) or the line before it for ``freeze`` and
  ``standby``.
* ``resume_ms`` = ``Restarting tasks`` - machine resume (the machine-resume marker line).
* When the log has no machine-resume marker (s2idle/freeze on kernels that print none),
  sleepgraph takes the start of the next phase it can see (the end of the noirq resume
  stage) as both machine suspend and machine resume, so the noirq resume time lands in
  ``suspend_ms``. The totals here do the same, to stay comparable; the phase table instead
  places the wake at the first resume callback, and a warning says so.

Devices
-------
One entry per callback: device name, phase, start (the ``calling`` line), end (the
``returned`` line), duration (the kernel's own ``usecs``), parent, pid, return code, the
callback (current format), a driver when the log names one (``driver device: message``
lines), and ``async``: callbacks run by the thread that suspends the machine (the pid with
the most callbacks in the cycle) are synchronous, the others ran in async workers.
CPU offline/online come from ``Disabling non-boot CPUs`` / ``smpboot: CPU N is now offline``
and ``Enabling non-boot CPUs`` / ``CPUN is up``: each CPU runs from the previous event.

Critical path
-------------
For each phase, the critical path is the chain of callbacks that explains when the phase's
last callback finished. It starts at the callback that returns last and walks backwards: the
predecessor of a callback C is, among the callbacks that returned no later than C was called
and that could have held C back, the one that returned last. Callbacks that can hold C back
are the earlier callbacks of the same thread (a thread runs one callback at a time: this
chains the synchronous callbacks of the suspending thread), C's device-tree dependencies
(on resume, C's parent - a parent resumes before its children; on suspend, C's children -
children suspend before their parent) and, when C is synchronous, any callback at all: the
suspending thread also waits for work it cannot name in the log (asynchronous children,
parents of devices that have no callback), so the last callback to return before it went on
is the best evidence of what it waited for. The walk stops when no such callback exists. Time in
the phase that no callback on the chain accounts for is kernel overhead between callbacks.
In the machine phases the CPU offline/online steps, which are strictly serial, form the path.
"""

from __future__ import annotations

import bisect
import errno
import os
import re

from ansible.module_utils.fleetnap import fileio

MAX_KMSG_RECORDS = 1000000      # the ring buffer holds far fewer; a device that never ends is cut here

PHASES = (
    "suspend_prepare", "suspend", "suspend_late", "suspend_noirq", "suspend_machine",
    "resume_machine", "resume_noirq", "resume_early", "resume", "resume_complete",
)
PHASE_ORDER = dict((p, i) for i, p in enumerate(PHASES))
SUSPEND_PHASES = PHASES[:5]
RESUME_PHASES = PHASES[5:]
_I_MACHINE_SUS = PHASE_ORDER["suspend_machine"]
_I_MACHINE_RES = PHASE_ORDER["resume_machine"]

# "deep" etc. as ``PM: suspend entry (deep)`` says, mapped to the /sys/power/state names.
_MODE_ALIASES = {"deep": "mem", "s2idle": "freeze", "shallow": "standby"}


class ParseError(ValueError):
    """A log that does not hold a complete suspend/resume cycle.

    ``lineno`` (1-based, or None) is the line the problem was found at; ``str()`` names it.
    """

    def __init__(self, message, lineno=None):
        self.lineno = lineno
        self.message = message
        if lineno is not None:
            message = "line %d: %s" % (lineno, message)
        super().__init__(message)


# ---------------------------------------------------------------------------------------
# Regular expressions (compiled once)
# ---------------------------------------------------------------------------------------
# Every number a pattern takes is bounded as the kernel prints it (a timestamp's seconds and
# fraction, a pid, a return code, usecs, a CPU): a longer run of digits is no kernel line (and
# int() refuses more than 4300 digits, float() turns 400 into infinity).
_TS = re.compile(r"\[\s*(\d{1,12}\.\d{1,9})\]\s?(.*)")
# device names may contain spaces ("Fixed MDIO bus.0")
_OLD_CALL = re.compile(r"calling  (.+?)\+ @ (\d{1,10})(?:, parent: (.+))?$")
_OLD_RET = re.compile(r"call (.+?)\+ returned (-?\d{1,10}) after (\d{1,20}) usecs")
# callbacks in modules carry the module name: "acpi_button_suspend+0x0/0x20 [button]"
_NEW_CALL = re.compile(r"(.+?): PM: calling (\S+(?: \[\S+\])?) @ (\d{1,10})(?:, parent: (.+))?$")
_NEW_RET = re.compile(r"(.+?): PM: (\S+(?: \[\S+\])?) returned (-?\d{1,10}) after (\d{1,20}) usecs")
_HINT = re.compile(r"([A-Za-z][\w.-]*) ([\w:.+-]*[\w.+-])[: ]")

_START = re.compile(r"PM: (?:Syncing filesystems|suspend entry(?: \((\w+)\))?)")
_MODE_OLD = re.compile(r"PM: Preparing system for (\w+) sleep")
_END = re.compile(r"Restarting tasks")
_END_FALLBACK = re.compile(r"PM: (?:suspend exit|Finishing wakeup)")

# (phase, regex, sleepgraph_compatible): markers sleepgraph 5.6 also knows are flagged True;
# the others only exist in logs of current kernels.
_MARKERS = [
    ("suspend", re.compile(r"PM: Entering \w+ sleep|(?:printk: )?Suspending console|"
                           r"PM: Suspending system"), True),
    ("suspend_late", re.compile(r"PM: (?:suspend|freeze) of devices complete after"), True),
    ("suspend_noirq", re.compile(r"PM: late (?:suspend|freeze) of devices complete after"),
     True),
    ("suspend_machine", re.compile(r"PM: noirq (?:suspend|freeze) of devices complete after"),
     True),
    ("suspend_machine", re.compile(r"PM: suspend-to-idle|(?:ACPI: )?(?:PM: )?Preparing to "
                                   r"enter system sleep state"), False),
    ("resume_machine", re.compile(r"ACPI: Low-level resume complete|ACPI: resume from mwait"),
     True),
    ("resume_machine", re.compile(r"ACPI: PM: Low-level resume complete|(?:PM: )?Timekeeping "
                                  r"suspended for|Suspended for [\d.]+ seconds"), False),
    ("resume_noirq", re.compile(r"ACPI: Waking up from system sleep state"), True),
    ("resume_noirq", re.compile(r"ACPI: PM: Waking up from system sleep state|"
                                r"PM: resume from suspend-to-idle"), False),
    ("resume_early", re.compile(r"PM: noirq (?:resume|restore) of devices complete after"),
     True),
    ("resume", re.compile(r"PM: early (?:resume|restore) of devices complete after"), True),
    ("resume_complete", re.compile(r"PM: (?:resume|restore) of devices complete after"), True),
]
# standby (ACPI S1) has no low-level resume line; sleepgraph uses this one.
_STANDBY_RESUME = re.compile(r"(?:ACPI: )?PM: Restoring platform NVS memory")
# Cheap pre-filter: a marker line contains one of these words.
_MARKER_WORDS = ("PM:", "ACPI", "Suspend", "suspend", "Timekeeping")

_CPU_OFF_START = re.compile(r"Disabling non-boot CPUs")
_CPU_ON_START = re.compile(r"Enabling non-boot CPUs")
_CPU_OFF = re.compile(r"smpboot: CPU (\d{1,5}) is now offline")
_CPU_ON = re.compile(r"CPU(\d{1,5}) is up")

_RESUME_CB = re.compile(r"resume|thaw|restore")


def _cb_kind(callback):
    """'noirq', 'late', 'early' or '' from a callback symbol like pci_pm_resume_noirq+0x0/0x150."""
    base = callback.split("+", 1)[0]
    if base.endswith("_noirq"):
        return "noirq"
    if base.endswith("_late"):
        return "late"
    if base.endswith("_early"):
        return "early"
    return ""


# ---------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------
class Device(object):
    """One device PM callback in one phase (times in kernel seconds)."""

    __slots__ = ("name", "phase", "start", "end", "duration_ms", "parent", "pid", "rc",
                 "callback", "driver", "async_", "critical", "lineno")

    def __init__(self, name, phase, start, parent, pid, callback, driver, lineno):
        self.name = name
        self.phase = phase
        self.start = start
        self.end = None
        self.duration_ms = None
        self.parent = parent
        self.pid = pid
        self.rc = None
        self.callback = callback
        self.driver = driver
        self.async_ = False
        self.critical = False
        self.lineno = lineno


class CpuEvent(object):
    """One CPU taken offline (suspend) or brought online (resume)."""

    __slots__ = ("cpu", "action", "start", "end", "phase", "critical")

    def __init__(self, cpu, action, start, end, phase):
        self.cpu = cpu
        self.action = action
        self.start = start
        self.end = end
        self.phase = phase
        self.critical = True

    @property
    def duration_ms(self):
        return (self.end - self.start) * 1000.0


class Cycle(object):
    """One suspend/resume cycle: phases, devices, CPUs, critical paths and totals."""

    def __init__(self, index, lineno, t0, mode):
        self.index = index
        self.first_line = lineno
        self.last_line = lineno
        self.mode = mode
        self.kernel = None
        self.t_kernel_suspend = t0          # kernel suspend start
        self.t_machine_suspend = None       # machine suspend (sleepgraph's tSuspended)
        self.t_machine_resume = None        # machine resume (sleepgraph's tResumed)
        self.t_kernel_resume = None         # kernel resume end ("Restarting tasks")
        self.phase_start = {"suspend_prepare": t0}
        self.phase_end = {}
        self.marker_start = {}              # phase -> time, sleepgraph-compatible markers only
        self.devices = []
        self.cpus = []
        self.critical = {}                  # phase -> [Device or CpuEvent] in time order
        self.warnings = []
        self.main_pid = None
        self.wake_inferred = False

    # -- totals ------------------------------------------------------------------------
    @property
    def suspend_ms(self):
        return (self.t_machine_suspend - self.t_kernel_suspend) * 1000.0

    @property
    def resume_ms(self):
        return (self.t_kernel_resume - self.t_machine_resume) * 1000.0

    def phase_ms(self, phase):
        return (self.phase_end[phase] - self.phase_start[phase]) * 1000.0

    def cpu_ms(self, action):
        return sum(c.duration_ms for c in self.cpus if c.action == action)

    def breakdown(self):
        """CPUs / noirq / devices split of each side (the breakdown of source 001)."""
        res_dev = sum(self.phase_ms(p) for p in ("resume_early", "resume", "resume_complete"))
        sus_dev = sum(self.phase_ms(p) for p in ("suspend", "suspend_late"))
        return {
            "suspend": {"devices_ms": sus_dev, "noirq_ms": self.phase_ms("suspend_noirq"),
                        "cpus_ms": self.cpu_ms("offline"),
                        "prepare_ms": self.phase_ms("suspend_prepare")},
            "resume": {"cpus_ms": self.cpu_ms("online"), "noirq_ms": self.phase_ms("resume_noirq"),
                       "devices_ms": res_dev},
        }

    def slowest(self, top=10):
        devs = sorted(self.devices, key=lambda d: (-d.duration_ms, d.start))
        return devs[:top]

    def rel_ms(self, t):
        return (t - self.t_kernel_suspend) * 1000.0

    def device_dict(self, d):
        return {
            "name": d.name, "phase": d.phase, "start_ms": round(self.rel_ms(d.start), 3),
            "end_ms": round(self.rel_ms(d.end), 3), "duration_ms": round(d.duration_ms, 3),
            "on_critical_path": d.critical, "parent": d.parent, "pid": d.pid,
            "async": d.async_, "rc": d.rc, "callback": d.callback, "driver": d.driver,
        }

    def to_dict(self, top=10, with_devices=True):
        """JSON-ready result (times in ms; start_ms relative to the kernel suspend start)."""
        out = {
            "index": self.index,
            "mode": self.mode,
            "kernel": self.kernel,
            "lines": [self.first_line, self.last_line],
            "suspend_ms": round(self.suspend_ms, 3),
            "resume_ms": round(self.resume_ms, 3),
            "phases": dict((p, round(self.phase_ms(p), 3)) for p in PHASES),
            "phase_times": dict((p, {"start_ms": round(self.rel_ms(self.phase_start[p]), 3),
                                     "end_ms": round(self.rel_ms(self.phase_end[p]), 3)})
                                for p in PHASES),
            "breakdown": _round_tree(self.breakdown()),
            "cpus": [{"cpu": c.cpu, "action": c.action, "start_ms": round(self.rel_ms(c.start), 3),
                      "duration_ms": round(c.duration_ms, 3), "phase": c.phase} for c in self.cpus],
            "main_pid": self.main_pid,
            "device_count": len(self.devices),
            "slowest": [self.device_dict(d) for d in self.slowest(top)],
            "critical_path": [self._crit_dict(x) for p in PHASES for x in self.critical.get(p, ())],
            "warnings": list(self.warnings),
        }
        if with_devices:
            out["devices"] = [self.device_dict(d) for d in self.devices]
        return out

    def _crit_dict(self, x):
        if isinstance(x, CpuEvent):
            return {"phase": x.phase, "name": "CPU%d" % x.cpu, "kind": "cpu_" + x.action,
                    "start_ms": round(self.rel_ms(x.start), 3),
                    "duration_ms": round(x.duration_ms, 3)}
        return {"phase": x.phase, "name": x.name, "kind": "device", "driver": x.driver,
                "start_ms": round(self.rel_ms(x.start), 3), "duration_ms": round(x.duration_ms, 3),
                "async": x.async_}


def _round_tree(d):
    return dict((k, _round_tree(v) if isinstance(v, dict) else round(v, 3)) for k, v in d.items())


# ---------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------
def kmsg_to_lines(records):
    """Turn ``/dev/kmsg`` records (``pri,seq,usec,flags;message``) into dmesg-style lines."""
    out = []
    for rec in records:
        if not rec or rec[0] == " ":
            continue  # continuation lines carry key=value device properties
        head, sep, msg = rec.partition(";")
        if not sep:
            continue
        fields = head.split(",")
        if len(fields) < 3 or not fields[2].isdigit() or not fields[2].isascii() or len(fields[2]) > 20:
            continue    # a u64 of microseconds: 20 ASCII digits at most
        usec = int(fields[2])
        # one read() is one record: its text up to the first newline, then the record's dictionary
        # (" SUBSYSTEM=pci", " DEVICE=+pci:...", one per line), which dmesg does not print
        text = msg.split("\n", 1)[0]
        out.append("[%5d.%06d] %s" % (usec // 1000000, usec % 1000000, _unescape(text)))
    return out


_KMSG_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def _unescape(msg):
    """/dev/kmsg writes every byte below 0x20, from 0x7f up and the backslash itself as \\xHH
    (a tab is \\x09, UTF-8 text is escaped byte by byte); dmesg shows the bytes. Same here."""
    if "\\x" not in msg:
        return msg
    raw = _KMSG_ESCAPE.sub(lambda m: "\x00" + m.group(1), msg)
    out = bytearray()
    parts = raw.split("\x00")
    out += parts[0].encode("utf-8")
    for part in parts[1:]:
        out.append(int(part[:2], 16))
        out += part[2:].encode("utf-8")
    return out.decode("utf-8", "replace")


class _State(object):
    __slots__ = ("cycle", "phase_i", "open", "orphans", "prev_t", "cpu_t", "cpu_phase",
                 "end_fallback")


def parse(log, since=None):
    """Parse kernel log text (a str or an iterable of lines) into a list of :class:`Cycle`.

    ``since``: ignore lines with a timestamp (kernel seconds) before it. Raises
    :class:`ParseError` when the log has no cycle or a cycle is cut off before it ended.
    """
    lines = log.splitlines() if isinstance(log, str) else log
    cycles = []
    skipped = []
    last_t = None
    hints = {}
    st = None
    stamped = 0
    callbacks_outside = 0
    lineno = 0
    ts_search = _TS.search
    for lineno, raw in enumerate(lines, 1):
        if "[" not in raw:
            continue
        m = ts_search(raw)
        if m is None:
            continue
        t = float(m.group(1))
        if since is not None and t < since:
            continue
        stamped += 1
        msg = m.group(2).rstrip("\r\n ")
        if st is not None:
            st.cycle.last_line = lineno
            st.prev_t = last_t
        last_t = t
        # -- device callbacks (most lines): cheapest checks first ------------------------
        if "call" in msg or " usecs" in msg:
            if msg.startswith("calling  "):
                cm = _OLD_CALL.match(msg)
                if cm:
                    if st is None:
                        callbacks_outside += 1
                    else:
                        _on_call(st, cm.group(1), None, int(cm.group(2)), cm.group(3), None, t,
                                 lineno)
                    continue
            elif msg.startswith("call "):
                rm = _OLD_RET.match(msg)
                if rm:
                    if st is not None:
                        _on_return(st, rm.group(1), None, int(rm.group(2)), int(rm.group(3)), t)
                    continue
            elif ": PM: " in msg:
                if "PM: calling " in msg:
                    cm = _NEW_CALL.match(msg)
                    if cm:
                        if st is None:
                            callbacks_outside += 1
                        else:
                            name, driver = _split_dev(cm.group(1))
                            _on_call(st, name, cm.group(2), int(cm.group(3)), cm.group(4), driver,
                                     t, lineno)
                        continue
                elif " returned " in msg:
                    rm = _NEW_RET.match(msg)
                    if rm:
                        if st is not None:
                            name, _drv = _split_dev(rm.group(1))
                            _on_return(st, name, rm.group(2), int(rm.group(3)), int(rm.group(4)), t)
                        continue
        # -- cycle start / end -------------------------------------------------------------
        if "PM: " in msg:
            sm = _START.search(msg)
            if sm:
                if st is not None:
                    skipped.append(_finish(st, cycles, lineno, truncated=True, fatal=False))
                mode = sm.group(1)
                mode = _MODE_ALIASES.get(mode, mode) if mode else None
                st = _State()
                st.cycle = Cycle(len(cycles), lineno, t, mode)
                st.phase_i = 0
                st.open = {}
                st.orphans = {}
                st.prev_t = t
                st.cpu_t = None
                st.cpu_phase = None
                st.end_fallback = None
                st.cycle.warnings.extend(w for w in skipped if w)
                skipped = []
                continue
        # -- driver hints: "snd_hda_intel 0000:00:1b.0: irq 49 for MSI/MSI-X" ---------------------
        hm = _HINT.match(msg)
        if hm is not None:
            dev = hm.group(2)
            if dev not in hints and any(c.isdigit() for c in dev):
                hints[dev] = hm.group(1)
        if st is None:
            continue
        cyc = st.cycle
        if _END.search(msg):
            cyc.t_kernel_resume = t
            _finish(st, cycles, lineno)
            st = None
            continue
        if st.phase_i >= _I_MACHINE_RES and _END_FALLBACK.search(msg):
            st.end_fallback = t
        # -- phase markers ---------------------------------------------------------------------
        if any(w in msg for w in _MARKER_WORDS):
            if cyc.mode is None:
                mm = _MODE_OLD.search(msg)
                if mm:
                    cyc.mode = _MODE_ALIASES.get(mm.group(1), mm.group(1))
            hit = False
            for phase, rx, compat in _MARKERS:
                if rx.search(msg):
                    _enter(st, phase, t, marker=True, compat=compat)
                    hit = True
                    break
            if not hit and cyc.mode == "standby" and _STANDBY_RESUME.search(msg):
                _enter(st, "resume_machine", t, marker=True, compat=True)
        # -- CPUs --------------------------------------------------------------------------------
        if "CPU" in msg:
            if _CPU_OFF_START.search(msg) or _CPU_ON_START.search(msg):
                st.cpu_t = t
                if st.phase_i < _I_MACHINE_RES and _CPU_ON_START.search(msg):
                    # CPUs come back only after the machine woke up
                    _infer_wake(st, t)
            else:
                om = _CPU_OFF.search(msg)
                if om and st.cpu_t is not None:
                    cyc.cpus.append(CpuEvent(int(om.group(1)), "offline", st.cpu_t, t,
                                             PHASES[st.phase_i]))
                    st.cpu_t = t
                else:
                    um = _CPU_ON.search(msg)
                    if um and st.cpu_t is not None:
                        cyc.cpus.append(CpuEvent(int(um.group(1)), "online", st.cpu_t, t,
                                                 PHASES[st.phase_i]))
                        st.cpu_t = t

    if stamped == 0:
        raise ParseError("no kernel log lines with a timestamp ('[ seconds] message') among %d "
                         "lines: capture the log with plain 'dmesg' (not -T/--ctime), or the "
                         "'since' value is later than every line" % lineno, 1 if lineno else None)
    if st is not None:
        _finish(st, cycles, lineno, truncated=True)
    if not cycles:
        extra = ""
        if callbacks_outside:
            extra = (" (%d device callback lines were found, but not the start of their cycle: "
                     "the ring buffer may have wrapped)" % callbacks_outside)
        raise ParseError("no suspend/resume cycle in %d lines: expected a 'PM: suspend entry' or "
                         "'PM: Syncing filesystems' line%s; enable /sys/power/pm_print_times and "
                         "suspend the host before reading the log" % (lineno, extra))
    for cyc in cycles:
        for d in cyc.devices:
            if d.driver is None:
                d.driver = hints.get(d.name)
    return cycles


def _split_dev(prefix):
    """'pci 0000:00:02.0' -> ('0000:00:02.0', 'pci'); dev_printk puts the name last."""
    i = prefix.rfind(" ")
    if i < 0:
        return prefix, None
    return prefix[i + 1:], prefix[:i]


def _enter(st, phase, t, marker, compat):
    """Move the cycle forward to ``phase`` starting at ``t`` (never backwards)."""
    i = PHASE_ORDER[phase]
    cyc = st.cycle
    if compat and phase not in cyc.marker_start and i > _I_MACHINE_SUS - 1:
        cyc.marker_start[phase] = t
    if i <= st.phase_i:
        return
    if i == _I_MACHINE_RES:
        if marker:
            cyc.t_machine_resume = t
            # the clock stops in S3; in freeze/standby the marker comes after the wake
            cyc.t_machine_suspend = t if cyc.mode not in ("freeze", "standby") else st.prev_t
    cyc.phase_start[phase] = t
    st.phase_i = i


def _on_call(st, name, callback, pid, parent, driver, t, lineno):
    cyc = st.cycle
    i = st.phase_i
    if callback is not None:
        kind = _cb_kind(callback)
        if i < _I_MACHINE_SUS and not _RESUME_CB.search(callback):
            target = {"late": "suspend_late", "noirq": "suspend_noirq"}.get(kind, "suspend")
            _enter(st, target, t, marker=False, compat=False)
        elif i >= _I_MACHINE_SUS:
            if i == _I_MACHINE_SUS:
                _infer_wake(st, t)
            target = {"noirq": "resume_noirq", "early": "resume_early"}.get(kind, "resume")
            _enter(st, target, t, marker=False, compat=False)
        else:
            # a resume callback while the log still looks like suspend: we woke up unseen
            _infer_wake(st, t)
            target = {"noirq": "resume_noirq", "early": "resume_early"}.get(kind, "resume")
            _enter(st, target, t, marker=False, compat=False)
    elif i == _I_MACHINE_SUS:
        # old format: no device callbacks run between noirq suspend and the wake
        _infer_wake(st, t)
        _enter(st, "resume_noirq", t, marker=False, compat=False)
    elif i == _I_MACHINE_RES and cyc.t_machine_resume is not None:
        _enter(st, "resume_noirq", t, marker=False, compat=False)
    phase = PHASES[st.phase_i]
    dev = Device(name, phase, t, parent, pid, callback, driver, lineno)
    key = (name, callback)
    orphan = st.orphans.pop(key, None)
    if orphan is not None and orphan[0] == t:
        # the return line was printed before its call line (same timestamp): pair them
        dev.end, dev.rc, dev.duration_ms = orphan
        cyc.devices.append(dev)
        return
    st.open[key] = dev


def _on_return(st, name, callback, rc, usecs, t):
    key = (name, callback)
    dev = st.open.pop(key, None)
    if dev is None:
        st.orphans[key] = (t, rc, usecs / 1000.0)
        return
    dev.end = t
    dev.rc = rc
    dev.duration_ms = usecs / 1000.0
    st.cycle.devices.append(dev)


def _infer_wake(st, t):
    cyc = st.cycle
    if cyc.t_machine_resume is None and not cyc.wake_inferred:
        cyc.wake_inferred = True
        cyc.phase_start["resume_machine"] = t
        cyc.phase_end["suspend_machine"] = t
        st.phase_i = max(st.phase_i, _I_MACHINE_RES)


def _finish(st, cycles, lineno, truncated=False, fatal=True):
    """Close a cycle. A truncated one raises ParseError (``fatal``) or returns a warning."""
    cyc = st.cycle
    if cyc.t_kernel_resume is None and st.end_fallback is not None and st.phase_i >= PHASE_ORDER["resume"]:
        cyc.t_kernel_resume = st.end_fallback
        cyc.warnings.append("no 'Restarting tasks' line: the resume end is taken from "
                            "'PM: Finishing wakeup'/'PM: suspend exit'")
        truncated = False
    if truncated or cyc.t_kernel_resume is None:
        if st.open:
            pending = sorted(st.open.values(), key=lambda d: d.lineno)[0]
            what = "the return of '%s' (called at line %d) and then " % (pending.name, pending.lineno)
        else:
            what = ""
        if not fatal:
            return ("skipped the cycle of lines %d-%d: a new cycle began in its %s phase before "
                    "it resumed" % (cyc.first_line, cyc.last_line, PHASES[st.phase_i]))
        raise ParseError("the log ends in the %s phase of the suspend/resume cycle that began at "
                         "line %d: expected %s'Restarting tasks' (end of resume); the log is "
                         "truncated (capture it again after the host has resumed)"
                         % (PHASES[st.phase_i], cyc.first_line, what), lineno)
    _finalise(cyc, st)
    cycles.append(cyc)
    return None


def _finalise(cyc, st):
    t_end = cyc.t_kernel_resume
    # callbacks that never returned: report them, do not count them
    for d in st.open.values():
        cyc.warnings.append("%s: %s callback called at line %d never returned"
                            % (d.name, d.phase, d.lineno))
    cyc.devices.sort(key=lambda d: (d.start, d.lineno))
    # resume_complete starts when the last resume callback returned (if no marker said so)
    if "resume_complete" not in cyc.phase_start:
        ends = [d.end for d in cyc.devices if d.phase == "resume"]
        cyc.phase_start["resume_complete"] = max(ends) if ends else t_end
    # the wake point and sleepgraph's totals
    sg_wake = None
    if cyc.t_machine_resume is None:
        later = [t for p, t in cyc.marker_start.items() if PHASE_ORDER[p] > _I_MACHINE_RES]
        if later:
            sg_wake = min(later)
    if cyc.t_machine_resume is None:
        wake = cyc.phase_start.get("resume_machine")
        if sg_wake is not None:
            cyc.t_machine_suspend = cyc.t_machine_resume = sg_wake
            cyc.warnings.append(
                "no machine-resume marker in this log (%s): suspend_ms/resume_ms follow "
                "sleepgraph, which takes the end of the noirq resume stage as the wake point; "
                "the phase table places the wake at the first resume callback"
                % (cyc.mode or "unknown mode"))
        elif wake is not None:
            cyc.t_machine_suspend = cyc.t_machine_resume = wake
            cyc.warnings.append("no machine-resume marker in this log: the wake point is "
                                "taken as the first resume callback")
        else:
            cyc.t_machine_suspend = cyc.t_machine_resume = t_end
            cyc.warnings.append("the cycle never reached the machine suspend (suspend aborted?)")
    if "resume_machine" not in cyc.phase_start:
        cyc.phase_start["resume_machine"] = cyc.t_machine_resume
    if "suspend_machine" not in cyc.phase_end:
        cyc.phase_end["suspend_machine"] = cyc.t_machine_suspend
    # missing phases collapse to zero length at the start of the next one
    nxt = t_end
    for p in reversed(PHASES):
        if p not in cyc.phase_start:
            cyc.phase_start[p] = nxt if p != "suspend_machine" else cyc.phase_end["suspend_machine"]
        nxt = cyc.phase_start[p]
    for i, p in enumerate(PHASES):
        if p == "suspend_machine":
            continue
        cyc.phase_end[p] = cyc.phase_start[PHASES[i + 1]] if i + 1 < len(PHASES) else t_end
    # sync vs async: the suspending thread is the pid with the most callbacks
    counts = {}
    for d in cyc.devices:
        counts[d.pid] = counts.get(d.pid, 0) + 1
    if counts:
        first = {}
        for d in cyc.devices:
            first.setdefault(d.pid, d.start)
        cyc.main_pid = max(counts, key=lambda p: (counts[p], -first[p]))
        for d in cyc.devices:
            d.async_ = d.pid != cyc.main_pid
    for d in cyc.devices:
        if d.rc:
            cyc.warnings.append("%s: %s callback returned %d" % (d.name, d.phase, d.rc))
    _critical_paths(cyc)


def _critical_paths(cyc):
    by_phase = {}
    for d in cyc.devices:
        by_phase.setdefault(d.phase, []).append(d)
    for phase, devs in by_phase.items():
        path = critical_path(devs, resume=PHASE_ORDER[phase] >= _I_MACHINE_RES)
        for d in path:
            d.critical = True
        cyc.critical[phase] = path
    for phase in ("suspend_machine", "resume_machine"):
        cpus = [c for c in cyc.cpus if c.phase == phase]
        if cpus:
            cyc.critical[phase] = sorted(cpus, key=lambda c: c.start) + cyc.critical.get(phase, [])


def critical_path(devs, resume):
    """The critical path of one phase's callbacks (see the module docstring), in time order.

    ``devs`` are the phase's callbacks with ``async_`` already set; ``resume`` selects the
    direction of device-tree dependencies.
    """
    if not devs:
        return []
    eps = 1e-7
    by_end = sorted(devs, key=lambda d: d.end)
    all_ends = [d.end for d in by_end]
    by_pid = {}
    for d in devs:
        by_pid.setdefault(d.pid, []).append(d)
    pid_ends = {}
    for pid, lst in by_pid.items():
        lst.sort(key=lambda d: d.end)
        pid_ends[pid] = [d.end for d in lst]
    by_name = {}
    children = {}
    for d in devs:
        by_name.setdefault(d.name, d)
        if d.parent:
            children.setdefault(d.parent, []).append(d)
    cur = max(devs, key=lambda d: (d.end, -d.start))
    path = [cur]
    seen = {id(cur)}
    while True:
        limit = cur.start + eps
        best = None
        lst = by_pid[cur.pid]
        k = bisect.bisect_right(pid_ends[cur.pid], limit) - 1
        while k >= 0 and id(lst[k]) in seen:
            k -= 1
        if k >= 0:
            best = lst[k]
        if resume:
            deps = [by_name[cur.parent]] if cur.parent in by_name else []
        else:
            deps = children.get(cur.name, ())
        for dep in deps:
            if dep.end <= limit and id(dep) not in seen and (best is None or dep.end > best.end):
                best = dep
        if not cur.async_:
            # the suspending thread also waits for callbacks it cannot name (async children,
            # parents of devices that print no callback): the last one to return counts
            k = bisect.bisect_right(all_ends, limit) - 1
            while k >= 0 and (id(by_end[k]) in seen or by_end[k] is cur):
                k -= 1
            if k >= 0 and (best is None or by_end[k].end > best.end):
                best = by_end[k]
        if best is None:
            break
        path.append(best)
        seen.add(id(best))
        cur = best
    path.reverse()
    return path


def parse_file(path, since=None, limit=None):
    """Parse a saved log file through the file layer (a regular file, at most ``limit`` bytes,
    default fileio.LOG; bytes that are not UTF-8 are replaced)."""
    data = fileio.read_bytes(path, fileio.LOG if limit is None else limit, what="kernel log")
    return parse(data.decode("utf-8", "replace"), since=since)


def select(cycles, which="last"):
    """'last' -> [the last cycle]; 'all' -> every cycle."""
    if which == "all":
        return list(cycles)
    if which == "last":
        return [cycles[-1]]
    raise ValueError("cycle must be 'last' or 'all', not %r" % (which,))


def read_kmsg(path="/dev/kmsg"):
    """All records currently in the ring buffer, without blocking."""
    records = []
    # fileio.open_device: only the character device (a planted file or FIFO is refused); read
    # non-blocking, record by record, until the ring buffer has no more (EAGAIN).
    dev = fileio.open_device(path, "rb")
    fd = dev.fileno()
    os.set_blocking(fd, False)
    try:
        while True:
            try:
                chunk = os.read(fd, 8192)
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    break
                if e.errno == errno.EPIPE:  # overwritten while reading: skip ahead
                    continue
                raise
            if not chunk:
                break
            records.append(chunk.decode("utf-8", "replace"))
            if len(records) > MAX_KMSG_RECORDS:
                break
    finally:
        dev.close()
    return kmsg_to_lines(records)
