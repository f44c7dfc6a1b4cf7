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
