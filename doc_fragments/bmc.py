# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The BMC a single-host power module logs in to: bmc_power (IPMI) and redfish_power. Their
    # ports differ (UDP 623, TCP 443) and stay in the modules.
    DOCUMENTATION = r"""
options:
  bmc_host:
    description: Address or name of the BMC.
    type: str
    required: true
  bmc_user:
    description: User the module logs in to the BMC as.
    type: str
    required: true
  bmc_password:
    description:
      - Password of O(bmc_user). Give it here and nowhere else, for example from the controller's environment
        with C(lookup('ansible.builtin.env', 'FLEETNAP_BMC_PASSWORD')) or from a vault variable.
      - It is not taken from the module's environment. A task's C(environment:) keyword puts its
        variables on the command line that starts the module (visible in C(ps) and in C(-vvv)
        output), so a password there would leak; the module refuses instead.
    type: str
"""
