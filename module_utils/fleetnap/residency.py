# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""C-state residency as Prometheus metrics (node_exporter has no cpuidle collector).

The same code runs in the module (one collection) and, copied verbatim into the collector script
installed unchanged on the hosts by roles/node_exporter (tasks/residency.yml) and run by its systemd timer
or cron entry, on every tick.
"""

from __future__ import annotations

from ansible.module_utils.fleetnap.cpuidle import governor_misses, qos_limit_us, read_cpu_dma_latency, read_model
from ansible.module_utils.fleetnap.prom import render


def state_label(st, seen):
    """A state's ``state`` label on its CPU: its name, and for a second state of the CPU with the
    same name (some boards' ACPI tables give two ``C2_ACPI``) the name and its sysfs directory,
    ``C2_ACPI (state3)``, so that each state is a series of its own. ``seen``: the CPU's labels so
    far (updated)."""
    label = st["name"] if st["name"] not in seen else "%s (state%d)" % (st["name"], st["index"])
    seen.add(label)
    return label


def residency_metrics(model, global_us=None):
    """The residency counters, and the governor's misses (issue 38): ``above`` (the idle period
    was shorter than the state's target residency) and ``below`` (a deeper enabled state would
    have fitted) per CPU and state, ``below`` split by cause (``qos``: the deeper state was
    excluded by the CPU's PM QoS limit, the profile's choice; ``governor``: the governor's), and
    per state the share of entries that missed since boot. ``global_us``: the global PM QoS limit
    (/dev/cpu_dma_latency) in force."""
    usage, time_s, latency, above, below, excluded = [], [], [], [], [], []
    totals = {}
    for cpu in model["cpus"]:
        seen = set()
        for st, bounded, up, down, by_qos in governor_misses(cpu, global_us):
            labels = {"cpu": str(cpu["cpu"]), "state": state_label(st, seen)}
            if st["usage"] is not None:
                usage.append({"labels": labels, "value": st["usage"]})
            if st["time_us"] is not None:
                time_s.append({"labels": labels, "value": st["time_us"] / 1e6})
            latency.append({"labels": labels, "value": 1 if st["disable"] else 0})
            excluded.append({"labels": labels, "value": 1 if bounded else 0})
            if up is not None:
                above.append({"labels": labels, "value": up})
            if down is not None:
                below.append({"labels": dict(labels, cause="qos"), "value": by_qos})
                below.append({"labels": dict(labels, cause="governor"), "value": down - by_qos})
            t = totals.setdefault(labels["state"], [0, 0, 0, False])
            t[0] += st["usage"] or 0
            t[1] += up or 0
            t[2] += (down or 0) - (by_qos or 0)
            t[3] = t[3] or up is not None
    ratio = []
    for name, (entries, ups, downs, counted) in sorted(totals.items()):
        if counted and entries:
            ratio.append({"labels": {"state": name, "miss": "above"}, "value": ups / float(entries)})
            ratio.append({"labels": {"state": name, "miss": "below_governor"}, "value": downs / float(entries)})
    return [
        {"name": "fleetnap_cstate_entries_total", "type": "counter",
         "help": "Times each CPU entered each idle state (sysfs cpuidle usage).", "samples": usage},
        {"name": "fleetnap_cstate_residency_seconds_total", "type": "counter",
         "help": "Time each CPU spent in each idle state (sysfs cpuidle time).", "samples": time_s},
        {"name": "fleetnap_cstate_disabled", "type": "gauge",
         "help": "1 if the idle state is disabled on the CPU.", "samples": latency},
        {"name": "fleetnap_cstate_above_total", "type": "counter",
         "help": "Entries of the idle state whose idle period was shorter than its target residency (sysfs above).",
         "samples": above},
        {"name": "fleetnap_cstate_below_total", "type": "counter",
         "help": "Entries of the idle state after which a deeper one would have fitted (sysfs below); cause qos: "
                 "the deeper state is excluded by the CPU's PM QoS limit, governor: the governor's choice.",
         "samples": below},
        {"name": "fleetnap_cstate_qos_bounded", "type": "gauge",
         "help": "1 if the next deeper enabled idle state is excluded by the CPU's PM QoS limit now.",
         "samples": excluded},
        {"name": "fleetnap_cstate_miss_ratio", "type": "gauge",
         "help": "Share of the idle state's entries since boot that missed: above, or below by the governor's choice.",
         "samples": ratio},
    ]


# A share of a state's entries since boot above which a miss is worth an operator's look.
MISS_SHARE = 0.2


def miss_advice(model, global_us=None, share=MISS_SHARE):
    """The governor's misses as advice, per state over the host's CPUs: many ``above`` on the
    deepest state the budget allows (its idle periods are shorter than the state pays for: the
    budget lets the CPUs sleep deeper than is worth it) and many ``below`` caused by the PM QoS
    limit (a deeper state would have fitted but the limit excludes it: the budget, not the
    governor, costs the power). A list of {state, rule, share, entries, text}."""
    totals, deepest = {}, None
    for cpu in model["cpus"]:
        limit = qos_limit_us(cpu, global_us)
        for st, _bounded, up, down, by_qos in governor_misses(cpu, global_us):
            t = totals.setdefault(st["name"], {"index": st["index"], "entries": 0, "above": 0, "below_qos": 0,
                                               "enabled": False})
            t["entries"] += st["usage"] or 0
            t["above"] += up or 0
            t["below_qos"] += by_qos or 0
            # allowed: enabled and within the CPU's PM QoS limit (a state over it is never entered)
            if not st["disable"] and (limit is None or st["latency_us"] is None or st["latency_us"] <= limit):
                t["enabled"] = True
                if deepest is None or st["index"] > totals[deepest]["index"]:
                    deepest = st["name"]
    out = []
    for name, t in sorted(totals.items(), key=lambda kv: kv[1]["index"]):
        if not t["entries"]:
            continue
        if name == deepest and t["above"] / float(t["entries"]) > share:
            r = t["above"] / float(t["entries"])
            out.append({"state": name, "rule": "above", "share": round(r, 4), "entries": t["entries"],
                        "text": "%.0f %% of %s's entries were shorter than its target residency: the budget lets the "
                                "CPUs sleep deeper than their idle periods pay for (disabling %s costs no latency)"
                                % (100 * r, name, name)})
        if t["below_qos"] / float(t["entries"]) > share:
            r = t["below_qos"] / float(t["entries"])
            out.append({"state": name, "rule": "below_qos", "share": round(r, 4), "entries": t["entries"],
                        "text": "%.0f %% of %s's entries were followed by an idle period a deeper state would have "
                                "fitted, which the PM QoS limit excludes: the budget, not the governor, costs this "
                                "power" % (100 * r, name)})
    return out


def collect(fs):
    return render(residency_metrics(read_model(fs), read_cpu_dma_latency(fs)))
