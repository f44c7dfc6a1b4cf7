# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A wave of a gear shift, done for all of its hosts at once from the controller.

``wake()`` wakes every host of a wave by its methods in order (Wake-on-LAN, then IPMI), waits
for each one's SSH greeting and reports per host; ``park()`` powers down the hosts parked by
their BMC and waits until every host of the wave (also those whose suspend the host itself was
told to do) is silent. Every host has its own thread: a wave costs the slowest host's own
transition plus a probe interval, not a task round per host and step.

A probe is a TCP connection and, for SSH, the greeting (so a port a NAT or QEMU keeps open for a
sleeping host is no answer). Waiting for a host to answer, a new connection attempt (a new SYN)
starts every ``interval`` s while the earlier ones still wait (each at most ``connect_timeout``
s, at most IN_FLIGHT at once): one connect waits for the kernel's SYN retransmissions (1, 3, 7 s)
and reports a host that answered at 1.1 s at 3 s, and probing again only after a connect timeout
sees it up to that timeout late; this sees it within an interval. The greeting gets
``probe_timeout``. Waiting for silence, a connection that does not greet is not waited for the
whole ``probe_timeout`` when new connections get no answer meanwhile (the host went to sleep
after it accepted).

BMC commands go through ``bmc_slots`` (at most that many in flight) and each BMC's own rate
limit (ipmi.Bmc). A host's result has the shape gear_member's has: host, action, ok, method,
state, attempts, wait_s, elapsed_s, msg. Nothing here raises for one host's failure: it is that
host's result. Standard library only.
"""

from __future__ import annotations

import selectors
import threading
import time

from ansible.module_utils.fleetnap.observe import compile_greeting, first_connection, greeted, greeting_or_gone
from ansible.module_utils.fleetnap.parse import boolean
from ansible.module_utils.fleetnap.together import run_together


REFUSAL = "cannot suspend: "


def suspend_outcome(said, no_s3_fallback, has_bmc):
    """What a host's own suspend command said (gear_member's checked suspend, run by the caller
    with failed_when false: its registered result, ``rc``, ``stdout``, ``unreachable``, ``msg``).

    Returns (method, failed_state, note): method ``suspend`` (scheduled: wait for the silence),
    or ``no_s3_fallback`` (the host has no S3 at all, exit 4, and a BMC: parked by it instead,
    note says why), or None when the host cannot be parked: refused with its one-line reason
    (nothing was scheduled, failed_state ``on``) or the command did not run (``unknown``)."""
    if boolean(said.get("skipped") or False, "said.skipped"):
        return "suspend", None, ""
    lines = str(said.get("stdout") or "").splitlines()
    refusal = next((ln.strip() for ln in lines if ln.strip().startswith(REFUSAL)), "")
    if boolean(said.get("unreachable") or False, "said.unreachable"):
        return None, "unknown", "could not start the suspend (host unreachable): %s" % (
            str(said.get("msg") or "").strip()[:300])
    rc = said.get("rc")
    if rc == 0:
        return "suspend", None, ""
    if rc == 4 and no_s3_fallback and has_bmc:
        return no_s3_fallback, None, "%s: parked by %s through the BMC instead" % (refusal or "no S3", no_s3_fallback)
    if refusal:
        return None, "on", "%s; nothing was scheduled, the host stays up" % refusal
    detail = ("%s %s" % (said.get("msg") or "", said.get("stdout") or "")).strip()
    return None, "unknown", "could not start the suspend (rc %s): %s" % (rc, detail[:300])


# What gear_member's park prints when it installed its resume hook (templates/suspend.sh.j2).
RESUME_HOOK_LINE = "parked with the resume hook "


def resume_hook_in(said):
    """True when the host's own suspend command said it parked with gear_member's resume hook
    (the host puts its in-service sleep policy back itself on the wake)."""
    if not isinstance(said, dict) or said.get("rc") != 0:
        return False
    return any(ln.strip().startswith(RESUME_HOOK_LINE) for ln in str(said.get("stdout") or "").splitlines())


IN_FLIGHT = 4      # a waking host's SYNs waiting at once (observe.first_connection)


def allow_open_files(hosts, in_flight=IN_FLIGHT, spare=64):
    """Raise this process's soft limit on open files (never past the hard one) so that every
    host of a wave can have ``in_flight`` connection attempts waiting at once (and its selector);
    beyond it a host's next attempt waits for a free descriptor (its probes are late, not wrong)."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    want = hosts * (in_flight + 1) + spare
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (OSError, ValueError):
        return soft
    return want


class WaveError(Exception):
    """One host's step failed (the message is that step's report)."""


class Probe(object):
    """A host's service seen from the controller: until it answers, until it is silent.

    Waiting for an answer sends a new SYN every ``interval`` s while the earlier ones still wait
    (observe.first_connection): a host that wakes is seen within an interval of its first answer,
    not at the next probe after a connect timeout. A connection then gets ``probe_timeout`` for
    the greeting. Waiting for silence probes once per ``interval``: a connection attempt with no
    answer within ``connect_timeout`` is silence since it started; a connection that does not
    greet is given ``probe_timeout`` while a new connection is tried every ``interval`` s (at
    least every observe.MIN_ATTEMPT_S), and
    the host is silent since the first of those that got no answer (it went to sleep, or froze,
    after it accepted: observe.greeting_or_gone)."""

    def __init__(self, greeting="^SSH-", connect_timeout=1.0, probe_timeout=3.0, interval=0.2,
                 clock=time.monotonic, sleep=time.sleep, selector=selectors.DefaultSelector):
        self.matcher = compile_greeting(greeting) if isinstance(greeting, str) else greeting
        self.connect_timeout = connect_timeout
        self.probe_timeout = probe_timeout
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self.selector = selector

    def until_answer(self, address, port, timeout):
        """(answered, seconds to the answer or None, probes): probes counts the SYNs sent."""
        start = self.clock()
        deadline = start + timeout
        probes = 0
        while True:
            conn, tries, _why = first_connection(address, port, max(0.05, deadline - self.clock()),
                                                 self.connect_timeout, self.interval, in_flight=IN_FLIGHT,
                                                 clock=self.clock, sleep=self.sleep, selector=self.selector)
            probes += tries
            if conn is not None:
                try:
                    ok = greeted(conn, self.matcher, max(0.05, min(self.probe_timeout, deadline - self.clock())))[0]
                finally:
                    conn.close()
                if ok:
                    return True, round(self.clock() - start, 3), probes
            if self.clock() + self.interval >= deadline:
                return False, None, probes
            self.sleep(self.interval)

    def _silent_probe(self, address, port, left):
        """One probe for silence: (answered, since when it has been silent, or None). answered is
        None (undecided) when the probe connected and its greeting's wait, cut short by ``left``,
        ran out while the host still answered new connections: a slow sshd is not silent for
        having had less than ``probe_timeout`` to greet."""
        at = self.clock()
        conn, _tries, _why = first_connection(address, port, max(0.05, min(left, self.connect_timeout)),
                                              self.connect_timeout, self.connect_timeout, in_flight=1,
                                              clock=self.clock, sleep=self.sleep, selector=self.selector)
        if conn is None:
            return False, at
        wait = max(0.05, min(self.probe_timeout, left - (self.clock() - at)))
        try:
            answered, gone_at = greeting_or_gone(conn, self.matcher, wait, address, port, self.connect_timeout,
                                                 self.interval, clock=self.clock, sleep=self.sleep,
                                                 selector=self.selector)
        finally:
            conn.close()
        if answered:
            return True, None
        if answered is None and wait < self.probe_timeout:
            return None, None
        return False, at if gone_at is None else gone_at

    def until_silent(self, address, port, timeout, silent_for):
        """Until no answer for ``silent_for`` s: (silent, seconds to the first silent probe or
        None, probes). An undecided probe (its greeting's wait cut short by the deadline) neither
        starts nor ends a silence."""
        start = self.clock()
        deadline = start + timeout
        probes, silent_since = 0, None
        while True:
            probes += 1
            answered, since = self._silent_probe(address, port, max(0.05, deadline - self.clock()))
            if answered:
                silent_since = None
            elif answered is not None and silent_since is None:
                silent_since = since
            now = self.clock()
            if silent_since is not None and now - silent_since >= silent_for:
                return True, round(silent_since - start, 3), probes
            if now >= deadline:
                return False, None, probes
            self.sleep(self.interval)


class Wave(object):
    """What a wave needs from the outside: the probe, the magic packet sender, BMC slots, time.

    ``send_wol(host)`` sends the host's magic packets (raises on failure). A host's ``bmc`` is an
    object with status() / power(action) / target (ipmi.Bmc), or None.
    """

    def __init__(self, probe, send_wol, bmc_concurrency=4, concurrency=512, wol_timeout=90.0,
                 ipmi_timeout=300.0, down_timeout=120.0, silent_for=2.0, bmc_poll=1.0,
                 cycle_unresponsive=False, soft_fallback_hard=False, wol_resend=5.0, clock=time.monotonic,
                 wall=time.time, sleep=time.sleep):
        self.probe = probe
        self.send_wol = send_wol
        self.wol_resend = wol_resend
        self.bmc_slots = threading.BoundedSemaphore(max(1, bmc_concurrency))
        self.concurrency = max(1, concurrency)
        self.wol_timeout = wol_timeout
        self.ipmi_timeout = ipmi_timeout
        self.down_timeout = down_timeout
        self.silent_for = silent_for
        self.bmc_poll = bmc_poll
        self.cycle_unresponsive = cycle_unresponsive
        self.soft_fallback_hard = soft_fallback_hard
        self.clock = clock
        self.wall = wall
        self.sleep = sleep

    # -- BMC helpers: one command at a time per slot; a wait polls outside the slot
    def _bmc(self, call, *args):
        with self.bmc_slots:
            return call(*args)

    def _bmc_wait(self, bmc, wanted, timeout):
        deadline = self.clock() + timeout
        while True:
            last = self._bmc(bmc.status)
            if last == wanted:
                return True, last
            if self.clock() + self.bmc_poll > deadline:
                return False, last
            self.sleep(self.bmc_poll)

    def _run(self, fn, hosts):
        """``fn`` for every host, at most ``concurrency`` at once, each host its own thread, every
        thread started before any host is acted on (together.run_together)."""
        out = {}
        lock = threading.Lock()

        def one(h):
            try:
                r = fn(h)
            except Exception as exc:  # a defect of one host's step must not lose the others' results
                r = self._result(h, "up" if fn == self._wake_one else "down", False, "", "unknown", [], 0,
                                 self.clock(), "%s: %s" % (exc.__class__.__name__, exc))
            with lock:
                out[h["name"]] = r

        run_together(one, hosts, self.concurrency)
        return out

    def _result(self, h, action, ok, method, state, attempts, wait_s, t0, msg):
        return {"host": h["name"], "action": action, "ok": ok, "method": method, "state": state,
                "attempts": attempts, "wait_s": round(wait_s, 3), "elapsed_s": round(self.clock() - t0, 3),
                "msg": msg}

    # -- up
    def wake(self, hosts):
        """hosts: [{name, address, port, up_methods, chassis_was_off, bmc}] -> {name: result}."""
        return self._run(self._wake_one, hosts)

    def _wake_one(self, h):
        t0 = self.clock()
        # packets the caller sent already (gear_shift_prepare's, during its observation, at this clock's
        # wol_sent_mono): the wait is since them
        early = None
        if h.get("wol_sent_mono") is not None and h["up_methods"][:1] == ["wol"]:
            early = min(t0, float(h["wol_sent_mono"]))
            t0 = early
        attempts, waited = [], 0.0
        for m in h["up_methods"]:
            sent = self.clock() if early is None or m != "wol" else early
            booting = False
            try:
                if m == "wol":
                    timeout = self.wol_timeout
                    ok, took, probes, sends, failed = self._wol_until_answer(h, timeout, sent_at=early)
                    sends_text = "magic packets sent %s%s%s" % (
                        "once" if sends == 1 else "%d times" % sends,
                        " (the first during the observation)" if early is not None else "",
                        "; sending them again failed: %s" % failed if failed else "")
                    note = "%s; " % sends_text if sends > 1 or failed or early is not None else ""
                    sent_note = ", %s" % sends_text if note else ""
                elif m in ("ipmi", "redfish"):
                    booting, note_boot, marker = self._ipmi_on(h)
                    timeout = self.ipmi_timeout
                    note = ("chassis on since the wake (booting), no command sent; " if booting else "") + note_boot
                    ok, took, probes = self.probe.until_answer(h["address"], h["port"], timeout)
                    sent_note = ""
                else:
                    raise WaveError("unknown wake method %r" % (m,))
                if not ok:
                    raise WaveError("did not become answering within %g s (%d probes%s)" % (timeout, probes, sent_note))
                waited += took
                # booting since the method before: that one woke it (this one only waited)
                method = attempts[-1]["method"] if booting and attempts else m
                attempt = {"method": m, "ok": True, "elapsed_s": took,
                           "report": "%s: %sanswered after %s s" % (m, note, took)}
                events = None
                if m in ("ipmi", "redfish") and marker is not None:
                    events, seen = self._events_since(h["bmc"], marker)
                    attempt["report"] += "; " + seen
                attempts.append(attempt)
                out = self._result(h, "up", True, method, "on", attempts, waited, t0, "woke by %s" % method)
                if events is not None:
                    out["bmc_events"] = events
                return out
            except Exception as exc:  # IpmiError, WolError, WaveError: this attempt's report
                spent = round(self.clock() - sent, 2)
                waited += spent
                attempts.append({"method": m, "ok": False, "elapsed_s": spent, "report": "%s: %s" % (m, exc)})
        return self._result(h, "up", False, "", "unknown", attempts, waited, t0,
                            "%s did not come back: %s" % (h["name"], "; ".join(a["report"] for a in attempts)))

    def _wol_until_answer(self, h, timeout, sent_at=None):
        """The host's magic packets, then its answer awaited for ``timeout`` s, the packets sent
        again every ``wol_resend`` s while it is silent (0: once). A packet can be lost (UDP), or
        reach a host that is still on its way into sleep, whose NIC is not yet armed for it; a
        host that wakes on the first ones is not sent more. Two sends are at least a connection
        attempt and a greeting's wait apart (connect_timeout + probe_timeout): each period's wait
        ends its connections, and a host that answers gets its whole greeting's wait in the next.
        Only the first send's failure fails the attempt; a later one is noted and the wait goes
        on (the first packets may be waking the host). ``sent_at`` (this clock's time): the first
        packets were sent then by the caller; the wait, the timeout and the resends count from it.
        (answered, seconds to the answer or None, probes, times the packets were sent, the last
        resend's failure or "")."""
        period = 0.0
        if self.wol_resend and self.wol_resend > 0:
            period = max(self.wol_resend, self.probe.connect_timeout + self.probe.probe_timeout)
        start = self.clock() if sent_at is None else sent_at
        deadline = start + timeout
        probes, sends, failed = 0, 0, ""
        while True:
            if sent_at is not None and not sends:
                sends, began = 1, sent_at
            else:
                try:
                    self.send_wol(h)
                    sends += 1
                except Exception as exc:  # WolError, OSError: the first send's fails the attempt
                    if not sends:
                        raise
                    failed = str(exc)
                began = self.clock()
            left = deadline - began
            step = min(left, period) if period else left
            probing = self.clock()
            ok, took, n = self.probe.until_answer(h["address"], h["port"], max(0.05, began + step - probing))
            probes += n
            if ok:
                return True, round(probing - start + took, 3), probes, sends, failed
            if self.clock() >= deadline or step >= left:
                return False, None, probes, sends, failed

    def _ipmi_on(self, h):
        """Power the host on by its BMC (IPMI or Redfish): (booting, note, event log marker);
        booting is True when the host is found booting (no command sent). Safe power-on, both
        optional per host and on by default: the BMC is first told to boot the disk once (a host
        that network-boots into an installer is the worst outcome of a wake; a BMC that cannot is
        noted, or refused with boot_once_required), and what its event log holds is noted before
        the power-on, so that the entries the wake added are reported after it (event_log)."""
        bmc = h.get("bmc")
        if bmc is None:
            raise WaveError("no BMC configured (fleetnap_bmc_address)")
        power = self._bmc(bmc.status)
        if power == "on" and h.get("chassis_was_off"):
            return True, "", None
        if power == "on" and not self.cycle_unresponsive:
            raise WaveError("BMC %s reports chassis on but the host is silent (asleep in S3 or hung); IPMI power "
                            "on cannot wake it. Set cycle_unresponsive (gear_ipmi_cycle_unresponsive) to "
                            "power-cycle it (a reboot)" % bmc.target)
        if power == "on":
            self._bmc(bmc.power, "off")
            reached, last = self._bmc_wait(bmc, "off", self.ipmi_timeout)
            if not reached:
                raise WaveError("BMC %s accepted 'chassis power off' for the power cycle but still reports %s"
                                % (bmc.target, last))
        note = ""
        if h.get("boot_once", True):
            try:
                got = self._bmc(bmc.set_boot_once, "Hdd")
                how = "once" if got.get("once") else "the BMC reports %s, not once" % got.get("enabled")
                note = "next boot from %s (%s); " % (got.get("target"), how)
            except Exception as exc:  # the wake goes on, its report says so; unless it is required
                if h.get("boot_once_required"):
                    raise WaveError("not powered on: the next boot could not be set to the disk (%s); "
                                    "boot_once_required" % exc)
                note = "boot override not set (%s); " % exc
        marker = None
        if h.get("event_log", True):
            try:
                marker = self._bmc(bmc.log_marker)
            except Exception as exc:  # the wake goes on without a log comparison
                note += "event log not read before the power-on (%s); " % exc
        self._bmc(bmc.power, "on")
        return False, note, marker

    def _events_since(self, bmc, marker):
        """([entries], report text) of the BMC's event log since ``marker``; (None, why) when it
        cannot be read (the wake is not failed for it)."""
        try:
            events = self._bmc(bmc.log_entries_since, marker)
        except Exception as exc:
            return None, "event log not read after the wake (%s)" % exc
        if not events:
            return events, "no new event log entries"
        first = events[0]
        return events, "%d new event log entr%s (first: %s%s)" % (
            len(events), "y" if len(events) == 1 else "ies",
            "%s: " % first["severity"] if first.get("severity") else "", str(first.get("message"))[:160])

    # -- down
    def park(self, hosts):
        """hosts: [{name, address, port, down_method, since (wall clock of the suspend) or None,
        bmc}] -> {name: result}. suspend hosts were told to suspend by the caller; soft/off hosts
        are powered down here. Every one is then waited for until silent."""
        return self._run(self._park_one, hosts)

    def _park_one(self, h):
        t0 = self.clock()
        method = h.get("down_method") or "suspend"
        attempts = []
        note = ""
        if method == "suspend" and h.get("said"):
            method, failed_state, note = suspend_outcome(h["said"], h.get("no_s3_fallback") or "",
                                                         h.get("bmc") is not None)
            if method is None:
                return self._result(h, "down", False, "suspend", failed_state, attempts, 0.0, t0, note)
        try:
            if method in ("soft", "off"):
                attempts.append(self._bmc_down(h, method))
            elif method != "suspend":
                raise WaveError("unknown down method %r" % (method,))
            silent, took, probes = self.probe.until_silent(
                h["address"], h["port"], self.down_timeout, self.silent_for)
            if not silent:
                raise WaveError("still answers %g s after %s (%d probes)" % (self.down_timeout, method, probes))
        except Exception as exc:
            state = "unknown" if method == "suspend" else "on"
            report = ("%s; " % note if note else "") + str(exc)
            return self._result(h, "down", False, method, state, attempts, self.clock() - t0, t0, report)
        # seconds from the suspend command (given by the caller) or the BMC command to the silence
        since = h.get("since")
        wait = took + (max(0.0, self.wall() - since - (self.clock() - t0)) if since else 0.0)
        out = self._result(h, "down", True, method, "asleep" if method == "suspend" else "off", attempts,
                           wait, t0, ("%s; " % note if note else "") + "silent %s s after %s" % (round(wait, 3), method))
        if method == "suspend" and resume_hook_in(h.get("said")):
            out["resume_hook"] = True
        return out

    def _bmc_down(self, h, method):
        bmc = h.get("bmc")
        if bmc is None:
            raise WaveError("down method %s needs a BMC (fleetnap_bmc_address is empty)" % method)
        before = self._bmc(bmc.status)
        if before == "off":
            return {"method": method, "ok": True, "report": "%s: chassis already off" % method}
        self._bmc(bmc.power, method)
        reached, last = self._bmc_wait(bmc, "off", self.down_timeout)
        if not reached and method == "soft":
            if not self.soft_fallback_hard:
                raise WaveError("host behind BMC %s did not power off within %g s after a soft shutdown request "
                                "(last state: %s); the OS must act on the ACPI power button, or set "
                                "soft_fallback_hard for a hard off" % (bmc.target, self.down_timeout, last))
            self._bmc(bmc.power, "off")
            reached, last = self._bmc_wait(bmc, "off", self.down_timeout)
            if reached:
                return {"method": "off", "ok": True, "report": "soft: no power-off within %g s, hard off"
                        % self.down_timeout}
        if not reached:
            raise WaveError("BMC %s accepted 'chassis power %s' but still reports %s after %g s"
                            % (bmc.target, method, last, self.down_timeout))
        return {"method": method, "ok": True, "report": "%s: chassis off" % method}
