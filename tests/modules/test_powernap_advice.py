"""powernap_advice through Ansible (localhost, the target's /usr/bin/python3)."""

import xml.etree.ElementTree as ET

import pytest

NS = {"s": "http://www.w3.org/2000/svg"}
S = 0.038


def test_slow_resume_stays_awake(module_runner):
    r = module_runner("powernap_advice", {"transition_latency_s": 0.65, "utilization": 0.3})
    assert not r.failed, r
    assert not r.changed
    assert r["advice"] == "stay-awake"
    assert r["saves_power"] is False and r["keeps_objective"] is False
    # equal suspend and resume add exactly the latency to the mean response time (M/M/1 base)
    assert r["baseline"]["response_time_s"] == pytest.approx(S / (1 - 0.3))
    assert r["powernap"]["response_time_s"] == pytest.approx(S / (1 - 0.3) + 0.65)
    assert r["powernap"]["response_time_rel"] > 10
    assert r["crossover_utilization"] == pytest.approx(0.0147, abs=0.001)
    assert "resume 650 ms at 30 % load" in r["reason"] and "> objective 1.5x" in r["reason"]
    assert r["model"]["sleep_power_fraction"] == 0.05 and r["model"]["suspend_latency_s"] == 0.65


def test_fast_resume_at_low_load_sleeps(module_runner):
    r = module_runner("powernap_advice", {"transition_latency_s": 0.01, "utilization": 0.05})
    assert not r.failed, r
    assert r["advice"] == "sleep", r["reason"]
    assert r["powernap"]["power_rel"] < r["dvfs"]["power_rel"] < 1
    assert r["powernap"]["response_time_rel"] == pytest.approx((S / 0.95 + 0.01) / (S / 0.95))
    assert r["crossover_utilization"] == pytest.approx(0.421, abs=0.001)


def test_series_uses_the_95th_percentile(module_runner):
    series = [0.02] * 95 + [0.6] * 5  # p95 = 0.02 (nearest rank 95)
    r = module_runner("powernap_advice", {"transition_latency_s": 0.01, "utilization": series})
    assert r["utilization"] == 0.02 and r["utilization_summary"] == "p95 of 100 samples"
    r = module_runner("powernap_advice", {"transition_latency_s": 0.01, "utilization": series,
                                          "utilization_percentile": 99})
    assert r["utilization"] == 0.6


def test_objective_and_dvfs_requirement_change_the_advice(module_runner):
    args = {"transition_latency_s": 0.05, "utilization": 0.25}
    r = module_runner("powernap_advice", args)
    assert r["advice"] == "stay-awake" and r["beats_dvfs"] is False  # above the 16 % crossover
    r = module_runner("powernap_advice", dict(args, require_beating_dvfs=False, response_time_objective=2.5))
    assert r["advice"] == "sleep", r["reason"]
    assert r["powernap"]["power_rel"] < 1 and r["keeps_objective"]


def test_svg_written_once_then_idempotent(module_runner, tmp_path):
    dest = tmp_path / "host1-powernap.svg"
    args = {"transition_latency_s": 0.2, "utilization": [0.1, 0.3, 0.2], "svg_dest": str(dest)}
    r = module_runner("powernap_advice", args)
    assert not r.failed, r
    assert r.changed and r["svg_dest"] == str(dest)
    root = ET.parse(str(dest)).getroot()
    panels = root.findall("s:g[@class='panel']", NS)
    assert len(panels) == 2
    for p in panels:
        labels = [pl.get("data-label") for pl in p.findall("s:polyline[@class='series']", NS)]
        assert labels == ["PowerNap Tt = 10 ms", "PowerNap Tt = 50 ms", "PowerNap Tt = 100 ms",
                          "PowerNap Tt = 200 ms", "PowerNap Tt = 650 ms", "DVFS"]
        host = p.findall("s:line[@class='host']", NS)
        assert len(host) == 1
    # the host's own line is drawn thicker
    widths = {pl.get("data-label"): pl.get("stroke-width") for pl in panels[0].findall("s:polyline", NS)}
    assert widths["PowerNap Tt = 200 ms"] > widths["PowerNap Tt = 50 ms"]
    assert "resume 200 ms, utilisation 30 %" in root.find("s:title", NS).text
    mtime = dest.stat().st_mtime_ns
    r2 = module_runner("powernap_advice", args)
    assert not r2.failed and not r2.changed
    assert dest.stat().st_mtime_ns == mtime


def test_svg_check_and_diff_mode(module_runner, tmp_path):
    dest = tmp_path / "p.svg"
    args = {"transition_latency_s": 0.05, "utilization": 0.2, "svg_dest": str(dest)}
    r = module_runner("powernap_advice", args, check=True, diff=True)
    assert not r.failed, r
    assert r.changed and not dest.exists()
    assert r["diff"]["before"] == "" and r["diff"]["after"].startswith("<?xml")
    module_runner("powernap_advice", args)
    r = module_runner("powernap_advice", dict(args, utilization=0.4), check=True, diff=True)
    assert r.changed
    assert r["diff"]["before"] == dest.read_text() != r["diff"]["after"]
    assert "utilisation 20 %" in dest.read_text()  # check mode left the file alone


@pytest.mark.parametrize("args,msg", [
    ({"transition_latency_s": 0.05, "utilization": 1.2}, "utilization 1.2 is outside [0, 1)"),
    ({"transition_latency_s": 0.05, "utilization": 45}, "percentage? give the busy fraction"),
    ({"transition_latency_s": 0.05, "utilization": -0.2}, "outside [0, 1)"),
    ({"transition_latency_s": 0.05, "utilization": [0.1, "x"]}, "utilization[1] must be a number"),
    ({"transition_latency_s": 0.05, "utilization": []}, "empty list"),
    ({"transition_latency_s": 0.05, "utilization": ""}, "utilization is missing"),
    ({"transition_latency_s": -0.05, "utilization": 0.2}, "option transition_latency_s: must be >= 0"),
    ({"transition_latency_s": 0.05, "suspend_latency_s": -1, "utilization": 0.2}, "option suspend_latency_s: must be >= 0"),
    ({"utilization": 0.2}, "missing required arguments: transition_latency_s"),
    ({"transition_latency_s": 0.05}, "missing required arguments: utilization"),
    ({"transition_latency_s": 0.05, "utilization": 0.2, "sleep_power_fraction": 0.7}, "above idle_power_fraction"),
    ({"transition_latency_s": 0.05, "utilization": 0.2, "response_time_objective": 0.5}, "must be >= 1"),
])
def test_bad_input_fails_clearly(module_runner, args, msg):
    r = module_runner("powernap_advice", args)
    assert r.failed
    assert msg in r["msg"], r["msg"]


def test_bad_svg_dest_changes_nothing(module_runner, tmp_path):
    dest = tmp_path / "missing" / "p.svg"
    r = module_runner("powernap_advice", {"transition_latency_s": 0.05, "utilization": 0.2, "svg_dest": str(dest)})
    assert r.failed and "does not exist; create %s first" % (tmp_path / "missing") in r["msg"]
    assert not (tmp_path / "missing").exists()
    r = module_runner("powernap_advice", {"transition_latency_s": 0.05, "utilization": 1.5,
                                          "svg_dest": str(tmp_path / "p.svg")})
    assert r.failed and not (tmp_path / "p.svg").exists()
    assert list(tmp_path.iterdir()) == []
