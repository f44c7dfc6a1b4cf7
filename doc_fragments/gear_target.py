# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The gear a shift goes to, as gear_shift_plan and gear_shift_prepare take it (module_utils
    # shiftplan.options()).
    DOCUMENTATION = r"""
options:
  replicas:
    description: Number of gear groups r (the replication factor).
    type: int
    default: 3
  gmin:
    description: Lowest gear allowed.
    type: int
    default: 1
  gear:
    description: Target gear. The groups come from the rotation of O(date).
    type: int
  groups_on:
    description: Target groups, for example M(gear_plan)'s C(now.groups_on).
    type: list
    elements: int
  date:
    description: Date (YYYY-MM-DD) whose rotation O(gear) uses. Default today on the controller.
    type: str
"""
