"""Fixtures for the fleet simulator tests (tests/sim, marker ``sim``).

The simulator here has its own state and inventory directories under pytest's tmp dir, its own
name (``simt``: namespaces ``fleetnap-simt-N``, bridge ``fnsimtbr``) and subnet
(10.252.0.0/24), so it never touches a fleet started with ``make sim-up``.
"""

from __future__ import annotations

import pytest

from simtools import SIM_HOSTS, Sim, missing_tools


def pytest_configure(config):
    config.addinivalue_line("markers", "sim: needs root and starts a small fleet simulator (lab/sim.py)")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    why = missing_tools()
    if why:
        pytest.skip(why)
    s = Sim(tmp_path_factory.mktemp("sim"))
    s.cli("down")                       # a crashed earlier run of this test leaves nothing behind
    s.cli("up", "--hosts", str(SIM_HOSTS))
    yield s
    s.cli("down", check=False)
