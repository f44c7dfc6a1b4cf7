#!/usr/bin/env python3
"""gear_shift.yml on the simulated fleet with power, against its floors (issues 17 and 35).

For each fleet size N (``--sizes``, default 30,100): a fresh simulator of N hosts (lab/sim.py,
its own name, subnet and state; every host a real ipmi_sim BMC, S3 by its own write, a wake by
a real magic packet after its own resume time), then, each from cold SSH connections:

1. one concurrent TCP greeting round: every host's sshd connected to at once and its ``SSH-``
   greeting read (from Python, no SSH login: what proves a woken host is back);
2. one ``ansible -m raw -a true`` round over the same N hosts (a login and a command each: what
   telling every host of a batch to suspend needs at least);
3. one ``ansible -m ping`` round (the floor issue 17 used: a login and Python on every host);
4. ``gear_shift.yml -e gear=1`` (3 -> 1: two thirds of the hosts parked in S3);
5. ``gear_shift.yml -e gear=3`` (1 -> 3: woken by magic packets).

Floors, each the hosts' own time plus the least network work the step needs (issue 35):
floor(up) = the slowest woken host's own resume time (the simulator's draw, read back from its
table) + the greeting round; floor(down) = the raw round + the suspend delay (gear_member
schedules the suspend one second after its session closed; the host is silent as soon as it
writes). Issue 17's ping-based floors (ping round + the slowest own transition) are printed
beside them for comparison. Each shift's result must be ok and every host where the plan put it
(checked in the simulator's own power logs, not in what the playbook says), so no run can win by
doing nothing.

    python tests/bench/bench_gear_shift_sim.py [--sizes 30,100,300] [--json out.json]

With ``--repeat R`` the rounds and the two shifts run R times on each simulator (down and up
again, each from cold connections, each verified); the ratio stated is the median shift over the
median floor. Targets: each shift <= 1.5x its floor (issue 35's physical floors); the ping-based
ratios (issue 17) are reported, not targets any more. The report goes to
docs/bench/gear_shift_sim.txt (benchlib); exit 1 when a run failed or did not verify, or when a
target was missed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Report, spread  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SIM = ["/usr/bin/python3", str(REPO / "lab" / "sim.py")]
TARGET = 1.5
SUSPEND_DEFER_S = 1.0          # gear_member's detached write waits this long after the session


class BenchError(Exception):
    pass


def failure(what: str, out: str) -> BenchError:
    """What failed: the playbook's fatal and failure lines first, then its tail."""
    lines = [ln for ln in out.splitlines() if "fatal:" in ln or "FAILED!" in ln or '"msg"' in ln]
    return BenchError("%s: %s\n...\n%s" % (what, "\n".join(lines[:20])[:4000], out[-1500:]))


def sim(base: Path, n: int, *args: str, timeout: int = 900) -> str:
    subnet = ipaddress.ip_network("10.249.0.0/20")
    cmd = SIM + ["--state", str(base / "state"), "--inventory", str(base / "inv"), "--name", "bgs",
                 "--subnet", str(subnet)] + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise BenchError("sim.py %s: %s" % (" ".join(args), proc.stderr.strip()[-2000:]))
    return proc.stdout


def ansible_env(base: Path, tag: str) -> dict:
    cp = base / ("cp-" + tag)           # cold SSH connections for every run
    cp.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_SSH_CONTROL_PATH_DIR=str(cp), ANSIBLE_FORKS="50")


def timed(cmd: list[str], env: dict, timeout: int = 3600) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout)
    return time.monotonic() - t0, proc


def greeting_round(addresses: list[str], port: int = 22, timeout: float = 10.0) -> float:
    """Seconds until every address's sshd has greeted (connected to all at once, one thread each);
    raises BenchError naming the hosts that did not greet within ``timeout``."""
    bad = []

    def greet(addr):
        try:
            with socket.create_connection((addr, port), timeout=timeout) as conn:
                conn.settimeout(timeout)
                if not conn.recv(64).startswith(b"SSH-"):
                    bad.append(addr)
        except OSError:
            bad.append(addr)
    threads = [threading.Thread(target=greet, args=(a,)) for a in addresses]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    if bad:
        raise BenchError("no SSH greeting from %d host(s) within %g s: %s" % (len(bad), timeout, sorted(bad)[:10]))
    return took


def power_states(base: Path) -> dict:
    out = {}
    for hdir in (base / "state" / "hosts").iterdir():
        lines = (hdir / "power.jsonl").read_text().splitlines()
        out[hdir.name] = json.loads(lines[-1])["state"]
    return out


def one_size(n: int, keep: bool, repeat: int = 1) -> dict:
    base = Path(tempfile.mkdtemp(prefix="fleetnap-bench-gear-%d." % n))
    try:
        sim(base, n, "down")
        t0 = time.monotonic()
        sim(base, n, "up", "--hosts", str(n))
        up_s = time.monotonic() - t0
        table = json.loads((base / "state" / "sim.json").read_text())
        resume = {h["name"]: h["resume_s"] for h in table["hosts"]}
        inv = str(base / "inv")
        runs = {"greet": [], "raw": [], "ping": [], "down": [], "up": [], "floor_down": [], "floor_up": [],
                "ping_floor_down": [], "ping_floor_up": []}
        addresses = [h["ip"] for h in table["hosts"]]
        slowest = 0.0
        for r in range(repeat):
            greet_s = greeting_round(addresses)
            raw_s, proc = timed([str(VENV_BIN / "ansible"), "-i", inv, "all", "-m", "ansible.builtin.raw", "-a", "true"],
                                ansible_env(base, "raw%d" % r))
            if proc.returncode != 0:
                raise failure("raw round failed", proc.stdout)
            ping_s, proc = timed([str(VENV_BIN / "ansible"), "-i", inv, "all", "-m", "ansible.builtin.ping"],
                                 ansible_env(base, "ping%d" % r))
            if proc.returncode != 0:
                raise failure("ping round failed", proc.stdout)
            gear_dir = base / "gear"
            shift = [str(VENV_BIN / "ansible-playbook"), "-i", inv, str(REPO / "playbooks" / "gear_shift.yml"),
                     "-e", "gear_shift_state_dir=%s" % gear_dir]
            down_s, proc = timed(shift + ["-e", "gear_shift_gear=1"], ansible_env(base, "down%d" % r))
            if proc.returncode != 0:
                raise failure("3 -> 1 failed", proc.stdout)
            states = power_states(base)
            parked = sorted(h for h, s in states.items() if s != "on")
            group = {h["name"]: h["gear_group"] for h in table["hosts"]}
            off_groups = {group[h] for h in parked}
            if len(off_groups) != 2 or any(states[h] != "S3" for h in parked) \
                    or sorted(h for h in group if group[h] in off_groups) != parked:
                raise BenchError("3 -> 1 did not park exactly two gear groups in S3: %s" % states)
            up_shift_s, proc = timed(shift + ["-e", "gear_shift_gear=3"], ansible_env(base, "up%d" % r))
            if proc.returncode != 0:
                raise failure("1 -> 3 failed", proc.stdout)
            states = power_states(base)
            if any(s != "on" for s in states.values()):
                raise BenchError("1 -> 3 left hosts down: %s" % {h: s for h, s in states.items() if s != "on"})
            slowest = max(resume[h] for h in parked)
            runs["greet"].append(greet_s)
            runs["raw"].append(raw_s)
            runs["ping"].append(ping_s)
            runs["down"].append(down_s)
            runs["up"].append(up_shift_s)
            runs["floor_down"].append(raw_s + SUSPEND_DEFER_S)
            runs["floor_up"].append(slowest + greet_s)
            runs["ping_floor_down"].append(ping_s + SUSPEND_DEFER_S)
            runs["ping_floor_up"].append(ping_s + slowest)
        med = {k: spread(v)["median"] for k, v in runs.items()}
        return {"hosts": n, "sim_up_s": round(up_s, 2), "parked": len(parked), "runs": runs,
                "greet_s": med["greet"], "raw_s": med["raw"], "ping_s": med["ping"], "down_s": med["down"],
                "up_s": med["up"], "floor_down_s": med["floor_down"], "floor_up_s": med["floor_up"],
                "slowest_resume_s": slowest,
                "down_ratio": med["down"] / med["floor_down"], "up_ratio": med["up"] / med["floor_up"],
                "ping_down_ratio": med["down"] / med["ping_floor_down"],
                "ping_up_ratio": med["up"] / med["ping_floor_up"]}
    finally:
        if not keep:
            try:
                sim(base, n, "down")
            finally:
                subprocess.run(["rm", "-rf", str(base)], check=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="30,100", help="fleet sizes, comma-separated (default 30,100)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--keep", action="store_true", help="leave the last simulator running")
    ap.add_argument("--repeat", type=int, default=1, help="down and up shifts per size (median quoted)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = []
    rep = Report("gear_shift_sim", argv=argv)
    try:
        for i, n in enumerate(sizes):
            row = one_size(n, args.keep and i == len(sizes) - 1, args.repeat)
            rows.append(row)
            rep.print("%d simulated hosts (%d parked in S3 by 3 -> 1; slowest resume %.1f s); each line a median:"
                      % (n, row["parked"], row["slowest_resume_s"]))
            rep.runs("  TCP greeting round, %d hosts" % n, row["runs"]["greet"])
            rep.runs("  ansible -m raw -a true round, %d hosts" % n, row["runs"]["raw"])
            rep.runs("  ansible -m ping round, %d hosts" % n, row["runs"]["ping"])
            for what, name, floor in (("down", "3->1", "raw round + suspend delay %.0f s" % SUSPEND_DEFER_S),
                                      ("up", "1->3", "slowest own resume + greeting round")):
                rep.runs("  gear shift %s, %d hosts" % (name, n), row["runs"][what])
                rep.runs("  floor %s (%s), %d hosts" % (name, floor, n), row["runs"]["floor_%s" % what])
                rep.target("gear shift %s on %d hosts / physical floor (medians)" % (name, n), row["%s_ratio" % what],
                           "<=", TARGET, "x")
                rep.runs("  issue 17's floor %s (ping + slowest own transition), %d hosts" % (name, n),
                         row["runs"]["ping_floor_%s" % what])
                rep.print("  gear shift %s on %d hosts / issue 17's ping floor (medians): %.2f x (reported, not a target)"
                          % (name, n, row["ping_%s_ratio" % what]))
    except BenchError as exc:
        rep.print("bench_gear_shift_sim: %s" % exc)
        rep.finish()
        return 1
    if len(rows) > 1:
        first = rows[0]
        for row in rows[1:]:
            rep.print("growth %d -> %d hosts (x%.1f): down x%.2f, up x%.2f, raw x%.2f, ping x%.2f (medians)"
                      % (first["hosts"], row["hosts"], row["hosts"] / first["hosts"], row["down_s"] / first["down_s"],
                         row["up_s"] / first["up_s"], row["raw_s"] / first["raw_s"], row["ping_s"] / first["ping_s"]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
