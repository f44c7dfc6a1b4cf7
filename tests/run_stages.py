#!/usr/bin/env python3
"""Run 'make' stages in order, stop at the first that fails, always run the --finally targets,
and print each stage's wall time and result at the end (what 'make test' prints).

    python tests/run_stages.py lint test-unit test-sim test-lab test-molecule --finally lab-down \
        --background lab-up:test-lab

``--background TARGET:STAGE`` starts TARGET at once, beside the stages (its output in
LOG_DIR/TARGET.log), and waits for it before STAGE: the lab's guests boot while lint runs
(mostly one core) instead of at the start of the lab suite. If it failed, its log is printed and
STAGE runs anyway (the lab suite's fixture brings the lab up itself and says why it cannot).
When a stage fails before STAGE, TARGET is stopped (its process group) before the --finally
targets run.

``--beside STAGE[,STAGE...]:WITH[:NICE]`` runs those stages one after another, at CPU priority
NICE (19, the lowest, unless given), from the moment stage WITH starts, and the stage after WITH
waits for them: they take the CPU WITH leaves idle (the fleet simulator keeps about 1.15 of CI's 2
cores busy) without slowing it, and whatever is left of them runs alone after it, never beside a
later stage. They count as any stage does. Their output goes to their logs only; each one's end
is printed when it comes. A stage in front does not start once one beside failed, nor does one
beside start once one in front failed; the run waits for them before --finally.

The table at the end gives each stage's wall time and how many of the machine's cores were busy
during it on average (everything on the machine, stages beside it included; from /proc/stat): where
a stage leaves cores idle, something can run beside it.

Each stage's output is printed as it comes and kept in LOG_DIR/stage-NAME.log. When a stage
failed, the very end of the output (after the table of times, where a CI summary that shows only
the last lines of a run still sees it) says why: the lines of its log that name a failure (pytest's
``E`` lines and FAILED summary, Ansible's fatal/failed results, tracebacks, make's errors), colour
codes and molecule's frame removed, at most DIGEST_LINES of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time


DIGEST_LINES = 40
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FRAME = re.compile(r"^[\s\u2500-\u257f]*")          # molecule's box-drawing frame and indent
FAILURE = re.compile(
    r"^E\s|^(FAILED|ERROR)\b|^_{3,} .* _{3,}$|fatal: \[|failed: \[|FAILED!|Traceback \(most recent|"
    r"^\w*(Error|Exception)\b|^[\w/.-]+\.py:\d+: \w*(Error|Exception)|\*\*\* .*Error \d+|"
    r"molecule scenario \S+: FAILED|Verifier tests failed|unreachable=[1-9]|failed=[1-9]")


def failure_lines(path: str, limit: int = DIGEST_LINES) -> list[str]:
    """The lines of a stage's log that say what failed (see the module's docstring)."""
    found = []
    with open(path, errors="replace") as fh:
        for raw in fh:
            line = FRAME.sub("", ANSI.sub("", raw.rstrip("\n"))).rstrip()
            if FAILURE.search(line):
                found.append(line[:300])
    if len(found) > limit:
        found = found[:limit - 1] + ["... and %d more such lines" % (len(found) - limit + 1)]
    return found


SKIPPED = re.compile(r"^skipped: (\d+) tests?$")


def skipped_tests(path: str) -> int | None:
    """The tests skipped in a stage: the sum of the "skipped: N tests" lines its pytest runs end
    with (tests/conftest.py prints one per run, with the reasons); None when the stage ran none."""
    found = None
    with open(path, errors="replace") as fh:
        for raw in fh:
            m = SKIPPED.match(ANSI.sub("", raw.strip()))
            if m:
                found = (found or 0) + int(m.group(1))
    return found


def cpu_jiffies(path: str = "/proc/stat") -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat's first line (busy: all but
    idle and iowait); None where there is no such file."""
    try:
        with open(path) as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if len(fields) < 6 or fields[0] != "cpu" or not all(f.isdigit() for f in fields[1:]):
        return None
    values = [int(f) for f in fields[1:9]]          # user nice system idle iowait irq softirq steal
    return sum(values) - values[3] - values[4], sum(values)


def cores_busy(before, after, cpus: int | None = None) -> str:
    """"1.72 of 2 cores busy" between two cpu_jiffies() readings ("" when either is missing)."""
    cpus = cpus or os.cpu_count() or 1
    if not before or not after or after[1] <= before[1]:
        return ""
    return "%.2f of %d cores busy" % ((after[0] - before[0]) / (after[1] - before[1]) * cpus, cpus)


def run(target: str, log_dir: str) -> tuple[int, float, str]:
    """make TARGET, its output printed as it comes and kept in LOG_DIR/stage-TARGET.log."""
    t0 = time.monotonic()
    print("\n===== make %s =====" % target, flush=True)
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, "stage-%s.log" % target)
    with open(path, "wb") as log:
        proc = subprocess.Popen(["make", "--no-print-directory", target], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        out = sys.stdout.buffer
        for chunk in iter(lambda: proc.stdout.readline(), b""):
            out.write(chunk)
            out.flush()
            log.write(chunk)
        rc = proc.wait()
    return rc, time.monotonic() - t0, path


class Background(object):
    def __init__(self, spec: str, log_dir: str):
        self.target, _, self.before = spec.partition(":")
        os.makedirs(log_dir, exist_ok=True)
        self.log_path = os.path.join(log_dir, "%s.log" % self.target)
        self.t0 = time.monotonic()
        print("===== make %s (in the background until %s; log: %s) ====="
              % (self.target, self.before or "the end", self.log_path), flush=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(["make", "--no-print-directory", self.target], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.row = None
        self.ended = None       # when it ended (a thread waits for it), for its own run time
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        self.proc.wait()
        self.ended = time.monotonic()

    def stop(self) -> None:
        """A stage failed: the target is not needed any more; stop it (its process group)."""
        if self.row is None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.row = (self.target + " (bg)", time.monotonic() - self.t0, "stopped (a stage failed)")

    def wait(self) -> tuple:
        if self.row is None:
            t_wait = time.monotonic()
            rc = self.proc.wait()
            self.watcher.join()
            waited = time.monotonic() - t_wait
            secs = self.ended - self.t0
            what = "passed (background; waited %.0f s for it)" % waited if rc == 0 else "FAILED (rc=%d)" % rc
            print("\n===== make %s (background): %s; it ran %.0f s =====" % (self.target, what, secs), flush=True)
            if rc:
                with open(self.log_path, errors="replace") as fh:
                    print(fh.read()[-6000:], flush=True)
            self.row = (self.target + " (bg)", secs, what)
        return self.row


class Beside(object):
    """Stages run one after another at a low CPU priority in a thread of their own (see the module's
    docstring)."""

    def __init__(self, spec: str, log_dir: str):
        parts = spec.split(":")
        self.stages = [s for s in parts[0].split(",") if s]
        self.with_stage = parts[1] if len(parts) > 1 else ""
        nice = parts[2] if len(parts) > 2 else "19"
        if len(parts) > 3 or not self.stages or not self.with_stage or not nice.isdigit() or not 0 <= int(nice) <= 19:
            raise ValueError("--beside %r: expected STAGE[,STAGE...]:WITH[:NICE], NICE 0..19" % spec)
        self.nice = int(nice)
        self.log_dir = log_dir
        os.makedirs(log_dir, exist_ok=True)
        self.rows: list[tuple] = []
        self.failed_log = None
        self.front_failed = threading.Event()
        self.thread = None
        self.joined = False

    def start(self) -> None:
        print("===== make %s (beside %s, nice %d; logs: %s/stage-NAME.log) ====="
              % (", ".join(self.stages), self.with_stage, self.nice, self.log_dir), flush=True)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _lower_priority(self) -> None:
        """In the child: nice NICE itself, not NICE more than this process (``nice -n`` adds to
        what the caller has); never higher than it is already (that would need root)."""
        os.setpriority(os.PRIO_PROCESS, 0, max(self.nice, os.getpriority(os.PRIO_PROCESS, 0)))

    def _command(self, stage: str) -> list[str]:
        """make STAGE; at nice 19 also in the idle I/O class (util-linux's ionice, on every Debian
        system: a stage beside the lab's guests writes its many small files only when their disks
        are idle), else as it is."""
        ionice = shutil.which("ionice")
        prefix = [ionice, "-c", "3"] if self.nice == 19 and ionice else []
        return prefix + ["make", "--no-print-directory", stage]

    @property
    def failed(self) -> bool:
        return self.failed_log is not None

    def _run(self) -> None:
        for stage in self.stages:
            if self.failed or self.front_failed.is_set():
                self.rows.append((stage + " (beside)", None, "not run"))
                continue
            t0 = time.monotonic()
            path = os.path.join(self.log_dir, "stage-%s.log" % stage)
            try:
                with open(path, "wb") as log:
                    rc = subprocess.call(self._command(stage), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=self._lower_priority)
            except OSError as exc:      # no log, no nice: a failure of the stage, said so
                print("run_stages: cannot run make %s beside %s: %s" % (stage, self.with_stage, exc), flush=True)
                rc = 127
            secs = time.monotonic() - t0
            skipped = skipped_tests(path)
            what = ("passed" if rc == 0 else "FAILED (rc=%d)" % rc) + (
                "" if skipped is None else "; %d skipped (reasons in its log)" % skipped)
            print("\n===== make %s (beside %s): %s in %.0f s =====" % (stage, self.with_stage, what, secs), flush=True)
            self.rows.append((stage + " (beside)", secs, what))
            if rc:
                self.failed_log = (stage, path)

    def wait(self) -> list[tuple]:
        """Their rows, once they ended (not run: never started)."""
        if self.thread is None:
            self.rows = [(stage + " (beside)", None, "not run") for stage in self.stages]
        else:
            t0 = time.monotonic()
            self.thread.join()
            if time.monotonic() - t0 > 1:
                print("\n===== waited %.0f s for %s (beside %s) =====" % (time.monotonic() - t0, ", ".join(self.stages),
                                                                     self.with_stage), flush=True)
        self.joined = True
        return self.rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="+")
    ap.add_argument("--finally", dest="final", action="append", default=[],
                    help="a target run at the end whatever happened (repeatable)")
    ap.add_argument("--background", action="append", default=[], metavar="TARGET:STAGE",
                    help="start TARGET at once, wait for it before STAGE (repeatable)")
    ap.add_argument("--beside", action="append", default=[], metavar="STAGE[,STAGE...]:WITH[:NICE]",
                    help="run these stages at nice NICE (19) from when WITH starts (repeatable)")
    ap.add_argument("--log-dir", default="artifacts")
    args = ap.parse_args(argv)
    rows, rc = [], 0
    failed_log = None
    t_all = time.monotonic()
    try:
        beside = [Beside(spec, args.log_dir) for spec in args.beside]
    except ValueError as exc:
        ap.error(str(exc))
    unknown = [b.with_stage for b in beside if b.with_stage not in args.stages]
    if unknown:
        ap.error("--beside ...:WITH must name one of the stages: %s" % ", ".join(unknown))
    background = [Background(spec, args.log_dir) for spec in args.background]
    for stage in args.stages:
        if rc or any(b.failed for b in beside):
            rows.append((stage, None, "not run"))
            continue
        for bg in background:
            if bg.before == stage and bg.row is None:
                rows.append(bg.wait())
        for b in beside:            # the stages beside an earlier stage end before this one starts
            if b.thread is not None and not b.joined:
                rows.extend(b.wait())
        if any(b.failed for b in beside):
            rows.append((stage, None, "not run"))
            continue
        for b in beside:
            if b.with_stage == stage:
                b.start()
        cpu0 = cpu_jiffies()
        code, secs, log = run(stage, args.log_dir)
        busy = cores_busy(cpu0, cpu_jiffies())
        skipped = skipped_tests(log)
        rows.append((stage, secs, ("passed" if code == 0 else "FAILED (rc=%d)" % code)
                     + ("" if skipped is None else "; %d skipped (reasons in its log)" % skipped)
                     + ("; %s (with what ran beside it)" % busy if busy else "")))
        if code:
            failed_log = (stage, log)
        rc = code
        if rc:
            for b in beside:
                b.front_failed.set()
    for b in beside:            # stages beside end before the --finally ones (lab-down)
        if not b.joined:
            rows.extend(b.wait())
        if b.failed and failed_log is None:
            failed_log = b.failed_log
        rc = rc or (2 if b.failed else 0)
    for bg in background:       # a background target ends before the --finally ones (lab-down)
        if bg.row is None:
            if rc:
                bg.stop()
                rows.append(bg.row)
            else:
                rows.append(bg.wait())
    for target in args.final:
        code, secs, log = run(target, args.log_dir)
        rows.append((target, secs, "done" if code == 0 else "FAILED (rc=%d)" % code))
        if code and failed_log is None:
            failed_log = (target, log)
        rc = rc or code
    total = time.monotonic() - t_all
    print("\n===== stages =====")
    for name, secs, what in rows:
        print("%-24s %9s  %s" % (name, "-" if secs is None else "%.0f s" % secs, what))
    print("%-24s %9s" % ("total", "%.0f s" % total))
    if failed_log:
        name, path = failed_log
        lines = failure_lines(path)
        print("\n===== why %s failed (the lines of %s that name a failure) =====" % (name, path))
        print("\n".join(lines) if lines else "(none found: read the log)", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
