"""redfish_power through Ansible against the real sushy-tools Redfish emulator on 127.0.0.1.

The emulator (tests/redfishtools.py) serves HTTPS with a certificate of a test CA and HTTP Basic
users from a bcrypt htpasswd; its fake driver applies a power change 1-11 s after the request.
What it does not have (a session service, a BMC whose OS ignores a soft shutdown, a boot
override without Hdd) comes from the stub BMC of tests/redfishtools.py, also over TLS.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from redfishtools import Emulator, StubBmc, free_port, make_pki, run_play

ANSIBLE_CLI = os.path.join(os.path.dirname(sys.executable), "ansible").encode()
USER = "fleetadm"
PASSWORD = "Fn7-rf-pw-3b91c4"     # distinctive, so a leak anywhere is found by a plain search
NODE = {"uuid": "7a1d0c2e-0001-4b7e-8f00-00000000a001", "name": "fn-rf1", "power_state": "Off",
        "nics": [{"mac": "52:54:00:00:0a:01", "ip": "192.0.2.21"}]}
LOOKUP = "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}"


@pytest.fixture
def run(module_runner):
    return module_runner


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def emu(tmp_path_factory, pki):
    e = Emulator(tmp_path_factory.mktemp("sushy"), pki, USER, PASSWORD, [NODE]).start()
    yield e
    e.stop()


def args(emu_or_port, pki, **kw):
    port = emu_or_port if isinstance(emu_or_port, int) else emu_or_port.port
    a = {"bmc_address": "127.0.0.1", "bmc_port": port, "bmc_user": USER, "bmc_password": PASSWORD,
         "ca_path": str(pki["ca"]), "timeout": 30, "poll_interval": 0.5, "min_interval": 0, "retries": 1,
         "rate_limit_dir": str(pki["ca"].parent / "rl")}
    a.update(kw)
    return a


def writes(emu):
    return [r for r in emu.requests() if r[0] in ("POST", "PATCH", "PUT", "DELETE")]


def assert_no_secret(res, *more):
    text = repr(dict(res))
    assert PASSWORD not in text
    for secret in more:
        assert secret not in text


def test_status_reads_without_change(run, emu, pki):
    emu.set_power(NODE["uuid"], "Off")
    before = writes(emu)
    res = run("redfish_power", args(emu, pki, state="status"))
    assert not res.failed and not res.changed, res.get("msg")
    assert (res["state_before"], res["state"], res["power"]) == ("off", "off", "off")
    assert res["auth"] == "basic" and res["reset_type"] is None
    assert "GracefulShutdown" in res["reset_types_allowed"] and "PowerCycle" not in res["reset_types_allowed"]
    assert res["requests"][0]["path"] == "/redfish/v1/" and res["attempts"] == len(res["requests"])
    assert res["msg"] == "BMC 127.0.0.1:%d: the system is off" % emu.port
    assert writes(emu) == before
    assert_no_secret(res)


def test_on_with_boot_once_then_idempotent(run, emu, pki):
    uuid = NODE["uuid"]
    emu.set_power(uuid, "Off")
    assert emu.call("PATCH", emu.system_path(uuid), {"Boot": {"BootSourceOverrideTarget": "Pxe"}})[0] == 204
    res = run("redfish_power", args(emu, pki, state="on", read_power=True, report_log=True), diff=True)
    assert not res.failed and res.changed, res.get("msg")
    assert (res["state_before"], res["state"], res["reset_type"]) == ("off", "on", "On")
    assert res["states_seen"][0] == "off" and res["states_seen"][-1] == "on"
    assert res["diff"] == {"before": {"power": "off"}, "after": {"power": "on"}}
    # The default boot_once (hdd) was set before the power-on and read back; the emulator keeps
    # reporting Continuous, which the module says.
    assert res["boot_override"] == {"target": "Hdd", "enabled": "Continuous",
                                    "requested": {"target": "Hdd", "enabled": "Once"}, "once": False}
    assert any("BootSourceOverrideEnabled=Continuous" in w for w in res.get("warnings", [])), res.get("warnings")
    methods = [(r["method"], r["path"].rsplit("/", 1)[-1]) for r in res["requests"]]
    assert methods.index(("PATCH", uuid)) < methods.index(("POST", "ComputerSystem.Reset"))
    assert res["power_watts"] is None and res["power_source"] is None      # the emulator has no reading
    assert res["log_entries"] == []                                        # nor a log service
    assert emu.power_state(uuid) == "On"
    _s, _h, doc = emu.call("GET", emu.system_path(uuid))
    assert doc["Boot"]["BootSourceOverrideTarget"] == "Hdd"
    assert "boot_override" in res and res["msg"] == "BMC 127.0.0.1:%d: sent On, the system is on" % emu.port

    before = writes(emu)
    again = run("redfish_power", args(emu, pki, state="on"))
    assert not again.failed and not again.changed and again["reset_type"] is None
    assert "boot_override" not in again and writes(emu) == before
    assert_no_secret(res)


def test_check_mode_sends_nothing(run, emu, pki):
    uuid = NODE["uuid"]
    emu.set_power(uuid, "On")
    before = writes(emu)
    res = run("redfish_power", args(emu, pki, state="off"), check=True, diff=True)
    assert not res.failed and res.changed
    assert (res["state_before"], res["state"], res["reset_type"]) == ("on", "off", "ForceOff")
    assert res["diff"] == {"before": {"power": "on"}, "after": {"power": "off"}}
    assert {r["method"] for r in res["requests"]} == {"GET"} and writes(emu) == before
    res = run("redfish_power", args(emu, pki, state="cycle"), check=True)
    assert res.changed and res["reset_type"] == "ForceOff+On" and writes(emu) == before
    assert emu.power_state(uuid) == "On"


def test_soft_then_cycle_from_off_then_cycle_from_on_then_off(run, emu, pki):
    """One test, in the order that needs no extra transition (each takes the emulator 1-11 s)."""
    uuid = NODE["uuid"]
    emu.set_power(uuid, "On")
    res = run("redfish_power", args(emu, pki, state="soft"))
    assert not res.failed and res.changed and res["reset_type"] == "GracefulShutdown", res.get("msg")
    assert res["escalated"] is False and res["state"] == "off" and emu.power_state(uuid) == "Off"

    res = run("redfish_power", args(emu, pki, state="cycle", boot_once="none"))
    assert not res.failed and res["cycled"] is False and res["reset_type"] == "On"
    assert res["states_seen"] == ["off", "on"] and "boot_override" not in res
    assert not [r for r in res["requests"] if r["method"] == "PATCH"]

    res = run("redfish_power", args(emu, pki, state="cycle"))
    assert not res.failed and res.changed and res["cycled"] is True, res.get("msg")
    assert res["reset_type"] == "ForceOff+On" and res["states_seen"] == ["on", "off", "on"]
    posts = [r for r in res["requests"] if r["method"] == "POST"]
    patch = [i for i, r in enumerate(res["requests"]) if r["method"] == "PATCH"]
    assert len(posts) == 2 and patch and patch[0] < res["requests"].index(posts[0])
    assert emu.power_state(uuid) == "On"

    res = run("redfish_power", args(emu, pki, state="off"))
    assert not res.failed and res.changed and res["reset_type"] == "ForceOff" and res["state"] == "off"
    assert emu.power_state(uuid) == "Off"


def test_wrong_password_fails_without_retries(run, emu, pki):
    refused = len([r for r in emu.requests() if r[2] == 401])
    res = run("redfish_power", args(emu, pki, bmc_password="not-the-password", retries=3))
    assert res.failed and res["error_kind"] == "auth"
    assert "BMC 127.0.0.1:%d refused the credentials of user '%s'" % (emu.port, USER) in res["msg"]
    assert len([r for r in emu.requests() if r[2] == 401]) == refused + 1
    assert "not-the-password" not in repr(dict(res)) and "Traceback" not in res["msg"]


def test_tls_without_the_ca_fails_clearly(run, emu, pki):
    a = args(emu, pki)
    del a["ca_path"]
    res = run("redfish_power", a)
    assert res.failed and res["error_kind"] == "tls"
    assert "TLS certificate of BMC 127.0.0.1:%d not accepted" % emu.port in res["msg"]
    assert "give the CA that signed the BMC's certificate in ca_path" in res["msg"]
    assert "Traceback" not in res["msg"] + res.get("module_stderr", "") and not res.get("module_stdout")
    res = run("redfish_power", args(emu, pki, ca_path=str(pki["other_ca"])))
    assert res.failed and res["error_kind"] == "tls" and "ca_path %s" % pki["other_ca"] in res["msg"]
    res = run("redfish_power", dict(a, validate_certs=False))
    assert not res.failed and res["state"] in ("on", "off")


def test_password_only_from_the_argument(run, emu, pki, tmp_path):
    a = args(emu, pki, state="status")
    del a["bmc_password"]
    res = run("redfish_power", a, env={"FLEETNAP_BMC_PASSWORD": ""})
    assert res.failed and "no password for BMC 127.0.0.1:%d" % emu.port in res["msg"]
    assert not res.get("requests")
    res = run("redfish_power", a, env={"FLEETNAP_BMC_PASSWORD": PASSWORD})
    assert res.failed and "in the module's environment is not used" in res["msg"], res
    assert_no_secret(res)
    (via_env, via_lookup), _out = run_play(
        [{"redfish_power": a, "environment": {"FLEETNAP_BMC_PASSWORD": PASSWORD}, "ignore_errors": True},
         {"redfish_power": dict(a, bmc_password=LOOKUP)}],
        tmp_path, {"FLEETNAP_BMC_PASSWORD": PASSWORD})
    assert via_env.get("failed") and "is not used" in via_env["msg"]
    assert not via_lookup.get("failed") and via_lookup["state"] in ("on", "off"), via_lookup
    assert_no_secret(via_lookup)


def test_secrets_never_in_argv_output_or_results(pki, tmp_path):
    """Against a BMC with sessions (the stub): sample every process's command line while a
    playbook powers on and off; neither the password nor the session token appears there, in
    -vvv output or in the results, and every session is deleted."""
    seen = []
    rounds = []
    stop = threading.Event()

    def sampler(secrets):
        while not stop.is_set():
            rounds.append(1)
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open("/proc/%s/cmdline" % entry, "rb") as fh:
                        cmd = fh.read()
                except OSError:
                    continue
                if b"AnsiballZ_redfish_power" in cmd or b"redfish_power" in cmd:
                    seen.append(cmd)
                # Other tests (xdist workers) start the ad-hoc ansible CLI with the password in its
                # "-a" argument: that is the test harness, not the module or a playbook.
                if any(s in cmd for s in secrets) and cmd.split(b"\0")[1:2] != [ANSIBLE_CLI]:
                    seen.append(b"LEAK " + cmd)
            time.sleep(0.002)

    with StubBmc(pki, USER, PASSWORD, token="tok-Zq81-rf-session") as stub:
        base = args(stub.port, pki, bmc_password=LOOKUP, timeout=5, poll_interval=0.2)
        tasks = [{"redfish_power": dict(base, state="on", read_power=True, report_log=True)},
                 {"redfish_power": dict(base, state="off")},
                 {"redfish_power": dict(base, state="status", bmc_password="wrong-pw-x1"), "ignore_errors": True}]
        t = threading.Thread(target=sampler, args=([PASSWORD.encode(), b"tok-Zq81"],))
        t.start()
        try:
            (on, off, refused), out = run_play(tasks, tmp_path, {"FLEETNAP_BMC_PASSWORD": PASSWORD}, "-vvv")
        finally:
            stop.set()
            t.join()
        assert not on.get("failed") and not off.get("failed"), (on.get("msg"), off.get("msg"))
        assert refused.get("failed") and refused["error_kind"] == "auth"
        assert on["auth"] == "session" and on["boot_override"]["once"] is True
        assert on["power_watts"] == 231.5 and on["power_source"] == "Power" and on["log_entries"] == []
        assert stub.logins == 3 and stub.logouts == 2 and stub.tokens == {}     # every session deleted
        assert [r.method for r in stub.seen].count("DELETE") == 2
    assert len(rounds) > 20, "the sampler hardly ran"
    assert not [c for c in seen if c.startswith(b"LEAK")]
    assert "EXEC" in out and PASSWORD not in out and "tok-Zq81" not in out and "wrong-pw-x1" not in out
    for res in (on, off, refused):
        assert_no_secret(res, "tok-Zq81", "wrong-pw-x1")


def test_soft_that_the_os_ignores_fails_clearly_and_does_not_escalate(run, pki):
    with StubBmc(pki, USER, PASSWORD) as stub:
        stub.state = "On"
        stub.ignore = {"GracefulShutdown"}
        res = run("redfish_power", args(stub.port, pki, state="soft", timeout=2, poll_interval=0.3))
        assert res.failed and res["error_kind"] == "timeout"
        assert "did not power off within 2 s after GracefulShutdown" in res["msg"]
        assert "soft_fallback_hard" in res["msg"] and "127.0.0.1:%d" % stub.port in res["msg"]
        assert stub.resets == ["GracefulShutdown"] and stub.state == "On" and stub.logouts == 1
        res = run("redfish_power", args(stub.port, pki, state="soft", timeout=2, poll_interval=0.3,
                                        soft_fallback_hard=True))
        assert not res.failed and res["escalated"] is True and res["state"] == "off"
        assert res["reset_type"] == "GracefulShutdown+ForceOff" and res["states_seen"] == ["on", "off"]
        assert stub.resets == ["GracefulShutdown", "GracefulShutdown", "ForceOff"]


def test_boot_override_impossible_means_no_power_on(run, pki):
    with StubBmc(pki, USER, PASSWORD) as stub:
        stub.boot["BootSourceOverrideTarget@Redfish.AllowableValues"] = ["None", "Pxe"]
        res = run("redfish_power", args(stub.port, pki, state="on"))
        assert res.failed and res["error_kind"] == "command"
        assert "does not allow BootSourceOverrideTarget Hdd" in res["msg"] and "or none" in res["msg"]
        assert stub.resets == [] and stub.state == "Off"
        res = run("redfish_power", args(stub.port, pki, state="on"), check=True)     # check mode says so too
        assert res.failed and "BootSourceOverrideTarget Hdd" in res["msg"]
        res = run("redfish_power", args(stub.port, pki, state="on", boot_once="none"))
        assert not res.failed and res["state"] == "on" and stub.resets == ["On"]


def test_task_monitor_and_log_entries_through_the_module(run, pki):
    with StubBmc(pki, USER, PASSWORD) as stub:
        monitor = "/redfish/v1/TaskService/TaskMonitors/3"

        def reset(req):
            stub.resets.append(req.body["ResetType"])
            stub.log_entries.append({"Id": "9", "Severity": "Warning", "Message": "Power supply redundancy lost"})
            return 202, {"Location": monitor}, None
        answers = iter([(202, {"Retry-After": "1"}, {"TaskState": "Running"}),
                        (200, {}, {"TaskState": "Completed", "TaskStatus": "OK"})])

        def task(req):
            got = next(answers, None)
            if got and got[0] == 200:
                stub.state = "On"
            return got or (404, {}, None)
        stub.route("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", reset)
        stub.route("GET", monitor, task)
        res = run("redfish_power", args(stub.port, pki, state="on", report_log=True, boot_once="none"))
        assert not res.failed and res["state"] == "on", res.get("msg")
        assert [r["status"] for r in res["requests"] if r["path"] == monitor] == [202, 200]
        assert res["log_entries"] == [{"service": "SEL", "id": "9", "created": None, "severity": "Warning",
                                       "message": "Power supply redundancy lost", "message_id": None}]


def test_unreachable_bmc_fails_within_the_bound(run, pki):
    port = free_port()
    res = run("redfish_power", args(port, pki, retries=1, request_timeout=1))
    assert res.failed and res["error_kind"] == "unreachable"
    assert "cannot reach BMC 127.0.0.1:%d" % port in res["msg"] and "after 2 attempts" in res["msg"]
    assert res["attempts"] == 2 and res["elapsed_s"] < 5
