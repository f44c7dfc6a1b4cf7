"""SysfsBatch: a failed write rolls the earlier ones back, and the message is true about it."""

from __future__ import annotations

import pytest

from ansible.module_utils.fleetnap.sysfs import BatchWriteError, HostFS, SysfsBatch


class FailingFS(HostFS):
    """A HostFS whose writes to the paths in ``fail`` raise (an error path: a mock is allowed)."""

    def __init__(self, root, fail=(), unreadable=()):
        HostFS.__init__(self, root)
        self.fail, self.unreadable = set(fail), set(unreadable)

    def write_raw(self, host_path, value):
        if host_path in self.fail:
            raise OSError(16, "Device or resource busy")
        return HostFS.write_raw(self, host_path, value)

    def read(self, host_path, default=None):
        if host_path in self.unreadable:
            return default
        return HostFS.read(self, host_path, default)


def tree(tmp_path, **files):
    for name, value in files.items():
        (tmp_path / name).write_text(value + "\n")
    return tmp_path


def test_earlier_writes_rolled_back_and_said_so(tmp_path):
    root = tree(tmp_path, a="0", b="0", c="0")
    fs = FailingFS(str(root), fail={"/c"})
    batch = SysfsBatch(fs)
    for name in "abc":
        batch.add("/" + name, "1", "0")
    with pytest.raises(BatchWriteError, match=r"the 2 write\(s\) before it were rolled back, the host is as it was") as err:
        batch.apply()
    assert err.value.rolled_back is True and err.value.failed_path == "/c"
    assert [(root / n).read_text().strip() for n in "abc"] == ["0", "0", "0"]


def test_a_write_queued_without_its_old_value_is_read_before_it_is_written(tmp_path):
    root = tree(tmp_path, a="7", c="0")
    fs = FailingFS(str(root), fail={"/c"})
    batch = SysfsBatch(fs)
    batch.add("/a", "1", None)
    batch.add("/c", "1", "0")
    with pytest.raises(BatchWriteError, match="the host is as it was"):
        batch.apply()
    assert (root / "a").read_text().strip() == "7"


def test_a_write_whose_old_value_is_unknown_is_not_called_undone(tmp_path):
    """Before: skipped on rollback while the message said 'the host is as it was'."""
    root = tree(tmp_path, a="7", c="0")
    fs = FailingFS(str(root), fail={"/c"}, unreadable={"/a"})
    batch = SysfsBatch(fs)
    batch.add("/a", "1", None)
    batch.add("/c", "1", "0")
    with pytest.raises(BatchWriteError) as err:
        batch.apply()
    msg = str(err.value)
    assert err.value.rolled_back is False
    assert "the host is NOT as it was" in msg and "as it was" not in msg.replace("NOT as it was", ""), msg
    assert "%s/a: left at '1' (its earlier value could not be read)" % root in msg
    assert (root / "a").read_text().strip() == "1"


def test_a_rollback_write_that_fails_is_named(tmp_path):
    root = tree(tmp_path, a="0", b="0")
    fs = FailingFS(str(root), fail={"/b"})
    batch = SysfsBatch(fs)
    batch.add("/a", "1", "0")
    batch.add("/b", "1", "0")
    fs_write = fs.write_raw

    def write_once_then_fail(host_path, value):
        if host_path == "/a" and value == "0":
            raise OSError(13, "Permission denied")
        return fs_write(host_path, value)
    fs.write_raw = write_once_then_fail
    with pytest.raises(BatchWriteError) as err:
        batch.apply()
    assert "1 could not be undone, the host is NOT as it was: %s/a: Permission denied" % root in str(err.value)
