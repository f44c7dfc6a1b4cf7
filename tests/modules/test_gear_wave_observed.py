"""gear_wave's ``observed`` option (issue 35): a gear shift passes each host's probe entry as it is
and the observation gear_observe returned; the wake fields come from that observation (the power
record read once). Real sockets on loopback: the magic packet must reach the port and carry the
MAC the observation names, and the host entry alone (no MAC) would be refused."""

from __future__ import annotations

import socket

from conftest import run_module
from test_controller_modules import GreetingServer

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
