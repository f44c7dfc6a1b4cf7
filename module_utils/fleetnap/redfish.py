# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Redfish client for power control, standard library only (http.client, ssl, json).

:class:`Redfish` has the duck-typed interface of :class:`ipmi.Bmc` that the gear-shift code uses
(``target``, ``status()`` -> 'on'/'off', ``power(action)``, ``wait_for``, ``cycle``), so either
can stand behind a host:

- Discovery: service root -> Systems -> one ComputerSystem (``system_id`` chooses among several;
  without it several systems are an error naming them) and the Chassis it links to.
- Authentication: a Redfish session (POST to the service's Sessions collection, ``X-Auth-Token``
  on every later request, DELETE at :meth:`close`) when the service offers one, else HTTP Basic.
  The password, the Basic header and the token are never in an exception, a result or the
  request log (:attr:`Redfish.log` holds method, path, status and times only).
- TLS verified by default (``ssl.create_default_context``, ``ca_path`` a PEM bundle of the CA
  that signed the BMC's certificate); ``validate_certs=False`` for labs only.
- Every request is rate-limited per BMC across processes by :class:`ipmi.RateLimiter` (one lock
  and timestamp file per ``host_port`` under ``state_dir``), has a socket timeout and an overall
  deadline, and is retried with backoff when the BMC does not answer or answers 502/503/504/429
  (``Retry-After`` honoured, capped). A POST whose answer was lost is not sent again: the caller
  reads the power state and decides.
- A 202 answer is followed to its task monitor until done, within the caller's timeout.

Errors are :class:`RedfishError` with ``kind``: 'auth' (401/403; never retried), 'unreachable'
(no connection, no answer, 502/503/504/429 after the retries), 'tls' (certificate or handshake),
'protocol' (not JSON, a required field missing: the message names the URL and the field),
'command' (the BMC refused or cannot do what was asked, including a reset type or boot target it
does not allow, and a task that ended in Exception/Killed/Cancelled) and 'timeout' (a task still
running when the caller's timeout ran out).

A client is used by one thread at a time.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import math
import os
import re
import socket
import ssl
import time
from urllib.parse import urlsplit

from ansible.module_utils.fleetnap.ipmi import IpmiError, RateLimiter, backoff_delays
from ansible.module_utils.fleetnap.parse import loads
from ansible.module_utils.fleetnap.secrets import Scrubber

KINDS = ("auth", "unreachable", "tls", "protocol", "command", "timeout")

# Fine-grained states: status() folds the transitions the way Ironic does (PoweringOn counts as
# on, PoweringOff as off); wait_for() waits for the settled state.
POWER_STATES = {"On": "on", "Off": "off", "PoweringOn": "powering_on", "PoweringOff": "powering_off",
                "Paused": "paused"}
FOLDED = {"on": "on", "off": "off", "powering_on": "on", "powering_off": "off", "paused": "on"}

# ResetType values of the Redfish ComputerSystem schema: assumed when the BMC declares none.
STANDARD_RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi",
                        "ForceOn", "PushPowerButton", "PowerCycle")
# What each action sends, in order of preference (the first the BMC allows).
RESET_TYPES = {"on": ("On", "ForceOn"), "off": ("ForceOff",), "soft": ("GracefulShutdown",),
               "cycle": ("PowerCycle",)}
ACTIONS = ("on", "off", "soft", "cycle")

TASK_RUNNING = ("New", "Starting", "Running", "Pending", "Stopping", "Suspended", "Service", "Cancelling")
TASK_FAILED = ("Exception", "Killed", "Cancelled", "Interrupted")

RETRY_STATUSES = (429, 502, 503, 504)
MAX_BODY = 8 * 1024 * 1024
MAX_PAGES = 20
MAX_LOG_ENTRIES = 5000
_HOST_RE = re.compile(r"^[A-Za-z0-9_.:%-]{1,253}$")


class RedfishError(Exception):
    """A Redfish failure; ``kind`` is one of KINDS, ``status`` the HTTP status when there was one,
    ``url`` the path asked for."""

    def __init__(self, msg, kind="command", status=None, url=None):
        Exception.__init__(self, msg)
        self.kind = kind
        self.status = status
        self.url = url


def validate_target(host, port, user):
    """Raise ValueError naming the bad value (before anything is sent)."""
    if not isinstance(host, str) or not _HOST_RE.match(host) or host.startswith("-"):
        raise ValueError("bmc_address %r is not a host name or address" % (host,))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError("bmc_port %r is not a TCP port (1..65535; Redfish uses 443)" % (port,))
    if not isinstance(user, str) or not user or len(user) > 256 or any(ord(c) < 32 for c in user):
        raise ValueError("bmc_user %r is not a user name (1..256 printable characters)" % (user,))


def ssl_context(validate_certs=True, ca_path=None):
    """The TLS context: verified against ca_path (a PEM file) or the system's CAs; unverified
    only with validate_certs=False. RedfishError('tls') for a CA file that cannot be used."""
    if not validate_certs:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    try:
        return ssl.create_default_context(cafile=ca_path) if ca_path else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise RedfishError("ca_path %s cannot be used as a CA bundle: %s (give a PEM file holding the CA "
                           "certificate that signed the BMC's certificate)" % (ca_path, reason), kind="tls")


def _no_constants(name):
    raise ValueError("%s is not a JSON number" % name)


def _link(doc, *keys):
    """doc[keys...]['@odata.id'] or None."""
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    if isinstance(doc, dict):
        doc = doc.get("@odata.id")
    return doc if isinstance(doc, str) and doc else None


def _members(doc):
    items = doc.get("Members") if isinstance(doc, dict) else None
    return [m for m in items if isinstance(m, dict)] if isinstance(items, list) else []


def _retry_after(value, cap):
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), within [0, cap], or None."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        secs = when.timestamp() - time.time()
    if not math.isfinite(secs):
        return None
    return max(0.0, min(float(cap), secs))


def _error_text(data, scrub=str):
    """The message of a Redfish error body (error.message and its ExtendedInfo), short, scrubbed
    by ``scrub`` before it is parsed or cut (a cut could leave part of a password). Fields of
    another type than the schema's (an ExtendedInfo that is a number) are left out."""
    text = scrub(data.decode("utf-8", "replace")) if data else ""
    try:
        doc = loads(text, "the error body", limit=MAX_BODY) if text else None
    except ValueError:
        doc = None
    parts = []
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        if isinstance(err.get("message"), str):
            parts.append(scrub(err["message"]))
        infos = err.get("@Message.ExtendedInfo")
        for info in (infos if isinstance(infos, list) else [infos] if isinstance(infos, dict) else [])[:20]:
            if isinstance(info, dict) and isinstance(info.get("Message"), str):
                message = scrub(info["Message"])
                if message not in parts:
                    parts.append(message)
    elif text:
        text = text.strip()
        if text and not text.startswith("<"):
            parts.append(" ".join(text.split()))
    text = "; ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


class _Connection(http.client.HTTPSConnection):
    """HTTPSConnection whose TCP connect and TLS handshake together stay within ``left()``
    seconds (the plain one gives each of them the whole timeout)."""

    left = None

    def connect(self):
        self.timeout = self.left()
        http.client.HTTPConnection.connect(self)
        self.sock.settimeout(self.left())
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


class Response(object):
    """One HTTP answer: status, headers (case-insensitive), raw body and the path asked for."""

    def __init__(self, status, headers, data, path):
        self.status = status
        self.headers = headers
        self.data = data
        self.path = path

    def header(self, name):
        return self.headers.get(name) if self.headers is not None else None


class Redfish(object):
    """One BMC's Redfish service, for power control of one ComputerSystem.

    Nothing is sent before the first call that needs the BMC; :meth:`close` (or leaving a
    ``with`` block) deletes the session. ``log`` records every HTTP request (method, path,
    status, start/end Unix times, rate-limit wait), never a header or a body.
    """

    def __init__(self, host, port=443, user=None, password=None, system_id=None, validate_certs=True,
                 ca_path=None, request_timeout=10.0, retries=2, backoff=0.5, retry_after_cap=15.0,
                 min_interval=0.25, state_dir=None, task_timeout=60.0, use_sessions=True,
                 prefer_power_cycle=True, clock=time.monotonic, sleep=time.sleep):
        validate_target(host, port, user)
        if not isinstance(password, str) or password == "":
            raise ValueError("no BMC password: give bmc_password (e.g. a lookup of FLEETNAP_BMC_PASSWORD in the "
                             "controller's environment)")
        for opt, value, lo in (("request_timeout", request_timeout, 0), ("retries", retries, 0),
                               ("min_interval", min_interval, 0), ("task_timeout", task_timeout, 0),
                               ("retry_after_cap", retry_after_cap, 0), ("backoff", backoff, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < lo:
                raise ValueError("%s must be a finite number >= %s, got %r" % (opt, lo, value))
        if request_timeout <= 0:
            raise ValueError("request_timeout must be > 0, got %r" % (request_timeout,))
        self.host = host
        self.port = port
        self.user = user
        self._password = password
        self._basic = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode("utf-8")).decode("ascii")
        # Every form of the password, the Basic header and (once made) the session token.
        self.scrubber = Scrubber(password, self._basic[6:])
        self._token = None
        self._session_path = None
        self.system_id = system_id
        self.ca_path = ca_path
        self.validate_certs = validate_certs
        self._ssl = ssl_context(validate_certs, ca_path)
        self.request_timeout = float(request_timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.retry_after_cap = float(retry_after_cap)
        self.min_interval = float(min_interval)
        self.state_dir = state_dir or os.path.join(os.path.expanduser("~"), ".cache", "fleetnap", "bmc")
        self.task_timeout = float(task_timeout)
        self.use_sessions = use_sessions
        self.prefer_power_cycle = prefer_power_cycle
        self.clock = clock
        self.sleep = sleep
        self.log = []
        self.auth = None               # 'session' or 'basic' once known
        self.root = None
        self.system_path = None
        self.chassis_path = None
        self.manager_paths = []
        self.system = None             # the ComputerSystem as read at discovery
        self.reset_target = None
        self.reset_types = None        # allowed ResetType values
        self.reset_types_declared = False
        self.power_source = None       # where power_watts() found its reading
        self.cycle_method = None       # 'PowerCycle' or 'ForceOff+On' after cycle()
        self._conn = None
        self._conn_used = False
        self._opened = False

    # ------------------------------------------------------------------ plumbing
    @property
    def target(self):
        return "%s:%d" % (self.host, self.port)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def _scrub(self, text):
        return self.scrubber.text(text)

    def _show(self, value, limit=80):
        """A value of an answer as a message shows it: scrubbed, then cut short."""
        text = self._scrub(repr(value))
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def _wrong(self, url, field, value, expected):
        """RedfishError('protocol'): the answer at ``url`` has ``field`` of the wrong shape."""
        return self._fail("BMC %s: %s has %s %s, not %s" % (self.target, url, field, self._show(value), expected),
                          "protocol", url=url)

    def _field(self, doc, url, field, kinds, expected, default=None):
        """doc[field] when it is one of ``kinds`` (or absent/null: ``default``); else RedfishError
        ('protocol') naming the BMC, the URL and the field."""
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        value = doc.get(field) if isinstance(doc, dict) else None
        if value is None:
            return default
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise self._wrong(url, field, value, expected)
        return value

    def _fail(self, msg, kind, status=None, url=None):
        return RedfishError(self._scrub(msg), kind=kind, status=status, url=url)

    def _path(self, link):
        """A link of this service as a path on this BMC (an absolute URL keeps its path only: the
        client never follows a link to another host)."""
        if link.startswith("http://") or link.startswith("https://"):
            parts = urlsplit(link)
            link = parts.path + ("?" + parts.query if parts.query else "")
        return link if link.startswith("/") else "/" + link

    def _drop_connection(self):
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        self._conn = None
        self._conn_used = False

    def _headers(self, auth, body):
        h = {"Accept": "application/json", "OData-Version": "4.0", "User-Agent": "fleetnap-redfish"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if auth and self._token:
            h["X-Auth-Token"] = self._token
        elif auth:
            h["Authorization"] = self._basic
        return h

    def _read_body(self, resp, deadline):
        chunks, size = [], 0
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise socket.timeout("the answer did not arrive within %.0f s" % self.request_timeout)
            if self._conn is not None and self._conn.sock is not None:
                self._conn.sock.settimeout(min(self.request_timeout, remaining))
            chunk = resp.read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY:
                raise http.client.HTTPException("an answer larger than %d bytes" % MAX_BODY)
            chunks.append(chunk)
        return b"".join(chunks)

    def _once(self, method, path, body, auth):
        """One HTTP exchange under the BMC's rate limit. Returns a Response or raises
        RedfishError; ``sent`` on the error says whether the request may have reached the BMC."""
        payload = None if body is None else json.dumps(body).encode("utf-8")
        entry = {"method": method, "path": path, "status": None}
        try:
            with RateLimiter(self.state_dir, self.host, self.port, self.min_interval) as rl:
                started = time.time()
                try:
                    return self._exchange(method, path, payload, auth, entry)
                finally:
                    entry["start"] = round(started, 6)
                    entry["end"] = round(time.time(), 6)
                    entry["waited_s"] = round(rl.waited, 6)
                    self.log.append(entry)
        except IpmiError as exc:        # the rate-limit file or its lock
            raise self._fail(str(exc), kind=exc.kind)

    def _exchange(self, method, path, payload, auth, entry):
        deadline = self.clock() + self.request_timeout

        def left():
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise socket.timeout("timed out")
            return remaining

        for fresh_try in (False, True):
            reused = self._conn is not None and self._conn_used
            sent = False
            try:
                if self._conn is None:
                    self._conn = _Connection(self.host, self.port, timeout=self.request_timeout, context=self._ssl)
                    self._conn.left = left
                if self._conn.sock is None:
                    self._conn.left = left
                    self._conn.connect()
                self._conn.sock.settimeout(left())
                sent = True
                self._conn.request(method, path, body=payload, headers=self._headers(auth, payload))
                resp = self._conn.getresponse()
                data = self._read_body(resp, deadline)
                self._conn_used = True
                if resp.will_close:
                    self._drop_connection()
                entry["status"] = resp.status
                return Response(resp.status, resp.headers, data, path)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop_connection()
                if reused and not fresh_try:
                    continue        # a kept-alive connection the BMC had closed: once more, on a new one
                entry["error"] = "unreachable"
                err = self._fail("BMC %s closed the connection during %s %s (%s)"
                                 % (self.target, method, path, exc.__class__.__name__), "unreachable", url=path)
                err.sent = sent
                raise err
            except ssl.SSLCertVerificationError as exc:
                self._drop_connection()
                entry["error"] = "tls"
                raise self._tls_error(exc)
            except ssl.SSLError as exc:
                self._drop_connection()
                entry["error"] = "tls"
                raise self._fail("TLS with BMC %s failed: %s (is it HTTPS on port %d?)"
                                 % (self.target, exc.reason or exc, self.port), "tls", url=path)
            except (socket.timeout, TimeoutError) as exc:
                self._drop_connection()
                entry["error"] = "unreachable"
                err = self._fail("BMC %s did not answer %s %s within %.0f s%s"
                                 % (self.target, method, path, self.request_timeout,
                                    "" if str(exc) in ("", "timed out") else " (%s)" % exc),
                                 "unreachable", url=path)
                err.sent = sent
                raise err
            except socket.gaierror as exc:
                self._drop_connection()
                entry["error"] = "unreachable"
                err = self._fail("cannot resolve BMC host %s: %s" % (self.host, exc.strerror or exc),
                                 "unreachable", url=path)
                err.sent = False
                raise err
            except OSError as exc:
                self._drop_connection()
                entry["error"] = "unreachable"
                err = self._fail("cannot reach BMC %s: %s" % (self.target, exc.strerror or exc), "unreachable",
                                 url=path)
                err.sent = sent and not isinstance(exc, ConnectionRefusedError)
                raise err
            except http.client.HTTPException as exc:
                self._drop_connection()
                entry["error"] = "protocol"
                raise self._fail("BMC %s gave no valid HTTP answer to %s %s (%s: %s)"
                                 % (self.target, method, path, exc.__class__.__name__, exc), "protocol", url=path)

    def _tls_error(self, exc):
        why = exc.verify_message or exc.reason or str(exc)
        if not self.ca_path:
            fix = ("give the CA that signed the BMC's certificate in ca_path (a PEM file); validate_certs=false "
                   "skips the check (a lab only)")
        else:
            fix = ("the CA in ca_path %s did not sign it, or the certificate does not name %s; give the right CA "
                   "in ca_path" % (self.ca_path, self.host))
        return self._fail("TLS certificate of BMC %s not accepted: %s; %s" % (self.target, why, fix), "tls")

    def request(self, method, link, body=None, ok=(200, 201, 202, 204), auth=True, retry_post=False, relogin=True):
        """Send a request with retries; return the Response when its status is in ``ok``, else raise
        RedfishError of the matching kind. A POST is sent again only when it cannot have reached
        the BMC (or with ``retry_post``): a reset must not happen twice. A 401 within a session
        (it expired) logs in again once, unless ``relogin`` is false."""
        path = self._path(link)
        delays = backoff_delays(self.retries, self.backoff)
        relogged = False
        attempt = 0
        while True:
            try:
                resp = self._once(method, path, body, auth)
            except RedfishError as exc:
                may_repeat = method != "POST" or retry_post or not getattr(exc, "sent", True)
                if exc.kind == "unreachable" and not may_repeat:
                    raise self._fail("%s; the BMC may have acted on the request, which is not sent again (read the "
                                     "power state to know)" % exc, "unreachable", url=path)
                if exc.kind != "unreachable" or attempt >= self.retries:
                    if exc.kind == "unreachable" and attempt:
                        raise self._fail("%s (after %d attempts); check bmc_address/bmc_port and that the BMC's "
                                         "Redfish service is up" % (exc, attempt + 1), "unreachable", url=path)
                    raise
                self.sleep(delays[attempt])
                attempt += 1
                continue
            if resp.status in ok:
                return resp
            if resp.status == 401 and auth and self._token and relogin and not relogged:
                relogged = True             # the session expired: log in again, once
                self._token = None
                self._login()
                continue
            if resp.status in RETRY_STATUSES:
                if attempt < self.retries:
                    wait = _retry_after(resp.header("Retry-After"), self.retry_after_cap)
                    self.sleep(delays[attempt] if wait is None else wait)
                    attempt += 1
                    continue
                raise self._fail("BMC %s answered %s %s with HTTP %d %d times%s; it is busy or its Redfish service "
                                 "is not ready, try again later"
                                 % (self.target, method, path, resp.status, attempt + 1,
                                    self._detail(resp)), "unreachable", resp.status, path)
            raise self._status_error(method, path, resp)

    def _detail(self, resp):
        text = _error_text(resp.data, self._scrub)
        return " (%s)" % text if text else ""

    def _status_error(self, method, path, resp):
        if resp.status in (401, 403):
            return self._fail("BMC %s refused the credentials of user %r (HTTP %d on %s %s%s); check bmc_user and "
                              "bmc_password, and that the account may control power"
                              % (self.target, self.user, resp.status, method, path, self._detail(resp)),
                              "auth", resp.status, path)
        return self._fail("BMC %s refused %s %s: HTTP %d%s"
                          % (self.target, method, path, resp.status, self._detail(resp)), "command", resp.status, path)

    def json(self, resp, what="an object"):
        """The Response's body as a JSON object; RedfishError('protocol') naming the URL otherwise."""
        try:
            doc = loads(resp.data, "the answer", limit=MAX_BODY)
        except ValueError as exc:
            raise self._fail("BMC %s: the answer to GET %s is not JSON (%s)" % (self.target, resp.path, exc),
                             "protocol", resp.status, resp.path)
        if not isinstance(doc, dict):
            raise self._fail("BMC %s: the answer to GET %s is not %s" % (self.target, resp.path, what),
                             "protocol", resp.status, resp.path)
        return doc

    def get(self, link):
        return self.json(self.request("GET", link, ok=(200,)))

    def _need(self, doc, path, *keys):
        """The link doc[keys]['@odata.id'], or RedfishError('protocol') naming the URL and field."""
        link = _link(doc, *keys)
        if link is None:
            raise self._fail("BMC %s: %s has no %s" % (self.target, path, ".".join(keys) + ".@odata.id"),
                             "protocol", url=path)
        return link

    # ------------------------------------------------------------------ session and discovery
    def open(self):
        """Discover the system (and log in); done once, by the first call that needs it."""
        if self._opened:
            return self
        resp = self.request("GET", "/redfish/v1/", ok=(200, 401), auth=False)
        if resp.status == 401:          # a service root behind authentication (not as the spec says)
            resp = self.request("GET", "/redfish/v1/", ok=(200,), auth=True)
        self.root = self.json(resp)
        self._login()
        systems_path = self._need(self.root, "/redfish/v1/", "Systems")
        systems = self.get(systems_path)
        links = [self._path(m["@odata.id"]) for m in _members(systems) if isinstance(m.get("@odata.id"), str)]
        if not links:
            raise self._fail("BMC %s: %s lists no system (Members is empty or missing)" % (self.target, systems_path),
                             "protocol", url=systems_path)
        self.system_path = self._choose_system(links)
        self.system = self.get(self.system_path)
        self._reset_info(self.system)
        related = self.system.get("Links") if isinstance(self.system.get("Links"), dict) else {}
        chassis = [_link(c) for c in _list(related.get("Chassis")) if _link(c)]
        self.chassis_path = self._path(chassis[0]) if chassis else None
        managers = [_link(m) for m in _list(related.get("ManagedBy")) if _link(m)]
        self.manager_paths = [self._path(m) for m in managers[:4]]
        self._opened = True
        return self

    def _login(self):
        if self._token:
            return
        sessions = _link(self.root, "Links", "Sessions")
        if sessions is None and _link(self.root, "SessionService") and self.use_sessions:
            resp = self.request("GET", _link(self.root, "SessionService"), ok=(200, 401, 403, 404))
            sessions = _link(self.json(resp), "Sessions") if resp.status == 200 else None
        if not self.use_sessions or sessions is None:
            if ":" in self.user:
                raise self._fail("BMC %s offers no session service and HTTP Basic cannot carry user %r (a ':' in "
                                 "it)" % (self.target, self.user), "auth")
            self.auth = "basic"
            return
        resp = self.request("POST", sessions, body={"UserName": self.user, "Password": self._password},
                            ok=(200, 201, 204, 404, 405, 501), auth=False, retry_post=True)
        if resp.status in (404, 405, 501):
            self.auth = "basic"         # a session service that does not take logins: Basic it is
            return
        token = resp.header("X-Auth-Token")
        if not token:
            raise self._fail("BMC %s: POST %s answered HTTP %d without an X-Auth-Token header"
                             % (self.target, resp.path, resp.status), "protocol", resp.status, resp.path)
        self.scrubber.add(token)
        self._token = token
        where = resp.header("Location")
        if not where and resp.data:
            where = _link(_quiet_loads(resp.data))
        self._session_path = self._path(where) if where else None
        self.auth = "session"

    def close(self):
        """Delete the session (best effort: a failure is recorded in the log only) and the connection."""
        if self._token and self._session_path:
            try:
                self.request("DELETE", self._session_path, ok=(200, 202, 204, 401, 404), relogin=False)
            except RedfishError:
                pass
        self._token = None
        self._session_path = None
        self._drop_connection()

    def _choose_system(self, links):
        ids = [p.rstrip("/").rsplit("/", 1)[-1] for p in links]
        if self.system_id is not None:
            for path, sid in zip(links, ids):
                if sid == self.system_id:
                    return path
            for path in links[:16]:     # an Id that differs from the last path segment
                doc = self.get(path)
                if doc.get("Id") == self.system_id:
                    return path
            raise self._fail("BMC %s has no system %r; it has: %s (set system_id to one of them)"
                             % (self.target, self.system_id, self._describe(links, ids)), "command")
        if len(links) == 1:
            return links[0]
        raise self._fail("BMC %s manages %d systems: %s; set system_id to the one to control"
                         % (self.target, len(links), self._describe(links, ids)), "command")

    def _describe(self, links, ids):
        out = []
        for path, sid in list(zip(links, ids))[:16]:
            try:
                name = self.get(path).get("Name")
            except RedfishError:
                name = None
            out.append("%s (%s)" % (sid, name) if isinstance(name, str) and name and name != sid else sid)
        return ", ".join(out) + (" ..." if len(links) > 16 else "")

    def _reset_info(self, system):
        actions = system.get("Actions")
        reset = actions.get("#ComputerSystem.Reset") if isinstance(actions, dict) else None
        target = reset.get("target") if isinstance(reset, dict) else None
        if not isinstance(target, str) or not target:
            raise self._fail("BMC %s: %s has no Actions.#ComputerSystem.Reset.target: this system cannot be reset "
                             "through Redfish" % (self.target, self.system_path), "protocol", url=self.system_path)
        self.reset_target = self._path(target)
        allowed = reset.get("ResetType@Redfish.AllowableValues")
        info = reset.get("@Redfish.ActionInfo")
        if allowed is None and isinstance(info, str) and info:
            info = self._path(info)
            doc = self.get(info)
            for param in self._field(doc, info, "Parameters", list, "a list of parameters", []):
                if isinstance(param, dict) and param.get("Name") == "ResetType":
                    allowed = param.get("AllowableValues")
        if isinstance(allowed, list) and all(isinstance(v, str) for v in allowed):
            self.reset_types = list(allowed)
            self.reset_types_declared = True
        elif allowed is None:
            self.reset_types = list(STANDARD_RESET_TYPES)
            self.reset_types_declared = False
        else:
            raise self._fail("BMC %s: ResetType@Redfish.AllowableValues of %s is not a list of names"
                             % (self.target, self.system_path), "protocol", url=self.system_path)

    # ------------------------------------------------------------------ power
    def state(self):
        """The system's power state: 'on', 'off', 'powering_on', 'powering_off' or 'paused'."""
        self.open()
        doc = self.get(self.system_path)
        raw = doc.get("PowerState")
        if raw is None:
            raise self._fail("BMC %s: %s has no PowerState" % (self.target, self.system_path), "protocol",
                             url=self.system_path)
        if not isinstance(raw, str) or raw not in POWER_STATES:
            raise self._wrong(self.system_path, "PowerState", raw, "one of %s" % ", ".join(POWER_STATES))
        return POWER_STATES[raw]

    def status(self):
        """'on' or 'off' (ipmi.Bmc's contract): PoweringOn and Paused count as on, PoweringOff as off."""
        return FOLDED[self.state()]

    def reset_type_for(self, action):
        """The ResetType that ``action`` ('on', 'off', 'soft', 'cycle') sends on this BMC, or
        RedfishError('command') listing what the BMC allows. For 'cycle', None when the cycle
        is done as ForceOff then On."""
        self.open()
        if action not in RESET_TYPES:
            raise ValueError("unknown power action %r (one of %s)" % (action, ", ".join(ACTIONS)))
        if action == "cycle":
            declared = self.reset_types_declared and "PowerCycle" in self.reset_types
            if self.prefer_power_cycle and declared:
                return "PowerCycle"
            self.reset_type_for("off")
            self.reset_type_for("on")
            return None
        for wanted in RESET_TYPES[action]:
            if wanted in self.reset_types:
                return wanted
        raise self._fail("BMC %s does not allow ResetType %s for '%s' on %s; it allows: %s"
                         % (self.target, " or ".join(RESET_TYPES[action]), action, self.system_path,
                            ", ".join(self.reset_types) or "nothing"), "command", url=self.reset_target)

    def reset(self, reset_type, timeout=None):
        """POST the ResetType; follow a 202 task to its end within ``timeout`` (task_timeout when
        None). Returns {'reset_type', 'status', 'task'}."""
        self.open()
        if reset_type not in self.reset_types:
            raise self._fail("BMC %s does not allow ResetType %s on %s; it allows: %s"
                             % (self.target, reset_type, self.system_path, ", ".join(self.reset_types)),
                             "command", url=self.reset_target)
        deadline = self.clock() + (self.task_timeout if timeout is None else timeout)
        resp = self.request("POST", self.reset_target, body={"ResetType": reset_type})
        task = self._follow(resp, deadline, "ResetType %s" % reset_type) if resp.status == 202 else None
        return {"reset_type": reset_type, "status": resp.status, "task": task}

    def power(self, action, timeout=None):
        """Send the reset for 'on', 'off', 'soft' or 'cycle' (ipmi.Bmc's contract; the state is not
        waited for: see wait_for). Returns the ResetType sent."""
        rtype = self.reset_type_for(action)
        if rtype is None:
            raise ValueError("this BMC cycles as ForceOff then On: use cycle()")
        self.reset(rtype, timeout)
        return rtype

    def _follow(self, resp, deadline, what):
        """Poll a 202's task monitor (Location) or Task until done; return the task's summary."""
        monitor = resp.header("Location")
        body = _quiet_loads(resp.data)
        if not isinstance(monitor, str) and monitor is not None:
            monitor = None
        if not monitor and isinstance(body, dict) and "TaskState" in body:
            monitor = _link(body)
        if not monitor:
            return {"state": "accepted", "monitor": None}
        monitor = self._path(monitor)
        last_state = body.get("TaskState") if isinstance(body, dict) else None
        wait = _retry_after(resp.header("Retry-After"), self.retry_after_cap)
        while True:
            now = self.clock()
            if now >= deadline:
                raise self._fail("BMC %s: the task for %s (%s) was still %s when the timeout ran out"
                                 % (self.target, what, monitor, last_state or "running"), "timeout", url=monitor)
            self.sleep(max(0.0, min(1.0 if wait is None else max(wait, 0.2), deadline - now)))
            got = self.request("GET", monitor, ok=(200, 201, 202, 204, 404))
            wait = _retry_after(got.header("Retry-After"), self.retry_after_cap)
            doc = _quiet_loads(got.data)
            state = self._field(doc, monitor, "TaskState", str, "a task state name")
            if state in TASK_FAILED:
                raise self._fail("BMC %s: the task for %s (%s) ended in %s%s"
                                 % (self.target, what, monitor, state, self._task_messages(doc)), "command",
                                 got.status, monitor)
            if got.status == 404:
                return {"state": "gone", "monitor": monitor}     # the monitor is deleted once done
            if got.status == 202 or state in TASK_RUNNING:
                last_state = state or last_state
                continue
            return {"state": state or "Completed", "monitor": monitor,
                    "status": self._field(doc, monitor, "TaskStatus", str, "a health name")}

    def _task_messages(self, doc):
        """' (TaskStatus X): message; message' of a task, scrubbed, then cut short; a Messages or
        TaskStatus of another shape than the schema's is said so, not read."""
        msgs = []
        messages = doc.get("Messages") if isinstance(doc, dict) else None
        if messages is not None and not isinstance(messages, list):
            msgs.append("its Messages is %s, not a list" % self._show(messages, 40))
            messages = []
        for m in (messages or [])[:20]:
            if isinstance(m, dict):
                text = m.get("Message") or m.get("MessageId")
                if isinstance(text, str) and text:
                    msgs.append(self._scrub(text))
        status = doc.get("TaskStatus") if isinstance(doc, dict) else None
        status = status if isinstance(status, str) else None if status is None else self._show(status, 40)
        text = "; ".join(msgs)[:400]
        return "%s%s" % (" (TaskStatus %s)" % self._scrub(status)[:40] if status else "",
                         ": " + text if text else "")

    def wait_for(self, wanted, timeout, poll=1.0):
        """Poll the power state until ``wanted`` ('on' or 'off', settled: PoweringOn is not on) or
        ``timeout`` s; return (reached, last_state, states_seen)."""
        deadline = self.clock() + timeout
        seen = []
        while True:
            last = self.state()
            if not seen or seen[-1] != last:
                seen.append(last)
            if last == wanted:
                return True, last, seen
            if self.clock() + poll > deadline:
                return False, last, seen
            self.sleep(poll)

    def cycle(self, before, timeout, poll=1.0):
        """Power-cycle (ipmi.Bmc's contract): from off, power on. From on, PowerCycle when the BMC
        declares it (the off phase may be too short to be seen), else ForceOff, verified off, then
        On. Returns (reached, last_state, states_seen, phase): phase is the step that did not
        finish ('off' or 'on'), None when done. ``cycle_method`` says how it was done."""
        seen = [before]
        rtype = self.reset_type_for("cycle")
        if before != "off" and rtype == "PowerCycle":
            self.cycle_method = "PowerCycle"
            self.reset("PowerCycle", timeout)
        else:
            self.cycle_method = "On" if before == "off" else "ForceOff+On"
            if before != "off":
                self.reset(self.reset_type_for("off"), timeout)
                reached, last, got = self.wait_for("off", timeout, poll)
                seen += [s for s in got if s != seen[-1]]
                if not reached:
                    return False, last, seen, "off"
            self.reset(self.reset_type_for("on"), timeout)
        reached, last, got = self.wait_for("on", timeout, poll)
        seen += [s for s in got if s != seen[-1]]
        return reached, last, seen, None if reached else "on"

    # ------------------------------------------------------------------ power reading
    def power_watts(self):
        """The chassis power draw in watts, or None when the BMC offers no reading. Looked for in
        the chassis' EnvironmentMetrics (PowerWatts.Reading), Power (PowerControl[0].PowerConsumedWatts,
        deprecated but common) and PowerSubsystem (the sum of the power supplies' InputPowerWatts);
        ``power_source`` names the one used."""
        self.open()
        self.power_source = None
        if not self.chassis_path:
            return None
        chassis = self.get(self.chassis_path)
        env = _link(chassis, "EnvironmentMetrics")
        if env:
            value = _number(_dig(self.get(env), "PowerWatts", "Reading"))
            if value is not None:
                self.power_source = "EnvironmentMetrics"
                return value
        power = _link(chassis, "Power")
        if power:
            controls = self.get(power).get("PowerControl")
            if isinstance(controls, list) and controls and isinstance(controls[0], dict):
                value = _number(controls[0].get("PowerConsumedWatts"))
                if value is not None:
                    self.power_source = "Power"
                    return value
        subsystem = _link(chassis, "PowerSubsystem")
        if subsystem:
            supplies = _link(self.get(subsystem), "PowerSupplies")
            total, found = 0.0, False
            for member in _members(self.get(supplies))[:16] if supplies else []:
                supply = member                 # expanded, or a link to the PowerSupply
                if "Metrics" not in member and isinstance(member.get("@odata.id"), str):
                    supply = self.get(member["@odata.id"])
                metrics = _link(supply, "Metrics")
                value = _number(_dig(self.get(metrics), "InputPowerWatts", "Reading")) if metrics else None
                if value is not None:
                    total += value
                    found = True
            if found:
                self.power_source = "PowerSubsystem"
                return total
        return None

    # ------------------------------------------------------------------ safe power-on helpers
    def boot_override(self):
        """The system's boot override as read now: {'target', 'enabled', 'allowed'} (None where absent)."""
        self.open()
        boot = self.get(self.system_path).get("Boot")
        boot = boot if isinstance(boot, dict) else {}
        allowed = boot.get("BootSourceOverrideTarget@Redfish.AllowableValues")
        where = "%s Boot" % self.system_path
        return {"target": self._field(boot, where, "BootSourceOverrideTarget", str, "a boot target name"),
                "enabled": self._field(boot, where, "BootSourceOverrideEnabled", str, "Once, Continuous or Disabled"),
                "allowed": allowed if isinstance(allowed, list) else None}

    def check_boot_once(self, target="Hdd"):
        """Raise RedfishError('command') when a one-time boot from ``target`` cannot be set (no Boot
        object, the target or Once not among the allowable values); send nothing."""
        self.open()
        boot = self.get(self.system_path).get("Boot")
        if not isinstance(boot, dict):
            raise self._fail("BMC %s: %s has no Boot object: the boot override (boot_once) is not offered; set "
                             "boot_once to none to power on without it" % (self.target, self.system_path), "command",
                             url=self.system_path)
        allowed = boot.get("BootSourceOverrideTarget@Redfish.AllowableValues")
        if isinstance(allowed, list) and target not in allowed:
            raise self._fail("BMC %s does not allow BootSourceOverrideTarget %s on %s; it allows: %s (set boot_once "
                             "to one of them, or none)" % (self.target, target, self.system_path,
                                                           ", ".join(str(a) for a in allowed)),
                             "command", url=self.system_path)
        enabled_allowed = boot.get("BootSourceOverrideEnabled@Redfish.AllowableValues")
        if isinstance(enabled_allowed, list) and "Once" not in enabled_allowed:
            raise self._fail("BMC %s does not allow BootSourceOverrideEnabled Once on %s; it allows: %s"
                             % (self.target, self.system_path, ", ".join(str(a) for a in enabled_allowed)),
                             "command", url=self.system_path)
        return boot

    def set_boot_once(self, target="Hdd", timeout=None):
        """Boot from ``target`` at the next boot only (BootSourceOverrideEnabled=Once); read back.
        RedfishError('command') when the BMC has no boot override or does not allow the target
        (check_boot_once), or reports another target afterwards. Returns {'target', 'enabled',
        'requested': {...}, 'once'} as read back: some BMCs (the sushy-tools emulator among them)
        keep reporting Enabled=Continuous."""
        self.check_boot_once(target)
        requested = {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}
        deadline = self.clock() + (self.task_timeout if timeout is None else timeout)
        resp = self.request("PATCH", self.system_path, body={"Boot": requested})
        if resp.status == 202:
            self._follow(resp, deadline, "the boot override")
        now = self.boot_override()
        if now["target"] != target:
            raise self._fail("BMC %s accepted BootSourceOverrideTarget %s but reports %s"
                             % (self.target, target, now["target"]), "command", url=self.system_path)
        return {"target": now["target"], "enabled": now["enabled"],
                "requested": {"target": target, "enabled": "Once"}, "once": now["enabled"] == "Once"}

    def log_services(self):
        """Paths of the system's and its managers' LogServices ([] when the BMC offers none)."""
        self.open()
        out = []
        owners = [(self.system_path, self.get(self.system_path))]
        for path in self.manager_paths:
            try:
                owners.append((path, self.get(path)))
            except RedfishError as exc:
                if exc.kind in ("auth", "tls"):
                    raise
        for _path, doc in owners:
            link = _link(doc, "LogServices")
            if not link:
                continue
            resp = self.request("GET", link, ok=(200, 404))
            if resp.status == 404:
                continue
            for m in _members(self.json(resp)):
                if isinstance(m.get("@odata.id"), str):
                    out.append(self._path(m["@odata.id"]))
        return out

    def _entries(self, service):
        """(service name, [LogEntry]) of one LogService, bounded in pages and entries."""
        doc = self.get(service)
        name = doc.get("Id") if isinstance(doc.get("Id"), str) else service.rstrip("/").rsplit("/", 1)[-1]
        link = _link(doc, "Entries")
        entries = []
        pages = 0
        while link and pages < MAX_PAGES and len(entries) < MAX_LOG_ENTRIES:
            page = self.get(link)
            pages += 1
            for m in _members(page):
                if "Severity" not in m and "Message" not in m and isinstance(m.get("@odata.id"), str) \
                        and len(entries) < 200:
                    m = self.get(m["@odata.id"])        # members as links only: fetch (a few)
                entries.append(m)
            nxt = page.get("Members@odata.nextLink")
            link = nxt if isinstance(nxt, str) and nxt else None
        return name, entries[:MAX_LOG_ENTRIES]

    def _text(self, value, limit=500):
        """A field of a log entry as the result shows it: text (scrubbed, then cut short) or None."""
        if value is None:
            return None
        text = self._scrub(value if isinstance(value, str) else json.dumps(value, default=str)[:2000])
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def log_marker(self):
        """{log service path: [entry ids]}: what the logs hold now (to compare with later)."""
        marker = {}
        for service in self.log_services():
            _name, entries = self._entries(service)
            marker[service] = [_entry_id(e) for e in entries]
        return marker

    def log_entries_since(self, marker=None, severities=("Warning", "Critical"), limit=100):
        """Entries of the LogServices that are not in ``marker`` (from log_marker(); None: all)
        and whose Severity is one of ``severities``: [{'service', 'id', 'created', 'severity',
        'message', 'message_id'}], at most ``limit``."""
        out = []
        for service in self.log_services():
            name, entries = self._entries(service)
            known = set((marker or {}).get(service) or [])
            for e in entries:
                if _entry_id(e) in known or e.get("Severity") not in severities:
                    continue
                out.append({"service": self._text(name), "id": self._text(_entry_id(e)),
                            "created": self._text(e.get("Created")), "severity": self._text(e.get("Severity")),
                            "message": self._text(e.get("Message")), "message_id": self._text(e.get("MessageId"))})
        return out[:limit]


def _quiet_loads(data):
    """The JSON document of a body that may hold none (a task monitor, a session's answer): None
    when it is empty or not JSON."""
    if not data:
        return None
    try:
        return loads(data, "the answer", limit=MAX_BODY)
    except ValueError:
        return None


def _list(value):
    return value if isinstance(value, list) else []


def _dig(doc, *keys):
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _entry_id(entry):
    return str(entry.get("Id") or entry.get("@odata.id") or "")
