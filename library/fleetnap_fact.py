#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleetnap_fact
short_description: Store a host's measurements where the latency gate reads them
description:
  - Internal. A step of the resume_measure and wake_latency_measure roles (to store what they
    measured), documented for those who compose their phases themselves; a playbook of one's own
    calls C(fleetnap.power.resume_measure) or C(fleetnap.power.wake_latency_measure).
  - Merges O(data) into the host's local facts file C(/etc/ansible/facts.d/fleetnap.fact)
    (JSON), which Ansible's fact gathering exposes as C(ansible_facts['ansible_local']['fleetnap'])
    and the C(latency_profile) role reads (C(wake_latency_us), C(resume)).
  - Top-level keys in O(data) replace the stored ones; other stored keys are kept. With
    O(recursive=true) a dict value is merged into the stored dict of the same key instead, so a
    measurement of some C-states keeps the stored values of the others.
version_added: "0.1.0"
author: fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  data:
    description:
      - Keys to store, for example C(resume) or C(wake_latency_us). Numbers must be finite (NaN
        and infinities are refused, since JSON cannot hold them and the latency gate would misread them).
    type: dict
    required: true
  recursive:
    description: Merge dict values one level deep instead of replacing them.
    type: bool
    default: false
  path:
    description:
      - The facts file (absolute). It and its directory are created when missing. A file that is
        not UTF-8 JSON holding an object, or is larger than 4 MB, is refused, never overwritten.
    type: path
    default: /etc/ansible/facts.d/fleetnap.fact
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Store the measured resume latency
  fleetnap_fact:
    data:
      resume: {kernel_ms: 120.4, end_to_end_ms: 2300, cycles: 3}
"""

RETURN = r"""
facts:
  description: The whole stored document after the call.
  returned: always
  type: dict
"""

import json
import math
import os

from ansible.module_utils.fleetnap.parse import loads
from ansible.module_utils.fleetnap.sysfs import HostFS, HostFsError, write_file_atomic
from ansible.module_utils.fleetnap.validate import ParamError, ansible_module, check_params, path, read_text_file

# The facts file holds a host's measurements: a few KB. Anything near this is not ours.
FACT_LIMIT = 4 * 1024 * 1024
CHECKS = {"path": path()}


def _not_finite(value, where):
    """The first place in value (a JSON-like tree) holding NaN or an infinity, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "%s is %s" % (where, value)
    if isinstance(value, dict):
        for key, item in value.items():
            found = _not_finite(item, "%s.%s" % (where, key))
            if found:
                return found
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _not_finite(item, "%s[%d]" % (where, i))
            if found:
                return found
    return None


def read_facts(module, fact_path):
    """The stored document ({} when there is none); fails naming the file when it is not ours."""
    if not os.path.lexists(fact_path):
        return {}
    if os.path.isdir(fact_path):
        module.fail_json(msg="option path: %s is a directory, not a facts file" % fact_path)
    try:
        text = read_text_file(fact_path, "facts file", FACT_LIMIT)
        current = loads(text, fact_path, FACT_LIMIT)
    except ParamError as exc:
        module.fail_json(msg=str(exc))
    except ValueError as exc:
        module.fail_json(msg="%s; move it aside, fleetnap will start a new one" % exc)
    if not isinstance(current, dict):
        module.fail_json(msg="%s does not hold a JSON object; move it aside" % fact_path)
    return current


def main():
    module = ansible_module(
        argument_spec=dict(
            data=dict(type="dict", required=True),
            path=dict(type="path", default="/etc/ansible/facts.d/fleetnap.fact"),
            recursive=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    bad = _not_finite(module.params["data"], "data")
    if bad:
        module.fail_json(msg="option data: %s: measurements must be finite numbers" % bad)
    path = module.params["path"]
    current = read_facts(module, path)
    new = dict(current)
    for key, value in module.params["data"].items():
        if module.params["recursive"] and isinstance(value, dict) and isinstance(current.get(key), dict):
            merged = dict(current[key])
            merged.update(value)
            value = merged
        new[key] = value
    changed = new != current
    text = json.dumps(new, indent=1, sort_keys=True) + "\n"
    if len(text) > FACT_LIMIT:
        module.fail_json(msg="option data: the facts file would be %d bytes, more than %d" % (len(text), FACT_LIMIT))
    if changed and not module.check_mode:
        try:
            write_file_atomic(HostFS("/"), path, text, 0o644, module)
        except (HostFsError, OSError) as exc:
            module.fail_json(msg="%s; the facts file is as it was" % exc)
    result = dict(changed=changed, facts=new)
    if module._diff:
        result["diff"] = {"before": current, "after": new}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
