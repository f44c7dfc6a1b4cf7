"""write_file_atomic: synced temp file renamed into place; every failure names the file, leaves
no temporary file and keeps the old content."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible.module_utils.fleetnap.sysfs import FileWriteError, HostFS, HostFsError, write_file_atomic


def test_writes_replaces_and_reports_no_change(tmp_path):
    fs = HostFS(str(tmp_path))
    assert write_file_atomic(fs, "/etc/fleetnap/x.json", "{}\n", 0o600)
    assert (tmp_path / "etc/fleetnap/x.json").read_text() == "{}\n"
    assert oct((tmp_path / "etc/fleetnap/x.json").stat().st_mode & 0o777) == "0o600"
    assert not write_file_atomic(fs, "/etc/fleetnap/x.json", "{}\n", 0o600)
    assert write_file_atomic(fs, "/etc/fleetnap/x.json", '{"a": 1}\n', 0o600)
    assert os.listdir(tmp_path / "etc/fleetnap") == ["x.json"]


def test_a_file_where_a_directory_should_be(tmp_path):
    (tmp_path / "etc").write_text("not a directory\n")
    with pytest.raises(FileWriteError, match="cannot write %s/etc/fleetnap/x.json" % tmp_path) as err:
        write_file_atomic(HostFS(str(tmp_path)), "/etc/fleetnap/x.json", "{}\n")
    assert isinstance(err.value, OSError) and isinstance(err.value, HostFsError)


def test_a_directory_where_the_file_should_be(tmp_path):
    (tmp_path / "etc/x.json").mkdir(parents=True)
    with pytest.raises(FileWriteError, match="cannot write {0}/etc/x.json: {0}/etc/x.json is a directory; nothing was written".format(tmp_path)):
        write_file_atomic(HostFS(str(tmp_path)), "/etc/x.json", "{}\n")
    assert os.listdir(tmp_path / "etc") == ["x.json"]        # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_names_the_file_and_keeps_the_old_content(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        fs = HostFS(str(disk))
        write_file_atomic(fs, "/fact.json", "old\n")
        with pytest.raises(FileWriteError, match="cannot write %s/fact.json: No space left on device" % disk):
            write_file_atomic(fs, "/fact.json", "x" * (1 << 20))
        assert (disk / "fact.json").read_text() == "old\n"
        assert os.listdir(disk) == ["fact.json"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)
