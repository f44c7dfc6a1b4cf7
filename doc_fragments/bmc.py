# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):

    # The BMC a single-host power module logs in to: bmc_power (IPMI) and redfish_power. Their
    # ports differ (UDP 623, TCP 443) and stay in the modules.
    DOCUMENTATION = r"""
options:
  bmc_address:
    description:
      - Address or name of the BMC, as the host's record has it (C(fleetnap_bmc_address)) and as every fleetnap
        module that takes a BMC names it.
      - The alias C(bmc_host), its former name, is deprecated and will be removed in 1.0.0.
    type: str
    required: true
    aliases: [bmc_host]
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
