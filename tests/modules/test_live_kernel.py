"""cpuidle_qos on the kernel running the tests: a real, writable cpuidle (haltpoll: POLL + haltpoll).

Disables a real state, checks the kernel stops entering it, sets per-CPU PM QoS, then restores
everything through state=absent — and, whatever happens, puts the original values back.
"""

import glob
import os
import time
from pathlib import Path

import pytest

CPU = Path("/sys/devices/system/cpu")
ORIGINALS = Path("/var/lib/fleetnap/cpuidle_qos.orig.json")
GOVERNOR = CPU / "cpuidle/current_governor"
DISABLE_FILES = sorted(glob.glob(str(CPU / "cpu[0-9]*/cpuidle/state[0-9]*/disable")))
QOS_FILES = sorted(glob.glob(str(CPU / "cpu[0-9]*/power/pm_qos_resume_latency_us")))

pytestmark = [
    pytest.mark.live_kernel,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(not DISABLE_FILES or not os.access(DISABLE_FILES[0], os.W_OK),
                       reason="this kernel has no writable cpuidle states"),
    pytest.mark.skipif(ORIGINALS.exists(), reason="an earlier fleetnap record is on this host: %s" % ORIGINALS),
]


def read_all(paths):
    return {p: Path(p).read_text().strip() for p in paths}


def usage(disable_files):
    return sum(int(Path(p).parent.joinpath("usage").read_text()) for p in disable_files)


def wait_for_idle(idle_before, seconds=10):
    """True once any CPU entered any idle state (usage counters moved) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if usage(DISABLE_FILES) > idle_before:
            return True
    return False


@pytest.fixture
def restore_kernel():
    saved = read_all(DISABLE_FILES + QOS_FILES + [str(GOVERNOR)])
    yield saved
    for path, value in saved.items():
        if Path(path).read_text().strip() != value:
            Path(path).write_text(value)
    if ORIGINALS.exists():
        ORIGINALS.unlink()


def test_disable_a_real_state_and_restore(module_runner, restore_kernel):
    info = module_runner("cpuidle_info", {})
    facts = info["ansible_facts"]["fleetnap_cpuidle"]
    assert facts["driver"] and facts["states"][0]["name"] == "POLL"
    deep = max((s for s in facts["states"] if s["name"] != "POLL"), key=lambda s: s["declared_us"])
    assert deep["declared_us"] >= 1

    # Under the haltpoll governor a disable is ignored by the kernel: the module says so.
    if facts["governor"] == "haltpoll":
        res = module_runner("cpuidle_qos", {"max_latency_us": deep["declared_us"] - 0.5}, check=True)
        assert any("haltpoll cpuidle governor ignores" in w for w in res["warnings"])
    # A budget below the deepest state's exit latency disables it on every CPU (menu governor
    # honours disables).
    gate = {"max_latency_us": deep["declared_us"] - 0.5}
    if "menu" in facts["available_governors"]:
        gate["governor"] = "menu"
    res = module_runner("cpuidle_qos", gate)
    assert res.changed and not res.failed, res.get("msg")
    disable = [p for p in DISABLE_FILES if Path(p).parent.joinpath("name").read_text().strip() == deep["name"]]
    assert disable and all(Path(p).read_text().strip() == "1" for p in disable)
    # The kernel really stops entering it (on any CPU), provided the CPUs idle at all.
    time.sleep(0.2)
    before, idle_before = usage(disable), usage(DISABLE_FILES)
    idled = wait_for_idle(idle_before)
    assert usage(disable) == before

    again = module_runner("cpuidle_qos", gate)
    assert not again.changed

    # Per-CPU PM QoS.
    res = module_runner("cpuidle_qos", dict(gate, resume_latency_us=50))
    assert res.changed
    assert all(Path(p).read_text().strip() == "50" for p in QOS_FILES)

    # absent restores what the kernel had.
    res = module_runner("cpuidle_qos", {"state": "absent"}, diff=True)
    assert res.changed and res["restored"]
    assert read_all(DISABLE_FILES + QOS_FILES + [str(GOVERNOR)]) == restore_kernel
    assert not ORIGINALS.exists()
    before = usage(disable)
    if not idled:
        pytest.skip("this machine was saturated: its CPUs never idled during the test, the kernel's effect not observable")
    deadline = time.monotonic() + 20
    while usage(disable) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert usage(disable) > before, "the restored state is used again"


def test_unknown_state_or_governor_on_the_live_kernel_changes_nothing(module_runner, restore_kernel):
    res = module_runner("cpuidle_qos", {"max_latency_us": 0, "disable": ["C6"]})
    assert res.failed and "unknown state(s) C6" in res["msg"] and "POLL" in res["msg"]
    res = module_runner("cpuidle_qos", {"max_latency_us": 0, "governor": "teo-nonexistent"})
    assert res.failed and "is not available on this host" in res["msg"]
    assert read_all(DISABLE_FILES + QOS_FILES + [str(GOVERNOR)]) == restore_kernel


def test_live_check_mode_changes_nothing(module_runner, restore_kernel):
    res = module_runner("cpuidle_qos", {"max_latency_us": 0, "resume_latency_us": 7}, check=True, diff=True)
    assert res.changed and res["writes"] > 0
    assert read_all(DISABLE_FILES + QOS_FILES + [str(GOVERNOR)]) == restore_kernel
    assert not ORIGINALS.exists()
