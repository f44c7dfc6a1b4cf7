"""etf_qdisc checks what its configuration says on its own (tc.check_config) before it reads the
device from sysfs: a bad configuration is reported as such even where the device's TX queues
would fail first (a single-queue NIC, or no device at all)."""

import pytest

from ansible.module_utils.fleetnap import tc
from test_etf_qdisc import cfg      # the module's configuration as etf_qdisc builds it


GOOD_MQPRIO = dict(num_tc=2, priority_map=[0] * 3 + [1] * 13, tc_queues=["1@0", "3@1"])

BAD_CONFIGS = [
    (dict(offload=True, clockid="CLOCK_MONOTONIC"), "offload needs clockid CLOCK_TAI"),
    (dict(root="etf", offload=True, clockid="CLOCK_REALTIME"), "offload needs clockid CLOCK_TAI"),
    (dict(clockid="CLOCK_NOW"), "clockid must be one of"),
    (dict(delta_ns=-1), "delta_ns must be"),
    (dict(handle=0), "handle must be"),
    (dict(num_tc=2), "go together"),
    (dict(priority_map=[0] * 16), "go together"),
    (dict(num_tc=2, tc_queues=["1@0", "1@1"]), "go together"),
    (dict(GOOD_MQPRIO, num_tc=17, priority_map=[0] * 16), "num_tc must be 1..16"),
    (dict(GOOD_MQPRIO, priority_map=[0] * 15), "priority_map must list 16 traffic classes"),
    (dict(GOOD_MQPRIO, priority_map=[2] * 16), "each 0..num_tc-1"),
    (dict(GOOD_MQPRIO, tc_queues=["x@1", "1@1"]), "is not COUNT@OFFSET"),
    (dict(GOOD_MQPRIO, tc_queues=["1@0"]), "one COUNT@OFFSET per traffic class"),
    (dict(GOOD_MQPRIO, tc_queues=["2@0", "2@1"]), "tc_queues 2@0, 2@1 overlap"),
    (dict(GOOD_MQPRIO, etf_queues=[]), "etf_queues must name at least one TX queue"),
    (dict(etf_queues=[]), "etf_queues must name at least one TX queue"),
    (dict(etf_priority=16), "etf_priority must be a socket priority 0..15"),
]


@pytest.mark.parametrize("kw, match", BAD_CONFIGS)
def test_check_config_refuses_without_the_device(kw, match):
    with pytest.raises(tc.TcError, match=match):
        tc.check_config(cfg(**kw))


@pytest.mark.parametrize("kw, match", BAD_CONFIGS)
def test_validate_names_the_config_error_before_the_queue_count(kw, match):
    """One TX queue (mqprio impossible) or four (root etf impossible): the input error still wins."""
    for queues in (1, 4):
        with pytest.raises(tc.TcError, match=match):
            tc.validate(cfg(**kw), queues, "ve0")


@pytest.mark.parametrize("kw", [dict(), GOOD_MQPRIO, dict(root="etf"), dict(GOOD_MQPRIO, etf_queues=[7]),
                                dict(GOOD_MQPRIO, tc_queues=["1@0", "9@1"]),
                                dict(root="etf", num_tc=2, etf_queues=[])])
def test_check_config_leaves_the_device_facts_to_validate(kw):
    """What needs the TX queue count (the default layout, queues beyond the device, etf_queues that
    do not exist; root etf ignores the mqprio options) passes check_config."""
    out = tc.check_config(cfg(**kw))
    if kw.get("root") == "etf":
        assert (out["num_tc"], out["priority_map"], out["tc_queues"], out["etf_queues"]) == (None, None, None, [0])
    elif "num_tc" in kw:
        assert (out["num_tc"], out["priority_map"], out["tc_queues"]) == (2, kw["priority_map"], kw["tc_queues"])
    else:
        assert (out["num_tc"], out["priority_map"], out["tc_queues"]) == (None, None, None)


def test_validate_still_checks_the_device():
    with pytest.raises(tc.TcError, match="fns0 has 1 TX queue"):
        tc.validate(cfg(), 1, "fns0")
    with pytest.raises(tc.TcError, match="need 10 TX queues; ve0 has 4"):
        tc.validate(cfg(**dict(GOOD_MQPRIO, tc_queues=["1@0", "9@1"])), 4, "ve0")
    with pytest.raises(tc.TcError, match=r"etf_queues \[7\] do not exist"):
        tc.validate(cfg(**dict(GOOD_MQPRIO, etf_queues=[7])), 4, "ve0")
    with pytest.raises(tc.TcError, match="root etf times a single-queue device"):
        tc.validate(cfg(root="etf"), 4, "ve0")
    assert tc.validate(cfg(), 4, "ve0")["tc_queues"] == ["1@0", "3@1"]


@pytest.mark.parametrize("args, message", [
    ({"num_tc": 2}, "num_tc, priority_map and tc_queues go together"),
    ({"root": "etf", "offload": "on", "clockid": "CLOCK_MONOTONIC"}, "offload needs clockid CLOCK_TAI"),
    ({"etf_queues": []}, "etf_queues must name at least one TX queue"),
    ({"num_tc": 2, "priority_map": [0] * 16, "tc_queues": ["2@0", "2@1"]}, "tc_queues 2@0, 2@1 overlap"),
])
def test_module_reports_the_config_before_reading_the_device(module_runner, args, message):
    """No such device: reading /sys/class/net/fnnone0 would fail with 'does not exist', yet the
    configuration's error is what the module says (it fails before touching anything)."""
    res = module_runner("etf_qdisc", dict({"device": "fnnone0", "persist": False}, **args))
    assert res.failed, res
    assert message in res["msg"] and "does not exist" not in res["msg"], res["msg"]


def test_module_still_reports_a_missing_device_for_a_good_config(module_runner):
    res = module_runner("etf_qdisc", {"device": "fnnone0", "persist": False})
    assert res.failed and "device 'fnnone0' does not exist" in res["msg"], res.get("msg")
