"""The metrics check the tests use (tests/promcheck.py) catches what the textfile collector refuses,
and prom.render() refuses the same things before writing a file."""

from __future__ import annotations

import pytest

from promcheck import assert_valid_metrics, check
from ansible.module_utils.fleetnap.prom import MetricError, render


def test_promtool_catches_a_bad_escape_and_duplicates():
    assert check('# HELP fleetnap_x a\\b\n# TYPE fleetnap_x gauge\nfleetnap_x 1\n')
    assert check('# HELP fleetnap_x a\n# TYPE fleetnap_x gauge\nfleetnap_x{h="a"} 1\nfleetnap_x{h="a"} 2\n')
    assert check('# HELP fleetnap_x_seconds a\n# TYPE fleetnap_x_seconds gauge\nfleetnap_x_seconds 1\n') == []


@pytest.mark.parametrize("metric,words", [
    ({"name": "fleetnap_x\n", "help": "h", "samples": []}, "must match"),
    ({"name": "fleetnap_x", "help": None, "samples": [{"labels": {"a": "1"}, "value": 1}]}, None),
    ({"name": "fleetnap_x", "help": ["h"], "samples": []}, "help must be a string"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {"host\n": "a"}, "value": 1}]}, "bad label name"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {"host": "a", "Host": "b"}, "value": 1}]},
     "differ only in case"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {"host": "a"}, "value": 1},
                                                    {"labels": {"host": "a"}, "value": 2}]}, "same labels"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {"__name": "a"}, "value": 1}]}, "bad label name"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {"h": "a\ud800"}, "value": 1}]}, "lone surrogate"),
    ({"name": "fleetnap_x", "help": "h", "samples": [{"labels": {}, "value": 10 ** 400}]}, "not a number"),
])
def test_render_refuses_what_the_collector_would_reject(metric, words):
    if words is None:       # help None falls back to the name: valid
        assert_valid_metrics(render([metric]))
        return
    with pytest.raises(MetricError, match=words):
        render([metric])


def test_help_with_backslash_and_newline_is_escaped_and_accepted():
    text = render([{"name": "fleetnap_x_seconds", "help": "C:\\path\nsecond line", "type": "gauge",
                    "samples": [{"labels": {"host": 'q"uote\\n'}, "value": 1.5}]}])
    assert "C:\\\\path\\nsecond line" in text
    assert_valid_metrics(text)
