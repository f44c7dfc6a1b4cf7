"""gear_shift_prepare's ``whole_shift`` (issue 35): when the plan only wakes hosts from the
controller, the prepare call goes on to run the waves and record the shift in its own process.
Real sockets on loopback: the parked host's sshd (a GreetingServer) is silent until a real magic
packet for its MAC reaches its port; the record's files, the journal and the lock are real."""

from __future__ import annotations

import json
import socket
import threading
import time

from conftest import run_module
from greeting import GreetingServer

MAC = "02:fe:00:00:35:02"
PACKET = b"\xff" * 6 + bytes.fromhex(MAC.replace(":", "")) * 16
# h1 parked in S3 by an earlier shift, with its resume hook (no step runs on it once woken)
PARKED = {"hosts": {"h1": {"state": "asleep", "since": "2026-12-01T00:00:00Z", "resume_hook": True}}}


RESUME_S = 0.6     # the parked host's own resume, longer than its probe's wait (0.3 s): as S3's seconds are


def _woken_by_packet(srv, udp, got, at=None):
    """Set the server answering RESUME_S after a magic packet for MAC arrives (the host wakes on it);
    ``at``: a list the arrival times (wall clock) go into."""
    def wait():
        while not srv.stop.is_set():
            try:
                packet, _ = udp.recvfrom(1024)
            except socket.timeout:
                continue
            except OSError:
                return
            got.append(packet)
            if at is not None:
                at.append(time.time())
            if packet == PACKET and not srv.answering.is_set():
                threading.Timer(RESUME_S, srv.answering.set).start()
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    return t


def _servers():
    parked, on = GreetingServer(), GreetingServer()
    on.answering.set()
    parked.start()
    on.start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    return parked, on, udp


def _args(tmp_path, parked, on, udp, **whole):
    gear = tmp_path / "gear"
    gear.mkdir(exist_ok=True)
    hosts = [{"name": "h1", "address": "127.0.0.1", "port": parked.port,
              "inventory": {"group": 2, "up_methods": ["wol"], "wol_macs": [MAC], "wol_address": "127.0.0.1",
                            "wol_port": udp.getsockname()[1]}},
             {"name": "h2", "address": "127.0.0.1", "port": on.port, "inventory": {"group": 1, "up_methods": ["wol"]}}]
    return {"hosts": hosts, "gear": 2, "replicas": 2, "probe_timeout": 1, "parked_probe_timeout": 0.3,
            "rate_limit_dir": str(tmp_path / "rl"), "lock_file": str(gear / "shift.lock"),
            "state_file": str(gear / "state.json"), "lease": 60,   # the forked runner has no ansible-playbook above it
            "whole_shift": dict({"history_file": str(gear / "history.jsonl"), "power_file": str(gear / "power_w.json"),
                                 "metrics_dir": str(gear / "metrics"), "wol_timeout": 10, "wol_resend": 1}, **whole)}


def _stop(*servers, udp):
    for srv in servers:
        srv.stop.set()
        srv.join()
        srv.sock.close()
    udp.close()


def test_the_prepare_call_wakes_and_records_a_shift_that_only_wakes(tmp_path):
    parked, on, udp = _servers()
    packets = []
    waiter = _woken_by_packet(parked, udp, packets)
    try:
        args = _args(tmp_path, parked, on, udp)
        state = tmp_path / "gear" / "state.json"
        state.write_text(json.dumps(PARKED))
        got = run_module("gear_shift_prepare", args)
        assert not got.get("failed"), got
        assert got["went_on"] is True and got["plan"]["up_hosts"] == ["h1"], got
        assert [w["ok"] for w in got["waves"]] == [["h1"]] and "hosts" not in got["waves"][0]
        assert got["waves"][0]["journal"]["updated"] == {"h1": "on"}
        assert [(a["host"], a["method"]) for a in got["record"]["record"]["actions"]] == [("h1", "wol")]
        assert PACKET in packets                            # woken by a real packet, seen by its greeting
        rec = got["record"]
        assert rec["result"] == "ok" and rec["observe_again"] is False and rec["lock_released"] is True, rec
        doc = json.loads(state.read_text())
        assert doc["result"] == "ok" and doc["hosts"]["h1"]["state"] == "on" and "in_progress" not in doc
        assert [(a["host"], a["action"], a["ok"]) for a in doc["actions"]] == [("h1", "up", True)]
        history = (tmp_path / "gear" / "history.jsonl").read_text().splitlines()
        assert len(history) == 1 and json.loads(history[0])["power"] == {"h1": "on", "h2": "on"}
        prom = (tmp_path / "gear" / "metrics" / "fleetnap_gear.prom").read_text()
        assert "\nfleetnap_gear 2\n" in "\n" + prom, prom
        # the lock is free again: the next shift takes it (every host on now: nothing to wake, recorded too)
        again = run_module("gear_shift_prepare", args)
        assert not again.get("failed") and again["went_on"] is True and again["waves"] == [], again
        assert again["record"]["result"] == "ok" and again["record"]["lock_released"] is True
        # without whole_shift, the call stops after the plan (the lock is the caller's to release)
        plain = run_module("gear_shift_prepare", dict(args, whole_shift=None, journal=False))
        assert not plain.get("failed") and plain["went_on"] is False and "record" not in plain, plain
    finally:
        _stop(parked, on, udp=udp)
        waiter.join()


def test_a_parked_hosts_packets_go_out_during_the_observation_and_its_wait_counts_from_them(tmp_path):
    """wake_during_observation (the default): h1's packets go out right after its probe's SYN, before
    the observation ends; the probe still sees it silent (its resume is longer than the probe's
    wait), the wave waits for it from those packets and sends none of its own. Turned off, the
    packets go out only after the observation."""
    for early in (True, False):
        parked, on, udp = _servers()
        packets, at = [], []
        waiter = _woken_by_packet(parked, udp, packets, at)
        try:
            gear = tmp_path / ("early" if early else "late")
            gear.mkdir()
            args = _args(gear, parked, on, udp, wake_during_observation=early)
            (gear / "gear" / "state.json").write_text(json.dumps(PARKED))
            got = run_module("gear_shift_prepare", args)
            assert not got.get("failed") and got["went_on"] is True and got["plan"]["up_hosts"] == ["h1"], got
            observed_until = got["started_epoch"] + got["observe_elapsed_s"]
            seen = got["hosts"]["h1"]
            assert seen["ssh"] is False and len(packets) == 3 and set(packets) == {PACKET}, (seen, packets)
            action = got["record"]["record"]["actions"][0]
            report = action["attempts"][0]["report"]
            if early:
                # sent during the observation (by its clock), received after the shift's start; the wave sent none
                assert seen["wol_error"] == "", seen
                assert got["started_epoch"] - 0.01 <= seen["wol_sent_at"] <= observed_until + 0.001, (seen, got)
                assert at[0] >= got["started_epoch"] - 0.01, (at, got)
                assert "magic packets sent once (the first during the observation)" in report, report
                assert action["wait_s"] >= RESUME_S - 0.05, action                 # waited for since them
                kept = json.loads((gear / "gear" / "state.json").read_text())["actions"][0]
                assert kept["attempts"][0]["report"] == report and kept["wait_s"] == action["wait_s"], kept
            else:
                assert "wol_sent_at" not in seen and at[0] > observed_until, (seen, at, observed_until)
                assert "during the observation" not in report, report
            assert got["record"]["result"] == "ok", got["record"]
        finally:
            _stop(parked, on, udp=udp)
            waiter.join()


def test_a_parked_host_found_awake_is_seen_on_though_its_packets_went_out(tmp_path):
    """A host the state file has parked but that is awake (woken by hand) greets on the connection
    opened before its packets: it is seen on, and nothing wakes it (the packets did nothing)."""
    parked, on, udp = _servers()
    parked.answering.set()
    packets = []
    waiter = _woken_by_packet(parked, udp, packets)
    try:
        args = _args(tmp_path, parked, on, udp)
        (tmp_path / "gear" / "state.json").write_text(json.dumps(PARKED))
        got = run_module("gear_shift_prepare", args)
        assert not got.get("failed") and got["went_on"] is True, got
        seen = got["hosts"]["h1"]
        assert seen["ssh"] is True and seen["wol_sent_at"] is not None and packets == [PACKET] * 3, (seen, packets)
        assert got["plan"]["up_hosts"] == [] and [w["ok"] for w in got["waves"]] == [[]], got["plan"]
        assert [(a["host"], a["action"]) for a in got["record"]["record"]["actions"]] == [("h1", "back")], got["record"]
    finally:
        _stop(parked, on, udp=udp)
        waiter.join()


def test_a_failure_after_packets_went_out_during_the_observation_names_the_hosts_that_got_them(tmp_path):
    """h1's packets go out during the observation; h3, parked too, has a Wake-on-LAN address that does
    not resolve (no early packets for it: the wave's checks refuse it), so the shift stops before the
    journal: the failure names h3's address and says h1 got packets (its resume hook puts it back)."""
    parked, on, udp = _servers()
    third = GreetingServer()
    third.start()
    packets = []
    waiter = _woken_by_packet(parked, udp, packets)
    try:
        args = _args(tmp_path, parked, on, udp)
        args["hosts"].append({"name": "h3", "address": "127.0.0.1", "port": third.port,
                              "inventory": {"group": 2, "up_methods": ["wol"], "wol_macs": ["02:fe:00:00:35:03"],
                                            "wol_address": "no-such-host.invalid"}})
        state = tmp_path / "gear" / "state.json"
        before = json.dumps({"hosts": dict(PARKED["hosts"], h3=PARKED["hosts"]["h1"])})
        state.write_text(before)
        got = run_module("gear_shift_prepare", args)
        assert got.get("failed") and got["msg"].startswith(
            "option hosts[1].wol_address: cannot resolve WoL destination 'no-such-host.invalid'"), got["msg"]
        assert "(hosts of the wave: h1, h3)" in got["msg"], got["msg"]
        assert "; magic packets went to h1 during the observation (a host they woke is back in its in-service " \
               "sleep policy by itself: its resume hook; the next shift sees it on)" in got["msg"], got["msg"]
        assert got["msg"].endswith("(the gear-shift lock was released)") and got["lock_released"] is True
        assert state.read_text() == before and packets == [PACKET] * 3, packets
    finally:
        _stop(parked, on, third, udp=udp)
        waiter.join()


def test_a_host_to_wake_that_cannot_be_woken_is_refused_before_the_journal_and_the_lock_released(tmp_path):
    """The wave's hosts are checked as gear_wave checks them once the plan names them, before the
    plan is written into the journal: no packet, the state file as it was, the lock released."""
    parked, on, udp = _servers()
    packets = []
    waiter = _woken_by_packet(parked, udp, packets)
    try:
        args = _args(tmp_path, parked, on, udp)
        args["hosts"][0]["inventory"]["wol_macs"] = []
        state = tmp_path / "gear" / "state.json"
        before = json.dumps(PARKED)
        state.write_text(before)
        got = run_module("gear_shift_prepare", args)
        assert got.get("failed") and "h1 wakes by wol but has no MAC address" in got["msg"], got
        assert "(the gear-shift lock was released)" in got["msg"] and got["lock_released"] is True
        assert state.read_text() == before and packets == []
        assert not (tmp_path / "gear" / "history.jsonl").exists()
    finally:
        _stop(parked, on, udp=udp)
        waiter.join()


def test_a_record_that_cannot_be_written_after_the_waves_ran_fails_names_it_and_the_next_shift_records_them(tmp_path):
    """The history file's directory is missing: the waves run (the host is woken by its packet),
    then the record refuses before it writes anything. The call fails naming the file, returns the
    wave, keeps its results in the journal and releases the lock; the next shift (the file's
    directory there) resumes from the journal and records that wake, with nothing left to wake."""
    parked, on, udp = _servers()
    packets = []
    waiter = _woken_by_packet(parked, udp, packets)
    try:
        gear = tmp_path / "gear"
        args = _args(tmp_path, parked, on, udp, history_file=str(gear / "missing" / "history.jsonl"))
        state = gear / "state.json"
        state.write_text(json.dumps(PARKED))
        got = run_module("gear_shift_prepare", args)
        assert got.get("failed"), got
        assert got["msg"].startswith("the waves ran (every host's result is in waves; the journal has them) but the "
                                     "shift could not be recorded: option history_file: its directory %s does not "
                                     "exist" % (gear / "missing")), got["msg"]
        assert got["msg"].endswith("(the gear-shift lock was released)") and got["lock_released"] is True
        assert [w["ok"] for w in got["waves"]] == [["h1"]] and PACKET in packets
        assert not (gear / "shift.lock").exists() and not (gear / "missing").exists()
        doc = json.loads(state.read_text())
        assert doc["hosts"]["h1"]["state"] == "on" and "result" not in doc, doc     # the journal, not a record
        assert [(a["host"], a["ok"]) for a in doc["in_progress"]["actions"]] == [("h1", True)]
        killed = doc["in_progress"]["shift"]
        sent = len(packets)
        again = run_module("gear_shift_prepare", dict(args, whole_shift=dict(args["whole_shift"],
                                                                             history_file=str(gear / "history.jsonl"))))
        assert not again.get("failed") and again["went_on"] is True and again["waves"] == [], again
        rec = again["record"]
        assert rec["result"] == "ok" and rec["lock_released"] is True, rec
        doc = json.loads(state.read_text())
        assert "in_progress" not in doc and doc["resumed"]["shift"] == killed, doc
        assert [(a["host"], a["action"], a["ok"]) for a in doc["actions"]] == [("h1", "up", True)]
        history = (gear / "history.jsonl").read_text().splitlines()
        assert len(history) == 1 and json.loads(history[0])["resumed"]["shift"] == killed
        assert len(packets) == sent                                           # no second wake
    finally:
        _stop(parked, on, udp=udp)
        waiter.join()
