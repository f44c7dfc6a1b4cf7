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
import time

import pytest

from labtools import Lab, run_labctl


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
