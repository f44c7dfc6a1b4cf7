# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The per-BMC rate limit (module_utils/fleetnap/ipmi.py's RateLimiter), as bmc_power,
    # gear_observe and gear_wave take it.
    DOCUMENTATION = r"""
options:
  min_interval:
    description:
      - Minimum seconds between the end of one command to a BMC (an ipmitool run or a Redfish
        request) and the start of the next one to it, kept across Ansible's forks and across the
        fleetnap modules that use the same O(rate_limit_dir).
    type: float
    default: 1
  rate_limit_dir:
    description:
      - Directory, on the host that runs the module (usually the controller), of the lock and
        timestamp file kept per BMC address and port, through which commands to one BMC are
        serialised and spaced by O(min_interval).
      - M(bmc_power), M(redfish_power), M(gear_observe) and M(gear_wave)
        keep them in the same place by default, so their commands to one BMC are spaced out
        together. IPMI (port 623) and Redfish (port 443) of one BMC are limited separately.
    type: path
    default: ~/.cache/fleetnap/bmc
"""

    # redfish_power: the same options; only min_interval's default differs (0.25 s). A unit test
    # (tests/unit/test_module_docs.py) keeps everything else equal to DOCUMENTATION.
    REDFISH = r"""
options:
  min_interval:
    description:
      - Minimum seconds between the end of one command to a BMC (an ipmitool run or a Redfish
        request) and the start of the next one to it, kept across Ansible's forks and across the
        fleetnap modules that use the same O(rate_limit_dir).
    type: float
    default: 0.25
  rate_limit_dir:
    description:
      - Directory, on the host that runs the module (usually the controller), of the lock and
        timestamp file kept per BMC address and port, through which commands to one BMC are
        serialised and spaced by O(min_interval).
      - M(bmc_power), M(redfish_power), M(gear_observe) and M(gear_wave)
        keep them in the same place by default, so their commands to one BMC are spaced out
        together. IPMI (port 623) and Redfish (port 443) of one BMC are limited separately.
    type: path
    default: ~/.cache/fleetnap/bmc
"""
