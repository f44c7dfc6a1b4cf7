"""Prometheus and node_exporter for the lab suite: real daemons on loopback, queried over HTTP.

The fixtures ``daemons`` and ``prometheus`` (conftest.py) start them; these are their helpers.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.parse
import urllib.request

import yaml

from test_measure_resume import INVENTORY

PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base, expr):
    url = "%s/api/v1/query?%s" % (base, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return {r["metric"].get("host"): float(r["value"][1]) for r in body["data"]["result"]}


def lab_hosts():
    return yaml.safe_load((INVENTORY / "hosts.yml").read_text())["all"]["children"]["lab"]["hosts"]


def wait_http(url, proc, log, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.5)


def wait_for(base, expr, count, timeout=90, want=None):
    """Poll until the query has ``count`` series (and, with ``want``, exactly these values)."""
    deadline = time.monotonic() + timeout
    while True:
        got = query(base, expr)
        if (len(got) >= count and (want is None or got == want)) or time.monotonic() > deadline:
            return got
        time.sleep(2)
