"""playbooks/gear_shift.yml on the lab: real S3, real IPMI, real magic packets, faults injected.

Every test starts and ends with all six guests running (``restore``). Each test has its own state
directory (state.json, shift.lock, metrics) under tmp_path, so the tests do not depend on each
other's order.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
import time
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from labtools import why
from promtools import NODE_EXPORTER, free_port, query, wait_for

from ansible.module_utils.fleetnap import hostlist
from ansible.module_utils.fleetnap.gear import groups_for

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.lab
ALL = ["lab%d" % n for n in range(1, 7)]


def today_groups(gear):
    """The groups gear_shift.yml picks for -e gear=N: today's rotation on the controller."""
    return groups_for(gear, 3, date.today())


def hosts_in(lab, groups):
    return sorted(n for n in ALL if lab[n]["gear_group"] in groups)


class CmdlineWatch(threading.Thread):
    """Scans every process's argv while a shift runs: the BMC password must never be in one."""

    def __init__(self, secret):
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.stop = threading.Event()
        self.scans = 0
        self.hits = []

    def run(self):
        while not self.stop.is_set():
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        with open("/proc/%s/cmdline" % pid, "rb") as fh:
                            if self.secret in fh.read():
                                self.hits.append(pid)
                    except OSError:
                        pass
            self.scans += 1
            time.sleep(0.05)


def shift(lab, state_dir, *extra, check=False, background=False, timeout=900, inventories=(), env=None,
          playbook=REPO / "playbooks/gear_shift.yml"):
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(REPO / "inventories/lab")]
    for inv in inventories:
        cmd += ["-i", str(inv)]
    cmd += [str(playbook), "-e", "gear_shift_state_dir=%s" % state_dir, *extra]
    if check:
        cmd.append("--check")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOG_PATH=str(Path(state_dir) / "ansible.log"), **(env or {}))
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=str(REPO), start_new_session=True)
    watch = CmdlineWatch(lab.password)
    watch.start()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)
    finally:
        watch.stop.set()
        watch.join()
    proc.wall_s = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert watch.scans > 3 and not watch.hits, "BMC password in the argv of PIDs %s" % watch.hits
    assert lab.password not in out, "BMC password in the playbook's output"
    log = Path(state_dir) / "ansible.log"
    assert lab.password not in (log.read_text() if log.exists() else "")
    return proc


def state(state_dir):
    return json.loads((Path(state_dir) / "state.json").read_text())


def metrics(state_dir):
    return (Path(state_dir) / "metrics" / "fleetnap_gear.prom").read_text()


def sleep_policy(hosts, args):
    """fleetnap's own sleep_policy module on the guests (ad hoc, as an operator's profile would)."""
    cmd = [str(Path(sys.executable).parent / "ansible"), "-i", str(REPO / "inventories/lab"), ",".join(hosts),
           "-b", "-m", "sleep_policy", "-a", args]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=600)


def apply_profile(hosts, *extra):
    """playbooks/apply_profile.yml on the hosts, with the lab inventory's profiles (interactive)."""
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(REPO / "inventories/lab"),
           str(REPO / "playbooks/apply_profile.yml"), "-e", "fleetnap_targets=%s" % ",".join(hosts), *extra]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=900)


def put_back_in_service(hosts):
    """gear_member's back on the hosts (ad hoc), as after waking a parked host by hand."""
    cmd = [str(Path(sys.executable).parent / "ansible"), "-i", str(REPO / "inventories/lab"), ",".join(hosts),
           "-b", "-m", "ansible.builtin.include_role", "-a", "name=gear_member tasks_from=back"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)


def power_of(lab, name):
    """What the lab says: running / suspended (QMP) or off (BMC)."""
    return lab.qmp_status(name) if lab.power(name) == "on" else "off"


def wol_since(lab, t0, action=None):
    out = []
    for e in lab.wol_log():
        when = datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
        if when >= t0 and (action is None or e["action"] == action):
            out.append(e)
    return out


PARK_DROP_IN = "/run/systemd/sleep.conf.d/zz-fleetnap-park.conf"   # gear_member's S3 park


def _restore_all(lab):
    # A suspend a killed shift queued fires one second after its SSH session (systemd-run
    # --on-active=1): let it happen before looking, so restore does not wait on a guest that
    # goes to sleep behind its back; then look twice.
    time.sleep(2)
    woken = set()
    for _ in range(2):      # every guest at once: a restore is mostly waiting for a boot or a login
        with ThreadPoolExecutor(max_workers=len(ALL)) as pool:
            woken |= {n for n, was in zip(ALL, pool.map(lab.restore, ALL)) if was == "suspended"}
    if woken:
        # Woken from a park by hand: put back in service the operator's way (gear_member back),
        # so that no suite after this one finds a guest with a park's runtime sleep settings.
        back = put_back_in_service(sorted(woken))
        assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-2000:]


@pytest.fixture
def all_running(lab):
    _restore_all(lab)
    yield lab
    _restore_all(lab)


def task_results(stdout, task):
    """host -> ok / changed / skipping / failed / fatal, as the default callback printed TASK [task]."""
    out, inside = {}, False
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            inside = line.startswith("TASK [%s]" % task)
        elif inside and line.split(":", 1)[0] in ("ok", "changed", "skipping", "failed", "fatal") and "[" in line:
            out[line.split("[", 1)[1].split("]", 1)[0].split(" ")[0]] = line.split(":", 1)[0]
    return out


def assert_no_red(proc):
    """A shift where every step went as planned prints no failure: hosts that are asleep or off
    by plan are observations (ok), not 'fatal: ... ...ignoring'."""
    red = [line for line in proc.stdout.splitlines()
           if line.startswith(("fatal:", "failed:")) or "...ignoring" in line]
    assert not red, "\n".join(red[:20])


def test_s3_and_wol_cycle_3_1_3(all_running, tmp_path, prometheus, daemons):
    """3 -> 1 by S3 and back by Wake-on-LAN. The shifts write their metrics where a node_exporter
    on the controller reads them (fleetnap_controller_metrics_dir; Debian's binary on a free
    loopback port, as playbooks/node_exporter.yml's controller play configures it), and a real
    Prometheus scraping it shows the gear, every host's power state and the result."""
    lab = all_running
    sd = tmp_path / "gear"
    assert NODE_EXPORTER, "Debian package prometheus-node-exporter missing (make setup installs it)"
    ctl = tmp_path / "controller-metrics"
    ctl.mkdir()
    port = free_port()
    daemons("node-exporter", [NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port,
                              "--collector.disable-defaults", "--collector.textfile",
                              "--collector.textfile.directory=%s" % ctl], "http://127.0.0.1:%d/metrics" % port)
    prom = prometheus([{"job_name": "fleetnap-controller", "static_configs": [
        {"targets": ["127.0.0.1:%d" % port], "labels": {"role": "controller"}}]}], hosts=())
    on1, off1 = today_groups(1)
    down = hosts_in(lab, off1)
    stay = hosts_in(lab, on1)
    hooks = tmp_path / "hooks.log"
    for kind in ("drain", "undrain"):
        (tmp_path / ("%s.yml" % kind)).write_text(
            "- name: %s hook\n  ansible.builtin.shell: echo \"$(date +%%s.%%N) %s {{ inventory_hostname }}\" >> %s\n"
            "  delegate_to: localhost\n  changed_when: true\n" % (kind, kind, hooks))
    hook_args = ["-e", "gear_shift_drain_tasks=%s" % (tmp_path / "drain.yml"),
                 "-e", "gear_shift_undrain_tasks=%s" % (tmp_path / "undrain.yml"),
                 "-e", "fleetnap_controller_metrics_dir=%s" % ctl]
    # The hosts that sleep run fleetnap's own sleep policy: half of them the demo's interactive
    # profile, applied by apply_profile.yml as `make demo` does (its 3000 ms resume budget is not
    # met by an unmeasured or ~5 s S3 resume: it allows s2idle only, SuspendState=freeze), the
    # other half S3 allowed by sleep_policy (systemd 252 refused to suspend under the drop-in
    # fleetnap wrote before: SuspendMode=deep goes to /sys/power/disk there). Parking is not
    # napping: both are parked in S3 (the plan's auto method; no S3 record here, so checked on
    # the host), and the napping ones are back on their profile's s2idle policy after the wake.
    nap, s3 = down[::2], down[1::2]
    art = ["-e", "fleetnap_artifacts_dir=%s" % (tmp_path / "artifacts")]
    proc = apply_profile(nap, *art)
    assert proc.returncode == 0, why(proc)
    proc = sleep_policy(s3, "allow=deep")
    assert proc.returncode == 0, why(proc)
    hook_args += ["-e", "gear_shift_resume_dir=%s" % (tmp_path / "no-resume-records")]
    try:
        _s3_and_wol_cycle(lab, sd, down, stay, on1, hooks, hook_args, nap, (ctl, prom))
    finally:
        _restore_all(lab)
        undo = [apply_profile(nap, "-e", "fleetnap_profile_state=absent", *art), sleep_policy(s3, "state=absent")]
    assert all(u.returncode == 0 for u in undo), [why(u) for u in undo]


POLICY = ("cat /etc/systemd/sleep.conf.d/fleetnap.conf /sys/power/mem_sleep; "
          "ls /run/systemd/sleep.conf.d /run/fleetnap 2>&1 || true")


def _s3_and_wol_cycle(lab, sd, down, stay, on1, hooks, hook_args, nap, controller):
    ctl, prom = controller
    policy = {}
    for name in down:
        policy[name] = lab.ssh(name, POLICY).stdout
        want = "SuspendState=freeze" if name in nap else "SuspendState=mem"
        assert want in policy[name], policy[name]
        if name in nap:
            assert "[s2idle] deep" in policy[name], policy[name]

    # Check mode: the plan is printed, nothing changes, nothing is written.
    proc = shift(lab, sd, "-e", "gear_shift_gear=1", *hook_args, check=True)
    assert proc.returncode == 0, why(proc)
    assert "Gear shift plan (check mode: nothing will change)" in proc.stdout
    for name in down:
        assert any(line.split()[:1] == ['"%s' % name] and " down " in line and "suspend" in line
                   for line in proc.stdout.splitlines()), name
    assert all(power_of(lab, n) == "running" for n in ALL)
    assert not (sd / "state.json").exists() and not (sd / "shift.lock").exists() and not hooks.exists()

    # 3 -> 1 by S3.
    proc = shift(lab, sd, "-e", "gear_shift_gear=1", *hook_args)
    assert proc.returncode == 0, why(proc)
    assert_no_red(proc)
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 1 and st["target_gear"] == 1 and st["groups_on"] == on1
    for name in down:   # silent by the shift's probe; in S3 by the guest's own time (lab.in_s3)
        assert st["hosts"][name]["state"] == "asleep" and lab.in_s3(name) == "suspended", name
    for name in stay:
        assert power_of(lab, name) == "running" and st["hosts"][name]["state"] == "on"
    text = (ctl / "fleetnap_gear.prom").read_text()
    assert not (sd / "metrics").exists()            # the controller's directory, not the state dir's
    assert "fleetnap_gear 1" in text.splitlines() and 'fleetnap_gear_shift_last_result{result="ok"} 1' in text
    # ... and what Prometheus reads from the controller's node_exporter
    job = '{job="fleetnap-controller"}'
    assert wait_for(prom, "fleetnap_gear" + job, 1, want={None: 1.0}) == {None: 1.0}
    asleep = wait_for(prom, 'fleetnap_host_power_state{job="fleetnap-controller",state="asleep"}', len(ALL))
    assert asleep == {h: (1.0 if h in down else 0.0) for h in ALL}
    on = query(prom, 'fleetnap_host_power_state{job="fleetnap-controller",state="on"}')
    assert on == {h: (0.0 if h in down else 1.0) for h in ALL}
    assert query(prom, 'fleetnap_gear_shift_last_result{job="fleetnap-controller",result="ok"}') == {None: 1.0}
    assert not (sd / "shift.lock").exists()
    drained = [line.split()[2] for line in hooks.read_text().splitlines() if line.split()[1] == "drain"]
    assert sorted(drained) == down

    # Parked in S3 ("suspended" in QEMU: s2idle would leave the guest "running"), nappers too.
    assert all(power_of(lab, n) == "suspended" for n in nap)

    # Again: nothing to do (converged, idempotent).
    proc = shift(lab, sd, "-e", "gear_shift_gear=1")
    assert proc.returncode == 0 and "up 0, down 0, unchanged 6" in proc.stdout, why(proc)
    assert_no_red(proc)         # hosts asleep by plan are observed, not failed
    assert all(power_of(lab, n) == "suspended" for n in down)

    # 1 -> 3 by Wake-on-LAN: the relay saw a magic packet for every sleeping host and woke it.
    t0 = time.time()
    proc = shift(lab, sd, "-e", "gear_shift_gear=3", *hook_args)
    assert proc.returncode == 0, why(proc)
    assert_no_red(proc)
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 3 and st["target_gear"] == 3
    assert all(power_of(lab, n) == "running" and st["hosts"][n]["state"] == "on" for n in ALL)
    woke = wol_since(lab, t0, "woke")
    assert sorted(e["host"] for e in woke) == down and {e["method"] for e in woke} == {"qmp-system_wakeup"}
    acts = {a["host"]: a for a in st["actions"]}
    assert sorted(acts) == down and all(a["ok"] and a["method"] == "wol" for a in acts.values())
    for name in ALL:   # every host verified, for real
        assert lab.ssh(name, "systemctl is-system-running || true").stdout.strip() in ("running", "degraded")
    # Each parked host put its in-service policy back itself (its park's resume hook, on the wake):
    # the controller's unpark was skipped for every one, and nothing of the park is left.
    unpark = task_results(proc.stdout, "gear_member : Put the in-service sleep policy back after an S3 park "
                                       "(nothing to do otherwise)")
    assert sorted(unpark) == down and set(unpark.values()) == {"skipping"}, unpark
    for name in down:  # back on the in-service policy its profile set: mem_sleep, drop-in, no park leftovers
        lab.wait_for("%s's resume hook" % name, lambda: lab.ssh(
            name, "test ! -e /run/fleetnap/park-resume", check=False).returncode == 0, 30)
        assert lab.ssh(name, POLICY).stdout == policy[name], name
    events = [line.split() for line in hooks.read_text().splitlines()]
    undrained = [e[2] for e in events if e[1] == "undrain"]
    assert sorted(undrained) == down
    # The history: a line per shift that ran (check mode wrote none), each host's state at its end.
    hist = [json.loads(line) for line in (sd / "history.jsonl").read_text().splitlines()]
    assert [(h["gear"], h["result"]) for h in hist] == [(1, "ok"), (1, "ok"), (3, "ok")]
    assert all(hist[0]["power"][n] == "asleep" for n in down) and hist[0]["power"][stay[0]] == "on"
    assert set(hist[2]["power"].values()) == {"on"} and sorted(hist[2]["power"]) == ALL
    # Prometheus: gear 3, every host on, the last result ok and nothing else, a plausible duration.
    assert wait_for(prom, "fleetnap_gear" + job, 1, want={None: 3.0}) == {None: 3.0}
    on = wait_for(prom, 'fleetnap_host_power_state{job="fleetnap-controller",state="on"}', len(ALL),
                  want={h: 1.0 for h in ALL})
    assert on == {h: 1.0 for h in ALL}
    assert query(prom, 'sum(fleetnap_host_power_state{job="fleetnap-controller",state!="on"})') == {None: 0.0}
    results = {r: query(prom, 'fleetnap_gear_shift_last_result{job="fleetnap-controller",result="%s"}' % r)
               for r in ("ok", "degraded", "refused", "failed")}
    assert results == {"ok": {None: 1.0}, "degraded": {None: 0.0}, "refused": {None: 0.0}, "failed": {None: 0.0}}
    assert query(prom, "fleetnap_gear_target" + job) == {None: 3.0}
    assert 0 < query(prom, "fleetnap_gear_shift_duration_seconds" + job)[None] < proc.wall_s
    assert query(prom, 'node_textfile_scrape_error{job="fleetnap-controller"}') == {None: 0.0}
    lab.record_timing("gear_shift_s3_up_wall_seconds", round(proc.wall_s, 1))
    _slurm_conf_from(lab, sd, hist, acts)


def _slurm_conf_from(lab, sd, hist, acts):
    """slurm.conf's power saving from these shifts (playbooks/slurm_conf.yml): each shift's line
    kept what its parks and wakes took, the wake's as the up shift's actions measured them, and
    the block's timeouts are the worst verified of them with the margin (issue 37)."""
    assert {h: t["elapsed_s"] for h, t in hist[2]["took"].items()} == {h: a["elapsed_s"] for h, a in acts.items()}
    wake = max(t["elapsed_s"] for line in hist for t in line["took"].values() if t["action"] == "up" and t["ok"])
    park = max(t["elapsed_s"] for line in hist for t in line["took"].values() if t["action"] == "down" and t["ok"])
    dest = sd / "fleetnap-power.conf"
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(REPO / "inventories/lab"),
                           str(REPO / "playbooks/slurm_conf.yml"), "-e", "gear_shift_state_dir=%s" % sd,
                           "-e", "slurm_conf_dest=%s" % dest], capture_output=True, text=True, cwd=str(REPO),
                          env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")), timeout=120)
    assert proc.returncode == 0, why(proc)
    conf = dest.read_text().splitlines()
    assert "ResumeTimeout=%d" % math.ceil((wake + 30) * 1.5 - 1e-9) in conf, conf      # slurmd start 30 s, x 1.5
    assert "SuspendTimeout=%d" % math.ceil(park * 1.5 - 1e-9) in conf, conf
    assert any(ln.startswith("# ResumeTimeout: (worst measured wake %.1f s, " % wake) for ln in conf), conf
    # gear_shift_gmin 1 of 3 groups, rotated daily: any host may be parked, the most one group holds stays up
    assert "SuspendExcNodes=%s:%d" % (hostlist.compress(ALL), max(len(hosts_in(lab, [g])) for g in (1, 2, 3))) in conf


def test_ipmi_off_then_on_by_each_hosts_methods_and_a_lost_packet(all_running, tmp_path):
    """Power off by IPMI (3 -> 1), then on (1 -> 3), each host by its own fleetnap_power_methods:
    one host [ipmi] only (no magic packet is sent for it), one whose magic packets the WoL relay
    drops ([wol, ipmi]: IPMI brings it up after the WoL wait), the others by WoL. The password
    comes the documented way (FLEETNAP_BMC_PASSWORD in the controller's environment, looked up by
    the inventory): shift() samples every process's argv while it runs, and the down shift runs
    with -vvv (the commands Ansible runs): neither, nor the output or the log, holds it.
    (One cycle for what two tests did with two: a cycle of powered-off TCG guests costs minutes.)"""
    lab = all_running
    sd = tmp_path / "gear"
    on1, off1 = today_groups(1)
    down = hosts_in(lab, off1)
    assert len(down) >= 3
    lost, ipmi_only, by_wol = down[0], down[1], down[2:]
    methods = tmp_path / "methods.yml"
    methods.write_text("all:\n  hosts:\n    %s:\n      fleetnap_power_methods: [ipmi]\n" % ipmi_only)
    proc = shift(lab, sd, "-e", "gear_shift_gear=1", "-vvv", "-e", "gear_shift_down_method=off", inventories=[methods],
                 env={"FLEETNAP_BMC_PASSWORD": lab.password})
    assert proc.returncode == 0, why(proc)
    assert "<localhost> EXEC" in proc.stdout and "gear_wave" in proc.stdout   # -vvv did show the commands
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 1
    for name in down:
        assert lab.power(name) == "off" and st["hosts"][name]["state"] == "off"
    assert all(power_of(lab, n) == "running" for n in hosts_in(lab, on1))
    subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "wol-drop", lab[lost]["wol_mac"], "--count", "0"],
                   check=True, capture_output=True, timeout=60)
    try:
        t0 = time.time()
        proc = shift(lab, sd, "-e", "gear_shift_gear=3", "-e", "gear_shift_wol_timeout_s=45", inventories=[methods],
                     env={"FLEETNAP_BMC_PASSWORD": lab.password})
    finally:
        subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "wol-drop", "--clear"],
                       check=True, capture_output=True, timeout=60)
    assert proc.returncode == 0, why(proc)
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 3 and all(power_of(lab, n) == "running" for n in ALL)
    acts = {a["host"]: a for a in st["actions"]}
    assert set(acts) == set(down) and all(a["ok"] for a in acts.values()), st["actions"]
    assert [(a["method"], a["ok"]) for a in acts[lost]["attempts"]] == [("wol", False), ("ipmi", True)]
    assert acts[lost]["method"] == "ipmi"
    assert "did not become answering within 45 s" in acts[lost]["attempts"][0]["report"]
    assert [(a["method"], a["ok"]) for a in acts[ipmi_only]["attempts"]] == [("ipmi", True)]
    for other in by_wol:
        assert acts[other]["method"] == "wol"
    sent = wol_since(lab, t0)
    assert ipmi_only not in {e["host"] for e in sent}, sent      # [ipmi]: no magic packet for it
    dropped = wol_since(lab, t0, "dropped-by-fault-injection")
    assert dropped and {e["host"] for e in dropped} == {lost}
    for name in down:
        assert lab.ssh(name, "cat /proc/uptime").stdout.split()[0]   # a fresh boot, answering


def test_unreachable_bmc_stops_before_anything_goes_down(all_running, tmp_path):
    lab = all_running
    sd = tmp_path / "gear"
    _on1, off1 = today_groups(1)
    victim = hosts_in(lab, off1)[0]
    extra = tmp_path / "broken_bmc.yml"
    extra.write_text("all:\n  hosts:\n    %s:\n      fleetnap_bmc_port: 9699\n" % victim)   # nothing listens there
    proc = shift(lab, sd, "-e", "gear_shift_gear=1", inventories=[extra])
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "gear shift stopped before powering anything down: the BMC of %s (127.0.0.1:9699" % victim in out
    assert all(power_of(lab, n) == "running" for n in ALL)   # nothing went down, not even the others
    st = state(sd)
    assert st["result"] == "failed" and "BMC check failed" in st["reason"] and victim in st["reason"]
    assert 'fleetnap_gear_shift_last_result{result="failed"} 1' in metrics(sd)
    assert not (sd / "shift.lock").exists()


def test_dead_host_in_active_group_refuses_and_wakes_peers(all_running, tmp_path):
    lab = all_running
    sd = tmp_path / "gear"
    on2, off2 = today_groups(2)
    on1, _off1 = today_groups(1)
    proc = shift(lab, sd, "-e", "gear_shift_gear=2")
    assert proc.returncode == 0, why(proc)
    sleeping = hosts_in(lab, off2)
    assert all(lab.in_s3(n) == "suspended" for n in sleeping)
    victim = hosts_in(lab, on1)[0]
    subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "kill", victim], check=True,
                   capture_output=True, timeout=60)
    lab.wait_for("%s's BMC to report off" % victim, lambda: lab.power(victim) == "off", 60)
    proc = shift(lab, sd, "-e", "gear_shift_gear=1")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "gear shift refused" in out and victim in out and "not going lower" in out
    st = state(sd)
    assert st["result"] == "refused" and st["unhealthy"] == [victim] and st["target_gear"] == 3
    assert st["requested_gear"] == 1
    for name in ALL:   # the sleeping group is awake, nothing went down, the dead host is left alone
        assert power_of(lab, name) == ("off" if name == victim else "running"), name
    assert sorted(a["host"] for a in st["actions"]) == sleeping
    assert 'fleetnap_gear_shift_last_result{result="refused"} 1' in metrics(sd)


def test_two_concurrent_shifts_one_refused_by_the_lock(all_running, tmp_path):
    lab = all_running
    sd = tmp_path / "gear"
    first = shift(lab, sd, "-e", "gear_shift_gear=2", background=True)
    try:
        lab.wait_for("the first shift's lock", lambda: (sd / "shift.lock").exists(), 60, 0.1)
        owner = json.loads((sd / "shift.lock").read_text())
        second = shift(lab, sd, "-e", "gear_shift_gear=1")
        assert second.returncode != 0
        assert "another shift holds the lock" in second.stdout and "PID %d" % owner["pid"] in second.stdout
        assert json.loads((sd / "shift.lock").read_text()) == owner   # untouched
        out, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGTERM)
            first.wait(60)
    # (A CI run once saw the first shift fail here with only its recap shown: the cause and the
    # state file's reason are printed now.)
    recorded = (sd / "state.json").read_text() if (sd / "state.json").exists() else "(no state file)"
    assert first.returncode == 0, why(subprocess.CompletedProcess(first.args, first.returncode, out, "")) + recorded
    assert state(sd)["gear"] == 2 and not (sd / "shift.lock").exists()
    proc = shift(lab, sd, "-e", "gear_shift_gear=3")
    assert proc.returncode == 0 and state(sd)["gear"] == 3, why(proc)


def shift_so_far(lab, sd, proc, hosts):
    """What a background shift printed, where its hosts are and its state file: the cause when it
    ended, or hung, before it powered anything down."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    st = (sd / "state.json").read_text()[-3000:] if (sd / "state.json").exists() else "(no state file)"
    return "\n".join(["QEMU: %s" % {n: lab.qmp_status(n) for n in hosts}, "state.json: " + st,
                      why(subprocess.CompletedProcess(proc.args, proc.returncode, out or "", ""), tail=6000)])


def test_interrupted_shift_converges_when_run_again(all_running, tmp_path):
    """The playbook is killed after the first host went down. state.json already says so (each
    batch's hosts are marked down before they are powered down), so a rerun to gear 3 wakes that
    host as planned instead of taking it for a failed host of a group that must be on (refused or
    degraded, the host left asleep: what happened when the state file changed only at the end);
    the rerun takes the stale lock over."""
    lab = all_running
    sd = tmp_path / "gear"
    _on1, off1 = today_groups(1)
    down = hosts_in(lab, off1)
    first = shift(lab, sd, "-e", "gear_shift_gear=1", "-e", "gear_shift_batch_size=1", background=True)
    try:
        # Down is what QEMU says (suspended), not an SSH banner late by a second: under load a
        # running TCG guest can miss that, and the host counted as gone was then up. A shift that
        # ends before any host went down ends the wait; what it printed is then the failure.
        try:
            lab.wait_for("the first host to go down",
                         lambda: first.poll() is not None or any(lab.qmp_status(n) != "running" for n in down),
                         180, 0.2)
        except AssertionError as exc:
            raise AssertionError("%s\n%s" % (exc, shift_so_far(lab, sd, first, down))) from None
        assert any(lab.qmp_status(n) != "running" for n in down), shift_so_far(lab, sd, first, down)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(60)
    time.sleep(2)   # a suspend queued by the killed shift fires a second after its SSH session
    assert (sd / "shift.lock").exists()
    gone = [n for n in down if lab.qmp_status(n) != "running"]
    left = [n for n in down if n not in gone]
    assert gone and left, ("the shift was not interrupted half-way",
                           {n: lab.qmp_status(n) for n in down})
    st = state(sd)
    assert "in_progress" in st
    for name in gone:
        assert st["hosts"][name]["state"] == "asleep", st
    # the killed shift's plan is in its journal: what it observed and decided for every host
    killed = st["in_progress"]
    planned = {r["host"]: r for r in killed["plan"]["rows"]}
    assert killed["plan"]["gear"] == 1 and all(planned[n]["action"] == "down" for n in down), killed
    proc = shift(lab, sd, "-e", "gear_shift_gear=3")
    assert proc.returncode == 0, why(proc)
    assert "no longer running" in proc.stdout + proc.stderr   # the stale lock was taken over
    assert "resuming the shift killed before its record" in proc.stdout, proc.stdout[-3000:]
    assert_no_red(proc)
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 3 and st["unhealthy"] == [], st
    assert st["resumed"]["shift"] == killed["shift"] and st["resumed"]["since"] == killed["since"], st
    woke = {a["host"] for a in st["actions"] if a["ok"] and a["action"] == "up"}
    assert set(gone) <= woke, st["actions"]
    assert all(power_of(lab, n) == "running" for n in ALL)
    assert "in_progress" not in st and not (sd / "shift.lock").exists()


def test_host_that_cannot_suspend_fails_at_once_and_the_shift_stops(all_running, tmp_path):
    """suspend.target masked on one guest: the precheck in gear_member's suspend command refuses at
    once (not after gear_shift_down_timeout_s = 120 s of waiting for silence), the guest stays up, and the
    shift powers nothing down after it (one host per batch: the hosts before it in the plan sleep)."""
    lab = all_running
    sd = tmp_path / "gear"
    on1, off1 = today_groups(1)
    down = hosts_in(lab, off1)   # sorted = inventory order = the order of the one-host batches
    assert len(down) >= 3
    victim = down[1]
    before, after = down[:1], down[2:]
    unit = "/etc/systemd/system/suspend.target"
    lab.ssh(victim, "test ! -e %s && test ! -L %s" % (unit, unit))   # nothing there of anyone else's
    try:
        lab.ssh(victim, "ln -s /dev/null %s && systemctl daemon-reload" % unit)
        assert lab.ssh(victim, "systemctl is-enabled suspend.target || true").stdout.strip() == "masked"
        proc = shift(lab, sd, "-e", "gear_shift_gear=1", "-e", "gear_shift_batch_size=1")
        assert proc.returncode != 0, proc.stdout[-4000:]
        out = proc.stdout + proc.stderr
        reason = "cannot suspend: suspend.target is masked (%s -> /dev/null)" % unit
        assert reason in out
        st = state(sd)
        assert st["result"] == "failed" and "%s: %s" % (victim, reason) in st["reason"]
        acts = {a["host"]: a for a in st["actions"]}
        assert sorted(acts) == sorted(before + [victim])   # nobody after it was even tried
        bad = acts[victim]
        assert bad["ok"] is False and bad["action"] == "down" and bad["method"] == "suspend"
        assert bad["state"] == "on" and bad["msg"].startswith(reason)
        # At once: one SSH command (about a second under TCG), far below the 120 s down timeout.
        assert float(bad["elapsed_s"]) < 30, bad
        # The refused guest is up and answering (nothing was scheduled: still running seconds later).
        time.sleep(3)
        assert power_of(lab, victim) == "running" and st["hosts"][victim]["state"] == "on"
        assert lab.ssh(victim, "cat /proc/uptime").stdout.split()
        for name in before:
            assert acts[name]["ok"] and lab.in_s3(name) == "suspended" and st["hosts"][name]["state"] == "asleep"
        # Nothing more went down than the hosts before it in the plan.
        assert sorted(n for n in ALL if power_of(lab, n) != "running") == before
        assert all(st["hosts"][n]["state"] == "on" for n in after + hosts_in(lab, on1))
        assert 'fleetnap_gear_shift_last_result{result="failed"} 1' in metrics(sd)
        assert not (sd / "shift.lock").exists()
    finally:
        lab.restore(victim)   # in case it went to sleep after all: wake it to unmask
        lab.ssh(victim, 'if [ "$(readlink %s)" = /dev/null ]; then rm -f %s; fi; systemctl daemon-reload' % (unit, unit),
                check=False)
    assert lab.ssh(victim, "systemctl is-enabled suspend.target || true").stdout.strip() != "masked"

    # The hosts the failed shift parked are woken by hand (an operator, their BMC): each one's
    # park resume hook puts its sleep settings back by itself, no command from the controller.
    # The next shift (gear 3) has nothing to wake; it puts them back in service (action back:
    # health, undrain) without undoing a park the hosts undid. (A host the state file has parked
    # has 0.5 s to greet by default; a TCG guest can take longer, and is then woken (a no-op) and
    # put back the same way: 10 s here, so the test sees what it is about; 3 s was too short for a
    # guest on a loaded 2-core controller, seen once: the host was woken, not put back.)
    for name in before:
        assert lab.restore(name) == "suspended", name
        lab.wait_for("%s's resume hook" % name, lambda: lab.ssh(
            name, "test ! -e %s && test ! -e /run/fleetnap/park-resume" % PARK_DROP_IN,
            check=False).returncode == 0, 30)
    proc = shift(lab, sd, "-e", "gear_shift_gear=3", "-e", "gear_shift_parked_probe_timeout_s=10")
    assert proc.returncode == 0, why(proc)
    assert "back in service" in proc.stdout
    st = state(sd)
    assert st["result"] == "ok" and st["gear"] == 3, st
    assert sorted((a["host"], a["action"], a["ok"]) for a in st["actions"]) == [(n, "back", True) for n in before]
    for name in before:
        assert lab.ssh(name, "test ! -e %s && test ! -e /run/fleetnap/park-mem_sleep" % PARK_DROP_IN,
                       check=False).returncode == 0, name
        assert st["hosts"][name]["state"] == "on"


def test_a_parked_host_woken_by_hand_puts_its_sleep_policy_back_by_itself(all_running):
    """gear_member's S3 park with its resume hook, on a guest whose in-service policy selects
    s2idle: parked in S3 (QEMU: suspended), woken by hand outside any shift (QMP system_wakeup),
    and then, with no command from the controller, the hook has put mem_sleep back, removed the
    park's drop-in and itself, and the kernel counted the suspend."""
    lab = all_running
    name = "lab4"
    look = ("cat /sys/power/suspend_stats/success /sys/power/mem_sleep; "
            "ls /run/fleetnap /run/systemd/sleep.conf.d 2>/dev/null | grep -c . || true")
    try:
        lab.ssh(name, "echo s2idle > /sys/power/mem_sleep")
        before = lab.ssh(name, look).stdout.split("\n")
        assert before[1] == "[s2idle] deep" and before[2] == "0", before
        cmd = [str(Path(sys.executable).parent / "ansible"), "-i", str(REPO / "inventories/lab"), name, "-b",
               "-m", "ansible.builtin.include_role", "-a", "name=gear_member",
               "-e", "gear_member_action=down", "-e", "gear_member_power_ok=true"]
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=600)
        assert proc.returncode == 0, why(proc)
        assert lab.in_s3(name) == "suspended"
        assert lab.restore(name) == "suspended"         # by hand: no shift, no Ansible
        # The hook polls the count once a second after the wake; then it is done.
        lab.wait_for("%s's resume hook to finish" % name, lambda: lab.ssh(name, look).stdout.split("\n")[2] == "0", 30)
        after = lab.ssh(name, look).stdout.split("\n")
        assert int(after[0]) == int(before[0]) + 1, (before, after)
        assert after[1] == "[s2idle] deep", after
        log = lab.ssh(name, "journalctl -o cat -u fleetnap-park-resume.service --no-pager").stdout
        assert "fleetnap park: woken" in log and "unparked: mem_sleep s2idle" in log, log
    finally:
        lab.ssh(name, "echo deep > /sys/power/mem_sleep", check=False)
