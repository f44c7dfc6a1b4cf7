"""sleep_policy on prepared /sys/power trees and on this machine's kernel (no suspend support)."""

import os
from pathlib import Path

import pytest

from conftest import snapshot_tree

TARGETS = ["hibernate.target", "hybrid-sleep.target", "sleep.target", "suspend-then-hibernate.target",
           "suspend.target"]


def power_tree(tmp_path, states="freeze mem disk", mem_sleep="s2idle [deep]"):
    power = tmp_path / "root/sys/power"
    power.mkdir(parents=True)
    (power / "state").write_text(states + "\n")
    if mem_sleep is not None:
        (power / "mem_sleep").write_text(mem_sleep + "\n")
    return tmp_path / "root"


def run(module_runner, root, **args):
    args["sysfs_root"] = str(root)
    diff = args.pop("_diff", False)
    check = args.pop("_check", False)
    return module_runner("sleep_policy", args, diff=diff, check=check)


def test_none_masks_targets_and_absent_restores(tmp_path, module_runner):
    root = power_tree(tmp_path)
    before = snapshot_tree(root)
    res = run(module_runner, root, allow="none", _check=True, _diff=True)
    assert res.changed and res["diff"]["after"]["masked_targets"] == TARGETS
    assert snapshot_tree(root) == before and not (root / "etc").exists()
    res = run(module_runner, root, allow="none")
    assert res.changed and res["masked_targets"] == TARGETS
    for t in TARGETS:
        assert os.readlink(root / "etc/systemd/system" / t) == "/dev/null"
    assert "AllowSuspend=no" in (root / "etc/systemd/sleep.conf.d/fleetnap.conf").read_text()
    assert not run(module_runner, root, allow="none").changed
    res = run(module_runner, root, state="absent")
    assert res.changed
    assert not any((root / "etc/systemd/system" / t).is_symlink() for t in TARGETS)
    assert not (root / "etc/systemd/sleep.conf.d/fleetnap.conf").exists()
    assert not (root / "var/lib/fleetnap/sleep_policy.orig.json").exists()
    assert snapshot_tree(root / "sys") == snapshot_tree(power_tree(tmp_path / "fresh") / "sys")


def test_s2idle_then_deep(tmp_path, module_runner):
    root = power_tree(tmp_path)
    res = run(module_runner, root, allow="s2idle")
    assert res.changed and res["mem_sleep"] == "s2idle"
    assert (root / "sys/power/mem_sleep").read_text().strip() == "s2idle"
    assert "SuspendState=freeze" in (root / "etc/systemd/sleep.conf.d/fleetnap.conf").read_text()
    assert not run(module_runner, root, allow="s2idle").changed


def test_someone_elses_mask_is_kept(tmp_path, module_runner):
    root = power_tree(tmp_path)
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "hibernate.target").symlink_to("/dev/null")
    run(module_runner, root, allow="none")
    res = run(module_runner, root, allow="deep")
    assert res["masked_targets"] == ["hibernate.target"]
    assert (units / "hibernate.target").is_symlink() and not (units / "suspend.target").exists()


@pytest.mark.parametrize("states,mem_sleep,allow,match", [
    ("freeze", "s2idle", "deep", "does not offer S3"),
    ("", None, "s2idle", "does not offer suspend-to-idle"),
    ("freeze mem", "[s2idle]", "mem", "does not offer S3"),
])
def test_unavailable_state_fails_and_changes_nothing(tmp_path, module_runner, states, mem_sleep, allow, match):
    root = power_tree(tmp_path, states, mem_sleep)
    before = snapshot_tree(root)
    res = run(module_runner, root, allow=allow)
    assert res.failed and match in res["msg"]
    assert snapshot_tree(root) == before and not (root / "etc").exists()


def test_read_only_mem_sleep(tmp_path, module_runner):
    root = power_tree(tmp_path)
    (root / "sys/power/mem_sleep").chmod(0o444)
    res = run(module_runner, root, allow="s2idle")
    assert res.failed and "read-only" in res["msg"] and not (root / "etc").exists()


def test_live_kernel_without_suspend(module_runner):
    """This machine's kernel offers no sleep state: asking for S3 fails clearly."""
    if "mem" in Path("/sys/power/state").read_text().split():
        pytest.skip("this kernel offers S3")
    res = module_runner("sleep_policy", {"allow": "deep"})
    assert res.failed and "does not offer S3" in res["msg"] and "/sys/power/state" in res["msg"]


def prom_samples(text):
    """{metric name: {label text: value}} from an exposition file, and every HELP/TYPE pair seen."""
    import re
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#") or not line:
            continue
        m = re.match(r"^(fleetnap_[a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        assert m, "bad exposition line %r" % line
        out.setdefault(m.group(1), {})[m.group(2) or ""] = float(m.group(3))
    assert set(out) <= typed, "a metric without a TYPE line"
    return out


def kernel_shows(root, options=("s2idle", "deep")):
    """Make the prepared mem_sleep look as the kernel shows it after a write: every option, the choice bracketed."""
    f = root / "sys/power/mem_sleep"
    chosen = f.read_text().strip().strip("[]")
    f.write_text(" ".join("[%s]" % o if o == chosen else o for o in options) + "\n")


def test_metrics_follow_the_policy(tmp_path, module_runner):
    root = power_tree(tmp_path)
    metrics = tmp_path / "textfile"          # created by the module
    prom = metrics / "fleetnap_sleep_policy.prom"
    res = run(module_runner, root, allow="deep", metrics_dir=str(metrics), _check=True)
    assert res.changed and not metrics.exists()
    res = run(module_runner, root, allow="deep", metrics_dir=str(metrics))
    assert res.changed and res["metrics_path"] == str(prom)
    got = prom_samples(prom.read_text())
    assert got["fleetnap_sleep_state_offered"] == {'state="deep"': 1, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_state_allowed"] == {'state="deep"': 1, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_mem_sleep_mode"] == {'mode="deep"': 1, 'mode="s2idle"': 0}
    assert got["fleetnap_sleep_target_masked"] == {'target="%s"' % t: 0 for t in TARGETS}
    assert "# HELP fleetnap_sleep_state_allowed " in prom.read_text()
    assert not list(metrics.glob(".fleetnap-*")), "temporary file left beside the metrics"
    assert not run(module_runner, root, allow="deep", metrics_dir=str(metrics)).changed

    # s2idle: mem_sleep switches, S3 is no longer allowed.
    res = run(module_runner, root, allow="s2idle", metrics_dir=str(metrics))
    kernel_shows(root)
    got = prom_samples(prom.read_text())
    assert got["fleetnap_sleep_state_allowed"] == {'state="deep"': 0, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_mem_sleep_mode"] == {'mode="deep"': 0, 'mode="s2idle"': 1}

    # none: every target masked, nothing allowed; the kernel still offers both.
    run(module_runner, root, allow="none", metrics_dir=str(metrics))
    got = prom_samples(prom.read_text())
    assert got["fleetnap_sleep_mem_sleep_mode"] == {'mode="deep"': 0, 'mode="s2idle"': 1}
    assert got["fleetnap_sleep_state_allowed"] == {'state="deep"': 0, 'state="s2idle"': 0}
    assert got["fleetnap_sleep_state_offered"] == {'state="deep"': 1, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_target_masked"] == {'target="%s"' % t: 1 for t in TARGETS}

    # Only the metrics file differs (someone deleted it): that alone is a change, and it comes back.
    prom.unlink()
    res = run(module_runner, root, allow="none", metrics_dir=str(metrics))
    assert res.changed and prom.exists()

    # absent restores the host and removes the file (check mode first: nothing removed).
    assert run(module_runner, root, state="absent", metrics_dir=str(metrics), _check=True).changed
    assert prom.exists()
    res = run(module_runner, root, state="absent", metrics_dir=str(metrics))
    assert res.changed and not prom.exists() and metrics.is_dir()
    assert not run(module_runner, root, state="absent", metrics_dir=str(metrics)).changed


def test_metrics_s2idle_only_kernel(tmp_path, module_runner):
    """A kernel with suspend-to-idle only: deep is neither offered nor allowed, whatever the policy."""
    root = power_tree(tmp_path, states="freeze", mem_sleep="[s2idle]")
    metrics = tmp_path / "textfile"
    run(module_runner, root, allow="s2idle", metrics_dir=str(metrics))
    got = prom_samples((metrics / "fleetnap_sleep_policy.prom").read_text())
    assert got["fleetnap_sleep_state_offered"] == {'state="deep"': 0, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_state_allowed"] == {'state="deep"': 0, 'state="s2idle"': 1}
    assert got["fleetnap_sleep_mem_sleep_mode"] == {'mode="s2idle"': 1}


@pytest.mark.parametrize("bad,match", [
    ("relative/dir", "must be an absolute path"),
    ("FILE", "exists and is not a directory"),
])
def test_bad_metrics_dir_fails_and_changes_nothing(tmp_path, module_runner, bad, match):
    root = power_tree(tmp_path)
    if bad == "FILE":
        bad = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("not a directory\n")
    before = snapshot_tree(tmp_path)
    res = run(module_runner, root, allow="none", metrics_dir=bad)
    assert res.failed and match in res["msg"] and bad in res["msg"]
    assert snapshot_tree(tmp_path) == before and not (root / "etc").exists()


def test_failure_after_the_first_write_undoes_every_change(tmp_path, module_runner):
    """A fault after the drop-in is written (the unit directory is a file, so no mask can be
    made): the drop-in, mem_sleep and the originals record are undone, and the message says so."""
    root = power_tree(tmp_path, mem_sleep="s2idle [deep]")
    (root / "etc/systemd").mkdir(parents=True)
    (root / "etc/systemd/system").write_text("in the way\n")
    before = snapshot_tree(root)
    res = run(module_runner, root, allow="none")
    assert res.failed and "applying the sleep policy failed" in res["msg"], res.get("msg")
    # two changes: the originals record and the drop-in (allow=none leaves mem_sleep as it is)
    assert "this call's 2 change(s) were undone, the host is as it was" in res["msg"], res["msg"]
    assert "NOT" not in res["msg"]
    assert snapshot_tree(root) == before


def test_failure_with_an_old_drop_in_puts_it_back(tmp_path, module_runner):
    """The drop-in that was there before the call (an earlier policy) comes back byte for byte."""
    root = power_tree(tmp_path, mem_sleep="[s2idle] deep")
    assert not run(module_runner, root, allow="s2idle", mask_targets=False).failed
    (root / "etc/systemd/system").write_text("in the way\n")
    before = snapshot_tree(root)
    res = run(module_runner, root, allow="none")
    # one change, the drop-in: the originals record was there before and stays
    assert res.failed and "this call's 1 change(s) were undone, the host is as it was" in res["msg"], res["msg"]
    assert snapshot_tree(root) == before
