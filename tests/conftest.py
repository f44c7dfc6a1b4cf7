"""Shared pytest fixtures for fleetnap.

- ``module_utils/fleetnap`` is importable in plain unit tests as ``ansible.module_utils.fleetnap``.
- ``run_module`` runs a module of ``library/`` through the real ``ansible`` CLI on localhost,
  with the target's interpreter (/usr/bin/python3, standard library only), and returns its result.
- ``materialize`` turns a captured machine from tests/data/cpuidle (or tests/data/pstates) into a tree under tmp_path
  (``ro|`` files mode 0444 as sysfs shows them, ``rw|`` 0644, the captured kernel command line in
  proc/cmdline), for ``sysfs_root``.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"   # the reference data carried in the repository (tests/data/README.md)
CPUIDLE_DATA = DATA / "cpuidle"
PSTATE_DATA = DATA / "pstates"
VENV_BIN = Path(sys.executable).parent
TARGET_PYTHON = "/usr/bin/python3"

import ansible.module_utils  # noqa: E402  (pytest runs inside the venv that has ansible-core)

_MU = str(REPO / "module_utils")
if _MU not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MU)


@pytest.fixture(autouse=True)
def _live_kernel_holds_the_cpuidle_lock(request):
    """A live_kernel test holds the lock of tests/livelock.py while it runs."""
    if request.node.get_closest_marker("live_kernel") is None:
        yield
        return
    with live_cpuidle_lock():
        yield


def dataset_names():
    return sorted(p.stem for p in CPUIDLE_DATA.glob("*.txt"))


def pstate_names():
    return sorted(p.stem for p in PSTATE_DATA.glob("*.txt"))


sys.path.insert(0, str(REPO / "lab"))
from sim import parse_capture  # noqa: E402  (one parser of the captured-machine format)
from livelock import live_cpuidle_lock  # noqa: E402  (tests/: the lock the simulator's tests take too)


def materialize(dataset: str, dest: Path, data: Path = CPUIDLE_DATA) -> Path:
    """Write the captured sysfs of ``dataset`` under ``dest``; return ``dest`` (a sysfs_root).
    ``data``: the folder of captures (cpuidle, or PSTATE_DATA for the CPU frequency part)."""
    cmdline, entries = parse_capture(data / ("%s.txt" % dataset))
    for mode, path, value in entries:
        target = dest / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
        target.chmod(0o444 if mode == "ro" else 0o644)
    proc = dest / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cmdline").write_text(cmdline + "\n")
    return dest


def snapshot_tree(root: Path) -> dict:
    """Every regular file under root -> its value (to prove nothing changed).

    Values are compared as sysfs shows them: the kernel appends a newline when it prints an
    attribute, a write stores what was written, so a trailing newline is not a difference.
    """
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = p.read_bytes().rstrip(b"\n")
    return out


class ModuleResult(dict):
    @property
    def failed(self):
        return bool(self.get("failed"))

    @property
    def changed(self):
        return bool(self.get("changed"))


_FORK_SERVER = []


def fork_server():
    """This test process's tests/forkrun.py (started on first use, stopped at exit)."""
    if not _FORK_SERVER:
        import atexit
        import shutil
        import tempfile
        import forkrun
        scratch = tempfile.mkdtemp(prefix="fleetnap-forkrun-")
        server = forkrun.Server()
        server.scratch = scratch
        _FORK_SERVER.append(server)
        atexit.register(shutil.rmtree, scratch, True)
        atexit.register(server.close)
    return _FORK_SERVER[0]


def run_module(name: str, args: dict, *, check=False, diff=False, tmp_path: Path = None, env=None,
               wrap=(), via="fork") -> ModuleResult:
    """Run module ``name`` and return its result (with ``diff``). ``via="fork"``: a module of
    library/ as the AnsiballZ wrapper runs it, in a child forked by tests/forkrun.py (``_rc`` is
    the module's exit status, ``_stderr`` what it printed there). Through ``ansible`` on localhost
    (``_rc`` is ansible's): ``via="ansible"``, and any call fork cannot stand for: ``wrap`` or
    ``env`` given, arguments Ansible must template, a module not in library/ (an action plugin
    such as debug). ``wrap``: argv put before ansible (a namespace of its own, for example)."""
    if (via == "fork" and not wrap and not env and (REPO / "library" / (name + ".py")).is_file()
            and "{{" not in json.dumps(args or {})):
        import forkrun
        server = fork_server()
        ran = server.run(name, args or {}, server.scratch, check_mode=check, diff=diff, timeout=300)
        result = ModuleResult(forkrun.as_result(ran, 300))
        result["_rc"] = ran["rc"]
        result["_stderr"] = ran["stderr"]
        return result
    cmd = [
        str(VENV_BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
        "-M", str(REPO / "library"), "-m", name,
        "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
    ]
    if args:
        cmd += ["-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    full_env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                    ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                    ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json")
    full_env.update(env or {})
    proc = subprocess.run(list(wrap) + cmd, capture_output=True, text=True, env=full_env, cwd=str(REPO), timeout=300)
    start = proc.stdout.find("\n{")
    text = proc.stdout if proc.stdout.startswith("{") else proc.stdout[start + 1:]
    try:
        report = json.loads(text)
        result = report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible produced no result (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout, proc.stderr))
    result = ModuleResult(result)
    result["_rc"] = proc.returncode
    result["_stderr"] = proc.stderr
    return result


def run_batch(calls: list, book_dir: Path, timeout: int = 900, via: str = "ansible") -> list:
    """Many module runs in order: what a sequence of run_module calls checks. A call is
    {"module": name, "args": {...}, "check": bool, "diff": bool}, or {"command": [argv]} (a plain
    command between module runs, for example a look at a tree; its result as Ansible's command
    module gives it: rc, stdout and stderr without their last newline). Returns a ModuleResult per
    call. ``via="ansible"``: ONE ansible-playbook, a task per call (each ignore_errors);
    ``via="fork"``: each module run forked by tests/forkrun.py as run_module does, each command run
    here."""
    if via == "fork":
        server, out = fork_server(), []
        for call in calls:
            if "command" in call:
                proc = subprocess.run(call["command"], capture_output=True, text=True, timeout=timeout)
                out.append(ModuleResult(rc=proc.returncode, stdout=proc.stdout.rstrip("\r\n"),
                                        stderr=proc.stderr.rstrip("\r\n"), failed=proc.returncode != 0))
                continue
            ran = server.run(call["module"], call.get("args") or {}, server.scratch, check_mode=call.get("check"),
                             diff=call.get("diff"), timeout=timeout)
            import forkrun
            out.append(ModuleResult(forkrun.as_result(ran, timeout)))
        return out
    assert via == "ansible", via
    tasks = []
    for i, call in enumerate(calls):
        if "command" in call:
            tasks.append({"name": "%04d command" % i, "ansible.builtin.command": {"argv": call["command"]},
                          "ignore_errors": True, "check_mode": False})
            continue
        tasks.append({"name": "%04d %s" % (i, call["module"]), call["module"]: call.get("args") or {},
                      "check_mode": bool(call.get("check")), "diff": bool(call.get("diff")), "ignore_errors": True})
    book_dir.mkdir(parents=True, exist_ok=True)
    book = book_dir / "batch.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], indent=1))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-M", str(REPO / "library"), "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
                           str(book)], capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)
    try:
        ran = json.loads(proc.stdout[proc.stdout.find("{"):])["plays"][0]["tasks"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible-playbook produced no report (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    assert len(ran) == len(calls), "%d of %d calls ran\n%s" % (len(ran), len(calls), proc.stderr[-3000:])
    return [ModuleResult(t["hosts"]["localhost"]) for t in ran]


@pytest.fixture
def module_runner(tmp_path):
    def _run(name, args, **kw):
        return run_module(name, args, tmp_path=tmp_path, **kw)
    return _run


# --- skips: counted, named, and on CI justified (issue 34) ------------------------------------------
#
# Every skip names its reason. A skip that depends on the machine the tests run on (its kernel's
# cpuidle driver, S3, sch_etf, its NICs, a load that kept the CPUs from idling) starts its reason
# with "this kernel" or "this machine": CI may have it. Any other reason (a missing package that
# make setup installs, not being root, a tool not found) is one CI must not have: with
# FLEETNAP_STRICT_SKIPS=1 (make test sets it) such a skip fails the run. Every run ends with the
# count of skipped tests and their reasons.

SKIP_JUSTIFIED_ON_CI = re.compile(r"^this (kernel|machine)\b")


def skip_reasons(stats: dict) -> "collections.Counter":
    reasons = collections.Counter()
    for rep in stats.get("skipped", []):
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reasons[reason.replace("Skipped: ", "", 1).strip()] += 1
    return reasons


def unjustified_skips(reasons) -> list:
    return sorted(r for r in reasons if not SKIP_JUSTIFIED_ON_CI.match(r))


def pytest_sessionfinish(session, exitstatus):
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or hasattr(session.config, "workerinput"):     # an xdist worker reports to its controller
        return
    bad = unjustified_skips(skip_reasons(tr.stats))
    if bad and os.environ.get("FLEETNAP_STRICT_SKIPS") == "1" and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    reasons = skip_reasons(terminalreporter.stats)
    total = sum(reasons.values())
    terminalreporter.write_line("skipped: %d test%s" % (total, "" if total == 1 else "s"))
    for reason, n in sorted(reasons.items()):
        terminalreporter.write_line("  %3d  %s" % (n, reason))
    bad = unjustified_skips(reasons)
    if bad and os.environ.get("FLEETNAP_STRICT_SKIPS") == "1":
        terminalreporter.write_line("FAILED: %d skip reason(s) that CI must not have (FLEETNAP_STRICT_SKIPS=1; a "
                                    "justified one starts with 'this kernel' or 'this machine'): %s"
                                    % (len(bad), "; ".join(bad)), red=True)
