"""The concurrent fleet observation (module_utils/fleetnap/observe.py) that gear_observe runs:
one probe per host and one BMC read per BMC, all at once, with bounded concurrency; a silent host
or an unanswering BMC is an observation, never an exception. Real sockets on 127.0.0.1 for the
probe; the BMC client is the error path's stand-in (the real one is ipmitool against ipmi_sim in
tests/modules and on the simulator)."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from ansible.module_utils.fleetnap.observe import answers, answers_within, compile_greeting, greeting_after_wake, observe


@pytest.fixture
def greeter():
    """A TCP server on 127.0.0.1 that greets like sshd, and one that accepts and says nothing."""
    servers = []

    def serve(greeting: bytes | None):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        servers.append(srv)

        def loop():
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                if greeting:
                    conn.sendall(greeting)
                    conn.close()
                else:
                    servers.append(conn)           # held open, silent: a NAT in front of a sleeper

        threading.Thread(target=loop, daemon=True).start()
        return srv.getsockname()[1]

    yield serve
    for s in servers:
        s.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_greeting_is_an_answer_an_open_silent_port_is_not(greeter):
    ssh = greeter(b"SSH-2.0-OpenSSH_9.2\r\n")
    mute = greeter(None)
    assert answers("127.0.0.1", ssh, "^SSH-", 1.0)
    assert not answers("127.0.0.1", mute, "^SSH-", 0.3)
    assert answers("127.0.0.1", mute, "", 0.3)                       # no greeting asked: connect is enough
    assert not answers("127.0.0.1", free_port(), "^SSH-", 0.3)       # refused


def test_a_refused_host_is_probed_again_until_the_timeout():
    calls = []
    clock = [0.0]

    def probe(host, port, greeting, timeout):
        calls.append(timeout)
        return len(calls) == 4                                        # answers on the 4th probe

    def sleep(s):
        clock[0] += s

    ok, probes, took = answers_within("h", 22, "^SSH-", 3.0, interval=0.2, clock=lambda: clock[0],
                                      sleep=sleep, probe=probe)
    assert ok and probes == 4 and took == pytest.approx(0.6)
    calls.clear()
    clock[0] = 0.0
    ok, probes, took = answers_within("h", 22, "^SSH-", 1.0, interval=0.2, clock=lambda: clock[0],
                                      sleep=sleep, probe=lambda *a: calls.append(1) and False)
    assert not ok and took is None and 4 <= probes <= 6


class FakeBmc:
    """Stand-in BMC client for the error paths: answers, refuses, or raises."""

    def __init__(self, answer, delay=0.0, target="10.0.0.1:623"):
        self.answer, self.delay, self.target = answer, delay, target

    def status(self):
        time.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_every_host_observed_and_every_failure_is_a_per_host_observation(greeter):
    ssh = greeter(b"SSH-2.0-x\r\n")
    hosts = [
        {"name": "up", "address": "127.0.0.1", "port": ssh, "bmc": FakeBmc("on")},
        {"name": "asleep", "address": "127.0.0.1", "port": free_port(), "bmc": FakeBmc("on")},
        {"name": "off", "address": "127.0.0.1", "port": free_port(), "bmc": FakeBmc("off")},
        {"name": "deadbmc", "address": "127.0.0.1", "port": ssh,
         "bmc": FakeBmc(RuntimeError("BMC 10.0.0.9:623 did not answer"), target="10.0.0.9:623")},
        {"name": "nobmc", "address": "127.0.0.1", "port": ssh, "bmc": None},
    ]
    seen = observe(hosts, 0.5, lambda b: b.status())
    assert seen["up"] == {"ssh": True, "ssh_s": seen["up"]["ssh_s"], "probes": 1, "bmc": "on",
                          "bmc_configured": True, "bmc_read": True, "bmc_error": "",
                          "bmc_endpoint": "10.0.0.1:623", "power_watts": None, "power_source": None,
                          "power_note": ""}
    assert not seen["asleep"]["ssh"] and seen["asleep"]["bmc"] == "on" and seen["asleep"]["probes"] > 1
    assert not seen["off"]["ssh"] and seen["off"]["bmc"] == "off"
    assert seen["deadbmc"]["ssh"] and seen["deadbmc"]["bmc"] is None
    assert seen["deadbmc"]["bmc_error"] == "BMC 10.0.0.9:623 did not answer"
    assert seen["deadbmc"]["bmc_endpoint"] == "10.0.0.9:623"     # named by the plan's BMC check
    assert seen["nobmc"]["bmc_configured"] is False and seen["nobmc"]["bmc"] is None
    assert seen["nobmc"]["bmc_endpoint"] == ""


def test_all_at_once_within_bounds_of_concurrency():
    """60 hosts are probed at the same time (up to probe_concurrency), and BMC reads never
    exceed their own concurrency: counted in flight, not timed."""
    lock = threading.Lock()
    count = {"probe": [0, 0], "bmc": [0, 0]}          # [in flight, peak]

    def enter(kind):
        with lock:
            count[kind][0] += 1
            count[kind][1] = max(count[kind][1], count[kind][0])

    def leave(kind):
        with lock:
            count[kind][0] -= 1

    def probe(host, port, greeting, timeout):
        enter("probe")
        time.sleep(0.05)
        leave("probe")
        return True

    class Counting(FakeBmc):
        def status(self):
            enter("bmc")
            time.sleep(0.05)
            leave("bmc")
            return "on"

    hosts = [{"name": "h%d" % i, "address": "127.0.0.1", "port": 22, "bmc": Counting("on")} for i in range(60)]
    seen = observe(hosts, 0.5, lambda b: b.status(), probe_concurrency=25, bmc_concurrency=3, probe=probe)
    assert len(seen) == 60 and all(r["ssh"] and r["bmc"] == "on" for r in seen.values())
    assert count["bmc"][1] == 3
    assert count["probe"][1] == 25


def test_bmc_read_silent_reads_only_the_bmcs_of_silent_hosts(greeter):
    """After a shift an answering host is on whatever its chassis says: only silent hosts' BMCs
    are asked (asleep or off?), and the answering host's BMC is never called."""
    ssh = greeter(b"SSH-2.0-x\r\n")
    calls = []

    class Logged(FakeBmc):
        def status(self):
            calls.append(self.answer)
            return FakeBmc.status(self)

    hosts = [
        {"name": "up", "address": "127.0.0.1", "port": ssh, "bmc": Logged("never asked")},
        {"name": "asleep", "address": "127.0.0.1", "port": free_port(), "bmc": Logged("on")},
        {"name": "off", "address": "127.0.0.1", "port": free_port(), "bmc": Logged("off")},
    ]
    seen = observe(hosts, 0.4, lambda b: b.status(), bmc_read="silent")
    assert sorted(calls) == ["off", "on"]
    assert seen["up"]["ssh"] and seen["up"]["bmc"] is None and seen["up"]["bmc_read"] is False
    assert seen["asleep"]["bmc"] == "on" and seen["asleep"]["bmc_read"] is True
    assert seen["off"]["bmc"] == "off"


def test_a_power_reading_follows_a_status_read_and_its_failure_is_a_note(greeter):
    """bmc_power is asked only after a chassis power read that succeeded; a reading that raises
    is a note on that host, the power state stands (error path: a stand-in BMC)."""
    hosts = [
        {"name": "measured", "address": "127.0.0.1", "port": free_port(), "bmc": FakeBmc("on")},
        {"name": "broken", "address": "127.0.0.1", "port": free_port(), "bmc": FakeBmc("off")},
        {"name": "unanswered", "address": "127.0.0.1", "port": free_port(), "bmc": FakeBmc(RuntimeError("timeout"))},
    ]

    def reading(bmc):
        if bmc.answer == "off":
            raise RuntimeError("BMC 10.0.0.2:623 did not answer 'dcmi power reading'")
        return 187.0, "dcmi", None

    seen = observe(hosts, 0.3, lambda b: b.status(), bmc_power=reading)
    assert seen["measured"]["power_watts"] == 187.0 and seen["measured"]["power_source"] == "dcmi"
    assert seen["broken"]["bmc"] == "off" and seen["broken"]["power_watts"] is None
    assert seen["broken"]["power_note"] == "no power reading: BMC 10.0.0.2:623 did not answer 'dcmi power reading'"
    assert seen["unanswered"]["bmc"] is None and seen["unanswered"]["power_note"] == ""
    plain = observe(hosts[:1], 0.3, lambda b: b.status())
    assert plain["measured"]["power_watts"] is None and plain["measured"]["power_note"] == ""


def test_a_hosts_own_probe_timeout_shortens_only_its_probe():
    """A host expected silent is probed for its own (shorter) timeout; the others for the
    module's: counted in probes with a fake probe and clock, not timed."""
    asked = {}

    def probe(host, port, greeting, timeout):
        asked.setdefault(port, []).append(timeout)
        return False

    hosts = [{"name": "parked", "address": "127.0.0.1", "port": 1, "bmc": None, "probe_timeout": 0.3},
             {"name": "other", "address": "127.0.0.1", "port": 2, "bmc": None},
             {"name": "longer", "address": "127.0.0.1", "port": 3, "bmc": None, "probe_timeout": 9.0}]
    seen = observe(hosts, 0.6, lambda b: b.status(), probe=probe)
    assert not any(r["ssh"] for r in seen.values())
    assert max(asked[1]) <= 0.3 + 1e-9 and max(asked[2]) > 0.3 and max(asked[3]) <= 0.6 + 1e-9
    assert seen["parked"]["probes"] < seen["other"]["probes"]


def test_the_module_returns_each_hosts_inventory_facts_with_the_observation_and_probes_parked_hosts_briefly(
        greeter, tmp_path):
    """gear_observe as gear_shift calls it: one host greets, one is parked in the state file
    (probed for parked_probe_timeout, not probe_timeout: counted in probes, the interval is 0.2 s),
    each result carries the host's inventory facts for the plan."""
    from conftest import run_module
    ssh = greeter(b"SSH-2.0-x\r\n")
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {"parked": {"state": "asleep", "since": "2026-11-25T00:00:00Z",
                                                      "resume_hook": True}}}))
    hosts = [{"name": "up", "address": "127.0.0.1", "port": ssh, "inventory": {"group": 1, "rack": "r1"}},
             {"name": "parked", "address": "127.0.0.1", "port": free_port(),
              "inventory": {"group": 2, "up_methods": ["wol"]}},
             {"name": "silent", "address": "127.0.0.1", "port": free_port(), "inventory": {"group": 3}}]
    res = run_module("gear_observe", {"hosts": hosts, "probe_timeout": 3, "parked_probe_timeout": 0.5,
                                      "state_file": str(state), "bmc_read": "silent"})
    assert not res.get("failed"), res
    seen = res["hosts"]
    assert seen["up"]["ssh"] and seen["up"]["group"] == 1 and seen["up"]["rack"] == "r1" and seen["up"]["name"] == "up"
    assert not seen["parked"]["ssh"] and seen["parked"]["up_methods"] == ["wol"]
    # parked with gear_member's resume hook: the wake phase leaves its unpark to the host
    assert seen["parked"]["resume_hook"] is True
    assert "resume_hook" not in seen["up"] and "resume_hook" not in seen["silent"]
    assert seen["parked"]["probes"] <= 4 < seen["silent"]["probes"]


def test_a_hosts_own_bmc_read_overrides_the_calls(greeter):
    """Per host: 'always' is read whatever the probe says, 'silent' only when silent, 'never' not
    at all; counted by the BMC stand-in's calls (the error path's stand-in, no timing)."""
    ssh = greeter(b"SSH-2.0-x\r\n")
    calls = []

    class Logged(FakeBmc):
        def status(self):
            calls.append(self.target)
            return FakeBmc.status(self)

    def host(name, port, mode):
        return {"name": name, "address": "127.0.0.1", "port": port, "bmc": Logged("on", target=name),
                "bmc_read": mode}

    hosts = [host("up-always", ssh, "always"), host("up-silent", ssh, "silent"), host("up-never", ssh, "never"),
             host("quiet-silent", free_port(), "silent"), host("quiet-never", free_port(), "never"),
             {"name": "quiet-default", "address": "127.0.0.1", "port": free_port(), "bmc": Logged("off", target="d")}]
    seen = observe(hosts, 0.3, lambda b: b.status(), bmc_read="silent")
    assert sorted(calls) == ["d", "quiet-silent", "up-always"]
    assert [n for n, r in sorted(seen.items()) if r["bmc_read"]] == ["quiet-default", "quiet-silent", "up-always"]
    assert seen["quiet-never"]["bmc"] is None and seen["quiet-default"]["bmc"] == "off"
    with pytest.raises(ValueError, match="host x: bmc_read must be one of always, silent, never, got 'maybe'"):
        observe([{"name": "x", "address": "127.0.0.1", "port": 1, "bmc": None, "bmc_read": "maybe"}], 0.1,
                lambda b: b.status())


def test_the_first_observation_of_a_shift_asks_only_what_the_plan_uses():
    """observation_needs, row by row: the groups the shift has on (2 and 3 here) and the state
    file decide what is asked of each host."""
    from ansible.module_utils.fleetnap.gearshift import observation_needs
    groups = {"on-stays": 2, "asleep-woken": 3, "off-woken": 3, "goes-down": 1, "parked-stays": 1,
              "no-group": None, "text-group": "2"}
    recorded = {"asleep-woken": {"state": "asleep"}, "off-woken": {"state": "off"},
                "parked-stays": {"state": "asleep"}, "on-stays": {"state": "on"}}
    need = observation_needs(groups, [2, 3], recorded)
    assert need == {
        "on-stays": {"bmc_read": "silent", "wake": False, "parked_as": None},
        "asleep-woken": {"bmc_read": "never", "wake": True, "parked_as": "asleep"},
        "off-woken": {"bmc_read": "silent", "wake": True, "parked_as": None},
        "goes-down": {"bmc_read": "always", "wake": False, "parked_as": None},
        "parked-stays": {"bmc_read": "always", "wake": False, "parked_as": None},
        "no-group": {"bmc_read": "always", "wake": False, "parked_as": None},
        "text-group": {"bmc_read": "silent", "wake": False, "parked_as": None},
    }
    # a power reading wanted: every BMC is read, and no state is taken from the state file
    assert all(n == {"bmc_read": "always", "wake": n["wake"], "parked_as": None}
               for n in observation_needs(groups, [2, 3], recorded, read_power=True).values())


def test_a_silent_host_whose_bmc_was_not_asked_is_in_the_state_file_s_state(tmp_path):
    """The plan takes parked_as only where the BMC was not read; a read that failed stays unknown."""
    from ansible.module_utils.fleetnap.gearshift import observed_state, plan_from
    assert observed_state(False, None, "asleep") == "asleep"
    assert observed_state(False, "off", "asleep") == "off"
    assert observed_state(True, None, "asleep") == "on"
    assert observed_state(False, None, None) == "unknown"
    base = {"group": 2, "up_methods": ["wol"], "bmc_configured": True, "ssh": False, "bmc": None}
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {"a": {"state": "asleep"}, "b": {"state": "asleep"}}}))
    plan = plan_from({"a": dict(base, bmc_read=False, parked_as="asleep"),
                      "b": dict(base, bmc_read=True, parked_as="asleep", bmc_error="timeout"),
                      "c": dict(base, group=1, ssh=True), "d": dict(base, group=3, ssh=True)},
                     3, 1, groups_on=[1, 2, 3], state_file=str(state))
    states = dict((r["host"], r["state"]) for r in plan["rows"])
    assert states == {"a": "asleep", "b": "unknown", "c": "on", "d": "on"}
    assert plan["up_hosts"] == ["a", "b"]


@pytest.mark.skipif(not __import__("shutil").which("ipmitool"), reason="needs ipmitool (installed by make setup)")
def test_the_module_with_bmc_read_needed_asks_no_bmc_of_a_host_staying_on_or_parked_asleep_and_woken(
        greeter, tmp_path):
    """gear_observe bmc_read=needed for a shift to gear groups [2, 3] (real ipmitool against a
    port where no BMC answers: a BMC that was asked has bmc_read true and its error): the host of
    group 2 that greets and the host of group 3 parked asleep are not asked (the parked one probed
    for wake_probe_timeout only, its state the state file's), the host of group 1 (going down) and
    the parked-off one are."""
    from conftest import run_module
    ssh = greeter(b"SSH-2.0-x\r\n")
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {
        "woken": {"state": "asleep", "since": "2026-11-25T00:00:00Z"},
        "woken-off": {"state": "off", "since": "2026-11-25T00:00:00Z"}}}))
    bmc = {"bmc_address": "127.0.0.1", "bmc_port": free_port(), "bmc_user": "admin", "bmc_password": "Fn7-pw-c9e1b4"}

    def host(name, port, group):
        return dict(bmc, name=name, address="127.0.0.1", port=port, inventory={"group": group})

    hosts = [host("stays", ssh, 2), host("down", ssh, 1), host("woken", free_port(), 3),
             host("woken-off", free_port(), 3)]
    args = {"hosts": hosts, "probe_timeout": 3, "parked_probe_timeout": 1, "wake_probe_timeout": 0.2,
            "state_file": str(state), "bmc_read": "needed", "shift": {"groups_on": [2, 3]},
            "retries": 0, "session_timeout": 1, "min_interval": 0, "rate_limit_dir": str(tmp_path / "rl")}
    res = run_module("gear_observe", args)
    assert not res.get("failed"), res
    seen = res["hosts"]
    assert dict((n, r["bmc_read"]) for n, r in seen.items()) == {"stays": False, "down": True, "woken": False,
                                                                 "woken-off": True}
    assert seen["woken"]["parked_as"] == "asleep" and not seen["woken"]["ssh"] and seen["woken"]["probes"] <= 2
    assert "parked_as" not in seen["woken-off"] and seen["down"]["bmc_error"]
    # the same call without the shift reads every BMC
    every = run_module("gear_observe", dict(args, bmc_read="always", shift=None))["hosts"]
    assert all(r["bmc_read"] for r in every.values()) and not any("parked_as" in r for r in every.values())


def test_a_down_host_whose_bmc_the_observation_did_not_ask_stops_the_shift_and_says_so():
    """bmc_check: a host going down whose BMC was skipped (an observation made for another gear)
    is not taken as answered; the reason says it was not asked, not that the BMC is silent."""
    from ansible.module_utils.fleetnap.gearshift import bmc_check
    hosts = {"a": {"bmc_configured": True, "bmc": None, "bmc_read": False, "bmc_endpoint": "10.0.0.9:623"},
             "b": {"bmc_configured": True, "bmc": None, "bmc_read": True, "bmc_error": "timeout",
                   "bmc_endpoint": "10.0.0.8:623"}}
    plan = {"down_hosts": ["a", "b"], "rows": [{"host": "a", "action": "down", "method": "suspend"},
                                               {"host": "b", "action": "down", "method": "suspend"}]}
    out = bmc_check(hosts, plan)
    assert not out["ok"] and out["unanswered"] == ["a", "b"]
    assert "a: not asked by the observation; b: timeout" in out["reason"]
    assert "a (10.0.0.9:623: not asked by the observation)" in out["msg"]


def test_every_probe_thread_is_started_before_the_first_probe():
    """Probe threads started one by one while the others already probe begin later the more hosts
    there are (together.run_together): here the first probe already finds every probe thread
    started. Counted, not timed."""
    seen_threads = []
    before = threading.active_count()

    def probe(host, port, greeting, timeout):
        seen_threads.append(threading.active_count())
        time.sleep(0.02)
        return True

    hosts = [{"name": "h%d" % i, "address": "127.0.0.1", "port": 22, "bmc": None} for i in range(200)]
    seen = observe(hosts, 0.5, lambda b: b.status(), probe_concurrency=200, probe=probe)
    assert len(seen) == 200 and all(r["ssh"] for r in seen.values())
    assert seen_threads[0] >= before + 200, (before, seen_threads[:5])


def _listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    return srv


def test_packets_sent_during_the_probe_go_after_its_syn_and_only_that_connection_is_waited_on():
    """greeting_after_wake: the SYN is out before wake() is called (wake() accepts the connection,
    and greets on it: a connection opened after wake() could not be there to accept), and the
    greeting is read on that connection."""
    srv = _listener()
    seen = {}

    def wake():
        srv.settimeout(5)
        conn, _ = srv.accept()          # the connection made before wake() was called (nothing else connects)
        seen["queued_before_wake"] = True
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        seen["conn"] = conn
    try:
        start = time.time()
        ok, took, sent_at, error = greeting_after_wake("127.0.0.1", srv.getsockname()[1], compile_greeting("^SSH-"),
                                                       0.5, wake)
        assert seen.get("queued_before_wake") and error == "", (seen, error)
        assert ok is True and 0 <= took < 0.5 and start - 0.001 <= sent_at <= time.time() + 0.001
    finally:
        srv.close()
        if "conn" in seen:
            seen["conn"].close()


def test_a_host_silent_on_that_connection_is_not_probed_again_and_a_failed_wake_is_noted():
    """An accepting but silent port (a NAT in front of a sleeping host): no greeting within the wait,
    one connection only (a second SYN, after the packets, could reach a host they woke). A refused
    port ends at once, the packets sent all the same. wake()'s failure is returned, not raised."""
    srv = _listener()
    try:
        start = time.monotonic()
        ok, took, sent_at, error = greeting_after_wake("127.0.0.1", srv.getsockname()[1], compile_greeting("^SSH-"),
                                                       0.3, lambda: None)
        assert ok is False and took is None and sent_at is not None and error == ""
        assert 0.25 <= time.monotonic() - start < 1.5
        srv.settimeout(0)
        srv.accept()[0].close()
        with pytest.raises(BlockingIOError):
            srv.accept()                # the one connection, no other
    finally:
        srv.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))       # bound, not listening: refused
    calls = []

    def failing():
        calls.append(1)
        raise OSError("Network is unreachable")
    try:
        start = time.monotonic()
        ok, took, sent_at, error = greeting_after_wake("127.0.0.1", closed.getsockname()[1], compile_greeting("^SSH-"),
                                                       5.0, failing)
        assert (ok, took, sent_at, error) == (False, None, None, "Network is unreachable") and calls == [1]
        assert time.monotonic() - start < 2.5       # not the wait: a refusal is the answer
    finally:
        closed.close()


def test_observe_wakes_a_host_during_its_probe_only_with_a_wait_under_a_second(greeter):
    """observe(): a host's "wake" is called from its probe, its entry says when; a wait of a second or
    more is refused (the SYN's first retransmission could then reach a host the packets woke)."""
    calls = []
    port = greeter(b"SSH-2.0-OpenSSH_9.2\r\n")
    hosts = [{"name": "a", "address": "127.0.0.1", "port": port, "bmc": None, "probe_timeout": 0.5,
              "wake": lambda: calls.append("a")},
             {"name": "b", "address": "127.0.0.1", "port": port, "bmc": None}]
    got = observe(hosts, 2, lambda bmc: "on")
    assert calls == ["a"] and got["a"]["ssh"] is True and got["a"]["probes"] == 1
    assert isinstance(got["a"]["wol_sent_at"], float) and got["a"]["wol_error"] == ""
    assert got["b"]["ssh"] is True and "wol_sent_at" not in got["b"]
    hosts[0]["probe_timeout"] = 1.0
    with pytest.raises(ValueError, match="host a: woken during the observation with a probe of 1 s; it must be under 1 s"):
        observe(hosts, 2, lambda bmc: "on")
    assert calls == ["a"]
