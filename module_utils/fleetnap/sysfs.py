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
import os
import stat

from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.fileio import FileWriteError, HostFsError, UnsafeFileError
from ansible.module_utils.fleetnap.parse import ParseError, loads, parse_int

__all__ = ["HostFS", "HostFsError", "FileWriteError", "UnsafeFileError", "BatchWriteError", "SysfsBatch",
           "write_file_atomic", "remove_path", "systemd_running", "kernel_cmdline"]


class BatchWriteError(HostFsError):
    """A batch of writes failed; ``rolled_back`` tells whether the host is as it was."""

    def __init__(self, msg, failed_path=None, rolled_back=True, rollback_errors=None):
        super().__init__(msg)
        self.failed_path = failed_path
        self.rolled_back = rolled_back
        self.rollback_errors = rollback_errors or []


def _text(data, path):
    """Stripped UTF-8 text of bytes read from ``path`` (None stays None); text that is not UTF-8 is a
    UnicodeDecodeError naming the file and the byte in its reason."""
    if data is None:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise UnicodeDecodeError(exc.encoding, exc.object, exc.start, exc.end,
                                 "%s is not UTF-8 text (byte %d)" % (path, exc.start))


class HostFS(object):
    """Reads and writes host files under a root prefix, through the file layer (fileio): no link
    out of the root, no FIFO or device opened, bounded reads, strict text, one number parser and
    one JSON loader."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")

    @property
    def live(self):
        """True when this is the running host itself (root ``/``)."""
        return self.root == "/"

    def path(self, host_path):
        """Host path (``/sys/...``) -> path under the root (not yet resolved: see real())."""
        return os.path.join(self.root, host_path.lstrip("/"))

    def real(self, host_path):
        """The resolved path under the root; UnsafeFileError when a link leads out of it."""
        return fileio.resolve(self.root, self.path(host_path)) if not self.live else self.path(host_path)

    def exists(self, host_path):
        return os.path.exists(self.path(host_path))

    def isdir(self, host_path):
        return os.path.isdir(self.path(host_path))

    def listdir(self, host_path):
        """Sorted names in a directory under the root ([] when it is missing or unreadable); a
        directory reached through a link out of the root raises UnsafeFileError."""
        real = self.real(host_path)
        try:
            return sorted(os.listdir(real))
        except OSError:
            return []

    def read_bytes(self, host_path, limit=fileio.VALUE):
        """The file's bytes (at most limit), or None when it does not exist or cannot be read;
        a file that must not be used (FIFO, device, link out of the root, too large) raises."""
        try:
            return fileio.read_bytes(self.path(host_path), limit, self.root)
        except UnsafeFileError:
            raise
        except (IOError, OSError):
            return None

    def read_many(self, host_dir, names, limit=fileio.VALUE):
        """read() of several files of one directory, opened through one descriptor of it
        (fileio.read_many): ``{name: stripped text, or None when missing or unreadable}``."""
        directory = self.path(host_dir)
        return dict((name, _text(data, os.path.join(directory, name)))
                    for name, data in fileio.read_many(directory, names, limit, self.root).items())

    def read(self, host_path, default=None, limit=fileio.VALUE):
        """Stripped text of a file, or ``default`` when it does not exist or cannot be read.

        Text that is not UTF-8 raises UnicodeDecodeError (every caller's handlers already know it)
        with the file named in its reason, so the module's message says which file; a file that
        must not be used raises UnsafeFileError (an OSError and a ValueError too) naming it."""
        text = _text(self.read_bytes(host_path, limit), self.path(host_path))
        return default if text is None else text

    def read_int(self, host_path, default=None, lo=None, hi=None):
        """A whole number in ASCII digits, or ``default`` when the file is missing or holds no
        number; one beyond any sane value (or out of lo..hi) raises UnsafeFileError naming it."""
        text = self.read(host_path)
        if text is None or not text.lstrip("+-").isascii() or not text.lstrip("+-").isdigit():
            return default
        try:
            return parse_int(text, self.path(host_path), lo, hi)
        except ParseError as exc:
            raise UnsafeFileError(str(exc))

    def read_json(self, host_path, default=None, limit=fileio.RECORD):
        """The JSON document in a file (bounded in size and depth, strict), or ``default`` when it
        is missing or empty; anything wrong raises HostFsError naming the file."""
        data = self.read_bytes(host_path, limit)
        if data is None or not data.strip():
            return default
        try:
            return loads(data, self.path(host_path), limit)
        except ParseError as exc:
            raise UnsafeFileError("%s: remove or repair it" % exc)

    def writable_problem(self, host_path):
        """None if ``host_path`` is a writable attribute/file, else why not (a sentence)."""
        real = self.path(host_path)
        try:
            if not self.live:
                fileio.resolve(self.root, real)
            st = os.stat(real)
        except UnsafeFileError as exc:
            return str(exc)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return "%s does not exist" % real
            return "%s cannot be examined: %s" % (real, exc.strerror)
        if stat.S_ISDIR(st.st_mode):
            return "%s is a directory" % real
        if not stat.S_ISREG(st.st_mode):
            return "%s is %s, not a regular file" % (real, fileio._kind(st.st_mode))
        if not st.st_mode & 0o222:
            return "%s is read-only (mode %o)" % (real, stat.S_IMODE(st.st_mode))
        if not os.access(real, os.W_OK):
            return "%s is not writable by this user" % real
        return None

    def write_raw(self, host_path, value):
        """One write(2) of ``value``, as the kernel expects for sysfs attributes."""
        fileio.write_value(self.path(host_path), value, self.root)


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

    def apply_to(self, changes):
        """check(), then write every queued value as one of ``changes`` (a fileio.Changes of this
        call, whose failure() undoes them with everything else the call changed). A write whose
        earlier value could not be read is recorded with an undo that says so."""
        self.check()
        for host_path, new, old in self.writes:
            if old is None:
                old = self._current(host_path)
            path = self.fs.path(host_path)
            try:
                if old is None:
                    self.fs.write_raw(host_path, new)
                    changes.record(path, lambda new=new: _unknown(new))
                else:
                    changes.value(path, new, old)
            except (IOError, OSError) as exc:
                if isinstance(exc, HostFsError):
                    raise
                raise HostFsError("writing %r to %s failed (%s)" % (new, path, exc.strerror or exc))
        return len(self.writes)

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


def _unknown(new):
    raise HostFsError("left at %r (its earlier value could not be read)" % new)


def write_file_atomic(fs, host_path, content, mode=0o644, module=None):
    """Write a regular file beside its target and rename it into place (fileio.atomic_write:
    exclusive temporary file, fsync, rename, fsync of the directory, nothing out of the root).

    Returns True when the content (or mode) changed; FileWriteError names the path otherwise."""
    return fileio.atomic_write(fs.path(host_path), content, mode, fs.root, module)


def remove_path(fs, host_path):
    """Remove a file or symlink if present (never a directory); True when something was removed."""
    return fileio.remove(fs.path(host_path), fs.root)


def systemd_running(fs):
    """True when this is the live host and systemd is PID 1 (as sd_booted() decides)."""
    return fs.live and os.path.isdir("/run/systemd/system")


def kernel_cmdline(fs):
    return (fs.read("/proc/cmdline") or "").split()
