"""The power_records lookup (lookup_plugins/power_records.py): each host's address, port, power
record and chosen inventory facts, read on the controller; checked against its contract with a
real inventory and a real ansible-playbook, and its bad inputs refused naming them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest
from ansible.errors import AnsibleLookupError

from conftest import REPO, VENV_BIN

_spec = importlib.util.spec_from_file_location("power_records", REPO / "lookup_plugins/power_records.py")
power_records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(power_records)


def test_the_record_pattern_is_powerrecords():
    from ansible.module_utils.fleetnap import powerrecord
    assert power_records.RECORD_PATTERN.pattern == powerrecord.VARNAMES_PATTERN


HOSTVARS = {
    "a": {"ansible_host": "10.0.0.1", "ansible_port": 2222, "fleetnap_bmc_address": "10.1.0.1",
          "fleetnap_bmc_password": "s3cret", "fleetnap_wol_macs": ["52:54:00:00:00:01"], "fleetnap_gear_group": 2,
          "fleetnap_rack": "r1", "fleetnap_gear_groupie": 1, "fleetnap_down_method": "soft", "other": 1},
    "b": {"fleetnap_power_methods": ["ipmi"], "gear_shift_down_method": "off", "fleetnap_down_method": "soft"},
    "c": {"gear_shift_up_methods": [], "fleetnap_down_method": ""},
}
INVENTORY = {"down_method": ["gear_shift_down_method", "fleetnap_down_method"], "up_methods": ["gear_shift_up_methods"]}


def test_each_host_its_address_port_record_and_facts_in_order():
    got = power_records.records(["b", "a", "c"], HOSTVARS, INVENTORY, {"down_method": "auto", "up_methods": []})
    assert [e["name"] for e in got] == ["b", "a", "c"]
    b, a, c = got
    assert (a["address"], a["port"]) == ("10.0.0.1", 2222) and (b["address"], b["port"]) == ("b", 22)
    # the record is the name spaces' variables only (a longer gear_group name is not the group)
    assert a["record"] == {"fleetnap_bmc_address": "10.1.0.1", "fleetnap_bmc_password": "s3cret",
                           "fleetnap_wol_macs": ["52:54:00:00:00:01"], "fleetnap_gear_group": 2, "fleetnap_rack": "r1"}
    assert b["record"] == {"fleetnap_power_methods": ["ipmi"]} and c["record"] == {}
    # the first variable a host has wins; an empty one is not a value; an empty default leaves the fact out
    assert a["inventory"] == {"down_method": "soft"}
    assert b["inventory"] == {"down_method": "off"}
    assert c["inventory"] == {"down_method": "auto"}


@pytest.mark.parametrize("names, inventory, defaults, message", [
    (["nope"], {}, {}, "nope is not a host of the inventory"),
    ([""], {}, {}, "a host name must be a non-empty string"),
    ([3], {}, {}, "a host name must be a non-empty string, got 3"),
    (["a"], {"down_method": "fleetnap_down_method"}, {}, "inventory.down_method must be a list of variable names"),
    (["a"], {"down_method": [1]}, {}, "inventory.down_method must be a list of variable names"),
    (["a"], [], {}, "inventory and defaults must be dictionaries"),
    (["a"], {}, "auto", "inventory and defaults must be dictionaries"),
])
def test_bad_inputs_are_refused_naming_them(names, inventory, defaults, message):
    with pytest.raises(AnsibleLookupError, match=message):
        power_records.records(names, HOSTVARS, inventory, defaults)


def test_nest_each_and_stamp_give_each_entry_its_hosts_own_values():
    """What a host's suspend said (a registered result) travels without its record; the lookup
    joins the two, with the plan's per-host value and one time stamp, and no task per host."""
    hostvars = dict(HOSTVARS, a=dict(HOSTVARS["a"], said={"rc": 0, "stdout": "scheduled"}, fallback="off"))
    a, b = power_records.records(["a", "b"], hostvars, nest={"said": "said", "no_s3_fallback": "fallback"},
                                 each={"down_method": {"a": "suspend", "c": "off"}}, stamp="since",
                                 defaults={"no_s3_fallback": "soft"}, now=lambda: 1234.5)
    assert a["said"] == {"rc": 0, "stdout": "scheduled"} and a["no_s3_fallback"] == "off"
    assert a["down_method"] == "suspend" and a["since"] == 1234.5 == b["since"]
    assert a["record"]["fleetnap_bmc_password"] == "s3cret"
    # b has no said (nothing nested, no default), the default fallback, and no down method in the map
    assert "said" not in b and b["no_s3_fallback"] == "soft" and "down_method" not in b
    assert set(power_records.records(["b"], HOSTVARS)[0]) == {"name", "address", "port", "record", "inventory"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(nest="said"), "nest must be a dictionary of entry keys"),
    (dict(nest={"said": ""}), "nest.said must be a variable name"),
    (dict(nest={"said": 3}), "nest.said must be a variable name"),
    (dict(nest={"": "said"}), "nest: an entry key must be a non-empty string"),
    (dict(nest={"address": "said"}), "nest.address is a key of the entry's own"),
    (dict(each={"down_method": ["a"]}), "each.down_method must be a mapping of host name to value"),
    (dict(each=["down_method"]), "each must be a dictionary of entry keys"),
    (dict(each={"record": {}}), "each.record is a key of the entry's own"),
    (dict(stamp=3), "stamp must be an entry key"),
    (dict(stamp="name"), "stamp must be an entry key"),
    (dict(nest={"since": "said"}, stamp="since"), "since given twice"),
    (dict(nest={"x": "said"}, each={"x": {}}), "x given twice"),
])
def test_bad_nests_and_maps_are_refused_naming_them(kwargs, message):
    with pytest.raises(AnsibleLookupError, match=message):
        power_records.records(["a"], HOSTVARS, **kwargs)


def test_fields_keep_only_the_keys_asked_for_so_no_record_and_no_password_travels():
    hostvars = dict(HOSTVARS)
    got = power_records.records(["a", "b"], hostvars, fields=["address", "port"])
    assert [sorted(e) for e in got] == [["address", "name", "port"]] * 2
    assert "s3cret" not in json.dumps(got)
    with pytest.raises(AnsibleLookupError, match="fields must be a list of entry keys"):
        power_records.records(["a"], hostvars, fields="address")


def test_through_ansible_with_a_real_inventory(tmp_path):
    """A real inventory (group and host variables, a template) through a real ansible-playbook:
    the values are the hosts' own, templated; localhost's are not asked for."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {
        "vars": {"fleetnap_power_methods": ["wol", "ipmi"], "base": "10.9"},
        "children": {"rack1": {"vars": {"fleetnap_rack": "rack1"},
                               "hosts": {"n1": {"ansible_host": "{{ base }}.0.1", "fleetnap_gear_group": 1},
                                         "n2": {"ansible_port": 2200, "fleetnap_gear_group": 2,
                                                "fleetnap_down_method": "off"}}}}}}))
    play = tmp_path / "play.yml"
    out = tmp_path / "out.json"
    play.write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [{
        "ansible.builtin.set_fact": {"said": {"rc": 0}}, "when": "inventory_hostname == 'n2'"}, {
        "ansible.builtin.copy": {"dest": str(out), "content": "{{ query('fleetnap.power.power_records', "
                                 "*ansible_play_hosts_all, inventory={'down_method': ['fleetnap_down_method']}, "
                                 "defaults={'down_method': 'auto'}, nest={'said': 'said'}) | to_json }}"},
        "delegate_to": "localhost", "run_once": True}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play)], capture_output=True,
                          text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {e["name"]: e for e in json.loads(out.read_text())}
    assert got["n1"] == {"name": "n1", "address": "10.9.0.1", "port": 22, "inventory": {"down_method": "auto"},
                         "record": {"fleetnap_power_methods": ["wol", "ipmi"], "fleetnap_rack": "rack1",
                                    "fleetnap_gear_group": 1}}
    assert got["n2"]["port"] == 2200 and got["n2"]["inventory"] == {"down_method": "off"}
    assert got["n2"]["said"] == {"rc": 0}    # a fact the play set on n2, nested (n1 set none: its entry is above)
