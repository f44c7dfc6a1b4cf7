# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # How the controller-side fleet modules (gear_observe, gear_wave) talk to many hosts' BMCs at
    # once. The per-host BMC entries (hosts[].bmc_*) are suboptions, which doc fragments cannot
    # extend; tests/unit/test_module_docs.py keeps the two modules' copies equal.
    DOCUMENTATION = r"""
options:
  bmc_concurrency:
    description: BMC commands in flight at most, over all hosts of the call.
    type: int
    default: 4
  retries:
    description:
      - Retries of a BMC command that got no answer (backoff 0.5 s, 1 s, 2 s ...), as M(bmc_power)
        and M(redfish_power) retry theirs.
    type: int
    default: 2
  session_timeout:
    description:
      - Seconds ipmitool waits for one answer of an IPMI BMC (its C(-N)). A Redfish request waits
        up to 10 s.
    type: int
    default: 2
"""
