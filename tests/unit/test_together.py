"""together.run_together (module_utils/fleetnap/together.py): every host's thread started before
any host is acted on, the items taken in order, at most ``concurrency`` at once, every result in
the items' order, an exception raised once all items were taken. Real threads."""

from __future__ import annotations

import threading
import time

import pytest

from ansible.module_utils.fleetnap.together import run_together


def test_every_thread_starts_before_the_first_item_is_taken():
    started = []
    first = []
    lock = threading.Lock()
    real_start = threading.Thread.start

    def counting_start(self):
        with lock:
            started.append(time.monotonic())
        real_start(self)

    def fn(i):
        with lock:
            first.append((time.monotonic(), len(started)))
        return i * 2

    threading.Thread.start = counting_start
    try:
        out = run_together(fn, range(50), 20)
    finally:
        threading.Thread.start = real_start
    assert out == [i * 2 for i in range(50)]
    assert len(started) == 20                              # concurrency bounds the threads
    assert all(n == 20 for _, n in first)                  # every item taken after all 20 started


def test_at_most_concurrency_at_once_and_done_right_after_each():
    running, peak, seen = [0], [0], []
    lock = threading.Lock()

    def fn(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return -i

    run_together(fn, range(30), 4, done=lambda i, r: seen.append((i, r)))
    assert peak[0] <= 4 and sorted(seen) == [(i, -i) for i in range(30)]


def test_an_exception_is_raised_after_every_item_ran():
    ran = []

    def fn(i):
        ran.append(i)
        if i == 3:
            raise ValueError("host 3")
        return i

    with pytest.raises(ValueError, match="host 3"):
        run_together(fn, range(10), 3)
    assert sorted(ran) == list(range(10))
    assert run_together(fn, [], 5) == []
