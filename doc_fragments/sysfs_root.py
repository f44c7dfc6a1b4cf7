# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The modules that find only /sys under their root: cpuidle_info, cstate_residency, pm_debug.
    # Those that also find /etc, /proc or /var/lib there (cpuidle_qos, sleep_policy,
    # fleetnap_profile) say so in their own sysfs_root.
    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Root under which C(/sys) is found. V(/) is the live host; another directory holds a captured
        or prepared tree.
      - An absolute path to an existing directory, without C(..).
    type: path
    default: /
"""
