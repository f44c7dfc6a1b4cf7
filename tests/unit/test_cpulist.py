import pytest

from ansible.module_utils.fleetnap.cpulist import CpuListError, format_cpulist, parse_cpulist


@pytest.mark.parametrize("text,expected", [
    ("0-3,8-11", [0, 1, 2, 3, 8, 9, 10, 11]),
    ("5", [5]),
    ("", []),
    (" 0 - 2 , 4", [0, 1, 2, 4]),
    ("0-7:2", [0, 2, 4, 6]),
    ("3,1,2,1", [1, 2, 3]),
    ([0, "2-3"], [0, 2, 3]),
    (7, [7]),
    ("0-3\n", [0, 1, 2, 3]),
])
def test_parse(text, expected):
    assert parse_cpulist(text) == expected


@pytest.mark.parametrize("bad", ["a", "3-1", "1-", "-1", "0-3:0", "1:2", "1,,x", -1, 1.5])
def test_parse_rejects(bad):
    with pytest.raises(CpuListError):
        parse_cpulist(bad)


@pytest.mark.parametrize("cpus,text", [
    ([0, 1, 2, 3, 8, 9, 10, 11], "0-3,8-11"),
    ([5], "5"),
    ([], ""),
    ([3, 1, 2, 7], "1-3,7"),
])
def test_format(cpus, text):
    assert format_cpulist(cpus) == text


def test_roundtrip_kernel_lists():
    for text in ("0-319", "0-1,4-5,9", "0,2,4,6"):
        assert format_cpulist(parse_cpulist(text)) == text


@pytest.mark.parametrize("text", ["0-999999999", "999999999", 10 ** 12, "0-8192", ["1", "0-99999999999"], "0-8191:99999999999"])
def test_absurd_cpu_numbers_are_refused_before_anything_is_built(text):
    import tracemalloc
    tracemalloc.start()
    with pytest.raises(CpuListError, match="beyond the largest a kernel can have|bad stride"):
        parse_cpulist(text)
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000     # no range of a billion CPUs was built


def test_the_largest_cpu_list_a_kernel_can_have():
    assert len(parse_cpulist("0-8191")) == 8192
