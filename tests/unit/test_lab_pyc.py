"""lab/guest/fleetnap_lab_pyc.py, the lab guests' cache of code compiled from zip archives (the
AnsiballZ payload): a second import of the same source is served from the cache, under the
file name of the zip it came from this time; a different source is never served a stale code;
a cache directory someone else may write is not used."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUEST = REPO / "lab" / "guest"

# Imports modmain from the zip, calls it, prints where the failure it raises was raised.
PROBE = r"""
import sys, traceback, zipimport
sys.path.insert(0, %(guest)r)
import fleetnap_lab_pyc
print("installed", fleetnap_lab_pyc.install())
if %(forbid_compile)r:
    def refuse(*_a):
        raise AssertionError("compiled although the cache holds this source")
    fleetnap_lab_pyc._compile = refuse
sys.path.insert(0, %(zip)r)
import modmain
print("value", modmain.value())
try:
    modmain.fail()
except ValueError:
    print("raised_in", traceback.extract_tb(sys.exc_info()[2])[-1].filename)
"""

SOURCE = "def value():\n    return %d\n\ndef fail():\n    raise ValueError('from the zip')\n"


def probe(tmp_path, zip_path, cache, forbid_compile=False):
    code = PROBE % {"guest": str(GUEST), "zip": str(zip_path), "forbid_compile": forbid_compile}
    env = dict(os.environ, FLEETNAP_LAB_PYC_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in proc.stdout.splitlines())


def make_zip(path: Path, value: int) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("modmain.py", SOURCE % value)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: the cache is used by root only")
def test_second_import_is_served_from_the_cache_under_this_runs_file_name(tmp_path):
    cache = tmp_path / "cache"
    first = probe(tmp_path, make_zip(tmp_path / "a.zip", 1), cache)
    assert first == {"installed": "True", "value": "1", "raised_in": str(tmp_path / "a.zip" / "modmain.py")}
    kept = sorted(os.listdir(cache))
    assert len(kept) == 1 and oct(os.stat(cache).st_mode & 0o777) == "0o700"
    # The same source from another payload: no compile, the traceback names this payload.
    second = probe(tmp_path, make_zip(tmp_path / "b.zip", 1), cache, forbid_compile=True)
    assert second == {"installed": "True", "value": "1", "raised_in": str(tmp_path / "b.zip" / "modmain.py")}
    assert sorted(os.listdir(cache)) == kept


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: the cache is used by root only")
def test_a_changed_source_is_compiled_even_where_its_cache_name_holds_another(tmp_path):
    cache = tmp_path / "cache"
    probe(tmp_path, make_zip(tmp_path / "a.zip", 1), cache)
    (entry,) = os.listdir(cache)
    # Same length, so only the CRC tells them apart; put the old code under the new one's name too.
    new_zip = make_zip(tmp_path / "b.zip", 2)
    import zlib
    new_name = "%s-%d-%08x" % (sys.implementation.cache_tag, len(SOURCE % 2), zlib.crc32((SOURCE % 2).encode()))
    os.link(cache / entry, cache / new_name)
    assert probe(tmp_path, new_zip, cache)["value"] == "2"
    with pytest.raises(AssertionError, match="compiled although"):
        probe(tmp_path, make_zip(tmp_path / "c.zip", 3), cache, forbid_compile=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: the cache is used by root only")
def test_a_directory_others_may_write_is_not_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    cache.chmod(0o770)
    out = probe(tmp_path, make_zip(tmp_path / "a.zip", 1), cache)
    assert out["installed"] == "False" and out["value"] == "1"
    assert os.listdir(cache) == []
