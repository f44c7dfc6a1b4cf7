"""Unit tests of module_utils/fleetnap/redfish.py.

Against the real sushy-tools emulator (tests/redfishtools.py: fake driver, HTTPS with a test CA,
Basic auth from a bcrypt htpasswd, two systems): discovery, power on/off/soft/cycle verified
through the emulator's 1-11 s delay, a refused password, TLS with and without the CA, the boot
override, and what the emulator does not offer (power reading, log services).

Against a stub BMC (what the emulator lacks or cannot be made to do): sessions, 503 answers,
task monitors, malformed answers, missing actions and allowable values, power readings and log
entries.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from ansible.module_utils.fleetnap import redfish
from ansible.module_utils.fleetnap.redfish import Redfish, RedfishError
from redfishtools import Emulator, StubBmc, free_port, make_pki

USER = "fleetadm"
PASSWORD = "Fn7-rf-pw-5d2e8a"     # distinctive, so a leak anywhere is found by a plain search
NODE1 = {"uuid": "5e8c1f4a-0001-4c1e-9d2a-000000000001", "name": "fn-node1", "power_state": "Off",
         "nics": [{"mac": "52:54:00:00:00:01", "ip": "192.0.2.11"}]}
NODE2 = {"uuid": "5e8c1f4a-0002-4c1e-9d2a-000000000002", "name": "fn-node2", "power_state": "On",
         "nics": [{"mac": "52:54:00:00:00:02", "ip": "192.0.2.12"}]}
SUSHY_RESET_TYPES = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn"]
WAIT = 30          # the fake driver applies a change 1-11 s after the request


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def emu(tmp_path_factory, pki):
    e = Emulator(tmp_path_factory.mktemp("sushy"), pki, USER, PASSWORD, [NODE1, NODE2]).start()
    yield e
    e.stop()


@pytest.fixture
def make(pki, tmp_path):
    """A client of the emulator (or, with port=, of a stub) with test-friendly bounds."""
    clients = []

    def _make(port, **kw):
        args = dict(user=USER, password=PASSWORD, ca_path=str(pki["ca"]), state_dir=str(tmp_path / "rl"),
                    min_interval=0, retries=1, backoff=0.2, request_timeout=5)
        args.update(kw)
        c = Redfish("127.0.0.1", port, **args)
        clients.append(c)
        return c
    yield _make
    for c in clients:
        c.close()


def no_secret(*texts):
    for t in texts:
        assert PASSWORD not in str(t)


# ------------------------------------------------------------------------------------ the real emulator
def test_several_systems_need_system_id(emu, make):
    with pytest.raises(RedfishError) as e:
        make(emu.port).status()
    assert e.value.kind == "command"
    msg = str(e.value)
    assert "BMC 127.0.0.1:%d manages 2 systems" % emu.port in msg and "set system_id" in msg
    assert "%s (fn-node1)" % NODE1["uuid"] in msg and "%s (fn-node2)" % NODE2["uuid"] in msg
    with pytest.raises(RedfishError, match="has no system 'fn-node9'; it has: %s" % NODE1["uuid"]) as e:
        make(emu.port, system_id="fn-node9").status()
    assert e.value.kind == "command"


def test_status_discovery_and_basic_auth(emu, make):
    emu.set_power(NODE1["uuid"], "Off")
    emu.set_power(NODE2["uuid"], "On")
    c = make(emu.port, system_id=NODE1["uuid"])
    assert c.status() == "off" and c.state() == "off"
    assert make(emu.port, system_id=NODE2["uuid"]).status() == "on"
    # sushy-tools has no SessionService: HTTP Basic on every request but the service root.
    assert c.auth == "basic" and c.system_path == "/redfish/v1/Systems/%s" % NODE1["uuid"]
    assert c.reset_types == SUSHY_RESET_TYPES and c.reset_types_declared
    assert c.reset_target == c.system_path + "/Actions/ComputerSystem.Reset"
    assert c.chassis_path and c.chassis_path.startswith("/redfish/v1/Chassis/")
    assert [r["status"] for r in c.log] == [200] * len(c.log)
    assert [r["path"] for r in c.log[:3]] == ["/redfish/v1/", "/redfish/v1/Systems", c.system_path]
    no_secret(c.log)


# The power tests run in this order so each starts where the one before left the system (each
# still sets its own starting state): the fake driver takes 1-11 s per change.
def test_on_is_verified_through_the_emulators_delay(emu, make):
    uuid = NODE1["uuid"]
    emu.set_power(uuid, "Off")
    c = make(emu.port, system_id=uuid)
    assert c.reset_type_for("on") == "On" and c.reset_type_for("off") == "ForceOff"
    started = time.time()
    assert c.power("on") == "On"
    reached, last, seen = c.wait_for("on", WAIT, 0.5)
    assert reached and last == "on" and seen[-1] == "on", seen
    assert emu.power_state(uuid) == "On"
    took = time.time() - started
    assert took < 15, took                                    # 1-11 s, polled every 0.5 s
    posts = [r for r in emu.requests() if r[0] == "POST" and r[1] == c.reset_target]
    assert posts and all(status == 204 for _m, _p, status in posts)


def test_soft_shutdown(emu, make):
    uuid = NODE1["uuid"]
    emu.set_power(uuid, "On")
    c = make(emu.port, system_id=uuid)
    assert c.power("soft") == "GracefulShutdown"
    reached, last, _seen = c.wait_for("off", WAIT, 0.5)
    assert reached and emu.power_state(uuid) == "Off"


def test_cycle_without_powercycle_is_forceoff_then_on(emu, make):
    """sushy-tools does not declare PowerCycle: from on, off verified, then on; from off, on."""
    uuid = NODE1["uuid"]
    emu.set_power(uuid, "Off")
    c = make(emu.port, system_id=uuid)
    assert c.reset_type_for("cycle") is None
    with pytest.raises(ValueError, match="use cycle"):
        c.power("cycle")
    reached, last, seen, phase = c.cycle("off", WAIT, 0.5)
    assert reached and seen == ["off", "on"] and c.cycle_method == "On"
    before_posts = len([r for r in emu.requests() if r[0] == "POST"])
    reached, last, seen, phase = c.cycle("on", WAIT, 0.5)
    assert reached and last == "on" and phase is None
    assert seen == ["on", "off", "on"] and c.cycle_method == "ForceOff+On"
    assert len([r for r in emu.requests() if r[0] == "POST"]) == before_posts + 2


def test_off_is_verified(emu, make):
    uuid = NODE1["uuid"]
    emu.set_power(uuid, "On")
    c = make(emu.port, system_id=uuid)
    assert c.power("off") == "ForceOff"
    reached, last, seen = c.wait_for("off", WAIT, 0.5)
    assert reached and seen[-1] == "off" and emu.power_state(uuid) == "Off"


def test_wait_for_gives_up_at_its_timeout(emu, make):
    uuid = NODE1["uuid"]
    emu.set_power(uuid, "Off")
    c = make(emu.port, system_id=uuid)
    started = time.time()
    reached, last, seen = c.wait_for("on", 1.0, 0.3)          # nothing was asked: stays off
    assert not reached and last == "off" and seen == ["off"]
    assert time.time() - started < 2.5


def test_wrong_password_is_auth_and_not_retried(emu, make):
    before = [r for r in emu.requests() if r[2] == 401]
    c = make(emu.port, system_id=NODE1["uuid"], password="not-the-password", retries=3)
    with pytest.raises(RedfishError) as e:
        c.status()
    assert e.value.kind == "auth" and e.value.status == 401
    assert "BMC 127.0.0.1:%d refused the credentials of user 'fleetadm'" % emu.port in str(e.value)
    assert "check bmc_user and bmc_password" in str(e.value)
    assert "not-the-password" not in str(e.value) + repr(c.log)
    refused = [r for r in emu.requests() if r[2] == 401]
    assert len(refused) == len(before) + 1                      # asked once, not retried
    assert [r["status"] for r in c.log] == [200, 401]


def test_tls_needs_the_ca(emu, make, pki):
    with pytest.raises(RedfishError) as e:
        make(emu.port, system_id=NODE1["uuid"], ca_path=None).status()
    assert e.value.kind == "tls"
    msg = str(e.value)
    assert "TLS certificate of BMC 127.0.0.1:%d not accepted" % emu.port in msg
    assert "certificate verify failed" in msg or "unable to get local issuer" in msg, msg
    assert "give the CA that signed the BMC's certificate in ca_path" in msg and "Traceback" not in msg
    with pytest.raises(RedfishError) as e:
        make(emu.port, system_id=NODE1["uuid"], ca_path=str(pki["other_ca"]), retries=3).status()
    assert e.value.kind == "tls" and "the CA in ca_path %s did not sign it" % pki["other_ca"] in str(e.value)
    # Verified with the right CA; unverified on request.
    assert make(emu.port, system_id=NODE1["uuid"]).status() in ("on", "off")
    c = make(emu.port, system_id=NODE1["uuid"], ca_path=None, validate_certs=False)
    assert c.status() in ("on", "off")


def test_a_ca_file_that_is_not_pem_is_refused_before_any_request(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(RedfishError, match="ca_path %s cannot be used as a CA bundle" % bad) as e:
        Redfish("127.0.0.1", 9, USER, PASSWORD, ca_path=str(bad), state_dir=str(tmp_path / "rl"))
    assert e.value.kind == "tls" and not (tmp_path / "rl").exists()


def test_boot_once_sets_the_target(emu, make):
    uuid = NODE1["uuid"]
    status, _h, _d = emu.call("PATCH", emu.system_path(uuid), {"Boot": {"BootSourceOverrideTarget": "Pxe"}})
    assert status == 204
    c = make(emu.port, system_id=uuid)
    assert c.boot_override() == {"target": "Pxe", "enabled": "Continuous",
                                 "allowed": ["Pxe", "Cd", "Hdd", "UefiHttp"]}
    got = c.set_boot_once("Hdd")
    # The emulator stores the target and ignores BootSourceOverrideEnabled (always Continuous).
    assert got == {"target": "Hdd", "enabled": "Continuous", "requested": {"target": "Hdd", "enabled": "Once"},
                   "once": False}
    _s, _h, doc = emu.call("GET", emu.system_path(uuid))
    assert doc["Boot"]["BootSourceOverrideTarget"] == "Hdd"
    patches = len([r for r in emu.requests() if r[0] == "PATCH"])
    with pytest.raises(RedfishError) as e:
        c.set_boot_once("Usb")
    assert e.value.kind == "command"
    assert "does not allow BootSourceOverrideTarget Usb" in str(e.value) and "it allows: Pxe, Cd, Hdd, UefiHttp" \
        in str(e.value)
    assert len([r for r in emu.requests() if r[0] == "PATCH"]) == patches       # nothing sent


def test_what_the_emulator_does_not_offer(emu, make):
    c = make(emu.port, system_id=NODE1["uuid"])
    assert c.power_watts() is None and c.power_source is None      # its chassis has no Power resource
    assert c.log_services() == []                                  # no LogServices
    assert c.log_marker() == {} and c.log_entries_since({}) == []


def test_requests_keep_min_interval_and_use_the_shared_rate_limit_file(emu, make, tmp_path):
    c = make(emu.port, system_id=NODE1["uuid"], min_interval=0.3)
    c.status()
    c.status()
    gaps = [b["start"] - a["end"] for a, b in zip(c.log, c.log[1:])]
    assert len(gaps) >= 4 and min(gaps) >= 0.3 - 1e-5, gaps
    assert (tmp_path / "rl" / ("127.0.0.1_%d" % emu.port)).is_file()   # ipmi.RateLimiter's file


@pytest.mark.parametrize("host,port,user,match", [
    ("", 443, USER, "bmc_address"), ("-oops", 443, USER, "bmc_address"), ("a b", 443, USER, "bmc_address"),
    ("h", 0, USER, "bmc_port"), ("h", 70000, USER, "bmc_port"), ("h", "443", USER, "bmc_port"),
    ("h", 443, "", "bmc_user"), ("h", 443, "a\nb", "bmc_user"),
])
def test_validate_target(host, port, user, match):
    with pytest.raises(ValueError, match=match):
        Redfish(host, port, user, PASSWORD)


def test_no_password_and_bad_numbers_are_refused():
    with pytest.raises(ValueError, match="no BMC password"):
        Redfish("h", 443, USER, "")
    with pytest.raises(ValueError, match="request_timeout must be a finite number"):
        Redfish("h", 443, USER, PASSWORD, request_timeout=float("nan"))
    with pytest.raises(ValueError, match="retries must be"):
        Redfish("h", 443, USER, PASSWORD, retries=-1)


# ------------------------------------------------------------------------------------ the stub BMC
@pytest.fixture
def stub(pki):
    with StubBmc(pki, USER, PASSWORD) as s:
        yield s


def test_session_login_reuse_and_logout(stub, make):
    c = make(stub.port)
    assert c.status() == "off"
    assert c.power("on") == "On" and c.wait_for("on", 5, 0.1)[0]
    c.set_boot_once("Hdd")
    assert c.auth == "session" and stub.logins == 1 and len(stub.tokens) == 1
    token = next(iter(stub.tokens))
    c.close()
    assert stub.logouts == 1 and stub.tokens == {}
    after_login = stub.seen[2:]                  # GET root, POST login, then everything else
    assert [r.method for r in stub.seen[:2]] == ["GET", "POST"]
    assert "Authorization" not in stub.seen[0].headers and "X-Auth-Token" not in stub.seen[0].headers
    assert stub.seen[1].body == {"UserName": USER, "Password": PASSWORD}      # the only place it goes
    assert after_login and all(r.headers.get("X-Auth-Token") == token for r in after_login)
    assert not any("Authorization" in r.headers for r in stub.seen)
    assert stub.seen[-1].method == "DELETE" and stub.seen[-1].path == "/redfish/v1/SessionService/Sessions/1"
    assert stub.connections < len(stub.seen)                          # kept alive, not one per request
    assert token not in repr(c.log) and PASSWORD not in repr(c.log)


def test_context_manager_logs_out_even_on_error(stub, pki, tmp_path):
    stub.allowed = ["On"]
    with pytest.raises(RedfishError):
        with Redfish("127.0.0.1", stub.port, USER, PASSWORD, ca_path=str(pki["ca"]), state_dir=str(tmp_path)) as c:
            c.power("off")
    assert stub.logins == 1 and stub.logouts == 1 and stub.resets == []


def test_expired_session_logs_in_again_once(stub, make):
    c = make(stub.port)
    c.status()
    stub.tokens.clear()                          # the BMC forgot the session
    assert c.status() == "off"
    assert stub.logins == 2


def test_refused_session_login_is_auth_and_not_retried(stub, make):
    c = make(stub.port, password="wrong-pw-77", retries=3)
    with pytest.raises(RedfishError) as e:
        c.status()
    assert e.value.kind == "auth" and stub.logins == 1
    assert "refused the credentials of user 'fleetadm' (HTTP 401 on POST /redfish/v1/SessionService/Sessions" \
        in str(e.value)
    assert "wrong-pw-77" not in str(e.value)


def test_basic_auth_when_the_service_has_no_sessions(pki, make):
    with StubBmc(pki, USER, PASSWORD, sessions=False) as s:
        c = make(s.port)
        assert c.status() == "off" and c.auth == "basic" and s.logins == 0
        assert all("Authorization" in r.headers for r in s.seen[1:])


def test_secrets_are_scrubbed_from_errors(stub, make):
    stub.route("POST", "/redfish/v1/SessionService/Sessions",
               lambda req: (400, {}, {"error": {"message": "bad login %s" % req.body}}))
    with pytest.raises(RedfishError) as e:
        make(stub.port).status()
    assert e.value.kind == "command" and "bad login" in str(e.value) and "********" in str(e.value)
    no_secret(e.value)


def test_503_with_retry_after_is_retried(stub, make):
    stub.route("GET", "/redfish/v1/Systems/1",
               stub.times(2, (503, {"Retry-After": "1"}, {"error": {"message": "busy"}})))
    c = make(stub.port, retries=2)
    started = time.time()
    assert c.status() == "off"
    assert 1.8 <= time.time() - started < 5
    assert [r["status"] for r in c.log if r["path"] == "/redfish/v1/Systems/1"] == [503, 503, 200, 200]


def test_503_for_ever_fails_within_the_bound(stub, make):
    stub.route("GET", "/redfish/v1/", lambda req: (503, {"Retry-After": "3600"}, {"error": {"message": "not ready"}}))
    c = make(stub.port, retries=2, retry_after_cap=0.5)
    started = time.time()
    with pytest.raises(RedfishError) as e:
        c.status()
    assert time.time() - started < 3                            # Retry-After 3600 capped at 0.5 s
    assert e.value.kind == "unreachable" and e.value.status == 503
    assert "BMC 127.0.0.1:%d answered GET /redfish/v1/ with HTTP 503 3 times (not ready)" % stub.port in str(e.value)
    assert len(c.log) == 3


def test_connection_refused_is_unreachable_after_the_retries(make):
    port = free_port()
    c = make(port, retries=2, backoff=0.1)
    with pytest.raises(RedfishError) as e:
        c.status()
    assert e.value.kind == "unreachable" and "cannot reach BMC 127.0.0.1:%d" % port in str(e.value)
    assert "after 3 attempts" in str(e.value) and len(c.log) == 3


def test_a_bmc_that_never_answers_cannot_hang_the_client(make):
    """A port that accepts connections and says nothing (no TLS handshake)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        c = make(srv.getsockname()[1], request_timeout=1, retries=1, backoff=0.2)
        started = time.time()
        with pytest.raises(RedfishError) as e:
            c.status()
        assert time.time() - started < 4
        assert e.value.kind == "unreachable" and "did not answer GET /redfish/v1/ within 1 s" in str(e.value)
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        srv.close()


TASK = "/redfish/v1/TaskService/TaskMonitors/7"


def _task_answer(req):
    return 202, {"Location": TASK}, None


def test_a_task_that_stays_running_times_out(stub, make):
    stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", _task_answer)
    stub.route("GET", TASK, lambda req: (202, {"Retry-After": "1"}, {"TaskState": "Running"}))
    c = make(stub.port)
    started = time.time()
    with pytest.raises(RedfishError) as e:
        c.reset("ForceOff", timeout=2)
    assert 1.9 <= time.time() - started < 4
    assert e.value.kind == "timeout"
    assert "the task for ResetType ForceOff (%s) was still Running when the timeout ran out" % TASK in str(e.value)


def _reset_with_task(stub):
    def answer(req):
        stub.resets.append(req.body["ResetType"])
        return 202, {"Location": TASK}, None
    return answer


def test_a_task_ending_in_exception_is_a_command_error(stub, make):
    stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", _reset_with_task(stub))
    answers = iter([(202, {}, {"TaskState": "Running"}),
                    (200, {}, {"TaskState": "Exception", "TaskStatus": "Critical",
                               "Messages": [{"Message": "Power supply 2 failed", "MessageId": "Base.1.0.GeneralError"}]})])
    stub.route("GET", TASK, lambda req: next(answers))
    c = make(stub.port)
    with pytest.raises(RedfishError) as e:
        c.reset("On", timeout=10)
    assert e.value.kind == "command" and stub.resets == ["On"]
    assert "the task for ResetType On (%s) ended in Exception (TaskStatus Critical): Power supply 2 failed" % TASK \
        in str(e.value)


def test_a_task_that_completes(stub, make):
    stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", _reset_with_task(stub))
    answers = iter([(202, {}, {"TaskState": "Running"}), (200, {}, {"TaskState": "Completed", "TaskStatus": "OK"})])
    stub.route("GET", TASK, lambda req: next(answers))
    c = make(stub.port)
    got = c.reset("On", timeout=10)
    assert got["status"] == 202 and got["task"] == {"state": "Completed", "monitor": TASK, "status": "OK"}
    assert stub.resets == ["On"]


def test_malformed_json_names_the_url(stub, make):
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, '{"PowerState": "On",'))
    with pytest.raises(RedfishError) as e:
        make(stub.port).status()
    assert e.value.kind == "protocol"
    assert "BMC 127.0.0.1:%d: the answer to GET /redfish/v1/Systems/1 is not JSON" % stub.port in str(e.value)


def test_missing_fields_name_the_url_and_the_field(stub, make):
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, dict(stub.system(), Actions={})))
    with pytest.raises(RedfishError) as e:
        make(stub.port).status()
    assert e.value.kind == "protocol"
    assert "/redfish/v1/Systems/1 has no Actions.#ComputerSystem.Reset.target" in str(e.value)
    doc = stub.system()
    del doc["PowerState"]
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, doc))
    with pytest.raises(RedfishError, match="/redfish/v1/Systems/1 has no PowerState") as e:
        make(stub.port).status()
    stub.route("GET", "/redfish/v1/", lambda req: (200, {}, {"Links": {}}))
    with pytest.raises(RedfishError, match=r"/redfish/v1/ has no Systems\.@odata\.id"):
        make(stub.port).status()


def test_a_reset_type_the_bmc_does_not_allow(stub, make):
    stub.allowed = ["On", "GracefulShutdown"]
    c = make(stub.port)
    with pytest.raises(RedfishError) as e:
        c.power("off")
    assert e.value.kind == "command"
    assert "does not allow ResetType ForceOff for 'off' on /redfish/v1/Systems/1; it allows: On, GracefulShutdown" \
        in str(e.value)
    with pytest.raises(RedfishError, match="does not allow ResetType PowerCycle"):
        c.reset("PowerCycle")
    assert stub.resets == []                       # nothing was sent
    stub.allowed = ["ForceOn", "ForceOff"]
    assert make(stub.port).reset_type_for("on") == "ForceOn"


def test_allowable_values_from_action_info_or_the_standard_set(stub, make):
    stub.allowed = None
    c = make(stub.port).open()
    assert c.reset_types == list(redfish.STANDARD_RESET_TYPES) and not c.reset_types_declared
    assert c.reset_type_for("cycle") is None       # PowerCycle only when the BMC declares it
    info = "/redfish/v1/Systems/1/ResetActionInfo"
    doc = stub.system()
    doc["Actions"]["#ComputerSystem.Reset"]["@Redfish.ActionInfo"] = info
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, doc))
    stub.route("GET", info, lambda req: (200, {}, {"Parameters": [
        {"Name": "ResetType", "AllowableValues": ["On", "ForceOff", "PowerCycle"]}]}))
    c = make(stub.port).open()
    assert c.reset_types == ["On", "ForceOff", "PowerCycle"] and c.reset_types_declared


def test_cycle_uses_a_declared_powercycle(stub, make):
    stub.state = "On"
    c = make(stub.port)
    reached, last, seen, phase = c.cycle("on", 5, 0.1)
    assert reached and phase is None and c.cycle_method == "PowerCycle" and stub.resets == ["PowerCycle"]
    stub.resets.clear()
    c = make(stub.port, prefer_power_cycle=False)
    assert c.cycle("on", 5, 0.1)[0] and stub.resets == ["ForceOff", "On"]


def test_power_readings(stub, make):
    c = make(stub.port)
    assert c.power_watts() == 231.5 and c.power_source == "Power"
    env = "/redfish/v1/Chassis/1/EnvironmentMetrics"
    stub.route("GET", "/redfish/v1/Chassis/1", lambda req: (200, {}, {
        "Id": "1", "EnvironmentMetrics": {"@odata.id": env}, "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}}))
    stub.route("GET", env, lambda req: (200, {}, {"PowerWatts": {"Reading": 198}}))
    assert c.power_watts() == 198.0 and c.power_source == "EnvironmentMetrics"
    sub = "/redfish/v1/Chassis/1/PowerSubsystem"
    stub.route("GET", "/redfish/v1/Chassis/1", lambda req: (200, {}, {"Id": "1", "PowerSubsystem": {"@odata.id": sub}}))
    stub.route("GET", sub, lambda req: (200, {}, {"PowerSupplies": {"@odata.id": sub + "/PowerSupplies"}}))
    stub.route("GET", sub + "/PowerSupplies", lambda req: (200, {}, {"Members": [
        {"@odata.id": sub + "/PowerSupplies/%d" % i} for i in (1, 2)]}))
    for i, watts in ((1, 120.5), (2, 99.5)):
        stub.route("GET", sub + "/PowerSupplies/%d" % i,
                   lambda req, i=i: (200, {}, {"Metrics": {"@odata.id": sub + "/PowerSupplies/%d/Metrics" % i}}))
        stub.route("GET", sub + "/PowerSupplies/%d/Metrics" % i,
                   lambda req, w=watts: (200, {}, {"InputPowerWatts": {"Reading": w}}))
    assert c.power_watts() == 220.0 and c.power_source == "PowerSubsystem"
    stub.route("GET", "/redfish/v1/Chassis/1", lambda req: (200, {}, {"Id": "1"}))
    assert c.power_watts() is None and c.power_source is None


def test_new_warning_log_entries_since_a_marker(stub, make):
    c = make(stub.port)
    assert c.log_services() == ["/redfish/v1/Systems/1/LogServices/SEL"]
    marker = c.log_marker()
    assert marker == {"/redfish/v1/Systems/1/LogServices/SEL": ["1"]}
    stub.log_entries.append({"Id": "2", "Severity": "Warning", "Message": "Fan 3 speed low",
                             "Created": "2025-01-01T00:01:00Z", "MessageId": "Fan.1.0.Low"})
    stub.log_entries.append({"Id": "3", "Severity": "OK", "Message": "Power on"})
    stub.log_entries.append({"Id": "4", "Severity": "Critical", "Message": "PSU 1 lost input"})
    got = c.log_entries_since(marker)
    assert [(e["service"], e["id"], e["severity"], e["message"]) for e in got] == [
        ("SEL", "2", "Warning", "Fan 3 speed low"), ("SEL", "4", "Critical", "PSU 1 lost input")]
    assert got[0]["created"] == "2025-01-01T00:01:00Z" and got[0]["message_id"] == "Fan.1.0.Low"
    assert [e["id"] for e in c.log_entries_since(None)] == ["2", "4"]


def test_boot_once_on_a_bmc_that_reads_back_once(stub, make):
    c = make(stub.port)
    got = c.set_boot_once("Hdd")
    assert got["once"] and got["target"] == "Hdd" and stub.boot["BootSourceOverrideEnabled"] == "Once"
    stub.boot["BootSourceOverrideEnabled@Redfish.AllowableValues"] = ["Disabled", "Continuous"]
    with pytest.raises(RedfishError, match="does not allow BootSourceOverrideEnabled Once"):
        c.set_boot_once("Hdd")
    doc = stub.system()
    del doc["Boot"]
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, doc))
    with pytest.raises(RedfishError, match="has no Boot object.*set boot_once to none") as e:
        c.check_boot_once("Hdd")
    assert e.value.kind == "command"


def test_links_to_other_hosts_stay_on_this_bmc(stub, make):
    stub.route("GET", "/redfish/v1/Systems", lambda req: (200, {}, {"Members": [
        {"@odata.id": "https://bmc.elsewhere.example/redfish/v1/Systems/1"}]}))
    c = make(stub.port)
    assert c.status() == "off" and c.system_path == "/redfish/v1/Systems/1"


def test_a_lost_answer_repeats_a_get_but_never_a_reset(stub, make):
    def slow_reset(req):
        stub.resets.append(req.body["ResetType"])
        time.sleep(2)                            # longer than request_timeout: the answer is lost
        return 204, {}, None
    stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", slow_reset)
    c = make(stub.port, request_timeout=1, retries=3, backoff=0.1)
    c.open()
    with pytest.raises(RedfishError) as e:
        c.reset("On")
    assert e.value.kind == "unreachable" and stub.resets == ["On"]          # sent once only
    assert "did not answer POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset within 1 s" in str(e.value)
    assert "the BMC may have acted on the request, which is not sent again" in str(e.value)
    gets = []

    def slow_first_get(req):
        gets.append(req)
        if len(gets) == 1:
            time.sleep(2)                        # this answer is lost too
        return None                              # the default answer
    stub.route("GET", "/redfish/v1/Systems/1", slow_first_get)
    assert c.status() == "off"                   # the GET was asked again and answered
    assert [r["status"] for r in c.log if r["path"] == "/redfish/v1/Systems/1"][-2:] == [None, 200]


def test_retry_after_values():
    assert redfish._retry_after("2", 15) == 2.0
    assert redfish._retry_after("3600", 15) == 15.0                       # capped
    assert redfish._retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 15) == 0.0   # a date in the past
    assert redfish._retry_after("soon", 15) is None and redfish._retry_after(None, 15) is None
    assert redfish._retry_after("nan", 15) is None and redfish._retry_after("-5", 15) == 0.0


# ------------------------------------------------- power readings from published Redfish documents
MOCKUPS = Path(__file__).resolve().parents[1] / "data" / "bmc-power"


def serve_mockup(stub, chassis="/redfish/v1/Chassis/1U", drop=()):
    """The stub's system linked to the DMTF public-rackmount1 mockup's chassis, every document of
    the mockup's chassis served from tests/data as published (``drop``: chassis links removed)."""
    root = MOCKUPS / "dmtf-public-rackmount1"
    for path in (root / "Chassis" / "1U").rglob("index.json"):
        url = "/redfish/v1/" + str(path.parent.relative_to(root))
        doc = json.loads(path.read_text())
        if url == chassis:
            doc = {k: v for k, v in doc.items() if k not in drop}
        stub.route("GET", url, lambda req, doc=doc: (200, {}, doc))
    system = stub.system()
    system["Links"]["Chassis"] = [{"@odata.id": chassis}]
    stub.route("GET", "/redfish/v1/Systems/1", lambda req: (200, {}, system))


def test_power_readings_from_the_dmtf_mockup(stub, make):
    """DMTF's public-rackmount1 mockup (tests/data/bmc-power, BSD-3-Clause): EnvironmentMetrics
    first, then the older Power resource, then the power supplies' metrics (the mockup's Bay2 has
    none, so only Bay1's InputPowerWatts counts)."""
    serve_mockup(stub)
    c = make(stub.port)
    assert c.power_watts() == 374.0 and c.power_source == "EnvironmentMetrics"
    serve_mockup(stub, drop=("EnvironmentMetrics",))
    c = make(stub.port)
    assert c.power_watts() == 344.0 and c.power_source == "Power"
    serve_mockup(stub, drop=("EnvironmentMetrics", "Power"))
    c = make(stub.port)
    assert c.power_watts() == 937.4 and c.power_source == "PowerSubsystem"
    serve_mockup(stub, drop=("EnvironmentMetrics", "Power", "PowerSubsystem"))
    c = make(stub.port)
    assert c.power_watts() is None and c.power_source is None


def test_a_power_resource_without_power_control_is_no_reading(stub, make):
    """OpenStack sushy's Power sample (tests/data/bmc-power/sushy-power.json, Apache-2.0): power
    supplies with their output watts but no PowerControl, so no chassis input reading."""
    doc = json.loads((MOCKUPS / "sushy-power.json").read_text())
    stub.route("GET", "/redfish/v1/Chassis/1", lambda req: (200, {}, {
        "Id": "1", "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}}))
    stub.route("GET", "/redfish/v1/Chassis/1/Power", lambda req: (200, {}, doc))
    c = make(stub.port)
    assert c.power_watts() is None and c.power_source is None
