# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet's host entries as the controller-side modules take them (gear_observe, gear_wave):
their checks, and each one's BMC client. Standard library only."""

from __future__ import annotations

from ansible.module_utils.fleetnap import powerrecord
from ansible.module_utils.fleetnap.ipmi import Bmc
from ansible.module_utils.fleetnap.redfish import Redfish, RedfishError
from ansible.module_utils.fleetnap.validate import ParamError, name, number

ADDRESS = name(r"^[A-Za-z0-9_.:%-]{1,253}$", "a host name or address")
HOST_CHECKS = {
    "name": name(r"^[^\x00-\x1f]{1,255}$", "an inventory name of 1-255 printable characters"),
    "address": ADDRESS,
    "port": number(lo=1, hi=65535, integer=True),
    "bmc_address": ADDRESS,
    "bmc_port": number(lo=1, hi=65535, integer=True),
    "bmc_user": name(r"^[^\x00-\x1f]{1,64}$", "a user name of 1-64 printable characters"),
    "cipher_suite": number(lo=0, hi=17, integer=True),
}
MAX_HOSTS = 100000

# The per-host options every controller-side fleet module takes (argument_spec suboptions).
_HOST_OPTIONS = dict(
    name=dict(type="str", required=True),
    address=dict(type="str", required=True),
    port=dict(type="int", default=22),
    bmc_address=dict(type="str"),
    bmc_port=dict(type="int", default=623),
    bmc_user=dict(type="str"),
    bmc_password=dict(type="str", no_log=True),
    cipher_suite=dict(type="int", default=3),
    # How the BMC is spoken to: IPMI over LAN (ipmitool) or Redfish (HTTPS, redfish.py).
    bmc_protocol=dict(type="str", default="ipmi", choices=["ipmi", "redfish"]),
    bmc_ca_path=dict(type="path"),
    bmc_validate_certs=dict(type="bool", default=True),
    # What the caller knows of the host from its inventory (gear group, rack, methods, power
    # figures): gear_observe returns it with the observation, gear_wave ignores it.
    inventory=dict(type="dict", default={}),
    # The host's power record as the inventory has it (fleetnap_* variables): read by
    # powerrecord.read, it gives the BMC options above and the inventory facts (take_records).
    record=dict(type="dict", options=powerrecord.record_options()),
)


def host_options(**extra):
    """A fresh copy of the per-host suboptions, with a module's own ``extra`` ones."""
    out = dict((k, dict(v)) for k, v in _HOST_OPTIONS.items())
    out.update(extra)
    return out


def take_records(hosts, own=None):
    """Each entry's ``record`` (the host's fleetnap_* variables) read once by powerrecord.read: its
    BMC fields become the entry's BMC options, the rest its inventory facts, under the caller's own
    inventory keys (a shift's methods override the host's). ``own``: the module's own per-host
    options (name -> default) the record also fills where the entry left them at their default.
    A record beside BMC options given one by one is refused: one place says where a host's BMC
    is. Raises ParamError naming hosts[i]."""
    for i, h in enumerate(hosts):
        raw = h.pop("record", None)
        if raw is None:
            continue
        where = "hosts[%d].record" % i
        given = [k for k in powerrecord.BMC_KEYS if h.get(k) not in (None, "", _HOST_OPTIONS[k].get("default"))]
        if given:
            raise ParamError("option hosts[%d]: %s given beside record; give the BMC in the record "
                             "(fleetnap_bmc_* variables) or as options, not both" % (i, ", ".join(given)))
        bmc, rest = powerrecord.split(powerrecord.read(raw, where))
        h.update(bmc)
        for key, default in (own or {}).items():
            if key in rest and h.get(key) == default:
                h[key] = rest[key]
        h["inventory"] = dict(rest, **(h.get("inventory") or {}))


def check_hosts(hosts, extra=None):
    """Every entry's fields checked as the module's own options are (HOST_CHECKS and ``extra``,
    field -> check(option_name, value)); names unique. Raises ParamError naming hosts[i].field."""
    if len(hosts) > MAX_HOSTS:
        raise ParamError("option hosts: at most %d hosts, got %d" % (MAX_HOSTS, len(hosts)))
    checks = dict(HOST_CHECKS, **(extra or {}))
    seen = set()
    for i, h in enumerate(hosts):
        where = "hosts[%d]" % i
        for field, check in checks.items():
            if h.get(field) not in (None, "") or field in ("name", "address"):
                check("%s.%s" % (where, field), h.get(field))
        if len(repr(h.get("inventory") or {})) > 65536:
            raise ParamError("option %s.inventory: at most 64 KiB of inventory facts per host" % where)
        if h["name"] in seen:
            raise ParamError("option %s.name: %r is listed twice" % (where, h["name"]))
        seen.add(h["name"])


class Unusable(object):
    """A BMC the inventory names without the credentials to ask it: every command raises with the
    reason (an observation of that host, not a failure of the whole call)."""

    def __init__(self, reason, target=""):
        self.reason = reason
        self.target = target

    def status(self):
        raise ValueError(self.reason)

    def power(self, action):
        raise ValueError(self.reason)


def bmc_for(h, runner, ipmitool, guard, min_interval=1.0, retries=2, session_timeout=2, state_dir=None):
    """The host's BMC client (ipmi.Bmc), Unusable when credentials are missing, None without a BMC."""
    if not h.get("bmc_address"):
        return None
    redfish = h.get("bmc_protocol") == "redfish"
    port = h.get("bmc_port") or (443 if redfish else 623)
    if redfish and port == 623:
        port = 443      # the IPMI default of bmc_port, not a choice for HTTPS
    target = "%s:%d" % (h["bmc_address"], port)
    missing = [f for f in ("bmc_user", "bmc_password") if not h.get(f)]
    if missing:
        return Unusable("no %s for BMC %s: give %s, for example the password from the controller's environment "
                        "with lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD')"
                        % (" or ".join(f[4:] for f in missing), target, " and ".join(missing)), target)
    try:
        if redfish:
            return Redfish(h["bmc_address"], port, h["bmc_user"], h["bmc_password"],
                           validate_certs=h.get("bmc_validate_certs", True), ca_path=h.get("bmc_ca_path"),
                           min_interval=min_interval, retries=retries, state_dir=state_dir)
        return Bmc(runner, ipmitool, h["bmc_address"], port, h["bmc_user"], h["bmc_password"],
                   cipher_suite=h.get("cipher_suite", 3), session_timeout=session_timeout, min_interval=min_interval,
                   retries=retries, state_dir=state_dir, guard=guard)
    except (ValueError, RedfishError) as exc:   # what the client refuses: that host's BMC, not the call
        return Unusable("BMC %s cannot be asked: %s" % (target, exc), target)
