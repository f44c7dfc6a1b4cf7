#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_conf
short_description: slurm.conf's power-saving block from what fleetnap's gear shifts measured
description:
  - Runs on the controller. Reads the gear history (gear_shift.yml's C(history.jsonl)); each line
    keeps what every park and wake of its shift took (C(took)). From those lines and the hosts'
    gear groups it builds the power-saving lines for slurm.conf, to be included by slurm.conf's
    C(Include) when O(dest) is written.
  - C(SuspendProgram), C(ResumeProgram), C(ResumeFailProgram) name the programs of role
    C(slurm_power) in O(programs_dir).
  - C(ResumeTimeout) is (the worst verified wake of any host + O(slurmd_start_s))
    x O(margin); C(SuspendTimeout) the worst verified park x O(margin). With nothing measured yet,
    O(resume_timeout_s) and O(suspend_timeout_s), and the comment says so.
  - C(ResumeRate) and C(SuspendRate) are the hosts per minute of the slowest shift that woke or
    parked any (fleetnap's batches and BMC throttle included); not measured, the lines are left
    out and Slurm's defaults apply.
  - C(SuspendExcNodes) is every host with a count (C(hosts:N)), Slurm's way to keep N of them powered up. A gear shift
    keeps O(gmin) gear groups up, but a different set each day (the daily rotation of the group order), so no host is
    exempt for good; N is the most hosts the O(gmin) kept groups hold on any day. With O(gmin=0) the
    line is left out.
  - >-
    Each host's C(Weight) is its gear group (Slurm fills the lowest weight first), as a comment per
    weight for the operator's C(NodeName) lines (slurm.conf defines a node's weight there only).
  - Every value has a comment naming the measurement (host, method, shift) or the setting it came
    from. The history is read as a regular file in its directory (no link out of it, no FIFO or
    device; at most 64 MiB, strict JSON per line).
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  gear_groups:
    description: Host (Slurm's NodeName, the inventory's host name) -> gear group (a whole number from 1, as C(fleetnap_gear_group)).
    type: dict
    required: true
  gmin:
    description: The lowest gear a shift goes to (how many gear groups always stay up, rotated daily).
    type: int
    default: 1
  history_file:
    description: The gear history. Missing = no shifts yet.
    type: path
    required: true
  programs_dir:
    description: Where role C(slurm_power) installed the programs on the slurmctld host.
    type: path
    default: /usr/local/lib/fleetnap-slurm
  slurmd_start_s:
    description: Seconds slurmd takes to register after a wake (a setting, not measured); 0..3600.
    type: float
    default: 30
  margin:
    description: Factor on the measured times (1..10).
    type: float
    default: 1.5
  resume_timeout_s:
    description: C(ResumeTimeout) while no wake is measured (1..86400).
    type: int
    default: 600
  suspend_timeout_s:
    description: C(SuspendTimeout) while no park is measured (1..86400).
    type: int
    default: 300
  dest:
    description:
      - File to write the block to (mode 0644), for slurm.conf's C(Include). Its directory must exist.
      - Unset, the block is only returned.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - Builds the same block; O(dest) is not written.
  diff_mode:
    support: full
    details:
      - O(dest) before and after.
  platform:
    support: full
    details:
      - Runs on the controller.
seealso:
  - module: gear_record
"""

EXAMPLES = r"""
- name: slurm.conf's power saving from the gear history
  slurm_conf:
    gear_groups: "{{ dict(groups['compute'] | zip(groups['compute'] | map('extract', hostvars, 'fleetnap_gear_group'))) }}"
    gmin: 1
    history_file: /var/lib/fleetnap/gear/history.jsonl
    dest: /etc/slurm/fleetnap-power.conf
  delegate_to: localhost
  run_once: true
  register: slurm_power_block
"""

RETURN = r"""
block:
  description: The lines for slurm.conf, each value after the comment that says where it came from.
  returned: always
  type: str
  sample: |
    # fleetnap: Slurm power saving for 6 hosts (at least 2 kept up), from 3 gear shift(s) in history.jsonl
    SuspendProgram=/usr/local/lib/fleetnap-slurm/fleetnap-slurm-suspend
    ResumeTimeout=133
values:
  description: The values set (ResumeTimeout, SuspendTimeout, ResumeRate, SuspendRate when measured, SuspendExcNodes, Weight per host).
  returned: always
  type: dict
measured:
  description: The worst wake and park (seconds, host, shift, method), the slowest shift per action, the hosts with no wake measured.
  returned: always
  type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.energy import read_text
from ansible.module_utils.fleetnap.powerrecord import CHECKS as RECORD_CHECKS
from ansible.module_utils.fleetnap.slurmconf import ConfError, block, check_gmin, read_shifts
from ansible.module_utils.fleetnap.validate import ParamError, check_params, number, path

CHECKS = {
    "gmin": number(lo=0, hi=1000, integer=True),
    "history_file": path(),
    "programs_dir": path(),
    "slurmd_start_s": number(lo=0, hi=3600),
    "margin": number(lo=1, hi=10),
    "resume_timeout_s": number(lo=1, hi=86400, integer=True),
    "suspend_timeout_s": number(lo=1, hi=86400, integer=True),
    "dest": path(),
}
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
MAX_HOSTS = 100000


def check_groups(groups):
    """host -> gear group, each name a node name and each group checked as the host power record
    checks fleetnap_gear_group (powerrecord: a whole number from 1)."""
    if not groups:
        raise ParamError("option gear_groups: no hosts (host -> gear group)")
    if len(groups) > MAX_HOSTS:
        raise ParamError("option gear_groups: more than %d hosts" % MAX_HOSTS)
    out = {}
    for host, g in groups.items():
        if not isinstance(host, str) or not NODE.match(host):
            raise ParamError("option gear_groups: %r is not a node name (letters, digits, '.', '_', '-')" % (host,))
        out[host] = RECORD_CHECKS["group"]("gear_groups.%s" % host, g)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gear_groups=dict(type="dict", required=True),
            gmin=dict(type="int", default=1),
            history_file=dict(type="path", required=True),
            programs_dir=dict(type="path", default="/usr/local/lib/fleetnap-slurm"),
            slurmd_start_s=dict(type="float", default=30.0),
            margin=dict(type="float", default=1.5),
            resume_timeout_s=dict(type="int", default=600),
            suspend_timeout_s=dict(type="int", default=300),
            dest=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    check_params(module, CHECKS)
    try:
        groups = check_groups(p["gear_groups"])
        check_gmin(groups, p["gmin"])              # before the history is read
        text = read_text(p["history_file"], "gear history") or ""
        shifts = read_shifts(text.splitlines(), p["history_file"])
        conf, values = block(groups, p["gmin"], p["programs_dir"].rstrip("/") or "/", shifts,
                             slurmd_start_s=p["slurmd_start_s"], margin=p["margin"],
                             resume_timeout_s=p["resume_timeout_s"], suspend_timeout_s=p["suspend_timeout_s"],
                             source=os.path.basename(p["history_file"]))
        before = None
        if p["dest"]:
            before = read_text(p["dest"], "slurm.conf include", fileio.RECORD)
    except (ConfError, ParamError) as exc:
        module.fail_json(msg=str(exc))
    measured = values.pop("measured")
    result = dict(changed=False, block=conf, values=values, measured=measured)
    if p["dest"]:
        result["changed"] = before != conf
        if module._diff:
            result["diff"] = {"before": before or "", "after": conf, "before_header": p["dest"], "after_header": p["dest"]}
        if result["changed"] and not module.check_mode:
            directory = os.path.dirname(p["dest"]) or "/"
            if not os.path.isdir(directory):
                module.fail_json(msg="option dest: the directory %s does not exist (nothing written)" % directory)
            try:
                fileio.atomic_write(p["dest"], conf, 0o644, directory, module)
            except (fileio.HostFsError, OSError) as exc:
                module.fail_json(msg="could not write %s: %s (it is as it was)" % (p["dest"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
