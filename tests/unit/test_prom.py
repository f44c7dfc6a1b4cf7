import pytest

from ansible.module_utils.fleetnap.prom import MetricError, render


def test_exposition_format():
    text = render([
        {"name": "fleetnap_resume_kernel_seconds", "help": "Kernel resume.", "samples": [
            {"labels": {"stat": "max"}, "value": 0.1425620000001},
            {"labels": {"stat": "median"}, "value": 0.1}]},
        {"name": "fleetnap_gear_shifts_total", "help": "Shifts.", "type": "counter",
         "samples": [{"labels": {}, "value": 3}]},
        {"name": "fleetnap_resume_slowest_device_seconds", "help": "Slowest.",
         "rows": [{"name": 'ata3 "port"', "phase": "resume", "duration_ms": 312.5}],
         "row_labels": {"device": "name", "phase": "phase"}, "row_value": "duration_ms", "scale": 0.001},
    ])
    assert text.splitlines() == [
        "# HELP fleetnap_gear_shifts_total Shifts.",
        "# TYPE fleetnap_gear_shifts_total counter",
        "fleetnap_gear_shifts_total 3",
        "# HELP fleetnap_resume_kernel_seconds Kernel resume.",
        "# TYPE fleetnap_resume_kernel_seconds gauge",
        'fleetnap_resume_kernel_seconds{stat="max"} 0.142562',
        'fleetnap_resume_kernel_seconds{stat="median"} 0.1',
        "# HELP fleetnap_resume_slowest_device_seconds Slowest.",
        "# TYPE fleetnap_resume_slowest_device_seconds gauge",
        'fleetnap_resume_slowest_device_seconds{device="ata3 \\"port\\"",phase="resume"} 0.3125',
    ]


@pytest.mark.parametrize("metric,match", [
    ({"name": "resume_seconds"}, "must match"),
    ({"name": "fleetnap_x", "type": "histogram"}, "type must be"),
    ({"name": "fleetnap_shifts", "type": "counter"}, "must end in _total"),
    ({"name": "fleetnap_x", "samples": [{"labels": {"bad-label": 1}, "value": 1}]}, "bad label"),
    ({"name": "fleetnap_x", "samples": [{"labels": {}, "value": "fast"}]}, "not a number"),
    ({"name": "fleetnap_x", "rows": [{"v": "x"}], "row_value": "v"}, "no numeric"),
])
def test_bad_metrics(metric, match):
    with pytest.raises(MetricError, match=match):
        render([metric])
