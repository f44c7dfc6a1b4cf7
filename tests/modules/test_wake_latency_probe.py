"""wake_latency_probe on the kernel running the tests: a REAL measurement of POLL and haltpoll.

Every cpuidle knob the probe may touch (state disables, governor, per-CPU PM QoS, the global
/dev/cpu_dma_latency value) is read before and compared after, exactly; a fixture puts the
original values back whatever happens.
"""

import glob
import os
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, TARGET_PYTHON, VENV_BIN

CPU = Path("/sys/devices/system/cpu")
GOVERNOR = CPU / "cpuidle/current_governor"
DISABLE_FILES = sorted(glob.glob(str(CPU / "cpu[0-9]*/cpuidle/state[0-9]*/disable")))
QOS_FILES = sorted(glob.glob(str(CPU / "cpu[0-9]*/power/pm_qos_resume_latency_us")))
LOCK = Path("/run/fleetnap-wake-latency.lock")

pytestmark = [
    pytest.mark.live_kernel,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("cyclictest") is None,
                       reason="needs root and cyclictest (Debian package rt-tests)"),
    pytest.mark.skipif(not DISABLE_FILES or not os.access(DISABLE_FILES[0], os.W_OK),
                       reason="this kernel has no writable cpuidle states"),
]


def knobs():
    values = {p: Path(p).read_text().strip() for p in DISABLE_FILES + QOS_FILES + [str(GOVERNOR)]}
    with open("/dev/cpu_dma_latency", "rb") as f:
        values["/dev/cpu_dma_latency"] = struct.unpack("i", f.read(4))[0]
    return values


def state_names():
    return [Path(p).parent.joinpath("name").read_text().strip()
            for p in sorted(glob.glob(str(CPU / "cpu0/cpuidle/state[0-9]*/disable")))]


@pytest.fixture
def saved_knobs():
    saved = knobs()
    yield saved
    for path, value in saved.items():
        if path.startswith("/sys") and Path(path).read_text().strip() != value:
            Path(path).write_text(value)


def test_real_measurement_of_every_state_restores_exactly(module_runner, saved_knobs):
    names = state_names()
    # no_driver only matters on a host without a cpuidle driver: here every state is measured
    res = module_runner("wake_latency_probe", {"loops": 500, "interval_us": 1000, "no_driver": "idle_loop"})
    assert not res.failed, res.get("msg")
    assert knobs() == saved_knobs, "sysfs differs after the measurement"
    assert res["cpuidle_driver"] == (CPU / "cpuidle/current_driver").read_text().strip() and res["idle_loop"] is None
    # metrics in base units, one max per state, the declared values alongside
    by_name = dict((m["name"], m["samples"]) for m in res["metrics"])
    maxima = dict((s["labels"]["state"], s["value"]) for s in by_name["fleetnap_wake_latency_seconds"]
                  if s["labels"]["quantile"] == "1")
    assert maxima == dict((r["name"], pytest.approx(r["max_us"] / 1e6)) for r in res["states"])
    assert sorted(s["value"] for s in by_name["fleetnap_wake_latency_samples"]) == [500] * len(names)
    # method (b): read from this machine's NICs (none here offloads launch time)
    nics = [n for n in os.listdir("/sys/class/net") if os.path.exists("/sys/class/net/%s/device" % n)]
    assert sorted(n["name"] for n in res["nic_method"]["nics"]) == sorted(nics)
    assert res["nic_method"]["available"] is False and "no NIC with ETF launch-time offload" in res["nic_method"]["reason"]
    assert not res.changed and res["restored"] and res["method"] == "cyclictest"
    assert [s["name"] for s in res["states"]] == names
    assert res["states"][0]["name"] == "POLL" and res["baseline"]["count"] == 500
    online = Path(CPU / "online").read_text().strip()
    assert res["cpu"] == max(int(x) for x in online.replace("-", ",").split(","))
    if saved_knobs[str(GOVERNOR)] == "haltpoll":
        assert res["governor"] == {"before": "haltpoll", "during": "menu"}
    for row in res["states"]:
        assert row["count"] == 500
        assert 0 < row["min_us"] <= row["median_us"] <= row["p99_us"] <= row["p999_us"] <= row["max_us"]
        assert sum(c for _b, c in row["histogram"]) == 500
        assert row["max_occurrences"] >= 1
        assert row["deeper_entered"] == 0, "a disabled state was entered"
        assert res["worst_us"][row["name"]] == row["max_us"]
    for row in res["states"][1:]:
        assert row["entered"] > 0, "the CPU never entered %s" % row["name"]
        assert row["over_baseline"]["max_us"] == pytest.approx(row["max_us"] - res["baseline"]["max_us"], abs=1e-3)
    assert res["pm_qos"]["cpu_dma_latency_us"] == saved_knobs["/dev/cpu_dma_latency"]
    for name in names:
        assert name in res["table"]


def test_one_state_on_one_cpu(module_runner, saved_knobs):
    deep = state_names()[-1]
    res = module_runner("wake_latency_probe", {"states": [deep], "cpu": 0, "loops": 200, "limit_cpus": "probe"})
    assert not res.failed, res.get("msg")
    assert [s["name"] for s in res["states"]] == ["POLL", deep]  # the baseline always comes along
    assert res["cpu"] == 0 and res["limited_cpus"] == "0"
    assert knobs() == saved_knobs


def test_check_mode_plans_and_measures_nothing(module_runner, saved_knobs):
    res = module_runner("wake_latency_probe", {"loops": 100000, "interval_us": 1000}, check=True)
    assert not res.failed and not res.changed
    assert res["expected_seconds"] >= 200
    assert "count" not in res["states"][0] and "baseline" not in res
    assert knobs() == saved_knobs


@pytest.mark.parametrize("args, message", [
    ({"states": ["C6"]}, "unknown C-state(s) C6; this host's states are: POLL"),
    ({"cpu": 4095}, "CPU 4095 is not an online CPU with cpuidle states"),
    ({"priority": 100}, "option priority: must be >= 0 and <= 99, got 100"),
    ({"interval_us": 10}, "option interval_us: must be >= 50 and <= 1000000, got 10"),
    ({"governor": "teo-nonexistent"}, "'teo-nonexistent' is not available on this host"),
    ({"settle_s": -1}, "option settle_s: must be >= 0 and <= 60, got -1"),
])
def test_bad_input_fails_clearly_and_changes_nothing(module_runner, saved_knobs, args, message):
    res = module_runner("wake_latency_probe", args)
    assert res.failed and message in res["msg"], res.get("msg")
    assert knobs() == saved_knobs


def test_terminated_mid_measurement_restores(saved_knobs):
    """SIGTERM to the module while it measures (as a task timeout would): settings come back."""
    if saved_knobs[str(GOVERNOR)] != "haltpoll":
        pytest.skip("this kernel's cpuidle governor is not haltpoll: the module's governor switch is not visible from outside")
    cmd = [str(VENV_BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-M", str(REPO / "library"),
           "-m", "wake_latency_probe", "-a", '{"loops": 20000, "interval_us": 1000}',
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(REPO))
    try:
        deadline = time.monotonic() + 60
        while GOVERNOR.read_text().strip() != "menu" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert GOVERNOR.read_text().strip() == "menu", "the measurement never started"
        time.sleep(0.5)
        # the module process: a descendant of our ansible process running the AnsiballZ payload
        module_pid = None
        for pid in _descendants(proc.pid):
            cmdline = Path("/proc/%d/cmdline" % pid).read_bytes().split(b"\0")
            if cmdline and cmdline[0] == TARGET_PYTHON.encode() and any(b"AnsiballZ_wake_latency_probe" in c
                                                                        for c in cmdline):
                module_pid = pid
        assert module_pid, "module process not found"
        probe = [pid for pid in _descendants(module_pid)
                 if Path("/proc/%d/comm" % pid).read_text().strip() == "cyclictest"]
        assert probe, "cyclictest is not running under the module"
        os.kill(module_pid, signal.SIGTERM)
        proc.communicate(timeout=60)
        time.sleep(0.5)
        assert not any(Path("/proc/%d" % pid).exists() for pid in probe), "cyclictest outlived the module"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert knobs() == saved_knobs


def _descendants(root):
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


FACT = Path("/etc/ansible/facts.d/fleetnap.fact")


@pytest.fixture
def saved_fact():
    existed = FACT.exists()
    dir_existed = FACT.parent.exists()
    old = FACT.read_bytes() if existed else None
    yield
    if existed:
        FACT.write_bytes(old)
    else:
        FACT.unlink(missing_ok=True)
        if not dir_existed and FACT.parent.exists() and not any(FACT.parent.iterdir()):
            FACT.parent.rmdir()
            if not any(FACT.parent.parent.iterdir()):
                FACT.parent.parent.rmdir()


def test_playbook_stores_results_and_merges_the_fact_file(tmp_path, saved_knobs, saved_fact):
    import json
    from html.parser import HTMLParser

    FACT.parent.mkdir(parents=True, exist_ok=True)
    FACT.write_text(json.dumps({"resume": {"end_to_end_ms": 812.5}, "wake_latency_us": {"C9": 1.0}}))
    results = tmp_path / "results"
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, "-e", "wake_latency_measure_results_dir=%s" % results,
           "-e", "wake_latency_measure_loops=300", "-e", "wake_latency_measure_metrics_dir=%s" % (tmp_path / "prom"),
           str(REPO / "playbooks/measure_wake_latency.yml")]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert knobs() == saved_knobs
    stored = json.loads(FACT.read_text())
    assert stored["resume"] == {"end_to_end_ms": 812.5}  # other keys kept
    assert stored["wake_latency_us"]["C9"] == 1.0  # states not measured now are kept
    host = json.loads((results / "localhost.json").read_text())
    assert host["host"] == "localhost" and host["restored"]
    assert not {"changed", "failed", "invocation"} & set(host)  # the module's result, not Ansible's keys
    # the NIC method's line, as the module words it, in the table and on the page
    assert "method (b) NIC launch time: " + host["nic_method"]["summary"] in proc.stdout
    assert host["nic_method"]["summary"].startswith(("possible on ", "unavailable: "))
    for name in state_names():
        assert stored["wake_latency_us"][name] == host["worst_us"][name]
        assert name in proc.stdout  # the declared-vs-measured table is printed
    prom = (tmp_path / "prom" / "fleetnap_wake_latency.prom").read_text().splitlines()
    for row in host["states"]:
        assert 'fleetnap_wake_latency_seconds{quantile="1",state="%s"} %.9g' % (row["name"], row["max_us"] / 1e6) in prom
        assert 'fleetnap_wake_latency_samples{state="%s"} 300' % row["name"] in prom
        declared = row["declared_us"] / 1e6
        assert 'fleetnap_wake_latency_declared_seconds{state="%s"} %s' % (
            row["name"], "%d" % declared if declared == int(declared) else "%.9g" % declared) in prom
    page = (results / "index.html").read_text()
    HTMLParser().feed(page)
    assert page.count("<svg") == 1 + len(state_names())  # scatter + one histogram per state
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")

    # check mode: a plan, no files, nothing measured
    FACT.write_text("{}")
    proc = subprocess.run(cmd[:-1] + ["--check", cmd[-1]], capture_output=True, text=True, env=env,
                          cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "would measure" in proc.stdout and FACT.read_text() == "{}"
    assert "NIC launch-time method: " + host["nic_method"]["summary"] in proc.stdout
    assert knobs() == saved_knobs
