#!/usr/bin/env python3
"""apply_profile on a simulated fleet versus the naive playbook and the ping floor (issue 9).

Needs a running simulator (``make sim-up``: lab/sim.py, N hosts, each its own sshd, network
and mount namespace with a captured machine's cpuidle sysfs). In one run it measures, over the
same hosts, each run starting from pristine hosts (``sim.py reset``) and cold SSH connections
(a fresh ControlPath directory, so ControlPersist masters are not inherited from the run
before):

1. ``ansible -m ansible.builtin.ping`` -- the floor: one SSH connection and one module per host;
2. ``fleetnap_profile cstates.max_latency_us=<budget>`` ad hoc: the role's one module call per
   host alone (the same C-state gate and sleep policy as apply_profile) -- what the playbook costs
   without its controller-side tasks, a reference;
3. ``playbooks/apply_profile.yml`` with a profile of ``--budget`` us (declared margin 1.0);
   ``apply_cpufreq``: the same profile with a CPU frequency part (``cpufreq: {governor:
   performance, max_khz: max}``, which every captured machine takes), in the same one module
   call per host (issue 38);
4. ``tests/bench/naive_apply_profile.yml`` -- the same end state written by hand: full fact
   gathering, a shell task to find the states over the budget, then one ``echo 1 > .../disable``
   shell task per state (``--naive-granularity state``, the default) or per CPU and state
   (``cpu_state``: about one second per item per host here, i.e. hours for 100 hosts).

After every run it reads back EVERY ``cpuidle/stateN/disable`` file of every host through the
host's own mount namespace (``/proc/<sshd pid>/root``) and compares with an oracle computed
straight from tests/data/cpuidle (disabled iff the declared latency exceeds the budget; the
captured value otherwise): the ping run must leave the captures untouched, both profile runs
must end in exactly that state -- so no run can win by doing nothing. After ``apply_cpufreq`` it
also reads every policy's ``scaling_governor`` and ``scaling_max_freq`` (performance, and the
policy's own ``cpuinfo_max_freq``). Besides wall time it
reports the CPU seconds the controller's ansible processes used and the CPU seconds spent on
the simulated hosts (every process in their namespaces: sshd sessions and modules).

    python tests/bench/bench_apply_profile.py [--budget 10] [--limit N] [--json out.json]

Targets, on the medians of ``--repeat`` runs: apply <= 1.2x ping (issue 36; issue 9 asked 2x),
naive >= 5x apply (issue 9). The controller's CPU seconds are printed beside, as ratios too.
The report goes to docs/bench/apply_profile.txt (benchlib); exit status 1 when a run failed or
did not verify, or when a target was missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Report  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CPUIDLE_DATA = REPO / "tests" / "data" / "cpuidle"
VENV_BIN = Path(sys.executable).parent
SIM = ["/usr/bin/python3", str(REPO / "lab" / "sim.py")]
STATE_FILE = re.compile(r"^/sys/devices/system/cpu/(cpu\d+/cpuidle/state\d+)/(latency|disable|name)$")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


class BenchError(Exception):
    pass


def captured(machine: str) -> dict:
    """{'cpuN/cpuidle/stateM': {'latency': int, 'disable': str, 'name': str}} from the capture."""
    out: dict = {}
    for line in (CPUIDLE_DATA / ("%s.txt" % machine)).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        _mode, path, value = line.split("|", 2)
        m = STATE_FILE.match(path)
        if m:
            out.setdefault(m.group(1), {})[m.group(2)] = value
    return out


def expected(machine: str, budget_us: float | None) -> dict:
    """{'cpuN/cpuidle/stateM': '0'|'1'} after a run: budget None = untouched."""
    want = {}
    for key, st in captured(machine).items():
        over = budget_us is not None and st["name"] != "POLL" and int(st["latency"]) > budget_us
        want[key] = "1" if over else st["disable"]
    return want


def sim(args, *cmd: str) -> str:
    proc = subprocess.run(SIM + ["--state", str(args.state), "--inventory", str(args.inventory),
                                 "--name", args.name, "--subnet", args.subnet] + list(cmd),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError("lab/sim.py %s failed: %s" % (" ".join(cmd), proc.stderr.strip()))
    return proc.stdout


def hosts_of(args) -> list[dict]:
    table = json.loads((args.state / "sim.json").read_text())
    return table["hosts"]


def netns_cpu_seconds(hosts: list[dict]) -> float:
    """CPU seconds of every process in the hosts' network namespaces (with reaped children)."""
    hz = os.sysconf("SC_CLK_TCK")
    ticks = 0
    for h in hosts:
        pids = subprocess.run(["ip", "netns", "pids", h["netns"]], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                fields = Path("/proc/%s/stat" % pid).read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += sum(int(x) for x in fields[11:15])      # utime stime cutime cstime
    return ticks / hz


def verify(hosts: list[dict], budget_us: float | None, cpufreq=False) -> tuple[int, list[str]]:
    """Read every disable file of every host through its namespace (and with ``cpufreq`` every
    policy's governor and maximum); (files checked, problems)."""
    problems, checked = [], 0
    for h in hosts:
        root = Path("/proc/%d/root/sys/devices/system/cpu" % h["pid"])
        want = expected(h["machine"], budget_us)
        bad = []
        for policy in sorted(root.glob("cpufreq/policy*")) if cpufreq else []:
            got = ((policy / "scaling_governor").read_text().strip(), (policy / "scaling_max_freq").read_text().strip())
            top = (policy / "cpuinfo_max_freq").read_text().strip()
            checked += 2
            if got != ("performance", top):
                bad.append("%s governor/max=%s (want performance/%s)" % (policy.name, "/".join(got), top))
        for key, value in sorted(want.items()):
            got = (root / key / "disable").read_text().strip()
            checked += 1
            if got != value:
                bad.append("%s/disable=%s (want %s)" % (key, got, value))
        if bad:
            problems.append("%s (%s): %d wrong, e.g. %s" % (h["name"], h["machine"], len(bad), bad[0]))
    return checked, problems


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_run(args, label: str, cmd: list[str], hosts: list[dict], logdir: Path) -> dict:
    sim(args, "reset")                            # pristine hosts, fresh sessions
    before_target = netns_cpu_seconds(hosts)
    cpdir = Path(tempfile.mkdtemp(prefix="cp-", dir=str(logdir)))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_SSH_CONTROL_PATH_DIR=str(cpdir), ANSIBLE_FORCE_COLOR="0")
    c0 = children_cpu()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO))
    wall = time.monotonic() - t0
    controller = children_cpu() - c0
    target = netns_cpu_seconds(hosts) - before_target
    log = logdir / ("%s.log" % label)
    log.write_text("$ %s\n%s\n--- stderr ---\n%s" % (" ".join(cmd), proc.stdout, proc.stderr))
    # Stop the ControlPersist masters this run left (they belong to this run's ControlPath).
    for sock in cpdir.iterdir():
        subprocess.run(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "x"], capture_output=True)
    if proc.returncode != 0:
        raise BenchError("%s failed (rc=%d), see %s:\n%s" % (label, proc.returncode, log, proc.stdout[-1500:]))
    if label in ("ping", "gate"):
        ok = len(re.findall(r"^\S+ \| (SUCCESS|CHANGED) =>", proc.stdout, re.M))
        if ok != len(hosts):
            raise BenchError("ping: %d of %d hosts answered, see %s" % (ok, len(hosts), log))
    else:
        recap = {m.group(1): m.groups()[1:] for m in RECAP.finditer(proc.stdout)}
        missing = [h["name"] for h in hosts if h["name"] not in recap]
        failed = [n for n, (_ok, _ch, unreach, fail) in recap.items() if int(unreach) or int(fail)]
        if missing or failed:
            raise BenchError("%s: hosts missing from the recap %s, failed/unreachable %s; see %s"
                             % (label, missing[:5], failed[:5], log))
    return {"run": label, "seconds": round(wall, 2), "controller_cpu_s": round(controller, 1),
            "hosts_cpu_s": round(target, 1), "log": str(log)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", type=Path, default=Path(os.environ.get("SIM_STATE", REPO / "lab" / "sim-state")))
    ap.add_argument("--inventory", type=Path, default=Path(os.environ.get("SIM_INVENTORY", REPO / "inventories" / "sim")))
    ap.add_argument("--name", default=os.environ.get("SIM_NAME", "sim"))
    ap.add_argument("--subnet", default=os.environ.get("SIM_SUBNET", "10.251.0.0/16"))
    ap.add_argument("--budget", type=float, default=10.0, help="latency budget in us (default 10: "
                    "disables at least one state on every captured machine)")
    ap.add_argument("--naive-granularity", choices=["state", "cpu_state"], default="state")
    ap.add_argument("--runs", default="ping,gate,apply,apply_cpufreq,naive", help="comma-separated subset, in order")
    ap.add_argument("--limit", type=int, default=0, help="only the first N hosts (0: all)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each of ping, gate and apply (median quoted)")
    ap.add_argument("--naive-repeat", type=int, default=1, help="runs of the naive playbook")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    args.state, args.inventory = args.state.resolve(), args.inventory.resolve()
    # Made before the runs: its header's date and load are the ones before them.
    rep = Report("apply_profile" + ("" if args.naive_granularity == "state" else "-" + args.naive_granularity)
                 + ("-%d-hosts" % args.limit if args.limit else ""), argv=argv)
    try:
        if not (args.state / "sim.json").exists():
            raise BenchError("no simulator in %s: run `make sim-up` first" % args.state)
        status = json.loads(sim(args, "status", "--json"))
        down = [r["host"] for r in status if not r["ssh"]]
        if down:
            raise BenchError("simulated hosts not answering SSH: %s (run `make sim-up`)" % ", ".join(down[:10]))
        logdir = Path(tempfile.mkdtemp(prefix="bench-apply-profile-"))
        if args.limit:
            status = status[:args.limit]
        n = len(status)
        pattern = ",".join(r["host"] for r in status)
        load0 = os.getloadavg()
        profile = {"bench": {"budget_us": args.budget, "resume_budget_ms": None, "declared_margin": 1.0}}
        freq_profile = {"bench": dict(profile["bench"], cpufreq={"governor": "performance", "max_khz": "max"})}
        inv = str(args.inventory)
        commands = {
            "ping": [str(VENV_BIN / "ansible"), "-i", inv, pattern, "-m", "ansible.builtin.ping"],
            "gate": [str(VENV_BIN / "ansible"), "-i", inv, pattern, "-b", "-M", str(REPO / "library"),
                     "-m", "fleetnap_profile", "-a", json.dumps({"cstates": {"max_latency_us": args.budget}})],
            "apply": [str(VENV_BIN / "ansible-playbook"), "-i", inv, "playbooks/apply_profile.yml",
                      "-e", json.dumps({"fleetnap_profiles": profile, "fleetnap_profile": "bench",
                                        "fleetnap_targets": pattern})],
            "apply_cpufreq": [str(VENV_BIN / "ansible-playbook"), "-i", inv, "playbooks/apply_profile.yml",
                              "-e", json.dumps({"fleetnap_profiles": freq_profile, "fleetnap_profile": "bench",
                                                "fleetnap_targets": pattern})],
            "naive": [str(VENV_BIN / "ansible-playbook"), "-i", inv, "tests/bench/naive_apply_profile.yml",
                      "-e", json.dumps({"naive_budget_us": args.budget, "naive_targets": pattern,
                                        "naive_granularity": args.naive_granularity})],
        }
        results = {}
        for label in [r.strip() for r in args.runs.split(",") if r.strip()]:
            if label not in commands:
                raise BenchError("--runs: unknown run %r (%s)" % (label, ", ".join(commands)))
            for _ in range(args.naive_repeat if label == "naive" else args.repeat):
                hosts = hosts_of(args)[:n]    # pids change with every reset
                res = timed_run(args, label, commands[label], hosts, logdir)
                hosts = hosts_of(args)[:n]
                checked, problems = verify(hosts, None if label == "ping" else args.budget, label == "apply_cpufreq")
                if problems:
                    raise BenchError("%s: hosts did not end in the expected state:\n  %s\nlog: %s"
                                     % (label, "\n  ".join(problems[:10]), res["log"]))
                res["verified_files"] = checked
                results.setdefault(label, []).append(res)
                print("%-6s %7.1f s  (verified %d disable files on %d hosts)" % (label, res["seconds"], checked, n),
                      file=sys.stderr, flush=True)
        sim(args, "reset")
    except BenchError as exc:
        print("bench_apply_profile: %s" % exc, file=sys.stderr)
        return 1

    machines = sorted({h["machine"] for h in hosts_of(args)[:n]})
    rep.print("apply_profile on %d simulated hosts (%d captured machines, budget %g us, forks from "
              "ansible.cfg; load average before %.1f)" % (n, len(machines), args.budget, load0[0]))
    names = {"ping": "ansible -m ping (floor)", "gate": "fleetnap_profile alone (ad hoc, 1 call per host)",
             "apply": "playbooks/apply_profile.yml",
             "apply_cpufreq": "apply_profile.yml, profile with cpufreq",
             "naive": "naive playbook (one shell task per %s)" % args.naive_granularity.replace("cpu_state", "CPU and state")}
    rep.print("%-48s %9s %15s %12s" % ("run (each line one run)", "seconds", "controller CPU s", "hosts CPU s"))
    for label, runs in results.items():
        for res in runs:
            rep.print("%-48s %9.1f %15.1f %12.1f" % (names[label], res["seconds"], res["controller_cpu_s"],
                                                     res["hosts_cpu_s"]))
    med = {label: rep.runs(names[label], [r["seconds"] for r in runs])["median"] for label, runs in results.items()}
    cpu = {label: sorted(r["controller_cpu_s"] for r in runs)[len(runs) // 2] for label, runs in results.items()}
    if "ping" in med and "apply" in med:
        rep.target("apply / ping (medians)", med["apply"] / med["ping"], "<=", 1.2, "x")
        rep.print("controller CPU, apply / ping (medians): %.1f s / %.1f s = %.2fx"
                  % (cpu["apply"], cpu["ping"], cpu["apply"] / cpu["ping"]))
        rep.print("for comparison, issue 36 at 4d25784: apply / ping 1.86x (56.3 s / 30.4 s), controller CPU "
                  "46.8 s / 15.5 s")
    if "ping" in med and "apply_cpufreq" in med:
        rep.target("apply with cpufreq / ping (medians)", med["apply_cpufreq"] / med["ping"], "<=", 1.2, "x")
    if "apply" in med and "naive" in med:
        rep.target("naive / apply (medians)", med["naive"] / med["apply"], ">=", 5.0, "x")
    if "ping" in med and "gate" in med:
        rep.print("fleetnap_profile alone / ping (medians, a reference, not a target): %.2fx; controller CPU %.2fx"
                  % (med["gate"] / med["ping"], cpu["gate"] / cpu["ping"]))
    if args.json:
        args.json.write_text(json.dumps({"hosts": n, "budget_us": args.budget, "load_before": load0,
                                         "results": results, "medians_s": med}, indent=2) + "\n")
    shutil.rmtree(logdir, ignore_errors=True)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
