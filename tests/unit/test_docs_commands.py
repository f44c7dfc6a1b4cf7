"""The README and docs/ show what this tree has: every playbook their commands run exists, every
variable those commands set with -e and every name they quote (`gear_batch_size`,
`fleetnap_bmc_ca_path: ...`) is used by the playbooks, roles, inventories, modules or the lab. A
rename that leaves the documentation behind fails here, naming the page and the name."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
CODE = ("playbooks", "roles", "inventories/example", "library", "module_utils", "lab", "packaging",
        "Makefile", "ansible.cfg")
SOURCE_SUFFIXES = (".yml", ".yaml", ".py", ".j2", ".mk", ".cfg", ".csv")


def _code_text():
    texts = []
    for top in CODE:
        path = REPO / top
        files = [path] if path.is_file() else [
            f for f in sorted(path.rglob("*"))
            if f.is_file() and f.suffix in SOURCE_SUFFIXES and not {"state", "sim-state", "__pycache__"} & set(f.parts)]
        texts += [f.read_text(errors="replace") for f in files]
    return "\n".join(texts)


CODE_TEXT = _code_text()
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
QUOTED_NAME = re.compile(r"`([a-z][a-z0-9]*_[a-z0-9_]+)(?:[:=][^`]*)?`")


def commands(page):
    """The ansible-playbook command lines of a page's sh blocks (continuations joined)."""
    out = []
    for block in SHELL_BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0]
            if "ansible-playbook" in line:
                out.append(line.split())
    return out


def used(name):
    return re.search(r"\b%s\b" % re.escape(name), CODE_TEXT) is not None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_documented_commands_run_playbooks_and_variables_that_exist(page):
    wrong = []
    for argv in commands(page):
        books = [a for a in argv if a.startswith("playbooks/")]
        wrong += ["%s: no such playbook" % b for b in books if not (REPO / b).is_file()]
        wrong += ["%s: not a playbook" % " ".join(argv)] if not books else []
        for flag, value in zip(argv, argv[1:]):
            if flag == "-e" and "=" in value and not used(value.split("=", 1)[0]):
                wrong.append("%s: -e %s, a variable nothing uses" % (" ".join(books), value))
    assert wrong == []


def test_the_readme_shows_the_two_commands_and_one_command_per_job():
    readme = (REPO / "README.md").read_text()
    assert readme.index("make demo") < readme.index("make test") < readme.index("## The three jobs")
    books = [a for argv in commands(REPO / "README.md") for a in argv if a.startswith("playbooks/")]
    for job in ("apply_profile", "measure_resume", "gear_shift"):
        assert "playbooks/%s.yml" % job in books, job


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_page_quotes_is_used_by_the_code(page):
    unknown = sorted(set(m.group(1) for m in QUOTED_NAME.finditer(page.read_text()) if not used(m.group(1))))
    assert unknown == []


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_reach_a_file_and_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue        # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.is_file():
            slugs = {_slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(), re.M)}
            if anchor not in slugs:
                broken.append(target)
    assert broken == []
