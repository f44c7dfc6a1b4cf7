"""wake_latency_measure on lab2, checked on the guest itself (pytest-testinfra): the idle-loop
baseline (no cpuidle driver on a TCG guest) is published for node_exporter, labelled, with no
declared latency; nothing is stored for the gate and no C-state or PM QoS setting changed."""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://lab2"]
PROM = "/var/lib/prometheus/node-exporter/fleetnap_wake_latency.prom"
KNOBS = ("cd /sys/devices/system/cpu && { cat cpuidle/current_driver cpuidle/current_governor 2>&1; "
         "for f in cpu*/cpuidle/state*/disable cpu*/power/pm_qos_resume_latency_us; do "
         "[ -e \"$f\" ] && echo \"$f=$(cat \"$f\")\"; done; "
         "cat /etc/ansible/facts.d/fleetnap.fact 2>/dev/null || echo no-fact-file; }")


def test_the_idle_loop_baseline_is_published(host):
    prom = host.file(PROM)
    assert prom.is_file and prom.mode == 0o644
    text = prom.content_string
    assert 'fleetnap_wake_latency_samples{state="idle-loop"} 300' in text
    assert 'fleetnap_wake_latency_seconds{quantile="1",state="idle-loop"}' in text
    assert "fleetnap_wake_latency_declared_seconds" not in text


def test_no_setting_changed_and_nothing_stored_for_the_gate(host):
    before = host.file("/run/fleetnap-molecule/knobs").content_string
    # (the fact file is part of the snapshot: a stored worst case would differ)
    assert host.check_output(KNOBS).rstrip("\n") == before.rstrip("\n")
    fact = host.file("/etc/ansible/facts.d/fleetnap.fact")
    assert not fact.exists or "wake_latency_us" not in json.loads(fact.content_string)
