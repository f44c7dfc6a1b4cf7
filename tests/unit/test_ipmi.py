"""Unit tests of module_utils/fleetnap/ipmi.py (argv, status parsing, rate limit, retries)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest

from ansible.module_utils.fleetnap import ipmi
from ansible.module_utils.fleetnap.ipmi import Bmc, IpmiError, RateLimiter

SECRET = "Sup3r-Secret-9"


def test_argv_has_no_password_and_uses_env():
    argv = ipmi.build_argv("/usr/bin/ipmitool", "10.0.0.5", 623, "admin", ["chassis", "power", "status"])
    assert SECRET not in " ".join(argv)
    assert "-P" not in argv and "-f" not in argv
    assert argv[:10] == ["/usr/bin/ipmitool", "-I", "lanplus", "-H", "10.0.0.5", "-p", "623", "-U", "admin", "-E"]
    assert argv[-3:] == ["chassis", "power", "status"]
    assert argv[argv.index("-C") + 1] == "3"
    assert "-C" not in ipmi.build_argv("ipmitool", "h", 623, "u", ["x"], interface="lan")
    assert ipmi.password_env(SECRET) == {"IPMI_PASSWORD": SECRET}
    with pytest.raises(ValueError, match="FLEETNAP_BMC_PASSWORD"):
        ipmi.password_env("")


@pytest.mark.parametrize("host,port,user,match", [
    ("", 623, "admin", "bmc_address"), ("-oops", 623, "admin", "bmc_address"), ("a b", 623, "admin", "bmc_address"),
    ("h", 0, "admin", "bmc_port"), ("h", 70000, "admin", "bmc_port"), ("h", "623", "admin", "bmc_port"),
    ("h", 623, "", "bmc_user"), ("h", 623, "x" * 17, "bmc_user"),
])
def test_validate_target(host, port, user, match):
    with pytest.raises(ValueError, match=match):
        ipmi.validate_target(host, port, user)


def test_parse_status():
    assert ipmi.parse_power_status("Chassis Power is on\n") == "on"
    assert ipmi.parse_power_status("Loading IANA PEN Registry...\nChassis Power is off\n") == "off"
    with pytest.raises(IpmiError, match="cannot read the power state") as e:
        ipmi.parse_power_status("Chassis Power Control: Up/On")
    assert e.value.kind == "parse"


@pytest.mark.parametrize("stderr,kind", [
    ("> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session", "auth"),
    ("RAKP 2 message indicates an error : unauthorized name\nError: Unable to establish IPMI v2 / RMCP+ session",
     "auth"),
    ("Get Auth Capabilities error\nError issuing Get Channel Authentication Capabilities request\n"
     "Error: Unable to establish IPMI v2 / RMCP+ session", "unreachable"),
    ("Set Chassis Power Control to Cycle failed: Command not supported in present state", "command"),
])
def test_classify(stderr, kind):
    assert ipmi.classify_failure("", stderr) == kind


def test_backoff():
    assert ipmi.backoff_delays(4, 0.5, 3) == [0.5, 1.0, 2.0, 3.0]
    assert ipmi.backoff_delays(0) == []


def test_lock_path_sanitised(tmp_path):
    assert ipmi.lock_path(str(tmp_path), "fe80::1%eth0", 623) == str(tmp_path / "fe80__1_eth0_623")


class FakeClock(object):
    def __init__(self, t=1000.0):
        self.t = t
        self.sleeps = []

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.sleeps.append(s)
        self.t += s


def test_rate_limiter_waits_only_the_remaining_interval(tmp_path):
    clock = FakeClock()
    with RateLimiter(str(tmp_path), "bmc1", 623, 2.0, clock=clock, sleep=clock.sleep) as rl:
        assert rl.waited == 0
        clock.t += 0.5  # the command takes 0.5 s
    end1 = clock.t
    clock.t += 0.5
    with RateLimiter(str(tmp_path), "bmc1", 623, 2.0, clock=clock, sleep=clock.sleep) as rl:
        assert rl.waited == pytest.approx(1.5) and rl.start == pytest.approx(end1 + 2.0)
    # Another BMC has its own file and does not wait.
    with RateLimiter(str(tmp_path), "bmc2", 623, 2.0, clock=clock, sleep=clock.sleep) as rl:
        assert rl.waited == 0
    # A timestamp from the future (clock stepped back) never makes it wait more than the interval.
    (tmp_path / "bmc1_623").write_text("%f\n" % (clock.t + 3600))
    with RateLimiter(str(tmp_path), "bmc1", 623, 2.0, clock=clock, sleep=clock.sleep) as rl:
        assert rl.waited == pytest.approx(2.0)


def test_rate_limiter_unwritable_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(IpmiError, match="rate_limit_dir"):
        with RateLimiter(str(blocker / "sub"), "h", 623, 1):
            pass


def _worker(state_dir, out_path, n, interval):
    rows = []
    for _ in range(n):
        with RateLimiter(state_dir, "shared-bmc", 623, interval) as rl:
            time.sleep(0.02)  # the "command"
        rows.append((rl.start, rl.end))
    with open(out_path, "w") as fh:
        json.dump(rows, fh)


def test_rate_limiter_across_processes(tmp_path):
    """Real processes, real flock: commands never overlap and are min_interval apart."""
    interval = 0.15
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "rl"), str(tmp_path / ("%d.json" % i)), 3, interval))
             for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    rows = sorted(r for i in range(3) for r in json.loads((tmp_path / ("%d.json" % i)).read_text()))
    assert len(rows) == 9
    for (s1, e1), (s2, e2) in zip(rows, rows[1:]):
        assert s2 >= e1 + interval - 1e-5, (s1, e1, s2, e2)
    assert oct(os.stat(tmp_path / "rl").st_mode & 0o777) == "0o700"


class ScriptedRunner(object):
    """Error-path stand-in for ipmitool: returns scripted (rc, out, err) and records argv/env."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv, env):
        self.calls.append((argv, env))
        return self.answers.pop(0)


UNREACHABLE = (1, "", "Get Auth Capabilities error\nError: Unable to establish IPMI v2 / RMCP+ session")


def _bmc(tmp_path, runner, **kw):
    clock = FakeClock()
    kw.setdefault("min_interval", 0)
    return Bmc(runner, "ipmitool", "10.1.2.3", 6230, "admin", SECRET, state_dir=str(tmp_path),
               clock=clock, sleep=clock.sleep, **kw), clock


def test_bmc_retries_unreachable_then_gives_up(tmp_path):
    runner = ScriptedRunner(UNREACHABLE, UNREACHABLE, UNREACHABLE)
    bmc, clock = _bmc(tmp_path, runner, retries=2, backoff=0.5)
    with pytest.raises(IpmiError, match=r"BMC 10\.1\.2\.3:6230 did not answer .* after 3 attempt") as e:
        bmc.status()
    assert e.value.kind == "unreachable" and len(runner.calls) == 3
    assert clock.sleeps == [0.5, 1.0]
    for argv, env in runner.calls:
        assert SECRET not in argv and env == {"IPMI_PASSWORD": SECRET}


def test_bmc_retry_then_success(tmp_path):
    runner = ScriptedRunner(UNREACHABLE, (0, "Chassis Power is on\n", ""))
    bmc, _ = _bmc(tmp_path, runner, retries=2)
    assert bmc.status() == "on" and [c["rc"] for c in bmc.log] == [1, 0]


def test_bmc_auth_failure_not_retried(tmp_path):
    runner = ScriptedRunner((1, "", "> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session"))
    bmc, _ = _bmc(tmp_path, runner, retries=5)
    with pytest.raises(IpmiError, match="rejected user 'admin': RAKP 2 HMAC is invalid") as e:
        bmc.status()
    assert e.value.kind == "auth" and len(runner.calls) == 1
    assert SECRET not in str(e.value)


def test_bmc_wait_for_times_out_with_last_state(tmp_path):
    runner = ScriptedRunner(*[(0, "Chassis Power is on\n", "")] * 10)
    bmc, clock = _bmc(tmp_path, runner)
    reached, last, seen = bmc.wait_for("off", timeout=3, poll=1)
    assert (reached, last, seen) == (False, "on", ["on"])
    assert len(runner.calls) == 4 and clock.t == 1003.0  # polls at t=0, 1, 2, 3 (the deadline), no later


def test_bmc_guard_wraps_argv_and_maps_timeout(tmp_path):
    runner = ScriptedRunner((124, "", ""), (124, "", ""))
    bmc, _ = _bmc(tmp_path, runner, retries=1, session_timeout=2, session_retries=1, guard=["/usr/bin/timeout"])
    with pytest.raises(IpmiError, match="did not finish within 12 s") as e:
        bmc.status()
    assert e.value.kind == "unreachable"
    argv = runner.calls[0][0]
    assert argv[:4] == ["/usr/bin/timeout", "--kill-after=2", "12", "ipmitool"]


def test_bmc_rejects_session_retries_zero(tmp_path):
    with pytest.raises(ValueError, match="session_retries must be >= 1"):
        _bmc(tmp_path, ScriptedRunner(), session_retries=0)


def test_cycle_that_the_bmc_ignored_is_reported_not_proven(tmp_path):
    """A BMC that answers every command and never changes state: the cycle fails at its off phase
    (before, 'power cycle' was accepted and 'on' read back at once: reported as done)."""
    on = (0, "Chassis Power is on\n", "")
    ok = (0, "Chassis Power Control: Down/Off\n", "")
    runner = ScriptedRunner(ok, *[on] * 10)
    bmc, _clock = _bmc(tmp_path, runner)
    reached, last, seen, phase = bmc.cycle("on", timeout=3, poll=1)
    assert (reached, last, seen, phase) == (False, "on", ["on"], "off")
    assert runner.calls[0][0][-3:] == ["chassis", "power", "off"]
    assert not any(c[0][-1] == "on" and c[0][-2] == "power" for c in runner.calls)   # never asked for on


def test_cycle_from_on_sees_off_then_on(tmp_path):
    off, on = (0, "Chassis Power is off\n", ""), (0, "Chassis Power is on\n", "")
    ack = (0, "Chassis Power Control: ok\n", "")
    runner = ScriptedRunner(ack, on, off, ack, off, on)
    bmc, _clock = _bmc(tmp_path, runner)
    assert bmc.cycle("on", timeout=10, poll=1) == (True, "on", ["on", "off", "on"], None)


# 'chassis bootparam get 5' as ipmitool 1.8.19 prints it for a BMC that took 'chassis bootdev disk'
# (ipmi_sim takes no boot parameters: its refusal is the module test's, test_gear_wave_ipmi.py).
BOOT_FLAGS_DISK_ONCE = """Boot parameter version: 1
Boot parameter 5 is valid/unlocked
Boot parameter data: 8008000000
 Boot Flags :
   - Boot Flag Valid
   - Options apply to only next boot
   - BIOS PC Compatible (legacy) boot
   - Boot Device Selector : Force Boot from default Hard-Drive
   - Console Redirection control : System Default
   - BIOS verbosity : Console redirection occurs per BIOS configuration setting (default)
   - BIOS Mux Control Override : BIOS uses recommended setting of the mux at the end of POST
"""
BOOT_FLAGS_PXE_PERSISTENT = BOOT_FLAGS_DISK_ONCE.replace("8008", "c004").replace(
    "Options apply to only next boot", "Options apply to all future boots").replace(
    "Force Boot from default Hard-Drive", "Force PXE")
SIM_REFUSAL = ("", "Set Chassis Boot Parameter 4 failed: Invalid data field in request\n"
                   "Set Chassis Boot Parameter 5 failed: Invalid data field in request\n")


def test_parse_boot_flags():
    assert ipmi.parse_boot_flags(BOOT_FLAGS_DISK_ONCE) == {
        "valid": True, "once": True, "target": "Hdd", "selector": "Force Boot from default Hard-Drive"}
    got = ipmi.parse_boot_flags(BOOT_FLAGS_PXE_PERSISTENT)
    assert got["target"] == "Pxe" and not got["once"]
    with pytest.raises(IpmiError, match="cannot read the boot flags"):
        ipmi.parse_boot_flags("Get Chassis Boot Parameter 5 failed: Invalid data field in request")


def test_set_boot_once_sets_and_reads_back(tmp_path):
    runner = ScriptedRunner((0, "Set Boot Device to disk\n", ""), (0, BOOT_FLAGS_DISK_ONCE, ""))
    bmc, _ = _bmc(tmp_path, runner)
    got = bmc.set_boot_once("Hdd")
    assert got == {"target": "Hdd", "enabled": "Once", "requested": {"target": "Hdd", "enabled": "Once"}, "once": True}
    assert [c[0][-3:] for c in runner.calls] == [["chassis", "bootdev", "disk"], ["bootparam", "get", "5"]]


def test_set_boot_once_error_paths(tmp_path):
    # ipmi_sim's answer: exit status 0, the refusal on stderr; nothing read back after it.
    runner = ScriptedRunner((0, "", SIM_REFUSAL[1]))
    bmc, _ = _bmc(tmp_path, runner)
    with pytest.raises(IpmiError, match=r"refused 'chassis bootdev disk': Set Chassis Boot Parameter 4 failed"):
        bmc.set_boot_once("Hdd")
    assert len(runner.calls) == 1
    # A BMC that says yes and keeps another device.
    runner = ScriptedRunner((0, "Set Boot Device to disk\n", ""), (0, BOOT_FLAGS_PXE_PERSISTENT, ""))
    bmc, _ = _bmc(tmp_path, runner)
    with pytest.raises(IpmiError, match="accepted 'chassis bootdev disk' but its boot flags say Force PXE"):
        bmc.set_boot_once("Hdd")
    with pytest.raises(ValueError, match="unknown boot target"):
        bmc.set_boot_once("Floppy")


SEL_INFO = """SEL Information
Version          : 1.5 (v1.5, v2 compliant)
Entries          : %d
Free Space       : 15984 bytes
Last Add Time    : %s
"""
SEL_VERBOSE = """SEL Record ID          : 0002
 Record Type           : 02
 Timestamp             : 11/25/2026 18:40:02
 Sensor Type           : Memory
 Sensor Number         : 0c
 Event Direction       : Assertion Event
 Description           : Correctable ECC

SEL Record ID          : 0003
 Record Type           : 02
 Timestamp             : 11/25/2026 18:40:03
 Sensor Type           : Power Supply
 Sensor Number         : 01
 Event Direction       : Assertion Event
 Description           : Failure detected

"""


def test_sel_parsing_both_formats():
    assert ipmi.parse_sel_info(SEL_INFO % (3, "11/25/2026 18:40:03")) == {"entries": 3,
                                                                          "last_add": "11/25/2026 18:40:03"}
    got = ipmi.parse_sel_list(SEL_VERBOSE)
    assert [e["id"] for e in got] == ["0002", "0003"]
    assert got[1]["message"] == "Power Supply | #0x01 | Failure detected | Assertion Event"
    plain = ipmi.parse_sel_list("   1 | 11/25/2026 | 18:40:00 | Power Supply #0x01 | Failure detected | Asserted\n"
                                "SEL has no entries\n")
    assert plain == [{"id": "1", "created": "11/25/2026 18:40:00",
                      "message": "Power Supply #0x01 | Failure detected | Asserted", "severity": None}]
    with pytest.raises(IpmiError, match="cannot read the SEL entry count"):
        ipmi.parse_sel_info("Get SEL Info command failed")


def test_log_entries_since_a_marker(tmp_path):
    # Two new entries: listed as the last two.
    runner = ScriptedRunner((0, SEL_INFO % (1, "11/25/2026 18:00:00"), ""), (0, SEL_INFO % (3, "x"), ""),
                            (0, SEL_VERBOSE, ""))
    bmc, _ = _bmc(tmp_path, runner)
    marker = bmc.log_marker()
    assert [e["id"] for e in bmc.log_entries_since(marker)] == ["0002", "0003"]
    assert runner.calls[-1][0][-4:] == ["sel", "list", "last", "2"]
    # Nothing new: no list read.
    runner = ScriptedRunner((0, SEL_INFO % (3, "x"), ""))
    bmc, _ = _bmc(tmp_path, runner)
    assert bmc.log_entries_since({"entries": 3, "last_add": "x"}) == [] and len(runner.calls) == 1
    # Cleared and written again (fewer entries, another last add time): its newest, at most the limit.
    runner = ScriptedRunner((0, SEL_INFO % (2, "y"), ""), (0, SEL_VERBOSE, ""))
    bmc, _ = _bmc(tmp_path, runner)
    assert len(bmc.log_entries_since({"entries": 50, "last_add": "x"}, limit=1)) == 1
    assert runner.calls[-1][0][-4:] == ["sel", "list", "last", "1"]


# --- DCMI power reading (issue 34): recorded ipmitool output, tests/data/bmc-power/README.md ------
BMC_POWER = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "bmc-power"


def test_dcmi_power_reading_recorded_outputs():
    active = ipmi.parse_dcmi_power_reading((BMC_POWER / "ipmitool-dcmi-activated.txt").read_text())
    assert active == {"watts": 50, "minimum_watts": 6, "maximum_watts": 304, "average_watts": 49,
                      "sampling_s": 1, "active": True}
    off = ipmi.parse_dcmi_power_reading((BMC_POWER / "ipmitool-dcmi-deactivated.txt").read_text())
    assert off["watts"] == 234 and off["active"] is False and off["sampling_s"] == 0


@pytest.mark.parametrize("text,words", [
    ("", "Instantaneous power reading"),
    ("    Instantaneous power reading:   99999999 Watts\n", "<= 65535"),
    ("    Instantaneous power reading:   -5 Watts\n", "Instantaneous power reading"),
    ("    Instantaneous power reading:   ²0 Watts\n", "Instantaneous power reading"),
    ((BMC_POWER / "ipmitool-dcmi-activated.txt").read_text().replace("activated", "sleeping"),
     "Power reading state is"),
])
def test_dcmi_power_reading_refuses_what_is_not_one(text, words):
    with pytest.raises(IpmiError, match=words) as exc:
        ipmi.parse_dcmi_power_reading(text)
    assert exc.value.kind == "parse"


def test_bmc_power_watts_reading_none_and_why(tmp_path):
    text = (BMC_POWER / "ipmitool-dcmi-activated.txt").read_text()
    bmc, _clock = _bmc(tmp_path, ScriptedRunner((0, text, "")))
    assert bmc.power_watts() == 50.0 and bmc.power_source == "dcmi" and bmc.power_note is None
    bmc, _clock = _bmc(tmp_path, ScriptedRunner((0, text.replace("activated", "deactivated"), "")))
    assert bmc.power_watts() is None and bmc.power_source is None and "deactivated" in bmc.power_note
    refusal = "DCMI request failed because: Invalid command (c1)\n"
    bmc, _clock = _bmc(tmp_path, ScriptedRunner((1, "", refusal)))
    assert bmc.power_watts() is None and "offers no DCMI power reading" in bmc.power_note
    assert len(bmc.log) == 1                       # a refusal is an answer: not retried
    bmc, _clock = _bmc(tmp_path, ScriptedRunner((0, "garbage", "")))
    with pytest.raises(IpmiError, match="10.1.2.3:6230, 'dcmi power reading': no 'Instantaneous"):
        bmc.power_watts()


def test_an_ipmitool_that_cannot_run_is_a_bmc_error_naming_it(tmp_path):
    bmc = Bmc(ipmi.run_local, str(tmp_path / "no-ipmitool"), "10.1.2.3", 6230, "admin", SECRET,
              state_dir=str(tmp_path), min_interval=0, retries=3)
    with pytest.raises(IpmiError, match=r"cannot run .*no-ipmitool: No such file or directory") as e:
        bmc.status()
    assert e.value.kind == "command" and len(bmc.log) == 0


def test_run_local_gives_ipmitool_the_password_in_its_environment_and_the_c_locale():
    rc, out, _ = ipmi.run_local(["/bin/sh", "-c", 'printf "%s %s %s" "$IPMI_PASSWORD" "$LC_ALL" "$LANG"'],
                                ipmi.password_env(SECRET))
    assert (rc, out) == (0, "%s C C" % SECRET)
