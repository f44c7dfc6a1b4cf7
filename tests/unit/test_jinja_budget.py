"""Logic in Python, orchestration in YAML (issue 36): long Jinja expressions stay few.

Every ``{{ }}`` and ``{% %}`` in playbooks/ and roles/ (task files, vars, defaults, templates),
whitespace folded, is measured; at most JINJA_LONG_MAX of them may be longer than 120 characters.
A new long expression is a decision or a computation that belongs in a module or module_utils
(with a unit test), or a table row that names its parts first.
"""

import re

from conftest import REPO

LIMIT = 120
JINJA_LONG_MAX = 10
EXPR = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
SUFFIXES = {".yml", ".yaml", ".j2"}


def expressions(text):
    return [" ".join(m.group(0).split()) for m in EXPR.finditer(text)]


def long_expressions():
    found = []
    for base in ("playbooks", "roles"):
        for path in sorted((REPO / base).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES:
                found += ["%s: %s" % (path.relative_to(REPO), e)
                          for e in expressions(path.read_text()) if len(e) > LIMIT]
    return found


def test_the_measure_folds_whitespace_and_counts_both_kinds():
    text = "a: >-\n  {{ x\n     | y }}\n{% set z = 1 %}\n{# a comment is not an expression #}"
    assert expressions(text) == ["{{ x | y }}", "{% set z = 1 %}"]
    assert [len(e) > LIMIT for e in expressions("{{ %s }}" % ("x" * 114))] == [False]
    assert [len(e) > LIMIT for e in expressions("{{ %s }}" % ("x" * 115))] == [True]


def test_few_long_jinja_expressions_in_playbooks_and_roles():
    found = long_expressions()
    assert sum(1 for path in (REPO / "roles").rglob("*.j2")) > 10     # the walk reaches the templates
    assert len(found) <= JINJA_LONG_MAX, "%d Jinja expressions over %d characters (at most %d):\n%s" % (
        len(found), LIMIT, JINJA_LONG_MAX, "\n".join(found))
