# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One wave of a gear shift as a module call makes it: gear_wave's options and their checks, and
the wave itself with its journal (the acting part of gear_wave, and of gear_shift_prepare when it
goes on to run a shift's waves in its own process). Standard library only; the caller owns the
AnsibleModule (its checks, its scrubbing of BMC passwords, its exit)."""

from __future__ import annotations

import time

from ansible.module_utils.fleetnap import fileio, journal
from ansible.module_utils.fleetnap.fleethosts import bmc_for, check_hosts
from ansible.module_utils.fleetnap.ipmi import run_local
from ansible.module_utils.fleetnap.observe import compile_greeting
from ansible.module_utils.fleetnap.validate import ParamError, name, number, path
from ansible.module_utils.fleetnap.wave import Probe, Wave, allow_open_files
from ansible.module_utils.fleetnap.wol import WolError, build_packet, normalize_mac, resolve, send_packets


def resend_period(opt, value):
    """0 (the magic packets sent once) or 1 s to an hour between two sends: never a storm."""
    value = number(lo=0, hi=3600)(opt, value)
    if 0 < value < 1:
        raise ParamError("option %s: must be 0 (sent once) or at least 1 s, got %s" % (opt, value))
    return value


CHECKS = {
    "wol_timeout": number(lo=0, lo_open=True, hi=3600),
    "ipmi_timeout": number(lo=0, lo_open=True, hi=3600),
    "down_timeout": number(lo=0, lo_open=True, hi=3600),
    "silent_for": number(lo=0, hi=600),
    "probe_timeout": number(lo=0, lo_open=True, hi=60),
    "connect_timeout": number(lo=0, lo_open=True, hi=60),
    "interval": number(lo=0.01, hi=60),
    "wol_repeat": number(lo=1, hi=100, integer=True),
    "wol_resend": resend_period,
    "bmc_concurrency": number(lo=1, hi=256, integer=True),
    "concurrency": number(lo=1, hi=4096, integer=True),
    "min_interval": number(lo=0, hi=600),
    "retries": number(lo=0, hi=10, integer=True),
    "session_timeout": number(lo=1, hi=60, integer=True),
    "rate_limit_dir": path(),
}
WAVE_HOST_CHECKS = {
    "wol_address": name(r"^[A-Za-z0-9_.:%-]{1,253}$", "a broadcast or unicast address"),
    "wol_port": number(lo=1, hi=65535, integer=True),
    "since": number(lo=0, hi=4102444800),
}
UP_METHODS = ("wol", "ipmi", "redfish")
# The wake fields a host's observation may carry (gear_observe passes its inventory facts through),
# each with the type its option has.
OBSERVED_WAKE = (("up_methods", list), ("wol_macs", list), ("wol_address", str), ("wol_port", int),
                 ("boot_once", bool), ("boot_once_required", bool), ("event_log", bool))


def wake_fields_from(observed, hosts):
    """With O(observed): each host's wake fields are its observation's (where it carries them) and
    chassis_was_off is whether its BMC answered off. Shapes checked here; values by
    check_wave_hosts, as if they had been the host's own options."""
    for i, h in enumerate(hosts):
        seen = observed.get(h["name"])
        if not isinstance(seen, dict):
            raise ParamError("option observed: no observation of hosts[%d] (%s)" % (i, h["name"]))
        for key, kind in OBSERVED_WAKE:
            value = seen.get(key)
            if value is None:
                continue
            where = "option observed.%s.%s" % (h["name"], key)
            if kind is list and isinstance(value, str):
                value = [v.strip() for v in value.split(",")]   # as the option takes a list given as text
            if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
                raise ParamError("%s: must be %s, got %r" % (where, {list: "a list", str: "text", int: "an integer",
                                                                     bool: "true or false"}[kind], value))
            if kind is list and not all(isinstance(v, str) for v in value):
                raise ParamError("%s: must be a list of text, got %r" % (where, value))
            h[key] = list(value) if kind is list else value
        bmc = seen.get("bmc")
        if bmc is not None and not isinstance(bmc, str):
            raise ParamError("option observed.%s.bmc: must be the BMC's answer (text), got %r" % (h["name"], bmc))
        h["chassis_was_off"] = bmc == "off"


def journal_of(given):
    """(state file, its document, the running shift) of option journal, read and checked before
    the wave acts: the batch's host names and every result's host (ParamError naming them)."""
    for opt in ("state_file", "lock_file"):
        if given.get(opt) is not None:
            path()("journal." + opt, given[opt])
    for i, n in enumerate(given.get("batch") or []):
        journal.HOST_NAME("journal.batch[%d]" % i, n)
    if len(given.get("batch") or []) > journal.MAX_HOSTS or len(given["results"]) > journal.MAX_HOSTS:
        raise ParamError("option journal: at most %d hosts and results" % journal.MAX_HOSTS)
    for i, r in enumerate(given["results"]):
        if not isinstance(r.get("host"), str):
            raise ParamError("option journal.results[%d]: needs a host name (host), got %r" % (i, r.get("host")))
    return given["state_file"], journal.read(given["state_file"]), journal.shift_of(given.get("lock_file"))


def check_wave_hosts(action, hosts):
    """Fields beyond the common ones: methods, MACs, a BMC where a method needs one."""
    check_hosts(hosts, WAVE_HOST_CHECKS)
    for i, h in enumerate(hosts):
        where = "option hosts[%d]" % i
        methods = h["up_methods"]
        if action == "up":
            if not 1 <= len(methods) <= 2 or len(set(methods)) != len(methods) or \
                    any(m not in UP_METHODS for m in methods):
                raise ParamError("%s.up_methods: must name one or two of wol, ipmi, redfish, each once; got %r"
                                 % (where, methods))
            for m in ("ipmi", "redfish"):
                if m in methods and h["bmc_protocol"] != m:
                    raise ParamError("%s.up_methods: %s wakes by %s but its BMC speaks %s (bmc_protocol)"
                                     % (where, h["name"], m, h["bmc_protocol"]))
            if "wol" in methods and not h["wol_macs"]:
                raise ParamError("%s.wol_macs: %s wakes by wol but has no MAC address (fleetnap_wol_macs)"
                                 % (where, h["name"]))
            if len(h["wol_macs"]) > 64:
                raise ParamError("%s.wol_macs: at most 64 MACs per host, got %d" % (where, len(h["wol_macs"])))
            for j, mac in enumerate(h["wol_macs"]):
                try:
                    normalize_mac(mac)
                except WolError as exc:
                    raise ParamError("%s.wol_macs[%d]: %s" % (where, j, exc))
        if h.get("since") is not None and action != "down":
            raise ParamError("%s.since: only with action=down" % where)
        said = h.get("said")
        # A registered result's flags are real booleans: anything else is refused, never read by
        # its truthiness (skipped "no" would otherwise skip every check and schedule nothing).
        for key in ("unreachable", "skipped"):
            if said is not None and said.get(key) is not None and not isinstance(said[key], bool):
                raise ParamError("%s.said.%s: must be true or false, got %r" % (where, key, said[key]))
        if said is not None and not said.get("skipped"):
            if action != "down" or h["down_method"] != "suspend":
                raise ParamError("%s.said: only with action=down and down_method suspend" % where)
            rc = said.get("rc")
            if rc is not None and (isinstance(rc, bool) or not isinstance(rc, int) or not -255 <= rc <= 255):
                raise ParamError("%s.said.rc: must be an exit status (an integer), got %r" % (where, rc))
            for key in ("stdout", "msg"):
                if said.get(key) is not None and (not isinstance(said[key], str) or len(said[key]) > 65536):
                    raise ParamError("%s.said.%s: must be text of at most 65536 characters" % (where, key))
    # Only when every host's fields are right: the Wake-on-LAN addresses resolved (a name asks DNS).
    for i, h in enumerate(hosts):
        if action == "up" and "wol" in h["up_methods"]:
            try:
                resolve(h["wol_address"], h["wol_port"])
            except WolError as exc:
                raise ParamError("option hosts[%d].wol_address: %s" % (i, exc))


# gear_wave's own per-host options; a host's record fills those it has (its wake fields).
WAVE_OPTIONS = dict(
    up_methods=dict(type="list", elements="str", default=["wol"]),
    wol_macs=dict(type="list", elements="str", default=[]),
    wol_address=dict(type="str", default="255.255.255.255"),
    wol_port=dict(type="int", default=9),
    chassis_was_off=dict(type="bool", default=False),
    boot_once=dict(type="bool", default=True),
    boot_once_required=dict(type="bool", default=False),
    event_log=dict(type="bool", default=True),
    down_method=dict(type="str", default="suspend", choices=["suspend", "soft", "off"]),
    since=dict(type="float"),
    said=dict(type="dict"),
    no_s3_fallback=dict(type="str", default="", choices=["", "soft", "off"]),
)


def own_defaults():
    """The per-host options a host's record fills where the entry left them at these defaults."""
    return dict((k, v["default"]) for k, v in WAVE_OPTIONS.items() if "default" in v)


def options():
    """The wave's own options (gear_wave's, less action, hosts, observed and journal), a fresh copy."""
    return dict(
        wol_timeout=dict(type="float", default=90),
        ipmi_timeout=dict(type="float", default=300),
        down_timeout=dict(type="float", default=120),
        silent_for=dict(type="float", default=2),
        probe_timeout=dict(type="float", default=3),
        connect_timeout=dict(type="float", default=1),
        interval=dict(type="float", default=0.2),
        greeting=dict(type="str", default="^SSH-"),
        cycle_unresponsive=dict(type="bool", default=False),
        soft_fallback_hard=dict(type="bool", default=False),
        wol_repeat=dict(type="int", default=3),
        wol_resend=dict(type="float", default=5),
        bmc_concurrency=dict(type="int", default=4),
        concurrency=dict(type="int", default=512),
        min_interval=dict(type="float", default=1),
        retries=dict(type="int", default=2),
        session_timeout=dict(type="int", default=2),
        rate_limit_dir=dict(type="path", default="~/.cache/fleetnap/bmc"),
    )


def check(action, hosts, greeting, observed=None, given_journal=None):
    """What a wave needs checked before any host is acted on (the wave options' values are
    CHECKS', checked by the caller): the greeting, each host's wake fields (from ``observed``, the
    observation, when given), methods and MACs, and the journal read. Returns (the compiled
    greeting, the journal kept: journal_of's value or None); raises ParamError or ValueError naming
    the option."""
    matcher = compile_greeting(greeting)    # a bad one: ValueError naming the option
    if observed is not None:
        if action != "up":
            raise ParamError("option observed: only with action=up")
        wake_fields_from(observed, hosts)
    check_wave_hosts(action, hosts)
    return matcher, (journal_of(given_journal) if given_journal else None)


def act(module, p, action, hosts, matcher, kept, given_journal, scrubber, fail):
    """The wave over the checked ``hosts`` with the checked wave options ``p``, then its results
    into the journal ``kept`` (check's value) when there is one: gear_wave's result (hosts, ok,
    not_ok, elapsed_s, journal). When the journal cannot be written, ``fail(msg, result)``: the
    wave acted, the file is as it was. ``scrubber``: the module's (a suspend command's text is
    scrubbed before it is read)."""
    started = time.time()
    names = [h["name"] for h in hosts]
    uses_bmc = any(h.get("bmc_address") and h["bmc_protocol"] == "ipmi"
                   and ("ipmi" in h["up_methods"] if action == "up"
                        else h["down_method"] != "suspend" or h["no_s3_fallback"])
                   for h in hosts)
    ipmitool = module.get_bin_path("ipmitool", required=uses_bmc)
    timeout_bin = module.get_bin_path("timeout")

    def send_wol(h):
        send_packets([build_packet(m) for m in h["wol_macs"]], h["wol_address"], h["wol_port"],
                     repeat=p["wol_repeat"])

    entries = []
    for h in hosts:
        entry = dict((k, v) for k, v in h.items() if k != "bmc_password")
        if entry.get("said") is not None:   # a command's output: scrubbed before it is read or cut short
            entry["said"] = scrubber.value(entry["said"])
        entry["bmc"] = bmc_for(h, run_local, ipmitool, [timeout_bin] if timeout_bin else None,
                               min_interval=p["min_interval"], retries=p["retries"],
                               session_timeout=p["session_timeout"], state_dir=p["rate_limit_dir"])
        entries.append(entry)
    allow_open_files(min(len(entries), p["concurrency"]))
    probe = Probe(greeting=matcher, connect_timeout=p["connect_timeout"], probe_timeout=p["probe_timeout"],
                  interval=p["interval"])
    wave = Wave(probe, send_wol, bmc_concurrency=p["bmc_concurrency"], concurrency=p["concurrency"],
                wol_timeout=p["wol_timeout"], ipmi_timeout=p["ipmi_timeout"], down_timeout=p["down_timeout"],
                silent_for=p["silent_for"], bmc_poll=max(1.0, p["min_interval"]),
                cycle_unresponsive=p["cycle_unresponsive"], soft_fallback_hard=p["soft_fallback_hard"],
                wol_resend=p["wol_resend"])
    try:
        results = {} if not entries else wave.wake(entries) if action == "up" else wave.park(entries)
    finally:
        for h in entries:     # Redfish sessions are logged out
            close = getattr(h["bmc"], "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # a session the BMC already dropped: nothing left to close
                    pass
    ok = [n for n in names if results[n]["ok"]]
    out = dict(hosts=results, ok=ok, not_ok=[n for n in names if n not in ok], elapsed_s=round(time.time() - started, 3))
    if kept is not None:
        real, doc, shift = kept
        batch = given_journal["batch"] if given_journal["batch"] is not None else names
        every = [results[n] for n in names] + given_journal["results"]
        event = "after_up" if action == "up" else "after_down"
        try:
            written, updated, _diff = journal.note_event(real, doc, shift, event,
                                                         journal.batch_states(event, batch, [], every), every, module)
        except (ParamError, fileio.HostFsError, OSError, ValueError) as exc:
            fail("the wave ran (every host's result is in hosts) but the state file %s could not be written: %s "
                 "(it is as it was)" % (real, exc), out)
        out["journal"] = {"written": written, "updated": updated}
    return out
