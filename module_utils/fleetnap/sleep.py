# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""System sleep states as the kernel offers them (/sys/power/state, /sys/power/mem_sleep)."""

from __future__ import annotations

POWER_DIR = "/sys/power"


def read_sleep(fs):
    """Offered sleep states, the mem_sleep choice, and the PM debug switches."""
    states = (fs.read(POWER_DIR + "/state") or "").split()
    mem_sleep_options, mem_sleep = [], None
    for word in (fs.read(POWER_DIR + "/mem_sleep") or "").split():
        if word.startswith("[") and word.endswith("]"):
            word = word[1:-1]
            mem_sleep = word
        mem_sleep_options.append(word)
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
