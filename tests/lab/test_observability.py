"""node_exporter on the guests and a real Prometheus scraping them: fleetnap metrics with the right values."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from test_measure_resume import INVENTORY, playbook

pytestmark = pytest.mark.lab
PROMETHEUS = shutil.which("prometheus")


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


@pytest.fixture
def prometheus(lab, tmp_path):
    """A function that starts a real Prometheus scraping every guest's node_exporter."""
    if not PROMETHEUS:
        pytest.skip("Debian package prometheus not installed (make setup installs it)")
    procs = []

    def start():
        return _start(tmp_path, procs)
    yield start
    for proc, log in procs:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _start(tmp_path, procs):
    inv = yaml.safe_load((INVENTORY / "hosts.yml").read_text())["all"]["children"]["lab"]["hosts"]
    # Only the textfile collector (collect[]), every 5 s: a full node_exporter scrape of six TCG
    # guests every few seconds would load them more than the tests do.
    config = {"global": {"scrape_interval": "5s", "scrape_timeout": "4s"},
              "scrape_configs": [{"job_name": "fleetnap-lab", "params": {"collect[]": ["textfile"]}, "static_configs": [
                  {"targets": [v["fleetnap_metrics_address"]], "labels": {"host": name}} for name, v in inv.items()]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, "--config.file=%s" % (tmp_path / "prometheus.yml"),
                             "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    procs.append((proc, log))
    base = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return base
        except OSError:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "prometheus.log").read_text()
        time.sleep(0.5)


def wait_for(base, expr, count, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        got = query(base, expr)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(2)


def test_node_exporter_role_and_prometheus_see_fleetnap_metrics(lab, prometheus, tmp_path):
    hosts = sorted(lab.hosts)
    proc = playbook("node_exporter.yml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    again = playbook("node_exporter.yml")
    assert again.returncode == 0 and all("%s " % h in again.stdout for h in hosts)
    assert all(" changed=0 " in line for line in again.stdout.splitlines() if line.startswith(tuple(hosts))), \
        again.stdout[-2000:]
    # The gate publishes its decision (lab profile "interactive": 200 us).
    proc = playbook("apply_profile.yml", "-e", "fleetnap_artifacts_dir=%s" % tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # The resume measurement is on the hosts (the suite measured them before; else measure lab1).
    if "resume" not in json.loads(lab.ssh("lab1", "cat /etc/ansible/facts.d/fleetnap.fact || echo {}").stdout):
        proc = playbook("measure_resume.yml", "-e", "fleetnap_targets=lab1", "-e", "measure_resume_cycles=1",
                        "-e", "measure_resume_results_dir=%s" % (tmp_path / "resume"))
        assert proc.returncode == 0, proc.stdout[-3000:]
    prometheus = prometheus()
    budgets = wait_for(prometheus, "fleetnap_cpuidle_budget_seconds", len(hosts))
    assert budgets == {h: pytest.approx(200e-6) for h in hosts}
    # The resume measurement's metrics agree with what was stored on the host.
    stored = json.loads(lab.ssh("lab1", "cat /etc/ansible/facts.d/fleetnap.fact").stdout)["resume"]
    got = wait_for(prometheus, 'fleetnap_resume_kernel_seconds{stat="max",host="lab1"}', 1)
    assert got["lab1"] == pytest.approx(stored["kernel_ms"] / 1000, rel=1e-6)
    got = wait_for(prometheus, 'fleetnap_resume_end_to_end_seconds{stat="max",host="lab1"}', 1)
    assert got["lab1"] == pytest.approx(stored["end_to_end_ms"] / 1000, rel=1e-6)
    # node_exporter's own view of the textfile directory: no parse errors.
    errors = wait_for(prometheus, "node_textfile_scrape_error", len(hosts))
    assert set(errors.values()) == {0.0}
