# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Many hosts at once, each its own thread, every thread started before any host is acted on.

A thread started while hundreds of others are busy waits for the interpreter lock before it runs:
started one by one as a pool's tasks are submitted (concurrent.futures), a large wave's last hosts
got their first magic packet noticeably later than its first ones. Started first and released
together, they begin within a moment of each other (tests/unit/test_together.py checks that every
thread is started before the first item is taken). Standard library only."""

from __future__ import annotations

import threading
from collections import deque


def run_together(fn, items, concurrency, done=None):
    """``fn(item)`` for every item, at most ``concurrency`` at a time, on threads that are all
    started before the first item is taken and take the items in order. ``done(item, result)``,
    when given, runs on the same thread right after ``fn``. Returns the results in the items'
    order; an exception of ``fn`` or ``done`` is raised here once every item has been taken (the
    first one, after the others ran)."""
    items = list(items)
    results = [None] * len(items)
    errors = []
    lock = threading.Lock()
    todo = deque(range(len(items)))
    go = threading.Event()

    def worker():
        go.wait()
        while True:
            with lock:
                if not todo:
                    return
                i = todo.popleft()
            try:
                results[i] = fn(items[i])
                if done is not None:
                    done(items[i], results[i])
            except Exception as exc:  # raised by the caller's thread once all are done
                with lock:
                    errors.append(exc)

    threads = []
    try:
        while len(threads) < max(1, min(concurrency, len(items))):
            t = threading.Thread(target=worker)
            t.start()
            threads.append(t)
    except RuntimeError:    # no more threads to be had: those started take every item
        if not threads:
            raise
    finally:
        go.set()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
