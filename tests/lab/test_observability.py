"""node_exporter on the guests and on the controller, and a real Prometheus scraping them.

The guests' node_exporters (role node_exporter) export what fleetnap's modules write on the hosts:
the latency gate's decision, the sleep policy, the resume measurement and the C-state residency
collector the role installs with a systemd timer. A node_exporter on the controller (Debian's
binary, started here on a free loopback port, as playbooks/node_exporter.yml's controller play
would configure it) exports what gear_shift.yml writes on the controller: one real shift down by
one gear and back up, and Prometheus shows the gear, every host's power state and the result.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import date

import pytest

from labtools import why
import yaml

from ansible.module_utils.fleetnap.gear import groups_for
from test_measure_resume import INVENTORY, playbook

pytestmark = pytest.mark.lab
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")
RESIDENCY_FILE = "fleetnap_cstate_residency.prom"


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
    if not PROMETHEUS:
        pytest.skip("Debian package prometheus not installed (make setup installs it)")

    def start(extra_jobs=(), hosts=None):
        # Only the textfile collector (collect[]), every 5 s: a full node_exporter scrape of six TCG
        # guests every few seconds would load them more than the tests do.
        config = {"global": {"scrape_interval": "5s", "scrape_timeout": "4s"},
                  "scrape_configs": [{"job_name": "fleetnap-lab", "params": {"collect[]": ["textfile"]},
                                      "static_configs": [{"targets": [v["fleetnap_metrics_address"]],
                                                          "labels": {"host": name}}
                                                         for name, v in lab_hosts().items()
                                                         if hosts is None or name in hosts]}] + list(extra_jobs)}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        daemons("prometheus", [PROMETHEUS, "--config.file=%s" % (tmp_path / "prometheus.yml"),
                               "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                               "--web.listen-address=127.0.0.1:%d" % port], base + "/-/ready")
        return base
    return start


def wait_for(base, expr, count, timeout=90, want=None):
    """Poll until the query has ``count`` series (and, with ``want``, exactly these values)."""
    deadline = time.monotonic() + timeout
    while True:
        got = query(base, expr)
        if (len(got) >= count and (want is None or got == want)) or time.monotonic() > deadline:
            return got
        time.sleep(2)


# Two guests of different racks and gear groups: the guests are identical, and the role and two
# profile runs on all six TCG guests cost this test eight minutes of a CI run (the role's own
# idempotence and what it leaves on a guest are molecule's node_exporter scenario, verified there
# by testinfra).
OBSERVED = ("lab1", "lab6")


def test_node_exporter_role_and_prometheus_see_fleetnap_metrics(lab, prometheus, tmp_path):
    hosts = sorted(OBSERVED)
    assert set(hosts) <= set(lab.hosts)
    first = hosts[0]
    targets = ("-e", "fleetnap_targets=%s" % ",".join(hosts))
    # One collection costs a TCG guest ~3.5 s of CPU (about 50 ms on hardware): every 60 s here.
    interval = ("-e", "node_exporter_residency_interval_s=60")
    proc = playbook("node_exporter.yml", *targets, *interval)
    assert proc.returncode == 0, why(proc)
    # The residency collector runs from its systemd timer on every guest (systemd runs there).
    cstates = {}
    for h in hosts:
        out = lab.ssh(h, "systemctl is-enabled fleetnap-cstate-residency.timer; "
                         "systemctl is-active fleetnap-cstate-residency.timer; "
                         "test -e /etc/cron.d/fleetnap-cstate-residency && echo cron || echo nocron; "
                         "ls -d /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]* 2>/dev/null | wc -l").stdout.split()
        assert out[:3] == ["enabled", "active", "nocron"], (h, out)
        # The collector is one generated file (fleetnap's module_utils embedded), nothing else.
        assert lab.ssh(h, "ls -A /usr/local/lib/fleetnap").stdout.split() == ["fleetnap-cstate-residency"], h
        cstates[h] = int(out[3])
    # The gate publishes its decision (lab profile "interactive": 200 us), and the sleep policy.
    # The profile may mask the sleep targets (no resume measurement within budget), which later
    # tests that suspend guests must not inherit: undo it afterwards, whatever happens.
    try:
        proc = playbook("apply_profile.yml", *targets, "-e", "fleetnap_artifacts_dir=%s" % tmp_path)
        assert proc.returncode == 0, why(proc)
        _check_metrics(lab, prometheus, tmp_path, hosts, first, cstates)
    finally:
        undo = playbook("apply_profile.yml", *targets, "-e", "fleetnap_profile_state=absent",
                        "-e", "fleetnap_artifacts_dir=%s" % (tmp_path / "undo"))
    assert undo.returncode == 0, why(undo)
def _check_metrics(lab, prometheus, tmp_path, hosts, first, cstates):
    # The resume measurement is on the hosts (the suite measured them before; else measure one).
    if "resume" not in json.loads(lab.ssh(first, "cat /etc/ansible/facts.d/fleetnap.fact || echo {}").stdout):
        proc = playbook("measure_resume.yml", "-e", "fleetnap_targets=%s" % first, "-e", "measure_resume_cycles=1",
                        "-e", "measure_resume_results_dir=%s" % (tmp_path / "resume"))
        assert proc.returncode == 0, why(proc)
    prometheus = prometheus(hosts=hosts)
    budgets = wait_for(prometheus, "fleetnap_cpuidle_budget_seconds", len(hosts))
    assert budgets == {h: pytest.approx(200e-6) for h in hosts}
    # The resume measurement's metrics agree with what was stored on the host.
    stored = json.loads(lab.ssh(first, "cat /etc/ansible/facts.d/fleetnap.fact").stdout)["resume"]
    got = wait_for(prometheus, 'fleetnap_resume_kernel_seconds{stat="max",host="%s"}' % first, 1)
    assert got[first] == pytest.approx(stored["kernel_ms"] / 1000, rel=1e-6)
    got = wait_for(prometheus, 'fleetnap_resume_end_to_end_seconds{stat="max",host="%s"}' % first, 1)
    assert got[first] == pytest.approx(stored["end_to_end_ms"] / 1000, rel=1e-6)

    # The sleep policy's metrics agree with what sleep_policy left on each guest.
    for h in hosts:
        out = lab.ssh(h, "cat /sys/power/mem_sleep; head -1 /etc/systemd/sleep.conf.d/fleetnap.conf; "
                         "ls -l /etc/systemd/system/ | grep -c 'suspend.target -> /dev/null' || true").stdout
        lines = out.splitlines()
        mode = [w.strip("[]") for w in lines[0].split() if w.startswith("[")][0]
        allow = lines[1].split("allow=")[1].rstrip(").")
        suspend_masked = float(lines[2].strip())
        want_allowed = {"deep": {"deep": 1.0, "s2idle": 1.0}, "s2idle": {"deep": 0.0, "s2idle": 1.0},
                        "none": {"deep": 0.0, "s2idle": 0.0}}[allow]
        for state, value in want_allowed.items():
            got = wait_for(prometheus, 'fleetnap_sleep_state_allowed{host="%s",state="%s"}' % (h, state), 1)
            assert got == {h: value}, (h, allow, state)
        got = wait_for(prometheus, 'fleetnap_sleep_mem_sleep_mode{host="%s",mode="%s"}' % (h, mode), 1)
        assert got == {h: 1.0}
        assert query(prometheus, 'sum by (host) (fleetnap_sleep_mem_sleep_mode{host="%s"})' % h) == {h: 1.0}
        got = wait_for(prometheus, 'fleetnap_sleep_target_masked{host="%s",target="suspend.target"}' % h, 1)
        assert got == {h: suspend_masked}
        # S3 is what the guests offer.
        assert query(prometheus, 'fleetnap_sleep_state_offered{host="%s",state="deep"}' % h) == {h: 1.0}

    # The residency collector: the timer keeps rewriting its file (node_exporter's mtime of it
    # moves), the file parses, and it has one series per CPU and idle state the guest has (TCG
    # guests have no cpuidle driver: none; a real host has them all).
    got = wait_for(prometheus, 'changes(node_textfile_mtime_seconds{file=~".*/%s"}[150s]) >= 1' % RESIDENCY_FILE,
                   len(hosts), timeout=180)
    assert set(got) == set(hosts), got
    for h in hosts:
        series = query(prometheus, 'count(fleetnap_cstate_entries_total{host="%s"}) or vector(0)' % h)
        assert list(series.values()) == [float(cstates[h])], (h, series)
    # node_exporter's own view of the textfile directory: no parse errors.
    errors = wait_for(prometheus, "node_textfile_scrape_error", len(hosts))
    assert set(errors.values()) == {0.0}


@pytest.fixture
def all_back(lab):
    """Every guest running again after the test, whatever a failed shift left behind."""
    yield lab
    time.sleep(2)
    for name in sorted(lab.hosts):
        lab.restore(name)


def test_gear_metrics_from_the_controller_node_exporter(all_back, prometheus, daemons, tmp_path):
    """One gear down and back up; Prometheus reads the controller's textfile directory."""
    lab = all_back
    if not NODE_EXPORTER:
        pytest.skip("Debian package prometheus-node-exporter not installed (make setup installs it)")
    hosts = sorted(lab.hosts)
    metrics_dir = tmp_path / "controller-metrics"      # fleetnap_controller_metrics_dir
    metrics_dir.mkdir()
    port = free_port()
    daemons("node-exporter", [NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port,
                              "--collector.disable-defaults", "--collector.textfile",
                              "--collector.textfile.directory=%s" % metrics_dir],
            "http://127.0.0.1:%d/metrics" % port)
    base = prometheus([{"job_name": "fleetnap-controller", "static_configs": [
        {"targets": ["127.0.0.1:%d" % port], "labels": {"role": "controller"}}]}])
    ctl = '{job="fleetnap-controller"}'

    on2, off2 = groups_for(2, 3, date.today())       # what gear_shift.yml picks for -e gear=2 today
    inv = lab_hosts()
    down = sorted(h for h in hosts if inv[h]["fleetnap_gear_group"] in off2)
    assert down and len(down) < len(hosts)
    # A generous SSH-greeting probe: TCG guests on a loaded machine can take seconds to greet.
    common = ["-e", "gear_state_dir=%s" % (tmp_path / "gear"), "-e", "fleetnap_controller_metrics_dir=%s" % metrics_dir,
              "-e", "gear_probe_timeout_s=20"]

    t0 = time.monotonic()
    proc = playbook("gear_shift.yml", "-e", "gear=2", *common)
    down_s = time.monotonic() - t0
    assert proc.returncode == 0, why(proc)
    assert (metrics_dir / "fleetnap_gear.prom").exists() and not (tmp_path / "gear/metrics").exists()
    assert wait_for(base, "fleetnap_gear" + ctl, 1, want={None: 2.0}) == {None: 2.0}
    asleep = wait_for(base, 'fleetnap_host_power_state{job="fleetnap-controller",state="asleep"}', len(hosts))
    assert asleep == {h: (1.0 if h in down else 0.0) for h in hosts}
    on = query(base, 'fleetnap_host_power_state{job="fleetnap-controller",state="on"}')
    assert on == {h: (0.0 if h in down else 1.0) for h in hosts}
    assert query(base, 'fleetnap_gear_shift_last_result{job="fleetnap-controller",result="ok"}') == {None: 1.0}
    for h in down:
        assert lab.qmp_status(h) == "suspended", h

    t0 = time.monotonic()
    proc = playbook("gear_shift.yml", "-e", "gear=3", *common)
    up_s = time.monotonic() - t0
    assert proc.returncode == 0, why(proc)
    assert wait_for(base, "fleetnap_gear" + ctl, 1, want={None: 3.0}) == {None: 3.0}
    on = wait_for(base, 'fleetnap_host_power_state{job="fleetnap-controller",state="on"}', len(hosts),
                  want={h: 1.0 for h in hosts})
    assert on == {h: 1.0 for h in hosts}
    assert query(base, 'sum(fleetnap_host_power_state{job="fleetnap-controller",state!="on"})') == {None: 0.0}
    results = {r: query(base, 'fleetnap_gear_shift_last_result{job="fleetnap-controller",result="%s"}' % r)
               for r in ("ok", "degraded", "refused", "failed")}
    assert results == {"ok": {None: 1.0}, "degraded": {None: 0.0}, "refused": {None: 0.0}, "failed": {None: 0.0}}
    assert query(base, "fleetnap_gear_target" + ctl) == {None: 3.0}
    duration = query(base, "fleetnap_gear_shift_duration_seconds" + ctl)[None]
    assert 0 < duration < up_s
    assert query(base, 'node_textfile_scrape_error{job="fleetnap-controller"}') == {None: 0.0}
    print("gear shift 3->2 %.1f s, 2->3 %.1f s (recorded %.1f s)" % (down_s, up_s, duration))
