# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets never leave a module: one scrub for every text that came from a BMC, ipmitool, a
Redfish body or a subprocess, credentials kept out of returned dicts, and a password found on a
command line refused.

- :func:`forms` is every way a secret can come back in a text: the value itself, each of its
  lines, its base64 (at each of the three alignments it can have inside a longer encoded text,
  such as HTTP Basic's ``user:password``; standard and URL-safe alphabets), its URL-encoded forms
  (``%40`` and ``%40``-lower-case, ``+`` for a space), its JSON-escaped forms (``\\n``, ``\\u00e9``
  upper and lower case, ``\\/``) and its Python ``repr`` (what ``%r`` prints). A derived form
  shorter than :data:`MIN_FORM` characters is not scrubbed on its own (a two-letter line of a
  password is no secret by itself, and scrubbing it would rewrite ordinary words); the value itself
  always is.
- :class:`Scrubber` replaces every form of every secret it holds by ``********``, longest first,
  in a text or in every string of a result (keys included). Scrub a text *before* cutting it
  short: a cut can leave a prefix of a password that no form matches.
- :func:`guard` makes an AnsibleModule scrub its results: the forms join the module's
  ``no_log_values`` (Ansible masks them in results, warnings and its log) and ``exit_json`` /
  ``fail_json`` scrub the result first, longest form first.
- :func:`drop_credentials` removes keys that look like credentials from a free-form dict
  returned to the caller (:func:`is_credential_name` says which: password, passwd, passphrase,
  secret, token, credential, auth, private/api/access/secret key; not ``key`` alone, which
  names a dict key or a sort key in fleetnap's options).
- :func:`on_command_line` finds a secret on the command line of this process or of the processes
  that started it (a task's ``environment:`` puts ``VAR=value`` on the ``/bin/sh -c`` command line
  that runs the module, where ``ps`` and the process accounting show it). A password exported on
  the controller is in the module's *environment* when it runs on localhost, never on a command
  line: that path is not refused.

Standard library only (runs on targets).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
from urllib.parse import quote, quote_plus

MASK = "********"
MIN_FORM = 4            # a derived form shorter than this is not scrubbed on its own
ANCESTORS = 4           # this process and the three that started it (sh -c, a wrapper, the worker)

_CREDENTIAL = re.compile(r"(passw(or)?d|passphrase|secret|token|credential|auth|"
                         r"(private|api|access|secret|ssh|bmc)_?key|cookie|session_?id)", re.I)


def is_credential_name(name):
    """True for an option or dict key that names a credential (bmc_password, prometheus_token,
    api_key, X-Auth-Token, Authorization); False for ``key`` alone and ordinary names."""
    return isinstance(name, str) and bool(_CREDENTIAL.search(name))


def _b64_cores(data):
    """The parts of base64(prefix + data + suffix) that depend only on ``data``, for each of the
    three alignments data can have in a longer encoded text."""
    out = []
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + data).decode("ascii")
        first = (8 * k + 5) // 6                 # the first character made of data's bits only
        last = (8 * (k + len(data))) // 6        # one past the last such character
        core = enc[first:last]
        out += [core, core.replace("+", "-").replace("/", "_")]
    return out


def _json_forms(text):
    plain = json.dumps(text)[1:-1]
    out = [plain, json.dumps(text, ensure_ascii=False)[1:-1], plain.replace("/", "\\/")]
    out.append(re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), plain))
    return out


def _url_forms(text):
    out = [quote(text, safe=""), quote(text), quote_plus(text)]
    out += [re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), f) for f in out]
    return out


def _derived(text):
    data = text.encode("utf-8", "surrogatepass")
    out = _b64_cores(data) + _json_forms(text) + _url_forms(text) + [repr(text)[1:-1], shlex.quote(text)]
    return out


def forms(secret):
    """Every text form of ``secret`` to scrub (see the module's docstring), longest first."""
    if not isinstance(secret, str) or secret == "":
        return []
    found = set([secret])
    lines = [ln for ln in re.split(r"\r\n|\r|\n", secret) if ln.strip()]
    for part in [secret] + (lines if len(lines) > 1 else []):
        for f in [part] + _derived(part):
            if f == secret or len(f) >= MIN_FORM:
                found.add(f)
    return sorted(found, key=lambda f: (-len(f), f))


class Scrubber(object):
    """Replace every form of the secrets it holds with ``********``."""

    def __init__(self, *secrets):
        self._forms = set()
        self._re = None
        for s in secrets:
            self.add(s)

    def add(self, secret):
        """Hold one more secret (a password, a session token); None and '' are ignored."""
        new = set(forms(secret)) - self._forms
        if new:
            self._forms |= new
            ordered = sorted(self._forms, key=lambda f: (-len(f), f))
            self._re = re.compile("|".join(re.escape(f) for f in ordered))
        return self

    @property
    def forms(self):
        return sorted(self._forms, key=lambda f: (-len(f), f))

    def __bool__(self):
        return bool(self._forms)

    def text(self, value):
        """``value`` as text with every form replaced (bytes decoded leniently first)."""
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        elif not isinstance(value, str):
            value = str(value)
        if self._re is None:
            return value
        # twice: a form can be split by a form of another secret around it
        return self._re.sub(MASK, self._re.sub(MASK, value))

    def value(self, obj, _depth=0):
        """A copy of ``obj`` (a result: dicts, lists, tuples, strings) with every string scrubbed,
        dict keys included; other values as they are."""
        if self._re is None:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if _depth > 100:
            return obj
        if isinstance(obj, dict):
            return dict((self.value(k, _depth + 1), self.value(v, _depth + 1)) for k, v in obj.items())
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.value(v, _depth + 1) for v in obj)
        return obj


def guard(module, secrets):
    """Make ``module`` scrub every result, message and warning of every form of ``secrets``;
    returns the Scrubber (add a session token to it when one is made)."""
    scrubber = Scrubber(*[s for s in secrets if isinstance(s, str)])
    module.no_log_values.update(f for f in scrubber.forms if f)
    exit_json, fail_json, warn = module.exit_json, module.fail_json, module.warn

    def scrubbed_exit(**kw):
        exit_json(**scrubber.value(kw))

    def scrubbed_fail(msg=None, **kw):
        kw = scrubber.value(kw)
        fail_json(msg=scrubber.text(msg if msg is not None else "failed"), **kw)

    def scrubbed_warn(warning):
        warn(scrubber.text(warning))

    module.exit_json, module.fail_json, module.warn = scrubbed_exit, scrubbed_fail, scrubbed_warn
    return scrubber


def drop_credentials(doc):
    """A copy of the dict ``doc`` without the keys that look like credentials, however deep;
    returns (copy, [dropped key paths])."""
    dropped = []

    def walk(value, where, depth):
        if depth > 64:
            return value
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                path = "%s.%s" % (where, k) if where else str(k)
                if is_credential_name(k):
                    dropped.append(path)
                    continue
                out[k] = walk(v, path, depth + 1)
            return out
        if isinstance(value, list):
            return [walk(v, "%s[%d]" % (where, i), depth + 1) for i, v in enumerate(value)]
        return value

    return walk(doc, "", 0), dropped


# --- a secret on a command line --------------------------------------------------------------------

def _ppid(pid, read):
    stat = read(pid, "stat").decode("ascii", "replace")
    # pid (comm) state ppid ...: comm may hold spaces and parentheses; the last ')' ends it
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[1])


def _program(cmdline):
    first = cmdline.split(b"\0", 1)[0].decode("utf-8", "replace")
    return os.path.basename(first) or "?"


def _assignment(secret):
    """VAR=secret as a shell command line holds it (plain or quoted), ended by a separator."""
    values = set([secret, shlex.quote(secret)])
    alts = b"|".join(re.escape(v.encode("utf-8", "surrogatepass")) for v in sorted(values, key=len, reverse=True))
    return re.compile(b"=(?:" + alts + b")(?=[\\s\\0;&|)]|\\Z)")


def on_command_line(secret, pid=None, read=None, ancestors=ANCESTORS):
    """(pid, program) of the first of this process and its starters (up to ``ancestors``) whose
    command line holds ``NAME=secret`` (a task's ``environment:``, ``-e var=secret``); None when
    none does, or when /proc cannot tell."""
    if not isinstance(secret, str) or secret == "":
        return None
    if read is None:
        from ansible.module_utils.fleetnap.fileio import read_proc
        read = read_proc
    pattern = _assignment(secret)
    pid = os.getpid() if pid is None else pid
    for _level in range(ancestors):
        if pid <= 1:
            break
        try:
            cmdline = read(pid, "cmdline")
        except (OSError, ValueError):
            return None
        if pattern.search(cmdline):
            return pid, _program(cmdline)
        try:
            pid = _ppid(pid, read)
        except (OSError, ValueError, IndexError):
            return None
    return None


def refuse_command_line(module, secrets):
    """fail_json when one of ``secrets`` ({option name: value}) is on a command line (see
    on_command_line), saying why and what to do instead."""
    seen = set()
    for option, value in secrets.items():
        if not isinstance(value, str) or value in seen:
            continue
        seen.add(value)
        found = on_command_line(value)
        if found:
            module.fail_json(msg="the value of %s is on the command line of process %d (%s) that started this "
                                 "module, where ps and process accounting show it (a task's environment: puts "
                                 "its variables there, -e var=value too): nothing was sent. Keep the password "
                                 "in an ansible-vault variable, or export FLEETNAP_BMC_PASSWORD on the "
                                 "controller, and pass it as %s (for example lookup('ansible.builtin.env', "
                                 "'FLEETNAP_BMC_PASSWORD')), never in environment:"
                                 % (option, found[0], found[1], option))


def unused_env_hint(names, environ=None):
    """Why a password in the module's environment (``names``: FLEETNAP_BMC_PASSWORD, ...) is not
    used, for the message of a module given no password: '' when none is set. A value found on a
    command line was put there by a task's environment:; one that is not was exported on the
    controller (the module runs on localhost and inherits it)."""
    environ = os.environ if environ is None else environ
    present = [n for n in names if environ.get(n)]
    if not present:
        return ""
    where = None
    for n in present:
        where = where or on_command_line(environ[n])
    how = ("a task's environment: put it on the command line of process %d (%s), where ps shows it; remove it "
           "from environment:" % where) if where else "the module takes the password only as its argument"
    return " (%s in the module's environment is not used: %s)" % ("/".join(present), how)
