# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PowerNap model's defaults and the bounds of the advice's inputs, apart from the model
(powernap.py): fleetnap_profile builds its options from them on every host and imports the model
only when a profile asks for advice."""

from __future__ import annotations

# Defaults and where they come from (docs/powernap.md has the details).
DEFAULTS = {
    # PowerNap's Web workload as used for the seed's Figures 7-8 (see docs/powernap.md: the
    # seed's own statement that 10 ms answers 28-44 % faster than 50 ms implies 38-41 ms).
    "service_time_s": 0.038,
    # Exponential service times (M/M/1), the variability of the PowerNap model's examples.
    "service_time_cv": 1.0,
    # "idle servers still consume 60 % of their peak power draw" (PowerNap; seed section V).
    "idle_power_fraction": 0.6,
    # S3 draws 3.8 % (Arch desktop) to 6 % (Chromebook) of full power (seed section IV): 5 %.
    "sleep_power_fraction": 0.05,
    # Transitions are charged at peak power (conservative; BigHouse charges active power).
    "transition_power_fraction": 1.0,
    # "processor power accounts for only 33 % of the total" (seed, after Barroso and Hoelzle).
    "cpu_power_fraction": 0.33,
    # DVFS range 2x (half the nominal frequency), cubic CPU power, stretch up to 80 % busy.
    "dvfs_min_frequency": 0.5,
    "dvfs_target_utilization": 0.8,
    "dvfs_power_exponent": 3.0,
}

# The bounds of the advice's inputs (validate.number's arguments), one table for powernap_advice's
# options and fleetnap_profile's sleep.advice: the model squares and powers them.
ADVICE_BOUNDS = {
    "utilization_percentile": dict(lo=0, lo_open=True, hi=100),
    "response_time_objective": dict(lo=1, hi=1000),
    "service_time_s": dict(lo=0, lo_open=True, hi=3600),
    "service_time_cv": dict(lo=0, hi=100),
}
