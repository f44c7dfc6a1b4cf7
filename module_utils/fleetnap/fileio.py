# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one file layer: every host file fleetnap reads or writes goes through these functions.

Rules, for every path (a sysfs knob, a record, a log, a metrics file, a unit):

- **Contained.** A path is resolved under a root (``/`` on a live host, a captured tree or a state
  directory otherwise); a link that stays inside the root is followed (sysfs is made of them), one
  that leads out of it is refused, before anything is opened. After an open, the descriptor's own
  path (``/proc/self/fd``) is checked again, so a link swapped in between is caught too.
- **Regular files only.** A FIFO, socket or device (or a link to one, such as ``/dev/zero``) is
  refused before it is opened: opening a FIFO blocks for ever, a device may act on open. Opens are
  non-blocking, and the file opened must be the one examined (same device and inode).
- **Bounded.** Every read has a size bound per kind of file (``VALUE`` for a sysfs or proc value,
  ``RECORD`` for a JSON record or state file, ``LOG`` for a kernel log) and a time bound.
- **Strict text.** UTF-8 or a clear error naming the file and the byte.
- **Writes** of files fleetnap owns: a temporary file created exclusively, with an unpredictable
  name, in the target's directory (never through a link), written, fsynced, renamed into place and
  the directory fsynced. An immutable or append-only target or directory is refused before
  anything is written; any failure (a full filesystem included) removes the temporary file and
  raises FileWriteError naming the path.
- **Undo.** ``Changes`` records every change one module call makes (sysfs values, files written or
  removed, links) with how to put it back; ``undo()`` puts back every one, newest first, and says
  which paths could not be put back.

Errors: ``UnsafeFileError`` (a file that is there but must not be used: a FIFO, a link out of the
root, too large, not UTF-8) is a HostFsError, an OSError and a ValueError at once, so every
module's existing handlers report it with its message. Standard library only (runs on targets).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import tempfile
import time

# Size bounds per kind of file (bytes).
VALUE = 64 * 1024                 # a sysfs or proc attribute, a unit, a drop-in, a greeting
RECORD = 16 * 1024 * 1024         # a JSON record, a state or facts file, a metrics file, a CSV
LOG = 64 * 1024 * 1024            # a kernel log, a power or shift history
READ_DEADLINE_S = 30.0            # a read that takes longer is abandoned (a stuck network filesystem)

# chattr flags (linux/fs.h): FS_IMMUTABLE_FL, FS_APPEND_FL; FS_IOC_GETFLAGS.
_IMMUTABLE = 0x00000010
_APPEND = 0x00000020
_FS_IOC_GETFLAGS = 0x80086601 if struct.calcsize("P") == 8 else 0x80046601


class HostFsError(Exception):
    """Something under the host root is missing, unreadable or not writable."""


class UnsafeFileError(HostFsError, OSError, ValueError):
    """A file that is there but must not be used as it is; the message names it and says why."""


class ReplacedError(UnsafeFileError):
    """The file was renamed over between its check and its open (an atomic write by another
    process): reading it again reads the new file whole."""


class FileWriteError(HostFsError, OSError):
    """A file could not be written; the message names it (an OSError too, for callers that
    handle those)."""


def _kind(mode):
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _size_text(n):
    return "%d MiB" % (n // (1024 * 1024)) if n >= 1024 * 1024 else "%d KiB" % (n // 1024) if n >= 1024 else "%d bytes" % n


# Resolved directories, each with the (device, inode) it had: a sysfs tree reads thousands of
# files in a few hundred directories, and os.path.realpath walks every component of every path
# (one lstat each). A cached directory is used only while the path still leads to the same
# directory (a directory has one inode and no hard links, so the same inode is the same place);
# the leaf is examined on every call, and a read still checks the opened descriptor's own path.
_RESOLVED = {}


def _real_dir(directory):
    try:
        st = os.stat(directory)
    except OSError:
        return os.path.realpath(directory)
    key = (st.st_dev, st.st_ino)
    hit = _RESOLVED.get(directory)
    if hit is not None and hit[1] == key:
        return hit[0]
    real = os.path.realpath(directory)
    if len(_RESOLVED) > 65536:
        _RESOLVED.clear()
    _RESOLVED[directory] = (real, key)
    return real


def _realpath(path):
    """os.path.realpath(path), the directory part from the cache above."""
    directory, leaf = os.path.split(path)
    if not directory or leaf in ("", ".", "..") or not os.path.isabs(path):
        return os.path.realpath(path)
    real_dir = _real_dir(directory)
    candidate = os.path.join(real_dir, leaf)
    try:
        if not stat.S_ISLNK(os.lstat(candidate).st_mode):
            return candidate
    except OSError:
        return candidate
    return os.path.realpath(candidate)


def real_root(root):
    return _realpath(root or "/") if (root or "/") != "/" else "/"


def inside(root_real, real):
    """True when the resolved path ``real`` is ``root_real`` or under it."""
    return root_real == "/" or real == root_real or real.startswith(root_real.rstrip("/") + "/")


def resolve(root, path, shown=None):
    """The resolved real path of ``path`` (already joined under ``root``), refusing one that
    leaves the root through a link or '..'."""
    root_real = real_root(root)
    real = _realpath(path)
    if not inside(root_real, real):
        raise UnsafeFileError("%s leaves the root %s (it resolves to %s): a link out of the root is not followed"
                              % (shown or path, root_real, real))
    return real


def _fd_inside(fd, root_real, shown):
    if root_real == "/":
        return
    try:
        where = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return          # no /proc: the check before the open stands alone
    if not inside(root_real, where):
        raise UnsafeFileError("%s was replaced while it was opened: it now leads to %s, out of %s"
                              % (shown, where, root_real))


def check_regular(path, st=None):
    """The stat of ``path`` (links followed) when it is a regular file; UnsafeFileError otherwise
    (FileNotFoundError and other OSErrors pass through)."""
    st = st or os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError("%s is %s, not a regular file: fleetnap does not open it (remove or replace it)"
                              % (path, _kind(st.st_mode)))
    return st


def read_bytes(path, limit=RECORD, root="/", what=None, deadline_s=READ_DEADLINE_S):
    """At most ``limit`` bytes of the regular file ``path`` (contained in ``root``).

    Missing or unreadable: the OSError as raised. There but unusable (not regular, out of the root,
    larger than ``limit``, replaced while opened, too slow): UnsafeFileError naming it."""
    shown = what and "%s %s" % (what, path) or path
    root_real = real_root(root)
    real = resolve(root, path, shown) if root_real != "/" else path
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError("%s is %s, not a regular file: fleetnap does not open it (remove or replace it)"
                              % (shown, _kind(st.st_mode)))
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise ReplacedError("%s was replaced while it was opened; try again" % shown)
        _fd_inside(fd, root_real, shown)
        return _read_fd(fd, limit, shown, deadline_s)
    finally:
        os.close(fd)


def _read_fd(fd, limit, shown, deadline_s):
    """At most ``limit`` bytes from an open regular file, within ``deadline_s``."""
    chunks, total = [], 0
    end = time.monotonic() + deadline_s
    while True:
        chunk = os.read(fd, min(1024 * 1024, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UnsafeFileError("%s is larger than %s, the most fleetnap reads of such a file"
                                  % (shown, _size_text(limit)))
        if time.monotonic() > end:
            raise UnsafeFileError("reading %s took longer than %d s" % (shown, deadline_s))
    return b"".join(chunks)


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_LEAF_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))


def read_many(directory, names, limit=VALUE, root="/", deadline_s=READ_DEADLINE_S):
    """read_bytes() of several files of one directory (``directory`` already joined under
    ``root``): ``{name: bytes}``, None for a file that is missing or cannot be read.

    The directory is resolved, checked to be in the root and opened once; each file is then
    examined and opened relative to that descriptor, as a name in it and without following a link,
    so no path is walked again and none can lead elsewhere between the check and the open (a link
    there is read by read_bytes, as any other path: followed when it stays in the root). The same
    rules as read_bytes: a file that must not be used raises UnsafeFileError naming it. A sysfs
    state directory is read in one call (the cpuidle model reads thousands of them)."""
    root_real = real_root(root)
    real = resolve(root, directory) if root_real != "/" else directory
    out = {}
    try:
        dfd = os.open(real, _DIR_FLAGS)
    except OSError:
        return dict((name, None) for name in names)
    try:
        _fd_inside(dfd, root_real, directory)
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                raise ValueError("read_many reads files of one directory, not %r" % name)
            shown = os.path.join(directory, name)
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                out[name] = None
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    out[name] = read_bytes(shown, limit, root, deadline_s=deadline_s)
                except UnsafeFileError:
                    raise
                except OSError:
                    out[name] = None
                continue
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeFileError("%s is %s, not a regular file: fleetnap does not open it (remove or replace it)"
                                      % (shown, _kind(st.st_mode)))
            try:
                fd = os.open(name, _LEAF_FLAGS, dir_fd=dfd)
            except OSError:
                out[name] = None
                continue
            try:
                now = os.fstat(fd)
                if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                    raise ReplacedError("%s was replaced while it was opened; try again" % shown)
                out[name] = _read_fd(fd, limit, shown, deadline_s)
            except UnsafeFileError:
                raise
            except OSError:
                out[name] = None
            finally:
                os.close(fd)
        return out
    finally:
        os.close(dfd)


def decode(data, path, what=None):
    """Strict UTF-8, or UnsafeFileError naming the file and the byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnsafeFileError("%s is not UTF-8 text (byte %d): repair or remove it"
                              % (what and "%s %s" % (what, path) or path, exc.start))


def read_text(path, limit=RECORD, root="/", what=None):
    """read_bytes() decoded strictly."""
    return decode(read_bytes(path, limit, root, what), path, what)


def read_optional(path, limit=RECORD, root="/", what=None):
    """read_bytes(), or None when the file does not exist (a directory in its path missing
    included); any other problem raises."""
    try:
        return read_bytes(path, limit, root, what)
    except UnsafeFileError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def _flags(path):
    """The chattr flags of path (0 when the filesystem has none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0
    try:
        buf = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, struct.pack("i", 0))
        return struct.unpack("i", buf)[0]
    except (OSError, IOError):
        return 0
    finally:
        os.close(fd)


def write_problem(path):
    """None when path (a file to be replaced or created) can be written atomically, else a
    sentence why not. Checked before anything is written."""
    directory = os.path.dirname(path) or "."
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return "%s is a directory" % path
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return "%s is %s, not a regular file (remove it)" % (path, _kind(st.st_mode))
    if st is not None and stat.S_ISREG(st.st_mode) and _flags(path) & (_IMMUTABLE | _APPEND):
        return "%s is immutable or append-only (lsattr shows it; chattr -i -a to allow changes)" % path
    if os.path.isdir(directory) and _flags(directory) & (_IMMUTABLE | _APPEND):
        return ("its directory %s is immutable or append-only (lsattr -d shows it; chattr -i -a to allow changes)"
                % directory)
    return None


def fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def same_content(path, data, mode):
    """True when path is a regular file (not a link) holding exactly data with mode."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != mode or st.st_size != len(data):
            return False
        return read_bytes(path, len(data) + 1) == data
    except (OSError, UnsafeFileError):
        return False


def atomic_write(path, content, mode=0o644, root="/", module=None):
    """Replace ``path`` (under ``root``) by a file holding ``content``, atomically.

    Returns False when it already holds exactly that (nothing written), True after a write.
    Raises FileWriteError (or UnsafeFileError for a path out of the root) naming the path; the
    temporary file never stays behind unless its own removal fails (the message says so)."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    directory = os.path.dirname(path)
    if real_root(root) != "/":
        resolve(root, directory)
    if same_content(path, data, mode):
        return False
    try:
        if not os.path.isdir(directory):
            if os.path.lexists(directory):
                raise FileWriteError("cannot write %s: %s is not a directory" % (path, directory))
            os.makedirs(directory, 0o755, exist_ok=True)   # another writer may make it first
            if real_root(root) != "/":
                resolve(root, directory)
        problem = write_problem(path)
        if problem:
            raise FileWriteError("cannot write %s: %s; nothing was written" % (path, problem))
        try:
            old = os.lstat(path)
        except OSError:
            old = None
        fd, tmp = tempfile.mkstemp(prefix=".fleetnap-", dir=directory)
    except FileWriteError:
        raise
    except (IOError, OSError) as exc:
        raise FileWriteError("cannot write %s: %s" % (path, exc.strerror or exc))
    try:
        # Synced before and after the rename: a host suspended or powered off right after this
        # keeps either the old file or the new one, never an empty or half one.
        view = memoryview(data)
        while view:
            done = os.write(fd, view)
            view = view[done:]
        if old is not None and stat.S_ISREG(old.st_mode) and os.geteuid() == 0:
            os.fchown(fd, old.st_uid, old.st_gid)
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.rename(tmp, path)
        tmp = None
        fsync_dir(directory)
        if module is not None:
            _selinux_default(module, path)
    except Exception as exc:    # any failure: the temporary file goes, the error names the target
        left = ""
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError as rm:
                left = "; its temporary file %s could not be removed (%s)" % (tmp, rm.strerror or rm)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "%s" % (exc,) or type(exc).__name__
        if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES):
            why += " (an immutable or append-only file or directory? lsattr shows it)"
        raise FileWriteError("cannot write %s: %s%s" % (path, why, left))
    return True


def _selinux_default(module, path):
    """Give a written file its default SELinux context, as Ansible's atomic_move does; a failure
    here is no reason to fail the write (the file is in place)."""
    try:
        if module.selinux_enabled():
            module.set_default_selinux_context(path, False)
    except Exception:   # noqa: BLE001 - best effort, as documented
        pass


def write_value(path, value, root="/"):
    """One write(2) of ``value`` to an existing regular file (a sysfs attribute), as the kernel
    expects; the file must be contained in root and regular (no FIFO is ever opened)."""
    data = value if isinstance(value, bytes) else str(value).encode()
    root_real = real_root(root)
    real = resolve(root, path) if root_real != "/" else path
    st = check_regular(real)
    fd = os.open(real, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafeFileError("%s was replaced while it was opened; nothing was written" % path)
        _fd_inside(fd, root_real, path)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.EIO, "short write (%d of %d bytes)" % (written, len(data)))
    finally:
        os.close(fd)


def remove(path, root="/"):
    """Remove a file or link (not what a link points to); True when something was removed."""
    if real_root(root) != "/":
        resolve(root, os.path.dirname(path))
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeFileError("%s is a directory, where fleetnap keeps a file: remove it by hand" % path)
    os.unlink(path)
    fsync_dir(os.path.dirname(path) or ".")
    return True


def snapshot(path, limit=RECORD):
    """What is at path now, to put it back later: ('absent',), ('link', target) or
    ('file', bytes, mode). Something else (a directory, a FIFO) raises UnsafeFileError."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return ("absent",)
        raise
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        return ("file", read_bytes(path, limit), stat.S_IMODE(st.st_mode))
    raise UnsafeFileError("%s is %s, not a regular file: fleetnap does not replace it" % (path, _kind(st.st_mode)))


def put_back(path, before, root="/"):
    """Make path what snapshot() saw."""
    if before[0] == "absent":
        remove(path, root)
    elif before[0] == "link":
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(before[1], path)
    else:
        atomic_write(path, before[1], before[2], root)


class Changes(object):
    """Every change one module call makes, in order, each with how to undo it.

    ::

        changes = Changes()
        changes.value("/sys/.../disable", "1", "0")          # a sysfs write (old value known)
        changes.write(path, text, 0o644)                     # a file written atomically
        changes.remove(path)                                 # a file removed
        changes.link(path, "/dev/null")                      # a link made (a unit mask)
        ...
        undone, left = changes.undo()                        # on failure: newest first

    ``left`` names every path that could not be put back, with why.
    """

    def __init__(self, root="/"):
        self.root = root
        self.done = []

    def __len__(self):
        return len(self.done)

    def record(self, what, undo):
        """A change made elsewhere, with a function that undoes it (raising on failure)."""
        self.done.append((what, undo))

    def value(self, path, new, old):
        write_value(path, new, self.root)
        self.done.append((path, lambda: write_value(path, old, self.root)))

    def write(self, path, content, mode=0o644, module=None):
        before = snapshot(path)
        changed = atomic_write(path, content, mode, self.root, module)
        if changed:
            self.done.append((path, lambda: put_back(path, before, self.root)))
        return changed

    def remove(self, path):
        before = snapshot(path)
        if before[0] == "absent":
            return False
        remove(path, self.root)
        self.done.append((path, lambda: put_back(path, before, self.root)))
        return True

    def append(self, path, data):
        existed = os.path.lexists(path)
        size = append(path, data, self.root)
        self.done.append((path, (lambda: truncate(path, size)) if existed else (lambda: remove(path, self.root))))

    def link(self, path, target):
        directory = os.path.dirname(path)
        if real_root(self.root) != "/":
            resolve(self.root, directory)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755, exist_ok=True)
        os.symlink(target, path)
        self.done.append((path, lambda: os.unlink(path)))

    def undo(self):
        """Undo every change, newest first; returns (undone, left): the paths put back, and
        'path: why' for each that could not be."""
        undone, left = [], []
        for what, undo in reversed(self.done):
            try:
                undo()
                undone.append(what)
            except Exception as exc:    # noqa: BLE001 - each failure is reported, the rest still undone
                left.append("%s: %s" % (what, exc.strerror if isinstance(exc, OSError) and exc.strerror else exc))
        self.done = []
        return undone, left

    def failure(self, msg):
        """Undo everything and return msg with what is as it was, truthfully."""
        count = len(self.done)
        undone, left = self.undo()
        if left:
            return ("%s; undoing this call's %d change(s) failed for %d, the host is NOT as it was: left changed: %s"
                    % (msg, count, len(left), "; ".join(left)))
        if undone:
            return "%s; this call's %d change(s) were undone, the host is as it was" % (msg, count)
        return "%s; nothing had been changed" % msg


# --- the other kinds of open, each in one place ---------------------------------------------------

def open_device(path, mode="rb"):
    """A character device fleetnap means to open (``/dev/kmsg``, ``/dev/cpu_dma_latency``,
    ``/dev/null``): refused unless it is one, so a planted regular file or FIFO is not used."""
    st = os.stat(path)
    if not stat.S_ISCHR(st.st_mode):
        raise UnsafeFileError("%s is %s, not the character device it should be" % (path, _kind(st.st_mode)))
    return open(path, mode)


def lock_fd(path, mode=0o600):
    """A descriptor of the lock file ``path`` (created if missing), opened without following a link
    and checked to be a regular file; the caller closes it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        check_regular(path, os.fstat(fd))
    except Exception:
        os.close(fd)
        raise
    return fd


def append(path, data, root="/", mode=0o644):
    """Append ``data`` to the regular file ``path`` (created if missing; never through a link),
    fsynced. Returns the size before, for truncate() to undo it."""
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if real_root(root) != "/":
        resolve(root, os.path.dirname(path))
    problem = write_problem(path)
    if problem and "append-only" not in problem:
        raise FileWriteError("cannot append to %s: %s" % (path, problem))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        raise FileWriteError("cannot append to %s: %s" % (path, exc.strerror or exc))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError("%s is %s, not a regular file: nothing was appended" % (path, _kind(st.st_mode)))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return st.st_size
    except OSError as exc:
        if isinstance(exc, UnsafeFileError):
            raise
        raise FileWriteError("cannot append to %s: %s" % (path, exc.strerror or exc))
    finally:
        os.close(fd)


def truncate(path, size):
    """Cut the regular file ``path`` back to ``size`` bytes (undoes an append), fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        check_regular(path, os.fstat(fd))
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_proc(pid, name, limit=VALUE):
    """``/proc/PID/NAME`` (stat, cmdline), bounded; OSError when the process is gone."""
    return read_bytes("/proc/%d/%s" % (int(pid), name), limit)


def create_exclusive(path, content, mode=0o644, root="/"):
    """Put a complete file at ``path`` only when nothing is there (a lock): the content is written
    to an exclusively created temporary file with an unpredictable name beside it, fsynced, then
    hard-linked to ``path`` (link(2) fails when anything, a dangling link included, is there; it
    never follows a link), and the directory fsynced. True when created, False when ``path``
    exists; FileWriteError naming the path otherwise. The temporary file never stays behind."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    directory = os.path.dirname(path) or "."
    if real_root(root) != "/":
        resolve(root, directory)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".fleetnap-", dir=directory)
    except OSError as exc:
        raise FileWriteError("cannot write %s: %s" % (path, exc.strerror or exc))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = None
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        fsync_dir(directory)
        return True
    except OSError as exc:
        raise FileWriteError("cannot write %s: %s" % (path, exc.strerror or exc))
    finally:
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
