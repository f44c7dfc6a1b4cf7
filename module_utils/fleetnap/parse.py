# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One way to parse a number, a boolean and a JSON document, for everything fleetnap reads.

- **Numbers**: ASCII digits only (``str.isdigit()`` accepts ``²`` and ``٣``, which ``int()``
  then refuses or reads as another digit), at most ``MAX_DIGITS`` digits before any conversion
  (a 400-digit integer never reaches ``float()``), finite, and within the bounds the caller gives.
  ``finite()`` does the same for a value that is already a Python number (a huge int from JSON
  or YAML is refused before ``float()`` raises OverflowError).
- **Booleans** read back from a record are real booleans or Ansible's boolean words; never the
  truthiness of a string (``"0"`` and ``"no"`` are false, ``"maybe"`` is an error).
- **JSON**: size-bounded, nesting-bounded (checked before the parser recurses), no NaN or
  Infinity, no lone surrogate in any string or key (such text cannot be written back as UTF-8),
  numbers as above. Errors name the file or answer and what is wrong.

Every error is a ParseError (a ValueError). Standard library only (runs on targets).
"""

from __future__ import annotations

import json
import math
import re

MAX_DIGITS = 30             # beyond any counter (2**64 has 20 digits) or a sane option value
MAX_DEPTH = 64              # fleetnap's records nest a handful of levels
MAX_JSON = 16 * 1024 * 1024

_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?\Z")
TRUE_WORDS = ("yes", "on", "1", "true", "y", "t")
FALSE_WORDS = ("no", "off", "0", "false", "n", "f")


class ParseError(ValueError):
    """A number, boolean or document that cannot be used; the message names where it came from."""


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(value, where, lo, hi):
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        parts = []
        if lo is not None:
            parts.append(">= %s" % lo)
        if hi is not None:
            parts.append("<= %s" % hi)
        raise ParseError("%s: must be %s, got %s" % (where, " and ".join(parts), _show(value)))
    return value


def parse_int(text, where, lo=None, hi=None):
    """A whole number written in ASCII digits (an optional sign, surrounding whitespace allowed)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise ParseError("%s: must be a whole number in ASCII digits, got %s" % (where, _show(text)))
    if not isinstance(text, str):
        raise ParseError("%s: must be a whole number, got %s" % (where, _show(text)))
    body = text.strip()
    if not _INT.match(body):
        raise ParseError("%s: must be a whole number in ASCII digits, got %s" % (where, _show(text)))
    if len(body.lstrip("+-")) > MAX_DIGITS:
        raise ParseError("%s: a number of %d digits is beyond any value fleetnap accepts (at most %d)"
                         % (where, len(body.lstrip("+-")), MAX_DIGITS))
    return _bounds(int(body), where, lo, hi)


def parse_number(text, where, lo=None, hi=None):
    """A finite decimal number written in ASCII (``12``, ``-0.5``, ``1e3``)."""
    if not isinstance(text, str):
        raise ParseError("%s: must be a number, got %s" % (where, _show(text)))
    body = text.strip()
    if not _FLOAT.match(body):
        raise ParseError("%s: must be a decimal number in ASCII digits, got %s" % (where, _show(text)))
    digits = len(re.sub(r"[^0-9]", "", body.split("e")[0].split("E")[0]))
    if digits > MAX_DIGITS + 10:
        raise ParseError("%s: a number of %d digits is beyond any value fleetnap accepts" % (where, digits))
    value = float(body)
    if not math.isfinite(value):
        raise ParseError("%s: must be a finite number, got %s" % (where, _show(text)))
    if value.is_integer() and "." not in body and "e" not in body.lower():
        value = int(body)
    return _bounds(value, where, lo, hi)


def finite(value, where, lo=None, hi=None, integer=False):
    """A Python number (not a bool), finite, bounded; a huge int is refused before float()."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError("%s: must be a number, got %s" % (where, _show(value)))
    if isinstance(value, int):
        if abs(value) >= 10 ** MAX_DIGITS:
            raise ParseError("%s: a number of %d digits is beyond any value fleetnap accepts (at most %d)"
                             % (where, len(str(abs(value))), MAX_DIGITS))
    elif not math.isfinite(value):
        raise ParseError("%s: must be a finite number, got %s" % (where, value))
    if integer and isinstance(value, float):
        if not value.is_integer():
            raise ParseError("%s: must be a whole number, got %s" % (where, value))
        value = int(value)
    return _bounds(value, where, lo, hi)


def number_of(value, where, lo=None, hi=None, integer=False):
    """finite() for a number, parse_number()/parse_int() for a string (what a record or an option
    written in YAML may hold)."""
    if isinstance(value, str):
        return parse_int(value, where, lo, hi) if integer else parse_number(value, where, lo, hi)
    return finite(value, where, lo, hi, integer)


def boolean(value, where):
    """A real boolean, or one of Ansible's boolean words (case-insensitive); anything else is an
    error, never Python truthiness (``"0"`` is false, ``"maybe"`` is refused)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise ParseError("%s: must be true or false (or yes/no, on/off, 1/0), got %s" % (where, _show(value)))


# --- JSON -----------------------------------------------------------------------------------------

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


def _depth(text):
    deepest = depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _check_strings(doc, where, depth=0):
    """No lone surrogate in any string or key (json.loads makes them from \\ud800 escapes)."""
    if isinstance(doc, str):
        try:
            doc.encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("%s holds a string with a lone surrogate (%s): not text that can be written back"
                             % (where, _show(doc)))
    elif isinstance(doc, dict):
        for key, value in doc.items():
            _check_strings(key, where, depth + 1)
            _check_strings(value, where, depth + 1)
    elif isinstance(doc, list):
        for value in doc:
            _check_strings(value, where, depth + 1)


def loads(data, where, limit=MAX_JSON, max_depth=MAX_DEPTH):
    """A JSON document from text or bytes: bounded in size and nesting, strict, no NaN/Infinity,
    integers of at most MAX_DIGITS digits, finite floats, no lone surrogates. ParseError names
    ``where`` (a file, an answer) and what is wrong."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > limit:
            raise ParseError("%s is larger than %d bytes" % (where, limit))
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError("%s is not UTF-8 text (byte %d)" % (where, exc.start))
    if not isinstance(data, str):
        raise ParseError("%s: expected JSON text, got %s" % (where, _show(data)))
    if len(data) > limit:
        raise ParseError("%s is larger than %d bytes" % (where, limit))
    deepest = _depth(data)
    if deepest > max_depth:
        raise ParseError("%s nests %d levels deep, more than the %d fleetnap reads" % (where, deepest, max_depth))

    def constant(name):
        raise ParseError("%s holds %s, which is not a JSON number" % (where, name))

    def integer(text):
        if len(text.lstrip("-")) > MAX_DIGITS:
            raise ParseError("%s holds a number of %d digits, beyond any value fleetnap accepts"
                             % (where, len(text.lstrip("-"))))
        return int(text)

    def real(text):
        value = float(text)
        if not math.isfinite(value):
            raise ParseError("%s holds %s, which is not a finite number" % (where, text[:40]))
        return value

    try:
        doc = json.loads(data, parse_constant=constant, parse_int=integer, parse_float=real)
    except ParseError:
        raise
    except RecursionError:
        raise ParseError("%s nests too deeply" % where)
    except ValueError as exc:
        raise ParseError("%s is not valid JSON: %s" % (where, exc))
    _check_strings(doc, where)
    return doc


# --- dates in records -----------------------------------------------------------------------------

DATE_MIN = 946684800            # 2000-01-01T00:00:00Z: no fleetnap record is older
DATE_AHEAD_S = 366 * 86400      # a clock a year fast is already wrong; later is not a record's date


def in_date_window(epoch, where, now=None):
    """``epoch`` (Unix seconds) when it lies in 2000-01-01 .. now + 1 year, else ParseError naming
    ``where`` (a file and line): a record dated in year 1 or 9999 would make every loop over the
    time it claims endless."""
    import time as _time
    epoch = finite(epoch, where)
    latest = (_time.time() if now is None else now) + DATE_AHEAD_S
    if not DATE_MIN <= epoch <= latest:
        try:
            shown = _time.strftime("%Y-%m-%d", _time.gmtime(epoch))
        except (OverflowError, OSError, ValueError):
            shown = "%r Unix seconds" % epoch
        raise ParseError("%s is outside 2000-01-01 .. a year from now (it is %s), the dates fleetnap accepts "
                         "in a record (a clock that was wrong, or an edited file)" % (where, shown))
    return epoch
