# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: power_records
short_description: The power records of many hosts, read on the controller in one call
description:
  - Returns, for each host named, what a fleet module needs to reach it and power it (M(fleetnap.power.gear_observe),
    M(fleetnap.power.gear_wave)), taken from the inventory on the controller - its name, the address and SSH port
    Ansible uses for it (C(ansible_host), C(ansible_port)), its power record (every variable whose name matches
    C(^fleetnap_(bmc_|wol_|power_|gear_group$|rack$)), as the inventory has them) and, with O(inventory), facts of
    its own chosen by the caller.
  - A gear shift observes and plans in one play whose tasks run once, on the controller; without this lookup every
    target would run a task of its own only to hand its variables over.
  - The values are not checked here; the module that takes them checks them whole (module_utils C(powerrecord)) and
    refuses an unknown name in the record's name spaces, naming it. The BMC password is among them when the
    inventory has it (a vault variable); give the result only to a module option that is C(no_log), never to a
    debug task or a fact that is printed.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
options:
  _terms:
    description: Inventory host names (for a play's hosts, C(ansible_play_hosts_all)).
    required: true
    type: list
    elements: str
  inventory:
    description:
      - Facts of each host's own, each a key and a list of variable names. A fact's value is that of the first
        variable the host has, else the O(defaults) value of its key, else the fact is left out.
      - For example the down method a host's inventory sets with C(gear_shift_down_method) or C(fleetnap_down_method).
    type: dict
    default: {}
  defaults:
    description:
      - The value of an O(inventory) fact a host sets none of its variables for (an empty value is left out), and of
        a O(nest) key whose variable the host does not have.
    type: dict
    default: {}
  nest:
    description:
      - Entry keys, each the name of a host variable (for example what a task registered on the host) whose value
        the entry gets under that key when the host has the variable, else the O(defaults) value of the key, else
        nothing.
      - For example what a host's own suspend command said (key C(said), variable C(__gear_member_suspend)), beside the record
        that lets a module park it by its BMC, so that no fact ever holds the record (and its password) itself and
        no task runs on every host only to hand a value over.
      - A key of the entry's own (C(name), C(address), C(port), C(record), C(inventory)) is refused, and so is a
        key given twice (here and in O(each) or O(stamp)).
    type: dict
    default: {}
  each:
    description:
      - Entry keys, each a mapping of host name to value (for example a plan's down method per host); an entry gets
        its host's value under that key, a host the mapping does not name nothing.
    type: dict
    default: {}
  stamp:
    description:
      - An entry key under which every entry gets the same wall-clock time (Unix seconds), taken when the lookup
        runs; in a task's arguments that is when the task starts on the controller (for example just after the
        task before told a batch's hosts to suspend).
    type: str
    default: ""
  fields:
    description:
      - Only these keys of each entry besides C(name) (for example V([address, port]) - how to reach the host, with
        no power record and so no secret), for a module that needs no more; empty, the whole entry.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Observe every host of the play at once, from one task on the controller
  fleetnap.power.gear_observe:
    hosts: "{{ query('fleetnap.power.power_records', *ansible_play_hosts_all,
                     inventory={'down_method': ['gear_shift_down_method', 'fleetnap_down_method']},
                     defaults={'down_method': 'auto'}) }}"
  delegate_to: localhost
  run_once: true

- name: Park a batch, each host with what its own suspend said (registered per host) and the plan's down method
  fleetnap.power.gear_wave:
    action: down
    hosts: "{{ query('fleetnap.power.power_records', *ansible_play_batch, nest={'said': 'suspend_said'},
                     each={'down_method': plan.down_methods}, stamp='since') }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_list:
  description: One entry per host named, in their order.
  type: list
  elements: dict
  contains:
    name:
      description: The inventory name.
      type: str
    address:
      description: C(ansible_host), else the name.
      type: str
    port:
      description: C(ansible_port), else 22.
      type: int
    record:
      description: The host's C(fleetnap_bmc_*), C(fleetnap_wol_*), C(fleetnap_power_*), C(fleetnap_gear_group) and
        C(fleetnap_rack) variables, as the inventory has them.
      type: dict
    inventory:
      description: The O(inventory) facts the host has (its own or the default).
      type: dict
"""

import re
import time

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# The record's name spaces; module_utils powerrecord.VARNAMES_PATTERN is the same (a unit test says so).
RECORD_PATTERN = re.compile(r"^fleetnap_(bmc_|wol_|power_|gear_group$|rack$)")
MAX_HOSTS = 100000


def _empty(value):
    return value is None or (isinstance(value, (str, list, tuple, dict)) and len(value) == 0)


OWN_KEYS = ("name", "address", "port", "record", "inventory")


def _keys(option, value, check):
    """``value`` (a dict of entry key -> ``check``ed value) or AnsibleLookupError naming ``option``."""
    if not isinstance(value, dict):
        raise AnsibleLookupError("power_records: %s must be a dictionary of entry keys" % option)
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise AnsibleLookupError("power_records: %s: an entry key must be a non-empty string, got %r" % (option, key))
        if key in OWN_KEYS:
            raise AnsibleLookupError("power_records: %s.%s is a key of the entry's own" % (option, key))
        if not check(item):
            raise AnsibleLookupError("power_records: %s.%s must be %s" % (option, key, check.__doc__))
    return value


def _var_name(item):
    """a variable name"""
    return isinstance(item, str) and len(item) > 0


def _mapping(item):
    """a mapping of host name to value"""
    return isinstance(item, dict)


def records(names, hostvars, inventory=None, defaults=None, nest=None, each=None, stamp="", fields=None,
            now=time.time):
    """The entries for ``names`` from ``hostvars`` (a mapping of host name to that host's variables,
    as Ansible's HostVars). AnsibleLookupError names what is wrong."""
    inventory = {} if inventory is None else inventory
    defaults = {} if defaults is None else defaults
    nest = _keys("nest", {} if nest is None else nest, _var_name)
    each = _keys("each", {} if each is None else each, _mapping)
    fields = [] if fields is None else fields
    if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) and f for f in fields):
        raise AnsibleLookupError("power_records: fields must be a list of entry keys")
    if not isinstance(inventory, dict) or not isinstance(defaults, dict):
        raise AnsibleLookupError("power_records: inventory and defaults must be dictionaries")
    if not isinstance(stamp, str) or stamp in OWN_KEYS:
        raise AnsibleLookupError("power_records: stamp must be an entry key (not one of the entry's own)")
    given = list(nest) + list(each) + ([stamp] if stamp else [])
    twice = sorted(set(k for k in given if given.count(k) > 1))
    if twice:
        raise AnsibleLookupError("power_records: %s given twice (nest, each, stamp)" % ", ".join(twice))
    for key, candidates in inventory.items():
        if not isinstance(key, str) or not isinstance(candidates, (list, tuple)) or \
                not all(isinstance(c, str) for c in candidates):
            raise AnsibleLookupError("power_records: inventory.%s must be a list of variable names" % key)
    if len(names) > MAX_HOSTS:
        raise AnsibleLookupError("power_records: more than %d hosts" % MAX_HOSTS)
    at = now() if stamp else None
    out = []
    for name in names:
        if not isinstance(name, str) or not name:
            raise AnsibleLookupError("power_records: a host name must be a non-empty string, got %r" % (name,))
        try:
            hv = hostvars[name]
        except KeyError:
            raise AnsibleLookupError("power_records: %s is not a host of the inventory" % name)
        entry = {"name": name, "address": hv["ansible_host"] if "ansible_host" in hv else name,
                 "port": hv["ansible_port"] if "ansible_port" in hv else 22,
                 "record": dict((var, hv[var]) for var in hv if RECORD_PATTERN.match(var))}
        facts = {}
        for key, candidates in inventory.items():
            value = next((hv[c] for c in candidates if c in hv), None)
            if _empty(value):
                value = defaults.get(key)
            if not _empty(value):
                facts[key] = value
        entry["inventory"] = facts
        for key, var in nest.items():
            if var in hv:
                entry[key] = hv[var]
            elif key in defaults:
                entry[key] = defaults[key]
        for key, mapping in each.items():
            if name in mapping:
                entry[key] = mapping[name]
        if stamp:
            entry[stamp] = at
        if fields:
            entry = dict((k, v) for k, v in entry.items() if k == "name" or k in fields)
        out.append(entry)
    return out


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if not variables or "hostvars" not in variables:
            raise AnsibleLookupError("power_records: no host variables to read (run it in a play)")
        return records(list(terms), variables["hostvars"], self.get_option("inventory"), self.get_option("defaults"),
                       self.get_option("nest"), self.get_option("each"), self.get_option("stamp"),
                       self.get_option("fields"))
