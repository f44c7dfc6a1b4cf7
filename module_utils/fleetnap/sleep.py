# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""System sleep states as the kernel offers them (/sys/power/state, /sys/power/mem_sleep)."""

from __future__ import annotations

import re

from ansible.module_utils.fleetnap.fileio import UnsafeFileError

POWER_DIR = "/sys/power"
# The kernel's names of sleep states (freeze mem disk standby; s2idle shallow deep), each once.
_WORD = re.compile(r"^[a-z0-9_]{1,32}$")


def _words(fs, name, chosen=False):
    """The words of /sys/power/NAME, each a state's name and each once (with ``chosen``: at most one
    in brackets, the kernel's choice); UnsafeFileError naming the file otherwise."""
    path = POWER_DIR + "/" + name
    words, choice = [], None
    for word in (fs.read(path) or "").split():
        bare = word[1:-1] if chosen and word.startswith("[") and word.endswith("]") else word
        if not _WORD.match(bare) or bare in words or (bare != word and choice is not None):
            raise UnsafeFileError("%s holds %r, not the kernel's list of sleep states (each a name, once%s): "
                                  "is sysfs_root a sysfs tree?"
                                  % (fs.path(path), word[:40], ", one in brackets" if chosen else ""))
        if bare != word:
            choice = bare
        words.append(bare)
    return words, choice


def read_sleep(fs):
    """Offered sleep states, the mem_sleep choice, and the PM debug switches."""
    states, _none = _words(fs, "state")
    mem_sleep_options, mem_sleep = _words(fs, "mem_sleep", chosen=True)
    if mem_sleep is None and len(mem_sleep_options) == 1:
        # A prepared tree after a write holds just the word written; the kernel always marks
        # its choice with brackets.
        mem_sleep = mem_sleep_options[0]
    return {
        "states": states,
        "mem_sleep_options": mem_sleep_options,
        "mem_sleep": mem_sleep,
        "s3_available": "mem" in states and ("deep" in mem_sleep_options or not mem_sleep_options),
        "s2idle_available": "freeze" in states or "s2idle" in mem_sleep_options,
        "pm_print_times": _flag(fs.read(POWER_DIR + "/pm_print_times")),
        "pm_debug_messages": _flag(fs.read(POWER_DIR + "/pm_debug_messages")),
    }


def _flag(text):
    if text is None:
        return None
    return text.strip() == "1"


SLEEP_TARGETS = ("sleep.target", "suspend.target", "hibernate.target", "hybrid-sleep.target",
                 "suspend-then-hibernate.target")
METRICS_FILE = "fleetnap_sleep_policy.prom"


def policy_metrics(allow, offered, mem_sleep, masked_targets):
    """The sleep policy as fleetnap_* metrics (for prom.render).

    ``allow`` is deep, s2idle or none (the deepest state the policy allows), ``offered`` what
    read_sleep() returned, ``mem_sleep`` the mem_sleep choice after the call, ``masked_targets``
    the masked systemd sleep targets after the call. A state counts as allowed when the policy
    permits it and the kernel offers it: deep permits deep and s2idle, s2idle only s2idle.
    """
    permitted = {"deep": ("deep", "s2idle"), "s2idle": ("s2idle",), "none": ()}[allow]
    available = {"deep": offered["s3_available"], "s2idle": offered["s2idle_available"]}
    modes = list(offered["mem_sleep_options"])
    if mem_sleep and mem_sleep not in modes:
        modes.append(mem_sleep)
    return [
        {"name": "fleetnap_sleep_state_offered",
         "help": "1 if the kernel offers the system sleep state (deep = S3 suspend-to-RAM, s2idle = suspend-to-idle).",
         "samples": [{"labels": {"state": s}, "value": 1 if available[s] else 0} for s in ("deep", "s2idle")]},
        {"name": "fleetnap_sleep_state_allowed",
         "help": "1 if fleetnap's sleep policy allows the system sleep state and the kernel offers it.",
         "samples": [{"labels": {"state": s}, "value": 1 if (s in permitted and available[s]) else 0}
                     for s in ("deep", "s2idle")]},
        {"name": "fleetnap_sleep_mem_sleep_mode",
         "help": "1 for the suspend mode /sys/power/mem_sleep selects, 0 for the other modes the kernel offers.",
         "samples": [{"labels": {"mode": m}, "value": 1 if m == mem_sleep else 0} for m in modes]},
        {"name": "fleetnap_sleep_target_masked",
         "help": "1 if the systemd sleep target is masked (nothing can suspend the host through it).",
         "samples": [{"labels": {"target": t}, "value": 1 if t in masked_targets else 0} for t in SLEEP_TARGETS]},
    ]
