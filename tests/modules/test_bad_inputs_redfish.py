"""redfish_power's bad inputs (tests/badinput.py runs the table): refused with a message naming the
option, no traceback, within the bound, and nothing sent to any BMC.

Every case points at 127.0.0.1:9 (nothing listens there) with its rate-limit directory inside the
case's own directory: the client creates that directory before its first request, so a case
whose directory is unchanged afterwards was refused before any network I/O.
"""

from __future__ import annotations

import pytest

from badinput import INF, NAN, assert_refused, case_params, run_table

RF = {"bmc_address": "127.0.0.1", "bmc_port": 9, "bmc_user": "admin", "bmc_password": "Fn7-rf-bad-8c3d",
      "state": "status", "rate_limit_dir": "{tmp}/rl", "retries": 0, "request_timeout": 1}
REDFISH_POWER = [
    ("timeout nan", dict(RF, timeout=NAN), "option timeout: must be a finite number"),
    ("timeout inf", dict(RF, timeout=INF), "option timeout: must be a finite number"),
    ("timeout -inf", dict(RF, timeout="-inf"), "option timeout: must be a finite number"),
    ("timeout 0", dict(RF, timeout=0), "option timeout: must be > 0"),
    ("timeout negative", dict(RF, timeout=-5), "option timeout: must be > 0"),
    ("timeout two hours", dict(RF, timeout=7200), "option timeout: must be > 0 and <= 3600"),
    ("timeout text", dict(RF, timeout="soon"), "timeout"),
    ("poll_interval nan", dict(RF, poll_interval=NAN), "option poll_interval: must be a finite number"),
    ("poll_interval 0", dict(RF, poll_interval=0), "option poll_interval: must be >= 0.1"),
    ("request_timeout inf", dict(RF, request_timeout=INF), "option request_timeout: must be a finite number"),
    ("request_timeout 0", dict(RF, request_timeout=0), "option request_timeout: must be > 0"),
    ("request_timeout an hour", dict(RF, request_timeout=3600), "option request_timeout: must be > 0 and <= 300"),
    ("retries negative", dict(RF, retries=-1), "option retries: must be >= 0 and <= 10"),
    ("retries 1000", dict(RF, retries=1000), "option retries: must be >= 0 and <= 10"),
    ("min_interval nan", dict(RF, min_interval=NAN), "option min_interval: must be a finite number"),
    ("min_interval negative", dict(RF, min_interval=-0.5), "option min_interval: must be >= 0"),
    ("bmc_port 0", dict(RF, bmc_port=0), "option bmc_port: must be >= 1 and <= 65535"),
    ("bmc_port 70000", dict(RF, bmc_port=70000), "option bmc_port: must be >= 1 and <= 65535"),
    ("bmc_port text", dict(RF, bmc_port="https"), "bmc_port"),
    ("bmc_address with a space", dict(RF, bmc_address="bmc 1"), "option bmc_address: must be a host name or address"),
    ("bmc_address leading dash", dict(RF, bmc_address="-oProxyCommand=x"), "option bmc_address: must be a host name"),
    ("bmc_address a URL", dict(RF, bmc_address="https://bmc1/redfish"), "option bmc_address: must be a host name"),
    ("bmc_address empty", dict(RF, bmc_address=""), "option bmc_address: must be a host name or address"),
    ("bmc_user empty", dict(RF, bmc_user=""), "option bmc_user: must be a user name"),
    ("bmc_user with a newline", dict(RF, bmc_user="admin\nroot"), "option bmc_user: must be a user name"),
    ("system_id with a slash", dict(RF, system_id="1/../../Managers"), "option system_id: must be a Redfish system Id"),
    ("system_id with a space", dict(RF, system_id="System 1"), "option system_id: must be a Redfish system Id"),
    ("state unknown", dict(RF, state="reboot"), "state"),
    ("boot_once unknown", dict(RF, boot_once="floppy"), "boot_once"),
    ("validate_certs not a boolean", dict(RF, validate_certs="maybe"), "validate_certs"),
    ("read_power not a boolean", dict(RF, read_power="sometimes"), "read_power"),
    ("ca_path relative", dict(RF, ca_path="certs/bmc-ca.pem"), "option ca_path: must be an absolute path"),
    ("ca_path with ..", dict(RF, ca_path="{tmp}/../ca.pem"), "option ca_path: '..' is not allowed"),
    ("ca_path missing", dict(RF, ca_path="{tmp}/no-such-ca.pem"), "option ca_path: {tmp}/no-such-ca.pem does not exist"),
    ("ca_path a directory", dict(RF, ca_path="{tmp}"), "option ca_path: {tmp} is not a file"),
    ("ca_path not PEM", dict(RF, ca_path="{tmp}/marker"), "ca_path {tmp}/marker cannot be used as a CA bundle"),
    ("rate_limit_dir relative", dict(RF, rate_limit_dir="cache/bmc"), "option rate_limit_dir: must be an absolute path"),
    ("password missing", {k: v for k, v in RF.items() if k != "bmc_password"}, "no password for BMC 127.0.0.1:9"),
    ("password empty", dict(RF, bmc_password=""), "no password for BMC 127.0.0.1:9"),
]

TABLES = {"redfish_power": REDFISH_POWER}
CASES = case_params(TABLES)


def test_the_table_has_at_least_15_cases():
    assert len(REDFISH_POWER) >= 15


@pytest.mark.parametrize("module,index,words", CASES)
def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
    table_run = run_table(module, TABLES[module], tmp_path_factory)
    out = table_run["cases"][index]
    assert_refused(table_run, index, words.replace("{tmp}", out["dir"]))
    assert "MODULE FAILURE" not in str(out["result"].get("msg", "")), out["result"]
    assert "Fn7-rf-bad-8c3d" not in repr(out["result"])
