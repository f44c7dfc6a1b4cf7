"""The host power record (module_utils/fleetnap/powerrecord.py): one reader of the fleetnap_*
variables, their defaults in one place, every bad value refused naming the variable."""

from __future__ import annotations

import pytest

from ansible.module_utils.fleetnap import powerrecord
from ansible.module_utils.fleetnap.fleethosts import take_records
from ansible.module_utils.fleetnap.validate import ParamError

DEFAULTS = {
    "bmc_address": "", "bmc_port": 623, "bmc_user": "", "bmc_password": "", "cipher_suite": 3,
    "bmc_protocol": "ipmi", "bmc_ca_path": None, "bmc_validate_certs": True, "boot_once": True,
    "boot_once_required": False, "event_log": True, "wol_macs": [], "wol_address": "255.255.255.255",
    "wol_port": 9, "up_methods": ["wol"], "power_w": None, "group": None, "rack": "",
}


def test_an_empty_record_is_every_default():
    assert powerrecord.read({}, env={}) == DEFAULTS
    # empty values are the default too (an inventory that writes the variable and leaves it blank)
    assert powerrecord.read({"fleetnap_bmc_address": "", "fleetnap_wol_macs": [], "fleetnap_bmc_port": None},
                            env={}) == DEFAULTS


def test_a_full_record_as_an_ini_or_yaml_inventory_gives_it():
    rec = powerrecord.read({
        "fleetnap_bmc_address": "10.0.1.11", "fleetnap_bmc_port": "6230", "fleetnap_bmc_user": "admin",
        "fleetnap_bmc_password": "s3cret", "fleetnap_bmc_cipher_suite": 17, "fleetnap_bmc_protocol": "redfish",
        "fleetnap_bmc_ca_path": "/etc/ssl/bmc.pem", "fleetnap_bmc_validate_certs": "no",
        "fleetnap_bmc_boot_once": False, "fleetnap_bmc_boot_once_required": "yes", "fleetnap_bmc_event_log": "false",
        "fleetnap_wol_macs": "52-54-00-12-34-01, 52:54:00:12:34:02", "fleetnap_wol_address": "10.0.0.255",
        "fleetnap_wol_port": "7", "fleetnap_power_methods": ["wol", "redfish"],
        "fleetnap_power_w": {"on": 200, "asleep": 5, "off": 2}, "fleetnap_gear_group": "2", "fleetnap_rack": "r1",
    }, env={"FLEETNAP_BMC_PASSWORD": "not this one"})
    assert rec == {
        "bmc_address": "10.0.1.11", "bmc_port": 6230, "bmc_user": "admin", "bmc_password": "s3cret",
        "cipher_suite": 17, "bmc_protocol": "redfish", "bmc_ca_path": "/etc/ssl/bmc.pem",
        "bmc_validate_certs": False, "boot_once": False, "boot_once_required": True, "event_log": False,
        "wol_macs": ["52:54:00:12:34:01", "52:54:00:12:34:02"], "wol_address": "10.0.0.255", "wol_port": 7,
        "up_methods": ["wol", "redfish"], "power_w": {"on": 200, "asleep": 5, "off": 2}, "group": 2, "rack": "r1"}
    bmc, rest = powerrecord.split(rec)
    assert sorted(bmc) == sorted(powerrecord.BMC_KEYS) and not set(bmc) & set(rest)
    assert dict(bmc, **rest) == rec


def test_the_password_comes_from_the_controllers_environment_when_the_record_has_none():
    env = {"FLEETNAP_BMC_PASSWORD": "from-env"}
    assert powerrecord.read({}, env=env)["bmc_password"] == "from-env"
    assert powerrecord.read({"fleetnap_bmc_password": ""}, env=env)["bmc_password"] == "from-env"
    assert powerrecord.read({"fleetnap_bmc_password": "vault"}, env=env)["bmc_password"] == "vault"


BAD = [
    ({"fleetnap_bmc_pasword": "x"}, "fleetnap_bmc_pasword is not a power record variable (known: fleetnap_bmc_address"),
    ({"fleetnap_wol_mac": ["52:54:00:12:34:01"]}, "fleetnap_wol_mac is not a power record variable"),
    ({"ansible_host": "h"}, "'ansible_host' is not a power record variable"),
    ({"fleetnap_bmc_address": "10.0.0.1; reboot"}, "record.fleetnap_bmc_address: must be a host name or address"),
    ({"fleetnap_bmc_port": 0}, "record.fleetnap_bmc_port: must be"),
    ({"fleetnap_bmc_port": 70000}, "record.fleetnap_bmc_port: must be"),
    ({"fleetnap_bmc_port": True}, "record.fleetnap_bmc_port: must be a number"),
    ({"fleetnap_bmc_port": "nan"}, "record.fleetnap_bmc_port: must be a finite number"),
    ({"fleetnap_bmc_cipher_suite": 18}, "record.fleetnap_bmc_cipher_suite: must be"),
    ({"fleetnap_bmc_user": "a\nb"}, "record.fleetnap_bmc_user: must be text of at most 64 printable"),
    ({"fleetnap_bmc_password": "pw" * 129}, "fleetnap_bmc_password: must be text of at most 256 characters (the value is not shown)"),
    ({"fleetnap_bmc_password": 1234}, "fleetnap_bmc_password: must be text of at most 256 characters (the value is not shown)"),
    ({"fleetnap_bmc_protocol": "ssh"}, "record.fleetnap_bmc_protocol: must be ipmi or redfish"),
    ({"fleetnap_bmc_ca_path": "certs/bmc.pem"}, "record.fleetnap_bmc_ca_path"),
    ({"fleetnap_bmc_validate_certs": "maybe"}, "record.fleetnap_bmc_validate_certs: must be true or false"),
    ({"fleetnap_bmc_boot_once": 2}, "record.fleetnap_bmc_boot_once: must be true or false"),
    ({"fleetnap_wol_macs": ["52:54:00:12:34"]}, "record.fleetnap_wol_macs[0]:"),
    ({"fleetnap_wol_macs": [1, 2]}, "record.fleetnap_wol_macs: must be a list of text"),
    ({"fleetnap_wol_macs": ["52:54:00:00:00:%02x" % i for i in range(65)]}, "at most 64 MACs per host, got 65"),
    ({"fleetnap_wol_port": 65536}, "record.fleetnap_wol_port: must be"),
    ({"fleetnap_power_methods": ["wol", "wol"]}, "record.fleetnap_power_methods: must name one or two"),
    ({"fleetnap_power_methods": ["pxe"]}, "record.fleetnap_power_methods: must name one or two"),
    ({"fleetnap_power_methods": []}, "record.fleetnap_power_methods: must name one or two"),
    ({"fleetnap_power_w": 300}, "record.fleetnap_power_w: must be watts when on, asleep and off"),
    ({"fleetnap_gear_group": 0}, "record.fleetnap_gear_group: must be"),
    ({"fleetnap_gear_group": 1.5}, "record.fleetnap_gear_group: must be a whole number"),
    ({"fleetnap_rack": ["r1"]}, "record.fleetnap_rack: must be text"),
]


@pytest.mark.parametrize("raw, message", BAD, ids=[str(sorted(r)[0]) + "-%d" % i for i, (r, _m) in enumerate(BAD)])
def test_a_bad_record_is_refused_naming_the_variable(raw, message):
    with pytest.raises(ParamError) as exc:
        powerrecord.read(raw, env={})
    assert message in str(exc.value)


def test_a_record_that_is_not_a_dict_is_refused():
    with pytest.raises(ParamError, match="must be the host's fleetnap_\\* variables"):
        powerrecord.read(["fleetnap_bmc_address"], env={})


def entry(**kw):
    h = {"name": "h1", "address": "10.0.0.1", "port": 22, "bmc_address": None, "bmc_port": 623, "bmc_user": None,
         "bmc_password": None, "cipher_suite": 3, "bmc_protocol": "ipmi", "bmc_ca_path": None,
         "bmc_validate_certs": True, "inventory": {}, "record": None}
    h.update(kw)
    return h


def test_take_records_fills_the_bmc_options_and_the_inventory_under_the_callers_keys(monkeypatch):
    monkeypatch.setenv("FLEETNAP_BMC_PASSWORD", "env-pw")
    hosts = [entry(record={"fleetnap_bmc_address": "10.0.1.1", "fleetnap_bmc_user": "admin",
                           "fleetnap_wol_macs": ["52:54:00:00:00:01"], "fleetnap_power_methods": ["wol", "ipmi"],
                           "fleetnap_gear_group": 1},
                   inventory={"up_methods": ["ipmi"], "down_method": "suspend"}, wol_macs=[], up_methods=["wol"]),
             entry(name="h2")]
    take_records(hosts, own={"wol_macs": [], "up_methods": ["wol"]})
    h1, h2 = hosts
    assert "record" not in h1 and (h1["bmc_address"], h1["bmc_user"], h1["bmc_password"]) == ("10.0.1.1", "admin", "env-pw")
    assert h1["inventory"]["up_methods"] == ["ipmi"]          # the caller's (a shift's methods) win
    assert h1["inventory"]["group"] == 1 and h1["inventory"]["wol_macs"] == ["52:54:00:00:00:01"]
    assert h1["wol_macs"] == ["52:54:00:00:00:01"] and h1["up_methods"] == ["wol", "ipmi"]   # the module's own
    assert h2["bmc_address"] is None and h2["inventory"] == {}  # no record: as given


def test_take_records_refuses_a_bmc_given_twice():
    hosts = [entry(bmc_address="10.0.1.9", record={"fleetnap_bmc_address": "10.0.1.1"})]
    with pytest.raises(ParamError, match=r"option hosts\[0\]: bmc_address given beside record"):
        take_records(hosts)
    with pytest.raises(ParamError, match=r"option hosts\[0\]\.record\.fleetnap_bmc_port"):
        take_records([entry(record={"fleetnap_bmc_port": "x"})])


def test_the_roles_collect_the_record_by_the_readers_own_pattern():
    """The playbooks pass every variable of the record's name spaces (so a misspelt one reaches the
    reader, which refuses it), with the pattern the reader states: no role keeps another list.
    gear_member collects its host's with ansible.builtin.varnames; gear_shift collects every
    target's with the power_records lookup, whose pattern is the reader's (test_power_records)."""
    import re

    from conftest import REPO
    users = {"roles/gear_member/vars/main.yml"}
    lookups = {str(p.relative_to(REPO)) for p in (REPO / "roles").rglob("*.yml")
               if "query('fleetnap.power.power_records'" in p.read_text()}
    assert {"roles/gear_shift/tasks/observe_all.yml", "roles/gear_shift/tasks/prepare.yml",
            "roles/gear_shift/tasks/wake_waves.yml", "roles/gear_shift/tasks/wake.yml",
            "roles/gear_shift/tasks/down.yml"} == lookups
    found = {}
    for path in sorted((REPO / "roles").rglob("*.yml")):
        for m in re.finditer(r"query\('ansible\.builtin\.varnames', '([^']+)'\)", path.read_text()):
            if m.group(1).startswith("^gear_shift_slice_"):
                continue    # the AWX workflow's slice artifacts (workflow_record.yml), not a record's variables
            found[str(path.relative_to(REPO))] = m.group(1)
    assert set(found) == users and set(found.values()) == {powerrecord.VARNAMES_PATTERN}
    names = [var for var, _k, _d in powerrecord.FIELDS] + ["fleetnap_bmc_pasword", "fleetnap_wol_mac"]
    caught = [n for n in names + ["fleetnap_down_method", "fleetnap_gear", "fleetnap_profile"]
              if re.match(powerrecord.VARNAMES_PATTERN, n)]
    assert caught == names     # every record variable and a misspelt one; not the others


def test_a_refused_password_is_never_repeated():
    for bad in ("Fn7-" * 70, 98765432):
        with pytest.raises(ParamError) as exc:
            powerrecord.read({"fleetnap_bmc_password": bad}, env={})
        assert str(bad)[:12] not in str(exc.value) and "(the value is not shown)" in str(exc.value)
