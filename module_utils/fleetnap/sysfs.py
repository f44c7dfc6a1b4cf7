# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file access under a root prefix, and all-or-nothing batches of sysfs writes.

Every path fleetnap touches is written as on a live host (``/sys/...``, ``/proc/cmdline``,
``/etc/...``) and resolved under ``root``; ``root='/'`` is the live host, any other directory a
captured or prepared tree (pepc-style emulation).

sysfs semantics kept for captured trees: an attribute without any write bit (``0444``) cannot be
written, even by root (the kernel refuses to open it for writing), so the batch treats such files
as read-only before it writes anything.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile


class HostFsError(Exception):
    """Something under the host root is missing, unreadable or not writable."""


class FileWriteError(HostFsError, OSError):
    """A file could not be written; the message names it (an OSError too, for callers that
    handle those)."""


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchWriteError(HostFsError):
    """A batch of writes failed; ``rolled_back`` tells whether the host is as it was."""

    def __init__(self, msg, failed_path=None, rolled_back=True, rollback_errors=None):
        super().__init__(msg)
        self.failed_path = failed_path
        self.rolled_back = rolled_back
        self.rollback_errors = rollback_errors or []


class HostFS(object):
    """Reads and writes host files under a root prefix."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")

    @property
    def live(self):
        """True when this is the running host itself (root ``/``)."""
        return self.root == "/"

    def path(self, host_path):
        """Host path (``/sys/...``) -> real path under the root."""
        return os.path.join(self.root, host_path.lstrip("/"))

    def exists(self, host_path):
        return os.path.exists(self.path(host_path))

    def isdir(self, host_path):
        return os.path.isdir(self.path(host_path))

    def listdir(self, host_path):
        try:
            return sorted(os.listdir(self.path(host_path)))
        except OSError:
            return []

    def read(self, host_path, default=None):
        """Stripped text of a file, or ``default`` when it does not exist or cannot be read.

        Text that is not UTF-8 raises UnicodeDecodeError (every caller's handlers already know it)
        with the file named in its reason, so the module's message says which file."""
        real = self.path(host_path)
        try:
            with open(real, "rb") as fobj:
                data = fobj.read()
        except (IOError, OSError):
            return default
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise UnicodeDecodeError(exc.encoding, exc.object, exc.start, exc.end,
                                     "%s is not UTF-8 text (byte %d)" % (real, exc.start))

    def read_int(self, host_path, default=None):
        text = self.read(host_path)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            return default

    def read_json(self, host_path, default=None):
        text = self.read(host_path)
        if not text:
            return default
        try:
            return json.loads(text)
        except ValueError:
            raise HostFsError("%s is not valid JSON: remove or repair it" % self.path(host_path))

    def writable_problem(self, host_path):
        """None if ``host_path`` is a writable attribute/file, else why not (a sentence)."""
        real = self.path(host_path)
        try:
            st = os.stat(real)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return "%s does not exist" % real
            return "%s cannot be examined: %s" % (real, exc.strerror)
        if stat.S_ISDIR(st.st_mode):
            return "%s is a directory" % real
        if not st.st_mode & 0o222:
            return "%s is read-only (mode %o)" % (real, stat.S_IMODE(st.st_mode))
        if not os.access(real, os.W_OK):
            return "%s is not writable by this user" % real
        return None

    def write_raw(self, host_path, value):
        """One write(2) of ``value``, as the kernel expects for sysfs attributes."""
        real = self.path(host_path)
        data = value if isinstance(value, bytes) else str(value).encode()
        fd = os.open(real, os.O_WRONLY | os.O_TRUNC)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.EIO, "short write (%d of %d bytes)" % (written, len(data)))
        finally:
            os.close(fd)


class SysfsBatch(object):
    """Planned writes to sysfs attributes: checked together, applied in order, rolled back on error.

    ``add(path, new, old)`` queues a write only when the value changes. ``check()`` verifies every
    queued attribute is writable before anything is written; ``apply()`` writes them and, if one
    write fails, writes the old values back to the ones already changed (newest first).
    """

    def __init__(self, fs):
        self.fs = fs
        self.writes = []

    def add(self, host_path, new, old):
        new = str(new)
        if old is not None and str(old) == new:
            return False
        self.writes.append((host_path, new, None if old is None else str(old)))
        return True

    def __len__(self):
        return len(self.writes)

    def paths(self):
        return [w[0] for w in self.writes]

    def check(self):
        problems = []
        for host_path, _new, _old in self.writes:
            problem = self.fs.writable_problem(host_path)
            if problem:
                problems.append(problem)
        if problems:
            more = "" if len(problems) <= 5 else " (and %d more)" % (len(problems) - 5)
            raise HostFsError("cannot write %d sysfs attribute(s), nothing was changed: %s%s"
                              % (len(problems), "; ".join(problems[:5]), more))

    def apply(self):
        self.check()
        done = []
        for host_path, new, old in self.writes:
            if old is None:
                old = self._current(host_path)
            try:
                self.fs.write_raw(host_path, new)
            except (IOError, OSError) as exc:
                rollback_errors = self._rollback(done)
                if rollback_errors:
                    raise BatchWriteError(
                        "writing %r to %s failed (%s); of the %d write(s) before it, %d could not be undone, "
                        "the host is NOT as it was: %s"
                        % (new, self.fs.path(host_path), exc.strerror or exc, len(done), len(rollback_errors),
                           "; ".join(rollback_errors)),
                        failed_path=host_path, rolled_back=False, rollback_errors=rollback_errors)
                raise BatchWriteError(
                    "writing %r to %s failed (%s); the %d write(s) before it were rolled back, "
                    "the host is as it was" % (new, self.fs.path(host_path), exc.strerror or exc, len(done)),
                    failed_path=host_path, rolled_back=True)
            done.append((host_path, new, old))
        return len(done)

    def _current(self, host_path):
        """The attribute's value now (for a write queued without its old value), or None."""
        try:
            return self.fs.read(host_path)
        except (HostFsError, IOError, OSError, ValueError):
            return None

    def _rollback(self, done):
        """Write the old values back, newest first; the errors name every write that stays."""
        errors = []
        for host_path, new, old in reversed(done):
            if old is None:
                errors.append("%s: left at %r (its earlier value could not be read)" % (self.fs.path(host_path), new))
                continue
            try:
                self.fs.write_raw(host_path, old)
            except (IOError, OSError) as exc:
                errors.append("%s: %s" % (self.fs.path(host_path), exc.strerror or exc))
        return errors


def write_file_atomic(fs, host_path, content, mode=0o644, module=None):
    """Write a regular file beside its target and rename it into place.

    Returns True when the content (or mode) changed. Uses ``module.atomic_move`` when a module is
    given (SELinux contexts, ownership), else ``os.rename``.
    """
    real = fs.path(host_path)
    data = content.encode() if isinstance(content, str) else content
    try:
        with open(real, "rb") as fobj:
            if fobj.read() == data and stat.S_IMODE(os.stat(real).st_mode) == mode:
                return False
    except (IOError, OSError):
        pass
    directory = os.path.dirname(real)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".fleetnap-", dir=directory)
    except (IOError, OSError) as exc:
        raise FileWriteError("cannot write %s: %s" % (real, exc.strerror or exc))
    try:
        # Synced before and after the rename: a host suspended or powered off right after this
        # keeps either the old file or the new one, never an empty one.
        with os.fdopen(fd, "wb") as fobj:
            fobj.write(data)
            fobj.flush()
            os.fsync(fobj.fileno())
        os.chmod(tmp, mode)
        if module is not None:
            module.atomic_move(tmp, real)
            os.chmod(real, mode)
        else:
            os.rename(tmp, real)
        _fsync_dir(directory)
    except (IOError, OSError) as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise FileWriteError("cannot write %s: %s" % (real, exc.strerror or exc))
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def remove_path(fs, host_path):
    """Remove a file or symlink if present; True when something was removed."""
    real = fs.path(host_path)
    if os.path.islink(real) or os.path.isfile(real):
        os.unlink(real)
        return True
    if os.path.isdir(real):
        shutil.rmtree(real)
        return True
    return False


def systemd_running(fs):
    """True when this is the live host and systemd is PID 1 (as sd_booted() decides)."""
    return fs.live and os.path.isdir("/run/systemd/system")


def kernel_cmdline(fs):
    return (fs.read("/proc/cmdline") or "").split()
