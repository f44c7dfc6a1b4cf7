# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a fleet's hosts are doing, seen from the controller, all at once.

``answers()`` is the probe host_wait uses: a connection and, for a service with a greeting
(SSH), the greeting, so a port a NAT or QEMU keeps open for a sleeping host is not an answer.
``observe()`` probes every host's service and reads every BMC's chassis power concurrently, in
one process: a gear shift's observation costs one probe timeout and a few BMC round trips,
instead of a module start on the controller per host and per question. Standard library only.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed


OBSERVED = frozenset(("ssh", "ssh_s", "probes", "bmc", "bmc_configured", "bmc_read", "bmc_error", "bmc_endpoint"))


def answers(host, port, greeting, timeout, connect_timeout=None):
    """True if the service accepts a connection and (when given) greets as expected within
    ``timeout`` s. ``connect_timeout`` (default ``timeout``) bounds the connection alone: a new
    connection sends a new SYN at once, where one long connect waits for the kernel's SYN
    retransmissions (1, 3, 7 s) and sees a host that answers at 1.1 s only at 3 s."""
    try:
        conn = socket.create_connection((host, port), timeout=connect_timeout or timeout)
    except (OSError, socket.timeout):
        return False
    try:
        if not greeting:
            return True
        conn.settimeout(timeout)
        try:
            data = conn.recv(256)
        except (OSError, socket.timeout):
            return False
        return bool(re.search(greeting, data.decode("ascii", "replace")))
    finally:
        conn.close()


def answers_within(host, port, greeting, timeout, interval=0.2, clock=time.monotonic, sleep=time.sleep,
                   probe=answers):
    """Probe until the service answers or ``timeout`` seconds have passed (a refused connection
    is tried again: a host that is booting may answer a moment later). Returns (answered, probes,
    seconds to the answer or None)."""
    start = clock()
    deadline = start + timeout
    probes = 0
    while True:
        probes += 1
        left = deadline - clock()
        if probe(host, port, greeting, max(0.05, min(timeout, left))):
            return True, probes, round(clock() - start, 3)
        if clock() + interval >= deadline:
            return False, probes, None
        sleep(interval)


def observe(hosts, probe_timeout, bmc_status, greeting="^SSH-", probe_concurrency=256, bmc_concurrency=4,
            probe=answers, bmc_read="always"):
    """Observe every host at once.

    hosts: [{"name", "address", "port", "bmc": opaque or None, "probe_timeout": optional}];
    bmc_status(bmc) returns 'on' / 'off' or raises with the reason (the caller's BMC client:
    rate-limited per BMC, retried). A host's own probe_timeout (no longer than ``probe_timeout``)
    shortens its probe: a host expected silent needs no more than it takes to be sure.
    bmc_read 'always' reads every BMC while the probes run; 'silent' reads only the BMCs of hosts
    that did not answer (an answering host is on, whatever its chassis says), after their probe.
    At most probe_concurrency probes and bmc_concurrency BMC reads run at a time.
    Returns {name: {"ssh": bool, "ssh_s": seconds or None, "probes": n, "bmc": 'on'|'off'|None,
    "bmc_configured": bool, "bmc_read": bool, "bmc_error": str, "bmc_endpoint": the BMC's
    "address:port" as its client speaks to it, "" without one}}.
    """
    out = {h["name"]: {"ssh": False, "ssh_s": None, "probes": 0, "bmc": None,
                       "bmc_configured": h.get("bmc") is not None, "bmc_read": False, "bmc_error": "",
                       "bmc_endpoint": getattr(h.get("bmc"), "target", "") or ""}
           for h in hosts}
    lock = threading.Lock()

    def ssh(h):
        timeout = min(probe_timeout, h.get("probe_timeout") or probe_timeout)
        ok, probes, took = answers_within(h["address"], h["port"], greeting, timeout, probe=probe)
        with lock:
            out[h["name"]].update(ssh=ok, ssh_s=took, probes=probes)
        return ok

    def bmc(h):
        try:
            power = bmc_status(h["bmc"])
            error = ""
        except Exception as exc:  # the reason is the observation: reported per host, never raised
            power, error = None, str(exc) or exc.__class__.__name__
        with lock:
            out[h["name"]].update(bmc=power, bmc_error=error, bmc_read=True)

    with ThreadPoolExecutor(max_workers=max(1, min(probe_concurrency, len(hosts) or 1))) as probes, \
            ThreadPoolExecutor(max_workers=max(1, bmc_concurrency)) as bmcs:
        probed = dict((probes.submit(ssh, h), h) for h in hosts)
        reads = []
        if bmc_read == "always":
            reads = [bmcs.submit(bmc, h) for h in hosts if h.get("bmc") is not None]
        for f in as_completed(probed):
            h = probed[f]
            if bmc_read != "always" and not f.result() and h.get("bmc") is not None:
                reads.append(bmcs.submit(bmc, h))
        for f in list(probed) + reads:
            f.result()
    return out
