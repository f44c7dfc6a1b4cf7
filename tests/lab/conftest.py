"""Fixtures for the virtual power lab suite (tests/lab).

The session fixture ``lab`` brings the lab up once per pytest run (``labctl up`` is a no-op on a
running lab) and leaves it up: the Makefile's ``test`` target runs ``lab-down`` at the end, and
``FLEETNAP_LAB_KEEP=1`` is the explicit way to say "keep it" (nothing here tears it down).
Disruptive tests use ``restore`` so every guest is running again when they finish: later suites
(gear shifts, resume measurement) run against the same lab.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml

from labtools import Lab, run_labctl
from promtools import PROMETHEUS, free_port, lab_hosts, wait_http


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs the virtual power lab (QEMU guests, ipmi_sim, WoL relay)")


@pytest.fixture(scope="session")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    t0 = time.monotonic()
    proc = run_labctl("up", timeout=1500)
    result = json.loads(proc.stdout)
    result["fixture_seconds"] = round(time.monotonic() - t0, 1)
    the_lab = Lab(result)
    if result["booted"]:
        the_lab.record_timing("lab_up_to_all_ssh_seconds_%d_guests" % len(result["booted"]),
                              result["up_to_all_ssh_seconds"])
    yield the_lab
    # Deliberately no teardown: FLEETNAP_LAB_KEEP=1 or not, the lab stays up for the suites
    # that follow; 'make test' ends with 'make lab-down'.


@pytest.fixture
def restore(lab):
    """Names added to the returned list are brought back to running after the test."""
    names: list[str] = []
    yield names
    for name in names:
        lab.restore(name)


@pytest.fixture
def daemons(tmp_path):
    """Start background daemons (Prometheus, node_exporter) on loopback; stopped after the test."""
    procs = []

    def start(name, argv, ready_url):
        log_path = tmp_path / ("%s.log" % name)
        log = open(log_path, "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        procs.append((proc, log))
        wait_http(ready_url, proc, log_path)
    yield start
    for proc, log in procs:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def prometheus(lab, tmp_path, daemons):
    """A function that starts a real Prometheus scraping every guest's node_exporter (plus extra jobs)."""
    # A failure, not a skip: make setup installs it, and the S3/WoL cycle needs it.
    assert PROMETHEUS, "Debian package prometheus missing (make setup installs it)"

    def start(extra_jobs=(), hosts=None):
        """``hosts``: the guests scraped (None: all, (): none, only the extra jobs)."""
        # Only the textfile collector (collect[]), every 5 s: a full node_exporter scrape of six TCG
        # guests every few seconds would load them more than the tests do.
        guests = [{"targets": [v["fleetnap_metrics_address"]], "labels": {"host": name}}
                  for name, v in lab_hosts().items() if hosts is None or name in hosts]
        lab_job = [{"job_name": "fleetnap-lab", "params": {"collect[]": ["textfile"]},
                    "static_configs": guests}] if guests else []
        config = {"global": {"scrape_interval": "5s", "scrape_timeout": "4s"},
                  "scrape_configs": lab_job + list(extra_jobs)}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        daemons("prometheus", [PROMETHEUS, "--config.file=%s" % (tmp_path / "prometheus.yml"),
                               "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                               "--web.listen-address=127.0.0.1:%d" % port], base + "/-/ready")
        return base
    return start
