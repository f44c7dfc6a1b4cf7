"""Tables of bad input: each module's table run case by case, each case a fresh module process.

A table is a list of ``(case, args, words)``: the module's arguments and words its failure
message must contain. ``{tmp}`` in a string argument is replaced by a directory of the case's own
(holding a marker file), hashed before and after: a refusal changes nothing there.

Two ways to run a table, the same checks on the outcome:

- ``via="fork"`` (the default): tests/forkrun.py, a server that imports ansible-core's module
  support once and forks a child per case which runs the module as the AnsiballZ wrapper does
  (``_ansiballz._loader``: the arguments as Ansible sends them, the module as ``__main__``); each
  case's stdout, stderr, time and peak memory its own. A case whose arguments Ansible must
  template (a NaN made by ``{{ 'nan' | float }}``, which JSON cannot carry) goes through Ansible.
- ``via="ansible"``: one ansible-playbook per table, one task per case (``ignore_errors``, bounded
  by Ansible's task ``timeout``), the interpreter tests/rsswrap.py noting peak memory. The tables
  of test_bad_inputs.py and the secrets tests run this way: the module as Ansible itself runs it,
  through its controller, its output and its logs.

Each case is its own pytest test, with its own verdict:

    CASES = case_params(TABLES)

    @pytest.mark.parametrize("module,index,words", CASES)
    def test_bad_input_is_refused_cleanly(tmp_path_factory, module, index, words):
        assert_refused(run_table(module, TABLES[module], tmp_path_factory), index, words)
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

import forkrun
from conftest import REPO, VENV_BIN, snapshot_tree

BOUND_S = 60       # every refusal comes well within this; Ansible's task timeout stops a hang there
PEAK_RSS_MIB = 200  # a module's peak memory on any case (forkrun: wait4 of its child; ansible: tests/rsswrap.py)
RSS_WRAPPER = REPO / "tests" / "rsswrap.py"
TASK_TIMEOUT_S = 90
NAN, INF = "nan", "inf"

_RESULTS: dict = {}


def case_params(tables: dict) -> list:
    out = []
    for module, table in tables.items():
        names = [case for case, _a, _w in table]
        assert len(set(names)) == len(names), "%s: two cases with one name" % module
        out += [pytest.param(module, i, words, id="%s: %s" % (module, case))
                for i, (case, _args, words) in enumerate(table)]
    return out


def _fill(value, d: Path, token="{tmp}"):
    """value with ``token`` replaced by directory d in every string, however deep."""
    if isinstance(value, str):
        return value.replace(token, str(d))
    if isinstance(value, list):
        return [_fill(v, d, token) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, d, token) for k, v in value.items()}
    return value


def _duration_s(task: dict) -> float:
    d = task["task"]["duration"]
    end, start = (datetime.fromisoformat(d[k].rstrip("Z").split("+")[0]) for k in ("end", "start"))
    return (end - start).total_seconds()


def run_table(module: str, table: list, tmp_path_factory, wrap=(), task_extra=None, state=None, key=None,
              via="fork") -> dict:
    """Run every case of ``module``'s table (once per session); return the outcomes.

    ``wrap``: argv put before the runner (``ip netns exec NS``); ``task_extra``: keywords added to
    every case (``check_mode``, the only one); ``state``: a function returning what the module must
    not change outside the case directories (a namespace's qdiscs, the host's idle states),
    compared before and after the table. ``key`` names the table when a module has more than one
    (its outcomes are kept once per session under it; the module's name otherwise). ``via``:
    ``fork`` or ``ansible`` (the module docstring says how each runs)."""
    key = key or module
    if key in _RESULTS:
        return _RESULTS[key]
    extra = dict(task_extra or {})
    assert set(extra) <= {"check_mode"} and via in ("fork", "ansible"), (extra, via)
    root = tmp_path_factory.mktemp("bad-%s" % key)
    dirs, filled = [], []
    for i, (case, args, _words) in enumerate(table):
        work = root / ("case-%02d" % i)
        work.mkdir()
        (work / "marker").write_text("as it was\n")
        dirs.append(work)
        filled.append((case, _fill(args, work)))
    before = [snapshot_tree(d) for d in dirs]
    state_before = state() if state else None
    if via == "ansible":
        results, stderr = _run_ansible(module, filled, root, wrap, extra)
    else:
        # A case whose arguments Ansible templates ("{{ 'nan' | float }}": a float JSON cannot
        # carry) goes through Ansible; the others are forked. Results keep the table's order.
        templated = [i for i, (_c, args) in enumerate(filled) if "{{" in json.dumps(args)]
        results = [None] * len(filled)
        stderr = ""
        if templated:
            ran, stderr = _run_ansible(module, [filled[i] for i in templated], root, wrap, extra)
            for i, res in zip(templated, ran):
                results[i] = res
        rest = [i for i in range(len(filled)) if i not in templated]
        if rest:
            ran, _none = _run_forked(module, [filled[i] for i in rest], root, wrap, extra)
            for i, res in zip(rest, ran):
                results[i] = res
    outcomes = []
    for i, res in enumerate(results):
        res.update(unchanged=snapshot_tree(dirs[i]) == before[i], dir=str(dirs[i]))
        outcomes.append(res)
    state_after = state() if state else None
    _RESULTS[key] = {"cases": outcomes, "stderr": stderr, "state_unchanged": state_before == state_after,
                     "state": (state_before, state_after), "via": via}
    return _RESULTS[key]


def _run_forked(module: str, cases: list, root: Path, wrap, extra: dict):
    """Every case through tests/forkrun.py; a result shaped as Ansible's for a module run."""
    scratch = root / "scratch"
    scratch.mkdir()
    server = forkrun.Server(wrap)
    results = []
    try:
        for _case, args in cases:
            ran = server.run(module, args, scratch, check_mode=extra.get("check_mode"), timeout=TASK_TIMEOUT_S)
            results.append({"result": forkrun.as_result(ran, TASK_TIMEOUT_S), "elapsed_s": ran["elapsed_s"],
                            "peak_rss_mib": ran["maxrss_kib"] / 1024.0})
    finally:
        server.close()
    return results, ""


def _run_ansible(module: str, cases: list, root: Path, wrap, extra: dict):
    """Every case as a task of one ansible-playbook run."""
    tasks = [dict({"name": "%02d %s" % (i, case), module: args, "ignore_errors": True,
                   "timeout": TASK_TIMEOUT_S}, **extra) for i, (case, args) in enumerate(cases)]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    book = root / "table.yml"
    book.write_text(json.dumps(play, indent=1))   # JSON is YAML
    rss_log = root / "rss.log"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", FLEETNAP_RSS_LOG=str(rss_log),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json")
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-M", str(REPO / "library"),
           "-e", "ansible_python_interpreter=%s" % RSS_WRAPPER, str(book)]
    proc = subprocess.run(list(wrap) + cmd, capture_output=True, text=True, env=env, cwd=str(REPO),
                          timeout=TASK_TIMEOUT_S * len(cases) + 120)
    start = proc.stdout.find("{")
    try:
        report = json.loads(proc.stdout[start:])
        ran = report["plays"][0]["tasks"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible-playbook produced no report (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout, proc.stderr))
    assert len(ran) == len(cases), "%d of %d cases ran\n%s" % (len(ran), len(cases), proc.stderr)
    # One line per module run; the table's peak is checked for each case.
    rss = [int(x) for x in rss_log.read_text().split()] if rss_log.exists() else []
    peak = max(rss) / 1024.0 if rss else None
    return [{"result": task["hosts"]["localhost"], "elapsed_s": _duration_s(task), "peak_rss_mib": peak}
            for task in ran], proc.stderr


def assert_refused(table_run: dict, index: int, words: str) -> None:
    """The case failed, with ``words`` in its message, no traceback anywhere, in time, nothing changed."""
    out = table_run["cases"][index]
    res = out["result"]
    msg = str(res.get("msg", ""))
    assert res.get("failed"), res
    assert words in msg, msg
    # The module's own fail_json (it adds 'invocation'), not an exception that escaped it: under
    # ansible-core 2.19 an escaped exception comes back as failed with its message as msg and no
    # traceback unless tracebacks are asked for, like a refusal in all but this.
    assert "invocation" in res, "an exception escaped the module: %r" % (res,)
    for text in (msg, str(res.get("module_stderr", "")), str(res.get("exception", "")),
                 str(res.get("module_stdout", "")), table_run["stderr"]):
        assert "Traceback" not in text, text
    assert out["elapsed_s"] < BOUND_S, out["elapsed_s"]
    assert out["peak_rss_mib"] is not None, "no module run was measured (tests/rsswrap.py)"
    assert out["peak_rss_mib"] < PEAK_RSS_MIB, "a module of the table peaked at %.0f MiB" % out["peak_rss_mib"]
    assert out["unchanged"], "the case's directory %s changed" % out["dir"]
    assert table_run["state_unchanged"], "the table changed the state it must leave alone: %r" % (table_run["state"],)


# --- tables whose cases need prepared input ------------------------------------------------------
#
# ``{in}`` in a case's arguments is replaced by a directory of the case's own, filled by
# ``prepare[case]`` (a function of that directory) before the table runs and hashed before and
# after it, like ``{tmp}``: a sysfs tree built from a captured machine, a record, a bad file.

_PREPARED: dict = {}


def run_prepared(module: str, table: list, prepare: dict, tmp_path_factory, **kw) -> dict:
    """run_table with ``{in}`` directories prepared per case; each outcome says whether its
    prepared directory is unchanged (``in_unchanged``)."""
    key = kw.get("key") or module
    if key in _PREPARED:
        return _PREPARED[key]
    base = tmp_path_factory.mktemp("in-%s" % key)
    filled, dirs = [], []
    for i, (case, args, words) in enumerate(table):
        d = base / ("case-%02d" % i)
        d.mkdir()
        if prepare.get(case):
            prepare[case](d)
        dirs.append(d)
        filled.append((case, _fill(args, d, "{in}"), words))
    before = [snapshot_tree(d) for d in dirs]
    run = run_table(module, filled, tmp_path_factory, **kw)
    for i, d in enumerate(dirs):
        run["cases"][i]["in_unchanged"] = snapshot_tree(d) == before[i]
        run["cases"][i]["in_dir"] = str(d)
    _PREPARED[key] = run
    return run


def assert_refused_prepared(run: dict, index: int, words: str) -> None:
    """assert_refused, ``{tmp}``/``{in}`` in words filled, no MODULE FAILURE, prepared input unchanged."""
    out = run["cases"][index]
    words = words.replace("{tmp}", out["dir"]).replace("{in}", out["in_dir"])
    assert_refused(run, index, words)
    # A module that crashed is reported as MODULE FAILURE (its traceback in module_stderr, which
    # assert_refused searched); 2.19 adds an 'exception' key even to a fail_json called inside
    # an except block, so that key proves nothing.
    assert "MODULE FAILURE" not in str(out["result"].get("msg", "")), out["result"]
    assert out["in_unchanged"], "the case's prepared directory %s changed" % out["in_dir"]
