# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Linux CPU list syntax ("0-3,8-11", "0-15:2") parsed and formatted."""

from __future__ import annotations


class CpuListError(ValueError):
    """A CPU list that cannot be parsed."""


# The largest NR_CPUS a Linux kernel can be built with (CONFIG_NR_CPUS_RANGE_END on x86_64 and
# arm64 is 8192): a CPU number at or above it is refused before any range is built, so a
# typo like 0-999999999 costs nothing.
MAX_CPUS = 8192


def _digits(text):
    """True for ASCII digits only: str.isdigit() also accepts '²' and '٣', which int() then
    refuses or reads as another digit."""
    return text.isascii() and text.isdigit()


def _int(digits):
    """int() of ASCII digits; a number of more digits than any CPU number is refused without
    converting it (int() refuses more than 4300 digits, and nothing needs that many)."""
    if len(digits) > 12:
        raise CpuListError("a CPU number of %d digits is beyond the largest a kernel can have (%d)"
                           % (len(digits), MAX_CPUS - 1))
    return int(digits)


def _cpu_number(value, text):
    if value >= MAX_CPUS:
        shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
        raise CpuListError("CPU number %d in CPU list %s is beyond the largest a kernel can have (%d)"
                           % (value, shown, MAX_CPUS - 1))
    return value


def parse_cpulist(text):
    """Parse a kernel CPU list into a sorted list of unique ints.

    Accepts what the kernel prints (``0-3,8-11``), strides (``0-15:2``), whitespace,
    an empty string (no CPUs), and Python ints or lists of ints/strings.
    """
    if text is None:
        return []
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise CpuListError("CPU number %d is negative" % text)
        return [_cpu_number(text, text)]
    if isinstance(text, (list, tuple, set)):
        cpus = set()
        for item in text:
            cpus.update(parse_cpulist(item))
        return sorted(cpus)
    if not isinstance(text, str):
        raise CpuListError("CPU list must be a string like '0-3,8-11', got %r" % (text,))
    cpus = set()
    for chunk in text.replace(" ", "").replace("\n", "").split(","):
        if not chunk:
            continue
        stride = 1
        body = chunk
        if ":" in chunk:
            body, _sep, stride_text = chunk.partition(":")
            if not _digits(stride_text) or len(stride_text) > 5 or not 1 <= int(stride_text) < MAX_CPUS:
                raise CpuListError("bad stride in CPU list element %r" % chunk)
            stride = int(stride_text)
        if "-" in body:
            lo_text, _sep, hi_text = body.partition("-")
            if not (_digits(lo_text) and _digits(hi_text)):
                raise CpuListError("bad range %r in CPU list %r (expected e.g. 0-3)" % (chunk, text))
            lo, hi = _cpu_number(_int(lo_text), text), _cpu_number(_int(hi_text), text)
            if hi < lo:
                raise CpuListError("range %r in CPU list %r runs backwards" % (chunk, text))
            cpus.update(range(lo, hi + 1, stride))
        else:
            if not _digits(body) or stride != 1:
                raise CpuListError("bad CPU number %r in CPU list %r" % (chunk, text))
            cpus.add(_cpu_number(_int(body), text))
    return sorted(cpus)


def format_cpulist(cpus):
    """Format CPU numbers as the kernel does: ``[0,1,2,3,8]`` -> ``"0-3,8"``."""
    nums = sorted(set(int(c) for c in cpus))
    parts = []
    start = prev = None
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(str(start) if start == prev else "%s-%s" % (start, prev))
            start = prev = n
    if start is not None:
        parts.append(str(start) if start == prev else "%d-%d" % (start, prev))
    return ",".join(parts)
