"""gear_wave checks every host's fields before it resolves any Wake-on-LAN address: a name there
asks DNS, which is a read of the world; a wrong field of a later host is refused first, by name."""

from __future__ import annotations

from conftest import run_module

HOST = {"name": "h1", "address": "127.0.0.1", "port": 9, "wol_macs": ["02:fe:00:00:00:01"]}


def test_a_later_hosts_bad_field_is_refused_before_an_address_is_resolved(tmp_path):
    hosts = [dict(HOST, wol_address="no-such-host.invalid"),
             dict(HOST, name="h2", up_methods=["carrier-pigeon"], wol_address="127.0.0.1")]
    res = run_module("gear_wave", {"action": "up", "hosts": hosts, "wol_timeout": 0.3,
                                   "rate_limit_dir": str(tmp_path / "rl")})
    assert res.get("failed"), res
    assert "option hosts[1].up_methods: must name one or two of wol, ipmi, redfish" in res["msg"], res["msg"]
    # and alone, the name that does not resolve is refused, naming its option
    res = run_module("gear_wave", {"action": "up", "hosts": hosts[:1], "wol_timeout": 0.3,
                                   "rate_limit_dir": str(tmp_path / "rl")})
    assert res.get("failed") and "option hosts[0].wol_address: cannot resolve" in res["msg"], res
