"""library/pm_timeline.py run through Ansible on localhost (target Python /usr/bin/python3)."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from conftest import DATA

LOGS = DATA / "dmesg"
MEM = LOGS / "pmgraph-skynet-mem-3.15.txt"
FREEZE = LOGS / "pmgraph-skynet-freeze-3.15.txt"
QEMU = LOGS / "qemu-debian-6.1-s3-initramfs.txt"


def test_saved_log_contract(module_runner):
    r = module_runner("pm_timeline", {"src": str(MEM), "top": 3})
    assert not r.failed, r
    assert r.changed is False
    assert r["source"] == str(MEM)
    assert r["suspend_ms"] == pytest.approx(1777.196, rel=0.01)
    assert r["resume_ms"] == pytest.approx(298.973, rel=0.01)
    assert r["mode"] == "mem" and r["cycle_count"] == 1
    assert sorted(r["phases"]) == sorted(["suspend_prepare", "suspend", "suspend_late", "suspend_noirq",
                                 "suspend_machine", "resume_machine", "resume_noirq",
                                 "resume_early", "resume", "resume_complete"])
    assert r["cpus_ms"] == pytest.approx(94.678, abs=0.001)
    assert r["cpus_offline_ms"] == pytest.approx(727.133, abs=0.001)
    assert r["noirq_ms"] == pytest.approx(15.657, abs=0.001)
    assert r["devices_ms"] == pytest.approx(181.776, abs=0.001)
    assert len(r["devices"]) == 278
    dev = r["devices"][0]
    assert set(dev) >= {"name", "phase", "start_ms", "duration_ms", "on_critical_path", "parent",
                        "pid", "async", "rc", "driver"}
    assert [s["name"] for s in r["slowest"]] == ["0:0:0:0", "0000:00:1b.0", "0000:02:00.0"]
    crit = [c for c in r["critical_path"] if c["duration_ms"] > 100]
    assert ("resume", "0000:00:1b.0") in [(c["phase"], c["name"]) for c in crit]
    recs = r["recommendations"]
    assert recs[0]["device"] == "0:0:0:0" and recs[0]["applied"] is False
    assert "sound" in [x["category"] for x in recs]
    assert any("failed" in w or "returned -13" in w for w in r["warnings_found"])
    assert "html_files" not in r


def test_current_format_and_without_devices(module_runner):
    r = module_runner("pm_timeline", {"src": str(QEMU), "include_devices": False})
    assert not r.failed, r
    assert "devices" not in r
    assert r["device_count"] == 75
    assert r["suspend_ms"] == pytest.approx(23.304, abs=0.001)
    assert r["resume_ms"] == pytest.approx(42.681, abs=0.001)


def test_html_written_idempotent_check_and_diff(module_runner, tmp_path):
    dest = tmp_path / "out" / "timeline.html"
    dest.parent.mkdir()
    args = {"src": str(FREEZE), "html_dest": str(dest), "title": "skynet"}
    r = module_runner("pm_timeline", args, check=True, diff=True)
    assert not r.failed, r
    assert r.changed and not dest.exists()
    assert r["diff"]["before"] == {str(dest): "absent"}
    r = module_runner("pm_timeline", args)
    assert r.changed and dest.exists()
    page = dest.read_bytes()
    assert b"<svg" in page and b"skynet" in page and b"<script" not in page
    assert r["html_files"] == [str(dest)]
    assert list(tmp_path.joinpath("out").iterdir()) == [dest]   # no temp file left
    r = module_runner("pm_timeline", args, diff=True)
    assert not r.changed
    sha = hashlib.sha1(page).hexdigest()
    assert r["diff"] == {"before": {str(dest): sha}, "after": {str(dest): sha}}
    r = module_runner("pm_timeline", args, check=True)
    assert not r.changed


def test_cycle_all_writes_one_page_per_cycle(module_runner, tmp_path):
    log = tmp_path / "two.txt"
    log.write_bytes(MEM.read_bytes() + QEMU.read_bytes().replace(b"[    2.", b"[  602."))
    dest = tmp_path / "t.html"
    r = module_runner("pm_timeline", {"src": str(log), "cycle": "all", "html_dest": str(dest),
                                      "include_devices": False})
    assert not r.failed, r
    assert r["cycle_count"] == 2 and len(r["cycles"]) == 2
    assert r["cycles"][0]["suspend_ms"] == pytest.approx(1777.196, abs=0.001)
    assert r["suspend_ms"] == pytest.approx(23.304, abs=0.001)   # top level: the last cycle
    assert r["html_files"] == [str(tmp_path / "t-cycle0.html"), str(tmp_path / "t-cycle1.html")]
    assert all((tmp_path / n).exists() for n in ("t-cycle0.html", "t-cycle1.html"))
    r = module_runner("pm_timeline", {"src": str(log), "since": 600.0})
    assert r["cycle_count"] == 1 and r["mode"] == "mem"


def test_truncated_log_fails_clearly_and_writes_nothing(module_runner, tmp_path):
    log = tmp_path / "cut.txt"
    log.write_text("\n".join(MEM.read_text().splitlines()[:400]) + "\n")
    dest = tmp_path / "t.html"
    r = module_runner("pm_timeline", {"src": str(log), "html_dest": str(dest)})
    assert r.failed
    assert r["msg"].startswith("%s: line 400: the log ends in the resume_noirq phase" % log)
    assert "truncated" in r["msg"]
    assert not dest.exists()


def test_log_without_suspend_fails(module_runner, tmp_path):
    log = tmp_path / "boot.txt"
    log.write_text("[    0.000000] Linux version 6.1.0-13-amd64\n"
                   "[    1.000000] EXT4-fs (vda): mounted filesystem\n")
    r = module_runner("pm_timeline", {"src": str(log)})
    assert r.failed and "no suspend/resume cycle" in r["msg"] and "pm_print_times" in r["msg"]


def test_bad_arguments(module_runner, tmp_path):
    r = module_runner("pm_timeline", {"src": str(tmp_path / "nope.txt")})
    assert r.failed and str(tmp_path / "nope.txt") in r["msg"] and "does not exist" in r["msg"]
    r = module_runner("pm_timeline", {"src": str(MEM), "html_dest": str(tmp_path / "no" / "x.html")})
    assert r.failed and "does not exist" in r["msg"] and str(tmp_path / "no") in r["msg"]
    assert not (tmp_path / "no").exists()
    r = module_runner("pm_timeline", {"src": str(MEM), "html_dest": str(tmp_path)})
    assert r.failed and "is a directory" in r["msg"]
    r = module_runner("pm_timeline", {"src": str(MEM), "top": -1})
    assert r.failed and "top" in r["msg"]
    r = module_runner("pm_timeline", {"src": str(MEM), "cycle": "first"})
    assert r.failed and "cycle" in r["msg"]


@pytest.mark.skipif(not shutil.which("dmesg"), reason="util-linux dmesg not installed")
def test_live_ring_buffer(module_runner):
    """This machine's kernel cannot suspend: the live buffer is read and has no cycle."""
    r = module_runner("pm_timeline", {"cycle": "last"})
    assert r.failed, r
    assert r["msg"].startswith("dmesg: ")
    assert "no suspend/resume cycle" in r["msg"]
