"""Hostile BMCs, answers, patterns and booleans, through Ansible: ONE ansible-playbook run, at -vvv.

The table mixes modules (bmc_power, redfish_power, gear_observe, gear_wave, host_wait,
gear_shift_plan, gear_plan), so it is one playbook of many tasks (redfishtools.run_play) rather
than one badinput table per module: one ansible-playbook start for all of it. Its stubs:

- an ipmitool stand-in (on the tasks' PATH) that echoes the password it was handed (``-E``,
  IPMI_PASSWORD) raw, line by line, base64, JSON-escaped and URL-encoded, in an error
  (``bmc_user`` echo-err), in a power status it cannot read (echo-out), or answers ``on`` (ok);
- HTTPS Redfish stubs (tests/redfishtools.StubBmc) whose 401 body echoes the password in every
  encoding, and whose resources have the wrong shape (PowerState a list or a dict, ActionInfo
  Parameters a number, a task's Messages a number, ExtendedInfo a number);
- an HTTP Prometheus stub (result not a list, values a dict, an error body echoing the token);
- a TCP service greeting with 'a' x 100 + '!' (a catastrophic pattern's worst input).

Every case: no traceback, within its bound, the words of the real cause, and no form of the
password (or token) anywhere in the result, stdout or stderr of the -vvv run - except, for the
one case that passes it through a task's environment: (which the module refuses), the line
where Ansible itself prints that command line at -vvv (what the refusal is about).
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, quote_plus

import pytest

from badinput import PEAK_RSS_MIB, RSS_WRAPPER
from redfishtools import StubBmc, make_pki, run_play
from ansible.module_utils.fleetnap.tc import TcError, check_show, current_view

PASSWORD = 'Fn7-hx"q/\\w9\nzeta-LINE7+%&k'
TOKEN = "Fn7-promtok-4d1c9e"
USER = "fleetadm"
BOUND_S = 30


def encodings(secret):
    raw = secret.encode("utf-8")
    out = {"raw": secret, "json": json.dumps(secret)[1:-1], "base64": base64.b64encode(raw).decode()[:-4],
           "base64 of user:password": base64.b64encode(b"fleetadm:" + raw).decode()[12:-4],
           "url": quote(secret, safe=""), "url form": quote_plus(secret), "repr": repr(secret)[1:-1]}
    for i, line in enumerate(secret.split("\n")):
        out["line %d" % i] = line
    return out


def found(text, secret=PASSWORD):
    return [name for name, form in encodings(secret).items() if form and form in text]


IPMITOOL = r'''#!/usr/bin/python3
import base64, json, sys, urllib.parse, os
pw = os.environ.get("IPMI_PASSWORD", "")
user = sys.argv[sys.argv.index("-U") + 1]
forms = [pw, base64.b64encode(pw.encode()).decode(), json.dumps(pw), urllib.parse.quote(pw)] + pw.splitlines()
if user == "ok":
    print("Chassis Power is on")
    sys.exit(0)
if user == "echo-out":
    print("Chassis Power is " + " ".join(forms))
    sys.exit(0)
for f in forms:
    sys.stderr.write("> sent %s\n" % f)
sys.stderr.write("Error: RAKP 2 HMAC is invalid for %s\n" % " | ".join(forms))
sys.exit(1)
'''


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def echo_401(req):
    forms = encodings(PASSWORD)
    return 401, {}, {"error": {"message": "bad login %s (%s)" % (PASSWORD, forms["base64"]),
                               "@Message.ExtendedInfo": [{"Message": "%s %s %s" % (forms["url"], forms["json"],
                                                                                  forms["line 1"])}]}}


def shaped(stub, kind):
    system = stub.system()
    if kind == "PowerState list":
        system["PowerState"] = ["On"]
    elif kind == "PowerState dict":
        system["PowerState"] = {"On": True}
    elif kind == "ActionInfo Parameters a number":
        reset = system["Actions"]["#ComputerSystem.Reset"]
        del reset["ResetType@Redfish.AllowableValues"]
        reset["@Redfish.ActionInfo"] = "/redfish/v1/Systems/1/ResetActionInfo"
        stub.route("GET", "/redfish/v1/Systems/1/ResetActionInfo", lambda req: (200, {}, {"Parameters": 5}))
    elif kind == "ExtendedInfo a number":
        stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                   lambda req: (400, {}, {"error": {"message": "no", "@Message.ExtendedInfo": 7}}))
    elif kind == "task Messages a number":
        stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                   lambda req: (202, {"Location": "/redfish/v1/TaskMonitors/1"}, {}))
        stub.route("GET", "/redfish/v1/TaskMonitors/1",
                   lambda req: (200, {}, {"TaskState": "Exception", "Messages": 9, "TaskStatus": "Critical"}))
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, system))


class Prometheus(object):
    """/api/v1/query_range answers of a wrong shape, chosen by the query; 400 echoing the token."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                query = body.split("query=", 1)[1].split("&", 1)[0]
                if "echo" in query:
                    auth = self.headers.get("Authorization", "")
                    tok = auth.split(" ", 1)[-1]
                    data = json.dumps({"status": "error", "errorType": "bad_data",
                                       "error": "token %s %s %s" % (tok, base64.b64encode(tok.encode()).decode(),
                                                                   quote(tok))}).encode()
                    status = 400
                else:
                    result = {"result_not_a_list": {"a": 1},
                              "values_a_dict": [{"metric": {}, "values": {"1": "2"}}],
                              "sample_a_dict": [{"metric": {}, "values": [{"t": 1}]}]}[query]
                    data = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def greeter():
    """A TCP service whose greeting is 'a' x 100 + '!' (what ^(a+)+$ backtracks on for ever)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            try:
                conn.sendall(b"a" * 100 + b"!\r\n")
                time.sleep(0.05)
            finally:
                conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


LOOKUP = "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}"


def cases(tmp, pki, stubs, prom, greet_port):
    """(name, task, words) of the table; words: what the failure message says (None: succeeds)."""
    ipmi = {"bmc_address": "127.0.0.1", "bmc_password": PASSWORD, "retries": 0, "min_interval": 0,
            "rate_limit_dir": str(tmp / "rl")}
    rf = {"bmc_address": "127.0.0.1", "bmc_user": USER, "bmc_password": PASSWORD, "ca_path": str(pki["ca"]),
          "retries": 0, "min_interval": 0, "timeout": 5, "rate_limit_dir": str(tmp / "rl")}
    host = {"name": "h1", "address": "127.0.0.1", "port": 9, "bmc_address": "127.0.0.1", "bmc_user": "echo-err",
            "bmc_password": PASSWORD}
    obs = {"probe_timeout": 0.2, "retries": 0, "min_interval": 0, "rate_limit_dir": str(tmp / "rl")}
    record_host = {"name": "h1", "address": "127.0.0.1", "port": 9}
    record = {"fleetnap_bmc_address": "127.0.0.1", "fleetnap_bmc_user": "echo-err", "fleetnap_bmc_password": PASSWORD,
              "fleetnap_gear_group": 1}
    wave = dict(obs, action="up", ipmi_timeout=1)
    del wave["probe_timeout"]
    plan = {"replicas": 2, "gear": 2}
    prom_args = {"servers": 6, "replicas": 3, "gmin": 1, "server_read_iops": 250, "server_write_iops": 200,
                 "server_read_mbps": 110, "server_write_mbps": 90, "prometheus_url": prom.url,
                 "prometheus_start": "2025-01-01T00:00:00Z", "prometheus_end": "2025-01-02T00:00:00Z",
                 "prometheus_step": 3600, "prometheus_token": TOKEN}
    out = [
        ("bmc_power: ipmitool echoes the password in its error",
         {"bmc_power": dict(ipmi, bmc_user="echo-err")}, "rejected user 'echo-err'"),
        ("bmc_power: ipmitool echoes the password in a status it cannot read",
         {"bmc_power": dict(ipmi, bmc_user="echo-out")}, "cannot read the power state"),
        ("bmc_power: password through a task's environment: is refused",
         {"bmc_power": dict(ipmi, bmc_user="ok"), "environment": {"FLEETNAP_BMC_PASSWORD": PASSWORD}},
         "is on the command line of process"),
        ("bmc_power: password exported on the controller, passed by lookup, works",
         {"bmc_power": dict(ipmi, bmc_user="ok", bmc_password=LOOKUP)}, None),
        ("redfish_power: a 401 body echoes the password in every encoding",
         {"redfish_power": dict(rf, bmc_port=stubs["echo"].port)}, "refused the credentials of user"),
        ("gear_observe: BMC error echoes the password; inventory holds credentials",
         {"gear_observe": dict(obs, hosts=[dict(host, inventory={"group": 1, "bmc_password": PASSWORD,
                                                                 "deep": {"api_token": PASSWORD}})])}, None),
        ("gear_wave: BMC error echoes the password during an ipmi wake",
         {"gear_wave": dict(wave, hosts=[dict(host, up_methods=["ipmi"], boot_once=False, event_log=False)])},
         None),
        # the password in the host's power record (hosts[].record), as gear_shift passes it
        ("gear_observe: the record's password, echoed in a BMC error",
         {"gear_observe": dict(obs, hosts=[dict(record_host, record=record)])}, None),
        ("gear_observe: the record's password beside a refused record field",
         {"gear_observe": dict(obs, hosts=[dict(record_host, record=dict(record, fleetnap_wol_macs=["zz"]))])},
         "option hosts[0].record.fleetnap_wol_macs[0]"),
        ("gear_wave: the record's password, a refused port before any BMC is asked",
         {"gear_wave": dict(wave, hosts=[dict(record_host, up_methods=["ipmi"],
                                              record=dict(record, fleetnap_bmc_port=70000))])},
         "option hosts[0].record.fleetnap_bmc_port: must be >= 1 and <= 65535"),
        ("gear_wave: a suspend command's output repeats the password",
         {"gear_wave": dict(wave, action="down", down_timeout=0.5, silent_for=0,
                            hosts=[dict(host, said={"rc": 3, "stdout": "x" * 290 + PASSWORD, "msg": PASSWORD})])},
         None),
        ("gear_wave: said.skipped 'no' is refused, not read as true",
         {"gear_wave": dict(wave, action="down", hosts=[dict(host, said={"rc": 1, "skipped": "no"})])},
         "option hosts[0].said.skipped: must be true or false"),
    ]
    for kind in ("PowerState list", "PowerState dict", "ActionInfo Parameters a number", "ExtendedInfo a number",
                 "task Messages a number"):
        state = "status" if kind.startswith("PowerState") else "on"
        words = {"PowerState list": "has PowerState ['On'], not one of On",
                 "PowerState dict": "has PowerState {'On': True}, not one of On",
                 "ActionInfo Parameters a number": "/redfish/v1/Systems/1/ResetActionInfo has Parameters 5, not a list",
                 "ExtendedInfo a number": "refused POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset: HTTP 400 (no)",
                 "task Messages a number": "ended in Exception (TaskStatus Critical): its Messages is 9, not a list"}[kind]
        out.append(("redfish_power: %s" % kind,
                    {"redfish_power": dict(rf, bmc_port=stubs[kind].port, state=state, boot_once="none")}, words))
    for pattern, words in (("(", "option greeting: '(' is not a regular expression"),
                           (r"(a)\1", "uses a back-reference"),
                           ("^(a+)+$", "has a quantifier inside a quantified group")):
        out.append(("gear_wave: greeting %s" % pattern,
                    {"gear_wave": dict(wave, greeting=pattern, hosts=[dict(host, up_methods=["ipmi"])])}, words))
        out.append(("host_wait: greeting %s" % pattern,
                    {"host_wait": {"host": "127.0.0.1", "port": greet_port, "greeting": pattern, "timeout": 3}},
                    words))
    out.append(("host_wait: a greeting that does not match says what was answered",
                {"host_wait": {"host": "127.0.0.1", "port": greet_port, "greeting": "^SSH-", "timeout": 1}},
                'answered "aaaaaaaaaa'))
    out.append(("host_wait: a long bounded pattern against the worst greeting stays in time",
                {"host_wait": {"host": "127.0.0.1", "port": greet_port, "greeting": r"^a*a*a*$", "timeout": 2}},
                "which does not match the greeting"))
    for word in ("0", "no", "false", "off"):
        out.append(("gear_shift_plan: ssh %r is not an answer" % word,
                    {"gear_shift_plan": dict(plan, hosts={
                        "a1": {"group": 1, "ssh": word, "bmc": "off", "bmc_configured": True, "up_methods": ["ipmi"]},
                        "a2": {"group": 2, "ssh": True, "bmc": "on", "bmc_configured": "yes",
                               "up_methods": ["wol"]}})}, None))
    out.append(("gear_shift_plan: ssh 'maybe' is refused",
                {"gear_shift_plan": dict(plan, hosts={"a1": {"group": 1, "ssh": "maybe", "up_methods": ["wol"]},
                                                      "a2": {"group": 2, "ssh": True, "up_methods": ["wol"]}})},
                "host a1: ssh: must be true or false"))
    out.append(("gear_shift_plan: bmc_configured 'perhaps' is refused",
                {"gear_shift_plan": dict(plan, hosts={
                    "a1": {"group": 1, "state": "on", "bmc_configured": "perhaps", "up_methods": ["wol"]},
                    "a2": {"group": 2, "state": "on", "up_methods": ["wol"]}})},
                "host a1: bmc_configured: must be true or false"))
    for query, words in (("result_not_a_list", "data.result is dict, not a list of series"),
                         ("values_a_dict", "series 0 has no 'values' list (values is dict)"),
                         ("sample_a_dict", "bad sample {'t': 1}"),
                         ("echo", "answered HTTP 400")):
        out.append(("gear_plan: Prometheus %s" % query,
                    {"gear_plan": dict(prom_args, promql={m: query for m in ("read_iops", "write_iops", "read_mbps",
                                                                                "write_mbps")})}, words))
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory, pki):
    tmp = tmp_path_factory.mktemp("hostile-secrets")
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "ipmitool").write_text(IPMITOOL)
    (bindir / "ipmitool").chmod(0o755)
    kinds = ("echo", "PowerState list", "PowerState dict", "ActionInfo Parameters a number", "ExtendedInfo a number",
             "task Messages a number")
    stubs = dict((k, StubBmc(pki, USER, PASSWORD).__enter__()) for k in kinds)
    stubs["echo"].route("POST", "/redfish/v1/SessionService/Sessions", echo_401)
    for k in kinds[1:]:
        shaped(stubs[k], k)
    prom = Prometheus()
    table = cases(tmp, pki, stubs, prom, greeter())
    path = "%s:%s" % (bindir, os.environ["PATH"])
    tasks = []
    for i, (name, task, _words) in enumerate(table):
        t = dict(task, name="%02d %s" % (i, name), ignore_errors=True, timeout=BOUND_S * 2)
        t["environment"] = dict(task.get("environment") or {}, PATH=path)
        tasks.append(t)
    rss = tmp / "rss.log"
    started = time.time()
    results, out = run_play(tasks, tmp, {"FLEETNAP_BMC_PASSWORD": PASSWORD, "FLEETNAP_RSS_LOG": str(rss),
                                         "ANSIBLE_VERBOSE_TO_STDERR": "1"},
                            "-vvv", "-e", "ansible_python_interpreter=%s" % RSS_WRAPPER)
    for s in stubs.values():
        s.__exit__()
    prom.server.shutdown()
    assert len(results) == len(table), out[-3000:]
    return {"table": table, "results": results, "out": out, "elapsed": time.time() - started,
            "rss": [int(x) for x in rss.read_text().split()] if rss.exists() else []}


def _names():
    class P(object):
        url = "x"
    fake = dict((k, type("S", (), {"port": 1})()) for k in ("echo", "PowerState list", "PowerState dict",
                                                            "ActionInfo Parameters a number", "ExtendedInfo a number",
                                                            "task Messages a number"))
    from pathlib import Path
    return [c[0] for c in cases(Path("/x"), {"ca": Path("/x/ca")}, fake, P(), 1)]


NAMES = _names()


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_hostile_case(table, index):
    name, task, words = table["table"][index]
    res = table["results"][index]
    text = json.dumps(res)
    assert "Traceback" not in text and "MODULE FAILURE" not in text, res
    if words is None:
        assert not res.get("failed"), res
    else:
        assert res.get("failed") and words in res.get("msg", ""), res
    for secret in (PASSWORD, TOKEN):
        assert found(text, secret) == [] and found(json.dumps(res, ensure_ascii=False), secret) == [], (name, res)
    assert table["rss"] and max(table["rss"]) / 1024.0 < PEAK_RSS_MIB


def test_what_the_cases_return(table):
    by = dict((c[0], r) for c, r in zip(table["table"], table["results"]))
    observed = by["gear_observe: BMC error echoes the password; inventory holds credentials"]["hosts"]["h1"]
    assert observed["group"] == 1 and "bmc_password" not in observed and observed["deep"] == {}
    assert "rejected user 'echo-err'" in observed["bmc_error"] and "********" in observed["bmc_error"]
    recorded = by["gear_observe: the record's password, echoed in a BMC error"]["hosts"]["h1"]
    assert recorded["group"] == 1 and "rejected user 'echo-err'" in recorded["bmc_error"]   # the record was read
    woke = by["gear_wave: BMC error echoes the password during an ipmi wake"]["hosts"]["h1"]
    assert not woke["ok"] and "rejected user 'echo-err'" in woke["msg"]
    for word in ("0", "no", "false", "off"):
        rows = by["gear_shift_plan: ssh %r is not an answer" % word]["rows"]
        assert [r["state"] for r in rows if r["host"] == "a1"] == ["off"], rows
    env = by["bmc_power: password through a task's environment: is refused"]
    assert "FLEETNAP_BMC_PASSWORD on the controller" in env["msg"] and "nothing was sent" in env["msg"]
    assert not env.get("commands")
    assert by["bmc_power: password exported on the controller, passed by lookup, works"]["power"] == "on"
    for name in NAMES:
        if "greeting" in name and "host_wait" not in name:
            assert by[name]["msg"].startswith("option greeting:"), by[name]      # a bad option, not a failed wake


def test_no_form_of_a_secret_in_the_vvv_output(table):
    """Ansible's own -vvv line of the module's command for the environment: case holds the value
    (that is what the module refuses); nowhere else is any form of it."""
    own = re.compile(r"<[^>\n]*> EXEC [^\n]*FLEETNAP_BMC_PASSWORD=.*?sleep 0'", re.S)
    assert len(own.findall(table["out"])) == 1
    rest = own.sub("", table["out"])
    assert found(rest) == [] and found(rest, TOKEN) == []


def test_the_table_runs_in_bounded_time(table):
    assert table["elapsed"] < 240, table["elapsed"]


@pytest.mark.parametrize("show, words", [
    ({"kind": "etf"}, "printed dict, not a list of qdiscs"),
    (["mqprio"], "entry 0 is str 'mqprio', not an object"),
    ([5], "entry 0 is int 5, not an object"),
    ([{"kind": "mqprio", "handle": 256, "root": True}], "entry 0 has handle 256, not a str"),
    ([{"kind": "etf", "parent": 1}], "entry 0 has parent 1, not a str"),
    ([{"kind": "mqprio", "handle": "100:", "root": True, "options": {"queues": "0-1"}}],
     "options.queues '0-1', not a list"),
    ([{"kind": "mqprio", "handle": "100:", "root": True, "options": {"queues": [[0, "x"]]}}],
     "options.queues entry [0, 'x']"),
    ([{"kind": "etf", "handle": "100:", "root": True, "options": {"delta": "300"}}], "options.delta '300', not a int"),
])
def test_tc_answers_of_the_wrong_shape_are_named(show, words):
    with pytest.raises(TcError) as e:
        current_view(show, "eth9")
    assert "tc -j qdisc show dev eth9" in str(e.value) and words in str(e.value)


def test_tc_answer_of_the_right_shape_passes():
    show = [{"kind": "mqprio", "handle": "100:", "root": True, "options": {"tc": 2, "map": [0] * 16,
                                                                         "queues": [[0, 0], [1, 3]]}},
            {"kind": "etf", "handle": "8001:", "parent": "100:1", "options": {"clockid": "TAI", "delta": 300000,
                                                                             "offload": "off"}}]
    assert check_show(show, "eth9") is show
    assert current_view(show)["etf"][0]["delta_ns"] == 300000
