# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input checks every module runs before it reads or changes anything.

AnsibleModule's argument_spec checks types; what it lets through is checked here, from one table
per module next to its argument_spec::

    CHECKS = {
        "timeout": number(lo=0, lo_open=True, hi=86400),      # seconds: finite, > 0, <= a day
        "metrics_dir": path(),                                 # absolute, no NUL, no '..'
        "device": name(r"^[A-Za-z0-9_.:-]{1,15}$", "an interface name"),
    }
    check_params(module, CHECKS)      # fails with "option timeout: must be ..." and returns nothing

NaN and infinity pass every ``< 0`` test, so numbers are checked for being finite first; every
number has an upper bound, so nothing is built or waited for from an absurd value. A failure
names the option, says what is wrong and what was given. Standard library only (runs on targets).
"""

from __future__ import annotations

import math
import os
import re

from ansible.module_utils import basic
from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.parse import MAX_DIGITS, ParseError, loads


class ParamError(ValueError):
    """An option's value that the module must refuse (the message names the option)."""


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number(lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
    """A finite number (int or float; bools are not numbers) in [lo, hi] (open ends as asked)."""
    def check(opt, value):
        if isinstance(value, bool):
            raise ParamError("option %s: must be a number, got %s" % (opt, _show(value)))
        if isinstance(value, int) and abs(value) >= 10 ** MAX_DIGITS:
            raise ParamError("option %s: a number of %d digits is beyond any value it takes"
                             % (opt, len(str(abs(value)))))
        if isinstance(value, str) and (not value.strip().isascii() or len(value) > MAX_DIGITS + 20):
            raise ParamError("option %s: must be a number in ASCII digits, got %s" % (opt, _show(value)))
        if not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ParamError("option %s: must be a number, got %s" % (opt, _show(value)))
        if not math.isfinite(value):
            raise ParamError("option %s: must be a finite number, got %s" % (opt, value))
        if integer and value != int(value):
            raise ParamError("option %s: must be a whole number, got %s" % (opt, value))
        low_bad = lo is not None and (value <= lo if lo_open else value < lo)
        high_bad = hi is not None and (value >= hi if hi_open else value > hi)
        if low_bad or high_bad:
            raise ParamError("option %s: must be %s, got %s"
                             % (opt, _range_text(lo, hi, lo_open, hi_open), _num(value)))
        return value
    return check


def _num(x):
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def _range_text(lo, hi, lo_open, hi_open):
    parts = []
    if lo is not None:
        parts.append("%s %s" % (">" if lo_open else ">=", _num(lo)))
    if hi is not None:
        parts.append("%s %s" % ("<" if hi_open else "<=", _num(hi)))
    return " and ".join(parts)


def numbers(lo=None, hi=None, lo_open=False, hi_open=False, integer=False, max_items=100000):
    """A list (or a dict's values) of numbers, each as number() checks it."""
    one = number(lo, hi, lo_open, hi_open, integer)

    def check(opt, value):
        items = list(value.values()) if isinstance(value, dict) else value
        if not isinstance(items, (list, tuple)):
            raise ParamError("option %s: must be a list of numbers, got %s" % (opt, _show(value)))
        if len(items) > max_items:
            raise ParamError("option %s: at most %d values, got %d" % (opt, max_items, len(items)))
        for i, item in enumerate(items):
            one("%s[%s]" % (opt, i), item)
        return value
    return check


def path(absolute=True, allow_empty=False):
    """A host path: absolute (a relative one would resolve against / on the target), no NUL byte,
    no '..' component (nothing escapes a root prefix)."""
    def check(opt, value):
        if not isinstance(value, str):
            raise ParamError("option %s: must be a path, got %s" % (opt, _show(value)))
        if value == "" and allow_empty:
            return value
        if "\0" in value:
            raise ParamError("option %s: a path cannot hold a NUL byte" % opt)
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ParamError("option %s: a path cannot hold a control character (a newline, a tab), got %s"
                             % (opt, _show(value)))
        if absolute and not value.startswith("/"):
            raise ParamError("option %s: must be an absolute path (a relative one would be taken "
                             "from / on the host), got %s" % (opt, _show(value)))
        if ".." in value.split("/"):
            raise ParamError("option %s: '..' is not allowed in a path, got %s" % (opt, _show(value)))
        if len(value) > 4096:
            raise ParamError("option %s: a path of %d characters is longer than PATH_MAX" % (opt, len(value)))
        return value
    return check


def name(pattern, what):
    """A name matching pattern (anchored), e.g. an interface or a unit name."""
    rx = re.compile(pattern)

    def check(opt, value):
        if not isinstance(value, str) or not rx.match(value):
            raise ParamError("option %s: must be %s, got %s" % (opt, what, _show(value)))
        return value
    return check


def names(pattern, what, max_items=64):
    """A list of at most max_items names, each matching pattern (anchored), e.g. C-state names."""
    one = name(pattern, what)

    def check(opt, value):
        items(max_items)(opt, value)
        if isinstance(value, dict):
            raise ParamError("option %s: must be a list, got %s" % (opt, _show(value)))
        for i, item in enumerate(value):
            one("%s[%d]" % (opt, i), item)
        return value
    return check


def text(max_len=4096, printable=True):
    """A string of at most max_len characters, without control characters when printable."""
    def check(opt, value):
        if not isinstance(value, str):
            raise ParamError("option %s: must be a string, got %s" % (opt, _show(value)))
        if len(value) > max_len:
            raise ParamError("option %s: at most %d characters, got %d" % (opt, max_len, len(value)))
        if printable and any(ord(c) < 32 and c not in "\t" for c in value):
            raise ParamError("option %s: control characters are not allowed, got %s" % (opt, _show(value)))
        return value
    return check


def validate(params, checks):
    """Run the checks over params (options left unset, i.e. None, are not checked). Raises
    ParamError for the first option that is wrong, in the order of the table."""
    for opt, check in checks.items():
        value = params.get(opt)
        if value is not None:
            check(opt, value)


def check_params(module, checks):
    """validate() for an AnsibleModule: fails the module with the message, before anything else."""
    try:
        validate(module.params, checks)
    except ParamError as exc:
        module.fail_json(msg=str(exc))


def read_text_file(real_path, what="file", limit=16 * 1024 * 1024):
    """A text file's content through the file layer (a regular file, at most limit bytes, strictly
    UTF-8); errors name the path. Raises ParamError (a file fleetnap reads is input too)."""
    try:
        return fileio.read_text(real_path, limit, what=what)
    except fileio.UnsafeFileError as exc:
        raise ParamError(str(exc))
    except (IOError, OSError) as exc:
        raise ParamError("cannot read %s %s: %s" % (what, real_path, exc.strerror or exc))


def read_json_file(real_path, what="file", limit=16 * 1024 * 1024):
    """The JSON document in a file (bounded in size and depth, strict: parse.loads); ParamError
    naming the file otherwise."""
    text = read_text_file(real_path, what, limit)
    try:
        return loads(text, "%s %s" % (what, real_path), limit)
    except ParseError as exc:
        raise ParamError(str(exc))


def under_root(root, host_path):
    """The real path of host_path under root, refusing one that leaves root (.. or a symlink
    pointing outside it)."""
    base = os.path.realpath(root or "/")
    try:
        return fileio.resolve(base, os.path.join(base, host_path.lstrip("/")), host_path)
    except fileio.UnsafeFileError as exc:
        raise ParamError(str(exc))


# --- added on harden-b ---

def directory():
    """An existing directory, given as path() requires (absolute, no NUL, no '..')."""
    as_path = path()

    def check(opt, value):
        as_path(opt, value)
        if not os.path.isdir(value):
            raise ParamError("option %s: %s is not a directory" % (opt, value))
        return value
    return check


def items(max_items):
    """A list (or dict) of at most max_items entries (what each entry is, the module checks)."""
    def check(opt, value):
        if not isinstance(value, (list, tuple, dict)):
            raise ParamError("option %s: must be a list, got %s" % (opt, _show(value)))
        if len(value) > max_items:
            raise ParamError("option %s: at most %d items, got %d" % (opt, max_items, len(value)))
        return value
    return check


def all_of(*checks):
    """Every check in turn (e.g. items(100) and numbers(...))."""
    def check(opt, value):
        for one in checks:
            one(opt, value)
        return value
    return check


class ShapeError(ValueError):
    """A file fleetnap reads (a record, an artifact) does not have the shape it needs; the message
    names the file and the field."""


def shape(doc, where, kind):
    """doc when it is of kind ('object', 'list', 'number', 'whole number', 'string'), else
    ShapeError naming where. A number must be finite (json.loads accepts NaN and Infinity)."""
    ok = {
        "object": lambda v: isinstance(v, dict),
        "list": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "whole number": lambda v: isinstance(v, int) and not isinstance(v, bool),
    }[kind](doc)
    if not ok:
        article = "an" if kind[0] in "aeiou" else "a"
        raise ShapeError("%s must be %s %s, got %s" % (where, article, kind, _show(doc)))
    if kind == "number" and not math.isfinite(doc):
        raise ShapeError("%s must be a finite number, got %s" % (where, doc))
    return doc


def check_output_dir(opt, directory, filename):
    """An output directory (node_exporter's textfile collector, for example): a path as path()
    requires, not a file, and ``filename`` in it not a directory. A missing directory is fine (the
    writer creates it). Checked before anything is written, so a bad one changes nothing."""
    path()(opt, directory)
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise ParamError("option %s: %s exists and is not a directory" % (opt, directory))
    target = os.path.join(directory, filename)
    if os.path.isdir(target):
        raise ParamError("option %s: %s is a directory; fleetnap writes its file there" % (opt, target))
    return directory


def _huge_number(value, where):
    """The option path of the first integer of more than MAX_DIGITS digits in value (the
    module's parameters, however deep), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (where, len(str(abs(value)))) if abs(value) >= 10 ** MAX_DIGITS else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _huge_number(item, "%s.%s" % (where, key) if where else str(key))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _huge_number(item, "%s[%d]" % (where, i))
            if found:
                return found
    return None


def _raw_spec(spec):
    """The argument spec with every option taking anything (type raw), keeping no_log and aliases."""
    out = {}
    for key, opt in spec.items():
        out[key] = dict((k, v) for k, v in opt.items() if k in ("no_log", "aliases"))
        out[key]["type"] = "raw"
    return out


def ansible_module(**kwargs):
    """AnsibleModule(**kwargs), refusing cleanly what Ansible's own conversion cannot take: an
    integer of hundreds of digits given for an int or float option (or inside a dict or list
    option) makes its float() raise OverflowError, and a raw, dict or list option keeps it for the
    module to trip over. Such a number is named, option and digits, with the module's no_log options
    still masked. AnsibleModule is constructed first, so tools
    that read a module's argument spec by replacing it (validate-modules, the tests) see it."""
    # basic's own names looked up at call time (ansible-test's validate-modules replaces them).
    try:
        module = basic.AnsibleModule(**kwargs)
    except OverflowError:
        found = _huge_number(basic._load_params(), "") or ("?", MAX_DIGITS + 1)
        module = basic.AnsibleModule(argument_spec=_raw_spec(kwargs["argument_spec"]),
                                     supports_check_mode=kwargs.get("supports_check_mode", False))
        module.fail_json(msg="option %s: a number of %d digits is beyond any value it takes" % found)
    # Options Ansible does not convert (raw, dict, list) keep such an integer: refused the same way.
    found = _huge_number(module.params, "")
    if found:
        module.fail_json(msg="option %s: a number of %d digits is beyond any value it takes" % found)
    return module
