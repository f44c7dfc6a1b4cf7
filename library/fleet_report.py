#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: One self-contained HTML page about the fleet's power states
description:
  - Runs on the controller. Joins what fleetnap's playbooks left in the artifacts directory (the
    latency gate's decisions, suspend/resume measurements, C-state wake latency, the gear and its
    history) into one HTML page with no external assets, and returns the same data.
  - Sections without data say which playbook to run.
  - Every artifact is read as a regular file under O(artifacts_dir) (a link out of it, a FIFO or a
    device is refused; at most 64 MiB) holding strict JSON (no NaN, nesting at most 64 deep, no lone
    surrogates); the gear history's dates must lie between 2000-01-01 and a year from now. A bad
    one fails the report naming the file. The page is written atomically; a C(dest) that cannot be
    replaced (immutable, in an append-only directory) is refused before anything is written.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  artifacts_dir:
    description: The directory the playbooks write to (C(profile/), C(resume/), C(wake-latency/), C(gear/)).
    type: path
    required: true
  dest:
    description: The page to write; default C(report.html) in O(artifacts_dir).
    type: path
  title:
    description: Page title.
    type: str
    default: fleetnap fleet report
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Write the fleet report
  fleet_report:
    artifacts_dir: "{{ playbook_dir | dirname }}/artifacts"
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The page written.
  returned: always
  type: str
sections:
  description: Which sections had data.
  returned: always
  type: dict
  sample: {profile: 6, resume: 6, wake_latency: 0, gear: true}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap import fileio
from ansible.module_utils.fleetnap.report import ReportError, gather, render
from ansible.module_utils.fleetnap.validate import check_params, path, text

CHECKS = {
    "artifacts_dir": path(),
    "dest": path(),
    "title": text(max_len=200),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            artifacts_dir=dict(type="path", required=True),
            dest=dict(type="path"),
            title=dict(type="str", default="fleetnap fleet report"),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    if not os.path.isdir(p["artifacts_dir"]):
        module.fail_json(msg="artifacts_dir %s does not exist: run a fleetnap playbook first" % p["artifacts_dir"])
    dest = p["dest"] or os.path.join(p["artifacts_dir"], "report.html")
    # Where the page goes is checked before any artifact is read.
    if os.path.isdir(dest):
        module.fail_json(msg="dest %s is a directory: give a file name such as %s"
                             % (dest, os.path.join(dest, "report.html")))
    if not os.path.isdir(os.path.dirname(dest) or "/"):
        module.fail_json(msg="the directory of dest %s does not exist: create %s first"
                             % (dest, os.path.dirname(dest)))
    try:
        data = gather(p["artifacts_dir"])
    except ReportError as exc:
        module.fail_json(msg=str(exc))
    page = render(data, p["title"])
    changed = not fileio.same_content(dest, page.encode("utf-8"), 0o644)
    if changed:
        problem = fileio.write_problem(dest)
        if problem:
            module.fail_json(msg="cannot write dest %s: %s; nothing was written" % (dest, problem))
    if changed and not module.check_mode:
        try:
            fileio.atomic_write(dest, page, 0o644, module=module)
        except (fileio.HostFsError, OSError) as exc:
            module.fail_json(msg="%s (the report there, if any, is as it was)" % exc)
    sections = {
        "profile": len(data["profile"] or {}),
        "resume": len((data["resume"] or {}).get("hosts") or []),
        "wake_latency": len(data["wake_latency"]),
        "gear": data["gear"] is not None,
        "gear_history": len(data["gear_history"]),
    }
    module.exit_json(changed=changed, dest=dest, sections=sections)


if __name__ == "__main__":
    main()
