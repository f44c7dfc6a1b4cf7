# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ipmitool helpers for bmc_power: argv without secrets, status parsing, rate limit, retries.

- The password never goes into argv: ipmitool gets ``-E`` and reads ``IPMI_PASSWORD`` from its
  environment (:func:`password_env`). ``ps`` therefore never shows it.
- One BMC gets at most one command at a time and a minimum interval between the end of one
  command and the start of the next, across processes (Ansible forks many): an exclusive
  ``flock`` on a per-BMC timestamp file under a state directory (:class:`RateLimiter`).
- Transient failures (no answer) are retried a bounded number of times with exponential backoff;
  authentication failures are not retried (:func:`classify_failure`).

Standard library only.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time

from ansible.module_utils.fleetnap import command
from ansible.module_utils.fleetnap.fileio import lock_fd
from ansible.module_utils.fleetnap.parse import ParseError, parse_int
from ansible.module_utils.fleetnap.secrets import Scrubber

POWER_STATES = ("on", "off")
ACTIONS = {"on": "on", "off": "off", "soft": "soft", "cycle": "cycle", "reset": "reset"}
INTERFACES = ("lanplus", "lan")

_STATUS_RE = re.compile(r"Chassis Power is (on|off)\b", re.IGNORECASE)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")

AUTH_PATTERNS = (
    "hmac is invalid",
    "unauthorized name",
    "invalid role",
    "insufficient privilege",
    "rakp 2 message indicates an error",
)
UNREACHABLE_PATTERNS = (
    "get auth capabilities error",
    "no response",
    "timeout",
    "unable to establish lan session",
    "error issuing get channel authentication capabilities",
    "connection refused",
    "unable to establish ipmi v2 / rmcp+ session",
)


class IpmiError(Exception):
    """An ipmitool failure; ``kind`` is 'auth', 'unreachable', 'parse' or 'command'."""

    def __init__(self, msg, kind="command", rc=None, stderr=""):
        Exception.__init__(self, msg)
        self.kind = kind
        self.rc = rc
        self.stderr = stderr


def validate_target(host, port, user, interface="lanplus"):
    """Raise ValueError naming the bad value (before anything is sent)."""
    if not host or not isinstance(host, str) or any(c.isspace() for c in host) or host.startswith("-"):
        raise ValueError("bmc_address %r is not a host name or address" % (host,))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError("bmc_port %r is not a UDP port (1..65535; IPMI uses 623)" % (port,))
    if not user or not isinstance(user, str) or user.startswith("-") or len(user) > 16:
        raise ValueError("bmc_user %r is not a valid IPMI user name (1..16 characters)" % (user,))
    if interface not in INTERFACES:
        raise ValueError("interface %r is not one of %s" % (interface, ", ".join(INTERFACES)))


def build_argv(ipmitool, host, port, user, command, interface="lanplus", cipher_suite=3,
               session_timeout=2, session_retries=1, verbose=True):
    """ipmitool argv for ``command`` (a list such as ['chassis', 'power', 'status']).

    No password in it: ``-E`` makes ipmitool read IPMI_PASSWORD from the environment.
    ``-N``/``-R`` bound ipmitool's own wait (timeout per request, retransmissions); ``-v`` makes
    it say why a session failed (e.g. "RAKP 2 HMAC is invalid" for a wrong password).
    """
    argv = [ipmitool, "-I", interface, "-H", host, "-p", str(port), "-U", user, "-E",
            "-N", str(int(session_timeout)), "-R", str(int(session_retries))]
    if interface == "lanplus" and cipher_suite is not None:
        argv += ["-C", str(int(cipher_suite))]
    if verbose:
        argv.append("-v")
    return argv + list(command)


def run_local(argv, env):
    """Run ipmitool here (the runner every module gives :class:`Bmc`): the password only in the
    environment ``env`` carries, C locale (the parsers read English), every byte of its output read
    (command.run; ansible's run_command can lose an answer that took about a second)."""
    return command.run(argv, dict(env, LC_ALL="C", LANG="C"), raise_oserror=True)


def password_env(password):
    """The environment update that hands the password to ``ipmitool -E``."""
    if password is None or password == "":
        raise ValueError("no BMC password: give bmc_password (e.g. a lookup of FLEETNAP_BMC_PASSWORD in the "
                         "controller's environment)")
    return {"IPMI_PASSWORD": password}


def parse_power_status(output):
    """'on' or 'off' from ``chassis power status`` output; IpmiError('parse') otherwise."""
    m = _STATUS_RE.search(output or "")
    if not m:
        raise IpmiError("cannot read the power state from ipmitool output %r" % ((output or "").strip()[:200],),
                        kind="parse")
    return m.group(1).lower()


# Boot devices by their Redfish names (what gear_wave asks for), as 'chassis bootdev' takes them
# and as 'chassis bootparam get 5' reports them (IPMI 2.0 table 28-14, boot device selector).
BOOTDEV = {"Hdd": "disk", "Pxe": "pxe", "Cd": "cdrom", "BiosSetup": "bios"}
_BOOT_SELECTOR = (("Hard-Drive", "Hdd"), ("PXE", "Pxe"), ("CD/DVD", "Cd"), ("BIOS Setup", "BiosSetup"),
                  ("No override", None))
_SEL_ENTRIES = re.compile(r"^\s*Entries\s*:\s*(\d+)\s*$", re.MULTILINE)
_SEL_LAST_ADD = re.compile(r"^\s*Last Add Time\s*:\s*(.*?)\s*$", re.MULTILINE)
SEL_LIMIT = 20      # new entries reported after a wake (the newest)


def parse_boot_flags(output):
    """The boot flags (parameter 5) from ``chassis bootparam get 5``: {'valid', 'once', 'target'}
    (target by its Redfish name: Hdd, Pxe, Cd, BiosSetup; None: no override, or a device this
    does not name). IpmiError('parse') when the output has no boot flags."""
    text = output or ""
    if "Boot Flags" not in text:
        raise IpmiError("cannot read the boot flags from ipmitool output %r" % (text.strip()[:200],), kind="parse")
    m = re.search(r"Boot Device Selector\s*:\s*(.+)", text)
    selector = m.group(1).strip() if m else ""
    target = None
    for words, name in _BOOT_SELECTOR:
        if words.lower() in selector.lower():
            target = name
            break
    return {"valid": "Boot Flag Valid" in text, "once": "Options apply to only next boot" in text,
            "target": target, "selector": selector}


def parse_sel_info(output):
    """{'entries': N, 'last_add': text} from ``sel info``; IpmiError('parse') without an entry count."""
    m = _SEL_ENTRIES.search(output or "")
    if not m:
        raise IpmiError("cannot read the SEL entry count from ipmitool output %r" % ((output or "").strip()[:200],),
                        kind="parse")
    last = _SEL_LAST_ADD.search(output or "")
    try:
        entries = parse_int(m.group(1), "the SEL entry count", lo=0, hi=0xFFFF)
    except ParseError as exc:
        raise IpmiError("cannot read the SEL entry count from ipmitool output: %s" % exc, kind="parse")
    return {"entries": entries, "last_add": last.group(1)[:100] if last else ""}


def parse_sel_list(output):
    """Entries of ``sel list``: [{'id', 'created', 'message', 'severity': None}]. ipmitool prints
    one line per entry ('1 | date | time | sensor | event | direction'), or with -v (as Bmc runs
    it) a block per entry ('SEL Record ID : 0001', 'Sensor Type', 'Description', ...)."""
    out = []
    text = output or ""
    if "SEL Record ID" in text:
        for block in re.split(r"(?m)^(?=\s*SEL Record ID\s*:)", text):
            fields = {}
            for line in block.splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    fields.setdefault(key.strip(), value.strip())
            if "SEL Record ID" not in fields:
                continue
            what = [fields.get(k) for k in ("Sensor Type", "Sensor Number", "Description", "Event Direction")]
            if fields.get("Sensor Number"):
                what[1] = "#0x%s" % fields["Sensor Number"]
            out.append({"id": fields["SEL Record ID"], "created": fields.get("Timestamp", ""),
                        "message": " | ".join(w for w in what if w) or fields.get("Record Type", ""),
                        "severity": None})
        return out
    for line in text.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) < 4 or not re.match(r"^[0-9a-fA-F]+$", cols[0]):
            continue
        out.append({"id": cols[0], "created": " ".join(c for c in cols[1:3] if c), "message": " | ".join(cols[3:]),
                    "severity": None})
    return out


# ``ipmitool dcmi power reading`` (DCMI 1.5 Get Power Reading, mode 1: system power statistics).
# ipmitool prints each figure as "<label>: <integer> Watts" and the state as "activated" or
# "deactivated"; a deactivated reading is not a measurement (OpenBMC answers with one, its figures
# whatever was last kept). A BMC without DCMI answers completion code 0xC1 (ipmitool: "Invalid
# command"), as the lab's and the simulator's ipmi_sim do.
DCMI_FIELDS = (("watts", "Instantaneous power reading"), ("minimum_watts", "Minimum during sampling period"),
               ("maximum_watts", "Maximum during sampling period"),
               ("average_watts", "Average power reading over sample period"))
DCMI_MAX_WATTS = 65535          # the reading is a 16-bit field
_DCMI_STATE = re.compile(r"^\s*Power reading state is\s*:\s*(activated|deactivated)\s*$", re.MULTILINE)
_DCMI_PERIOD = re.compile(r"^\s*Sampling period\s*:\s*(\d{1,10})\s+Seconds\.?\s*$", re.MULTILINE)
DCMI_UNSUPPORTED = ("invalid command", "(c1)", "not supported")


def parse_dcmi_power_reading(output):
    """``ipmitool dcmi power reading`` as {'watts', 'minimum_watts', 'maximum_watts',
    'average_watts', 'sampling_s', 'active'}: every figure an integer 0..65535 (parse_int),
    ``active`` False when the BMC says its reading is deactivated. IpmiError('parse') naming the
    line when the output is not that."""
    text = output or ""
    out = {}
    for key, label in DCMI_FIELDS:
        m = re.search(r"^\s*%s\s*:\s*(\S+)\s+Watts\s*$" % re.escape(label), text, re.MULTILINE)
        if not m:
            raise IpmiError("no '%s: N Watts' line in ipmitool output %r" % (label, text.strip()[:200]), kind="parse")
        try:
            out[key] = parse_int(m.group(1), label, lo=0, hi=DCMI_MAX_WATTS)
        except ParseError as exc:
            raise IpmiError("cannot read the power reading: %s" % exc, kind="parse")
    state = _DCMI_STATE.search(text)
    if not state:
        raise IpmiError("no 'Power reading state is: activated|deactivated' line in ipmitool output %r"
                        % (text.strip()[:200],), kind="parse")
    period = _DCMI_PERIOD.search(text)
    out["sampling_s"] = int(period.group(1)) if period else None
    out["active"] = state.group(1) == "activated"
    return out


def classify_failure(stdout, stderr):
    """'auth' (do not retry), 'unreachable' (retry) or 'command' (the BMC refused the command)."""
    text = ("%s\n%s" % (stdout or "", stderr or "")).lower()
    if any(p in text for p in AUTH_PATTERNS):
        return "auth"
    if any(p in text for p in UNREACHABLE_PATTERNS):
        return "unreachable"
    return "command"


def lock_path(state_dir, host, port):
    """The per-BMC lock/timestamp file: ``<state_dir>/<host>_<port>`` (unsafe characters -> '_')."""
    return os.path.join(state_dir, "%s_%d" % (_SAFE_NAME.sub("_", host), port))


class RateLimiter(object):
    """Serialise commands to one BMC and keep ``min_interval`` seconds between them.

    Use as a context manager around each ipmitool run. On entry it takes an exclusive flock on
    the BMC's file (waiting at most ``lock_timeout`` seconds), reads the end time of the last
    command, and sleeps until ``min_interval`` has passed since then. On exit it records the
    end time. Wall-clock time is stored so separate processes agree; a timestamp in the future
    (clock stepped back) is treated as "just now", so the wait never exceeds ``min_interval``.
    """

    def __init__(self, state_dir, host, port, min_interval, lock_timeout=120.0, clock=time.time,
                 sleep=time.sleep):
        if min_interval < 0:
            raise ValueError("min_interval must be >= 0 seconds, got %r" % (min_interval,))
        self.path = lock_path(state_dir, host, port)
        self.state_dir = state_dir
        self.min_interval = float(min_interval)
        self.lock_timeout = float(lock_timeout)
        self.clock = clock
        self.sleep = sleep
        self.fd = None
        self.waited = 0.0
        self.start = None

    def __enter__(self):
        try:
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
            self.fd = lock_fd(self.path, 0o600)
        except OSError as e:        # UnsafeFileError (a link, a FIFO planted there) included
            raise IpmiError("cannot open the rate-limit file %s: %s (set rate_limit_dir to a writable "
                            "directory)" % (self.path, e.strerror or e), kind="command")
        deadline = self.clock() + self.lock_timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if self.clock() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    raise IpmiError("another process held the BMC lock %s for more than %.0f s"
                                    % (self.path, self.lock_timeout), kind="unreachable")
                self.sleep(0.05)
        last = self._read_last()
        now = self.clock()
        self.waited = 0.0
        if last is not None and self.min_interval > 0:
            wait = min(last + self.min_interval - now, self.min_interval)
            if now < last:  # clock went backwards: count the last command as just finished
                wait = self.min_interval
            if wait > 0:
                self.sleep(wait)
                self.waited = wait
        self.start = self.clock()
        return self

    def _read_last(self):
        os.lseek(self.fd, 0, os.SEEK_SET)
        data = os.read(self.fd, 64).decode("ascii", "replace").strip()
        try:
            return float(data) if data else None
        except ValueError:
            return None

    def __exit__(self, exc_type, exc, tb):
        try:
            end = self.clock()
            os.lseek(self.fd, 0, os.SEEK_SET)
            os.ftruncate(self.fd, 0)
            os.write(self.fd, ("%.6f\n" % end).encode("ascii"))
            self.end = end
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        return False


def backoff_delays(retries, base=0.5, cap=8.0):
    """Delays before retry 1..retries: base, 2*base, 4*base ... capped at ``cap``."""
    return [min(cap, base * (2 ** i)) for i in range(max(0, retries))]


class Bmc(object):
    """Run ipmitool against one BMC with the password in the environment, rate-limited, retried.

    ``runner(argv, env)`` runs a command and returns ``(rc, stdout, stderr)`` (bmc_power passes
    ``module.run_command``). Every run is recorded in ``self.log`` with its start/end times.
    """

    def __init__(self, runner, ipmitool, host, port, user, password, interface="lanplus", cipher_suite=3,
                 session_timeout=2, session_retries=1, min_interval=1.0, retries=2, backoff=0.5,
                 state_dir=None, clock=time.time, sleep=time.sleep, guard=None):
        validate_target(host, port, user, interface)
        if retries < 0:
            raise ValueError("retries must be >= 0, got %r" % (retries,))
        if session_retries < 1:
            # ipmitool treats -R 0 as "its default" (measured: 20 s instead of 1 s per request).
            raise ValueError("session_retries must be >= 1, got %r" % (session_retries,))
        self.runner = runner
        self.ipmitool = ipmitool
        self.host = host
        self.port = port
        self.user = user
        self.env = password_env(password)
        # Every text ipmitool prints is scrubbed of the password (each of its forms) as soon as it
        # arrives, before it is parsed, cut short or put into a message.
        self.scrubber = Scrubber(password)
        self.interface = interface
        self.cipher_suite = cipher_suite
        self.session_timeout = session_timeout
        self.session_retries = session_retries
        self.min_interval = min_interval
        self.retries = retries
        self.backoff = backoff
        self.state_dir = state_dir or os.path.join(os.path.expanduser("~"), ".cache", "fleetnap", "bmc")
        self.clock = clock
        self.sleep = sleep
        self.log = []
        self.power_source = None        # where power_watts() found its reading
        self.power_note = None          # why it found none
        # Hard wall-clock bound on one ipmitool run, on top of its own -N/-R: coreutils timeout.
        self.guard = list(guard or [])
        self.run_limit = max(10, 3 * session_timeout * (session_retries + 1))

    @property
    def target(self):
        return "%s:%d" % (self.host, self.port)

    def _once(self, command):
        argv = build_argv(self.ipmitool, self.host, self.port, self.user, command, self.interface,
                          self.cipher_suite, self.session_timeout, self.session_retries)
        if self.guard:
            argv = self.guard + ["--kill-after=2", str(self.run_limit)] + argv
        with RateLimiter(self.state_dir, self.host, self.port, self.min_interval, clock=self.clock,
                         sleep=self.sleep) as rl:
            try:
                rc, out, err = self.runner(argv, self.env)
            except OSError as exc:
                raise IpmiError("cannot run %s: %s" % (self.ipmitool, exc.strerror or exc), kind="command")
        out, err = self.scrubber.text(out or ""), self.scrubber.text(err or "")
        self.log.append({"command": " ".join(command), "start": round(rl.start, 6), "end": round(rl.end, 6),
                         "waited_s": round(rl.waited, 6), "rc": rc})
        return rc, out, err

    def run(self, command):
        """Run ``command``; retry 'unreachable' failures; return stdout or raise IpmiError."""
        return self.run_both(command)[0]

    def run_both(self, command):
        """As run(), returning (stdout, stderr): ipmitool reports some refusals (a boot parameter
        the BMC does not take) on stderr with exit status 0."""
        delays = backoff_delays(self.retries, self.backoff)
        for attempt in range(self.retries + 1):
            rc, out, err = self._once(command)
            if rc == 0:
                return out, err
            kind = classify_failure(out, err)
            detail = _last_error_line(out, err)
            if self.guard and rc in (124, 137):
                kind, detail = "unreachable", "ipmitool did not finish within %d s" % self.run_limit
            if kind == "auth":
                raise IpmiError("BMC %s rejected user %r: %s; check bmc_user and bmc_password"
                                % (self.target, self.user, detail), kind="auth", rc=rc, stderr=err)
            if kind == "command":
                raise IpmiError("BMC %s refused '%s': %s" % (self.target, " ".join(command), detail),
                                kind="command", rc=rc, stderr=err)
            if attempt < self.retries:
                self.sleep(delays[attempt])
        raise IpmiError("BMC %s did not answer '%s' after %d attempt(s): %s; check bmc_address/bmc_port, "
                        "that IPMI over LAN is enabled and that UDP %d is reachable"
                        % (self.target, " ".join(command), self.retries + 1, detail, self.port),
                        kind="unreachable", rc=rc, stderr=err)

    def _parse(self, parser, command):
        """parser(output of ``command``); a parse failure names this BMC and the command."""
        out = self.run(command)
        try:
            return parser(out)
        except IpmiError as exc:
            raise IpmiError("BMC %s, '%s': %s" % (self.target, " ".join(command), exc), kind=exc.kind)

    def status(self):
        return self._parse(parse_power_status, ["chassis", "power", "status"])

    def power_watts(self):
        """The system's power draw in watts from ``dcmi power reading``, or None when the BMC offers
        no reading (no DCMI: completion code 0xC1 and kin; a deactivated reading). ``power_source``
        says which: 'dcmi', or None with ``power_note`` saying why."""
        self.power_source, self.power_note = None, None
        command = ["dcmi", "power", "reading"]
        try:
            out = self.run(command)
        except IpmiError as exc:
            text = ("%s %s" % (exc, exc.stderr)).lower()
            if exc.kind == "command" and any(w in text for w in DCMI_UNSUPPORTED):
                self.power_note = "the BMC offers no DCMI power reading (%s)" % _last_error_line("", exc.stderr or str(exc))
                return None
            raise
        try:
            reading = parse_dcmi_power_reading(out)
        except IpmiError as exc:
            raise IpmiError("BMC %s, '%s': %s" % (self.target, " ".join(command), exc), kind=exc.kind)
        if not reading["active"]:
            self.power_note = "the BMC's DCMI power reading is deactivated"
            return None
        self.power_source = "dcmi"
        return float(reading["watts"])

    def power(self, action):
        if action not in ACTIONS:
            raise ValueError("unknown power action %r" % (action,))
        return self.run(["chassis", "power", ACTIONS[action]])

    def cycle(self, before, timeout, poll=1.0):
        """Power-cycle and prove it: from on, 'chassis power off' until the BMC reports off, then
        'chassis power on' until it reports on (a BMC's own 'power cycle' keeps the host off for
        a second or so, which polling can miss, and a BMC that did nothing still says on). From
        off, power on. Returns (reached, last_state, states_seen, phase): phase is the step that
        did not finish ('off' or 'on'), None when the cycle is proven."""
        seen = [before]
        if before != "off":
            self.power("off")
            reached, last, got = self.wait_for("off", timeout, poll)
            seen += [s for s in got if s != seen[-1]]
            if not reached:
                return False, last, seen, "off"
        self.power("on")
        reached, last, got = self.wait_for("on", timeout, poll)
        seen += [s for s in got if s != seen[-1]]
        return reached, last, seen, None if reached else "on"

    def set_boot_once(self, target="Hdd"):
        """Boot from ``target`` (Redfish name: Hdd, Pxe, Cd, BiosSetup) at the next boot only
        ('chassis bootdev', which sets the override for one boot), then read it back ('chassis
        bootparam get 5'). IpmiError('command') when the BMC refuses it or reports another device.
        Returns {'target', 'enabled' (Once / Continuous / Disabled), 'requested', 'once'}, as
        redfish.Redfish.set_boot_once does."""
        if target not in BOOTDEV:
            raise ValueError("unknown boot target %r (one of %s)" % (target, ", ".join(sorted(BOOTDEV))))
        command = ["chassis", "bootdev", BOOTDEV[target]]
        out, err = self.run_both(command)
        refused = [ln.strip() for ln in ("%s\n%s" % (out, err)).splitlines() if "failed" in ln.lower()]
        if refused:
            raise IpmiError("BMC %s refused '%s': %s" % (self.target, " ".join(command), "; ".join(refused[:2])),
                            kind="command")
        flags = self._parse(parse_boot_flags, ["chassis", "bootparam", "get", "5"])
        if not flags["valid"] or flags["target"] != target:
            raise IpmiError("BMC %s accepted '%s' but its boot flags say %s"
                            % (self.target, " ".join(command), flags["selector"] if flags["valid"]
                               else "no override (boot flags not valid)"), kind="command")
        return {"target": flags["target"], "enabled": "Once" if flags["once"] else "Continuous",
                "requested": {"target": target, "enabled": "Once"}, "once": flags["once"]}

    def log_marker(self):
        """What the BMC's event log (SEL) holds now: {'entries', 'last_add'} (to compare with later)."""
        return self._parse(parse_sel_info, ["sel", "info"])

    def log_entries_since(self, marker=None, limit=SEL_LIMIT):
        """The SEL entries added since ``marker`` (from log_marker(); None: the newest ``limit``),
        newest last, at most ``limit``: [{'id', 'created', 'message', 'severity': None}] (the SEL
        has no severity: every new entry is reported). A log cleared or wrapped since the marker
        (fewer entries, another last add time) reports its newest entries."""
        now = self._parse(parse_sel_info, ["sel", "info"])
        if marker is None:
            new = now["entries"]
        elif now["entries"] > marker["entries"]:
            new = now["entries"] - marker["entries"]
        elif now["last_add"] != marker["last_add"]:
            new = now["entries"]
        else:
            new = 0
        new = min(new, limit)
        if new <= 0:
            return []
        return self._parse(parse_sel_list, ["sel", "list", "last", str(new)])[-new:]

    def wait_for(self, wanted, timeout, poll=1.0):
        """Poll status until ``wanted`` or ``timeout`` s; return (reached, last_state, states_seen)."""
        deadline = self.clock() + timeout
        seen = []
        last = None
        while True:
            last = self.status()
            if not seen or seen[-1] != last:
                seen.append(last)
            if last == wanted:
                return True, last, seen
            if self.clock() + poll > deadline:
                return False, last, seen
            self.sleep(poll)


def _last_error_line(out, err):
    lines = [ln.strip() for ln in ("%s\n%s" % (err or "", out or "")).splitlines()
             if ln.strip() and not ln.startswith("Loading IANA")]
    # The most telling line is the specific reason, not ipmitool's generic summary.
    for ln in lines:
        low = ln.lower()
        if any(p in low for p in AUTH_PATTERNS) or "auth capabilities" in low:
            return ln.lstrip("> ")
    return lines[-1] if lines else "no output"
