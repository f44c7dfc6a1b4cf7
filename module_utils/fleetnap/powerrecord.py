# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host power record: the ``fleetnap_*`` inventory variables that say how a host's BMC is
reached, how it is woken and what it draws. Read, checked and given its defaults here only; the
controller-side fleet modules (gear_observe, gear_wave) take it as ``hosts[].record`` (the
variables as the inventory has them) and a playbook passes them on without a default of its own.

A variable the record does not know, in the record's name spaces (``fleetnap_bmc_*``,
``fleetnap_wol_*``, ``fleetnap_power_*``), is refused naming it: a misspelt password or MAC
variable would otherwise be a silent default. Standard library only."""

from __future__ import annotations

import os

from ansible.module_utils.fleetnap.validate import ParamError, name, number, path
from ansible.module_utils.fleetnap.wol import WolError, normalize_mac

ENV_PASSWORD = "FLEETNAP_BMC_PASSWORD"
UP_METHODS = ("wol", "ipmi", "redfish")
MAX_MACS = 64
# The name spaces a playbook collects (ansible.builtin.varnames) and the record checks whole.
PREFIXES = ("fleetnap_bmc_", "fleetnap_wol_", "fleetnap_power_")
VARNAMES_PATTERN = r"^fleetnap_(bmc_|wol_|power_|gear_group$|rack$)"

_ADDRESS = name(r"^[A-Za-z0-9_.:%-]{1,253}$", "a host name or address")
_PORT = number(lo=1, hi=65535, integer=True)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")

# (inventory variable, key in a fleet module's host entry, default). The first eight are the
# host's BMC options; the others ride with the observation (gear_observe's inventory facts).
FIELDS = (
    ("fleetnap_bmc_address", "bmc_address", ""),
    ("fleetnap_bmc_port", "bmc_port", 623),
    ("fleetnap_bmc_user", "bmc_user", ""),
    ("fleetnap_bmc_password", "bmc_password", ""),      # "" -> FLEETNAP_BMC_PASSWORD on the controller
    ("fleetnap_bmc_cipher_suite", "cipher_suite", 3),
    ("fleetnap_bmc_protocol", "bmc_protocol", "ipmi"),
    ("fleetnap_bmc_ca_path", "bmc_ca_path", None),
    ("fleetnap_bmc_validate_certs", "bmc_validate_certs", True),
    ("fleetnap_bmc_boot_once", "boot_once", True),
    ("fleetnap_bmc_boot_once_required", "boot_once_required", False),
    ("fleetnap_bmc_event_log", "event_log", True),
    ("fleetnap_wol_macs", "wol_macs", ()),
    ("fleetnap_wol_address", "wol_address", "255.255.255.255"),
    ("fleetnap_wol_port", "wol_port", 9),
    ("fleetnap_power_methods", "up_methods", ("wol",)),
    ("fleetnap_power_w", "power_w", None),
    ("fleetnap_gear_group", "group", None),
    ("fleetnap_rack", "rack", ""),
)
BMC_KEYS = ("bmc_address", "bmc_port", "bmc_user", "bmc_password", "cipher_suite", "bmc_protocol",
            "bmc_ca_path", "bmc_validate_certs")
KNOWN = dict((var, (key, default)) for var, key, default in FIELDS)


def record_options():
    """The record as a module option's suboptions: every variable ``raw`` (checked by read, one
    place), the password ``no_log`` (AnsibleModule masks it in every result and log line, also
    when the call fails before read runs), a name not listed refused by AnsibleModule."""
    return dict((var, dict(type="str", no_log=True) if key == "bmc_password" else dict(type="raw"))
                for var, key, _d in FIELDS)


def _bool(where, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ParamError("option %s: must be true or false, got %r" % (where, value))


def _int(check):
    def one(where, value):
        return int(check(where, value))
    return one


def _text(limit):
    def one(where, value):
        if not isinstance(value, str) or len(value) > limit or any(ord(c) < 32 for c in value):
            raise ParamError("option %s: must be text of at most %d printable characters, got %r" % (where, limit, value))
        return value
    return one


def _secret(where, value):
    """A password: text of at most 256 characters (any, as the bmc_password options take it); a
    refusal never repeats it."""
    if not isinstance(value, str) or len(value) > 256:
        raise ParamError("option %s: must be text of at most 256 characters (the value is not shown)" % where)
    return value


def _list_of_text(where, value):
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]    # as a list option takes text
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ParamError("option %s: must be a list of text, got %r" % (where, value))
    return list(value)


def _macs(where, value):
    macs = _list_of_text(where, value)
    if len(macs) > MAX_MACS:
        raise ParamError("option %s: at most %d MACs per host, got %d" % (where, MAX_MACS, len(macs)))
    out = []
    for i, mac in enumerate(macs):
        try:
            out.append(normalize_mac(mac))
        except WolError as exc:
            raise ParamError("option %s[%d]: %s" % (where, i, exc))
    return out


def _methods(where, value):
    methods = _list_of_text(where, value)
    if not 1 <= len(methods) <= 2 or len(set(methods)) != len(methods) or any(m not in UP_METHODS for m in methods):
        raise ParamError("option %s: must name one or two of wol, ipmi, redfish, each once; got %r" % (where, methods))
    return methods


def _protocol(where, value):
    if value not in ("ipmi", "redfish"):
        raise ParamError("option %s: must be ipmi or redfish, got %r" % (where, value))
    return value


def _ca_path(where, value):
    return path()(where, value)


def _power_w(where, value):
    if not isinstance(value, dict):
        raise ParamError("option %s: must be watts when on, asleep and off ({on: W, asleep: W, off: W}), got %r"
                         % (where, value))
    return dict(value)      # the figures themselves: energy.check_figures, where they are used


def _group(where, value):
    return _int(number(lo=1, hi=10 ** 6, integer=True))(where, value)


CHECKS = {
    "bmc_address": _ADDRESS, "bmc_port": _int(_PORT), "bmc_user": _text(64), "bmc_password": _secret,
    "cipher_suite": _int(number(lo=0, hi=17, integer=True)), "bmc_protocol": _protocol,
    "bmc_ca_path": _ca_path, "bmc_validate_certs": _bool, "boot_once": _bool, "boot_once_required": _bool,
    "event_log": _bool, "wol_macs": _macs, "wol_address": _ADDRESS, "wol_port": _int(_PORT),
    "up_methods": _methods, "power_w": _power_w, "group": _group, "rack": _text(64),
}


def read(raw, where="record", env=None):
    """The record ``raw`` (inventory variable -> value, as the inventory has them) checked, with
    every default filled in: key -> value for FIELDS' keys. ParamError names ``where`` and the
    variable. A missing or empty value takes the default (the password: FLEETNAP_BMC_PASSWORD in
    ``env``, the controller's environment)."""
    env = os.environ if env is None else env
    if not isinstance(raw, dict):
        raise ParamError("option %s: must be the host's fleetnap_* variables (a dict), got %r" % (where, type(raw).__name__))
    for var in sorted(raw, key=str):
        if not isinstance(var, str) or var not in KNOWN:
            if isinstance(var, str) and var.startswith(PREFIXES):
                raise ParamError("option %s: %s is not a power record variable (known: %s)"
                                 % (where, var, ", ".join(v for v, _k, _d in FIELDS)))
            raise ParamError("option %s: %r is not a power record variable" % (where, var))
    out = {}
    for var, key, default in FIELDS:
        value = raw.get(var)
        if value is None or value == "" or (value == [] and key != "up_methods"):
            value = default
            if key == "bmc_password" and not value:
                value = env.get(ENV_PASSWORD, "")
        if value is None or value == "":
            out[key] = value
            continue
        out[key] = CHECKS[key]("%s.%s" % (where, var), list(value) if isinstance(value, tuple) else value)
    # Whether the methods fit the MACs and the BMC is the wake's question (gear_wave), asked with the
    # methods in force then: a shift may override fleetnap_power_methods for all its hosts.
    return out


def split(record):
    """(the host's BMC options, everything else) of a read record."""
    return (dict((k, record[k]) for k in BMC_KEYS),
            dict((k, v) for k, v in record.items() if k not in BMC_KEYS))
