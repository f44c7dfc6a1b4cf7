# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""C-state residency as Prometheus metrics (node_exporter has no cpuidle collector).

The same code runs in the module (one collection) and, copied verbatim into the collector script
installed unchanged on the hosts by roles/node_exporter (tasks/residency.yml) and run by its systemd timer
or cron entry, on every tick.
"""

from __future__ import annotations

from ansible.module_utils.fleetnap.cpuidle import read_model
from ansible.module_utils.fleetnap.prom import render


def residency_metrics(model):
    usage, time_s, latency = [], [], []
    for cpu in model["cpus"]:
        for st in cpu["states"]:
            labels = {"cpu": str(cpu["cpu"]), "state": st["name"]}
            if st["usage"] is not None:
                usage.append({"labels": labels, "value": st["usage"]})
            if st["time_us"] is not None:
                time_s.append({"labels": labels, "value": st["time_us"] / 1e6})
            latency.append({"labels": labels, "value": 1 if st["disable"] else 0})
    return [
        {"name": "fleetnap_cstate_entries_total", "type": "counter",
         "help": "Times each CPU entered each idle state (sysfs cpuidle usage).", "samples": usage},
        {"name": "fleetnap_cstate_residency_seconds_total", "type": "counter",
         "help": "Time each CPU spent in each idle state (sysfs cpuidle time).", "samples": time_s},
        {"name": "fleetnap_cstate_disabled", "type": "gauge",
         "help": "1 if the idle state is disabled on the CPU.", "samples": latency},
    ]


def collect(fs):
    return render(residency_metrics(read_model(fs)))
