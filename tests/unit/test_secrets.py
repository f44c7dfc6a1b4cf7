"""Unit tests of module_utils/fleetnap/secrets.py, and the argument specs of every module.

- The scrub: every form of a password (the value, each line, base64 at each alignment and in
  both alphabets, URL-encoded, JSON-escaped, repr) is gone from a text and from every string of
  a result; ordinary text is left alone.
- drop_credentials(): keys that name credentials leave a free-form dict, however deep.
- on_command_line(): a password on the ``sh -c`` command line that started a process (what a
  task's ``environment:`` does) is found; one only in the process's environment (exported on
  the controller) is not.
- Every option and suboption of the 29 modules whose name (or alias) names a credential is
  no_log. The specs are read as ansible-test's validate-modules reads them: the module runs to
  its AnsibleModule(...) call, which hands over the argument_spec and stops it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import runpy
import subprocess
import sys
from urllib.parse import quote, quote_plus

import pytest

import ansible.module_utils.basic as basic
from ansible.module_utils.fleetnap import secrets
from ansible.module_utils.fleetnap.secrets import MASK, Scrubber, drop_credentials, is_credential_name
from conftest import REPO

PASSWORD = 'Fn7-"sc/é\\rub\nline-TWO+%&x'      # quotes, slash, backslash, non-ASCII, a newline, URL specials
LINES = PASSWORD.split("\n")


def encodings(pw):
    """Every form of pw a BMC could echo, by name."""
    raw = pw.encode("utf-8")
    out = {
        "raw": pw,
        "json": json.dumps(pw)[1:-1],
        "json, not ASCII-escaped": json.dumps(pw, ensure_ascii=False)[1:-1],
        "base64": base64.b64encode(raw).decode(),
        "base64 of user:password (HTTP Basic)": base64.b64encode(b"admin:" + raw).decode(),
        "base64 after one byte": base64.b64encode(b"x" + raw).decode(),
        "url-safe base64": base64.urlsafe_b64encode(b"ab" + raw).decode(),
        "url-encoded": quote(pw, safe=""),
        "url-encoded, form": quote_plus(pw),
        "url-encoded, lower-case hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(pw, safe="")),
        "repr": repr(pw),
    }
    for i, line in enumerate(pw.split("\n")):
        out["line %d" % i] = line
    return out


def leaks(text, pw=PASSWORD):
    """The forms of pw still readable in text (its lines, the value, and each encoding's middle)."""
    found = []
    for name, form in encodings(pw).items():
        core = form[2:-3] if name.startswith(("base64", "url-safe")) else form   # a base64 edge holds other bits too
        if core and core in text:
            found.append(name)
    return found


@pytest.mark.parametrize("name", sorted(encodings(PASSWORD)))
def test_every_encoding_is_scrubbed_in_a_text(name):
    form = encodings(PASSWORD)[name]
    text = 'BMC said: {"error": "bad login <%s> for admin"}' % form
    out = Scrubber(PASSWORD).text(text)
    assert leaks(out) == [], (name, out)
    assert MASK in out and out.startswith("BMC said:") and out.endswith("for admin\"}")


def test_a_result_is_scrubbed_everywhere_keys_included():
    result = {"msg": "refused %s" % PASSWORD, "list": [base64.b64encode(PASSWORD.encode()).decode(), 3, None],
              json.dumps(PASSWORD): {"deep": [{"x": quote(PASSWORD)}]}, "n": 1.5, "ok": True}
    out = Scrubber(PASSWORD).value(result)
    assert leaks(json.dumps(out, ensure_ascii=False)) == [] and leaks(json.dumps(out)) == []
    assert out["n"] == 1.5 and out["ok"] is True and out["list"][1:] == [3, None]


def test_ordinary_text_is_left_alone_and_short_lines_are_not_forms():
    s = Scrubber("ab\nFn7-long-line")
    assert s.text("the host is on; table abc") == "the host is on; table abc"      # "ab" alone is no form
    assert s.text("x ab\nFn7-long-line y") == "x %s y" % MASK                      # the value itself always is
    assert s.text("Fn7-long-line") == MASK
    assert Scrubber(None, "").text("anything") == "anything"


def test_a_session_token_added_later_is_scrubbed_too():
    s = Scrubber(PASSWORD)
    s.add("tok-7Qx9-stub-session-1")
    assert s.text("X-Auth-Token: tok-7Qx9-stub-session-1") == "X-Auth-Token: %s" % MASK


def test_scrub_before_cutting_short():
    """A text cut before the scrub can keep a prefix of the password no form matches; the clients
    scrub first (this is why)."""
    text = "x" * 290 + PASSWORD
    assert "Fn7-" in text[:300] and "Fn7-" not in Scrubber(PASSWORD).text(text)[:300]


@pytest.mark.parametrize("name, credential", [
    ("bmc_password", True), ("password", True), ("passwd", True), ("prometheus_token", True),
    ("X-Auth-Token", True), ("Authorization", True), ("api_key", True), ("ssh_key", True), ("secret", True),
    ("credentials", True), ("session_id", True),
    ("key", False), ("keys", False), ("monkey", False), ("session_timeout", False), ("session_retries", False),
    ("group", False), ("rack", False), ("power_watts", False),
])
def test_what_names_a_credential(name, credential):
    assert is_credential_name(name) is credential


def test_drop_credentials_however_deep():
    doc = {"group": 1, "rack": "r1", "bmc_password": "x", "sub": {"api_token": "y", "ok": [{"Secret": 1, "k": 2}]},
           "key": "kept"}
    out, dropped = drop_credentials(doc)
    assert out == {"group": 1, "rack": "r1", "sub": {"ok": [{"k": 2}]}, "key": "kept"}
    assert sorted(dropped) == ["bmc_password", "sub.api_token", "sub.ok[0].Secret"]
    assert doc["bmc_password"] == "x"          # the caller's dict is not changed


FIND = ("import sys; sys.path.insert(0, %r); import conftest; from ansible.module_utils.fleetnap import secrets; "
        "import os; print(secrets.on_command_line(os.environ.get('FLEETNAP_BMC_PASSWORD') or 'not-set'))"
        % str(REPO / "tests"))


def test_a_password_on_the_starting_command_line_is_found_one_in_the_environment_is_not():
    pw = "Fn7 cmd'line-pw"
    # what a task's environment: does: VAR=value on the /bin/sh -c command line that runs the module
    line = "FLEETNAP_BMC_PASSWORD=%s %s -c %s && true" % (secrets.shlex.quote(pw), sys.executable,
                                                       secrets.shlex.quote(FIND))
    via_sh = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, cwd=str(REPO))
    assert via_sh.stdout.strip().endswith("'sh')"), via_sh.stdout + via_sh.stderr
    # exported on the controller: in the environment only
    exported = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True, cwd=str(REPO),
                              env=dict(os.environ, FLEETNAP_BMC_PASSWORD=pw))
    assert exported.stdout.strip() == "None", exported.stdout + exported.stderr


def test_a_password_that_only_looks_like_part_of_a_command_line_is_not_found():
    lines = {100: b"/bin/sh\0-c\0/usr/bin/python3 && sleep 0\0", 99: b"ansible-playbook\0play.yml\0"}
    stats = {100: b"100 (sh) S 99 1", 99: b"99 (ansible-playbook) S 1 1"}

    def read(pid, name):
        return lines[pid] if name == "cmdline" else stats[pid]
    assert secrets.on_command_line("python3", pid=100, read=read) is None      # a word, not VAR=value
    lines[100] = b"/bin/sh\0-c\0PW=python3 /usr/bin/python3 && sleep 0\0"
    assert secrets.on_command_line("python3", pid=100, read=read) == (100, "sh")


# ------------------------------------------------------------------------ every module's argument spec

class _Spec(Exception):
    pass


class _Capture(object):
    def __init__(self, argument_spec=None, **_kw):
        raise _Spec(argument_spec)


def argument_specs():
    specs = {}
    real = basic.AnsibleModule
    basic.AnsibleModule = _Capture
    try:
        for path in sorted((REPO / "library").glob("*.py")):
            try:
                runpy.run_path(str(path), run_name="__main__")
            except _Spec as got:
                specs[path.stem] = got.args[0]
    finally:
        basic.AnsibleModule = real
    return specs


def credential_options(spec, where=""):
    for name, opt in spec.items():
        if any(is_credential_name(n) for n in [name] + list(opt.get("aliases") or [])):
            yield where + name, opt
        if opt.get("options"):
            for sub in credential_options(opt["options"], "%s%s[]." % (where, name)):
                yield sub


def test_every_option_that_can_hold_a_credential_is_no_log():
    specs = argument_specs()
    assert len(specs) == len(list((REPO / "library").glob("*.py"))) == 31, sorted(specs)
    found = dict(("%s: %s" % (m, o), bool(opt.get("no_log"))) for m, spec in specs.items()
                 for o, opt in credential_options(spec))
    assert [k for k, no_log in found.items() if not no_log] == []
    # the check sees the suboptions too (hosts[] entries)
    assert {"bmc_power: bmc_password", "redfish_power: bmc_password", "gear_observe: hosts[].bmc_password",
            "gear_shift_prepare: hosts[].bmc_password", "gear_wave: hosts[].bmc_password", "wake_on_lan: password", "gear_plan: prometheus_token"} <= set(found)
