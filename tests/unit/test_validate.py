"""The shared input checks (module_utils/fleetnap/validate.py): each refusal names the option."""

from __future__ import annotations

import math

import pytest

from ansible.module_utils.fleetnap.validate import (
    ParamError, name, number, numbers, path, read_text_file, text, under_root, validate)

NUMBER_BAD = [
    (number(lo=0, lo_open=True, hi=86400), float("nan"), "must be a finite number, got nan"),
    (number(lo=0, lo_open=True, hi=86400), float("inf"), "must be a finite number, got inf"),
    (number(lo=0, lo_open=True, hi=86400), -math.inf, "must be a finite number, got -inf"),
    (number(lo=0, lo_open=True, hi=86400), 0, "must be > 0 and <= 86400, got 0"),
    (number(lo=0, lo_open=True, hi=86400), 86401, "must be > 0 and <= 86400, got 86401"),
    (number(lo=0, hi=10, integer=True), 2.5, "must be a whole number, got 2.5"),
    (number(lo=0), True, "must be a number, got True"),
    (number(lo=0), "ten", "must be a number, got 'ten'"),
    (number(lo=1, hi=5, hi_open=True), 5, "must be >= 1 and < 5, got 5"),
]


@pytest.mark.parametrize("check,value,message", NUMBER_BAD)
def test_numbers_that_are_refused(check, value, message):
    with pytest.raises(ParamError) as err:
        check("timeout", value)
    assert str(err.value) == "option timeout: " + message


@pytest.mark.parametrize("value", [0.001, 1, 86400, "3.5"])
def test_numbers_that_pass(value):
    assert number(lo=0, lo_open=True, hi=86400)("timeout", value) == float(value)


def test_a_list_of_numbers_names_the_element():
    check = numbers(lo=0, hi=1e6)
    assert check("measured", {"C1": 2, "C6": 133.0}) == {"C1": 2, "C6": 133.0}
    with pytest.raises(ParamError, match=r"option measured\[1\]: must be a finite number, got nan"):
        check("measured", {"C1": 2, "C6": float("nan")})
    with pytest.raises(ParamError, match="at most 3 values"):
        numbers(max_items=3)("samples", [1, 2, 3, 4])
    with pytest.raises(ParamError, match="must be a list of numbers"):
        check("samples", "1,2")


@pytest.mark.parametrize("value,message", [
    ("relative/dir", "must be an absolute path"),
    ("/var/lib/../../etc", "'..' is not allowed"),
    ("/tmp/a\0b", "NUL byte"),
    (42, "must be a path, got 42"),
    ("/" + "a" * 5000, "longer than PATH_MAX"),
])
def test_paths_that_are_refused(value, message):
    with pytest.raises(ParamError, match="option metrics_dir: .*" + message):
        path()("metrics_dir", value)


def test_paths_that_pass():
    assert path()("metrics_dir", "/var/lib/node-exporter") == "/var/lib/node-exporter"
    assert path(allow_empty=True)("dest", "") == ""
    assert path(absolute=False)("rel", "a/b") == "a/b"


def test_names_and_text():
    iface = name(r"^[A-Za-z0-9_.:-]{1,15}$", "an interface name")
    assert iface("device", "enp3s0") == "enp3s0"
    with pytest.raises(ParamError, match="option device: must be an interface name, got 'eth0; reboot'"):
        iface("device", "eth0; reboot")
    with pytest.raises(ParamError, match="control characters"):
        text()("title", "a\nb")
    with pytest.raises(ParamError, match="at most 5 characters"):
        text(max_len=5)("title", "abcdefg")


def test_validate_runs_the_table_in_order_and_skips_unset_options():
    checks = {"a": number(lo=0), "b": path(), "c": number(hi=1)}
    validate({"a": 1, "b": None, "c": 0}, checks)
    with pytest.raises(ParamError, match="option a:"):
        validate({"a": -1, "b": "rel", "c": 5}, checks)
    with pytest.raises(ParamError, match="option b:"):
        validate({"a": 1, "b": "rel", "c": 5}, checks)


def test_read_text_file_names_the_file(tmp_path):
    good = tmp_path / "ok.json"
    good.write_text('{"a": 1}')
    assert read_text_file(str(good)) == '{"a": 1}'
    bad = tmp_path / "record.json"
    bad.write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(ParamError, match=r"restore record .*record.json is not UTF-8 text \(byte 7\)"):
        read_text_file(str(bad), "restore record")
    with pytest.raises(ParamError, match="cannot read file .*missing: No such file"):
        read_text_file(str(tmp_path / "missing"))
    with pytest.raises(ParamError, match="larger than 4 bytes"):
        read_text_file(str(good), limit=4)


def test_under_root_refuses_what_leaves_it(tmp_path):
    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    (root / "sys" / "out").symlink_to("/etc")
    assert under_root(str(root), "/sys/x") == str(root / "sys" / "x")
    with pytest.raises(ParamError, match="leaves the root"):
        under_root(str(root), "/sys/../../etc/passwd")
    with pytest.raises(ParamError, match="leaves the root"):
        under_root(str(root), "/sys/out/passwd")
    assert under_root("/", "/etc/hostname") == "/etc/hostname"
