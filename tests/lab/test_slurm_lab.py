"""Slurm drives the gears (issue 37), on the lab: Debian 12's slurmctld on the controller, slurmd and
munged in three guests (lab/slurm.py), fleetnap's programs (the slurm_power role) as slurmctld's
SuspendProgram, ResumeProgram and ResumeFailProgram. Nothing is mocked: slurmctld decides and calls
the programs, the programs park and wake the guests (real S3, the WoL relay, ipmi_sim), slurmd
registers back.

The nodes: lab4 and lab5 park in S3 (partition warm, ResumeTimeout 60 s), lab6 by soft-off through
its BMC (partition cold: its NIC does not wake it, fleetnap_power_methods [ipmi]). The tests run in
file order on one cluster (each starts from where the one before left the nodes, as a day on a
cluster does); the module's teardown stops Slurm and brings every guest back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import date, timedelta

import pytest
import yaml

from labtools import REPO, run_labctl, why
from proc import all_processes  # lab/proc.py

import slurm as labslurm  # lab/slurm.py (labtools puts lab/ on sys.path)
from ansible.module_utils.fleetnap.gear import rotation_offset

pytestmark = pytest.mark.lab

NODES = ["lab4", "lab5", "lab6"]
BASE = labslurm.SLURM_DIR / "fleetnap"          # the programs, their settings, log and locks
OVERLAY = BASE / "overlay.yml"                   # per-node settings the runner's playbook reads
LOG = BASE / "slurm-power.log"
PYTHON = REPO / ".venv" / "bin" / "python"

# What the nodes are when no test says otherwise (inventory variables over the lab's inventory).
BASE_VARS = {
    "lab4": {"gear_member_resume_restart": ["slurmd"], "gear_member_wol_timeout_s": 30},
    "lab5": {"gear_member_resume_restart": ["slurmd"], "gear_member_wol_timeout_s": 30},
    # no WoL from soft-off on this one: parked by its BMC's power button, woken by its BMC
    "lab6": {"fleetnap_down_method": "soft", "fleetnap_power_methods": ["ipmi"], "gear_member_wol_timeout_s": 30},
}

# SuspendTimeout: Slurm shows a node powering down (idle%) for this long whatever the program does;
# the parks measured here took 12 s (S3) and 26 s (soft-off) on the lab (2026-11-28), and each test
# waits for the guest itself to be parked too. ResumeTimeout of warm: the S3 trap waits for it.
POWER_CONF = """# power saving through fleetnap (tests/lab/test_slurm_lab.py)
SuspendProgram={d}/fleetnap-slurm-suspend
ResumeProgram={d}/fleetnap-slurm-resume
ResumeFailProgram={d}/fleetnap-slurm-resume-fail
SuspendTime={idle}
SuspendTimeout=45
ResumeTimeout=300
PartitionName=warm Nodes=lab4,lab5 Default=YES State=UP MaxTime=INFINITE SuspendTime={idle} ResumeTimeout=60 SuspendTimeout=20
PartitionName=cold Nodes=lab6 State=UP MaxTime=INFINITE SuspendTime={idle} ResumeTimeout=300 SuspendTimeout=45
"""


def write_overlay(changes: dict | None = None) -> None:
    hosts = {name: dict(v) for name, v in BASE_VARS.items()}
    for name, v in (changes or {}).items():
        hosts[name].update(v)
    OVERLAY.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))


def slurm_cmd(*argv: str, timeout: float = 30) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=labslurm.env(), timeout=timeout)
    assert proc.returncode == 0, "%s: rc=%d %s %s" % (" ".join(argv), proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def fields(text: str) -> dict:
    """scontrol show -o's KEY=VALUE pairs (a value runs to the next ' KEY=')."""
    out = {}
    for m in re.finditer(r"(\S+?)=(.*?)(?= \S+?=|$)", text.strip()):
        out[m.group(1)] = m.group(2)
    return out


def node(name: str) -> dict:
    return fields(slurm_cmd("scontrol", "show", "node", name, "-o"))


def job(job_id: str) -> dict:
    return fields(slurm_cmd("scontrol", "show", "job", job_id, "-o"))


def stamp(value: str) -> float:
    """scontrol's local time stamp (2026-11-28T19:20:01) as seconds since the epoch."""
    return time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S"))


def log_lines(since: int = 0) -> list[str]:
    return LOG.read_text().splitlines()[since:] if LOG.exists() else []


def submit(partition: str, name: str) -> tuple[str, float]:
    t0 = time.time()
    out = slurm_cmd("sbatch", "--parsable", "-p", partition, "-w", name, "-o", "/dev/null",
                    "--wrap", "cat /proc/sys/kernel/random/boot_id")
    return out.strip().split(";")[0], t0


def wait(lab, what, predicate, timeout):
    return lab.wait_for(what, predicate, timeout, interval=1.0)


def states() -> dict:
    return labslurm.node_states()


@pytest.fixture(scope="module")
def cluster(lab, request):
    """slurm_power installed on the controller for lab4-6, Slurm up, the nodes idle."""
    failed_before = request.session.testsfailed
    for name in NODES:
        lab.restore(name)
    BASE.mkdir(parents=True, exist_ok=True)
    write_overlay()
    install = BASE / "install.yml"
    install.write_text(yaml.safe_dump([{
        "name": "slurm_power for the lab's cluster", "hosts": "localhost", "connection": "local",
        "gather_facts": False,
        "vars": {
            "ansible_python_interpreter": str(PYTHON),
            "slurm_power_nodes": NODES, "slurm_power_user": "root",
            "slurm_power_dir": str(BASE / "lib"), "slurm_power_settings_dir": str(BASE / "etc"),
            "slurm_power_log": str(LOG), "slurm_power_lock_dir": str(BASE / "locks"),
            "slurm_power_fleetnap_dir": str(REPO),
            "slurm_power_inventory": str(REPO / "inventories/lab/hosts.yml"),
            "slurm_power_playbook_args": ["-i", str(OVERLAY)],
            "slurm_power_ansible_playbook": str(REPO / ".venv/bin/ansible-playbook"),
            "slurm_power_suspend_timeout_s": 240, "slurm_power_resume_timeout_s": 400,
        },
        "roles": [{"role": "slurm_power"}]}], sort_keys=False))
    proc = subprocess.run([str(REPO / ".venv/bin/ansible-playbook"), str(install)], capture_output=True,
                          text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, why(proc)
    LOG.unlink(missing_ok=True)
    conf = BASE / "power.conf"
    # Slurm's own idle timer long at first: the gear shift through Slurm runs first, on nodes in service
    conf.write_text(POWER_CONF.format(d=BASE / "lib", idle=3600))
    run_labctl("slurm-up", "--nodes", ",".join(NODES), "--power-conf", str(conf), timeout=400)
    yield lab
    if request.session.testsfailed > failed_before:
        print(slurm_evidence(lab))
    labslurm.down(list(lab.hosts.values()), nodes_too=False)      # no call of the programs any more
    # and none still at work (a park slurmctld asked for just before it stopped would put a guest
    # back to sleep after the restore below)
    lab.wait_for("fleetnap's Slurm runners to finish", lambda: not runners(), 400, interval=1.0)
    run_labctl("wol-drop", "--clear")
    for name in NODES:
        lab.restore(name)
    run_labctl("slurm-down", timeout=120)
    print("fleetnap-slurm log:\n" + "\n".join(log_lines()))


def slurm_evidence(lab) -> str:
    """What a failed test leaves to read: Slurm's view of the nodes, slurmctld's log, and each node's
    slurmd and munged as their own logs and the service manager saw them (this boot)."""
    out = ["---- scontrol show node ----"]
    try:
        proc = subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True, env=labslurm.env(),
                              timeout=30)
        out.append(proc.stdout + proc.stderr)
    except (OSError, subprocess.SubprocessError) as exc:  # the evidence of a failure must not hide it
        out.append("(scontrol: %s)" % exc)
    ctld = labslurm.SLURM_DIR / "slurmctld.log"
    # at debug level the log is mostly pings: the lines about the nodes and the errors, then the end
    lines = ctld.read_text(errors="replace").splitlines()[-5000:] if ctld.exists() else ["(none)"]
    about = [ln for ln in lines if "error" in ln or any(n in ln for n in NODES)]
    out.append("---- slurmctld.log: the last 150 lines about %s or an error ----" % ",".join(NODES))
    out.extend(about[-150:])
    out.append("---- slurmctld.log: the last 40 lines ----")
    out.extend(lines[-40:])
    for name in NODES:
        out.append("---- %s: systemctl / journal / slurmd.log ----" % name)
        try:
            proc = lab.ssh(name, "systemctl --no-pager status slurmd munge 2>&1 | head -30; "
                           "journalctl -b --no-pager -u slurmd -u munge 2>&1 | tail -40; "
                           "tail -40 /var/log/slurmd.log 2>&1; uptime", timeout=60, check=False)
            out.append(proc.stdout + proc.stderr)
        except Exception as exc:  # the evidence of a failure must not hide it
            out.append("(unreachable: %s)" % exc)
    return "\n".join(out)


def runners() -> list[int]:
    """The programs' runners still at work (each parks or wakes the nodes of one call)."""
    prog = str(BASE / "lib" / "fleetnap-slurm-power")
    return [pid for pid, argv in all_processes() if prog in argv and "run" in argv]


def slurm_idle_after(seconds: int) -> None:
    """Slurm's SuspendTime (its own idle timer) set anew, read by slurmctld at once."""
    labslurm.POWER_CONF.write_text(POWER_CONF.format(d=BASE / "lib", idle=seconds))
    slurm_cmd("scontrol", "reconfigure")


def parked(lab, name) -> bool:
    return lab.qmp_status(name) == "suspended" if name != "lab6" else lab.power(name) == "off"


def rotation_date(offset: int, replicas: int) -> str:
    """A date whose gear rotation (gear.rotation_offset) is offset: the shift's groups are then known."""
    day = date.today()
    while rotation_offset(day, replicas) != offset:
        day += timedelta(days=1)
    return day.isoformat()


def shift_through_slurm(lab, sd, gear, day):
    proc = subprocess.run(
        [str(REPO / ".venv/bin/ansible-playbook"), "-i", str(REPO / "inventories/lab"), "-i", str(OVERLAY),
         str(REPO / "playbooks/gear_shift.yml"), "-e", "gear_shift_state_dir=%s" % sd, "-e", "gear_shift_power_ok=true",
         "-e", "gear_shift_targets=lab4,lab5", "-e", "gear_shift_replicas=2",
         "-e", "gear_shift_gear=%d" % gear, "-e", "gear_shift_date=%s" % day,
         "-e", "gear_shift_scheduler=slurm", "-e", "gear_shift_slurm_conf=%s" % labslurm.CONF,
         "-e", "gear_shift_slurm_timeout_s=240"],
        capture_output=True, text=True, cwd=str(REPO), timeout=600,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1"))
    assert proc.returncode == 0, why(proc)
    return json.loads((sd / "state.json").read_text())


def test_a_gear_shift_on_a_slurm_cluster_goes_through_slurm(cluster, tmp_path):
    """gear_shift_scheduler: slurm, on lab4 (gear group 1) and lab5 (2), two groups, a rotation where
    gear 1 keeps group 2: the down-shift asks slurmctld to power lab4 down (POWER_DOWN_ASAP), Slurm calls
    fleetnap's SuspendProgram, and the shift verifies Slurm's state and the host's silence; the
    up-shift asks for POWER_UP, Slurm calls the ResumeProgram, and the shift verifies the node idle in
    Slurm and answering. fleetnap itself parks and wakes nothing here (its programs do, for Slurm)."""
    lab = cluster
    sd = tmp_path / "gear"
    day = rotation_date(0, 2)   # order [1, 2]: gear 1 keeps group 2 (lab5), gear 2 both
    try:
        start = len(log_lines())
        st = shift_through_slurm(lab, sd, 1, day)
        acts = {a["host"]: a for a in st["actions"]}
        down_s = acts["lab4"].get("elapsed_s", float("nan"))
        assert st["result"] == "ok" and set(acts) == {"lab4"}, st
        assert acts["lab4"]["ok"] and acts["lab4"]["method"] == "slurm" and acts["lab4"]["state"] == "asleep", acts
        assert states()["lab4"] == "idle~" and lab.in_s3("lab4") == "suspended" and states()["lab5"] == "idle"
        # The shift verifies Slurm's state and the host; the program's runner logs its own end when
        # its playbook is done, which may be a moment after the shift's record: waited for, bounded.
        wait(lab, "the SuspendProgram's runner to log lab4 parked",
             lambda: any(re.search(r"suspend lab4: parked$", ln) for ln in log_lines(start)), 60)
        lines = log_lines(start)
        assert not any("lab5" in ln for ln in lines), lines
        start = len(log_lines())
        st = shift_through_slurm(lab, sd, 2, day)
        acts = {a["host"]: a for a in st["actions"]}
        assert st["result"] == "ok" and set(acts) == {"lab4"} and acts["lab4"]["ok"] and acts["lab4"]["method"] == "slurm", st
        assert states()["lab4"] == "idle" and not lab.ssh_down("lab4")
        wait(lab, "the ResumeProgram's runner to log lab4 woken",
             lambda: any(re.search(r"resume lab4: woken$", ln) for ln in log_lines(start)), 60)
        print("gear shift through Slurm: lab4 down in %.0f s, up in %.0f s (Slurm's state and the host verified)"
              % (down_s, acts["lab4"].get("elapsed_s", float("nan"))))
    finally:
        slurm_idle_after(15)    # Slurm's own idle timer from here on (the tests below), whatever happened here


def test_idle_nodes_are_parked_by_slurm_through_fleetnap(cluster):
    """SuspendTime=15: slurmctld calls SuspendProgram for the idle nodes; fleetnap parks lab4 and
    lab5 in S3 and lab6 (no WoL) by soft-off, and sinfo shows them powered down (idle~)."""
    lab = cluster
    took = wait(lab, "every node powered down in sinfo and parked",
                lambda: all(states().get(n) == "idle~" for n in NODES) and all(parked(lab, n) for n in NODES), 300)
    print("parked by Slurm through fleetnap %.0f s after the nodes were idle (SuspendTime 15 s)" % took)
    assert lab.qmp_status("lab4") == "suspended" and lab.qmp_status("lab5") == "suspended"
    assert lab.power("lab6") == "off"
    lines = log_lines()
    for name in NODES:
        assert any(re.search(r"fleetnap-slurm suspend %s: handed to the runner" % name, ln) for ln in lines), lines
        assert any(re.search(r"fleetnap-slurm suspend %s: parked$" % name, ln) for ln in lines), lines
    assert not [ln for ln in lines if "failed" in ln], lines


def test_suspend_asked_of_a_node_already_parked_powers_nothing(cluster):
    """A node already in the asked state: SuspendProgram called again for lab4 (in S3) and lab6
    (soft-off), as slurmctld calls it. The program returns at once and the runner logs one line per
    node: lab4 gives no SSH greeting, so it gets no suspend (in the lab an SSH login to a guest in S3
    would wait for ever: QEMU's user networking accepts the connection) and nothing is done; lab6's
    BMC says its chassis is off already (parked, no power command). Both stay as they were, and
    Slurm still shows them powered down."""
    lab = cluster
    start = len(log_lines())
    prog = str(BASE / "lib" / "fleetnap-slurm-suspend")
    t0 = time.monotonic()
    proc = subprocess.run(["env", "-i", "SLURM_CONF=%s" % labslurm.CONF, prog, "lab[4,6]"], capture_output=True,
                          text=True, timeout=10)
    returned_s = time.monotonic() - t0
    assert proc.returncode == 0, proc

    def done(name):
        return [ln for ln in log_lines(start) if re.search(r"suspend %s: (failed|parked|nothing done)" % name, ln)]

    took = wait(lab, "the runner to log lab4 and lab6", lambda: done("lab4") and done("lab6"), 120)
    wait(lab, "the runner to end", lambda: not runners(), 60)
    lines = log_lines(start)
    assert len(done("lab4")) == 1 and "suspend lab4: nothing done: silent already" in done("lab4")[0], lines
    assert len(done("lab6")) == 1 and done("lab6")[0].endswith("suspend lab6: parked"), lines
    assert lab.qmp_status("lab4") == "suspended" and lab.power("lab6") == "off"
    assert states().get("lab4") == "idle~" and states().get("lab6") == "idle~", states()
    print("suspend of two parked nodes: the program returned in %.2f s, the runner logged both in %.0f s: %s"
          % (returned_s, took, "; ".join(done("lab4") + done("lab6"))))


def test_a_job_wakes_its_parked_node_and_slurmd_registers_a_new_boot_time(cluster):
    """sbatch of a job that needs lab4 (in S3): slurmctld calls ResumeProgram, fleetnap wakes it by WoL,
    the park's resume hook restarts slurmd with -b, the job runs and completes. The node was resumed,
    not rebooted (its uptime spans the test), yet Slurm saw a boot time after the request."""
    lab = cluster
    start = len(log_lines())
    job_id, t_submit = submit("warm", "lab4")
    wait(lab, "job %s to complete" % job_id, lambda: job(job_id)["JobState"] in ("COMPLETED", "FAILED"), 240)
    j, n = job(job_id), node("lab4")
    assert j["JobState"] == "COMPLETED" and j["NodeList"] == "lab4", j
    assert stamp(n["BootTime"]) >= int(t_submit) - 1, (n["BootTime"], t_submit)
    uptime = float(lab.ssh("lab4", "cut -d' ' -f1 /proc/uptime").stdout)
    assert uptime > time.time() - t_submit + 30, "lab4 rebooted (uptime %.0f s): this was to be a resume" % uptime
    hook = lab.ssh("lab4", "journalctl -b -u fleetnap-park-resume -o cat --no-pager").stdout
    assert "restarted slurmd with -b" in hook, hook
    lines = log_lines(start)
    woken = [ln for ln in lines if re.search(r"resume lab4: woken$", ln)]
    assert woken, lines
    # the resume file slurmctld wrote for the call was read: the job and the node it resumes
    assert any(ln.endswith("resume -: job %s: resumes lab4" % job_id) for ln in lines), lines
    handed = [ln for ln in lines if "resume lab4: handed to the runner" in ln]
    wake_s = stamp(woken[0][:19]) - stamp(handed[0][:19]) if handed else float("nan")
    print("job %s: submit to start %.0f s; fleetnap's wake of lab4 (program called to verified up) %.0f s; "
          "the rest is slurmd's restart, its registration and Slurm's scheduling"
          % (job_id, stamp(j["StartTime"]) - stamp(j["SubmitTime"]), wake_s))


def test_resume_asked_twice_wakes_the_node_once(cluster):
    """slurmctld restarted while a node resumes calls ResumeProgram again for it: the second call
    waits for the node's lock, finds it up, sends nothing and says so; one magic packet, one wake."""
    lab = cluster
    start = len(log_lines())
    mac = lab["lab5"]["wol_mac"]
    before = len(lab.wol_log())
    slurm_cmd("scontrol", "update", "nodename=lab5", "state=POWER_UP")
    # the second call, as slurmctld makes it: its environment from scratch, the hostlist argument
    prog = str(BASE / "lib" / "fleetnap-slurm-resume")
    proc = subprocess.run(["env", "-i", "SLURM_CONF=%s" % labslurm.CONF, prog, "lab5"], capture_output=True,
                          text=True, timeout=10)
    assert proc.returncode == 0, proc
    wait(lab, "lab5 idle in sinfo again", lambda: states().get("lab5") == "idle", 240)
    # one call wakes it; the other, after the first released the node's lock, finds it answering
    wait(lab, "both calls logged as done",
         lambda: len([ln for ln in log_lines(start) if re.search(r"resume lab5: (woken|nothing done)", ln)]) == 2, 120)
    assert len([ln for ln in log_lines(start) if re.search(r"resume lab5: woken$", ln)]) == 1, log_lines(start)
    assert len([ln for ln in log_lines(start) if ln.endswith("resume lab5: nothing done: answers already")]) == 1, \
        log_lines(start)
    woke = [e for e in lab.wol_log()[before:] if e.get("mac") == mac and e.get("action") == "woke"]
    assert len(woke) == 1, woke
    sent = [e for e in lab.wol_log()[before:] if e.get("mac") == mac]
    handed = [ln for ln in log_lines(start) if "resume lab5: handed to the runner" in ln]
    assert len(handed) == 2, log_lines(start)
    print("resume asked twice: %d magic packets seen by the relay, %d woke the guest" % (len(sent), len(woke)))


def test_s3_trap_without_slurmd_restart_the_node_goes_down_at_resume_timeout(cluster):
    """The same wake as above with the restart of slurmd left out: slurmd's boot time (from the
    uptime, which counted through S3) is older than the resume request, and slurmctld marks the
    node DOWN at ResumeTimeout (60 s in partition warm) although it is up; ResumeFailProgram is
    called and parks it again. The job is requeued, not lost."""
    lab = cluster
    write_overlay({"lab5": {"gear_member_resume_restart": []}})
    try:
        wait(lab, "lab5 parked again by SuspendTime", lambda: states().get("lab5") == "idle~" and parked(lab, "lab5"), 240)
        start = len(log_lines())
        job_id, t_submit = submit("warm", "lab5")
        wait(lab, "lab5 answering again", lambda: not lab.ssh_down("lab5"), 120)
        boot = stamp(node("lab5")["BootTime"])
        wait(lab, "lab5 DOWN in sinfo", lambda: states().get("lab5", "").startswith("down"), 200)
        n = node("lab5")
        print("lab5 up at %.0f s after the submit, marked DOWN by slurmctld: %s (slurmd's boot time %.0f s before "
              "the request)" % (time.time() - t_submit, n.get("Reason"), t_submit - boot))
        assert "ResumeTimeout" in n.get("Reason", ""), n
        assert boot < t_submit, (n["BootTime"], t_submit)
        wait(lab, "ResumeFailProgram called for lab5", lambda: any(
            re.search(r"resume_fail lab5: (handed to the runner|parked)", ln) for ln in log_lines(start)), 60)
        j = job(job_id)
        assert j["JobState"] in ("PENDING", "REQUEUED") or int(j.get("Restarts", "0")) >= 1, j
    finally:
        write_overlay()
    slurm_cmd("scancel", job_id)
    wait(lab, "resume_fail's park of lab5 done", lambda: any(
        re.search(r"resume_fail lab5: (parked|failed)", ln) for ln in log_lines(start)), 240)
    slurm_cmd("scontrol", "update", "nodename=lab5", "state=RESUME")


def wol_drop(lab, name):
    run_labctl("wol-drop", lab[name]["wol_mac"], "--count", "0")


def test_a_node_neither_wol_nor_its_bmc_can_wake_is_told_to_slurm_and_no_job_is_lost(cluster):
    """lab4 in S3, its magic packets dropped and its BMC address wrong: fleetnap tells Slurm
    (state DOWN, reason 'fleetnap: <why>', then POWER_DOWN) before ResumeTimeout, and the job that
    asked for the node is requeued, not lost."""
    lab = cluster
    wait(lab, "lab4 parked again by SuspendTime", lambda: states().get("lab4") == "idle~" and parked(lab, "lab4"), 240)
    write_overlay({"lab4": {"fleetnap_bmc_port": 9, "gear_member_wol_timeout_s": 10, "gear_member_ipmi_timeout_s": 20}})
    wol_drop(lab, "lab4")
    start = len(log_lines())
    try:
        job_id, _t = submit("warm", "lab4")
        wait(lab, "fleetnap to tell Slurm of lab4", lambda: any(
            re.search(r"resume lab4: told Slurm: nodename=lab4 state=POWER_DOWN", ln) for ln in log_lines(start)), 200)
    finally:
        run_labctl("wol-drop", "--clear")
        write_overlay()
    lines = log_lines(start)
    assert any(re.search(r"resume lab4: failed: ", ln) for ln in lines), lines
    assert any("told Slurm: nodename=lab4 state=DOWN reason=fleetnap: " in ln for ln in lines), lines
    n = node("lab4")
    assert n.get("Reason", "").startswith("fleetnap: "), n
    j = job(job_id)
    assert j["JobState"] == "PENDING" and int(j.get("Restarts", "0")) >= 1, j
    assert lab.qmp_status("lab4") == "suspended"     # nothing was powered that was not asked for
    print("lab4: %s; %s; job %s %s, restarts %s" % (n.get("State"), n.get("Reason"), job_id, j["JobState"], j.get("Restarts")))
    slurm_cmd("scancel", job_id)


def test_magic_packets_lost_the_bmc_wakes_the_node_and_the_job_runs(cluster):
    """lab6 (parked by soft-off) gets WoL back as its first method, and every magic packet for it is
    dropped: after the WoL wait fleetnap powers it on through its BMC (boot once from the disk), slurmd
    starts with the boot and registers, and the job runs."""
    lab = cluster
    assert states().get("lab6") == "idle~" and lab.power("lab6") == "off", (states(), lab.power("lab6"))
    write_overlay({"lab6": {"fleetnap_power_methods": ["wol", "ipmi"], "gear_member_wol_timeout_s": 15}})
    wol_drop(lab, "lab6")
    before = len(lab.wol_log())
    try:
        job_id, t_submit = submit("cold", "lab6")
        wait(lab, "job %s to complete" % job_id, lambda: job(job_id)["JobState"] in ("COMPLETED", "FAILED"), 400)
    finally:
        run_labctl("wol-drop", "--clear")
        write_overlay()
    j = job(job_id)
    assert j["JobState"] == "COMPLETED" and j["NodeList"] == "lab6", j
    dropped = [e for e in lab.wol_log()[before:] if e.get("host") == "lab6" and e.get("action") == "dropped-by-fault-injection"]
    assert dropped, lab.wol_log()[before:]
    assert not [e for e in lab.wol_log()[before:] if e.get("host") == "lab6" and e.get("action") == "woke"]
    assert stamp(node("lab6")["BootTime"]) >= int(t_submit) - 1
    print("job %s on lab6: %d magic packets dropped, woken by its BMC; submit to start %.0f s"
          % (job_id, len(dropped), stamp(j["StartTime"]) - stamp(j["SubmitTime"])))
