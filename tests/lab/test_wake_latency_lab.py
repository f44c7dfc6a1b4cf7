"""playbooks/measure_wake_latency.yml on the lab guests (QEMU TCG: no cpuidle driver).

Why the guests have no cpuidle driver, found on the guest itself (so no kernel option can add one):
QEMU's FADT declares C2 and C3 unsupported (P_LVL2_LAT = P_LVL3_LAT = 4095 in
/sys/firmware/acpi/tables/FACP) and there is no _CST, so acpi_idle has only C1 and does not
register; intel_idle needs an Intel CPU with MWAIT (the TCG CPU is AuthenticAMD without MONITOR);
cpuidle-haltpoll (built in) needs KVM's paravirt CPUID and the TCG signature is "TCGTCGTCGTCG",
so even cpuidle_haltpoll.force=1 cannot load it. The playbook must then report "no cpuidle driver",
measure the idle-loop baseline only (labelled), store nothing for the gate, and change nothing.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from labtools import why

from test_measure_resume import playbook

pytestmark = pytest.mark.lab
PROM = "/var/lib/prometheus/node-exporter/fleetnap_wake_latency.prom"
FACT = "/etc/ansible/facts.d/fleetnap.fact"
# Every knob the measurement could touch, plus the gate's fact file.
SNAPSHOT = ("cd /sys/devices/system/cpu && cat cpuidle/current_driver cpuidle/current_governor; "
            "for f in cpu*/cpuidle/state*/disable cpu*/power/pm_qos_resume_latency_us; do "
            "[ -e $f ] && echo $f=$(cat $f); done; cat %s 2>/dev/null || echo no-fact-file" % FACT)


def test_measure_wake_latency_on_guests_without_cpuidle(lab, tmp_path):
    # Two guests, not six (every guest boots the same image; CI's 2 cores pay for each TCG guest
    # measured; two still make the fleet's merge and table); molecule's wake_latency_measure
    # scenario converges the role on lab2.
    hosts = ["lab1", "lab5"]
    targets = ["-e", "fleetnap_targets=%s" % ":".join(hosts)]
    before = dict((h, lab.ssh(h, SNAPSHOT).stdout) for h in hosts)
    had_prom = dict((h, lab.ssh(h, "test -e %s" % PROM, check=False).returncode == 0) for h in hosts)
    results = tmp_path / "wake"
    try:
        # the plan first: check mode measures and writes nothing
        proc = playbook("measure_wake_latency.yml", "--check", *targets,
                        "-e", "wake_latency_measure_results_dir=%s" % results)
        assert proc.returncode == 0, why(proc)
        assert "the idle-loop baseline only (no cpuidle driver)" in proc.stdout
        assert not results.exists()

        proc = playbook("measure_wake_latency.yml", *targets, "-e", "wake_latency_measure_loops=300",
                        "-e", "wake_latency_measure_results_dir=%s" % results)
        assert proc.returncode == 0, why(proc)
        assert "failed=0" in proc.stdout and "unreachable=0" in proc.stdout
        for h in hosts:
            data = json.loads((results / ("%s.json" % h)).read_text())
            assert data["cpuidle_driver"] is None and data["states"] == [] and data["worst_us"] == {}
            loop = data["idle_loop"]
            assert loop["name"] == "idle-loop" and loop["count"] == 300 and "no cpuidle driver" in loop["desc"]
            assert 0 < loop["min_us"] <= loop["median_us"] <= loop["p99_us"] <= loop["p999_us"] <= loop["max_us"]
            assert sum(b[1] for b in loop["histogram"]) == 300
            assert "--default-system" in data["cyclictest"]
            # method (b): the e1000e has a PHC but no ETF offload -> unavailable, with the reason
            assert data["nic_method"]["available"] is False
            assert "lan0 (driver e1000e has no ETF launch-time offload)" in data["nic_method"]["reason"]
            assert [n for n in data["nic_method"]["nics"] if n["name"] == "lan0"][0]["phc"].startswith("/dev/ptp")
            # the per-host table, labelled
            assert "%s (CPU %d, cyclictest, cpuidle driver none" % (h, data["cpu"]) in proc.stdout
            # the metrics, in the file and served by the guest's node_exporter
            prom = lab.ssh(h, "cat %s" % PROM).stdout
            assert 'fleetnap_wake_latency_seconds{quantile="1",state="idle-loop"} %s' % format(
                loop["max_us"] / 1e6, ".9g") in prom
            assert 'fleetnap_wake_latency_samples{state="idle-loop"} 300' in prom
            assert "fleetnap_wake_latency_declared_seconds" not in prom
            served = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % lab[h]["metrics_port"],
                                            timeout=30).read().decode()
            assert 'fleetnap_wake_latency_samples{state="idle-loop"} 300' in served
        assert "method (b) NIC launch time: unavailable" in proc.stdout
        page = (results / "index.html").read_text()
        assert "No cpuidle driver on this host" in page and all(h in page for h in hosts)
        # nothing changed on the hosts: cpuidle/PM QoS knobs and the gate's fact file as before
        for h in hosts:
            assert lab.ssh(h, SNAPSHOT).stdout == before[h]
    finally:
        for h in hosts:
            if not had_prom[h]:
                lab.ssh(h, "rm -f %s" % PROM, check=False)

