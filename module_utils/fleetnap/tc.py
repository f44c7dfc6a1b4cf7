# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ETF launch-time qdisc configuration: validation, tc command lines, and comparison with ``tc -j``.

Layouts (what the C-state thesis used on its i210, and what single-queue NICs can do):

- ``mqprio`` root (one class per TX queue, ``HANDLE:1`` = queue 0) with an ``etf`` child on each
  chosen queue; traffic reaches the queue through the socket priority (SO_PRIORITY) -> traffic
  class map. Needs a multi-queue device (the kernel refuses mqprio on one TX queue).
- ``etf`` as the root qdisc of a single-queue device (no priority map: all traffic is timed).

Pure functions; the module ``etf_qdisc`` runs tc.
"""

from __future__ import annotations

import re

CLOCKS = ("CLOCK_TAI", "CLOCK_MONOTONIC", "CLOCK_REALTIME", "CLOCK_BOOTTIME")
# tc -j prints clockid without the CLOCK_ prefix
DEFAULT_ROOT_KINDS = ("mq", "pfifo_fast", "fq_codel", "fq", "noqueue", "noop", "pfifo", "sfq", "cake")
QUEUE_RE = re.compile(r"^(\d+)@(\d+)$")
FLAGS = ("offload", "deadline_mode", "skip_sock_check")
MAX_QUEUES = 4096     # a bound before any set of queues is built (the kernel's limit is lower on any NIC)


class TcError(ValueError):
    """Bad ETF configuration for this device; the message names the value and the fix."""


def default_layout(tx_queues, etf_priority=3):
    """mqprio defaults for ``tx_queues`` queues: priority ``etf_priority`` -> TC 0 -> queue 0 (ETF),
    everything else -> TC 1 -> the remaining queues (the Intel i210 TSN example, generalised)."""
    if tx_queues < 2:
        raise TcError("mqprio needs at least 2 TX queues, the device has %d" % tx_queues)
    prio_map = [1] * 16
    prio_map[etf_priority] = 0
    return 2, prio_map, ["1@0", "%d@1" % (tx_queues - 1)]


def parse_queues(specs):
    """["1@0", "2@2"] -> [(count, offset), ...] (validated)."""
    out = []
    for spec in specs:
        match = QUEUE_RE.match(str(spec).strip())
        if not match or int(match.group(1)) < 1:
            raise TcError("tc_queues: %r is not COUNT@OFFSET with COUNT >= 1 (for example 1@0)" % (spec,))
        if int(match.group(1)) > MAX_QUEUES or int(match.group(2)) >= MAX_QUEUES:
            raise TcError("tc_queues: %r names queues beyond %d (no device has more TX queues)"
                          % (spec, MAX_QUEUES))
        out.append((int(match.group(1)), int(match.group(2))))
    return out


def check_config(cfg):
    """Check what a desired configuration says on its own, without the device: clock, offload,
    delta, handle and, with root mqprio, the layout options (num_tc, priority_map and tc_queues all
    or none, their shapes, no overlapping queues), etf_priority and etf_queues. Returns it
    normalised; layout options left out stay None (validate() fills in the default layout, which
    depends on the device's TX queue count). Raises TcError.

    ``cfg``: root ('mqprio'|'etf'), handle (int), num_tc, priority_map (16 ints), tc_queues
    (COUNT@OFFSET), etf_priority, etf_queues (0-based TX queues), clockid, delta_ns, offload,
    deadline_mode, skip_sock_check.
    """
    out = dict(cfg)
    if cfg["clockid"] not in CLOCKS:
        raise TcError("clockid must be one of %s, got %r" % (", ".join(CLOCKS), cfg["clockid"]))
    if cfg["offload"] and cfg["clockid"] != "CLOCK_TAI":
        raise TcError("offload needs clockid CLOCK_TAI (the NIC compares launch times with its PHC in TAI)")
    if not isinstance(cfg["delta_ns"], int) or cfg["delta_ns"] < 0 or cfg["delta_ns"] > 1000000000:
        raise TcError("delta_ns must be 0..1000000000 (how long before its launch time a packet is handed to "
                      "the NIC), got %r" % (cfg["delta_ns"],))
    if not 1 <= cfg["handle"] <= 0xffff:
        raise TcError("handle must be 1..0xffff, got %r" % (cfg["handle"],))
    if cfg["root"] == "etf":
        out.update(num_tc=None, priority_map=None, tc_queues=None, etf_queues=[0])
        return out
    num_tc, prio_map, queues = cfg.get("num_tc"), cfg.get("priority_map"), cfg.get("tc_queues")
    if not (num_tc or prio_map or queues):
        etf_priority = cfg.get("etf_priority", 3)
        if not isinstance(etf_priority, int) or not 0 <= etf_priority <= 15:
            raise TcError("etf_priority must be a socket priority 0..15, got %r" % (etf_priority,))
        out.update(num_tc=None, priority_map=None, tc_queues=None)
    else:
        if not (num_tc and prio_map and queues):
            raise TcError("num_tc, priority_map and tc_queues go together: give all three or none")
        if not 1 <= num_tc <= 16:
            raise TcError("num_tc must be 1..16, got %r" % num_tc)
        if len(prio_map) != 16 or any(not isinstance(v, int) or v < 0 or v >= num_tc for v in prio_map):
            raise TcError("priority_map must list 16 traffic classes (one per socket priority 0-15), each "
                          "0..num_tc-1 (%d); got %r" % (num_tc - 1, prio_map))
        parsed = parse_queues(queues)
        if len(parsed) != num_tc:
            raise TcError("tc_queues has %d entries, num_tc is %d: one COUNT@OFFSET per traffic class"
                          % (len(parsed), num_tc))
        used = set()
        for count, offset in parsed:
            span = set(range(offset, offset + count))
            if used & span:
                raise TcError("tc_queues %s overlap" % ", ".join(queues))
            used |= span
        out.update(num_tc=num_tc, priority_map=list(prio_map), tc_queues=list(queues))
    if not cfg["etf_queues"]:
        raise TcError("etf_queues must name at least one TX queue")
    return out


def validate(cfg, tx_queues, device):
    """Check a desired configuration (check_config) and then against the device's TX queue count.
    Returns it normalised, with the default mqprio layout filled in."""
    out = check_config(cfg)
    if cfg["root"] == "etf":
        if tx_queues != 1:
            raise TcError("root etf times a single-queue device; %s has %d TX queues: use root mqprio and "
                          "choose etf_queues" % (device, tx_queues))
        return out
    if tx_queues < 2:
        raise TcError("%s has %d TX queue(s) (/sys/class/net/%s/queues/tx-*): mqprio needs a multi-queue NIC "
                      "with at least 2; use root: etf for a single-queue device"
                      % (device, tx_queues, device))
    num_tc, prio_map, queues = out["num_tc"], out["priority_map"], out["tc_queues"]
    if num_tc is None:
        num_tc, prio_map, queues = default_layout(tx_queues, cfg.get("etf_priority", 3))
    last = max(offset + count - 1 for count, offset in parse_queues(queues))
    if last >= tx_queues:
        raise TcError("tc_queues %s need %d TX queues; %s has %d (/sys/class/net/%s/queues/tx-*)"
                      % (" ".join(queues), last + 1, device, tx_queues, device))
    etf_queues = cfg["etf_queues"]
    bad = [q for q in etf_queues if not isinstance(q, int) or q < 0 or q >= tx_queues]
    if bad:
        raise TcError("etf_queues %s do not exist: %s has TX queues 0-%d" % (bad, device, tx_queues - 1))
    out.update(num_tc=num_tc, priority_map=list(prio_map), tc_queues=list(queues),
               etf_queues=sorted(set(etf_queues)))
    return out


def _etf_args(cfg):
    args = ["etf", "clockid", cfg["clockid"], "delta", str(cfg["delta_ns"])]
    for flag in FLAGS:
        if cfg[flag]:
            args.append(flag)
    return args


def commands(cfg, device):
    """tc argument lists (without the tc binary) that build the configuration from scratch."""
    handle = "%x:" % cfg["handle"]
    if cfg["root"] == "etf":
        return [["qdisc", "replace", "dev", device, "root", "handle", handle] + _etf_args(cfg)]
    cmds = [["qdisc", "replace", "dev", device, "root", "handle", handle, "mqprio", "num_tc", str(cfg["num_tc"]),
             "map"] + [str(v) for v in cfg["priority_map"]] + ["queues"] + list(cfg["tc_queues"]) + ["hw", "0"]]
    for queue in cfg["etf_queues"]:
        cmds.append(["qdisc", "replace", "dev", device, "parent", "%x:%x" % (cfg["handle"], queue + 1)]
                    + _etf_args(cfg))
    return cmds


def _etf_view(options):
    return {
        "clockid": "CLOCK_" + str(options.get("clockid", "")),
        "delta_ns": options.get("delta"),
        "offload": options.get("offload") == "on",
        "deadline_mode": options.get("deadline_mode") == "on",
        "skip_sock_check": options.get("skip_sock_check") == "on",
    }


_SHOW_FIELDS = (("kind", str), ("handle", str), ("parent", str), ("root", bool), ("options", dict))
_OPTION_FIELDS = {"mqprio": (("tc", int), ("map", list), ("queues", list)),
                  "etf": (("clockid", str), ("delta", int), ("offload", str), ("deadline_mode", str),
                          ("skip_sock_check", str))}


def check_show(qdiscs, device="the device"):
    """The answer of ``tc -j qdisc show dev DEVICE`` checked against the shape current_view()
    reads (a list of objects; kind, handle and parent strings, root a boolean, the mqprio and etf
    options of their types); returned as it is. TcError naming the device, the entry and the field."""
    where = "tc -j qdisc show dev %s" % device
    if not isinstance(qdiscs, list):
        raise TcError("%s printed %s, not a list of qdiscs" % (where, type(qdiscs).__name__))
    for i, q in enumerate(qdiscs):
        if not isinstance(q, dict):
            raise TcError("%s: entry %d is %s %s, not an object" % (where, i, type(q).__name__, repr(q)[:60]))
        for field, kind in _SHOW_FIELDS:
            value = q.get(field)
            if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
                what = "an object" if kind is dict else "a " + kind.__name__
                raise TcError("%s: entry %d has %s %s, not %s" % (where, i, field, repr(value)[:60], what))
        opts = q.get("options") or {}
        for field, kind in _OPTION_FIELDS.get(q.get("kind"), ()):
            value = opts.get(field)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise TcError("%s: entry %d (%s) has options.%s %s, not a %s"
                              % (where, i, q.get("kind"), field, repr(value)[:60], kind.__name__))
        if q.get("kind") == "mqprio":
            for pair in opts.get("queues") or []:
                if not (isinstance(pair, list) and len(pair) == 2 and all(
                        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_QUEUES for v in pair)):
                    raise TcError("%s: entry %d (mqprio) has options.queues entry %s, not [first, last] queue "
                                  "numbers" % (where, i, repr(pair)[:60]))
    return qdiscs


def current_view(qdiscs, device="the device"):
    """What ``tc -j qdisc show dev X`` says, reduced to what this module manages (its shape
    checked first: check_show)."""
    check_show(qdiscs, device)
    root = [q for q in qdiscs if q.get("root")]
    view = {"root": None, "handle": None, "mqprio": None, "etf": {}}
    if not root:
        return view
    root = root[0]
    view["root"] = root.get("kind")
    handle = root.get("handle", "0:")
    try:
        view["handle"] = int(handle.rstrip(":"), 16)
    except ValueError:
        view["handle"] = None
    if view["root"] == "mqprio":
        opts = root.get("options", {})
        view["mqprio"] = {
            "num_tc": opts.get("tc"),
            "priority_map": opts.get("map"),
            "tc_queues": ["%d@%d" % (last - first + 1, first) for first, last in opts.get("queues", [])],
        }
        for q in qdiscs:
            parent = q.get("parent", "")
            if q.get("kind") == "etf" and parent.startswith(handle):
                try:
                    queue = int(parent.split(":", 1)[1], 16) - 1
                except ValueError:
                    continue
                view["etf"][queue] = _etf_view(q.get("options", {}))
    elif view["root"] == "etf":
        view["etf"][0] = _etf_view(root.get("options", {}))
    return view


def desired_view(cfg):
    etf = dict((q, {"clockid": cfg["clockid"], "delta_ns": cfg["delta_ns"], "offload": cfg["offload"],
                    "deadline_mode": cfg["deadline_mode"], "skip_sock_check": cfg["skip_sock_check"]})
               for q in cfg["etf_queues"])
    mqprio = None
    if cfg["root"] == "mqprio":
        mqprio = {"num_tc": cfg["num_tc"], "priority_map": cfg["priority_map"], "tc_queues": cfg["tc_queues"]}
    return {"root": cfg["root"], "handle": cfg["handle"], "mqprio": mqprio, "etf": etf}


def is_ours(view, handle):
    """True when the root qdisc is one this module builds (mqprio or etf with our handle)."""
    return view["root"] in ("mqprio", "etf") and view["handle"] == handle


def is_default(view):
    """True when the root is the kernel's default (deleting the root gives it back)."""
    return view["root"] is None or (view["root"] in DEFAULT_ROOT_KINDS and view["handle"] in (0, None))


def needs_rebuild(current, desired):
    """The root must be deleted and rebuilt: the kernel changes neither mqprio nor etf in place
    ("Change operation not supported by specified qdisc"), so any difference means a rebuild."""
    return current != desired


def json_keys(view):
    """JSON object keys must be strings: etf queues as "0", "1"..."""
    return dict(view, etf=dict((str(k), v) for k, v in sorted(view["etf"].items())))
