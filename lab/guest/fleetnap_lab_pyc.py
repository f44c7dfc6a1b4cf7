# Copyright: (c) 2026, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's guests only (lab/image.py installs it with a .pth line): compiled code of modules
imported from a zip archive, kept by their source.

Ansible runs every module from a zip (the AnsiballZ payload), and Python's zipimport compiles
each module it imports from a zip on every run: it writes no .pyc as it does for files on disk.
On the lab's TCG guests that compile is a large part of every module run. This keeps each
compiled module in ``/var/cache/fleetnap-lab-pyc`` under the length and CRC of its source, with
the source itself: a module is served from there only when its source is byte for byte the one
compiled; the code's file name is set back to the one of this run (tracebacks name the payload
the module ran from).
Only for root (every lab module runs as root), only from a directory root owns and no one else
may write, only files root owns; any trouble and the module is compiled as Python would.
Real hosts do not have this file: it changes how fast a module starts, not what it does.
"""

import marshal
import os
import sys
import zipimport
import zlib

CACHE_DIR = os.environ.get("FLEETNAP_LAB_PYC_DIR", "/var/cache/fleetnap-lab-pyc")
_compile = zipimport._compile_source
_CODE = type(_compile.__code__)


def _named(code, filename):
    consts = tuple(_named(c, filename) if isinstance(c, _CODE) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _kept(path, source):
    """The code kept at path for exactly this source, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            kept = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        os.close(fd)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == source and isinstance(kept[1], _CODE):
        return kept[1]
    return None


def compile_source(pathname, source):
    """zipimport's compile, through the cache."""
    name = "%s-%d-%08x" % (sys.implementation.cache_tag, len(source), zlib.crc32(source))
    path = os.path.join(CACHE_DIR, name)
    code = _kept(path, source)
    if code is not None:
        return _named(code, pathname)
    code = _compile(pathname, source)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            marshal.dump((source, code), f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return code


def install():
    """Use the cache when this process is root and the directory is root's alone."""
    if os.geteuid() != 0:
        return False
    try:
        os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
        st = os.lstat(CACHE_DIR)
    except OSError:
        return False
    if st.st_uid != 0 or st.st_mode & 0o077 or not os.path.isdir(CACHE_DIR) or os.path.islink(CACHE_DIR):
        return False
    zipimport._compile_source = compile_source
    return True


install()
