"""lab/ is made of parts whose imports go one way: read from the source (ast), no lab needed.

labctl.py is the top: no part imports it (the WoL relay once did, and labctl imported the relay:
a cycle). The parts sit on sys.path as top-level modules (tests/conftest.py puts lab/ first), so
none may take the name of a standard-library module.
"""

import ast
import re
import sys

import pytest

from conftest import REPO

LAB = REPO / "lab"


def lab_modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(LAB.glob("*.py"))}


def imported_names(tree: ast.Module) -> set[str]:
    """Top-level module names a file imports, wherever the import statement stands."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def lab_graph() -> dict[str, set[str]]:
    modules = lab_modules()
    return {name: imported_names(tree) & set(modules) - {name} for name, tree in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph[node]):
            cycle = visit(nxt)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle:
            return cycle
    return None


def test_the_lab_is_made_of_parts():
    graph = lab_graph()
    for part in ("labctl", "proc", "layout", "image", "guest", "bmc", "wol_relay", "redfish_bmc", "sim", "simhost"):
        assert part in graph, "lab/%s.py is missing" % part
    assert graph["labctl"] >= {"proc", "layout", "image", "guest", "bmc"}
    # the shared process handling: the lab's parts and the simulator use the same module
    assert "proc" in graph["sim"] and "proc" in graph["guest"] and "proc" in graph["bmc"]


def test_no_part_imports_labctl():
    importers = sorted(name for name, deps in lab_graph().items() if "labctl" in deps)
    assert importers == [], "lab/labctl.py is the top of the lab; these import it: %s" % importers


def test_lab_imports_have_no_cycle():
    cycle = find_cycle(lab_graph())
    assert cycle is None, "import cycle in lab/: %s" % " -> ".join(cycle)


def test_bottom_parts_import_no_lab_module():
    graph = lab_graph()
    assert graph["proc"] == set(), "lab/proc.py is shared by the lab and the simulator: it imports neither"
    assert graph["simhost"] == set(), "lab/simhost.py runs as ipmi_sim's startcmd, on its own"
    assert graph["bmc"] == {"proc"}


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("name", sorted(p.stem for p in LAB.glob("*.py")))
def test_no_lab_module_shadows_the_standard_library(name):
    assert name not in sys.stdlib_module_names, \
        "lab/%s.py would hide the standard library's %s from every test (lab/ is first on sys.path)" % (name, name)


def drawing() -> str:
    text = (LAB / "labctl.py").read_text()
    return text[text.index("# The lab's parts"):text.index("from __future__")]


def test_the_import_drawing_names_every_part():
    for name in lab_graph():
        assert re.search(r"\b%s\b" % name, drawing()), "lab/%s.py is not in labctl.py's drawing of the parts" % name


def test_the_lab_imports_down_the_drawing():
    """labctl.py draws its parts as a list, each importing only parts below it: so it is."""
    listed = re.findall(r"^#\s+(?:[|v]\s+)?(\w+)\.py\s", drawing(), re.M)
    assert listed[0] == "labctl" and len(listed) >= 7, listed
    graph = lab_graph()
    for i, name in enumerate(listed):
        above = set(listed[:i + 1]) & graph[name]
        assert not above, "lab/%s.py imports %s, above it in labctl.py's drawing" % (name, sorted(above))
    assert set(graph["labctl"]) - {"sim", "simhost"} <= set(listed)


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_every_lab_name_the_tests_use_is_there():
    """The lab suites need the lab to run; this finds a name they use that a move left behind
    without it: labctl.X attributes and `from <lab module> import X` in tests/."""
    modules = lab_modules()
    missing = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            used = []
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "labctl":
                used = [("labctl", node.attr)]
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                used = [(node.module, alias.name) for alias in node.names]
            missing += ["%s:%d: %s.%s" % (path.relative_to(REPO), node.lineno, mod, name)
                        for mod, name in used if name not in top_level_names(modules[mod])]
    assert not missing, "tests use names the lab's modules do not have:\n" + "\n".join(missing)
