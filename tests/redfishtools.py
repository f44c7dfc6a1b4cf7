"""Redfish test helpers: a PKI, the real sushy-tools emulator, and a small stub BMC for error paths.

- :func:`make_pki` writes a CA, a server certificate it signed for 127.0.0.1/localhost and a
  second, unrelated CA (for "the wrong CA in ca_path"), with the ``cryptography`` package.
- :class:`Emulator` runs OpenStack's ``sushy-emulator`` (sushy-tools, pinned in
  requirements.txt) from the venv: fake driver (no libvirt), the systems given, HTTP Basic users
  from an htpasswd file with bcrypt hashes (the only format its auth accepts: ``$2b$``/``$2a$``/
  ``$2y$``), HTTPS with the certificate above, its state in a temporary directory, on a free
  port of 127.0.0.1, in a process group of its own that :meth:`Emulator.stop` kills. Its fake
  driver applies a power change 1-11 s after the request (on the next read after that).
  Werkzeug logs every request on stderr; :meth:`Emulator.requests` parses that log.
- :class:`StubBmc` is a tiny Redfish service over TLS (http.server, a thread per connection,
  ephemeral port) for what the emulator does not have or cannot be made to do: a session service,
  503 answers, task monitors, malformed JSON, missing actions, power readings and log services.
  Tests change it through ``stub.route(method, path, fn)``.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
SUSHY = VENV_BIN / "sushy-emulator"


# ------------------------------------------------------------------------------------- PKI
def _name(cn):
    from cryptography.x509.oid import NameOID
    from cryptography import x509
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fleetnap tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _ca(cn):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn)).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def make_pki(d: Path) -> dict:
    """ca.pem, server.pem + server.key (signed by ca.pem, for 127.0.0.1 and localhost), other-ca.pem."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("fleetnap test BMC CA")
    _other_key, other = _ca("some other CA")
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    out = {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key", "other_ca": d / "other-ca.pem"}
    out["ca"].write_bytes(ca.public_bytes(pem))
    out["other_ca"].write_bytes(other.public_bytes(pem))
    out["cert"].write_bytes(cert.public_bytes(pem))
    out["key"].write_bytes(_pem_key(key))
    out["key"].chmod(0o600)
    return out


def write_htpasswd(path: Path, users: dict) -> Path:
    """An Apache-style user file with bcrypt hashes (sushy's auth accepts nothing else)."""
    import bcrypt
    path.write_text("".join("%s:%s\n" % (u, bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode())
                            for u, p in users.items()))
    path.chmod(0o600)
    return path


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def client_context(ca):
    return ssl.create_default_context(cafile=str(ca))


def http_json(port, method, path, ca, user=None, password=None, body=None, timeout=10):
    """The test's own request (not the code under test): (status, headers, JSON or None)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=client_context(ca))
    headers = {"Accept": "application/json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        return resp.status, resp.headers, doc
    finally:
        conn.close()


# ------------------------------------------------------------------------------------- the emulator
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_REQUEST_LINE = re.compile(r'"(GET|POST|PATCH|PUT|DELETE) (\S+) HTTP/[0-9.]+" (\d{3})')


class Emulator(object):
    """sushy-emulator (fake driver) on 127.0.0.1:<port> over HTTPS with Basic auth."""

    def __init__(self, workdir: Path, pki: dict, user: str, password: str, systems: list):
        if not SUSHY.exists():
            raise RuntimeError("%s is missing: .venv/bin/pip install -r requirements.txt (sushy-tools)" % SUSHY)
        self.dir = workdir
        self.pki = pki
        self.user = user
        self.password = password
        self.systems = systems
        self.port = free_port()
        self.log_path = workdir / "sushy.log"
        auth = write_htpasswd(workdir / "htpasswd", {user: password})
        (workdir / "state").mkdir()
        self.config = workdir / "sushy.conf"
        self.config.write_text("\n".join([
            "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
            "SUSHY_EMULATOR_LISTEN_PORT = %d" % self.port,
            "SUSHY_EMULATOR_SSL_CERT = %r" % str(pki["cert"]),
            "SUSHY_EMULATOR_SSL_KEY = %r" % str(pki["key"]),
            "SUSHY_EMULATOR_AUTH_FILE = %r" % str(auth),
            "SUSHY_EMULATOR_FAKE_DRIVER = True",
            "SUSHY_EMULATOR_FAKE_SYSTEMS = %r" % (systems,),
            "SUSHY_EMULATOR_STATE_DIR = %r" % str(workdir / "state"),
            "",
        ]))
        self.proc = None

    def start(self, timeout=60):
        log = open(str(self.log_path), "w")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("SUSHY_EMULATOR_CONFIG", None)
        self.proc = subprocess.Popen([str(SUSHY), "--config", str(self.config)], stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, cwd=str(self.dir), env=env,
                                     start_new_session=True)
        log.close()
        deadline = time.time() + timeout
        while True:
            try:
                status, _h, _d = http_json(self.port, "GET", "/redfish/v1/", self.pki["ca"], timeout=2)
                if status == 200:
                    return self
            except (OSError, http.client.HTTPException):
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("sushy-emulator did not answer on 127.0.0.1:%d within %d s; log:\n%s"
                                   % (self.port, timeout, self.log_path.read_text()[-4000:]))
            time.sleep(0.2)

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(10)
        self.proc = None

    # -- the test's view of the emulator (its own requests, not the code under test)
    def call(self, method, path, body=None):
        return http_json(self.port, method, path, self.pki["ca"], self.user, self.password, body)

    def system_path(self, uuid):
        return "/redfish/v1/Systems/%s" % uuid

    def power_state(self, uuid):
        status, _h, doc = self.call("GET", self.system_path(uuid))
        assert status == 200, (status, doc)
        return doc["PowerState"]

    def set_power(self, uuid, state, timeout=30):
        """Bring a system to 'On' or 'Off' (the fake driver takes 1-11 s) and wait for it."""
        if self.power_state(uuid) != state:
            status, _h, doc = self.call("POST", self.system_path(uuid) + "/Actions/ComputerSystem.Reset",
                                        {"ResetType": "On" if state == "On" else "ForceOff"})
            assert status in (200, 204), (status, doc)
        deadline = time.time() + timeout
        while self.power_state(uuid) != state:
            assert time.time() < deadline, "the emulator did not reach %s within %d s" % (state, timeout)
            time.sleep(0.5)

    def requests(self):
        """[(method, path, status)] of every request the emulator logged so far."""
        text = _ANSI.sub("", self.log_path.read_text(errors="replace"))    # werkzeug colours non-200 lines
        return [(m.group(1), m.group(2), int(m.group(3))) for m in _REQUEST_LINE.finditer(text)]


# ------------------------------------------------------------------------------------- the stub BMC
class Req(object):
    def __init__(self, method, path, headers, body):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body


class StubBmc(object):
    """A small Redfish BMC over TLS. Defaults: a session service, one system '1' in ``state``,
    Reset with ``allowed`` types, a chassis with a Power reading, a SEL log service; changes
    apply at once. ``route(method, path, fn)``: fn(req) returns (status, headers, body) or None
    for the default answer (body: dict -> JSON, str/bytes sent as they are)."""

    def __init__(self, pki: dict, user: str, password: str, sessions=True, token="tok-7Qx9-stub-session"):
        self.pki = pki
        self.user = user
        self.password = password
        self.sessions_enabled = sessions
        self.token_prefix = token
        self.state = "Off"
        self.allowed = ["On", "ForceOff", "GracefulShutdown", "ForceRestart", "PowerCycle"]
        self.ignore = set()                 # ResetTypes accepted and not acted on
        self.boot = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous",
                     "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd", "Cd"]}
        self.watts = 231.5
        self.log_entries = [{"Id": "1", "Severity": "OK", "Message": "System boot", "Created": "2025-01-01T00:00:00Z",
                             "MessageId": "Event.1.0.Boot"}]
        self.routes = {}
        self.seen = []                      # Req of every request
        self.tokens = {}                    # token -> session path
        self.logins = 0
        self.logouts = 0
        self.resets = []
        self.connections = 0                # TCP connections accepted
        self._n = 0
        self._lock = threading.Lock()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(pki["cert"]), str(pki["key"]))
        self._ctx = ctx
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                req = Req(self.command, self.path, dict(self.headers), body)
                with stub._lock:
                    stub.seen.append(req)
                status, headers, out = stub.answer(req)
                if isinstance(out, (dict, list)):
                    data = json.dumps(out).encode()
                elif isinstance(out, str):
                    data = out.encode()
                else:
                    data = out or b""
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                stub.connections += 1
                return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

            def handle_error(self, request, client_address):
                pass                        # a client that went away (timeouts are tested)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        return False

    def route(self, method, path, fn):
        self.routes[(method, path)] = fn

    def times(self, n, answer):
        """A route function that gives ``answer`` the first n times, then the default."""
        count = {"n": 0}

        def fn(req):
            count["n"] += 1
            return answer if count["n"] <= n else None
        return fn

    # -- the default tree
    def _authorized(self, req):
        token = req.headers.get("X-Auth-Token")
        if token is not None:
            return token in self.tokens
        basic = req.headers.get("Authorization", "")
        want = "Basic " + base64.b64encode(("%s:%s" % (self.user, self.password)).encode()).decode()
        return basic == want

    def system(self):
        reset = {"target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"}
        if self.allowed is not None:
            reset["ResetType@Redfish.AllowableValues"] = list(self.allowed)
        return {"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "Name": "stub", "PowerState": self.state,
                "Boot": dict(self.boot), "LogServices": {"@odata.id": "/redfish/v1/Systems/1/LogServices"},
                "Links": {"Chassis": [{"@odata.id": "/redfish/v1/Chassis/1"}],
                          "ManagedBy": [{"@odata.id": "/redfish/v1/Managers/1"}]},
                "Actions": {"#ComputerSystem.Reset": reset}}

    def answer(self, req):
        fn = self.routes.get((req.method, req.path))
        if fn is not None:
            got = fn(req)
            if got is not None:
                return got
        p, m = req.path, req.method
        if p in ("/redfish/v1", "/redfish/v1/") and m == "GET":
            root = {"@odata.id": "/redfish/v1/", "Systems": {"@odata.id": "/redfish/v1/Systems"},
                    "Chassis": {"@odata.id": "/redfish/v1/Chassis"}}
            if self.sessions_enabled:
                root["SessionService"] = {"@odata.id": "/redfish/v1/SessionService"}
                root["Links"] = {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}
            return 200, {}, root
        if p == "/redfish/v1/SessionService/Sessions" and m == "POST" and self.sessions_enabled:
            body = req.body if isinstance(req.body, dict) else {}
            with self._lock:
                self.logins += 1
                if body.get("UserName") != self.user or body.get("Password") != self.password:
                    return 401, {}, {"error": {"message": "Invalid username or password"}}
                self._n += 1
                token, where = "%s-%d" % (self.token_prefix, self._n), "/redfish/v1/SessionService/Sessions/%d" % self._n
                self.tokens[token] = where
            return 201, {"X-Auth-Token": token, "Location": where}, {"@odata.id": where, "Id": str(self._n)}
        if not self._authorized(req):
            return 401, {}, {"error": {"message": "Unauthorized"}}
        if m == "DELETE" and p.startswith("/redfish/v1/SessionService/Sessions/"):
            with self._lock:
                for t, where in list(self.tokens.items()):
                    if where == p:
                        del self.tokens[t]
                        self.logouts += 1
                        return 204, {}, None
            return 404, {}, {"error": {"message": "no such session"}}
        if p == "/redfish/v1/Systems" and m == "GET":
            return 200, {}, {"Members": [{"@odata.id": "/redfish/v1/Systems/1"}], "Members@odata.count": 1}
        if p == "/redfish/v1/Systems/1" and m == "GET":
            return 200, {}, self.system()
        if p == "/redfish/v1/Systems/1" and m == "PATCH":
            boot = (req.body or {}).get("Boot") if isinstance(req.body, dict) else None
            if not isinstance(boot, dict):
                return 400, {}, {"error": {"message": "PATCH only for Boot"}}
            self.boot.update(boot)
            return 204, {}, None
        if p == "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset" and m == "POST":
            rtype = (req.body or {}).get("ResetType")
            self.resets.append(rtype)
            if self.allowed is not None and rtype not in self.allowed:
                return 400, {}, {"error": {"message": "ResetType %s not supported" % rtype}}
            if rtype not in self.ignore:
                self.state = {"On": "On", "ForceOn": "On", "ForceOff": "Off", "GracefulShutdown": "Off",
                              "PowerCycle": "On", "ForceRestart": "On"}.get(rtype, self.state)
            return 204, {}, None
        if p == "/redfish/v1/Chassis/1" and m == "GET":
            return 200, {}, {"@odata.id": p, "Id": "1", "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}}
        if p == "/redfish/v1/Chassis/1/Power" and m == "GET":
            return 200, {}, {"PowerControl": [{"PowerConsumedWatts": self.watts}]}
        if p == "/redfish/v1/Managers/1" and m == "GET":
            return 200, {}, {"@odata.id": p, "Id": "1"}
        if p == "/redfish/v1/Systems/1/LogServices" and m == "GET":
            return 200, {}, {"Members": [{"@odata.id": "/redfish/v1/Systems/1/LogServices/SEL"}]}
        if p == "/redfish/v1/Systems/1/LogServices/SEL" and m == "GET":
            return 200, {}, {"Id": "SEL", "Entries": {"@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries"}}
        if p == "/redfish/v1/Systems/1/LogServices/SEL/Entries" and m == "GET":
            return 200, {}, {"Members": list(self.log_entries)}
        return 404, {}, {"error": {"message": "no resource %s" % p}}


def run_play(tasks, tmp_path, env, *extra):
    """Run tasks on localhost through ansible-playbook (a playbook file: nothing on the command line
    but the file's name); return (the tasks' results, stdout + stderr)."""
    from conftest import REPO, TARGET_PYTHON
    book = tmp_path / ("play-%d.yml" % len(list(tmp_path.glob("play-*.yml"))))
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    full = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json", **env)
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-M", str(REPO / "library"), "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
                           *extra, str(book)], capture_output=True, text=True, env=full, cwd=str(REPO), timeout=300)
    out = proc.stdout + proc.stderr
    start = proc.stdout.find("\n{")
    report = json.loads(proc.stdout if proc.stdout.startswith("{") else proc.stdout[start + 1:])
    return [t["hosts"]["localhost"] for t in report["plays"][0]["tasks"]], out
