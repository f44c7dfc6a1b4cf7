"""fleetnap_profile documents the options of its two halves as suboptions (cstates: cpuidle_qos's,
sleep: sleep_policy's). Ansible's doc fragments merge at the top level only, so they cannot be
shared that way; this keeps the copies from drifting: every option both document has the same
type, default, choices and element type in both."""

from __future__ import annotations

import ast

import pytest
import yaml

from conftest import REPO

CONTRACT = ("type", "default", "choices", "elements", "required")


def documentation(module):
    tree = ast.parse((REPO / "library" / ("%s.py" % module)).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION":
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % module)


# cstates repeats most of cpuidle_qos; sleep decides the state itself and shares only mask_targets.
@pytest.mark.parametrize("part, half, at_least", [("cstates", "cpuidle_qos", 8), ("sleep", "sleep_policy", 1)])
def test_fleetnap_profile_documents_its_halves_options_as_they_are(part, half, at_least):
    subs = documentation("fleetnap_profile")["options"][part]["suboptions"]
    own = documentation(half)["options"]
    shared = sorted(set(subs) & set(own))
    assert len(shared) >= at_least, (part, shared)   # the halves' options really are repeated
    drift = ["%s.%s %s: %r here, %r in %s" % (part, name, key, subs[name].get(key), own[name].get(key), half)
             for name in shared for key in CONTRACT if subs[name].get(key) != own[name].get(key)]
    assert drift == []
