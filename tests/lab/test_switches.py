"""Switches typed on the command line act as they say on a real kernel: the realtime profile
(PM QoS on) applied to lab3 with `-e latency_profile_pm_qos=false` (a string, as typed) leaves the
CPUs' PM QoS and /dev/cpu_dma_latency as they were; `=true` sets both; absent puts them back."""

from __future__ import annotations

import pytest

from labtools import why

from test_measure_resume import playbook

pytestmark = pytest.mark.lab
HOST = "lab3"
READ = ("cat /sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us | sort -u; "
        "python3 -c 'import struct; f = open(\"/dev/cpu_dma_latency\", \"rb\"); "
        "print(struct.unpack(\"i\", f.read(4))[0])'")


def qos(lab):
    out = lab.ssh(HOST, READ).stdout.split()
    return {"pm_qos_resume_latency_us": out[:-1], "cpu_dma_latency_us": int(out[-1])}


def test_pm_qos_switch_given_as_a_string(lab, tmp_path):
    before = qos(lab)
    assert before["pm_qos_resume_latency_us"] != ["20"] and before["cpu_dma_latency_us"] != 20, before
    common = ["-e", "fleetnap_targets=%s" % HOST, "-e", "fleetnap_profile=realtime",
              "-e", "fleetnap_artifacts_dir=%s" % tmp_path]
    try:
        proc = playbook("apply_profile.yml", *common, "-e", "latency_profile_pm_qos=false",
                        "-e", "latency_profile_global_latency=false")
        assert proc.returncode == 0, why(proc)
        assert qos(lab) == before

        proc = playbook("apply_profile.yml", *common, "-e", "latency_profile_pm_qos=true",
                        "-e", "latency_profile_global_latency=true")
        assert proc.returncode == 0, why(proc)
        assert qos(lab) == {"pm_qos_resume_latency_us": ["20"], "cpu_dma_latency_us": 20}
    finally:
        undo = playbook("apply_profile.yml", *common, "-e", "fleetnap_profile_state=absent")
    assert undo.returncode == 0, why(undo)
    assert qos(lab) == before
