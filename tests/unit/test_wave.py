"""A gear shift's wave done at once from the controller (module_utils/fleetnap/wave.py, the
gear_wave module): every host its own thread, methods in order, a BMC only through its slots,
one host's failure only that host's result. Probes are real TCP on 127.0.0.1 (a host "answers"
while a listener greets like sshd on its port); the BMC is the error path's stand-in (the real
one, ipmi_sim, is driven in tests/sim/test_sim_power.py).

Two kinds of time. The tests of a probe's schedule (when it sends a SYN, when it sees an answer)
run in VirtualTime: real sockets, and a clock that moves only when the probe sleeps or waits for
its sockets with nothing to see, so what they assert is the algorithm's, whatever the machine's
load. The tests of a whole wave (a thread per host, hosts that wake after a delay) wait in real
time, so the file is marked real_time: make test runs it in its first stage, alone, and a host's
delay starts from what the wave did (its magic packet, its suspend's time), never before.
Bounds leave half a second and more for a busy moment."""

from __future__ import annotations

import contextlib
import gc
import os
import selectors
import socket
import threading
import time
import warnings

import pytest

from ansible.module_utils.fleetnap.ipmi import IpmiError
from ansible.module_utils.fleetnap.wave import Probe, Wave, resume_hook_in

pytestmark = pytest.mark.real_time


@pytest.fixture(autouse=True)
def _hosts_closed():
    """Every FakeHost of a test is down and lets its port go when the test ends (no listener,
    serving thread or port of one test left in the next)."""
    FakeHost.made = []
    yield
    for h in FakeHost.made:
        h.close()


class FakeHost:
    """A port on 127.0.0.1 that greets like sshd while the host is up (``greet_after`` s after a
    connection), refuses while it is down. The port stays this host's from the start (a bound
    socket that does not listen: refused): no other test's listener can take it while it is down."""

    made = []

    def __init__(self, up=False, greet_after=0.0):
        FakeHost.made.append(self)
        self.greet_after = greet_after
        self.keep = self._socket()
        self.keep.bind(("127.0.0.1", 0))
        self.port = self.keep.getsockname()[1]
        self.srv = None
        self.lock = threading.Lock()
        if up:
            self.up()

    @staticmethod
    def _socket():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)    # the keeper and the listener share it
        return s

    def up(self, after=0.0):
        def start():
            if after:
                time.sleep(after)
            with self.lock:
                if self.srv:
                    return
                srv = self._socket()
                srv.bind(("127.0.0.1", self.port))
                srv.listen(64)
                self.srv = srv
            threading.Thread(target=self._serve, args=(srv,), daemon=True).start()
        if after:
            threading.Thread(target=start, daemon=True).start()
        else:
            start()

    def _serve(self, srv):
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if self.greet_after:
                threading.Thread(target=self._greet, args=(conn,), daemon=True).start()
            else:
                self._greet(conn)

    def _greet(self, conn):
        time.sleep(self.greet_after)
        with contextlib.suppress(OSError):
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        conn.close()

    def down(self, after=0.0):
        def stop():
            if after:
                time.sleep(after)
            with self.lock:
                if self.srv:
                    with contextlib.suppress(OSError):
                        self.srv.shutdown(socket.SHUT_RDWR)     # the serving thread's accept() lets go
                    self.srv.close()
                    self.srv = None
        if after:
            threading.Thread(target=stop, daemon=True).start()
        else:
            stop()

    def close(self):
        self.down()
        self.keep.close()


class VirtualTime:
    """A clock for one probe that moves only when the probe sleeps, or waits for its sockets
    (through ``selector``) and nothing is there to see: then by the whole wait. ``at(t, action)``
    runs ``action`` (a host that starts answering) once the time reaches ``t``. A probe that reads
    the clock 1000 times without time moving fails the test instead of spinning."""

    GRACE_S = 0.05      # what 127.0.0.1 needs at most to answer or refuse a SYN, in real time

    def __init__(self):
        self.now = 0.0
        self.todo = []
        self.reads = 0
        self.real_start = None

    def real_elapsed(self):
        """Real seconds since the probe first read this clock."""
        return time.monotonic() - self.real_start

    def at(self, t, action):
        self.todo.append((t, action))

    def clock(self):
        if self.real_start is None:
            self.real_start = time.monotonic()
        self.reads += 1
        assert self.reads < 1000, "the probe read the clock 1000 times while no time passed"
        self._due()
        return self.now

    def sleep(self, seconds):
        if seconds > 0:
            self.now += seconds
            self.reads = 0
        self._due()

    def _due(self):
        for item in [item for item in self.todo if item[0] <= self.now]:
            self.todo.remove(item)
            item[1]()

    def selector(self):
        return _VirtualSelector(self)


class _VirtualSelector:
    """A real selector whose waits are virtual: what the sockets have to say (a refusal, an
    accepted connection) is seen in real time, a wait with nothing to see moves the clock."""

    def __init__(self, vt):
        self.vt = vt
        self.real = selectors.DefaultSelector()

    def register(self, fileobj, events):
        return self.real.register(fileobj, events)

    def unregister(self, fileobj):
        return self.real.unregister(fileobj)

    def close(self):
        self.real.close()

    def select(self, timeout):
        ready = self.real.select(0) or self.real.select(VirtualTime.GRACE_S)
        if not ready:
            self.vt.sleep(timeout)
        return ready


def virtual_probe(vt, **kw):
    return Probe(clock=vt.clock, sleep=vt.sleep, selector=vt.selector, **kw)


class FakeBmc:
    """Chassis power of one FakeHost; counts commands in flight across all BMCs of a test."""

    inflight = 0
    most = 0
    guard = threading.Lock()

    def __init__(self, host, power="off", boot_s=0.1, off_ok=True, target="10.0.1.1:623", fail=None):
        self.host, self.power_state, self.boot_s, self.off_ok = host, power, boot_s, off_ok
        self.target, self.fail, self.commands = target, fail, []

    def _enter(self):
        with FakeBmc.guard:
            FakeBmc.inflight += 1
            FakeBmc.most = max(FakeBmc.most, FakeBmc.inflight)
        time.sleep(0.02)
        with FakeBmc.guard:
            FakeBmc.inflight -= 1
        if self.fail:
            raise IpmiError(self.fail, kind="unreachable")

    def status(self):
        self._enter()
        self.commands.append("status")
        return self.power_state

    def power(self, action):
        self._enter()
        self.commands.append(action)
        if action == "on":
            self.power_state = "on"
            self.host.up(after=self.boot_s)
        elif action in ("off", "soft") and self.off_ok:
            self.power_state = "off"
            self.host.down()


def wave(wakes=None, **kw):
    """A wave over FakeHosts; ``wakes``: {name: (FakeHost, seconds)}, a host that boots that long
    after its magic packet."""
    sent = []

    def send_wol(h):
        sent.append(h["name"])
        if h["name"] in (wakes or {}):
            host, after = wakes[h["name"]]
            host.up(after=after)
    probe = Probe(connect_timeout=0.3, probe_timeout=0.5, interval=0.05)
    w = Wave(probe, send_wol, **dict(dict(wol_timeout=1.0, ipmi_timeout=2.0,
                                                                      down_timeout=2.0, silent_for=0.2,
                                                                      bmc_poll=0.05), **kw))
    return w, sent


def entry(name, host, methods=("wol",), bmc=None, **kw):
    return dict({"name": name, "address": "127.0.0.1", "port": host.port, "up_methods": list(methods),
                 "bmc": bmc}, **kw)


def test_wol_wakes_a_host_and_the_result_says_by_what():
    h = FakeHost()
    w, sent = wave(wakes={"a": (h, 0.2)})
    r = w.wake([entry("a", h)])["a"]
    assert sent == ["a"]
    assert r["ok"] and r["method"] == "wol" and r["state"] == "on" and r["msg"] == "woke by wol"
    assert 0.0 < r["attempts"][0]["elapsed_s"] < 0.9


def test_magic_packets_are_sent_again_while_the_host_is_silent_and_the_report_says_how_often():
    """The first packets are lost (or reached a host still going to sleep): the resend wakes it,
    by WoL, with no other method tried; a host that answers is sent nothing more."""
    h = FakeHost()
    calls = []

    def send_wol(hh):
        calls.append(time.monotonic())
        if len(calls) == 2:
            h.up(after=0.05)
    probe = Probe(connect_timeout=0.3, probe_timeout=0.5, interval=0.05)
    w = Wave(probe, send_wol, wol_timeout=4.0, wol_resend=1.0)
    r = w.wake([entry("a", h, ("wol", "ipmi"), FakeBmc(h, power="on"))])["a"]
    assert r["ok"] and r["method"] == "wol" and len(r["attempts"]) == 1, r
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.7, calls
    assert r["attempts"][0]["report"].startswith("wol: magic packets sent 2 times; answered after "), r


def test_packets_the_caller_sent_already_are_not_sent_again_and_the_wait_counts_from_them():
    """A host whose packets went out during the observation (its wol_sent_mono, 0.3 s ago): the wave
    sends none while it waits, reports the wait since those packets, and says so."""
    h = FakeHost()
    w, sent = wave(wakes={"a": (h, 0.0)}, wol_timeout=3.0)
    h.up(after=0.3)
    r = w.wake([entry("a", h, wol_sent_mono=time.monotonic() - 0.3)])["a"]
    assert r["ok"] and r["method"] == "wol" and sent == [], (r, sent)
    assert r["wait_s"] >= 0.55 and r["elapsed_s"] >= r["wait_s"], r
    assert r["attempts"][0]["report"].startswith(
        "wol: magic packets sent once (the first during the observation); answered after "), r


def test_packets_sent_during_the_observation_are_sent_again_a_period_after_them():
    """The resend period counts from the packets the caller sent (0.8 s ago, a 1 s period): the
    wave's first send is about 0.2 s in, not a whole period after it started."""
    h = FakeHost()
    calls = []

    def send_wol(hh):
        calls.append(time.monotonic())
        h.up(after=0.05)
    w = Wave(Probe(connect_timeout=0.3, probe_timeout=0.5, interval=0.05), send_wol, wol_timeout=4.0, wol_resend=1.0)
    start = time.monotonic()
    r = w.wake([entry("a", h, wol_sent_mono=time.monotonic() - 0.8)])["a"]
    assert r["ok"] and len(calls) == 1 and 0.1 <= calls[0] - start < 0.9, (r, calls, start)
    assert r["attempts"][0]["report"].startswith(
        "wol: magic packets sent 2 times (the first during the observation); answered after "), r


def test_a_host_that_greets_slower_than_the_resend_period_is_still_seen():
    """Each period's wait ends its connections: two sends are at least a connection attempt and
    a greeting's wait apart, so a host awake and greeting in 0.7 s is seen with a resend asked
    every 0.3 s (with 0.3 s periods its greeting never came in time)."""
    h = FakeHost(greet_after=0.7)
    sent = []

    def send_wol(hh):
        sent.append(1)
        h.up()
    w = Wave(Probe(connect_timeout=0.3, probe_timeout=1.0, interval=0.05), send_wol, wol_timeout=6.0, wol_resend=0.3)
    r = w.wake([entry("a", h)])["a"]
    assert r["ok"] and r["method"] == "wol" and sent, r


def test_a_resend_that_fails_is_noted_and_the_wait_goes_on():
    h = FakeHost(greet_after=0.2)
    calls = []

    def send_wol(hh):
        calls.append(1)
        if len(calls) == 1:
            h.up(after=2.3)         # the first packets woke it; it answers after the second send
        else:
            raise OSError("Network is unreachable")
    w = Wave(Probe(connect_timeout=0.3, probe_timeout=1.0, interval=0.05), send_wol, wol_timeout=8.0, wol_resend=2.0)
    r = w.wake([entry("a", h)])["a"]
    assert r["ok"] and r["method"] == "wol" and len(calls) >= 2, r
    assert "magic packets sent once; sending them again failed: Network is unreachable; answered after" \
        in r["attempts"][0]["report"], r


def test_the_first_send_failing_fails_the_attempt_at_once():
    h = FakeHost()

    def send_wol(hh):
        raise OSError("Network is unreachable")
    w = Wave(Probe(connect_timeout=0.3, probe_timeout=0.5, interval=0.05), send_wol, wol_timeout=5.0)
    t = time.monotonic()
    r = w.wake([entry("a", h)])["a"]
    assert not r["ok"] and r["attempts"][0]["report"] == "wol: Network is unreachable" and time.monotonic() - t < 1, r


def test_magic_packets_sent_once_with_no_resend_and_a_silent_host_says_how_often_they_went():
    h = FakeHost()
    w, sent = wave(wol_timeout=0.6, wol_resend=0)
    r = w.wake([entry("a", h)])["a"]
    assert not r["ok"] and sent == ["a"] and "magic packets sent" not in r["msg"], r
    w, sent = wave(wol_timeout=1.0, wol_resend=0.3)
    r = w.wake([entry("a", h)])["a"]
    assert not r["ok"] and len(sent) >= 2, (r, sent)
    assert ", magic packets sent %d times)" % len(sent) in r["attempts"][0]["report"], r


def test_ipmi_takes_over_when_the_magic_packet_is_lost():
    h = FakeHost()
    bmc = FakeBmc(h)
    w, sent = wave(wol_timeout=0.4)
    r = w.wake([entry("a", h, ("wol", "ipmi"), bmc)])["a"]
    assert r["ok"] and r["method"] == "ipmi"
    assert [a["ok"] for a in r["attempts"]] == [False, True]
    assert r["attempts"][0]["report"].startswith("wol: did not become answering within 0.4 s")
    assert bmc.commands == ["status", "on"]


def test_a_silent_host_with_its_chassis_on_is_not_power_cycled():
    h = FakeHost()
    bmc = FakeBmc(h, power="on")
    w, _ = wave(wol_timeout=0.3)
    r = w.wake([entry("a", h, ("wol", "ipmi"), bmc)])["a"]
    assert not r["ok"] and r["state"] == "unknown"
    assert "reports chassis on but the host is silent" in r["msg"] and bmc.commands == ["status"]


def test_cycle_unresponsive_reboots_it():
    h = FakeHost()
    bmc = FakeBmc(h, power="on")
    w, _ = wave(cycle_unresponsive=True)
    r = w.wake([entry("a", h, ("ipmi",), bmc)])["a"]
    assert r["ok"] and r["method"] == "ipmi" and bmc.commands[:3] == ["status", "off", "status"]
    assert "on" in bmc.commands


def test_a_host_booting_since_the_magic_packet_is_waited_for_and_credited_to_wol():
    h = FakeHost()
    bmc = FakeBmc(h, power="on")                 # WoL from soft-off powered it on
    w, _ = wave(wakes={"a": (h, 0.8)}, wol_timeout=0.3)     # it boots slower than the WoL wait
    r = w.wake([entry("a", h, ("wol", "ipmi"), bmc, chassis_was_off=True)])["a"]
    assert r["ok"] and r["method"] == "wol" and bmc.commands == ["status"]
    assert "chassis on since the wake (booting), no command sent" in r["attempts"][1]["report"]


def test_no_bmc_and_no_answer_is_a_per_host_failure_with_every_attempt():
    h = FakeHost()
    w, _ = wave(wol_timeout=0.2)
    r = w.wake([entry("a", h, ("wol", "ipmi"))])["a"]
    assert not r["ok"]
    assert r["msg"] == ("a did not come back: wol: did not become answering within 0.2 s (%d probes); "
                        "ipmi: no BMC configured (fleetnap_bmc_address)" % int(r["msg"].split("(")[1].split()[0]))


def test_a_wave_costs_its_slowest_host_not_the_sum():
    hosts = [FakeHost() for _ in range(40)]
    delays = [0.02 * i for i in range(40)]                  # 0 .. 0.78 s
    w, sent = wave(wakes={"h%d" % i: (h, d) for i, (h, d) in enumerate(zip(hosts, delays))}, wol_timeout=3.0)
    t = time.monotonic()
    out = w.wake([entry("h%d" % i, h) for i, h in enumerate(hosts)])
    took = time.monotonic() - t
    assert all(r["ok"] for r in out.values()) and len(sent) == 40
    assert took < sum(delays) / 4                           # 15.6 s in sequence
    assert took < max(delays) + 1.0


def test_bmc_commands_stay_within_their_slots():
    FakeBmc.most = 0
    hosts = [FakeHost() for _ in range(12)]
    w, _ = wave(bmc_concurrency=2)
    out = w.wake([entry("h%d" % i, h, ("ipmi",), FakeBmc(h)) for i, h in enumerate(hosts)])
    assert all(r["ok"] for r in out.values())
    assert FakeBmc.most <= 2


def test_an_unanswering_bmc_fails_only_its_host():
    a, b = FakeHost(), FakeHost()
    w, _ = wave()
    out = w.wake([entry("a", a, ("ipmi",), FakeBmc(a, fail="BMC 10.0.1.1:623 did not answer")),
                  entry("b", b, ("ipmi",), FakeBmc(b))])
    assert not out["a"]["ok"] and "ipmi: BMC 10.0.1.1:623 did not answer" in out["a"]["msg"]
    assert out["b"]["ok"]


def test_park_waits_for_hosts_that_suspended_themselves():
    a, b = FakeHost(up=True), FakeHost(up=True)
    since = time.time()
    a.down(after=0.3)                           # it suspends 0.3 s after the command
    w, _ = wave(down_timeout=1.0)
    out = w.park([entry("a", a, down_method="suspend", since=since),
                  entry("b", b, down_method="suspend", since=since)])
    assert out["a"]["ok"] and out["a"]["state"] == "asleep" and 0.2 <= out["a"]["wait_s"] < 0.9
    assert not out["b"]["ok"] and out["b"]["msg"].startswith("still answers 1 s after suspend")
    b.down()


def test_park_by_the_bmc_checks_the_chassis_off_and_the_silence():
    a = FakeHost(up=True)
    bmc = FakeBmc(a, power="on")
    w, _ = wave()
    r = w.park([entry("a", a, down_method="soft", bmc=bmc)])["a"]
    assert r["ok"] and r["state"] == "off" and bmc.commands[:2] == ["status", "soft"]
    assert r["attempts"] == [{"method": "soft", "ok": True, "report": "soft: chassis off"}]


def test_soft_off_the_os_ignores_fails_unless_a_hard_off_is_allowed():
    a = FakeHost(up=True)
    w, _ = wave(down_timeout=0.3)
    r = w.park([entry("a", a, down_method="soft", bmc=FakeBmc(a, power="on", off_ok=False))])["a"]
    assert not r["ok"] and r["state"] == "on" and "did not power off within 0.3 s" in r["msg"]
    a.down()


def test_park_without_a_bmc_for_a_bmc_method_is_refused_for_that_host():
    a = FakeHost(up=True)
    w, _ = wave()
    r = w.park([entry("a", a, down_method="off")])["a"]
    assert not r["ok"] and r["msg"] == "down method off needs a BMC (fleetnap_bmc_address is empty)"
    a.down()


def test_a_defect_in_one_host_step_does_not_lose_the_others():
    a, b = FakeHost(up=True), FakeHost(up=True)
    w, _ = wave()
    out = w.wake([entry("a", a, ("bogus",)), entry("b", b)])
    assert not out["a"]["ok"] and "unknown wake method 'bogus'" in out["a"]["msg"]
    assert out["b"]["ok"]
    for h in (a, b):
        h.down()


def test_a_refused_port_is_tried_each_interval_and_an_answer_is_seen_at_the_next_attempt():
    # A booting host refuses (its kernel is up, sshd not yet): tried again each interval, not
    # after a connect timeout; it listens from 0.5 s on and the attempt after that sees it.
    h = FakeHost()
    vt = VirtualTime()
    vt.at(0.5, h.up)
    ok, took, probes = virtual_probe(vt, connect_timeout=0.3, probe_timeout=5.0, interval=0.05).until_answer(
        "127.0.0.1", h.port, 3)
    assert ok and 0.5 <= took <= 0.5 + 0.05 + 1e-6, took
    assert probes >= 11, probes                 # one SYN per interval while it refused, then the answer
    h.down()


class DroppingHost:
    """A port on 127.0.0.1 whose SYNs are dropped (a listener with a full accept queue, as a
    sleeping host's link drops them) until ``answer()``, then it greets like sshd."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(0)
        self.port = self.srv.getsockname()[1]
        self.filler = socket.create_connection(("127.0.0.1", self.port))   # the queue is full now

    def answer(self):
        """From now on a new SYN is answered (the filler is taken off the queue at once), and every
        connection greeted."""
        first, _ = self.srv.accept()
        first.close()

        def serve():
            while True:
                try:
                    conn, _ = self.srv.accept()
                except OSError:
                    return
                with contextlib.suppress(OSError):
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                conn.close()
        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.filler.close()
        with contextlib.suppress(OSError):
            self.srv.shutdown(socket.SHUT_RDWR)     # a thread blocked in accept() lets go
        self.srv.close()


def sockets_to(port):
    """The inodes of this process's TCP sockets whose peer is 127.0.0.1:``port`` (whatever other
    threads open or close meanwhile)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink("/proc/self/fd/" + fd)
            if link.startswith("socket:["):
                mine.add(link[len("socket:["):-1])
    found = set()
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if int(fields[2].split(":")[1], 16) == port and fields[9] in mine:
                found.add(fields[9])
    return found


def test_a_host_whose_syns_were_dropped_is_seen_without_waiting_for_a_retransmission():
    # Its first SYNs are dropped; it answers from 0.2 s on. One connection waiting for its
    # connect timeout (3 s) would see it at the kernel's first retransmission (1 s). Four SYNs
    # wait (0, 0.05, 0.1, 0.15 s); the oldest gives way at 0.5 s (observe.MIN_ATTEMPT_S) to a new
    # one, which is answered.
    # The kernel retransmits a dropped SYN 1 s (real) after it: a test thread that lost the CPU
    # that long may see an old SYN answered after 0.2 s instead.
    h = DroppingHost()
    try:
        vt = VirtualTime()
        vt.at(0.2, h.answer)
        ok, took, probes = virtual_probe(vt, connect_timeout=3.0, probe_timeout=5.0, interval=0.05).until_answer(
            "127.0.0.1", h.port, 5)
        if vt.real_elapsed() < 0.95:
            assert ok and 0.5 <= took <= 0.55 + 1e-6, took
            assert probes == 5, probes          # four waited for nothing, the fifth was answered
        else:
            assert ok and 0.2 <= took <= 0.55 + 1e-6 and probes in (4, 5), (took, probes)
    finally:
        h.close()


def test_a_host_that_never_answers_costs_its_timeout_and_leaves_no_socket_open():
    from ansible.module_utils.fleetnap.observe import first_connection
    h = DroppingHost()
    before = sockets_to(h.port)
    unclosed = warnings.catch_warnings(record=True)
    seen = unclosed.__enter__()
    warnings.simplefilter("always", ResourceWarning)
    try:
        assert len(before) == 1                 # the filler
        # a new SYN every 0.05 s, each dropped after its connect timeout (0.3 s): 12 in 0.6 s
        vt = VirtualTime()
        conn, attempts, why = first_connection("127.0.0.1", h.port, 0.6, 0.3, 0.05, in_flight=10,
                                               clock=vt.clock, sleep=vt.sleep, selector=vt.selector)
        assert conn is None and 12 <= attempts <= 13 and why == "no connection within 0.3 s", (attempts, why)
        assert 0.6 <= vt.now <= 0.6 + 0.05 + 1e-6, vt.now
        # at most in_flight SYNs wait: the oldest gives way to the next once it has waited its
        # connect timeout or MIN_ATTEMPT_S (never a mere interval: a far host still connects).
        # In 1.2 s: 0 and 0.05; 0.5 and 0.55; 1.0 and 1.05.
        vt = VirtualTime()
        conn, attempts, why = first_connection("127.0.0.1", h.port, 1.2, 5.0, 0.05, in_flight=2,
                                               clock=vt.clock, sleep=vt.sleep, selector=vt.selector)
        assert conn is None and attempts == 6 and why == "no connection within 0.5 s", (attempts, why)
        vt = VirtualTime()
        ok, took, probes = virtual_probe(vt, connect_timeout=0.3, probe_timeout=0.5, interval=0.05).until_answer(
            "127.0.0.1", h.port, 0.6)
        # 0, 0.05, 0.1, 0.15; each given way to after its connect timeout (0.3 s): 0.3 .. 0.45
        assert not ok and took is None and probes == 8, probes
        assert sockets_to(h.port) == before     # no attempt's socket is left open ...
        gc.collect()
        assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []   # ... or left to the GC
    finally:
        unclosed.__exit__(None, None, None)
        h.close()


def test_a_refused_port_is_tried_again_each_interval_and_says_why(monkeypatch):
    from ansible.module_utils.fleetnap import observe
    h = FakeHost()                      # nothing listens: every SYN is answered by a reset
    vt = VirtualTime()
    conn, attempts, why = observe.first_connection("127.0.0.1", h.port, 0.5, 1.0, 0.05, clock=vt.clock,
                                                   sleep=vt.sleep, selector=vt.selector)
    assert conn is None and 10 <= attempts <= 11 and why == "no connection (Connection refused)", (attempts, why)
    # a name that does not resolve, or that the resolver refuses, is an answer at once, not a raise
    for bad, exc in (("no-such-host.invalid", socket.gaierror(-2, "Name or service not known")),
                     ("a" * 64 + ".example", UnicodeError("label too long"))):
        def refuse(*_a, _exc=exc, **_k):
            raise _exc
        monkeypatch.setattr(observe.socket, "getaddrinfo", refuse)
        conn, attempts, why = observe.first_connection(bad, 22, 5.0, 1.0, 0.05)
        assert conn is None and attempts == 1 and why in ("no connection (Name or service not known)",
                                                          "no connection (UnicodeError)"), why
    monkeypatch.undo()
    # in_flight 0 is taken as 1; the attempts go round a name's addresses
    a = FakeHost(up=True)
    addrs = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", h.port)),     # refuses
             (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", a.port))]     # greets
    monkeypatch.setattr(observe.socket, "getaddrinfo", lambda *_a, **_k: addrs)
    conn, attempts, why = observe.first_connection("dual.example", 22, 2.0, 1.0, 0.05, in_flight=0)
    assert conn is not None and attempts == 2 and conn.getpeername()[1] == a.port and conn.getblocking()
    conn.close()
    a.down()


@contextlib.contextmanager
def silent_listener(backlog):
    """A port on 127.0.0.1 whose kernel accepts connections (up to ``backlog`` queued, later SYNs
    dropped) and whose service never greets: yields the port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    try:
        yield srv.getsockname()[1]
    finally:
        with contextlib.suppress(OSError):
            srv.shutdown(socket.SHUT_RDWR)
        srv.close()


def test_a_host_that_accepted_and_then_went_silent_is_silent_without_the_greeting_timeout():
    # The probe's connection is accepted by the kernel (queued), nothing greets, and every later
    # SYN is dropped (the queue is full): the host went to sleep after it accepted. It is silent
    # since the first new connection that got no answer, not after the 5 s greeting timeout.
    with silent_listener(0) as port:
        probe = Probe(connect_timeout=0.3, probe_timeout=5.0, interval=0.05)
        t0 = time.monotonic()
        silent, took, probes = probe.until_silent("127.0.0.1", port, 10, 0.3)
        assert silent and took is not None and probes >= 1
        assert time.monotonic() - t0 < 4.0      # not the 5 s greeting timeout


def test_a_resolver_that_fails_meanwhile_is_not_a_host_gone(monkeypatch):
    # A connected probe's checks go to the address it is connected to: the name is not resolved
    # again, so a resolver failing meanwhile does not make a slow host silent.
    from ansible.module_utils.fleetnap import observe
    with silent_listener(64) as port:
        conn = socket.create_connection(("127.0.0.1", port))

        def refuse(*_a, **_k):
            raise socket.gaierror(-3, "Temporary failure in name resolution")
        monkeypatch.setattr(observe.socket, "getaddrinfo", refuse)
        answered, gone_at = observe.greeting_or_gone(conn, observe.compile_greeting("^SSH-"), 1.2, "host.example",
                                                     port, 0.5, 0.05)
        conn.close()
        assert not answered and gone_at is None      # no greeting in time; never "gone"


@pytest.mark.parametrize("timeout", [0.35, 0.7, 0.8, 1.5])
def test_a_host_whose_sshd_greets_slowly_is_not_silent(timeout):
    # Its kernel answers every connection and its sshd greets 0.4 s later, longer than silent_for:
    # it still answers (before a probe's greeting timeout), so it is never counted gone, also when
    # the last probe's wait for the greeting is cut short by the deadline (before: 0.35 s and
    # 0.8 s called it silent, the wait ran out before the greeting came).
    h = FakeHost(up=True, greet_after=0.4)
    silent, took, probes = Probe(connect_timeout=1.0, probe_timeout=3.0, interval=0.05).until_silent(
        "127.0.0.1", h.port, timeout, 0.3)
    assert not silent and took is None and probes >= 1, (silent, took, probes)


def test_a_hung_sshd_on_a_live_kernel_is_silent_after_the_greeting_timeout():
    # Connections are accepted and never greeted, and new ones are accepted too: no answer within
    # probe_timeout is silence since the probe began, as before.
    with silent_listener(64) as port:
        t0 = time.monotonic()
        silent, took, probes = Probe(connect_timeout=1.0, probe_timeout=0.5, interval=0.05).until_silent(
            "127.0.0.1", port, 10, 0.3)
        assert silent and probes == 1 and took is not None and took < 0.5     # silent since the first probe began
        assert time.monotonic() - t0 >= 0.5     # the greeting timeout was given


def test_a_wave_may_open_a_socket_per_waiting_syn_of_every_host():
    import resource
    from ansible.module_utils.fleetnap.wave import allow_open_files
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        got = allow_open_files(300)
        now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        want = 300 * 5 + 64 if hard == resource.RLIM_INFINITY else min(300 * 5 + 64, hard)
        assert got == now == want
        assert allow_open_files(10) == want and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == want   # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_bmc_the_client_cannot_ask_is_that_hosts_failure_not_the_calls():
    from ansible.module_utils.fleetnap.fleethosts import Unusable, bmc_for
    bmc = bmc_for({"bmc_address": "10.0.1.9", "bmc_user": "u" * 20, "bmc_password": "pw"}, None, "ipmitool", None)
    assert isinstance(bmc, Unusable) and "not a valid IPMI user name" in bmc.reason
    h = FakeHost()
    w, _ = wave()
    r = w.wake([entry("a", h, ("ipmi",), bmc)])["a"]
    assert not r["ok"] and "ipmi: BMC 10.0.1.9:623 cannot be asked" in r["msg"]


def test_what_the_host_said_decides_how_it_is_parked():
    """gear_member's checked suspend, as the raw task registers it: scheduled, no S3 (exit 4:
    parked by the BMC when there is one and a fallback), refused with its reason, not sent."""
    from ansible.module_utils.fleetnap.wave import suspend_outcome
    assert suspend_outcome({"rc": 0, "stdout": ""}, "soft", True) == ("suspend", None, "")
    assert suspend_outcome({"skipped": True}, "soft", True) == ("suspend", None, "")
    no_s3 = {"rc": 4, "stdout": "cannot suspend: /sys/power/state offers [freeze], not mem [no S3 on this host]\r\n"}
    method, state, note = suspend_outcome(no_s3, "soft", True)
    assert method == "soft" and state is None
    assert note == "cannot suspend: /sys/power/state offers [freeze], not mem [no S3 on this host]: " \
                   "parked by soft through the BMC instead"
    assert suspend_outcome(no_s3, "soft", False)[:2] == (None, "on")         # no BMC: refused, stays up
    assert suspend_outcome(no_s3, "", True)[:2] == (None, "on")              # no fallback wanted
    refused = {"rc": 3, "stdout": "cannot suspend: suspend.target is masked (/etc/systemd/system/suspend.target -> /dev/null)\n"}
    assert suspend_outcome(refused, "soft", True) == (
        None, "on", "cannot suspend: suspend.target is masked (/etc/systemd/system/suspend.target -> /dev/null); "
                    "nothing was scheduled, the host stays up")
    gone = {"unreachable": True, "msg": "Failed to connect to the host via ssh: timed out"}
    assert suspend_outcome(gone, "soft", True) == (
        None, "unknown", "could not start the suspend (host unreachable): Failed to connect to the host via ssh: timed out")
    odd = {"rc": 127, "stdout": "sh: systemd-run: not found"}
    assert suspend_outcome(odd, "soft", True) == (
        None, "unknown", "could not start the suspend (rc 127): sh: systemd-run: not found")


def test_park_reads_what_each_host_said():
    """A refused host fails at once, stays up, nothing sent to its BMC; a host without S3 is
    powered off by its BMC instead and the result says why; a scheduled one is waited for."""
    refused, nos3, fine = FakeHost(up=True), FakeHost(up=True), FakeHost(up=True)
    fine.down(after=0.2)
    bmc_refused, bmc_nos3 = FakeBmc(refused, power="on"), FakeBmc(nos3, power="on")
    w, _ = wave(down_timeout=1.0)
    out = w.park([
        entry("refused", refused, down_method="suspend", bmc=bmc_refused, no_s3_fallback="soft",
              said={"rc": 3, "stdout": "cannot suspend: AllowSuspend=no in /etc/systemd/sleep.conf\n"}),
        entry("nos3", nos3, down_method="suspend", bmc=bmc_nos3, no_s3_fallback="soft",
              said={"rc": 4, "stdout": "cannot suspend: /sys/power/state offers [freeze], not mem [no S3 on this host]"}),
        entry("fine", fine, down_method="suspend", since=time.time(), said={"rc": 0, "stdout": ""})])
    r = out["refused"]
    assert not r["ok"] and r["state"] == "on" and bmc_refused.commands == []
    assert r["msg"] == "cannot suspend: AllowSuspend=no in /etc/systemd/sleep.conf; nothing was scheduled, the host stays up"
    r = out["nos3"]
    assert r["ok"] and r["method"] == "soft" and r["state"] == "off" and bmc_nos3.commands[:2] == ["status", "soft"]
    assert r["msg"].startswith("cannot suspend: /sys/power/state offers [freeze], not mem [no S3 on this host]: "
                               "parked by soft through the BMC instead; silent ")
    assert out["fine"]["ok"] and out["fine"]["state"] == "asleep" and "resume_hook" not in out["fine"]
    refused.down()


def test_a_park_with_the_resume_hook_says_so_in_its_result():
    """gear_member's park prints a line when it installed its resume hook (the host puts its
    sleep policy back itself on the wake): the park's result carries resume_hook for the record."""
    hooked, plain = FakeHost(up=True), FakeHost(up=True)
    hooked.down(after=0.1)
    plain.down(after=0.1)
    w, _ = wave(down_timeout=1.0)
    line = "parked with the resume hook /run/fleetnap/park-resume\n"
    out = w.park([entry("hooked", hooked, down_method="suspend", since=time.time(), said={"rc": 0, "stdout": line}),
                  entry("plain", plain, down_method="suspend", since=time.time(), said={"rc": 0, "stdout": ""})])
    assert out["hooked"]["ok"] and out["hooked"]["resume_hook"] is True
    assert out["plain"]["ok"] and "resume_hook" not in out["plain"]
    assert resume_hook_in({"rc": 0, "stdout": line}) and not resume_hook_in({"rc": 3, "stdout": line})
    assert not resume_hook_in(None) and not resume_hook_in({"rc": 0, "stdout": "cannot suspend: x " + line})


class SafeBmc(FakeBmc):
    """A BMC with a boot override and an event log (the order of the calls is what is tested;
    the real BMCs are in tests/modules/test_gear_wave_ipmi.py and test_gear_redfish.py)."""

    def __init__(self, host, boot_error=None, log_error=None, **kw):
        super().__init__(host, **kw)
        self.boot_error, self.log_error, self.log = boot_error, log_error, ["old"]

    def set_boot_once(self, target):
        self.commands.append("boot:%s" % target)
        if self.boot_error:
            raise IpmiError(self.boot_error, kind="command")
        return {"target": target, "enabled": "Once", "once": True}

    def log_marker(self):
        self.commands.append("marker")
        return list(self.log)

    def power(self, action):
        super().power(action)
        if action == "on":
            self.log.append("POST: memory error")

    def log_entries_since(self, marker):
        self.commands.append("since")
        if self.log_error:
            raise IpmiError(self.log_error, kind="unreachable")
        return [{"id": str(i), "message": m, "severity": "Warning"} for i, m in enumerate(self.log) if m not in marker]


def test_a_bmc_power_on_sets_the_disk_once_and_reports_what_the_wake_logged():
    h = FakeHost()
    bmc = SafeBmc(h)
    w, _ = wave()
    r = w.wake([entry("a", h, ("ipmi",), bmc)])["a"]
    assert r["ok"] and bmc.commands == ["status", "boot:Hdd", "marker", "on", "since"]
    assert r["bmc_events"] == [{"id": "1", "message": "POST: memory error", "severity": "Warning"}]
    assert "next boot from Hdd (once)" in r["attempts"][0]["report"]
    assert "1 new event log entry (first: Warning: POST: memory error)" in r["attempts"][0]["report"]


def test_safe_power_on_error_paths():
    # The override cannot be set: noted and powered on; with boot_once_required, not powered on.
    h = FakeHost()
    bmc = SafeBmc(h, boot_error="BMC x refused 'chassis bootdev disk'")
    w, _ = wave()
    r = w.wake([entry("a", h, ("ipmi",), bmc)])["a"]
    assert r["ok"] and "boot override not set (BMC x refused" in r["attempts"][0]["report"]
    h2 = FakeHost()
    bmc2 = SafeBmc(h2, boot_error="BMC y refused 'chassis bootdev disk'")
    r2 = w.wake([dict(entry("b", h2, ("ipmi",), bmc2), boot_once_required=True)])["b"]
    assert not r2["ok"] and "on" not in bmc2.commands and "boot_once_required" in r2["msg"]
    # The event log cannot be read after the wake: said, the wake stands, no bmc_events.
    h3 = FakeHost()
    bmc3 = SafeBmc(h3, log_error="no answer")
    r3 = w.wake([entry("c", h3, ("ipmi",), bmc3)])["c"]
    assert r3["ok"] and "bmc_events" not in r3
    assert "event log not read after the wake (no answer)" in r3["attempts"][0]["report"]
