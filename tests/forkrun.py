#!/usr/bin/env python3
"""Run a module's table of cases the way AnsiballZ runs a module, one fresh process per case, at
the cost of a fork instead of an ansible-playbook task.

A server (this file, started once per table, under ``wrap`` when the table needs a namespace)
imports ansible-core's module support once; for every case it forks, and the child runs the
module exactly as the AnsiballZ wrapper does (``ansible.module_utils._internal._ansiballz._loader``:
``basic._ANSIBLE_ARGS`` set to the JSON Ansible would send, the module run as ``__main__`` by
runpy), with stdout and stderr in files of the case's own and standard input closed. An exception
that escapes the module is printed as a traceback on the case's stderr (what Ansible would show as
MODULE FAILURE). The parent waits up to the case's bound (a pidfd, no polling), kills the child's
process group when it is exceeded, and answers with what the module printed, its exit status, its
wall time and its peak resident memory (``wait4``'s ``ru_maxrss``: the child's own, including the
pages it shares with the server, so an upper bound).

Protocol: one JSON request per line on stdin, one JSON answer per line on stdout.
    request  {"module": NAME, "args": {...}, "check_mode": bool, "diff": bool, "scratch": DIR,
              "timeout": S, "library": DIR (optional: modules found there before fleetnap's library/)}
    answer   {"stdout": str, "stderr": str, "rc": int|null, "elapsed_s": float, "maxrss_kib": int,
              "killed": bool}
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(req: dict, out_path: str, err_path: str) -> None:
    """In the forked child: run the module as AnsiballZ would, then leave without cleanup."""
    code = 1
    try:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        for fd, path in ((1, out_path), (2, err_path)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.chdir(REPO)     # where make test runs ansible-playbook
        if req.get("library"):
            sys.path.insert(0, req["library"])
        from ansible.module_utils._internal._ansiballz import _loader
        from ansible.module_utils.common.json import Direction, get_module_encoder
        args = dict(req["args"], _ansible_check_mode=bool(req.get("check_mode")), _ansible_diff=bool(req.get("diff")),
                    _ansible_remote_tmp=req["scratch"], _ansible_keep_remote_files=False,
                    _ansible_module_name=req["module"])
        encoder = get_module_encoder("legacy", Direction.CONTROLLER_TO_MODULE)
        params = json.dumps({"ANSIBLE_MODULE_ARGS": args}, cls=encoder).encode()
        try:
            name = req["module"].rsplit(".", 1)[-1] if req["module"].startswith("ansible.legacy.") else req["module"]
            _loader._run_module(json_params=params, profile="legacy", module_fqn=name, modlib_path="")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:   # what Ansible would report as MODULE FAILURE, with this traceback
            traceback.print_exc()
            code = 1
    finally:
        try:
            atexit._run_exitfuncs()     # AnsibleModule's own cleanup (its temporary directory)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_case(req: dict) -> dict:
    out_path = os.path.join(req["scratch"], "module.out")
    err_path = os.path.join(req["scratch"], "module.err")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req, out_path, err_path)
    killed = False
    pidfd = os.pidfd_open(pid)
    try:
        ready, _w, _x = select.select([pidfd], [], [], float(req.get("timeout", 90)))
        if not ready:
            killed = True
            for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass
        _pid, status, usage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    elapsed = time.monotonic() - t0
    texts = []
    for path in (out_path, err_path):
        try:
            with open(path, "rb") as fh:
                texts.append(fh.read(256 << 20).decode("utf-8", "replace"))
            os.unlink(path)
        except OSError:
            texts.append("")
    return {"stdout": texts[0], "stderr": texts[1], "killed": killed, "elapsed_s": elapsed,
            "rc": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss}


def serve() -> None:
    sys.path.insert(0, os.path.join(REPO, "library"))
    import ansible.module_utils
    ansible.module_utils.__path__.append(os.path.join(REPO, "module_utils"))
    # Imported once here, inherited by every case's fork.
    import ansible.module_utils.basic
    from ansible.module_utils._internal._ansiballz import _loader
    assert ansible.module_utils.basic.AnsibleModule and _loader.run_module
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(run_case(json.loads(line))) + "\n")
            sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# The tests' side: one server, requests answered in order
# ---------------------------------------------------------------------------------------------

class Server:
    """A running tests/forkrun.py (under ``wrap``, argv put before it: a namespace of its own)."""

    def __init__(self, wrap=()):
        self.proc = subprocess.Popen(list(wrap) + [sys.executable, os.path.abspath(__file__)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def run(self, module: str, args: dict, scratch: str, check_mode=False, diff=False, timeout=90,
            library=None) -> dict:
        """What the server answered for one module run (see the protocol above)."""
        req = {"module": module, "args": args, "scratch": str(scratch), "check_mode": bool(check_mode),
               "diff": bool(diff), "timeout": timeout}
        if library:
            req["library"] = str(library)
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("tests/forkrun.py stopped (rc=%s)" % self.proc.poll())
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def as_result(ran: dict, timeout: float) -> dict:
    """An answer as Ansible reports a module run: the module's JSON with its stderr beside it, or
    MODULE FAILURE with what it printed when it printed no JSON object."""
    text = ran["stdout"]
    try:
        result, _end = json.JSONDecoder().raw_decode(text[text.index("{"):])
        if not isinstance(result, dict):
            raise ValueError("not an object")
    except ValueError:
        result = {"failed": True, "msg": "MODULE FAILURE" + (" (killed after %d s)" % timeout if ran["killed"] else ""),
                  "module_stdout": text, "rc": ran["rc"]}
    # ansible-core 2.19 modules send warnings as WarningSummary objects; the controller reports
    # each as its message (what a playbook shows and the tests read).
    if isinstance(result.get("warnings"), list):
        result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) and isinstance(w.get("event"), dict) else w
                              for w in result["warnings"]]
    result["module_stderr"] = ran["stderr"]
    return result


if __name__ == "__main__":
    serve()
