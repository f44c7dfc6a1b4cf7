"""What a hostile tester (or a fleet's filesystems) puts where fleetnap expects a plain file.

Each builder turns ``path`` (a file, or a directory where said) into one hostile kind, for the
bad-input tables (``tests/badinput.py``): ``KINDS`` maps a kind's name to its builder, so a table
can run every kind against one path of one module::

    prepare = {"knob is a fifo": lambda d: hostile.make(d / "sys/power/mem_sleep", "fifo")}

Kinds that need cleaning up (chattr flags, mounts) are registered and undone by ``cleanup()``
(conftest calls it at the end of the session), so pytest can remove its temporary directories.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

_FLAGGED: list = []     # paths given chattr flags
_MOUNTS: list = []      # tmpfs mount points

HUGE_BYTES = 2 * 1024 ** 3          # a sparse file: costs nothing on disk, too large to read whole
DEEP = 600                          # JSON nesting that made json.loads raise RecursionError


def _clear(path: Path) -> None:
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)


def fifo(path: Path) -> None:
    _clear(path)
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    """Bound by its name from its directory: a socket's address is at most 107 bytes, which deep
    paths under pytest's temporary directory pass."""
    _clear(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        s.bind(path.name)
    finally:
        os.chdir(here)
        s.close()       # the socket file stays, S_IFSOCK


def device(path: Path) -> None:
    """A character device node (the null device's numbers): opening it must never happen."""
    _clear(path)
    os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 3))


def link_to_dev_zero(path: Path) -> None:
    _clear(path)
    path.symlink_to("/dev/zero")


def link_out(path: Path, outside: Path) -> None:
    """``path`` becomes a link to ``outside`` (a file or directory outside the root), which is
    created if missing (a directory when path was one)."""
    was_dir = path.is_dir() and not path.is_symlink()
    if not outside.exists():
        if was_dir:
            outside.mkdir(parents=True)
        else:
            outside.parent.mkdir(parents=True, exist_ok=True)
            outside.write_text(path.read_text() if path.is_file() else "0\n")
    _clear(path)
    path.symlink_to(outside)


def huge(path: Path) -> None:
    """A sparse file of 2 GiB (zeros): a reader without a bound runs out of memory."""
    _clear(path)
    with open(path, "wb") as f:
        f.truncate(HUGE_BYTES)


def text(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    mode = path.stat().st_mode if path.exists() else None
    if mode is not None:
        path.chmod(0o644)
    path.write_text(content)
    if mode is not None:
        path.chmod(stat.S_IMODE(mode))


def digits400(path: Path) -> None:
    text(path, "9" * 400 + "\n")


def unicode_digits(path: Path) -> None:
    text(path, "1\u00b2\n")            # '²': str.isdigit() says yes, int() says no


def deep_json(path: Path) -> None:
    text(path, "[" * DEEP + "]" * DEEP + "\n")


def lone_surrogate(path: Path) -> None:
    text(path, '{"\\ud800": 1, "host\\udfff": "x\\ud83d"}\n')


def chattr(path: Path, flags: str) -> None:
    subprocess.run(["chattr", flags, str(path)], check=True)
    _FLAGGED.append(path)


def immutable(path: Path) -> None:
    """chattr +i: not even root can write, rename over or remove it."""
    if not path.exists():
        text(path, "as it was\n")
    chattr(path, "+i")


def append_only_dir(path: Path) -> None:
    """chattr +a on the directory: files can be created in it but not renamed over or removed."""
    path.mkdir(parents=True, exist_ok=True)
    chattr(path, "+a")


def full_fs(path: Path, size: str = "256k") -> None:
    """``path`` (a directory) becomes a small tmpfs, filled up: the next write gets ENOSPC."""
    path.mkdir(parents=True, exist_ok=True)
    keep = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file() and not p.is_symlink()}
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", str(path)], check=True)
    _MOUNTS.append(path)
    for name, data in keep.items():
        (path / name).write_bytes(data)
    fd = os.open(path / ".filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


KINDS = {
    "fifo": fifo,
    "socket": unix_socket,
    "device": device,
    "link to /dev/zero": link_to_dev_zero,
    "huge file": huge,
    "400-digit number": digits400,
    "unicode digits": unicode_digits,
    "deep JSON": deep_json,
    "lone surrogate": lone_surrogate,
    "immutable": immutable,
}


def make(path: Path, kind: str) -> None:
    KINDS[kind](Path(path))


def cleanup() -> None:
    for p in reversed(_FLAGGED):
        subprocess.run(["chattr", "-i", "-a", str(p)], capture_output=True)
    _FLAGGED.clear()
    for m in reversed(_MOUNTS):
        subprocess.run(["umount", "-l", str(m)], capture_output=True)
    _MOUNTS.clear()


atexit.register(cleanup)


def tree_outside(root: Path) -> Path:
    """A directory beside the root (outside it) for links to point into."""
    out = Path(str(root) + "-outside")
    out.mkdir(parents=True, exist_ok=True)
    return out
