"""The reference docs list what the code really has: every metric the modules emit is in
docs/metrics.md, every public role variable is in its role's README."""

from __future__ import annotations

import ast
import re

import yaml

from conftest import REPO


def emitted_metrics():
    """Metric names the modules build: string values of a "name" key that start with fleetnap_."""
    names = set()
    files = sorted((REPO / "library").glob("*.py")) + sorted((REPO / "module_utils" / "fleetnap").glob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if (isinstance(k, ast.Constant) and k.value == "name" and isinstance(v, ast.Constant)
                            and isinstance(v.value, str) and v.value.startswith("fleetnap_")):
                        names.add(v.value)
    return names


def test_every_emitted_metric_is_in_docs_metrics():
    names = emitted_metrics()
    assert len(names) > 25, sorted(names)       # the scan finds them (it would pass on nothing)
    doc = (REPO / "docs" / "metrics.md").read_text()
    missing = sorted(n for n in names if not re.search(r"`%s`" % re.escape(n), doc))
    assert missing == [], "metrics emitted but not in docs/metrics.md: %s" % missing


def role_variables(role):
    """Public variables of a role: its defaults and every entry point's options."""
    out = set()
    defaults = REPO / "roles" / role / "defaults" / "main.yml"
    if defaults.exists():
        out |= set((yaml.safe_load(defaults.read_text()) or {}).keys())
    specs = REPO / "roles" / role / "meta" / "argument_specs.yml"
    if specs.exists():
        for entry in (yaml.safe_load(specs.read_text()) or {}).get("argument_specs", {}).values():
            out |= set((entry.get("options") or {}).keys())
    return sorted(v for v in out if not v.startswith("_"))


def test_every_public_role_variable_is_in_its_readme():
    missing = {}
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "README.md").exists())
    assert len(roles) >= 7
    for role in roles:
        readme = (REPO / "roles" / role / "README.md").read_text()
        gone = [v for v in role_variables(role) if "`%s`" % v not in readme]
        if gone:
            missing[role] = gone
    assert missing == {}, "role variables missing from their README: %s" % missing
