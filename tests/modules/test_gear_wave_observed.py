"""gear_wave's ``observed`` option (issue 35): a gear shift passes each host's probe entry as it is
and the observation gear_observe returned; the wake fields come from that observation (the power
record read once). Real sockets on loopback: the magic packet must reach the port and carry the
MAC the observation names, and the host entry alone (no MAC) would be refused."""

from __future__ import annotations

import os
import socket

from conftest import run_module
from greeting import GreetingServer

MAC = "02:fe:00:00:35:01"


def test_the_wake_fields_come_from_the_observation(tmp_path):
    srv = GreetingServer()          # greets like sshd
    srv.answering.set()
    srv.start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(10)
    try:
        host = {"name": "h1", "address": "127.0.0.1", "port": srv.port}
        observed = {"h1": {"ssh": False, "bmc": None, "up_methods": ["wol"], "wol_macs": [MAC],
                           "wol_address": "127.0.0.1", "wol_port": udp.getsockname()[1], "group": 1}}
        args = {"action": "up", "hosts": [host], "wol_timeout": 5, "rate_limit_dir": str(tmp_path / "rl")}
        refused = run_module("gear_wave", args)
        assert refused.get("failed") and "h1 wakes by wol but has no MAC address" in refused["msg"]
        got = run_module("gear_wave", dict(args, observed=observed))
        assert not got.get("failed"), got
        assert got["ok"] == ["h1"] and got["hosts"]["h1"]["method"] == "wol"
        packet, _ = udp.recvfrom(1024)
        assert packet == b"\xff" * 6 + bytes.fromhex(MAC.replace(":", "")) * 16
        # one MAC written as text (fleetnap_wol_macs: "02:..."), as the option itself takes it
        observed["h1"]["wol_macs"] = MAC
        got = run_module("gear_wave", dict(args, observed=observed))
        assert got["ok"] == ["h1"], got
        packet, _ = udp.recvfrom(1024)
        assert packet.endswith(bytes.fromhex(MAC.replace(":", "")))
    finally:
        srv.stop.set()
        srv.join()
        srv.sock.close()
        udp.close()


def test_the_wave_writes_its_batch_into_the_journal_itself(tmp_path):
    """gear_wave's ``journal`` (issue 35: the wave records its batch): a wake verified by the
    host's greeting is ``on`` in the state file, a host put back in service beside it (a result of
    the batch given with it) too, and with the lock file both results are in the running shift's
    actions, exactly as gear_state after_up writes them (the same call made the other way, on a
    copy, gives the same file but for the times). A state file that is not JSON is refused before
    any packet is sent; a wave with no host left (every drain hook failed, or only a host put back
    to wake) still writes its batch's results. Real sockets on loopback, a real lock."""
    import json
    srv = GreetingServer()
    srv.answering.set()
    srv.start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {"h1": {"state": "asleep", "since": "2026-12-01T00:00:00Z"},
                                           "h2": {"state": "asleep", "since": "2026-12-01T00:00:00Z"}}}))
    lock = tmp_path / "lock"
    try:
        took = run_module("shift_lock", {"path": str(lock), "pid": os.getpid(), "purpose": "test"})
        assert not took.get("failed"), took
        host = {"name": "h1", "address": "127.0.0.1", "port": srv.port, "up_methods": ["wol"], "wol_macs": [MAC],
                "wol_address": "127.0.0.1", "wol_port": udp.getsockname()[1]}
        back = {"host": "h2", "action": "back", "ok": True, "state": "on", "msg": "woken outside a shift"}
        args = {"action": "up", "hosts": [host], "wol_timeout": 5, "rate_limit_dir": str(tmp_path / "rl"),
                "journal": {"state_file": str(state), "lock_file": str(lock), "batch": ["h1", "h2"],
                            "results": [back]}}
        bad = tmp_path / "bad.json"
        bad.write_text("{hosts")
        refused = run_module("gear_wave", dict(args, journal=dict(args["journal"], state_file=str(bad))))
        assert refused.get("failed") and "bad.json" in refused["msg"] and "hosts" not in refused
        try:
            udp.recvfrom(1024)
            raise AssertionError("a packet was sent before the journal was checked")
        except socket.timeout:
            pass
        copy = tmp_path / "copy.json"
        copy.write_text(state.read_text())
        got = run_module("gear_wave", args)
        assert not got.get("failed"), got
        assert got["ok"] == ["h1"] and got["journal"] == {"written": True, "updated": {"h1": "on", "h2": "on"}}
        doc = json.loads(state.read_text())
        assert doc["hosts"]["h1"]["state"] == "on" and doc["hosts"]["h2"]["state"] == "on"
        acts = doc["in_progress"]["actions"]
        assert sorted((a["host"], a["action"], a["ok"]) for a in acts) == [("h1", "up", True), ("h2", "back", True)]
        same = run_module("gear_state", {"path": str(copy), "event": "after_up", "hosts": ["h1", "h2"],
                                         "results": [got["hosts"]["h1"], back], "lock_file": str(lock)})
        assert same["updated"] == got["journal"]["updated"]
        other = json.loads(copy.read_text())
        assert other["in_progress"]["actions"] == acts
        assert dict((n, h["state"]) for n, h in other["hosts"].items()) == {"h1": "on", "h2": "on"}
        # a down wave whose every host's drain hook failed: no host to park, the failure journaled
        drained = {"host": "h3", "action": "down", "ok": False, "state": "on", "msg": "drain hook failed"}
        got = run_module("gear_wave", {"action": "down", "hosts": [], "rate_limit_dir": str(tmp_path / "rl"),
                                       "journal": {"state_file": str(state), "lock_file": str(lock),
                                                   "batch": ["h3"], "results": [drained]}})
        assert not got.get("failed") and got["journal"]["written"] is True, got
        doc = json.loads(state.read_text())
        assert doc["hosts"]["h3"]["state"] == "on" and doc["in_progress"]["failed"]
        # a wake wave with no host to wake, only one put back (woken outside the shift; the role's
        # wake_waves gives its result): the wave writes it into the journal and sends no packet
        doc["hosts"]["h4"] = {"state": "asleep", "since": "2026-12-01T00:00:00Z"}
        state.write_text(json.dumps(doc))
        udp.setblocking(False)
        while True:                 # the packets of the waves above (sent more than once) are read first
            try:
                udp.recvfrom(1024)
            except BlockingIOError:
                break
        udp.settimeout(0.5)
        put_back = {"host": "h4", "action": "back", "ok": True, "state": "on", "msg": "woken outside a shift"}
        got = run_module("gear_wave", {"action": "up", "hosts": [], "rate_limit_dir": str(tmp_path / "rl"),
                                       "journal": {"state_file": str(state), "lock_file": str(lock),
                                                   "batch": ["h4"], "results": [put_back]}})
        assert not got.get("failed") and got["journal"] == {"written": True, "updated": {"h4": "on"}}, got
        doc = json.loads(state.read_text())
        assert doc["hosts"]["h4"]["state"] == "on"
        assert ("h4", "back", True) in [(a["host"], a["action"], a["ok"]) for a in doc["in_progress"]["actions"]]
        try:
            udp.recvfrom(1024)
            raise AssertionError("a packet was sent for a wave with no host to wake")
        except socket.timeout:
            pass
    finally:
        srv.stop.set()
        srv.join()
        srv.sock.close()
        udp.close()
