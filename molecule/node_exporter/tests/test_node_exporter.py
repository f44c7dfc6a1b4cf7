"""node_exporter role, verified on lab5 itself (pytest-testinfra): Debian's node_exporter runs
with its textfile collector on fleetnap's directory and answers on port 9100, and the C-state
residency collector is one generated script run by an enabled systemd timer (no cron entry), whose
output file node_exporter serves without a parse error."""

from __future__ import annotations

testinfra_hosts = ["ansible://lab5"]

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
RESIDENCY = "fleetnap-cstate-residency"
METRICS = ("python3 -c 'import urllib.request as u; "
           "print(u.urlopen(\"http://127.0.0.1:9100/metrics\", timeout=20).read().decode())'")


def test_node_exporter_runs_on_fleetnaps_textfile_directory(host):
    assert host.package("prometheus-node-exporter").is_installed
    service = host.service("prometheus-node-exporter")
    assert service.is_enabled and service.is_running
    args = host.file("/etc/default/prometheus-node-exporter").content_string
    assert "--collector.textfile.directory=%s " % TEXTFILE_DIR in args
    assert "--web.listen-address=:9100" in args
    assert host.file(TEXTFILE_DIR).is_directory


def test_node_exporter_listens_on_9100(host):
    assert host.socket("tcp://0.0.0.0:9100").is_listening or host.socket("tcp://:::9100").is_listening


def test_the_residency_collector_is_one_script_on_an_enabled_timer(host):
    assert host.file("/usr/local/lib/fleetnap").listdir() == [RESIDENCY]
    script = host.file("/usr/local/lib/fleetnap/" + RESIDENCY)
    assert script.user == "root" and script.mode & 0o100 and not script.mode & 0o022
    timer = host.service(RESIDENCY + ".timer")
    assert timer.is_enabled and timer.is_running
    assert "OnUnitActiveSec=60" in host.file("/etc/systemd/system/%s.timer" % RESIDENCY).content_string.replace(" ", "")
    assert not host.file("/etc/cron.d/" + RESIDENCY).exists


def test_node_exporter_serves_the_collectors_file_without_a_parse_error(host):
    prom = host.file("%s/fleetnap_cstate_residency.prom" % TEXTFILE_DIR)
    assert prom.is_file
    metrics = host.check_output(METRICS).splitlines()
    assert 'node_textfile_scrape_error 0' in metrics
    mtimes = [m for m in metrics if m.startswith("node_textfile_mtime_seconds{")]
    assert any("fleetnap_cstate_residency.prom" in m for m in mtimes), mtimes
