"""The one file layer (module_utils/fleetnap/fileio.py) and the one parser (parse.py), against
the hostile kinds of tests/hostile.py; and the rule that no module opens a host file by itself."""

from __future__ import annotations

import ast
import errno
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

import hostile
from conftest import REPO
from ansible.module_utils.fleetnap import fileio, parse
from ansible.module_utils.fleetnap.fileio import FileWriteError, UnsafeFileError


# --- no bare open of a host path outside the file layer -------------------------------------------

OPENERS = {"open", "os.open", "io.open", "gzip.open", "os.fdopen", "codecs.open", "tempfile.mkstemp",
           "tempfile.NamedTemporaryFile", "builtins.open"}


def bare_opens():
    """Every call that opens a file, in library/ and module_utils/fleetnap/ outside fileio.py."""
    out = []
    files = sorted((REPO / "library").glob("*.py")) + sorted((REPO / "module_utils" / "fleetnap").glob("*.py"))
    for path in files:
        if path.name == "fileio.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in OPENERS or name.endswith(".open_file"):
                    out.append("%s:%d %s" % (path.relative_to(REPO), node.lineno, ast.unparse(node)[:80]))
    return out


def test_no_module_opens_a_file_outside_the_file_layer():
    assert bare_opens() == []


# --- reads ----------------------------------------------------------------------------------------

@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    (r / "sys").mkdir(parents=True)
    (r / "sys" / "value").write_text("42\n")
    yield r
    hostile.cleanup()


def _bounded(fn, seconds=5):
    """fn() run in a thread; fails the test if it has not returned within seconds (a hang)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:   # noqa: BLE001 - handed to the test
            box["error"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "did not return within %d s (a hang)" % seconds
    if "error" in box:
        raise box["error"]
    return box["value"]


# Hostile kinds of a file (tests/hostile.py) and the words of their refusal.
REFUSED = [
    ("fifo", "is a FIFO, not a regular file"),
    ("socket", "is a socket, not a regular file"),
    ("device", "is a character device, not a regular file"),
    ("link to /dev/zero", "leaves the root"),
    ("huge file", "is larger than 64 KiB"),
]


@pytest.mark.parametrize("kind,words", REFUSED)
def test_a_special_or_huge_file_is_refused_at_once(root, kind, words):
    target = root / "sys" / "value"
    hostile.make(target, kind)
    with pytest.raises(UnsafeFileError, match=words) as info:
        _bounded(lambda: fileio.read_bytes(str(target), fileio.VALUE, str(root)))
    assert str(target) in str(info.value)


def test_a_link_out_of_the_root_is_refused_and_one_inside_is_followed(root, tmp_path):
    outside = tmp_path / "outside" / "secret"
    hostile.link_out(root / "sys" / "value", outside)
    with pytest.raises(UnsafeFileError, match="leaves the root"):
        fileio.read_bytes(str(root / "sys" / "value"), root=str(root))
    (root / "sys" / "real").write_text("7\n")
    (root / "sys" / "inside").symlink_to("real")
    assert fileio.read_bytes(str(root / "sys" / "inside"), root=str(root)) == b"7\n"


def test_a_directory_link_out_of_the_root_is_refused_for_files_under_it(root, tmp_path):
    """Written through it (write_value) or read through one descriptor of it (read_many)."""
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "disable").write_text("0\n")
    (root / "sys" / "dir").symlink_to(out)
    with pytest.raises(UnsafeFileError, match="leaves the root"):
        fileio.write_value(str(root / "sys" / "dir" / "disable"), "1", str(root))
    assert (out / "disable").read_text() == "0\n"
    with pytest.raises(UnsafeFileError, match="leaves the root"):       # nor read through one descriptor of it
        fileio.read_many(str(root / "sys" / "dir"), ["disable"], root=str(root))


# --- read_many: the files of one directory through one descriptor of it ------------------------------

@pytest.mark.parametrize("kind,words", REFUSED)
def test_read_many_refuses_what_read_bytes_refuses_naming_the_file(root, kind, words):
    (root / "sys" / "name").write_text("C6\n")
    target = root / "sys" / "value"
    hostile.make(target, kind)
    with pytest.raises(UnsafeFileError, match=words) as info:
        _bounded(lambda: fileio.read_many(str(root / "sys"), ["name", "value"], fileio.VALUE, str(root)))
    assert str(target) in str(info.value)


def test_read_many_reads_each_file_missing_ones_none_and_follows_a_link_only_inside_the_root(root, tmp_path):
    (root / "sys" / "real").write_text("7\n")
    (root / "sys" / "inside").symlink_to("real")
    got = fileio.read_many(str(root / "sys"), ["value", "nope", "inside"], root=str(root))
    assert got == {"value": b"42\n", "nope": None, "inside": b"7\n"}
    assert fileio.read_many(str(root / "gone"), ["value"], root=str(root)) == {"value": None}
    hostile.link_out(root / "sys" / "value", tmp_path / "outside" / "secret")
    with pytest.raises(UnsafeFileError, match="leaves the root"):
        fileio.read_many(str(root / "sys"), ["real", "value"], root=str(root))
    with pytest.raises(ValueError, match="files of one directory"):
        fileio.read_many(str(root), ["sys/real"], root=str(root))


def test_read_many_refuses_a_file_replaced_between_examining_and_opening(root, monkeypatch):
    target = root / "sys" / "value"
    (root / "sys" / "other").write_text("planted\n")
    real_open = os.open

    def racing_open(path, flags, *args, **kwargs):
        if str(path) == "value":
            os.rename(root / "sys" / "other", target)
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(fileio.os, "open", racing_open)
    with pytest.raises(UnsafeFileError, match="was replaced while it was opened"):
        fileio.read_many(str(root / "sys"), ["value"], fileio.VALUE, str(root))


def test_text_that_is_not_utf8_names_the_file_and_byte(root):
    (root / "sys" / "value").write_bytes(b"ok\xff")
    with pytest.raises(UnsafeFileError, match=r"value is not UTF-8 text \(byte 2\)"):
        fileio.read_text(str(root / "sys" / "value"), root=str(root))


def test_a_missing_file_is_an_oserror_and_read_optional_gives_none(root):
    with pytest.raises(OSError) as info:
        fileio.read_bytes(str(root / "nope"))
    assert info.value.errno == errno.ENOENT and not isinstance(info.value, UnsafeFileError)
    assert fileio.read_optional(str(root / "nope" / "deeper")) is None


def test_unsafe_file_error_is_caught_by_every_existing_handler():
    err = UnsafeFileError("x")
    assert isinstance(err, OSError) and isinstance(err, ValueError) and isinstance(err, fileio.HostFsError)


# --- writes ---------------------------------------------------------------------------------------

def test_atomic_write_replaces_a_link_and_never_writes_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "d" / "file"
    target.parent.mkdir()
    target.symlink_to(victim)
    assert fileio.atomic_write(str(target), "new\n", 0o644)
    assert victim.read_text() == "keep me\n"
    assert not target.is_symlink() and target.read_text() == "new\n"
    assert not fileio.atomic_write(str(target), "new\n", 0o644)    # same content: nothing written


def test_atomic_write_temporary_names_cannot_be_planted(tmp_path, monkeypatch):
    """Links planted at every name a predictable writer could choose (PATH.new.<pid>, PATH.tmp,
    .PATH.swp ...) are never followed: the temporary file is created exclusively with a random name."""
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    d = tmp_path / "d"
    d.mkdir()
    target = d / "state.json"
    for name in ("state.json.new.%d" % os.getpid(), "state.json.tmp", "state.json.new", ".state.json.swp",
                 ".fleetnap-state.json", "state.json~"):
        (d / name).symlink_to(victim)
    fileio.atomic_write(str(target), '{"a": 1}\n', 0o600)
    assert victim.read_text() == "untouched\n"
    assert target.read_text() == '{"a": 1}\n'
    assert sorted(p.name for p in d.iterdir() if not p.is_symlink()) == ["state.json"]


def test_atomic_write_refuses_an_immutable_target_before_writing(tmp_path):
    target = tmp_path / "file"
    target.write_text("as it was\n")
    hostile.immutable(target)
    try:
        with pytest.raises(FileWriteError, match="immutable or append-only.*nothing was written"):
            fileio.atomic_write(str(target), "new\n")
        assert target.read_text() == "as it was\n"
        assert [p.name for p in tmp_path.iterdir()] == ["file"]
    finally:
        hostile.cleanup()


def test_atomic_write_refuses_an_append_only_directory_before_writing(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "file").write_text("as it was\n")
    hostile.append_only_dir(d)
    try:
        with pytest.raises(FileWriteError, match="directory .* is immutable or append-only"):
            fileio.atomic_write(str(d / "file"), "new\n")
        assert [p.name for p in d.iterdir()] == ["file"]
    finally:
        hostile.cleanup()


def test_atomic_write_on_a_full_filesystem_leaves_the_old_file_and_no_temporary(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    (d / "file").write_text("as it was\n")
    hostile.full_fs(d)
    try:
        with pytest.raises(FileWriteError, match="No space left on device"):
            fileio.atomic_write(str(d / "file"), "x" * 200000)
        assert (d / "file").read_text() == "as it was\n"
        assert sorted(p.name for p in d.iterdir()) == [".filler", "file"]
    finally:
        hostile.cleanup()


def test_write_value_never_opens_a_fifo(root):
    hostile.fifo(root / "sys" / "value")
    with pytest.raises(UnsafeFileError, match="FIFO"):
        _bounded(lambda: fileio.write_value(str(root / "sys" / "value"), "1", str(root)))


def test_changes_undo_every_kind_newest_first(tmp_path):
    (tmp_path / "knob").write_text("0\n")
    (tmp_path / "old").write_text("old\n")
    (tmp_path / "gone").write_text("bye\n")
    (tmp_path / "log").write_text("line 1\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    ch = fileio.Changes(str(tmp_path))
    ch.value(str(tmp_path / "knob"), "1", "0")
    ch.write(str(tmp_path / "old"), "new\n")
    ch.write(str(tmp_path / "fresh"), "fresh\n")
    ch.remove(str(tmp_path / "gone"))
    ch.link(str(tmp_path / "units" / "mask"), "/dev/null")
    ch.append(str(tmp_path / "log"), "line 2\n")
    assert len(ch) == 6
    msg = ch.failure("the next step failed")
    assert msg == "the next step failed; this call's 6 change(s) were undone, the host is as it was"
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == dict(before, knob=b"0")
    assert not (tmp_path / "units" / "mask").is_symlink()


def test_changes_say_which_paths_stay_changed_when_an_undo_fails(tmp_path):
    (tmp_path / "a").write_text("a\n")
    ch = fileio.Changes(str(tmp_path))
    ch.write(str(tmp_path / "a"), "A\n")
    hostile.immutable(tmp_path / "a")
    try:
        msg = ch.failure("boom")
    finally:
        hostile.cleanup()
    assert "the host is NOT as it was: left changed: %s" % (tmp_path / "a") in msg


# --- numbers, booleans, JSON ----------------------------------------------------------------------

@pytest.mark.parametrize("text,words", [
    ("9" * 400, "a number of 400 digits"),
    ("1\u00b2", "ASCII digits"),
    ("\u0663", "ASCII digits"),
    ("", "ASCII digits"),
    ("12abc", "ASCII digits"),
])
def test_parse_int_refuses_what_int_would_mangle(text, words):
    with pytest.raises(parse.ParseError, match=words):
        parse.parse_int(text, "/sys/x")


def test_parse_number_and_finite():
    assert parse.parse_number(" 12 ", "x") == 12 and parse.parse_number("-0.5", "x") == -0.5
    assert parse.parse_number("1e3", "x") == 1000.0
    for bad in ("1e999", "nan", "inf", "1\u00b2", "0x10"):
        with pytest.raises(parse.ParseError):
            parse.parse_number(bad, "x")
    with pytest.raises(parse.ParseError, match="400 digits"):
        parse.finite(10 ** 399, "budget_us")
    with pytest.raises(parse.ParseError, match="finite"):
        parse.finite(float("inf"), "x")
    with pytest.raises(parse.ParseError, match="must be a number"):
        parse.finite(True, "x")
    assert parse.finite(3.0, "x", integer=True) == 3


@pytest.mark.parametrize("value,expected", [(True, True), ("yes", True), ("On", True), ("1", True), (1, True),
                                            (False, False), ("0", False), ("no", False), ("off", False), (0, False)])
def test_boolean_words(value, expected):
    assert parse.boolean(value, "ssh") is expected


@pytest.mark.parametrize("value", ["maybe", "", 2, None, [], "yess"])
def test_boolean_refuses_anything_else(value):
    with pytest.raises(parse.ParseError, match="ssh: must be true or false"):
        parse.boolean(value, "ssh")


@pytest.mark.parametrize("text,words", [
    ("[" * 600 + "]" * 600, "nests 600 levels deep"),
    ('{"\\ud800": 1}', "lone surrogate"),
    ('["x\\udfff"]', "lone surrogate"),
    ('{"a": NaN}', "NaN"),
    ('{"a": 1e999}', "not a finite number"),
    ('{"a": %s}' % ("9" * 400), "400 digits"),
    ('{"a": ', "not valid JSON"),
    ("x" * 100, "not valid JSON"),
])
def test_loads_refuses_hostile_json_naming_the_file(text, words):
    with pytest.raises(parse.ParseError, match=words) as info:
        parse.loads(text, "the record /var/x.json")
    assert "the record /var/x.json" in str(info.value)


def test_loads_depth_ignores_brackets_in_strings_and_is_fast_on_big_records():
    assert parse.loads('{"a": "[[[[{{{{", "b": [[1]]}', "x") == {"a": "[[[[{{{{", "b": [[1]]}
    big = "[" + ",".join('{"host": "h%d", "v": [1, 2, "]]"]}' % i for i in range(100000)) + "]"
    # CPU time, not wall time: a quadratic depth scan of 4 MB would take minutes of CPU; a busy
    # machine's other processes do not count here.
    t = time.process_time()
    assert len(parse.loads(big, "x")) == 100000
    assert time.process_time() - t < 10
    with pytest.raises(parse.ParseError, match="larger than"):
        parse.loads(big, "x", limit=1000)


# --- the layer against a real special file: a FIFO with a writer that never comes -----------------

def test_hostfs_read_of_a_fifo_knob_returns_at_once_with_its_name(root):
    from ansible.module_utils.fleetnap.sysfs import HostFS
    hostile.fifo(root / "sys" / "value")
    fs = HostFS(str(root))
    with pytest.raises(UnsafeFileError, match="sys/value is a FIFO"):
        _bounded(lambda: fs.read("/sys/value"))
    assert fs.read("/sys/missing", "dflt") == "dflt"


def test_a_link_to_dev_zero_on_the_live_root_is_refused_as_a_device(tmp_path):
    link = tmp_path / "latency"
    hostile.link_to_dev_zero(link)
    with pytest.raises(UnsafeFileError, match="is a character device, not a regular file"):
        _bounded(lambda: fileio.read_bytes(str(link), fileio.VALUE, "/"))


def test_hostfs_read_int_refuses_a_400_digit_counter(root):
    from ansible.module_utils.fleetnap.sysfs import HostFS
    (root / "sys" / "value").write_text("9" * 400)
    with pytest.raises(UnsafeFileError, match="400 digits"):
        HostFS(str(root)).read_int("/sys/value")
    (root / "sys" / "value").write_text("1\u00b2")
    assert HostFS(str(root)).read_int("/sys/value", "none") == "none"


def test_chattr_and_mount_are_available():
    """The hostile kinds immutable, append-only and full filesystem need chattr and mount (root):
    on CI they must run, not skip."""
    assert os.geteuid() == 0
    assert subprocess.run(["chattr", "--help"], capture_output=True).returncode in (0, 1)
    assert Path("/proc/self/fd").is_dir()


def test_a_file_replaced_between_examining_and_opening_is_refused(root, monkeypatch):
    """The file examined (stat) must be the one opened: a file swapped in between (here: renamed
    over the target right before the open, as a racing process would) is refused, not read."""
    target = root / "sys" / "value"
    (root / "sys" / "other").write_text("planted\n")
    real_open = os.open

    def racing_open(path, flags, *args):
        if str(path) == str(target):
            os.rename(root / "sys" / "other", target)
        return real_open(path, flags, *args)
    monkeypatch.setattr(fileio.os, "open", racing_open)
    with pytest.raises(UnsafeFileError, match="was replaced while it was opened"):
        fileio.read_bytes(str(target), fileio.VALUE, str(root))


def test_a_knob_replaced_by_a_fifo_between_plan_and_write_is_not_opened(root):
    """A sysfs value planned from a regular file, then replaced by a FIFO before the write: the
    write refuses it at once (no open, no hang) and a Changes batch undoes what came before."""
    (root / "sys" / "first").write_text("0\n")
    ch = fileio.Changes(str(root))
    ch.value(str(root / "sys" / "first"), "1", "0")
    hostile.fifo(root / "sys" / "value")
    with pytest.raises(UnsafeFileError, match="FIFO"):
        _bounded(lambda: ch.value(str(root / "sys" / "value"), "1", "42"))
    assert ch.failure("the second write failed").endswith("1 change(s) were undone, the host is as it was")
    assert (root / "sys" / "first").read_text() == "0"


# --- every record written is synced (issue 34) --------------------------------------------------

def test_a_record_is_synced_before_and_after_its_rename(tmp_path, monkeypatch):
    """atomic_write (and Changes.write, which every module's record goes through) syncs the new
    file's data before the rename and the directory after it: a host powered off or suspended
    right after the write keeps the old record or the new one, never an empty one. No module
    writes a file any other way (test_no_module_opens_a_file_outside_the_file_layer)."""
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink("/proc/self/fd/%d" % fd))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    dest = tmp_path / "records" / "cycle.json"
    changes = fileio.Changes()
    changes.write(str(dest), '{"cycle": 1}\n', 0o644)
    assert dest.read_text() == '{"cycle": 1}\n'
    tmp_name = [p for p in synced if p != str(dest.parent)]
    assert len(tmp_name) == 1 and Path(tmp_name[0]).parent == dest.parent, synced
    assert Path(tmp_name[0]).name.startswith(".fleetnap-")      # the file, before its rename
    assert synced[-1] == str(dest.parent)                         # the directory, after it
    synced.clear()
    fileio.atomic_write(str(tmp_path / "report.html"), "<html></html>\n", 0o644)
    assert len(synced) == 2 and synced[-1] == str(tmp_path)

