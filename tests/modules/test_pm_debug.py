"""pm_debug on a prepared /sys/power tree and on this machine's kernel (which lacks the knobs).

The lab tests run it on guests with Debian's kernel, where the files are real.
"""

from pathlib import Path

from conftest import snapshot_tree


def power_tree(tmp_path, print_times="0", debug_messages="0"):
    power = tmp_path / "root/sys/power"
    power.mkdir(parents=True)
    (power / "state").write_text("freeze mem disk\n")
    (power / "pm_print_times").write_text(print_times + "\n")
    (power / "pm_debug_messages").write_text(debug_messages + "\n")
    return tmp_path / "root"


def test_switch_and_restore(tmp_path, module_runner):
    root = power_tree(tmp_path)
    res = module_runner("pm_debug", {"pm_print_times": True, "sysfs_root": str(root)}, check=True, diff=True)
    assert res.changed and res["diff"]["after"]["pm_print_times"] is True
    assert (root / "sys/power/pm_print_times").read_text().strip() == "0"
    res = module_runner("pm_debug", {"pm_print_times": True, "sysfs_root": str(root)})
    assert res.changed and res["before"] == {"pm_print_times": False, "pm_debug_messages": False}
    assert (root / "sys/power/pm_print_times").read_text().strip() == "1"
    again = module_runner("pm_debug", {"pm_print_times": True, "sysfs_root": str(root)})
    assert not again.changed
    res = module_runner("pm_debug", {"pm_print_times": res["before"]["pm_print_times"], "sysfs_root": str(root)})
    assert res.changed and (root / "sys/power/pm_print_times").read_text().strip() == "0"


def test_read_only_knob_changes_nothing(tmp_path, module_runner):
    root = power_tree(tmp_path)
    (root / "sys/power/pm_debug_messages").chmod(0o444)
    before = snapshot_tree(root)
    res = module_runner("pm_debug", {"pm_print_times": True, "pm_debug_messages": True, "sysfs_root": str(root)})
    assert res.failed and "read-only" in res["msg"]
    assert snapshot_tree(root) == before


def test_needs_one_knob(tmp_path, module_runner):
    res = module_runner("pm_debug", {"sysfs_root": str(power_tree(tmp_path))})
    assert res.failed and "one of the following is required" in res["msg"]


def test_live_kernel_knob_read_or_named_missing(module_runner):
    """On this machine's kernel, both ways: with CONFIG_PM_SLEEP_DEBUG (every Debian kernel) the
    knob is read and a change is planned in check mode, without writing; without it, the module
    says which knob and which kernel option are missing."""
    knob = Path("/sys/power/pm_print_times")
    if knob.exists():
        now = knob.read_text().strip() == "1"
        res = module_runner("pm_debug", {"pm_print_times": not now}, check=True, diff=True)
        assert not res.failed, res.get("msg")
        assert res.changed and res["before"]["pm_print_times"] is now
        assert res["diff"]["after"]["pm_print_times"] is (not now)
        assert (knob.read_text().strip() == "1") is now          # check mode wrote nothing
        return
    res = module_runner("pm_debug", {"pm_print_times": True})
    assert res.failed and "CONFIG_PM_SLEEP_DEBUG" in res["msg"] and "/sys/power/pm_print_times" in res["msg"]
