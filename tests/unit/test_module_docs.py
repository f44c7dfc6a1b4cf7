"""Module documentation that is shared.

- Top-level options several modules share are documented once, in doc_fragments/ (the
  collection's plugins/doc_fragments/): each fragment is used, no module documents a fragment's
  option again, and the repository's ansible.cfg resolves them for ansible-doc -M library.
- Suboptions cannot be shared that way (ansible merges fragments per top-level option), so the
  copies are kept from drifting: fleetnap_profile documents the options of its two halves
  (cstates: cpuidle_qos's, sleep: sleep_policy's) with the same type, default, choices and element
  type; gear_observe and gear_wave document their common host entries alike.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO, VENV_BIN

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


# ---------------------------------------------------------------------------------------------
# Doc fragments (doc_fragments/, shipped as plugins/doc_fragments/): options several modules share
# are documented once there; the modules name them in extends_documentation_fragment.

FRAGMENTS = REPO / "doc_fragments"
PREFIX = "fleetnap.power."


def fragment(name, variant="DOCUMENTATION"):
    tree = ast.parse((FRAGMENTS / ("%s.py" % name)).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModuleDocFragment"]
    for node in cls.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == variant:
            return yaml.safe_load(node.value.value)
    raise AssertionError("doc_fragments/%s.py has no %s" % (name, variant))


def fragments_of(module):
    """(name, variant) of every fleetnap.power fragment the module extends."""
    out = []
    for ref in documentation(module).get("extends_documentation_fragment") or []:
        if ref.startswith(PREFIX):
            name, _, variant = ref[len(PREFIX):].partition(".")
            out.append((name, variant.upper() or "DOCUMENTATION"))
    return out


MODULES = sorted(p.stem for p in (REPO / "library").glob("*.py"))
USERS = {m: fragments_of(m) for m in MODULES}


def test_every_fragment_is_used_and_no_module_documents_a_fragment_option_again():
    used = set(name for refs in USERS.values() for name, _ in refs)
    assert used == set(p.stem for p in FRAGMENTS.glob("*.py"))
    # The BMC modules share their BMC options, the /sys readers sysfs_root.
    assert set(m for m, refs in USERS.items() if refs) >= {
        "bmc_power", "redfish_power", "gear_observe", "gear_wave", "cpuidle_info", "cstate_residency", "pm_debug"}
    twice = ["%s: %s (also in %s)" % (m, opt, name) for m, refs in USERS.items() for name, variant in refs
             for opt in fragment(name, variant)["options"] if opt in documentation(m).get("options", {})]
    assert twice == []      # ansible would let the module's copy win, silently


def test_bmc_rate_limit_redfish_differs_only_in_min_intervals_default():
    ipmi, redfish = fragment("bmc_rate_limit"), fragment("bmc_rate_limit", "REDFISH")
    assert (ipmi["options"]["min_interval"]["default"], redfish["options"]["min_interval"]["default"]) == (1, 0.25)
    for doc in (ipmi, redfish):
        del doc["options"]["min_interval"]["default"]
    assert ipmi == redfish


# gear_observe, gear_shift_prepare and gear_wave take the same per-host entries
# (fleethosts.host_options()), as suboptions of hosts, which fragments cannot extend (ansible merges
# them per top-level option): they document them alike. bmc_address and inventory also say what
# gear_wave does with them; gear_shift_prepare observes as gear_observe does, in the same words.
OWN_WORDS = ("bmc_address", "inventory")


def test_fleet_modules_document_the_shared_host_entries_alike():
    from ansible.module_utils.fleetnap.fleethosts import host_options
    observe = documentation("gear_observe")["options"]["hosts"]["suboptions"]
    wave = documentation("gear_wave")["options"]["hosts"]["suboptions"]
    shared = sorted(host_options())
    assert set(shared) <= set(observe) and set(shared) <= set(wave)
    drift = [name for name in shared if name not in OWN_WORDS and observe[name] != wave[name]]
    drift += ["%s %s" % (name, key) for name in OWN_WORDS for key in CONTRACT
              if observe[name].get(key) != wave[name].get(key)]
    assert drift == []
    assert documentation("gear_shift_prepare")["options"]["hosts"] == documentation("gear_observe")["options"]["hosts"]


def test_ansible_doc_in_the_repository_resolves_the_fragments():
    """The repository's ansible.cfg finds fleetnap.power's fragments through collections/ (a link
    to doc_fragments/), as `make lint` runs ansible-doc -M library for every module."""
    users = sorted(m for m, refs in USERS.items() if refs)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    proc = subprocess.run([str(VENV_BIN / "ansible-doc"), "--json", "-M", str(REPO / "library"), *users],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=120)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    for m in users:
        options = docs[m]["doc"]["options"]
        for name, variant in USERS[m]:
            for opt, want in fragment(name, variant)["options"].items():
                assert options[opt]["description"], (m, opt)
                assert options[opt].get("default") == want.get("default"), (m, opt)


# Modules that are steps of one role's workflow say so first (issue 36), naming the role(s) that
# call them; every other module is a building block of its own and does not say it.
INTERNAL = {"gear_shift_plan": ["gear_shift"], "gear_shift_prepare": ["gear_shift"], "gear_state": ["gear_shift"], "gear_record": ["gear_shift"],
            "shift_lock": ["gear_shift"], "gear_journal": ["gear_shift"], "resume_summary": ["resume_measure"],
            "fleetnap_fact": ["resume_measure", "wake_latency_measure"]}


def test_internal_modules_say_so_and_name_the_roles_that_call_them():
    for module in sorted(p.stem for p in (REPO / "library").glob("*.py")):
        first = documentation(module)["description"][0]
        if module not in INTERNAL:
            assert not first.startswith("Internal."), module
            continue
        assert first.startswith("Internal. A step of the "), (module, first)
        for role in INTERNAL[module]:
            assert "C(fleetnap.power.%s)" % role in first, (module, role)
            tasks = "\n".join(p.read_text() for p in (REPO / "roles" / role / "tasks").glob("*.yml"))
            assert re.search(r"^\s+%s:\s*$" % module, tasks, re.M), (module, role)   # a task of the role calls it
