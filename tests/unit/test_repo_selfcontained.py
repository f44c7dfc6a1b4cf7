"""A fresh clone is complete: no tracked file reaches outside the repository for its data."""

import subprocess

from conftest import DATA, REPO

# Spelled in pieces so that this file does not match itself.
OUTSIDE = ("../" + "shared", "FLEETNAP_" + "SHARED")


def tracked_files():
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], check=True,
                         capture_output=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_refers_outside_the_repository():
    files = tracked_files()
    assert len(files) > 100          # git answered with the real list
    offenders = []
    for path in files:
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        for needle in OUTSIDE:
            if needle in text:
                line = text[:text.index(needle)].count("\n") + 1
                offenders.append("%s:%d: %s" % (path.relative_to(REPO), line, needle))
    assert not offenders, "tracked files refer outside the repository:\n" + "\n".join(offenders)


def test_reference_data_is_tracked_with_its_provenance():
    tracked = {str(p.relative_to(REPO)) for p in tracked_files()}
    assert DATA.is_relative_to(REPO)
    rel = DATA.relative_to(REPO)
    captures = [n for n in tracked if n.startswith("%s/cpuidle/" % rel) and n.endswith(".txt")]
    assert len(captures) == 34
    for folder in ("cpuidle", "dmesg", "wake-latency"):
        assert "%s/%s/README.md" % (rel, folder) in tracked
    # third-party data keeps its own licence; fleetnap's own licence is at the root
    assert {"%s/cpuidle/LICENSE" % rel, "%s/dmesg/LICENSE" % rel, "LICENSE"} <= tracked
    assert "GNU GENERAL PUBLIC LICENSE" in (REPO / "LICENSE").read_text()
    assert "Version 3" in (REPO / "LICENSE").read_text()


def test_make_test_runs_every_molecule_scenario():
    """A scenario directory that lab.mk's MOLECULE_SCENARIOS does not name would never run."""
    import re
    line = re.search(r"^MOLECULE_SCENARIOS := (.*)$", (REPO / "lab/lab.mk").read_text(), re.M)
    scenarios = {p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml")}
    assert line and set(line.group(1).split()) == scenarios


def test_molecule_scenarios_extend_one_base_configuration():
    """The lab inventory, the modules and roles, the lab's create/destroy and testinfra are said once
    (.config/molecule/config.yml); a scenario says only what is its own."""
    import yaml
    base = yaml.safe_load((REPO / ".config/molecule/config.yml").read_text())
    assert base["verifier"]["name"] == "testinfra"
    assert "--inventory=${MOLECULE_PROJECT_DIRECTORY}/inventories/lab" in base["ansible"]["executor"]["args"]["ansible_playbook"]
    assert base["ansible"]["playbooks"]["create"] == "../default/create.yml"
    assert (REPO / "molecule/default/create.yml").is_file() and (REPO / "molecule/default/destroy.yml").is_file()
    assert "--base-config" in (REPO / "tests/run_molecule.py").read_text()
    for path in sorted((REPO / "molecule").glob("*/molecule.yml")):
        own = yaml.safe_load(path.read_text())
        assert set(own) <= {"ansible", "scenario"}, (path, sorted(own))
        assert set(own.get("ansible", {})) <= {"cfg", "playbooks"}, path
        assert set(own.get("ansible", {}).get("cfg", {}).get("defaults", {})) <= {"forks"}, path
        playbooks = own.get("ansible", {}).get("playbooks", {})
        # a scenario may have its own create/destroy (gear_schedule needs no lab), never the base's again
        assert all(playbooks.get(k) != v for k, v in base["ansible"]["playbooks"].items()), path
        for name in playbooks.values():
            assert (path.parent / name).is_file(), (path, name)
        assert own["scenario"]["name"] == path.parent.name
