#!/usr/bin/env python3
"""Assemble the ``fleetnap.power`` collection from this repository and build its tarball.

The repository keeps Ansible's playbook-adjacent layout (``library/``, ``module_utils/fleetnap/``,
``roles/``, ``playbooks/``); no second copy of any code is committed. This script generates the
collection tree from those sources:

- ``plugins/modules/`` from ``library/*.py`` and ``plugins/module_utils/`` from
  ``module_utils/fleetnap/*.py``, with every ``ansible.module_utils.fleetnap.X`` import rewritten to
  ``ansible_collections.fleetnap.power.plugins.module_utils.X`` (the form AnsiballZ packs for
  collection modules);
- ``plugins/doc_fragments/`` from ``doc_fragments/*.py``: the option documentation several modules
  share. Modules name them ``fleetnap.power.NAME`` (or ``fleetnap.power.NAME.VARIANT``) in
  ``extends_documentation_fragment`` in the repository already (``collections/`` links them there
  for ansible-doc); every such name must be a fragment, and variant, that exists;
- ``plugins/action/`` from ``action_plugins/*.py`` (each the action of the module of its name), without
  their lines for this repository's layout (``# fleetnap-repository-layout: begin`` to ``end``);
- ``plugins/lookup/`` from ``lookup_plugins/*.py`` (``fleetnap.power.NAME`` in the repository's
  playbooks and roles already: ``collections/`` links them there too);
- ``roles/`` and ``playbooks/`` (templates, task files and hooks included), with every task that
  calls one of this repository's modules by its short name, every ``roles:`` entry and every
  ``include_role``/``import_role`` of one of its roles rewritten to the fully qualified name
  ``fleetnap.power.NAME``. The rewrite edits only those scalars, at the positions the YAML parser
  reports, so comments and layout stay as written;
- the modules' and doc fragments' documentation and the roles' ``meta/argument_specs.yml``: ``M(name)`` and
  ``seealso`` entries of sibling modules become ``fleetnap.power.name`` (collection docs need
  fully qualified names);
- ``LICENSE`` from the repository root, ``tests/sanity/ignore-*.txt`` from ``packaging/sanity/``
  (ansible-test's exceptions, each with its reason); ``galaxy.yml``, ``meta/runtime.yml``, ``meta/execution-environment.yml`` and ``bindep.txt``,
  ``CHANGELOG.md`` from ``packaging/`` (the version is set in galaxy.yml, once),
  and a generated ``README.md`` listing the modules (their ``short_description``), roles and
  playbooks;

then runs ``ansible-galaxy collection build`` into ``--dist`` and removes older tarballs of this
collection there (the EE definition takes the one tarball it finds). Sources are only read.

    .venv/bin/python packaging/build_collection.py                 # build/ + the tarball in build/
    .venv/bin/python packaging/build_collection.py --out DIR --dist DIR
    .venv/bin/python packaging/build_collection.py --no-tarball    # the tree only
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
PACKAGING = REPO / "packaging"
MARKER = ".fleetnap-build"   # written into the output tree: only such a tree is ever replaced

OLD_MU = "ansible.module_utils.fleetnap"
IMPORT_RE = re.compile(r"\bansible\.module_utils\.fleetnap\b")
# Task keywords that hold nested task lists.
BLOCK_KEYS = ("block", "rescue", "always")
PLAY_TASK_KEYS = ("pre_tasks", "tasks", "post_tasks", "handlers")
ROLE_INCLUDES = {"include_role", "import_role", "ansible.builtin.include_role",
                 "ansible.builtin.import_role", "ansible.legacy.include_role",
                 "ansible.legacy.import_role"}


class BuildError(Exception):
    pass


def read_galaxy(src: Path) -> dict:
    try:
        meta = yaml.safe_load(src.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError("cannot read %s: %s" % (src, exc))
    for key in ("namespace", "name", "version"):
        if not meta.get(key):
            raise BuildError("%s: '%s' is missing (set it there)" % (src, key))
    if not re.match(r"^\d+\.\d+\.\d+([-+].*)?$", str(meta["version"])):
        raise BuildError("%s: version %r is not semantic (X.Y.Z)" % (src, meta["version"]))
    return meta


# ---------------------------------------------------------------------------------------------
# Python: modules and module_utils


def rewrite_python(text: str, fqcn_mu: str, origin: Path) -> str:
    """Point every fleetnap module_utils import at the collection's plugins/module_utils."""
    out = IMPORT_RE.sub(fqcn_mu, text)
    if OLD_MU in out:
        raise BuildError("%s: an import of %s was left after the rewrite" % (origin, OLD_MU))
    try:
        compile(out, str(origin), "exec")
    except SyntaxError as exc:
        raise BuildError("%s: does not compile after the import rewrite: %s" % (origin, exc))
    return out


REPO_LAYOUT_RE = re.compile(r"^[ \t]*# fleetnap-repository-layout: begin\b.*?^[ \t]*# fleetnap-repository-layout: end"
                            r"[^\n]*\n", re.M | re.S)


def drop_repo_layout(text: str, origin: Path) -> str:
    """An action plugin without its lines for this repository's layout (between the
    ``# fleetnap-repository-layout: begin`` and ``end`` lines): the collection imports its
    module_utils by their collection names."""
    out, n = REPO_LAYOUT_RE.subn("", text)
    if "fleetnap-repository-layout" in out or n > 1:
        raise BuildError("%s: its repository-layout block must be one begin ... end pair" % origin)
    return out


def rewrite_doc_refs(text: str, prefix: str, modules: set) -> tuple:
    """A module's references to its siblings, fully qualified as collection docs need them:
    ``M(name)`` in any text and ``- module: name`` in ``seealso``. Returns (text, count)."""
    names = "|".join(sorted((re.escape(m) for m in modules), key=len, reverse=True))
    text, n1 = re.subn(r"\bM\((%s)\)" % names, lambda m: "M(%s.%s)" % (prefix, m.group(1)), text)
    text, n2 = re.subn(r"^(\s*-\s*module:\s*)(%s)\s*$" % names,
                       lambda m: "%s%s.%s" % (m.group(1), prefix, m.group(2)), text, flags=re.M)
    return text, n1 + n2


def module_doc(path: Path) -> dict:
    """The module's DOCUMENTATION, parsed (read from the source without importing it)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(ast.literal_eval(node.value)) or {}
    raise BuildError("%s has no DOCUMENTATION string" % path)


def fragment_variants(path: Path) -> set:
    """The documentation variables of a doc fragment (``DOCUMENTATION`` and named variants such as
    ``REDFISH``, addressed as ``NAME.redfish``), each a string literal of YAML with options."""
    tree = ast.parse(path.read_text(), str(path))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModuleDocFragment"]
    if len(classes) != 1:
        raise BuildError("%s: a doc fragment holds one class ModuleDocFragment" % path)
    variants = set()
    for node in classes[0].body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if not isinstance(target, ast.Name):
                continue
            # ansible-test's yamllint reads each one as a literal; a computed string breaks it.
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                raise BuildError("%s: %s must be a string literal" % (path, target.id))
            try:
                doc = yaml.safe_load(node.value.value)
            except yaml.YAMLError as exc:
                raise BuildError("%s: %s is not valid YAML: %s" % (path, target.id, exc))
            if not isinstance(doc, dict) or not (doc.get("options") or doc.get("attributes")):
                raise BuildError("%s: %s documents no options or attributes" % (path, target.id))
            variants.add(target.id)
    if "DOCUMENTATION" not in variants:
        raise BuildError("%s: ModuleDocFragment has no DOCUMENTATION" % path)
    return variants


def check_fragment_refs(doc: dict, origin: Path, prefix: str, fragments: dict) -> None:
    """Every ``extends_documentation_fragment`` entry of this collection names a fragment of
    ``doc_fragments/`` and one of its variants (``DOCUMENTATION`` when none is given)."""
    refs = doc.get("extends_documentation_fragment") or []
    if isinstance(refs, str):
        refs = refs.split(",")
    for ref in (str(r).strip() for r in refs):
        if not ref.startswith(prefix + "."):
            continue
        name, _, variant = ref[len(prefix) + 1:].partition(".")
        if name not in fragments:
            raise BuildError("%s: extends_documentation_fragment %s: there is no doc_fragments/%s.py"
                             % (origin, ref, name))
        if (variant.upper() or "DOCUMENTATION") not in fragments[name]:
            raise BuildError("%s: extends_documentation_fragment %s: doc_fragments/%s.py has no %s (it has %s)"
                             % (origin, ref, name, variant.upper(), ", ".join(sorted(fragments[name]))))


# ---------------------------------------------------------------------------------------------
# YAML: short names -> FQCN, edited in place at the positions the parser reports


def _scalar(node):
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _mapping_get(node, key):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if _scalar(k) == key:
                return v
    return None


class FqcnRewriter:
    """Collect (start, end, old, new) character edits for one YAML file's task and role lists."""

    def __init__(self, prefix: str, modules: set, roles: set):
        self.prefix = prefix
        self.modules = modules
        self.roles = roles
        self.edits = []

    def _edit(self, node, new):
        start, end = node.start_mark.index, node.end_mark.index
        if node.style in ("'", '"'):     # a quoted name: edit between the quotes
            start, end = start + 1, end - 1
        elif node.style is not None:     # block scalars (| >) are not names
            raise BuildError("line %d: name %r written as a block scalar" % (node.start_mark.line + 1, node.value))
        self.edits.append((start, end, node.value, new))

    def tasks(self, seq):
        if not isinstance(seq, yaml.SequenceNode):
            return
        for task in seq.value:
            if not isinstance(task, yaml.MappingNode):
                continue
            for k, v in task.value:
                key = _scalar(k)
                if key in self.modules:
                    self._edit(k, "%s.%s" % (self.prefix, key))
                elif key in BLOCK_KEYS:
                    self.tasks(v)
                elif key in ROLE_INCLUDES:
                    name = _mapping_get(v, "name") or _mapping_get(v, "role")
                    if _scalar(name) in self.roles:
                        self._edit(name, "%s.%s" % (self.prefix, name.value))

    def play(self, play):
        if not isinstance(play, yaml.MappingNode):
            return
        for key in PLAY_TASK_KEYS:
            self.tasks(_mapping_get(play, key))
        roles = _mapping_get(play, "roles")
        if isinstance(roles, yaml.SequenceNode):
            for entry in roles.value:
                name = entry if isinstance(entry, yaml.ScalarNode) else (
                    _mapping_get(entry, "role") or _mapping_get(entry, "name"))
                if _scalar(name) in self.roles:
                    self._edit(name, "%s.%s" % (self.prefix, name.value))


def rewrite_yaml(text: str, kind: str, rewriter: FqcnRewriter, origin: Path) -> str:
    """kind: 'playbook' (a list of plays, or of tasks for included files) or 'tasks'."""
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise BuildError("%s: not valid YAML: %s" % (origin, exc))
    rewriter.edits = []
    try:
        _collect(docs, kind, rewriter)
    except BuildError as exc:
        raise BuildError("%s: %s" % (origin, exc))
    out = text
    for start, end, old, new in sorted(rewriter.edits, reverse=True):
        if out[start:end] != old:
            raise BuildError("%s: cannot rewrite %r at offset %d (found %r)" % (origin, old, start, out[start:end]))
        out = out[:start] + new + out[end:]
    return out


def _collect(docs, kind, rewriter):
    for doc in docs:
        if not isinstance(doc, yaml.SequenceNode):
            continue
        for item in doc.value:
            # A playbook lists plays (hosts/import_playbook); an included file lists tasks.
            if kind == "playbook" and (_mapping_get(item, "hosts") is not None
                                       or _mapping_get(item, "import_playbook") is not None):
                rewriter.play(item)
            else:
                rewriter.tasks(yaml.SequenceNode("tag:yaml.org,2002:seq", [item]))


# ---------------------------------------------------------------------------------------------


def prepare_out(out: Path) -> None:
    """Create ``out``; replace it only when it is empty or a previous build of this script."""
    if out.exists():
        if not out.is_dir():
            raise BuildError("--out %s exists and is not a directory; choose another path" % out)
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise BuildError("--out %s is not empty and was not written by this script (no %s); "
                             "refusing to replace it: choose an empty or new directory" % (out, MARKER))
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("generated by packaging/build_collection.py; replaced on every build\n")


def copy_tree_rewriting(src: Path, dst: Path, rewriter: FqcnRewriter, kind_of) -> int:
    """Copy src to dst; YAML files go through rewrite_yaml(kind_of(relpath)). Returns edits made."""
    edits = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        target = dst / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        kind = kind_of(rel) if path.suffix in (".yml", ".yaml") else None
        if kind:
            text = path.read_text()
            new = rewrite_yaml(text, kind, rewriter, path)
            edits += len(rewriter.edits)
            target.write_text(new)
            shutil.copymode(path, target)
        else:
            shutil.copy2(path, target)
    return edits


def first_comment(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def generate_readme(meta: dict, modules: dict, roles: dict, playbooks: dict) -> str:
    fq = "%s.%s" % (meta["namespace"], meta["name"])
    lines = [
        "# %s %s" % (fq, meta["version"]),
        "",
        meta.get("description", "").strip(),
        "",
        "Generated by `packaging/build_collection.py` from the fleetnap repository (library/,",
        "module_utils/fleetnap/, roles/, playbooks/); do not edit the files of this tree.",
        "",
        "```sh",
        "ansible-galaxy collection install %s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]),
        "ansible-doc %s.cpuidle_info" % fq,
        "ansible-playbook -i INVENTORY %s.apply_profile --check --diff" % fq,
        "```",
        "",
        "Requires ansible-core %s; targets need only python3 and its standard library."
        % meta["requires_ansible"],
        "",
        "## Modules",
        "",
        "| module | what it does |",
        "|---|---|",
    ]
    for name, desc in sorted(modules.items()):
        lines.append("| `%s.%s` | %s |" % (fq, name, desc.replace("|", "\\|")))
    lines += ["", "## Roles", "", "| role | what it does |", "|---|---|"]
    for name, desc in sorted(roles.items()):
        lines.append("| `%s.%s` | %s |" % (fq, name, desc.replace("|", "\\|")))
    lines += ["", "## Playbooks", "", "| playbook | what it does |", "|---|---|"]
    for name, desc in sorted(playbooks.items()):
        lines.append("| `%s.%s` | %s |" % (fq, name, desc.replace("|", "\\|")))
    lines += [
        "",
        "Collection playbooks write their artifacts next to themselves by default",
        "(`playbook_dir | dirname ~ '/artifacts'`), i.e. inside the installed collection: point",
        "`fleetnap_artifacts_dir`, `resume_measure_results_dir` and",
        "`gear_shift_state_dir` at a persistent directory (see packaging/README.md in the repository).",
        "",
    ]
    return "\n".join(lines)


def build(out: Path, dist: Path | None, galaxy_bin: str) -> dict:
    meta = read_galaxy(PACKAGING / "galaxy.yml")
    runtime = yaml.safe_load((PACKAGING / "meta" / "runtime.yml").read_text()) or {}
    if not runtime.get("requires_ansible"):
        raise BuildError("%s: requires_ansible is missing" % (PACKAGING / "meta" / "runtime.yml"))
    meta["requires_ansible"] = runtime["requires_ansible"]
    prefix = "%s.%s" % (meta["namespace"], meta["name"])
    fqcn_mu = "ansible_collections.%s.%s.plugins.module_utils" % (meta["namespace"], meta["name"])

    module_sources = sorted((REPO / "library").glob("*.py"))
    mu_sources = sorted((REPO / "module_utils" / "fleetnap").glob("*.py"))
    fragment_sources = sorted((REPO / "doc_fragments").glob("*.py"))
    lookup_sources = sorted((REPO / "lookup_plugins").glob("*.py"))
    action_sources = sorted((REPO / "action_plugins").glob("*.py"))
    role_dirs = sorted(p for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
    if not module_sources or not mu_sources or not role_dirs:
        raise BuildError("library/, module_utils/fleetnap/ or roles/ is empty under %s" % REPO)
    modules = {p.stem for p in module_sources}
    roles = {p.name for p in role_dirs}
    clash = modules & roles
    if clash:
        raise BuildError("names used by both a module and a role: %s" % ", ".join(sorted(clash)))

    # Read and check everything before the first write.
    changelog = (PACKAGING / "CHANGELOG.md").read_text()
    if not re.search(r"^## %s\s*$" % re.escape(str(meta["version"])), changelog, re.M):
        raise BuildError("%s has no '## %s' section: describe the release there before building it"
                         % (PACKAGING / "CHANGELOG.md", meta["version"]))
    fragments = {path.stem: fragment_variants(path) for path in fragment_sources}
    module_docs = {}
    for path in module_sources:
        doc = module_doc(path)
        if doc.get("module") != path.stem:
            raise BuildError("%s: DOCUMENTATION says module %r; it must be %r" % (path, doc.get("module"), path.stem))
        check_fragment_refs(doc, path, prefix, fragments)
        module_docs[path.stem] = str(doc.get("short_description", "")).strip()
    plugin_texts = {}
    doc_refs = 0
    for path in module_sources:
        text, n = rewrite_doc_refs(rewrite_python(path.read_text(), fqcn_mu, path), prefix, modules)
        plugin_texts[Path("plugins/modules") / path.name] = text
        doc_refs += n
    for path in mu_sources:
        plugin_texts[Path("plugins/module_utils") / path.name] = rewrite_python(path.read_text(), fqcn_mu, path)
    for path in fragment_sources:
        text, n = rewrite_doc_refs(rewrite_python(path.read_text(), fqcn_mu, path), prefix, modules)
        plugin_texts[Path("plugins/doc_fragments") / path.name] = text
        doc_refs += n
    for path in lookup_sources:
        text, n = rewrite_doc_refs(rewrite_python(path.read_text(), fqcn_mu, path), prefix, modules)
        plugin_texts[Path("plugins/lookup") / path.name] = text
        doc_refs += n
    for path in action_sources:
        if path.stem not in modules:
            raise BuildError("%s: an action plugin goes with the module of its name; there is no library/%s.py"
                             % (path, path.name))
        plugin_texts[Path("plugins/action") / path.name] = rewrite_python(drop_repo_layout(path.read_text(), path),
                                                                         fqcn_mu, path)

    prepare_out(out)
    shutil.copy2(PACKAGING / "galaxy.yml", out / "galaxy.yml")
    (out / "meta").mkdir()
    shutil.copy2(PACKAGING / "meta" / "runtime.yml", out / "meta" / "runtime.yml")
    shutil.copy2(PACKAGING / "meta" / "execution-environment.yml", out / "meta" / "execution-environment.yml")
    shutil.copy2(PACKAGING / "bindep.txt", out / "bindep.txt")
    shutil.copy2(PACKAGING / "CHANGELOG.md", out / "CHANGELOG.md")
    shutil.copy2(REPO / "LICENSE", out / "LICENSE")
    (out / "tests" / "sanity").mkdir(parents=True)
    for ignore in sorted((PACKAGING / "sanity").glob("ignore-*.txt")):
        shutil.copy2(ignore, out / "tests" / "sanity" / ignore.name)
    for rel, text in plugin_texts.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)

    rewriter = FqcnRewriter(prefix, modules, roles)
    edits = 0
    role_docs = {}
    for role in role_dirs:
        # Every YAML file of a role's tasks/ and handlers/ is a task list; the rest (defaults,
        # meta, vars) is data and is copied as it is.
        edits += copy_tree_rewriting(role, out / "roles" / role.name, rewriter,
                                     lambda rel: "tasks" if rel.parts[0] in ("tasks", "handlers") else None)
        # The role's documentation names sibling modules as M(name): fully qualified, as for modules.
        spec = out / "roles" / role.name / "meta" / "argument_specs.yml"
        if spec.exists():
            text, n = rewrite_doc_refs(spec.read_text(), prefix, modules)
            spec.write_text(text)
            doc_refs += n
        info = (yaml.safe_load((role / "meta" / "main.yml").read_text()) or {}).get("galaxy_info", {}) \
            if (role / "meta" / "main.yml").exists() else {}
        role_docs[role.name] = str(info.get("description", "")).strip()
    # Top-level playbooks/*.yml are playbooks; tasks/ and hooks/ hold included task files.
    edits += copy_tree_rewriting(REPO / "playbooks", out / "playbooks", rewriter,
                                 lambda rel: "playbook" if len(rel.parts) == 1 else "tasks")
    playbook_docs = {p.stem: first_comment(p) for p in sorted((REPO / "playbooks").glob("*.yml"))}
    (out / "README.md").write_text(generate_readme(meta, module_docs, role_docs, playbook_docs))

    left = [str(p.relative_to(out)) for p in out.rglob("*.py") if OLD_MU in p.read_text()]
    if left:
        raise BuildError("short module_utils imports left in: %s" % ", ".join(left))

    result = {"collection_dir": str(out), "version": str(meta["version"]), "modules": len(modules),
              "module_utils": len(mu_sources), "doc_fragments": len(fragment_sources),
              "lookup": len(lookup_sources), "action": len(action_sources), "roles": len(roles),
              "fqcn_rewrites": edits,
              "doc_fqcn_rewrites": doc_refs}
    if dist is not None:
        dist.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([galaxy_bin, "collection", "build", str(out), "--output-path", str(dist), "--force"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError("ansible-galaxy collection build failed (rc=%d):\n%s%s"
                             % (proc.returncode, proc.stdout, proc.stderr))
        tarball = dist / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))
        if not tarball.is_file():
            raise BuildError("ansible-galaxy reported success but %s is missing:\n%s" % (tarball, proc.stdout))
        result["tarball"] = str(tarball)
        # Older builds of this collection are removed from dist, so that dist holds exactly one
        # tarball of it (execution-environment.yml picks it up by a glob).
        stale = sorted(p for p in dist.glob("%s-%s-*.tar.gz" % (meta["namespace"], meta["name"])) if p != tarball)
        for path in stale:
            path.unlink()
        if stale:
            result["removed_older_tarballs"] = ", ".join(p.name for p in stale)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "ansible_collections" / "fleetnap" / "power",
                    help="collection tree to (re)generate (default: build/ansible_collections/fleetnap/power)")
    ap.add_argument("--dist", type=Path, default=REPO / "build",
                    help="where ansible-galaxy writes the tarball (default: build/)")
    ap.add_argument("--no-tarball", action="store_true", help="assemble the tree only")
    ap.add_argument("--ansible-galaxy", default=str(Path(sys.executable).parent / "ansible-galaxy"),
                    help="ansible-galaxy to build with (default: the one beside this python)")
    args = ap.parse_args(argv)
    try:
        result = build(args.out.resolve(), None if args.no_tarball else args.dist.resolve(), args.ansible_galaxy)
    except BuildError as exc:
        print("build_collection: %s" % exc, file=sys.stderr)
        return 1
    for key, value in result.items():
        print("%s: %s" % (key, value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
