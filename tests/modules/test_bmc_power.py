"""bmc_power through Ansible against a real ipmi_sim BMC on 127.0.0.1 with a real QEMU behind it.

ipmi_sim (OpenIPMI) serves IPMI over LAN on a test UDP port. Its chassis is "on" while a VM is
connected to its VM serial port: ``chassis power on`` runs ``startcmd``, a small diskless QEMU
(``-accel tcg``, 64 MiB) whose ``ipmi-bmc-extern`` device connects to that port;
``chassis power off`` makes ipmi_sim stop it. The QEMU has no operating system, so a soft
shutdown (ACPI power button) is never acted on - which is exactly the case where bmc_power must
fail clearly instead of escalating.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest


ANSIBLE_CLI = os.path.join(os.path.dirname(sys.executable), "ansible").encode()
USER = "fleetadm"
PASSWORD = "Fn7-pw-c9e1b4"  # distinctive, so a leak anywhere is found by a plain search


@pytest.fixture
def run(module_runner):
    return module_runner


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children(pid):
    """PIDs whose parent is ``pid`` (the QEMU that our ipmi_sim started)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            out.append(int(entry))
    return out


class Sim(object):
    def __init__(self, tmp):
        for tool in ("ipmi_sim", "ipmitool", "qemu-system-x86_64"):
            if not shutil.which(tool):
                pytest.fail("%s is missing: apt-get install openipmi ipmitool qemu-system-x86" % tool)
        self.dir = tmp
        self.port = free_port(socket.SOCK_DGRAM)
        self.vmport = free_port(socket.SOCK_STREAM)
        qemu = ("qemu-system-x86_64 -accel tcg -nodefaults -nographic -m 64 -no-reboot -serial null "
                "-monitor none -chardev socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=10 "
                "-device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-bt,bmc=bmc0" % self.vmport)
        (tmp / "bmc.emu").write_text("mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
                                     "mc_enable 0x20\n")
        auths = "none md2 md5 straight"
        (tmp / "lan.conf").write_text("\n".join([
            'name "fleetnap-test"',
            "set_working_mc 0x20",
            "  startlan 1",
            "    addr 127.0.0.1 %d" % self.port,
            "    priv_limit admin",
            "    allowed_auths_callback %s" % auths,
            "    allowed_auths_user %s" % auths,
            "    allowed_auths_operator %s" % auths,
            "    allowed_auths_admin %s" % auths,
            "    guid a123456789abcdefa123456789abcdef",
            "  endlan",
            "  serial 15 127.0.0.1 %d codec VM" % self.vmport,
            '  startcmd "%s"' % qemu,
            "  startnow false",
            "  poweroff_wait 2",
            "  kill_wait 2",
            '  user 2 true "%s" "%s" admin 10 %s' % (USER, PASSWORD, auths),
            "",
        ]))
        self.log = open(str(tmp / "ipmi_sim.log"), "w")
        self.proc = subprocess.Popen(["ipmi_sim", "-n", "-p", "-c", str(tmp / "lan.conf"), "-f", str(tmp / "bmc.emu"),
                                      "-s", str(tmp / "state")], stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=str(tmp))
        deadline = time.time() + 20
        while self.ipmitool("chassis", "power", "status").returncode != 0:
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                pytest.fail("ipmi_sim did not answer on 127.0.0.1:%d; log:\n%s"
                            % (self.port, (tmp / "ipmi_sim.log").read_text()))
            time.sleep(0.2)

    def ipmitool(self, *cmd):
        return subprocess.run(["ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", str(self.port), "-U", USER,
                               "-E", "-C", "3", "-N", "1", "-R", "1"] + list(cmd), capture_output=True, text=True,
                              env=dict(os.environ, IPMI_PASSWORD=PASSWORD), timeout=30)

    def power(self):
        out = self.ipmitool("chassis", "power", "status").stdout
        return "on" if "is on" in out else "off" if "is off" in out else out

    def set_power(self, state):
        if self.power() != state:
            self.ipmitool("chassis", "power", state)
        assert self.wait(lambda: self.power() == state), "sim did not reach %s" % state
        if state == "off":
            assert self.wait(lambda: not self.qemu()), "QEMU still running after off"

    def qemu(self):
        return children(self.proc.pid)

    @staticmethod
    def wait(cond, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return True
            time.sleep(0.2)
        return False

    def args(self, **kw):
        a = {"bmc_address": "127.0.0.1", "bmc_port": self.port, "bmc_user": USER, "bmc_password": PASSWORD,
             "min_interval": 0.2, "poll_interval": 0.5, "timeout": 20, "retries": 1, "session_timeout": 1,
             "rate_limit_dir": str(self.dir / "rl")}
        a.update(kw)
        return a

    def stop(self):
        kids = self.qemu() if self.proc.poll() is None else []
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = Sim(tmp_path_factory.mktemp("ipmisim"))
    yield s
    s.stop()


def assert_no_secret(res):
    """Not in the result (the CLI's JSON output) nor in anything ansible printed on stderr."""
    assert PASSWORD not in repr(dict(res))


def test_status_reads_without_change(run, sim):
    sim.set_power("off")
    res = run("bmc_power", sim.args(state="status"))
    assert not res.failed and not res.changed
    assert res["power"] == "off" and res["power_before"] == "off" and res["attempts"] == 1
    assert_no_secret(res)


def test_the_former_option_name_bmc_host_still_works_and_is_deprecated(run, sim):
    """bmc_address is the one name for the BMC's address (as fleetnap_bmc_address); bmc_host, the
    option's former name, is kept as an alias until 1.0.0 and says so."""
    args = sim.args(state="status")
    args["bmc_host"] = args.pop("bmc_address")
    res = run("bmc_power", args)
    assert not res.failed and res["power"] in ("on", "off"), res
    said = [d.get("event", {}).get("msg", "") if isinstance(d, dict) else str(d) for d in res.get("deprecations", [])]
    assert any("bmc_host" in m for m in said), res.get("deprecations")
    assert_no_secret(res)


def test_read_power_on_a_bmc_without_dcmi_says_so(run, sim):
    """ipmi_sim answers DCMI Get Power Reading with completion code 0xC1: no reading, the reason
    given, the state still read; in check mode nothing more is asked (issue 34)."""
    sim.set_power("on")
    res = run("bmc_power", sim.args(state="status", read_power=True))
    assert not res.failed and not res.changed and res["power"] == "on", res
    assert res["power_watts"] is None and res["power_source"] is None
    assert "offers no DCMI power reading" in res["power_note"] and "c1" in res["power_note"].lower()
    assert [c["command"] for c in res["commands"]] == ["chassis power status", "dcmi power reading"]
    checked = run("bmc_power", sim.args(state="status", read_power=True), check=True)
    assert "power_watts" not in checked and len(checked["commands"]) == 1
    assert_no_secret(res)


def test_on_then_idempotent_then_off(run, sim):
    sim.set_power("off")
    res = run("bmc_power", sim.args(state="on"), diff=True)
    assert not res.failed and res.changed, res.get("msg")
    assert (res["power_before"], res["power"]) == ("off", "on")
    assert res["diff"] == {"before": {"power": "off"}, "after": {"power": "on"}}
    assert [c["command"] for c in res["commands"]][:2] == ["chassis power status", "chassis power on"]
    assert sim.power() == "on" and sim.wait(lambda: len(sim.qemu()) == 1)

    again = run("bmc_power", sim.args(state="on"))
    assert not again.failed and not again.changed and again["attempts"] == 1

    res = run("bmc_power", sim.args(state="off"))
    assert not res.failed and res.changed and res["power"] == "off"
    assert sim.power() == "off"
    assert sim.wait(lambda: not sim.qemu()), "the QEMU behind the BMC is still running"


def test_check_mode_changes_nothing(run, sim):
    sim.set_power("off")
    res = run("bmc_power", sim.args(state="on"), check=True)
    assert not res.failed and res.changed and res["power"] == "on" and res["power_before"] == "off"
    assert [c["command"] for c in res["commands"]] == ["chassis power status"]
    time.sleep(1)
    assert sim.power() == "off" and not sim.qemu()


def test_soft_without_os_fails_clearly_and_does_not_escalate(run, sim):
    sim.set_power("on")
    res = run("bmc_power", sim.args(state="soft", timeout=3))
    assert res.failed
    assert "did not power off within 3 s" in res["msg"] and "last state seen: on" in res["msg"]
    assert "soft_fallback_hard" in res["msg"] and "127.0.0.1:%d" % sim.port in res["msg"]
    assert "chassis power off" not in [c["command"] for c in res["commands"]]
    assert sim.power() == "on" and sim.qemu()

    res = run("bmc_power", sim.args(state="soft", timeout=3, soft_fallback_hard=True))
    assert not res.failed and res.changed and res["escalated"] and res["power"] == "off"
    assert [c["command"] for c in res["commands"]].count("chassis power off") == 1
    assert sim.power() == "off"


def test_cycle_restarts_the_vm(run, sim):
    sim.set_power("on")
    assert sim.wait(lambda: len(sim.qemu()) == 1)
    before = sim.qemu()
    res = run("bmc_power", sim.args(state="cycle"))
    assert not res.failed and res.changed and res["power"] == "on", res.get("msg")
    assert res["cycled"] and res["states_seen"] == ["on", "off", "on"], res
    commands = [c["command"] for c in res["commands"]]
    assert commands.index("chassis power off") < commands.index("chassis power on"), commands
    assert sim.wait(lambda: len(sim.qemu()) == 1 and sim.qemu() != before), "QEMU was not restarted"
    # From off, cycle powers on.
    sim.set_power("off")
    res = run("bmc_power", sim.args(state="cycle"))
    assert not res.failed and res["power_before"] == "off" and res["power"] == "on"
    assert "chassis power on" in [c["command"] for c in res["commands"]]
    sim.set_power("off")


def test_wrong_password_fails_without_retries(run, sim):
    res = run("bmc_power", sim.args(bmc_password="not-the-password", retries=3))
    assert res.failed and res["error_kind"] == "auth"
    assert "127.0.0.1:%d rejected user '%s'" % (sim.port, USER) in res["msg"] and "HMAC" in res["msg"]
    assert res["attempts"] == 1
    assert "not-the-password" not in repr(dict(res))


def run_play(tasks, tmp_path, env, *extra):
    """Run tasks on localhost through ansible-playbook (a playbook file: nothing on the command line
    but the file's name); return (the tasks' results, stdout + stderr)."""
    import json
    from conftest import REPO, TARGET_PYTHON, VENV_BIN
    book = tmp_path / ("play-%d.yml" % len(list(tmp_path.glob("play-*.yml"))))
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    full = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json", **env)
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-M", str(REPO / "library"), "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
                           *extra, str(book)], capture_output=True, text=True, env=full, cwd=str(REPO), timeout=300)
    out = proc.stdout + proc.stderr
    report = json.loads(proc.stdout[proc.stdout.find("\n{") + 1:] if not proc.stdout.startswith("{") else proc.stdout)
    return [t["hosts"]["localhost"] for t in report["plays"][0]["tasks"]], out


LOOKUP = "{{ lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD') }}"


def test_password_only_from_the_argument(run, sim, tmp_path):
    """The module does not read FLEETNAP_BMC_PASSWORD / IPMI_PASSWORD from its own environment (a
    task's environment: would have put it on a command line); the documented way, a lookup of the
    controller's environment into bmc_password, works."""
    args = sim.args(state="status")
    del args["bmc_password"]
    res = run("bmc_power", args, env={"FLEETNAP_BMC_PASSWORD": "", "IPMI_PASSWORD": ""})
    assert res.failed and "no password for BMC 127.0.0.1:%d" % sim.port in res["msg"]
    res = run("bmc_power", args, env={"FLEETNAP_BMC_PASSWORD": PASSWORD})
    assert res.failed and "in the module's environment is not used" in res["msg"], res
    assert "lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD')" in res["msg"]
    assert_no_secret(res)
    (via_env, via_lookup), _out = run_play(
        [{"bmc_power": args, "environment": {"FLEETNAP_BMC_PASSWORD": PASSWORD}, "ignore_errors": True},
         {"bmc_power": dict(args, bmc_password=LOOKUP)}],
        tmp_path, {"FLEETNAP_BMC_PASSWORD": PASSWORD})
    assert via_env.get("failed") and "is not used" in via_env["msg"]
    assert not via_lookup.get("failed") and via_lookup["power"] in ("on", "off"), via_lookup
    assert_no_secret(via_lookup)


def test_unreachable_bmc_fails_within_the_bound(run, sim):
    port = free_port(socket.SOCK_DGRAM)
    res = run("bmc_power", sim.args(bmc_port=port, retries=1, session_timeout=1, session_retries=1))
    assert res.failed and res["error_kind"] == "unreachable"
    assert "BMC 127.0.0.1:%d did not answer" % port in res["msg"] and "after 2 attempt" in res["msg"]
    assert res["attempts"] == 2
    # Bound: 2 attempts x (1 s timeout x 2 tries) + 0.5 s backoff + 0.2 s rate limit = 4.7 s, plus slack.
    assert 4.0 <= res["elapsed_s"] < 8, res["elapsed_s"]


@pytest.mark.parametrize("args,match", [
    ({"bmc_port": 0}, "option bmc_port: must be >= 1 and <= 65535, got 0"),
    ({"bmc_address": "-x"}, "option bmc_address: must be a host name or address, got '-x'"),
    ({"timeout": 0}, "option timeout: must be > 0 and <= 3600, got 0"),
    ({"timeout": "nan"}, "option timeout: must be a finite number, got nan"),
    ({"timeout": "inf"}, "option timeout: must be a finite number, got inf"),
    ({"poll_interval": "nan"}, "option poll_interval: must be a finite number, got nan"),
    ({"min_interval": -1}, "option min_interval: must be >= 0"),
    ({"retries": -1}, "option retries: must be >= 0"),
    ({"session_retries": 0}, "option session_retries: must be >= 1"),
    ({"rate_limit_dir": "relative/dir"}, "option rate_limit_dir: must be an absolute path"),
])
def test_bad_input_sends_nothing(run, sim, args, match):
    res = run("bmc_power", sim.args(**args))
    assert res.failed and match in res["msg"], res["msg"]
    assert not res.get("commands")


def test_rate_limit_between_calls(run, sim, tmp_path):
    """Two calls to one BMC: the second's first command starts >= min_interval after the first's last."""
    sim.set_power("off")
    args = sim.args(state="status", min_interval=1.5, rate_limit_dir=str(tmp_path / "rl"))
    a = run("bmc_power", args)
    b = run("bmc_power", args)
    assert not a.failed and not b.failed
    gap = b["commands"][0]["start"] - a["commands"][-1]["end"]
    assert gap >= 1.5 - 1e-5, gap


def test_rate_limit_across_parallel_calls(run, sim, tmp_path):
    """Two forks at once (as Ansible runs them): commands never overlap and keep min_interval."""
    sim.set_power("off")
    args = sim.args(state="off", min_interval=0.7, rate_limit_dir=str(tmp_path / "rl"))
    results = [None, None]

    def one(i):
        results[i] = run("bmc_power", args)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None and not r.failed for r in results)
    cmds = sorted((c["start"], c["end"]) for r in results for c in r["commands"])
    assert len(cmds) == 2
    assert cmds[1][0] >= cmds[0][1] + 0.7 - 1e-5, cmds


def test_password_never_in_argv(run, sim):
    """Sample every process's command line while bmc_power powers on and off."""
    sim.set_power("off")
    seen = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open("/proc/%s/cmdline" % entry, "rb") as fh:
                        cmd = fh.read()
                except OSError:
                    continue
                if b"ipmitool" in cmd:
                    seen.append(cmd)
                # Other tests (xdist workers) start the ad-hoc ansible CLI with bmc_password in its
                # "-a" argument: that is this test harness, not the module or a playbook.
                if PASSWORD.encode() in cmd and cmd.split(b"\0")[1:2] != [ANSIBLE_CLI]:
                    seen.append(b"LEAK " + cmd)
            time.sleep(0.002)

    # The documented way: bmc_password looked up in the controller's environment, in a playbook
    # (nothing on a command line); -vvv shows what Ansible runs, which must not hold it either.
    env = {"FLEETNAP_BMC_PASSWORD": PASSWORD}
    base = sim.args(min_interval=0.3, bmc_password=LOOKUP)
    tasks = [{"bmc_power": dict(base, state="on")},
             {"bmc_power": dict(base, state="off")},
             # An unanswered BMC keeps ipmitool alive for seconds: the sampler is sure to see it.
             {"bmc_power": dict(base, state="off", bmc_port=free_port(socket.SOCK_DGRAM), retries=0),
              "ignore_errors": True}]
    t = threading.Thread(target=sampler)
    t.start()
    try:
        (on, off, slow), out = run_play(tasks, sim.dir, env, "-vvv")
    finally:
        stop.set()
        t.join()
    assert not on.get("failed") and not off.get("failed") and slow.get("failed")
    assert not [c for c in seen if c.startswith(b"LEAK")]
    assert any(b"ipmitool" in c and b"-E" in c for c in seen), "the sampler never caught ipmitool running"
    assert "EXEC" in out and PASSWORD not in out     # -vvv output: the commands Ansible ran
    for res in (on, off, slow):
        assert_no_secret(res)


def test_gear_observe_takes_the_password_from_the_environment_only(sim, tmp_path):
    """The gear_shift role's observe phase with no fleetnap_bmc_password in the inventory: bmc_power
    falls back to FLEETNAP_BMC_PASSWORD on the controller (the README's advice), and the
    password appears nowhere in the output. With gear_shift_read_power the BMC's power reading is
    asked too: ipmi_sim has none, which the observation says."""
    from conftest import REPO, VENV_BIN
    sim.set_power("on")
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  hosts:\n    node1:\n      ansible_host: 127.0.0.1\n      ansible_port: %d\n"
        "      fleetnap_bmc_address: 127.0.0.1\n      fleetnap_bmc_port: %d\n      fleetnap_bmc_user: %s\n"
        % (free_port(socket.SOCK_STREAM), sim.port, USER))
    play = tmp_path / "observe.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n"
        "  vars: {gear_shift_probe_timeout_s: 1, gear_shift_bmc_read_concurrency: 1, gear_shift_state_dir: %s,\n"
        "         gear_shift_read_power: true}\n"
        "  tasks:\n"
        "    - ansible.builtin.import_role: {name: gear_shift, tasks_from: observe}\n"
        "    - ansible.builtin.debug: {msg: 'observed=%s'}\n"
        % (tmp_path / "gear", "{{ __gear_shift_observation[inventory_hostname] | to_json }}"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               FLEETNAP_BMC_PASSWORD=PASSWORD, IPMI_PASSWORD="")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if "observed=" in ln)
    import json
    observed = json.loads(line.split("observed=", 1)[1].rstrip('"').replace('\\"', '"'))
    assert observed["bmc"] == "on" and observed["bmc_error"] == "" and observed["ssh"] is False
    # gear_shift_read_power: ipmi_sim has no DCMI power reading; the observation says so and stands
    assert observed["power_watts"] is None and observed["power_source"] is None
    assert "offers no DCMI power reading" in observed["power_note"]
    assert PASSWORD not in proc.stdout + proc.stderr
