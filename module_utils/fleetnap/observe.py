# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a fleet's hosts are doing, seen from the controller, all at once.

``answers()`` is the probe host_wait uses: a connection and, for a service with a greeting
(SSH), the greeting, so a port a NAT or QEMU keeps open for a sleeping host is not an answer.
``probe()`` says what the service did (no connection, no greeting, or what it answered).

A greeting pattern comes from the inventory: :func:`compile_greeting` compiles it when the inputs
are validated (a bad one is a ValueError naming the option) and refuses the shapes Python's
backtracking engine can take for ever on, which cannot be interrupted once started: a
back-reference or conditional group, a quantifier inside a quantified group, an alternation
inside a quantified group, and more than :data:`MAX_OPEN_REPEATS` quantifiers that match more
than once. It is matched against the first :data:`GREETING_CHARS` characters of the greeting
only, so the worst allowed pattern stays well under a second (measured: ``a*a*a*b`` against 128
``a`` takes 0.07 s). A pattern without metacharacters (``SSH-``, ``^SSH-``) is a literal
prefix or substring match, without the regular expression engine.
``observe()`` probes every host's service and reads every BMC's chassis power concurrently, in
one process: a gear shift's observation costs one probe timeout and a few BMC round trips,
instead of a module start on the controller per host and per question. Standard library and
together.py only.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.fleetnap.together import run_together


try:                                    # Python 3.11+: the parser behind re.compile
    from re import _parser as _sre_parse
except ImportError:                     # pragma: no cover (older Pythons)
    import sre_parse as _sre_parse

GREETING_CHARS = 128        # what a greeting pattern is matched against (an SSH banner is ~40)
MAX_PATTERN = 256
MAX_OPEN_REPEATS = 3
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_BACKREFS = ("GROUPREF", "GROUPREF_EXISTS", "GROUPREF_IGNORE", "GROUPREF_LOC_IGNORE", "GROUPREF_UNI_IGNORE")
_META = re.compile(r"[\\.^$*+?{}\[\]|()]")


class Literal(object):
    """A greeting without metacharacters: ``^TEXT`` a prefix, ``TEXT`` a substring."""

    def __init__(self, pattern):
        self.pattern = pattern
        self.prefix = pattern.startswith("^")
        self.text = pattern[1:] if self.prefix else pattern

    def search(self, data):
        return data.startswith(self.text) if self.prefix else self.text in data


def _check_tree(items, option, pattern, counts, in_repeat=False):
    for op, av in items:
        name = str(op)
        if name in _BACKREFS:
            raise ValueError("option %s: %r uses a back-reference or a conditional group, which can make the "
                             "match take for ever; give a pattern without one (for example ^SSH-)" % (option, pattern))
        if name in _REPEATS:
            lo, hi, sub = av
            if in_repeat:
                raise ValueError("option %s: %r has a quantifier inside a quantified group (such as (a+)+), which "
                                 "can make the match take for ever; give a pattern without nested quantifiers"
                                 % (option, pattern))
            if hi is None or hi > 1:
                counts[0] += 1
            _check_tree(sub, option, pattern, counts, True)
        elif name == "BRANCH":
            if in_repeat:
                raise ValueError("option %s: %r has an alternation inside a quantified group (such as (a|ab)*), "
                                 "which can make the match take for ever; use a character class or no repeat"
                                 % (option, pattern))
            for branch in av[1]:
                _check_tree(branch, option, pattern, counts, in_repeat)
        elif name == "SUBPATTERN":
            _check_tree(av[-1], option, pattern, counts, in_repeat)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _check_tree(av[1], option, pattern, counts, in_repeat)
        elif name == "ATOMIC_GROUP":
            _check_tree(av, option, pattern, counts, in_repeat)


@functools.lru_cache(maxsize=64)
def compile_greeting(pattern, option="greeting"):
    """The greeting pattern, ready to ``search()`` the start of a greeting: None for '' (a
    connection is enough), a Literal when it has no metacharacters, else a compiled regular
    expression of the allowed shapes (see the module docstring). ValueError naming ``option``."""
    if pattern is None or pattern == "":
        return None
    if not isinstance(pattern, str):
        raise ValueError("option %s: must be text (a regular expression), got %r" % (option, pattern))
    if len(pattern) > MAX_PATTERN:
        raise ValueError("option %s: a pattern of %d characters; at most %d (a greeting is matched by its first "
                         "%d characters)" % (option, len(pattern), MAX_PATTERN, GREETING_CHARS))
    if not _META.search(pattern.lstrip("^")) and pattern.count("^") <= 1:
        return Literal(pattern)
    try:
        compiled = re.compile(pattern)
        tree = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError("option %s: %r is not a regular expression: %s" % (option, pattern, exc))
    counts = [0]
    _check_tree(tree, option, pattern, counts)
    if counts[0] > MAX_OPEN_REPEATS:
        raise ValueError("option %s: %r has %d quantifiers that repeat (*, +, {n,m}); at most %d, so that the match "
                         "stays bounded" % (option, pattern, counts[0], MAX_OPEN_REPEATS))
    return compiled


def shown(data, limit=80):
    """What a service sent, as a message shows it: its first line, printable ASCII (anything else
    as \\xNN), at most ``limit`` characters."""
    text = data.split(b"\n", 1)[0][:limit].decode("ascii", "backslashreplace")
    text = "".join(c if 32 <= ord(c) < 127 else "\\x%02x" % ord(c) for c in text)
    return text + ("..." if len(data.split(b"\n", 1)[0]) > limit else "")


OBSERVED = frozenset(("ssh", "ssh_s", "probes", "bmc", "bmc_configured", "bmc_read", "bmc_error", "bmc_endpoint",
                      "power_watts", "power_source", "power_note", "resume_hook", "parked_as", "wol_sent_at",
                      "wol_error"))


def greeted(conn, matcher, timeout):
    """(answered, what was seen) of a connected socket: its greeting within ``timeout`` s."""
    if matcher is None:
        return True, "connected"
    conn.settimeout(timeout)
    try:
        data = conn.recv(256)
    except (OSError, socket.timeout):
        return False, "connected, no greeting within %g s" % timeout
    if not data:
        return False, "connected, closed without a greeting"
    if matcher.search(data[:GREETING_CHARS].decode("ascii", "replace")):
        return True, "answered \"%s\"" % shown(data)
    return False, "answered \"%s\", which does not match the greeting %s" % (
        shown(data), shown(getattr(matcher, "pattern", "").encode("ascii", "backslashreplace"), 60))


MIN_ATTEMPT_S = 0.5     # an attempt gives way to a newer one only after this long (or its connect timeout)


def _why(exc):
    return "no connection (%s)" % (getattr(exc, "strerror", None) or exc.__class__.__name__)


def first_connection(host, port, timeout, connect_timeout, interval, in_flight=4, clock=time.monotonic,
                     sleep=time.sleep, addrs=None, selector=selectors.DefaultSelector):
    """A connection to host:port within ``timeout`` s, a new attempt every ``interval`` s while
    the earlier ones still wait (each at most ``connect_timeout`` s, at most ``in_flight`` of them
    at a time; the oldest gives way to a new one once it has waited ``connect_timeout`` or
    MIN_ATTEMPT_S, whichever is shorter): a host that starts answering is seen one interval later,
    whether its earlier SYNs were dropped (asleep: no connection until the kernel's retransmission
    at 1, 3, 7 s) or refused (booting). A name is resolved once, the attempts going round its
    addresses (``addrs``, when given: [(family, type, proto, sockaddr)], nothing is resolved).
    ``clock``, ``sleep`` and ``selector`` (what waits for the attempts) are time's sources, given
    by a test that runs the schedule in time of its own. Returns (socket or None, attempts, why
    there is none); the caller closes the socket. Nothing raises: a name that does not resolve is
    (None, 1, why) at once."""
    start = clock()
    deadline = start + timeout
    in_flight = max(1, int(in_flight))
    interval = max(0.01, interval)
    patience = min(connect_timeout, MIN_ATTEMPT_S)
    try:
        if addrs is None:
            addrs = [(f, k, p, a) for f, k, p, _name, a in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)]
    except (OSError, UnicodeError, ValueError) as exc:
        return None, 1, _why(exc)
    if not addrs:
        return None, 1, "no connection (no address for %s)" % (host,)
    waiting = {}                # socket -> when its attempt started
    attempts, why = 0, "no connection within %g s" % timeout
    sel = None

    def drop(s):
        sel.unregister(s)
        s.close()
        del waiting[s]

    try:
        sel = selector()
        next_at = start
        while True:
            now = clock()
            for s, t in list(waiting.items()):
                if now - t >= connect_timeout:
                    drop(s)
                    why = "no connection within %g s" % connect_timeout
            if now >= deadline:
                return None, attempts, why
            if now >= next_at and len(waiting) >= in_flight:
                oldest = min(waiting, key=waiting.get)
                if now - waiting[oldest] >= patience:
                    drop(oldest)
                    why = "no connection within %g s" % patience
                else:
                    next_at = waiting[oldest] + patience
            if now >= next_at and len(waiting) < in_flight:
                next_at = now + interval
                family, kind, proto, addr = addrs[attempts % len(addrs)]
                attempts += 1
                try:
                    s = socket.socket(family, kind, proto)
                except OSError as exc:          # out of descriptors: the next attempt, later
                    why = _why(exc)
                else:
                    s.setblocking(False)
                    err = s.connect_ex(addr)
                    if err == 0:
                        s.setblocking(True)
                        return s, attempts, ""
                    if err in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
                        waiting[s] = now
                        sel.register(s, selectors.EVENT_WRITE)
                    else:
                        s.close()
                        why = "no connection (%s)" % os.strerror(err)
            wake = min([next_at, deadline] + [t + connect_timeout for t in waiting.values()])
            pause = max(0.0, wake - clock())
            if not waiting:
                sleep(pause)
                continue
            for key, _events in sel.select(pause):
                s = key.fileobj
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err == 0:
                    sel.unregister(s)
                    del waiting[s]
                    s.setblocking(True)
                    return s, attempts, ""
                drop(s)
                why = "no connection (%s)" % os.strerror(err)
    except OSError as exc:                      # the selector itself (out of descriptors)
        sleep(max(0.0, min(interval, deadline - clock())))
        return None, attempts or 1, _why(exc)
    finally:
        for s in list(waiting):
            s.close()
        if sel is not None:
            sel.close()


def greeting_or_gone(conn, matcher, timeout, host, port, connect_timeout, interval, clock=time.monotonic,
                     sleep=time.sleep, selector=selectors.DefaultSelector):
    """A connected socket's greeting within ``timeout`` s, while checking, every ``interval`` s
    (at least MIN_ATTEMPT_S) without one, that the host still answers a new connection (within
    ``connect_timeout`` s): a host that accepted and then went to sleep (or froze) is gone as soon
    as a check gets no answer, a slow service is still given ``timeout``. (Behind a NAT, or QEMU's
    user networking, every check is accepted: a sleeping host is then silent after ``timeout``, as
    without the checks.) A check goes to the address ``conn`` is connected to (no name is
    resolved: a resolver's failure is not the host's silence). Returns (answered, gone_at): answered
    is True (greeted), False (closed, or a greeting that does not match, or gone) or None (no
    greeting within ``timeout`` while every check was answered); gone_at is when the check that got
    no connection started, None otherwise."""
    if matcher is None:
        return True, None
    try:
        peer = [(conn.family, conn.type, conn.proto, conn.getpeername())]
    except OSError:                     # no longer connected: no greeting will come
        return False, None
    end = clock() + timeout
    while True:
        left = end - clock()
        if left <= 0:
            return None, None
        answered, seen = greeted(conn, matcher, min(left, max(interval, MIN_ATTEMPT_S)))
        if answered:
            return True, None
        if not seen.startswith("connected, no greeting within"):
            return False, None              # closed, or a greeting that does not match
        at = clock()
        check, _tries, _why = first_connection(host, port, min(connect_timeout, max(0.05, end - at)),
                                               connect_timeout, connect_timeout, in_flight=1, clock=clock,
                                               sleep=sleep, addrs=peer, selector=selector)
        if check is None:
            return False, at
        check.close()


EARLY_WAKE_MAX_WINDOW_S = 1.0    # a SYN a sleeping host dropped is sent again after 1 s (Linux's first RTO)


def greeting_after_wake(host, port, matcher, timeout, wake, clock=time.monotonic, wall=time.time,
                        selector=selectors.DefaultSelector):
    """One connection to host:port, its SYN sent before ``wake()`` (which sends the host's magic
    packets) is called, then its greeting awaited on that connection only, ``timeout`` s from the
    start (no new attempt: a SYN sent after the packets could reach a host they woke).

    A greeting within ``timeout`` says the host was awake before its packets as long as a host they
    woke cannot greet within it. Where the controller has the host's link-layer address, a host
    asleep when the SYN left drops it, and the kernel sends it again only after 1 s, later than a
    ``timeout`` under EARLY_WAKE_MAX_WINDOW_S. Where the SYN is held for the host instead (a NAT
    that accepts for it, such as QEMU's user networking, a hypervisor's queue, a SYN proxy, a
    neighbour entry still being resolved, which the woken host's own first ARP completes), it
    reaches the host once it is up: there only a wake longer than ``timeout`` (S3 with the link's
    negotiation: seconds) keeps the greeting out of it. ``wake()`` is called whatever the
    connection did (refused, unreachable: the host is to be woken all the same); its exception is
    returned, never raised.

    Returns (answered, seconds to the greeting or None, the wall clock when wake() returned or
    None, wake()'s error text or "")."""
    start = clock()
    deadline = start + timeout
    conn, connected, failed = None, False, False
    try:
        addr = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
        conn = socket.socket(addr[0], addr[1], addr[2])
        conn.setblocking(False)
        err = conn.connect_ex(addr[4])
        connected = err == 0
        failed = err not in (0, errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK)
    except (OSError, UnicodeError, ValueError, IndexError):
        failed = True
    sent_at, error = None, ""
    try:
        wake()
        sent_at = round(wall(), 3)
    except Exception as exc:  # WolError, OSError: the caller's note; the probe goes on
        error = str(exc) or exc.__class__.__name__
    try:
        if conn is None or failed:
            return False, None, sent_at, error
        if not connected:
            with selector() as sel:
                sel.register(conn, selectors.EVENT_WRITE)
                if not sel.select(max(0.0, deadline - clock())):
                    return False, None, sent_at, error
            if conn.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                return False, None, sent_at, error
        conn.setblocking(True)
        left = deadline - clock()
        if left <= 0:
            return False, None, sent_at, error
        answered = greeted(conn, matcher, left)[0]
        return answered, (round(clock() - start, 3) if answered else None), sent_at, error
    except OSError:
        return False, None, sent_at, error
    finally:
        if conn is not None:
            conn.close()


def probe(host, port, greeting, timeout, connect_timeout=None):
    """(answered, what was seen): whether the service accepts a connection and (when given)
    greets as expected within ``timeout`` s, and in words what it did ('no connection: ...',
    'connected, no greeting within N s', 'answered "TEXT", which does not match PATTERN').
    ``greeting``: a pattern (text, compiled by compile_greeting) or compile_greeting's result.
    ``connect_timeout`` (default ``timeout``) bounds the connection alone: a new connection sends
    a new SYN at once, where one long connect waits for the kernel's SYN retransmissions (1, 3,
    7 s) and sees a host that answers at 1.1 s only at 3 s."""
    matcher = compile_greeting(greeting) if isinstance(greeting, str) else greeting
    try:
        conn = socket.create_connection((host, port), timeout=connect_timeout or timeout)
    except (OSError, socket.timeout) as exc:
        return False, "no connection (%s)" % (getattr(exc, "strerror", None) or exc.__class__.__name__)
    try:
        return greeted(conn, matcher, timeout)
    finally:
        conn.close()


def answers(host, port, greeting, timeout, connect_timeout=None):
    """True if the service accepts a connection and (when given) greets as expected: probe()'s
    verdict."""
    return probe(host, port, greeting, timeout, connect_timeout)[0]


def answers_within(host, port, greeting, timeout, interval=0.2, clock=time.monotonic, sleep=time.sleep,
                   probe=answers):
    """Probe until the service answers or ``timeout`` seconds have passed (a refused connection
    is tried again: a host that is booting may answer a moment later). Returns (answered, probes,
    seconds to the answer or None)."""
    start = clock()
    deadline = start + timeout
    probes = 0
    while True:
        probes += 1
        left = deadline - clock()
        if probe(host, port, greeting, max(0.05, min(timeout, left))):
            return True, probes, round(clock() - start, 3)
        if clock() + interval >= deadline:
            return False, probes, None
        sleep(interval)


def observe(hosts, probe_timeout, bmc_status, greeting="^SSH-", probe_concurrency=256, bmc_concurrency=4,
            probe=answers, bmc_read="always", bmc_power=None):
    """Observe every host at once.

    hosts: [{"name", "address", "port", "bmc": opaque or None, "probe_timeout": optional}];
    bmc_status(bmc) returns 'on' / 'off' or raises with the reason (the caller's BMC client:
    rate-limited per BMC, retried). A host's own probe_timeout (no longer than ``probe_timeout``)
    shortens its probe: a host expected silent needs no more than it takes to be sure.
    bmc_read 'always' reads every BMC while the probes run; 'silent' reads only the BMCs of hosts
    that did not answer (an answering host is on, whatever its chassis says), after their probe;
    'never' reads none. A host's own "bmc_read" (one of the three) overrides it for that host.
    At most probe_concurrency probes and bmc_concurrency BMC reads run at a time.
    Returns {name: {"ssh": bool, "ssh_s": seconds or None, "probes": n, "bmc": 'on'|'off'|None,
    "bmc_configured": bool, "bmc_read": bool, "bmc_error": str, "bmc_endpoint": the BMC's
    "address:port" as its client speaks to it, "" without one, "power_watts", "power_source",
    "power_note"}}.
    A host's "wake" (a callable sending its magic packets), when given, is called right after its
    probe's SYN left, and that probe waits on that one connection (greeting_after_wake: its
    probe_timeout must be under EARLY_WAKE_MAX_WINDOW_S); its entry then has "wol_sent_at" (the
    wall clock of the packets, None when wake() failed) and "wol_error" (wake()'s error or "").
    bmc_power(bmc), when given, is asked right after a chassis power read that succeeded and
    returns (watts or None, source or None, why there is none): the draw the BMC measured (DCMI,
    Redfish). Its failure is a note on that host, never the observation's.
    """
    out = {h["name"]: {"ssh": False, "ssh_s": None, "probes": 0, "bmc": None,
                       "bmc_configured": h.get("bmc") is not None, "bmc_read": False, "bmc_error": "",
                       "bmc_endpoint": getattr(h.get("bmc"), "target", "") or "",
                       "power_watts": None, "power_source": None, "power_note": ""}
           for h in hosts}
    lock = threading.Lock()
    modes = ("always", "silent", "never")
    if bmc_read not in modes:
        raise ValueError("bmc_read must be one of %s, got %r" % (", ".join(modes), bmc_read))

    for h in hosts:
        if h.get("bmc_read") not in (None,) + modes:
            raise ValueError("host %s: bmc_read must be one of %s, got %r" % (h["name"], ", ".join(modes), h["bmc_read"]))

    for h in hosts:
        if h.get("wake") is not None and not (min(probe_timeout, h.get("probe_timeout") or probe_timeout)
                                              < EARLY_WAKE_MAX_WINDOW_S):
            raise ValueError("host %s: woken during the observation with a probe of %g s; it must be under %g s"
                             % (h["name"], min(probe_timeout, h.get("probe_timeout") or probe_timeout),
                                EARLY_WAKE_MAX_WINDOW_S))
    matcher = compile_greeting(greeting) if isinstance(greeting, str) else greeting

    def mode(h):
        return h.get("bmc_read") or bmc_read

    def ssh(h):
        timeout = min(probe_timeout, h.get("probe_timeout") or probe_timeout)
        if h.get("wake") is not None:
            ok, took, sent_at, error = greeting_after_wake(h["address"], h["port"], matcher, timeout, h["wake"])
            with lock:
                out[h["name"]].update(ssh=ok, ssh_s=took, probes=1, wol_sent_at=sent_at, wol_error=error)
            return ok
        ok, probes, took = answers_within(h["address"], h["port"], greeting, timeout, probe=probe)
        with lock:
            out[h["name"]].update(ssh=ok, ssh_s=took, probes=probes)
        return ok

    def bmc(h):
        try:
            power = bmc_status(h["bmc"])
            error = ""
        except Exception as exc:  # the reason is the observation: reported per host, never raised
            power, error = None, str(exc) or exc.__class__.__name__
        reading = {}
        if bmc_power is not None and power is not None:
            try:
                watts, source, note = bmc_power(h["bmc"])
                reading = {"power_watts": watts, "power_source": source, "power_note": note or ""}
            except Exception as exc:  # a reading that failed is a note: the power state stands
                reading = {"power_note": "no power reading: %s" % (str(exc) or exc.__class__.__name__)}
        with lock:
            out[h["name"]].update(bmc=power, bmc_error=error, bmc_read=True, **reading)

    # The BMC reads that do not wait for a probe start first (ipmitool takes a while); the probes'
    # threads are all started before the first probe (together.run_together: pool threads started
    # one by one while the others already probe begin later the more hosts there are); a silent
    # host's BMC read is asked from its probe's thread as soon as the probe ends.
    late = []
    with ThreadPoolExecutor(max_workers=max(1, bmc_concurrency)) as bmcs:
        reads = [bmcs.submit(bmc, h) for h in hosts if h.get("bmc") is not None and mode(h) == "always"]

        def after(h, ok):
            if mode(h) == "silent" and not ok and h.get("bmc") is not None:
                with lock:
                    late.append(bmcs.submit(bmc, h))

        try:
            run_together(ssh, hosts, probe_concurrency, done=after)
        finally:
            for f in reads + late:
                f.result()
    return out
