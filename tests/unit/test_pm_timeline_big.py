"""pm_timeline's parser on a big log of many cycles (issue 31: a 63 MB log kept it busy past 225 s):
a log of several MB built from the golden lab log by repetition is parsed in bounded time, every
cycle found, each as the golden log's own. The 60 MB figure beside sleepgraph is make bench's
(tests/bench/bench_pm_timeline.py); here the bound is generous so that it cannot flake."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_pm_timeline import build_big_log, module_work  # noqa: E402
from ansible.module_utils.fleetnap.dmesg import parse_file  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lab1-console-6.1-3cycles.txt"


def test_a_multi_megabyte_log_of_many_cycles_is_parsed_in_bounded_time(tmp_path):
    log = tmp_path / "many.txt"
    log.write_text(build_big_log(5))
    one = parse_file(str(GOLDEN))
    t = time.monotonic()
    results = module_work(log)
    elapsed = time.monotonic() - t
    assert elapsed < 60, elapsed
    copies = len(results) // len(one)
    assert copies >= 40 and len(results) == copies * len(one)
    for k, res in enumerate(results):
        ref = one[k % len(one)]
        assert abs(res["resume_ms"] - ref.resume_ms) < 1e-6 and abs(res["suspend_ms"] - ref.suspend_ms) < 1e-6
