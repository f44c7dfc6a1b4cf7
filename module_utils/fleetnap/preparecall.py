# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gear shift's prepare call as M(gear_shift_prepare) makes it: its argument spec and run(module),
the lock, the observation, the plan and its journal, and, with whole_shift, the waves and the
record in the same process. The module runs it with its AnsibleModule; its action plugin, on the
controller, with an AnsibleModule in Ansible's own process.
Standard library only; the caller owns the module object."""

from __future__ import annotations

import functools
import time
from datetime import datetime, timezone

from ansible.module_utils.fleetnap import fileio, fleetobserve, recordcall, shiftlock, shiftplan, wavecall
from ansible.module_utils.fleetnap.fleethosts import host_options
from ansible.module_utils.fleetnap.gear import GearError
from ansible.module_utils.fleetnap.gearshift import ShiftError, check_host_records, read_states, target_groups
from ansible.module_utils.fleetnap.observe import compile_greeting
from ansible.module_utils.fleetnap.secrets import Scrubber
from ansible.module_utils.fleetnap.validate import ParamError, check_params, number, path, text, validate
from ansible.module_utils.fleetnap.wol import WolError, build_packet, resolve, send_packets

CHECKS = dict(shiftplan.CHECKS, lock_file=path(), purpose=text(max_len=500), lease=number(lo=1, hi=604800, integer=True))
# whole_shift's wave options (gear_wave's checks) and the record's files (gear_record's)
WAVE_KEYS = ("wol_timeout", "wol_resend", "ipmi_timeout", "cycle_unresponsive", "bmc_concurrency")
RECORD_KEYS = ("history_file", "power_file", "measured_file", "metrics_dir")
WHOLE_CHECKS = dict([("whole_shift." + k, wavecall.CHECKS[k]) for k in WAVE_KEYS if k in wavecall.CHECKS]
                    + [("whole_shift." + k, recordcall.CHECKS[k]) for k in RECORD_KEYS])
# the host entry's own fields a wave takes from the observation's entry (its record already read)
HOST_KEYS = tuple(k for k in host_options() if k not in ("inventory", "record"))


def whole_shift_options():
    return dict(
        wol_timeout=dict(type="float", default=90),
        wol_resend=dict(type="float", default=5),
        ipmi_timeout=dict(type="float", default=300),
        cycle_unresponsive=dict(type="bool", default=False),
        bmc_concurrency=dict(type="int", default=4),
        history_file=dict(type="path", required=True),
        power_file=dict(type="path", required=True),
        measured_file=dict(type="path"),
        metrics_dir=dict(type="path", required=True),
        wake_during_observation=dict(type="bool", default=True),
    )


def wave_host(entry):
    """A host entry as gear_wave takes it: its own fields, gear_wave's per-host defaults under them
    (the wake fields come from the observation, or the inventory: wavecall.wake_fields_from)."""
    return dict(wavecall.own_defaults(), **dict((k, entry.get(k)) for k in HOST_KEYS))


def wave_hosts(p, seen, plan):
    """Each of the plan's wake_waves' hosts to wake as gear_wave takes them (the entry's own fields,
    gear_wave's per-host defaults, the wake fields from the observation), checked as gear_wave
    checks them: ParamError naming the host. A list per wave."""
    entries = dict((h["name"], h) for h in p["hosts"])
    waves = []
    for wave in plan["wake_waves"]:
        hosts = [wave_host(entries[n]) for n in wave["up"]]
        try:
            wavecall.check("up", hosts, "^SSH-", observed=seen)
        except ValueError as exc:   # hosts[i] is the wave's: named
            raise ParamError("%s (hosts of the wave: %s)" % (exc, ", ".join(wave["up"])))
        waves.append(hosts)
    return waves


class EarlyWakes(object):
    """The hosts whose magic packets go out during the observation (shiftplan.wake_during_observation)
    that wake by Wake-on-LAN first and whose wake fields pass the wave's checks (one that does not
    is refused by them once the plan names it, before anything is sent): ``senders`` (name -> a
    callable sending its packets as its wave sends them, to the address resolved here: nothing is
    resolved in the probe's window), and what they did - ``tried`` (names, in the order called),
    ``sent`` (name -> time.monotonic() once its packets were out: the wave waits from then)."""

    def __init__(self, p, on, recorded, check_mode):
        entries = dict((h["name"], h) for h in p["hosts"])
        repeat = wavecall.options()["wol_repeat"]["default"]
        self.senders, self.tried, self.sent = {}, [], {}
        for n in shiftplan.wake_during_observation(p, on, recorded, check_mode):
            h = wave_host(entries[n])
            try:
                wavecall.wake_fields_from({n: entries[n]["inventory"] or {}}, [h])
                wavecall.check_wave_hosts("up", [h])
                sockaddr = resolve(h["wol_address"], h["wol_port"])[1]
            except (ParamError, ValueError, WolError):
                continue
            if h["up_methods"][0] != "wol":
                continue
            self.senders[n] = functools.partial(self._send, n, [build_packet(m) for m in h["wol_macs"]],
                                                sockaddr[0], h["wol_port"], repeat)

    def _send(self, name, packets, address, port, repeat):
        self.tried.append(name)
        send_packets(packets, address, port, repeat=repeat)
        self.sent[name] = time.monotonic()

    def note(self):
        """What a failure before the waves says of them ("" when none was tried)."""
        if not self.tried:
            return ""
        sent = [n for n in self.tried if n in self.sent]
        out = ""
        if sent:
            out += ("; magic packets went to %s during the observation (a host they woke is back in its in-service "
                    "sleep policy by itself: its resume hook; the next shift sees it on)" % ", ".join(sent))
        failed = [n for n in self.tried if n not in self.sent]
        if failed:
            out += "; sending magic packets to %s during the observation failed (some may have left)" % ", ".join(failed)
        return out


def go_on(module, p, seen, plan, started, waves, failed, sent=None):
    """The plan's waves, each written into the journal as gear_wave writes it, then the record as
    gear_record makes it: (the waves' results, the record's). ``sent``: name -> time.monotonic() of
    the host's magic packets sent during the observation (EarlyWakes.sent). A failure: ``failed(msg, waves=...)``
    (the lock released), with the waves that ran."""
    given = p["whole_shift"]
    wp = dict((k, v.get("default")) for k, v in wavecall.options().items())
    wp.update((k, given[k]) for k in WAVE_KEYS)
    wp.update((k, p[k]) for k in ("min_interval", "retries", "session_timeout", "rate_limit_dir"))
    scrubber = Scrubber(*[h.get("bmc_password") for h in p["hosts"] if isinstance(h.get("bmc_password"), str)])
    matcher = compile_greeting(wp["greeting"])
    sent = sent or {}
    for hosts in waves:             # a host whose packets went out during the observation: its wait since then
        for h in hosts:
            if h["name"] in sent:
                h["wol_sent_mono"] = sent[h["name"]]
    done = []
    try:
        for wave, hosts in zip(plan["wake_waves"], waves):
            given_journal = dict(state_file=p["state_file"], lock_file=p["lock_file"], batch=wave["hosts"],
                                 results=wave["back"])
            kept = wavecall.journal_of(given_journal)   # each wave's after the one before it wrote
            ran = wavecall.act(module, wp, "up", hosts, matcher, kept, given_journal, scrubber,
                               lambda msg, result: failed(msg, waves=done + [result]))
            # each host's result is in the journal (and in the record's actions): not returned twice
            done.append(dict((k, v) for k, v in ran.items() if k != "hosts"))
    except (ParamError, ValueError, OSError, fileio.HostFsError) as e:
        failed("a wave of the shift could not run: %s (the waves before it ran: waves; the journal has their "
               "results)" % e, waves=done)
    except Exception as e:  # never a lock left behind a traceback
        failed("a wave of the shift failed: %s: %s (the waves before it ran: waves; the journal has their results)"
               % (e.__class__.__name__, e), waves=done)
    rp = dict((k, v.get("default")) for k, v in recordcall.options().items())
    rp.update((k, given[k]) for k in RECORD_KEYS)
    rp.update(plan=plan, observed=seen, observed_before=True, observe_again_on_failure=True, replicas=p["replicas"],
              gmin=p["gmin"], started=datetime.fromtimestamp(started, timezone.utc).isoformat(),
              started_epoch=started, state_file=p["state_file"], lock_file=p["lock_file"])
    try:
        validate(rp, recordcall.CHECKS)
        return done, recordcall.run(module, rp)
    except (ParamError, recordcall.RecordError) as e:
        failed("the waves ran (every host's result is in waves; the journal has them) but the shift could not be "
               "recorded: %s" % e, waves=done)
    except Exception as e:  # the same: released, and the error named
        failed("the waves ran (every host's result is in waves; the journal has them) but the record failed: %s: %s"
               % (e.__class__.__name__, e), waves=done)


def module_kwargs():
    """AnsibleModule's keyword arguments for gear_shift_prepare (a fresh copy)."""
    spec = fleetobserve.options()
    spec.update(shiftplan.options())
    spec.update(
        state_file=dict(type="path", required=True),
        lock_file=dict(type="path", required=True),
        purpose=dict(type="str", default=""),
        lease=dict(type="int"),
        journal=dict(type="bool", default=True),
        whole_shift=dict(type="dict", options=whole_shift_options()),
    )
    return dict(argument_spec=spec, mutually_exclusive=[("gear", "groups_on")],
                required_one_of=[("gear", "groups_on")], supports_check_mode=True)


def run(module):
    """The prepare call on ``module`` (gear_shift_prepare's, its params checked by its argument
    spec): ends with module.exit_json or module.fail_json."""
    p = module.params

    def target():
        # the plan's and the lock's options, then the target groups from the gear (or groups) and the date
        check_params(module, CHECKS)
        validate(dict(("whole_shift." + k, v) for k, v in (p["whole_shift"] or {}).items()), WHOLE_CHECKS)
        day = shiftplan.day_of(p)
        return day, target_groups(p["replicas"], p["gmin"], gear=p["gear"], groups_on=p["groups_on"], day=day)[1]
    # Everything checked before the lock is taken: the observation's options and host entries, the
    # plan's and the lock's, the target, and each host's gear group and methods (its inventory facts)
    # as the plan checks them: a host without a group is refused with nothing taken.
    (day, on), _none, tools = fleetobserve.check(module, p, before=target, then=lambda: check_host_records(
        dict((h["name"], dict(h["inventory"] or {}, ssh=True)) for h in p["hosts"]), p["replicas"]))
    lock = shiftlock.call(module, {"path": p["lock_file"], "state": "present", "pid": None, "purpose": p["purpose"],
                                   "force": False, "lease": p["lease"], "lease_id": None})
    started = time.time()
    # released on a failure only when this call took it (not a lock this run held already)
    taken = bool(lock.get("changed")) and lock["held"] and not module.check_mode

    early = None        # the magic packets sent during the observation (EarlyWakes)

    def failed(msg, **extra):
        if early is not None and "waves" not in extra:
            msg += early.note()
        released = False
        if taken:
            try:
                with shiftlock.guarded(p["lock_file"]):
                    owner = lock["owner"]
                    shiftlock.release(p["lock_file"], owner.get("pid"), owner.get("start_time"), token=owner.get("token"))
                released = True
            except (OSError, shiftlock.LockError) as e:
                msg += "; the gear-shift lock %s could not be released: %s" % (p["lock_file"], e)
        module.fail_json(msg=msg + (" (the gear-shift lock was released)" if released else ""), lock=lock,
                         lock_released=released, **extra)
    try:
        recorded = read_states(p["state_file"])
        early = EarlyWakes(p, on, recorded, module.check_mode)
        seen, elapsed = fleetobserve.run(module, p, tools, "needed", on, recorded=recorded, wake=early.senders)
        plan = shiftplan.make(p, seen, day)
        whole = p["whole_shift"] is not None and p["journal"] and not module.check_mode \
            and shiftplan.whole_from_controller(plan, p["scheduler"])
        # the hosts the waves wake checked as gear_wave checks them, before the journal is written
        waves = wave_hosts(p, seen, plan) if whole else []
    except (ShiftError, GearError, ParamError) as e:
        failed(str(e))
    except Exception as e:  # never a lock left behind a traceback: released, and the error named
        failed("the observation or the plan failed: %s: %s (nothing was written)" % (e.__class__.__name__, e))
    if p["journal"] and not module.check_mode:
        try:
            shiftplan.into_journal(module, p["state_file"], p["lock_file"], plan)
        except (ShiftError, GearError, ParamError) as e:
            failed(str(e))
        except (OSError, fileio.HostFsError) as e:
            failed("could not write the plan into the journal %s: %s (the file is as it was)" % (p["state_file"], e))
        except Exception as e:  # the same: released, and the error named
            failed("the plan's journal failed: %s: %s (the state file is as it was)" % (e.__class__.__name__, e))
    out = dict(changed=bool(lock.get("changed")) or plan["journal_written"], lock=lock, hosts=seen,
               observe_elapsed_s=elapsed, plan=plan, started_epoch=round(started, 3),
               started=datetime.fromtimestamp(started, timezone.utc).isoformat(), went_on=whole)
    if whole:
        out["waves"], out["record"] = go_on(module, p, seen, plan, started, waves, failed, sent=early.sent)
        out["changed"] = True
    module.exit_json(**out)
