"""Every boolean a role or playbook reads is cast where it is read.

On the command line `-e name=false` is the string "false", which a bare `when: name` or
`{{ x if name else y }}` takes as true (ansible-core 2.19 refuses it as a conditional). A role's
argument spec validates such a value but does not convert it. So each read of a boolean variable
must be `name | bool`, or the whole value handed to a module option or role variable that has its
own type (`option: "{{ name }}"`), where the module converts it or the receiving role casts it
(checked here too, as that role's own variable). tests/modules/test_role_booleans.py checks the
effect on a host.
"""

from __future__ import annotations

import re

import yaml

from conftest import REPO


def role_booleans():
    out = {}
    for spec in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        role = spec.parent.parent.name
        for entry in (yaml.safe_load(spec.read_text())["argument_specs"] or {}).values():
            for name, opt in (entry.get("options") or {}).items():
                if opt.get("type") == "bool":
                    out[name] = role
    return out


def playbook_booleans():
    out = {}
    for book in sorted(REPO.glob("playbooks/*.yml")):
        for play in yaml.safe_load(book.read_text()) or []:
            for name, value in (play.get("vars") or {}).items():
                if isinstance(value, bool) and not name.startswith("_"):
                    out[name] = book.name
    return out


def sources():
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "roles/*/templates/*.j2",
                    "playbooks/*.yml", "playbooks/tasks/*.yml", "playbooks/templates/*.j2"):
        yield from sorted(REPO.glob(pattern))


JINJA = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
CONDITIONS = ("when", "failed_when", "changed_when", "until", "that")


def expressions(path):
    """(where, Jinja expression, handed_on) for every expression the file evaluates; handed_on is
    True for a value that is exactly "{{ name }}" (passed whole to a typed option)."""
    if path.suffix == ".j2":
        for m in JINJA.finditer(path.read_text()):
            yield str(path.name), (m.group(1) or m.group(2)), False
        return

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, k)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v, key)
        elif isinstance(node, str):
            if key in CONDITIONS:
                yield key, node, False
            else:
                whole = re.fullmatch(r"\s*\{\{\s*([a-z_]+)\s*\}\}\s*", node)
                for m in JINJA.finditer(node):
                    yield key, (m.group(1) or m.group(2)), bool(whole)
    yield from walk(yaml.safe_load(path.read_text()))


def bare_reads(name: str, expression: str) -> bool:
    """True when the expression reads `name` somewhere without `| bool`."""
    rest = re.sub(r"\b%s\s*\|\s*bool\b" % name, "", expression)
    return bool(re.search(r"(?<![.'\"\w])%s\b" % name, rest))


def test_the_booleans_are_found():
    roles, books = role_booleans(), playbook_booleans()
    assert {"latency_profile_pm_qos", "latency_profile_manage_sleep", "ptp_clock_install_packages",
            "ptp_clock_set_kernel_tai", "gear_member_power_ok", "node_exporter_residency_collector",
            "gear_shift_power_ok", "gear_shift_ipmi_cycle_parked", "gear_shift_soft_fallback_hard",
            "gear_schedule_dry_run"} <= set(roles)
    assert {"gear_shift_power_ok"} <= set(books)


def test_every_boolean_is_cast_where_it_is_read():
    names = sorted(set(role_booleans()) | set(playbook_booleans()))
    offenders = []
    for path in sources():
        for key, expr, handed_on in expressions(path):
            for name in names:
                if not handed_on and bare_reads(name, expr):
                    offenders.append("%s (%s): %s" % (path.relative_to(REPO), key, " ".join(expr.split())))
    assert not offenders, "booleans read without | bool:\n" + "\n".join(offenders)


def test_the_check_catches_a_bare_read():
    assert bare_reads("latency_profile_pm_qos", "latency_profile_pm_qos")
    assert bare_reads("x_on", " 1 if x_on else 0 ")
    assert bare_reads("x_on", "not x_on or y")
    assert not bare_reads("x_on", "x_on | bool")
    assert not bare_reads("x_on", "'x_on is false'")
    assert not bare_reads("x_on", "hostvars[h].x_on_other")
