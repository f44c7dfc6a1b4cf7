# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist expressions (``node[1-3,7-8],login``), as Slurm's power-saving programs get them.

slurmctld calls SuspendProgram, ResumeProgram and ResumeFailProgram with one argument, a hostlist
expression of the nodes. :func:`expand` turns it into node names in the order
``scontrol show hostnames`` prints them (tests/unit/test_hostlist.py compares the two on the same
expressions, against Debian 12's Slurm 22.05), :func:`compress` writes names back as one.

The grammar is Slurm's for well-formed expressions: items separated by commas, spaces or tabs
(empty items skipped; other white space is refused, which Slurm would take into a name); an item is text and bracketed ranges, each bracket's ranges
(``1-3``, ``7``, comma-separated) expanding in turn, several brackets as their product
(``a[1-2]b[3-4]``: a1b3 a1b4 a2b3 a2b4; with three or more, in Slurm's order: the last bracket
fastest, then the first, the second...); a range's numbers are zero-padded to the width of its
first number as written (``n[009-011]``, ``n[9-011]`` gives n9 n10 n11). Text after the last bracket
is refused, as Slurm 22.05 refuses it. Where Slurm is lenient with a broken expression and makes up
names (``node[1-3`` gives ``node]``, ``n[1-]`` gives ``n1``) this module refuses it: a program that
parks or powers on servers acts only on names that were meant. Node names are letters, digits and
``-_.`` (what a node name can be and what is safe on a command line). Bounded: at most
:data:`MAX_TEXT` characters, :data:`MAX_NAMES` names, numbers in brackets of at most 18 digits
(Slurm takes up to 2**64-1; a node numbered beyond 10**18 is refused here).

Pure standard library (runs in the programs on the slurmctld host, in modules, in plain pytest).
"""

from __future__ import annotations

import itertools
import re

MAX_TEXT = 65536
MAX_NAMES = 65536
_TEXT = re.compile(r"[A-Za-z0-9._-]*\Z")
_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?\Z")


class HostlistError(ValueError):
    """An expression that is not a well-formed hostlist (the message quotes it and says why)."""


def _items(expr):
    """Top-level items: split on commas and white space outside brackets; brackets balanced."""
    items, cur, depth = [], [], 0
    for ch in expr:
        if ch == "[":
            if depth:
                raise HostlistError("hostlist %r: a bracket inside a bracket" % expr)
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError("hostlist %r: a ']' without its '['" % expr)
            depth = 0
        elif not depth and ch in ", \t":
            if cur:
                items.append("".join(cur))
            cur = []
            continue
        elif depth and ch in " \t":
            raise HostlistError("hostlist %r: white space inside a bracket" % expr)
        cur.append(ch)
    if depth:
        raise HostlistError("hostlist %r: a '[' without its ']'" % expr)
    if cur:
        items.append("".join(cur))
    return items


def _ranges(expr, body):
    """The numbers of one bracket, as text with their padding, in order."""
    out = []
    for part in body.split(","):
        m = _RANGE.match(part)
        if not m:
            raise HostlistError("hostlist %r: %r is not a number or a range of numbers (like 1-3)" % (expr, part))
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise HostlistError("hostlist %r: range %r goes down" % (expr, part))
        if hi - lo >= MAX_NAMES:
            raise HostlistError("hostlist %r: range %r has more than %d names" % (expr, part, MAX_NAMES))
        width = len(lo_text)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_item(expr, item):
    parts = re.split(r"\[([^\]]*)\]", item)
    # parts: text, bracket, text, bracket, ..., text (the last text must be empty)
    texts, brackets = parts[0::2], parts[1::2]
    for t in texts:
        if not _TEXT.match(t):
            raise HostlistError("hostlist %r: %r is not a node name (letters, digits, '-', '_', '.')" % (expr, t))
    if brackets and texts[-1]:
        raise HostlistError("hostlist %r: text after the last bracket (%r) is not a hostlist (Slurm refuses it too)"
                            % (expr, texts[-1]))
    numbers = [_ranges(expr, body) for body in brackets]
    total = 1
    for nums in numbers:
        total *= len(nums)
        if total > MAX_NAMES:
            raise HostlistError("hostlist %r: more than %d names" % (expr, MAX_NAMES))
    # Slurm's order (scontrol show hostnames): the last bracket varies fastest, then the first,
    # the second, ... the one before the last slowest (a[1-2]b[1-2]c[1-2]: a1b1c1 a1b1c2 a2b1c1 ...).
    order = list(range(len(brackets) - 2, -1, -1)) + [len(brackets) - 1] if brackets else []
    names = []
    for combo in itertools.product(*[numbers[i] for i in order]):
        chosen = dict(zip(order, combo))
        names.append("".join(t + (chosen[i] if i in chosen else "") for i, t in enumerate(texts)))
    return names


def expand(expr):
    """Node names of a hostlist expression, in ``scontrol show hostnames`` order (duplicates kept,
    as Slurm keeps them; :func:`unique` drops them). Raises HostlistError."""
    if not isinstance(expr, str):
        raise HostlistError("a hostlist must be text, got %s" % type(expr).__name__)
    if len(expr) > MAX_TEXT:
        raise HostlistError("a hostlist of more than %d characters" % MAX_TEXT)
    names = []
    for item in _items(expr):
        names.extend(_expand_item(expr, item))
        if len(names) > MAX_NAMES:
            raise HostlistError("hostlist %r...: more than %d names" % (expr[:80], MAX_NAMES))
    return names


def unique(names):
    """Names in order, each once."""
    seen = set()
    return [n for n in names if not (n in seen or seen.add(n))]


def compress(names):
    """One hostlist expression for ``names``, in their order: a run of names that differ only in a
    trailing number, consecutive and written alike (zero-padded to one width, or not padded),
    becomes a range. expand(compress(names)) == names."""
    if len(names) > MAX_NAMES:
        raise HostlistError("more than %d names for one hostlist" % MAX_NAMES)
    runs = []           # [prefix, width, first, last]; width None: a name without a trailing number
    for name in names:
        if not isinstance(name, str) or not name or not _TEXT.match(name):
            raise HostlistError("%r is not a node name (letters, digits, '-', '_', '.')" % (name,))
        m = re.match(r"(.*?)([0-9]{1,18})\Z", name)
        if not m or (m.group(1) and m.group(1)[-1].isdigit()):
            runs.append([name, None, None, None])       # no number, or one too long for a range
            continue
        prefix, digits = m.group(1), m.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 1
        n = int(digits)
        last = runs[-1] if runs else None
        if last and last[0] == prefix and last[1] == width and n == last[3] + 1:
            last[3] = n
        else:
            runs.append([prefix, width, n, n])
    out = []
    for prefix, width, first, last in runs:
        if width is None:
            out.append(prefix)
        elif first == last:
            out.append(prefix + str(first).zfill(width))
        else:
            out.append("%s[%s-%s]" % (prefix, str(first).zfill(width), str(last).zfill(width)))
    return ",".join(out)
