"""One lock for the kernel running the tests: every stage of make test that runs at the same time
shares it. The live_kernel tests (test-live, part of test-unit) change its cpuidle settings (and put them back); the
simulator's tests check that nothing of theirs ever changes them. A live_kernel test holds the lock
while it runs (tests/conftest.py), a check of the real settings around its own writes holds it too."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LIVE_CPUIDLE_LOCK = Path("/tmp/fleetnap-test-live-cpuidle.lock")


@contextlib.contextmanager
def live_cpuidle_lock():
    fd = os.open(str(LIVE_CPUIDLE_LOCK), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
