"""The suspend precheck of role gear_member (roles/gear_member/templates/suspend.sh.j2), run for real.

The role sends the rendered template as one raw command (``/bin/sh -c``). Here the same template is
rendered by Ansible's own template lookup (one ``ansible`` run for the whole module), with every
path under a fake root, a given systemd version and ``echo SCHEDULED`` in place of the
``systemd-run ... systemctl suspend`` that vars/main.yml puts there, and run with ``/bin/sh``
against trees built like the ones fleetnap's sleep_policy leaves (its own drop-in text, its
/dev/null masks). A refusal must print one line naming what and where, exit 3, schedule nothing
and write nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ansible.module_utils.fleetnap.sleeppolicy import DROP_IN, drop_in_text
from conftest import REPO, run_module, snapshot_tree
from greeting import serving

ROLE = REPO / "roles" / "gear_member"
TEMPLATE = ROLE / "templates" / "suspend.sh.j2"
# (suspend mode, systemd version, park) -> one rendering; 252 is Debian 12's systemd, "kernel" a
# host without systemd (the state written to /sys/power/state directly). park: the role's
# gear_member_park_ignores_sleep_policy (the tests of the precheck itself run without it, the
# parking tests below with it).
VARIANTS = [("deep", "252", False), ("any", "252", False), ("deep", "256", False), ("any", "256", False),
            ("deep", "252", True), ("deep", "256", True), ("any", "252", True),
            ("deep", "kernel", False), ("any", "kernel", False), ("deep", "kernel", True)]
UNPARK = ROLE / "templates" / "unpark.sh.j2"
# The park's resume hook, run in the foreground with what it printed kept; its suspend: the success
# count moves (HOOK_SUSPEND_WITH decides: success, fail, or none for a suspend that never happens).
SLURMD_EXEC = "/usr/sbin/slurmd -D -s $SLURMD_OPTIONS"     # the role's default: Debian's ExecStart
HOOK_START = "/bin/sh $K/park-resume 2>$R/hook.err; echo HOOKED rc=$?"    # no quotes: the lookup keeps their escapes
HOOK_SUSPEND = ("case ${FLEETNAP_TEST_SUSPEND:-success} in none) ;; *) f=$S/${FLEETNAP_TEST_SUSPEND:-success}; "
                "echo $(( $(cat $f) + 1 )) > $f ;; esac")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    base = tmp_path_factory.mktemp("precheck")
    root = base / "root"
    lookups = []
    for mode, systemd, park in VARIANTS:
        kernel = systemd == "kernel"
        tvars = {"__gear_member_precheck_root": str(root), "__gear_member_precheck_systemd": "" if kernel else systemd,
                 "__gear_member_precheck_init": "kernel" if kernel else "systemd",
                 "gear_member_suspend_mode": mode, "__gear_member_suspend_command": "echo SCHEDULED",
                 "__gear_member_kernel_suspend_command": "echo SCHEDULED $use",
                 "gear_member_park_ignores_sleep_policy": park,
                 # The resume hook (where suspend_stats exists) runs in the foreground here; its
                 # "suspend" is the kernel's count of completed suspends moving by one.
                 "__gear_member_park_start_command": HOOK_START,
                 "__gear_member_kernel_park_start_command": HOOK_START,
                 "__gear_member_park_suspend_command": HOOK_SUSPEND,
                 "gear_member_resume_wait_s": 2, "gear_member_resume_restart": ["fleetnap-test.service", "b@x.service"],
                 "gear_member_slurmd_exec_start": SLURMD_EXEC}
        lookups.append("lookup('ansible.builtin.template', %s, template_vars=%s)"
                       % (json.dumps(str(TEMPLATE)), json.dumps(tvars)))
    lookups.append("lookup('ansible.builtin.template', %s, template_vars=%s)"
                   % (json.dumps(str(UNPARK)), json.dumps({"__gear_member_precheck_root": str(root)})))
    result = run_module("ansible.builtin.debug", {"msg": "{{ [%s] }}" % ", ".join(lookups)}, tmp_path=base)
    assert not result.failed and len(result["msg"]) == len(VARIANTS) + 1, result
    texts = dict(zip(VARIANTS, result["msg"]))
    texts["unpark"] = result["msg"][-1]
    return root, texts


def build(root: Path, state="freeze mem disk", mem_sleep="s2idle [deep]",
          disk="[platform] shutdown reboot suspend test_resume"):
    """A host as sysfs and /etc show it; None leaves a file out."""
    if root.exists():
        shutil.rmtree(root)
    power = root / "sys" / "power"
    power.mkdir(parents=True)
    for name, value in (("state", state), ("mem_sleep", mem_sleep), ("disk", disk)):
        if value is not None:
            (power / name).write_text(value + "\n")
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "systemd" / "sleep.conf.d").mkdir(parents=True)
    (root / "etc" / "systemd" / "sleep.conf").write_text("[Sleep]\n#AllowSuspend=yes\n#SuspendState=mem standby freeze\n")
    return root


def put(root: Path, path: str, text: str) -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def sh(text, **env):
    return subprocess.run(["/bin/sh", "-c", text], capture_output=True, text=True, timeout=30,
                          env=dict({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}, **env))


def run(scripts, mode="deep", systemd="252"):
    root, texts = scripts
    before = snapshot_tree(root)
    links_before = sorted(str(p) for p in root.rglob("*") if p.is_symlink())
    proc = sh(texts[(mode, systemd, False)])
    assert snapshot_tree(root) == before   # the precheck reads, never writes
    assert sorted(str(p) for p in root.rglob("*") if p.is_symlink()) == links_before
    assert proc.stderr == "", proc.stderr
    return proc


def park(scripts, mode="deep", systemd="252"):
    """The precheck with parking on: returns the process and what it left under /run."""
    root, texts = scripts
    proc = sh(texts[(mode, systemd, True)])
    assert proc.stderr == "", proc.stderr
    return proc


def refused(proc, *words, rc=3):
    lines = proc.stdout.splitlines()
    assert proc.returncode == rc and len(lines) == 1 and lines[0].startswith("cannot suspend: "), proc.stdout
    assert "SCHEDULED" not in proc.stdout
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def scheduled(proc):
    assert proc.returncode == 0 and proc.stdout == "SCHEDULED\n", (proc.returncode, proc.stdout)


def test_the_role_sends_this_template_with_the_real_suspend_after_it():
    """send.yml (what gear_shift imports for a batch) is the one raw command; down.yml (the role
    on its own) imports it, then parks the host with gear_wave."""
    down = yaml.safe_load((ROLE / "tasks" / "down.yml").read_text())
    assert [t["ansible.builtin.import_tasks"] for t in down if "ansible.builtin.import_tasks" in t] == ["send.yml"]
    assert any("gear_wave" in t for t in down)
    send = yaml.safe_load((ROLE / "tasks" / "send.yml").read_text())
    raw = [t for t in send if "ansible.builtin.raw" in t]
    assert len(raw) == 1 and len(send) == 1
    assert raw[0]["ansible.builtin.raw"] == "{{ lookup('ansible.builtin.template', 'suspend.sh.j2') }}"
    assert raw[0]["args"] == {"executable": "/bin/sh"}
    internals = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert internals["__gear_member_precheck_root"] == "" and internals["__gear_member_precheck_systemd"] == ""
    assert internals["__gear_member_suspend_command"].startswith("systemd-run ")
    assert internals["__gear_member_suspend_command"].endswith(" /usr/bin/systemctl suspend")
    assert internals["__gear_member_precheck_init"] == ""
    assert internals["__gear_member_kernel_suspend_command"].startswith("trap '' HUP; setsid /bin/sh -c ")
    text = TEMPLATE.read_text()
    assert text.rstrip().endswith("\nsuspend_now")
    body = text[text.index("suspend_now() {"):text.index("\n}\n", text.index("suspend_now() {"))]
    assert "{{ __gear_member_suspend_command }}" in body and "{{ __gear_member_kernel_suspend_command }}" in body


@pytest.mark.parametrize("mode", ["deep", "any"])
def test_a_host_that_can_suspend_to_s3_gets_the_suspend(scripts, mode):
    build(scripts[0])
    scheduled(run(scripts, mode))


@pytest.mark.parametrize("unit", ["sleep.target", "suspend.target", "systemd-suspend.service"])
def test_masked_unit_refuses_naming_unit_and_link(scripts, unit):
    root = build(scripts[0])
    link = root / "etc/systemd/system" / unit
    link.symlink_to("/dev/null")
    line = refused(run(scripts, "any"), "%s is masked (%s -> /dev/null)" % (unit, link))
    assert line.endswith(")")


def test_runtime_mask_and_empty_unit_file_count_as_masked(scripts):
    root = build(scripts[0])
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "run/systemd/system/suspend.target").symlink_to("/dev/null")
    refused(run(scripts), "suspend.target is masked (%s/run/systemd/system/suspend.target -> /dev/null)" % root)
    root = build(scripts[0])
    put(root, "/etc/systemd/system/sleep.target", "")
    refused(run(scripts), "sleep.target is masked (%s/etc/systemd/system/sleep.target is empty)" % root)


def test_units_that_are_not_masks_pass(scripts):
    root = build(scripts[0])
    put(root, "/etc/systemd/system/suspend.target", "[Unit]\nDescription=Suspend\n")
    (root / "etc/systemd/system/hibernate.target").symlink_to("/dev/null")   # fleetnap masks it too: irrelevant
    (root / "etc/systemd/system/sleep.target").symlink_to("/lib/systemd/system/sleep.target")
    scheduled(run(scripts))


def test_fleetnap_allow_none_drop_in_refuses(scripts):
    root = build(scripts[0])
    path = put(root, DROP_IN, drop_in_text("none"))
    refused(run(scripts, "any"), "AllowSuspend=no in %s" % path)


@pytest.mark.parametrize("first, second, ok", [("no", "yes", True), ("yes", "false", False), ("0", "", True)])
def test_allow_suspend_last_assignment_wins(scripts, first, second, ok):
    root = build(scripts[0])
    put(root, "/etc/systemd/sleep.conf", "[Sleep]\nAllowSuspend=%s\n" % first)
    later = put(root, "/etc/systemd/sleep.conf.d/90-site.conf", "[Sleep]\n  AllowSuspend = %s\n" % second)
    proc = run(scripts, "any")
    if ok:
        scheduled(proc)
    else:
        refused(proc, "AllowSuspend=false in %s" % later)


def test_drop_ins_are_read_in_name_order(scripts):
    root = build(scripts[0])
    put(root, "/etc/systemd/sleep.conf.d/10-a.conf", "[Sleep]\nAllowSuspend=no\n")
    put(root, "/etc/systemd/sleep.conf.d/20-b.conf", "[Sleep]\nAllowSuspend=yes\n")
    put(root, "/etc/systemd/sleep.conf.d/30-c.txt", "[Sleep]\nAllowSuspend=no\n")   # not a .conf: ignored
    scheduled(run(scripts))


def test_no_mem_in_state_refuses_deep_and_any_accepts_s2idle(scripts):
    root = build(scripts[0], state="freeze", mem_sleep=None)
    line = refused(run(scripts, "deep"), "%s/sys/power/state offers [freeze], not mem" % root, rc=4)
    assert line.endswith("[no S3 on this host]")      # gear_member parks it by soft-off instead
    scheduled(run(scripts, "any"))


def test_no_system_sleep_at_all(scripts):
    root = build(scripts[0], state=None)
    refused(run(scripts, "any"), "%s/sys/power/state is missing" % root, rc=4)
    build(scripts[0], state="disk")
    refused(run(scripts, "any"), "SuspendState=mem standby freeze (default): %s/sys/power/state [disk] offers none" % scripts[0])


def test_deep_offered_but_not_selected_is_reported_not_changed(scripts):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    line = refused(run(scripts, "deep"), "mem_sleep is [s2idle], S3 (deep) offered but not selected: %s/sys/power/mem_sleep"
                   % root)
    assert "gear_member_suspend_mode: any" in line
    assert (root / "sys/power/mem_sleep").read_text() == "[s2idle] deep\n"
    scheduled(run(scripts, "any"))


def test_no_deep_at_all(scripts):
    root = build(scripts[0], mem_sleep="[s2idle]")
    refused(run(scripts, "deep"), "mem_sleep offers [s2idle], no S3 (deep): %s/sys/power/mem_sleep" % root, rc=4)


def test_kernel_without_mem_sleep_file_means_s3(scripts):
    build(scripts[0], state="mem", mem_sleep=None)
    scheduled(run(scripts, "deep"))


def test_fleetnap_s2idle_drop_in(scripts):
    """allow=s2idle: SuspendState=freeze is not S3, but it is a suspend (mode any)."""
    root = build(scripts[0])
    path = put(root, DROP_IN, drop_in_text("s2idle"))
    refused(run(scripts, "deep", "252"), "SuspendState=freeze in %s" % path, "not mem")
    scheduled(run(scripts, "any", "252"))
    scheduled(run(scripts, "any", "256"))


def test_fleetnap_deep_drop_in(scripts):
    """allow=deep: what fleetnap writes suspends on systemd 252 (Debian 12) and on 256."""
    root = build(scripts[0])
    put(root, DROP_IN, drop_in_text("deep"))
    scheduled(run(scripts, "deep", "252"))
    scheduled(run(scripts, "deep", "256"))
    # systemd >= 256 selects mem_sleep from MemorySleepMode= itself: deep although s2idle is selected now.
    build(scripts[0], mem_sleep="[s2idle] deep")
    put(scripts[0], DROP_IN, drop_in_text("deep"))
    scheduled(run(scripts, "deep", "256"))
    put(scripts[0], DROP_IN, "[Sleep]\nMemorySleepMode=s2idle\n")
    refused(run(scripts, "deep", "256"), "mem_sleep is [s2idle], S3 (deep) offered but not selected: MemorySleepMode= in")


def test_stale_suspend_mode_drop_in_is_refused_on_old_systemd(scripts):
    """A drop-in with SuspendMode=deep (what fleetnap wrote before 0.1.0's fix, or a hand-made one):
    systemd < 256 writes SuspendMode= to /sys/power/disk and refuses to suspend."""
    root = build(scripts[0])
    path = put(root, DROP_IN, "[Sleep]\nSuspendState=mem\nSuspendMode=deep\nMemorySleepMode=deep\n")
    for allow in ("deep", "s2idle"):   # fleetnap itself no longer writes it
        assert not [line for line in drop_in_text(allow).splitlines() if line.startswith("SuspendMode")]
    refused(run(scripts, "deep", "252"), "SuspendMode=deep in %s" % path,
            "writes SuspendMode= to %s/sys/power/disk, which offers [platform shutdown reboot suspend test_resume]" % root)
    scheduled(run(scripts, "deep", "256"))


def test_suspend_mode_that_sys_power_disk_offers_passes_on_old_systemd(scripts):
    root = build(scripts[0])
    put(root, "/etc/systemd/sleep.conf", "[Sleep]\nSuspendMode=bogus suspend\n")
    scheduled(run(scripts, "deep", "252"))
    put(root, "/etc/systemd/sleep.conf.d/50-reset.conf", "[Sleep]\nSuspendMode=\n")   # empty: back to the default
    put(root, "/etc/systemd/sleep.conf", "[Sleep]\nSuspendMode=bogus\n")
    scheduled(run(scripts, "deep", "252"))


@pytest.fixture
def sshd():
    """Where the role sees the host's SSH greeting (it suspends only a host that answers)."""
    with serving() as srv:
        yield srv


def down_play(tmp_path, port):
    """gear_member down on localhost, its greeting asked of 127.0.0.1:port: the role's block, and the
    result (or the failure) written to out.json."""
    out = tmp_path / "out.json"
    play = tmp_path / "down.yml"
    play.write_text(yaml.safe_dump([{
        "name": "down", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"block": [{"ansible.builtin.include_role": {"name": "gear_member"},
                              "vars": {"gear_member_action": "down", "gear_member_power_ok": True,
                                       "gear_member_down_method": "suspend", "gear_member_down_timeout_s": 5,
                                       "gear_member_address": "127.0.0.1", "gear_member_ssh_port": port}},
                             {"ansible.builtin.copy": {"dest": str(out), "mode": "0644",
                                                       "content": "{{ {'result': gear_member_result} | to_json }}"}}],
                   "rescue": [{"ansible.builtin.copy": {
                       "dest": str(out), "mode": "0644",
                       "content": "{{ {'result': gear_member_result, 'msg': ansible_failed_result.msg} | to_json }}"}}]}],
    }]))
    return play, out


def ansible_playbook(play, extra):
    return subprocess.run([str(Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "ansible-playbook"),
                           "-i", "localhost,", str(play), "-e", json.dumps(extra)],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO),
                          env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1"))


def test_a_host_that_gives_no_greeting_gets_no_suspend(tmp_path):
    """A host silent already (asleep, off, hung; here a port that accepts and says nothing, as QEMU's
    user networking does for a guest in S3): the role sends it nothing, not even the precheck, and
    says so; the host is not failed (it is as the down asks), nothing is powered."""
    root = build(tmp_path / "root")
    marker = tmp_path / "scheduled"
    with serving(answering=False) as silent:        # accepts, never greets
        play, out = down_play(tmp_path, silent.port)
        proc = ansible_playbook(play, {"__gear_member_precheck_root": str(root),
                                       "__gear_member_suspend_command": "touch %s" % marker,
                                       "__gear_member_precheck_init": "systemd",
                                       "ansible_python_interpreter": "/usr/bin/python3"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    got = json.loads(out.read_text())
    assert "msg" not in got, got            # not failed
    res = got["result"]
    assert res["ok"] is True and res["method"] == "none" and res["state"] == "silent", res
    assert res["msg"].startswith("silent already (no SSH greeting within 2 s)"), res
    assert not marker.exists()              # the precheck passes on this root: run, it would have scheduled


def test_the_role_fails_the_host_at_once_with_the_reason(tmp_path, sshd):
    """The role itself (raw + the refusal path) on localhost, paths under a fake root whose suspend.target
    is masked, and a marker file in place of the real suspend command: it must never be written."""
    root = build(tmp_path / "root")
    (root / "etc/systemd/system/suspend.target").symlink_to("/dev/null")
    marker, out, bad = tmp_path / "scheduled", tmp_path / "out.json", tmp_path / "bad.txt"
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{
        "name": "down", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"block": [{"ansible.builtin.include_role": {"name": "gear_member"},
                              "vars": {"gear_member_action": "down", "gear_member_power_ok": True,
                                       "gear_member_down_method": "suspend", "gear_member_down_timeout_s": 5}}],
                   "rescue": [{"ansible.builtin.copy": {
                       "dest": str(out), "mode": "0644",
                       "content": "{{ {'result': gear_member_result, 'msg': ansible_failed_result.msg} | to_json }}"}}]},
                  # Bad input: refused by the argument spec before anything runs on the host.
                  {"block": [{"ansible.builtin.include_role": {"name": "gear_member"},
                              "vars": {"gear_member_action": "down", "gear_member_power_ok": True,
                                       "gear_member_down_method": "suspend", "gear_member_suspend_mode": "s3"}}],
                   "rescue": [{"ansible.builtin.copy": {"dest": str(bad), "mode": "0644",
                                                        "content": "{{ ansible_failed_result.msg }}"}}]}],
    }]))
    extra = {"__gear_member_precheck_root": str(root), "__gear_member_suspend_command": "touch %s" % marker,
             "__gear_member_precheck_init": "systemd", "gear_member_address": "127.0.0.1",
             "gear_member_ssh_port": sshd.port, "ansible_python_interpreter": "/usr/bin/python3"}
    proc = ansible_playbook(play, extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    got = json.loads(out.read_text())
    link = root / "etc/systemd/system/suspend.target"
    reason = "cannot suspend: suspend.target is masked (%s -> /dev/null); nothing was scheduled, the host stays up" % link
    assert got["msg"] == reason
    res = got["result"]
    assert res["ok"] is False and res["action"] == "down" and res["method"] == "suspend" and res["state"] == "on"
    assert res["msg"] == reason and 0 <= float(res["elapsed_s"]) < 5   # at once, not after the down timeout
    assert not marker.exists()
    refusal = bad.read_text()
    assert "gear_member_suspend_mode" in refusal and "s3" in refusal and "deep, any" in refusal, refusal


PARK_DROP_IN = "run/systemd/sleep.conf.d/zz-fleetnap-park.conf"
PARK_KEPT = "run/fleetnap/park-mem_sleep"


@pytest.mark.parametrize("policy", ["s2idle", "none"])
def test_parking_ignores_the_in_service_sleep_policy_and_unpark_puts_it_back(scripts, policy):
    """A profile's sleep policy (freeze + s2idle selected, or no suspend at all) does not stop the
    park in S3: runtime drop-in, mem_sleep deep, suspend; unpark returns the host to the policy."""
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    path = put(root, DROP_IN, drop_in_text(policy))
    etc_before = snapshot_tree(root / "etc")
    refused(run(scripts, "deep"))                       # without parking: the policy refuses
    scheduled(park(scripts, "deep", "252"))
    assert (root / PARK_DROP_IN).read_text() == "[Sleep]\nAllowSuspend=yes\nSuspendState=\nSuspendState=mem\nSuspendMode=\n"
    assert (root / PARK_KEPT).read_text() == "s2idle\n"
    assert (root / "sys/power/mem_sleep").read_text() == "deep\n"   # what was written (the kernel shows [deep])
    assert snapshot_tree(root / "etc") == etc_before and path.read_text() == drop_in_text(policy)
    proc = sh(scripts[1]["unpark"])
    assert proc.returncode == 0 and proc.stdout.startswith("unparked: mem_sleep s2idle"), proc.stdout
    assert (root / "sys/power/mem_sleep").read_text() == "s2idle\n"
    assert not (root / PARK_DROP_IN).exists() and not (root / PARK_KEPT).exists()
    # /run as the park found it: the directories it had to create are gone again (the lab's
    # first cycle on a fresh guest showed them left behind).
    assert not (root / "run/systemd/sleep.conf.d").exists() and not (root / "run/fleetnap").exists()
    again = sh(scripts[1]["unpark"])
    assert again.returncode == 0 and again.stdout == ""     # nothing to undo: no change reported


def test_parking_on_systemd_256_uses_memory_sleep_mode(scripts):
    root = build(scripts[0])
    put(root, DROP_IN, drop_in_text("s2idle"))
    scheduled(park(scripts, "deep", "256"))
    assert (root / PARK_DROP_IN).read_text() == ("[Sleep]\nAllowSuspend=yes\nSuspendState=\nSuspendState=mem\n"
                                                 "MemorySleepMode=\nMemorySleepMode=deep\n")
    assert (root / PARK_KEPT).read_text() == "deep\n"   # deep was selected already: nothing to change
    assert (root / "sys/power/mem_sleep").read_text() == "s2idle [deep]\n"


def test_parking_still_refuses_masks_and_a_kernel_without_s3(scripts):
    root = build(scripts[0])
    (root / "etc/systemd/system/suspend.target").symlink_to("/dev/null")
    refused(park(scripts), "suspend.target is masked")
    root = build(scripts[0], mem_sleep="[s2idle]")
    refused(park(scripts), "mem_sleep offers [s2idle], no S3 (deep)", rc=4)
    root = build(scripts[0], state="freeze", mem_sleep=None)
    refused(park(scripts), "offers [freeze], not mem", rc=4)
    assert not (root / "run").exists()


def test_parking_undoes_its_writes_when_one_fails(scripts):
    """The drop-in cannot be written (a directory in its place): the mem_sleep record written just
    before is removed again, mem_sleep is untouched, nothing is scheduled, and the refusal says so."""
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    (root / PARK_DROP_IN).mkdir(parents=True)
    line = refused(park(scripts), "cannot write %s/%s" % (root, PARK_DROP_IN), "nothing was scheduled")
    assert "put back" in line
    assert not (root / PARK_KEPT).exists() and (root / "sys/power/mem_sleep").read_text() == "[s2idle] deep\n"


def test_parking_refuses_cleanly_when_run_cannot_be_written(scripts):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    (root / "run").write_text("not a directory")      # /run is a file: nothing can be created under it
    proc = park(scripts)
    line = refused(proc, "cannot create %s/run/systemd/sleep.conf.d" % root, "nothing was scheduled")
    assert (root / "sys/power/mem_sleep").read_text() == "[s2idle] deep\n" and line


def test_the_role_unparks_in_verify_with_this_template():
    """back.yml (what gear_shift imports after a wave) has the unpark; verify.yml imports it."""
    verify = yaml.safe_load((ROLE / "tasks" / "verify.yml").read_text())
    assert [t["ansible.builtin.import_tasks"] for t in verify if "ansible.builtin.import_tasks" in t] == ["back.yml"]
    back = yaml.safe_load((ROLE / "tasks" / "back.yml").read_text())
    raw = [t for t in back if "ansible.builtin.raw" in t]
    assert len(raw) == 1 and raw[0]["ansible.builtin.raw"] == "{{ lookup('ansible.builtin.template', 'unpark.sh.j2') }}"


def test_sleep_lists_append_and_an_empty_assignment_clears(scripts):
    """SuspendState= is a list in systemd: a drop-in's SuspendState=freeze after sleep.conf's
    SuspendState=mem gives [mem, freeze] and systemd writes mem; an empty assignment clears it."""
    root = build(scripts[0])
    put(root, "/etc/systemd/sleep.conf", "[Sleep]\nSuspendState=mem\n")
    put(root, "/etc/systemd/sleep.conf.d/50-nap.conf", "[Sleep]\nSuspendState=freeze\n")
    scheduled(run(scripts, "deep", "252"))
    put(root, "/etc/systemd/sleep.conf.d/50-nap.conf", "[Sleep]\nSuspendState=\nSuspendState=freeze\n")
    refused(run(scripts, "deep", "252"), "SuspendState=freeze in", "not mem")


def test_a_park_over_a_napping_policy_leaves_systemd_with_s3_first(scripts):
    """The lab found it: a park drop-in saying only SuspendState=mem appended mem after the
    policy's freeze, and systemd 252 suspended to idle. After the park, the precheck reading
    /etc and /run as systemd does (without parking) must see S3 first."""
    for systemd in ("252", "256"):
        root = build(scripts[0], mem_sleep="[s2idle] deep")
        put(root, DROP_IN, drop_in_text("s2idle"))
        refused(run(scripts, "deep", systemd), "not mem")
        scheduled(park(scripts, "deep", systemd))
        (root / "sys/power/mem_sleep").write_text("s2idle [deep]\n")   # as the kernel shows the write
        scheduled(run(scripts, "deep", systemd))
        assert sh(scripts[1]["unpark"]).returncode == 0
        refused(run(scripts, "deep", systemd), "not mem")               # back on the napping policy


def test_unpark_keeps_directories_that_were_there_before_the_park(scripts):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    put(root, DROP_IN, drop_in_text("s2idle"))
    put(root, "/run/fleetnap/other-state", "kept\n")
    (root / "run/systemd/sleep.conf.d").mkdir(parents=True)
    scheduled(park(scripts, "deep", "252"))
    assert sh(scripts[1]["unpark"]).returncode == 0
    assert (root / "run/fleetnap/other-state").read_text() == "kept\n"
    assert (root / "run/systemd/sleep.conf.d").is_dir() and not list((root / "run/systemd/sleep.conf.d").iterdir())
    assert sorted(p.name for p in (root / "run/fleetnap").iterdir()) == ["other-state"]


# A host where systemd is not the init (a container, a minimal system, the fleet simulator): the
# kernel is asked directly, so systemd's sleep configuration does not decide; the kernel does.

def test_without_systemd_the_kernel_decides_and_systemd_settings_do_not(scripts):
    root = build(scripts[0])
    (root / "etc/systemd/system/suspend.target").symlink_to("/dev/null")
    put(root, DROP_IN, drop_in_text("none"))
    proc = run(scripts, "deep", "kernel")
    assert proc.returncode == 0 and proc.stdout == "SCHEDULED mem\n", proc.stdout
    build(scripts[0], state="freeze", mem_sleep=None)
    refused(run(scripts, "deep", "kernel"), "offers [freeze], not mem", rc=4)
    proc = run(scripts, "any", "kernel")
    assert proc.returncode == 0 and proc.stdout == "SCHEDULED freeze\n", proc.stdout
    build(scripts[0], mem_sleep="[s2idle] deep")
    refused(run(scripts, "deep", "kernel"), "mem_sleep is [s2idle], S3 (deep) offered but not selected")


def test_parking_without_systemd_selects_deep_without_a_drop_in_and_unpark_puts_it_back(scripts):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    proc = park(scripts, "deep", "kernel")
    assert proc.returncode == 0 and proc.stdout == "SCHEDULED mem\n", proc.stdout
    assert (root / PARK_KEPT).read_text() == "s2idle\n"
    assert (root / "sys/power/mem_sleep").read_text() == "deep\n"
    assert not (root / "run/systemd").exists()        # nothing for a systemd that is not there
    proc = sh(scripts[1]["unpark"])
    assert proc.returncode == 0 and proc.stdout.startswith("unparked: mem_sleep s2idle"), proc.stdout
    assert (root / "sys/power/mem_sleep").read_text() == "s2idle\n" and not (root / "run/fleetnap").exists()


def test_the_kernel_suspend_command_writes_the_state_after_the_session_has_gone(tmp_path):
    """The role's own command (vars/main.yml), run as the template runs it: it returns at once,
    and a second later the state lands in /sys/power/state (here a fake root's)."""
    internals = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    power = tmp_path / "sys" / "power"
    power.mkdir(parents=True)
    (power / "state").write_text("freeze mem\n")
    script = 'use=mem; P=%s\n%s\necho returned' % (power, internals["__gear_member_kernel_suspend_command"])
    proc = sh(script)
    assert proc.returncode == 0 and proc.stdout == "returned\n", proc
    assert (power / "state").read_text() == "freeze mem\n"       # not yet: a second after
    end = time.monotonic() + 10
    while (power / "state").read_text() != "mem\n" and time.monotonic() < end:
        time.sleep(0.05)
    assert (power / "state").read_text() == "mem\n"


# The park's resume hook: where the kernel counts its suspends (/sys/power/suspend_stats), the park
# writes /run/fleetnap/park-resume and starts it instead of the suspend; the hook suspends, waits
# for the count to move, and puts the in-service policy back by itself.

def with_suspend_stats(root: Path) -> Path:
    stats = root / "sys/power/suspend_stats"
    stats.mkdir()
    for name in ("success", "fail"):
        (stats / name).write_text("7\n")
    return stats


def fake_systemctl(tmp_path: Path) -> tuple:
    """A systemctl that logs its arguments (the hook restarts services with it)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "systemctl.log"
    tool = bindir / "systemctl"
    tool.write_text('#!/bin/sh\necho "$*" >> %s\n' % log)
    tool.chmod(0o755)
    return "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin")), log


@pytest.mark.parametrize("systemd", ["252", "256"])
def test_the_resume_hook_suspends_and_on_the_wake_puts_the_policy_back_and_restarts_services(scripts, systemd,
                                                                                            tmp_path):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    path = put(root, DROP_IN, drop_in_text("s2idle"))
    stats = with_suspend_stats(root)
    path_env, log = fake_systemctl(tmp_path)
    proc = sh(scripts[1][("deep", systemd, True)], PATH=path_env)
    assert proc.returncode == 0 and "HOOKED rc=0\n" in proc.stdout, (proc.stdout, proc.stderr)
    assert proc.stdout.endswith("\nparked with the resume hook %s/run/fleetnap/park-resume\n" % root), proc.stdout
    # The hook's own output: the wake, what it put back, the services it restarted.
    err = (root / "hook.err").read_text()
    assert "fleetnap park: woken" in err and "could not" not in err, err
    assert "unparked: mem_sleep s2idle" in proc.stdout, proc.stdout
    assert (stats / "success").read_text() == "8\n"
    assert log.read_text() == "restart fleetnap-test.service\nrestart b@x.service\n"
    # Everything as before the park: the policy's mem_sleep, no park drop-in, no record, no hook, no directories.
    assert (root / "sys/power/mem_sleep").read_text() == "s2idle\n"
    assert path.read_text() == drop_in_text("s2idle")
    assert not (root / "run/fleetnap").exists() and not (root / "run/systemd/sleep.conf.d").exists()


@pytest.mark.parametrize("outcome,said", [("fail", "the suspend failed"), ("none", "no suspend within 2 s awake")])
def test_a_failed_or_missing_suspend_puts_the_policy_back_too(scripts, outcome, said, tmp_path):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    with_suspend_stats(root)
    path_env, _log = fake_systemctl(tmp_path)
    proc = sh(scripts[1][("deep", "252", True)], PATH=path_env, FLEETNAP_TEST_SUSPEND=outcome)
    assert proc.returncode == 0 and "HOOKED rc=0\n" in proc.stdout, (proc.stdout, proc.stderr)
    assert proc.stdout.endswith("\nparked with the resume hook %s/run/fleetnap/park-resume\n" % root), proc.stdout
    assert said in (root / "hook.err").read_text()
    assert (root / "sys/power/mem_sleep").read_text() == "s2idle\n" and not (root / "run/fleetnap").exists()


def test_verify_stops_a_hook_still_waiting_and_puts_the_policy_back(scripts, tmp_path):
    """The controller's unpark (verify, a host parked by an older fleetnap) finds a hook that is
    still waiting: it stops it (only a process that runs the hook: a pid file left by a hook that
    died may name another process by now), then does what the hook would have done."""
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    with_suspend_stats(root)
    hook = root / "run/fleetnap/park-resume"
    waiting = subprocess.Popen(["/bin/sh", "-c", "sleep 60; :", str(hook)])      # as the hook runs: sh HOOK
    other = subprocess.Popen(["sleep", "60"])                                     # a pid file naming another process
    try:
        put(root, "run/fleetnap/park-resume", "# hook\n")
        put(root, "run/fleetnap/park-resume.pid", "%d\n" % other.pid)
        put(root, PARK_KEPT, "s2idle\n")
        proc = sh(scripts[1]["unpark"])
        assert proc.returncode == 0 and "stopped the resume hook" not in proc.stdout, proc.stdout
        assert other.poll() is None and not hook.exists()
        # The park as it stands while its hook waits: record, drop-in, the hook and its pid file.
        put(root, PARK_KEPT, "s2idle\n")
        put(root, PARK_DROP_IN, "[Sleep]\nSuspendState=mem\n")
        (root / "sys/power/mem_sleep").write_text("deep\n")
        put(root, "run/fleetnap/park-resume", "# hook\n")
        put(root, "run/fleetnap/park-resume.pid", "%d\n" % waiting.pid)
        proc = sh(scripts[1]["unpark"])
        assert proc.returncode == 0 and proc.stdout.startswith("unparked: stopped the resume hook, mem_sleep s2idle")
        assert waiting.wait(timeout=10) == -15
        assert not hook.exists() and not (root / PARK_DROP_IN).exists()
        assert (root / "sys/power/mem_sleep").read_text() == "s2idle\n"
    finally:
        for p in (waiting, other):
            if p.poll() is None:
                p.kill()


def test_without_suspend_stats_the_park_suspends_as_before(scripts):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    scheduled(park(scripts, "deep", "252"))
    assert not (root / "run/fleetnap/park-resume").exists()


def test_a_second_park_while_the_first_hook_waits_is_refused_and_changes_nothing(scripts, tmp_path):
    root = build(scripts[0], mem_sleep="[s2idle] deep")
    with_suspend_stats(root)
    hook = root / "run/fleetnap/park-resume"
    waiting = subprocess.Popen(["/bin/sh", "-c", "sleep 60; :", str(hook)])
    try:
        put(root, "run/fleetnap/park-resume", "# the first park's hook\n")
        put(root, "run/fleetnap/park-resume.pid", "%d\n" % waiting.pid)
        before = snapshot_tree(root)
        proc = park(scripts, "deep", "252")
        refused(proc, "an earlier park of this host is still waiting for its suspend", "pid %d" % waiting.pid)
        assert snapshot_tree(root) == before and waiting.poll() is None
    finally:
        waiting.kill()


def test_a_unit_to_restart_that_is_no_unit_name_is_refused_before_anything(tmp_path):
    """gear_member_resume_restart is written into the hook: a name that is not a systemd unit's
    (here one that would run a command) is refused first, with the reason, nothing written."""
    root = build(tmp_path / "root", mem_sleep="[s2idle] deep")
    with_suspend_stats(root)
    marker = tmp_path / "ran"
    tvars = {"__gear_member_precheck_root": str(root), "__gear_member_precheck_systemd": "252",
             "__gear_member_precheck_init": "systemd", "gear_member_suspend_mode": "deep",
             "__gear_member_suspend_command": "echo SCHEDULED", "__gear_member_kernel_suspend_command": "echo SCHEDULED",
             "gear_member_park_ignores_sleep_policy": True, "__gear_member_park_start_command": HOOK_START,
             "__gear_member_kernel_park_start_command": HOOK_START, "__gear_member_park_suspend_command": HOOK_SUSPEND,
             "gear_member_resume_wait_s": 2, "gear_member_slurmd_exec_start": SLURMD_EXEC,
             "gear_member_resume_restart": ["slurmd.service", "x$(touch %s)" % marker]}
    result = run_module("ansible.builtin.debug", {"msg": "{{ lookup('ansible.builtin.template', %s, template_vars=%s) }}"
                                                  % (json.dumps(str(TEMPLATE)), json.dumps(tvars))}, tmp_path=tmp_path)
    assert not result.failed, result
    before = snapshot_tree(root)
    proc = sh(result["msg"])
    line = refused(proc, "gear_member_resume_restart must name systemd units", "x$(touch")
    assert line and not marker.exists() and snapshot_tree(root) == before


def test_unpark_puts_back_the_profile_files_that_drifted_and_counts_them(scripts):
    """After a wake (the park's resume hook runs unpark.sh.j2, and so does verify's login), every
    file fleetnap_profile set (its record profile.want, written by the real module here on a
    captured machine) is compared with what the host shows: EPP reset by a resume, an EPB and a
    C-state disable changed by hand during the park are written back, counted per knob in
    drift.counts and in the textfile metric fleetnap_profile_drift_total, and said in one line;
    a second run finds nothing. POSIX sh, no Python on the host."""
    from conftest import PSTATE_DATA, materialize
    root = build(scripts[0])
    materialize("cfl-u", root)
    materialize("cfl-u", root, data=PSTATE_DATA)
    res = run_module("fleetnap_profile", {"sysfs_root": str(root), "cstates": {"max_latency_us": 2},
                                          "cpufreq": {"epp": "power", "epb": "balance-power"},
                                          "sleep": {"manage": False}})
    assert not res.failed and res.changed, res.get("msg")
    want = root / "var/lib/fleetnap/profile.want"
    # The module names the metrics directory when given one (a host path: here one under the
    # test's root, as the script prefixes every path with it).
    want.write_text(want.read_text() + "#metrics_dir /metrics\n")
    (root / "metrics").mkdir()
    cpu = root / "sys/devices/system/cpu"
    set_by_profile = snapshot_tree(cpu)
    for n in range(8):
        (cpu / ("cpufreq/policy%d/energy_performance_preference" % n)).write_text("balance_performance\n")
    (cpu / "cpu3/power/energy_perf_bias").write_text("6\n")
    disable = cpu / "cpu5/cpuidle/state3/disable"
    disable.write_text("0\n" if disable.read_text().strip() == "1" else "1\n")
    proc = sh(scripts[1]["unpark"])
    assert proc.returncode == 0 and proc.stderr == "", proc
    assert proc.stdout == "profile drift: put back cstate_disable 1, epb 1, epp 8\n", proc.stdout
    assert snapshot_tree(cpu) == set_by_profile
    assert (root / "var/lib/fleetnap/drift.counts").read_text() == "cstate_disable 1\nepb 1\nepp 8\n"
    prom = (root / "metrics/fleetnap_profile_drift.prom").read_text()
    assert 'fleetnap_profile_drift_total{knob="epp"} 8\n' in prom and "# TYPE fleetnap_profile_drift_total counter" in prom
    again = sh(scripts[1]["unpark"])
    assert again.returncode == 0 and again.stdout == "", again.stdout
    (cpu / "cpufreq/policy2/energy_performance_preference").write_text("default\n")
    assert sh(scripts[1]["unpark"]).stdout == "profile drift: put back epp 1\n"
    assert (root / "var/lib/fleetnap/drift.counts").read_text() == "cstate_disable 1\nepb 1\nepp 9\n"
    assert 'fleetnap_profile_drift_total{knob="epp"} 9\n' in (root / "metrics/fleetnap_profile_drift.prom").read_text()
    # A record line naming a file outside the CPU tree is not followed.
    put(root, "/etc/hostname", "host\n")
    want.write_text(want.read_text() + "/etc/hostname changed\n/sys/devices/system/cpu/../../../etc/hostname x\n")
    assert sh(scripts[1]["unpark"]).stdout == "" and (root / "etc/hostname").read_text() == "host\n"
    # The next apply reports the drift so far; state=absent removes the record, the counts and the metric.
    args = {"sysfs_root": str(root), "cstates": {"max_latency_us": 2}, "sleep": {"manage": False},
            "cpufreq": {"epp": "power", "epb": "balance-power"}, "metrics_dir": str(root / "metrics")}
    res = run_module("fleetnap_profile", args)
    assert not res.failed and res["profile_drift"] == {"cstate_disable": 1, "epb": 1, "epp": 9}, res.get("msg")
    res = run_module("fleetnap_profile", {"sysfs_root": str(root), "state": "absent", "sleep": {"manage": False},
                                          "metrics_dir": str(root / "metrics")})
    assert not res.failed and res.changed, res.get("msg")
    assert not want.exists() and not (root / "var/lib/fleetnap/drift.counts").exists()
    assert not (root / "metrics/fleetnap_profile_drift.prom").exists()


def test_the_python_check_after_a_measured_cycle_does_what_the_sh_one_does(scripts, tmp_path):
    """pm_cycle checks the profile again after each measured cycle with module_utils/fleetnap/
    drift.py (Python runs there anyway); the park's put-back with the sh of unpark.sh.j2. The same
    drift on two copies of one host: the same files written back, the same counts, the same
    metrics file, the same line said."""
    from conftest import PSTATE_DATA, materialize
    from ansible.module_utils.fleetnap import drift
    from ansible.module_utils.fleetnap.sysfs import HostFS
    root = build(scripts[0])
    materialize("bdwup0", root)
    materialize("bdwup0", root, data=PSTATE_DATA)
    res = run_module("fleetnap_profile", {"sysfs_root": str(root), "cstates": {"max_latency_us": 20},
                                          "cpufreq": {"governor": "performance", "max_khz": "50%", "epb": 0,
                                                      "turbo": False, "uncore_max_khz": "min"},
                                          "sleep": {"manage": False}})
    assert not res.failed and res.changed, res.get("msg")
    want = root / "var/lib/fleetnap/profile.want"
    # Lines neither follows: outside the CPU tree, '..', a value that is no name or number (a
    # backslash, a shell word), a line with no value, a file of no knob, a number that is no number.
    put(root, "/etc/passwd", "root:x:0:0\n")
    put(root, "/sys/devices/system/cpu/cpu0/online", "1\n")
    hostile = ["/etc/passwd x", "/sys/devices/system/cpu/cpu0/../../../../etc/passwd x",
               "/sys/devices/system/cpu/cpu0/cpuidle/state1/disable 1;reboot",
               "/sys/devices/system/cpu/cpu0/cpuidle/state1/disable \\x41",
               "/sys/devices/system/cpu/cpu0/cpuidle/state1/disable",
               "/sys/devices/system/cpu/cpu0/online 0", "/sys/devices/system/cpu/cpuX/power/energy_perf_bias 1",
               "/sys/devices/system/cpu/cpufreq/policy0/../policy1/scaling_governor powersave"]
    want.write_text(want.read_text() + "#metrics_dir /metrics\n" + "\n".join(hostile) + "\n")
    (root / "metrics").mkdir()
    cpu = root / "sys/devices/system/cpu"
    for rel, value in (("cpufreq/policy1/scaling_governor", "schedutil"), ("cpufreq/policy2/scaling_max_freq", "3400000"),
                       ("cpu0/power/energy_perf_bias", "6"), ("intel_pstate/no_turbo", "0"),
                       ("intel_uncore_frequency/package_00_die_00/max_freq_khz", "3000000"),
                       ("cpu1/cpuidle/state4/disable", "0")):
        (cpu / rel).write_text(value + "\n")
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(root), str(twin)], check=True)
    proc = sh(scripts[1]["unpark"])
    got = drift.recheck(HostFS(str(twin)))
    assert proc.stdout == drift.said(got) + "\n" and got["stuck"] == {}, (proc.stdout, got)
    assert got["put_back"] == {"cstate_disable": 1, "epb": 1, "frequency": 1, "governor": 1, "turbo": 1, "uncore": 1}
    assert snapshot_tree(root) == snapshot_tree(twin)
    assert (root / "etc/passwd").read_text() == "root:x:0:0\n" and (cpu / "cpu0/online").read_text().strip() != "0"
    assert drift.recheck(HostFS(str(twin))) == {"put_back": {}, "stuck": {}}


def slurm_hook(tmp_path, exec_start=SLURMD_EXEC):
    """The park with gear_member_resume_restart [slurmd], rendered as the role renders it."""
    root = build(tmp_path / "root", mem_sleep="[s2idle] deep")
    with_suspend_stats(root)
    tvars = {"__gear_member_precheck_root": str(root), "__gear_member_precheck_systemd": "252",
             "__gear_member_precheck_init": "systemd", "gear_member_suspend_mode": "deep",
             "__gear_member_suspend_command": "echo SCHEDULED", "__gear_member_kernel_suspend_command": "echo SCHEDULED",
             "gear_member_park_ignores_sleep_policy": True, "__gear_member_park_start_command": HOOK_START,
             "__gear_member_kernel_park_start_command": HOOK_START, "__gear_member_park_suspend_command": HOOK_SUSPEND,
             "gear_member_resume_wait_s": 2, "gear_member_resume_restart": ["slurmd"],
             "gear_member_slurmd_exec_start": exec_start}
    result = run_module("ansible.builtin.debug", {"msg": "{{ lookup('ansible.builtin.template', %s, template_vars=%s) }}"
                                                  % (json.dumps(str(TEMPLATE)), json.dumps(tvars))}, tmp_path=tmp_path)
    assert not result.failed, result
    return root, result["msg"]


def fake_slurmd_systemctl(tmp_path, b_after):
    """A systemctl that logs its arguments and answers 'show -p MainPID' with a process whose
    command line has -b once b_after (set-environment or daemon-reload) is in its log, else one
    without; at a daemon-reload it keeps the slurmd drop-ins it finds."""
    procs = [subprocess.Popen(["/bin/sh", "-c", "sleep 60", "slurmd", "-D", "-s"]),
             subprocess.Popen(["/bin/sh", "-c", "sleep 60", "slurmd", "-D", "-s", "-b"])]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log, kept = tmp_path / "systemctl.log", tmp_path / "drop-ins"
    tool = bindir / "systemctl"
    tool.write_text("""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  "show -p MainPID --value slurmd.service")
    if grep -q '^{b_after}' {log}; then echo {b}; else echo {nob}; fi ;;
  daemon-reload) cat "$FLEETNAP_ROOT"/run/systemd/system/slurmd.service.d/* >> {kept} 2>/dev/null ;;
esac
""".format(log=log, b_after=b_after, b=procs[1].pid, nob=procs[0].pid, kept=kept))
    tool.chmod(0o755)
    return "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin")), log, kept, procs


@pytest.mark.parametrize("way", ["environment", "drop-in"])
def test_the_resume_hook_restarts_slurmd_with_b_and_says_so_only_when_it_runs_with_b(tmp_path, way):
    """slurmd in gear_member_resume_restart: the hook restarts it with SLURMD_OPTIONS=-b in the
    manager's environment (no daemon-reload) and reads the command line of the slurmd that runs;
    where that has no -b (an environment file of the unit set SLURMD_OPTIONS), it restarts it again
    from a runtime drop-in with the configured command line and -b, removed again after. Either
    way the journal line says -b only when the running slurmd has it."""
    root, hook = slurm_hook(tmp_path)
    (root / "run/systemd/system").mkdir(parents=True)      # systemd's runtime unit directory, as on a systemd host
    path_env, log, kept, procs = fake_slurmd_systemctl(tmp_path, "set-environment" if way == "environment" else "daemon-reload")
    try:
        proc = sh(hook, PATH=path_env, FLEETNAP_ROOT=str(root))
    finally:
        for p in procs:
            p.kill()
    assert proc.returncode == 0 and "HOOKED rc=0\n" in proc.stdout, (proc.stdout, proc.stderr)
    calls = [c for c in log.read_text().splitlines() if not c.startswith("show ")]
    env_way = ["set-environment SLURMD_OPTIONS=-b", "restart slurmd.service", "unset-environment SLURMD_OPTIONS"]
    if way == "environment":
        assert calls == env_way and not kept.exists()
    else:
        assert calls == env_way + ["daemon-reload", "restart slurmd.service", "daemon-reload"]
        assert kept.read_text() == "[Service]\nExecStart=\nExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS -b\n"
    assert sorted((root / "run/systemd/system").iterdir()) == []       # the drop-in and its directory removed
    err = (root / "hook.err").read_text()
    assert "fleetnap park: restarted slurmd with -b" in err and "could not" not in err, err


def test_the_resume_hook_says_so_when_slurmd_does_not_run_with_b(tmp_path):
    root, hook = slurm_hook(tmp_path)
    (root / "run/systemd/system").mkdir(parents=True)
    path_env, _log, _kept, procs = fake_slurmd_systemctl(tmp_path, "never")
    try:
        proc = sh(hook, PATH=path_env, FLEETNAP_ROOT=str(root))
    finally:
        for p in procs:
            p.kill()
    assert proc.returncode == 0, proc
    assert "fleetnap park: could not restart slurmd with -b" in (root / "hook.err").read_text()
    assert sorted((root / "run/systemd/system").iterdir()) == []


@pytest.mark.parametrize("bad", ["slurmd -D", "", "/usr/sbin/slurmd -D " + "x" * 1000])
def test_a_slurmd_command_line_that_is_none_is_refused_before_anything(tmp_path, bad):
    root, hook = slurm_hook(tmp_path, exec_start=bad)
    before = snapshot_tree(root)
    proc = sh(hook)
    refused(proc, "gear_member_slurmd_exec_start must be slurmd's command line")
    assert snapshot_tree(root) == before
