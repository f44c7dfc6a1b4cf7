import pytest

from conftest import materialize
from datasets import raw_states


@pytest.mark.parametrize("dataset", ["ivbep1", "milan0", "lnl0"])
def test_facts_from_captured_machines(dataset, tmp_path, module_runner):
    root = materialize(dataset, tmp_path / "root")
    res = module_runner("cpuidle_info", {"sysfs_root": str(root)}, check=True)
    assert not res.failed and not res.changed
    facts = res["ansible_facts"]["fleetnap_cpuidle"]
    raw = raw_states(dataset)
    names = [raw[0][i]["name"] for i in sorted(raw[0])]
    assert [s["name"] for s in facts["states"]] == names
    assert len(facts["cpus"]) == len(raw)
    assert facts["cpus"][0]["states"][1]["latency_us"] == int(raw[0][1]["latency"])
    assert set(facts["pm_qos_resume_latency_us"].values()) <= {0}
    small = module_runner("cpuidle_info", {"sysfs_root": str(root), "per_cpu": False})
    assert "cpus" not in small["ansible_facts"]["fleetnap_cpuidle"]


def test_live_kernel(module_runner):
    res = module_runner("cpuidle_info", {})
    facts = res["ansible_facts"]["fleetnap_cpuidle"]
    assert facts["online_cpus"]
    assert isinstance(facts["sleep"]["states"], list)
