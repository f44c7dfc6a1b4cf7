"""The fleetnap.power collection (packaging/): build, install, run by FQCN, and the EE context.

The collection is built once per module through packaging/build_collection.py into tmp_path,
installed with ``ansible-galaxy collection install`` into a private collections path, and every
Ansible command below runs in a directory with an empty ansible.cfg: the repository's
``library/``, ``module_utils/`` and ``roles/`` are not on any path, so what runs can only come
from the installed collection.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile

import pytest
import yaml

from conftest import REPO, VENV_BIN, TARGET_PYTHON, materialize, snapshot_tree
from datasets import expected_disabled, raw_states

FQ = "fleetnap.power"
DATASET = "dell-9360-kbl"      # 4 CPUs: a real Kaby Lake laptop capture, small enough to be quick
SOURCE_DIRS = ("library", "module_utils", "doc_fragments", "action_plugins", "roles", "playbooks", "packaging")
GALAXY = yaml.safe_load((REPO / "packaging" / "galaxy.yml").read_text())
TARBALL_NAME = "%s-%s-%s.tar.gz" % (GALAXY["namespace"], GALAXY["name"], GALAXY["version"])
MODULES = sorted(p.stem for p in (REPO / "library").glob("*.py"))
MODULE_UTILS = sorted(p.name for p in (REPO / "module_utils" / "fleetnap").glob("*.py"))
DOC_FRAGMENTS = sorted(p.name for p in (REPO / "doc_fragments").glob("*.py"))
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())


def _source_snapshot():
    """sha256 of every file under the source directories, and git's list of tracked ones."""
    out = {}
    for top in SOURCE_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path.relative_to(REPO))] = hashlib.sha256(path.read_bytes()).hexdigest()
    tracked = subprocess.run(["git", "ls-files", "--", *SOURCE_DIRS], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    return out, tracked


def _run(cmd, env, cwd, timeout=120):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=str(cwd),
                          timeout=timeout)
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("collection")
    out = base / "tree" / "ansible_collections" / "fleetnap" / "power"
    cmd = [VENV_BIN / "python", REPO / "packaging" / "build_collection.py", "--out", out, "--dist", base / "dist"]
    if os.geteuid() == 0 and shutil.which("unshare"):
        # The build runs with the source directories mounted read-only (a private mount
        # namespace): any write to them fails the build. Immune to other people editing the tree.
        script = "".join('mount --bind -o ro "$R/%s" "$R/%s" || exit 96; ' % (d, d) for d in SOURCE_DIRS)
        script += 'if touch "$R/library/.rw-probe" 2>/dev/null; then rm -f "$R/library/.rw-probe"; exit 97; fi; '
        script += 'exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", *cmd]
        mode = "read-only mount namespace"
    else:
        mode = "sha256 snapshot"     # not root: compare every source file before and after
    before, tracked = _source_snapshot()
    build = _run(cmd, dict(os.environ, R=str(REPO)), REPO)
    after, _ = _source_snapshot() if mode == "sha256 snapshot" else (before, None)
    assert build.returncode == 0, "rc=%d (%s)\n%s" % (build.returncode, mode, build.stderr)
    tarball = base / "dist" / TARBALL_NAME
    (base / "ansible.cfg").write_text("[defaults]\n")     # nothing of the repository's config
    env = dict(os.environ, ANSIBLE_CONFIG=str(base / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(base / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(base / "tmp"), ANSIBLE_HOME=str(base / "home"))
    env.pop("ANSIBLE_LIBRARY", None)
    env.pop("ANSIBLE_MODULE_UTILS", None)
    env.pop("ANSIBLE_ROLES_PATH", None)
    install = _run([VENV_BIN / "ansible-galaxy", "collection", "install", tarball, "-p", base / "collections",
                    "--no-deps"], env, base)
    assert install.returncode == 0, install.stdout + install.stderr
    return {"base": base, "tree": out, "tarball": tarball, "env": env, "before": before, "after": after,
            "tracked": tracked, "build_stdout": build.stdout, "mode": mode,
            "installed": base / "collections" / "ansible_collections" / "fleetnap" / "power"}


def _json_env(built, **extra):
    return dict(built["env"], ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                **extra)


def _json_report(proc):
    text = proc.stdout[proc.stdout.find("{"):]
    try:
        return json.loads(text)
    except ValueError:
        raise AssertionError("no JSON report (rc=%d)\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout, proc.stderr))


def test_build_reads_sources_only_and_ships_everything(built):
    assert built["before"] == built["after"], "the build changed files under %s" % (SOURCE_DIRS,)
    print("sources protected by: %s" % built["mode"])
    assert any(t.startswith("library/") for t in built["tracked"])
    assert set(built["tracked"]) <= set(built["before"])     # every tracked source was compared
    assert built["tarball"].is_file(), built["build_stdout"]
    assert "version: %s" % GALAXY["version"] in built["build_stdout"]
    with tarfile.open(built["tarball"]) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))
        py = {n: tar.extractfile(n).read().decode() for n in names if n.endswith(".py")}
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == ("fleetnap", "power", GALAXY["version"])
    assert info["dependencies"] == GALAXY["dependencies"]
    assert {"plugins/modules/%s.py" % m for m in MODULES} <= names
    assert {"plugins/module_utils/%s" % m for m in MODULE_UTILS} <= names
    assert DOC_FRAGMENTS and {"plugins/doc_fragments/%s" % f for f in DOC_FRAGMENTS} <= names
    assert "plugins/lookup/power_records.py" in names
    assert {"plugins/action/%s" % p.name for p in (REPO / "action_plugins").glob("*.py")} <= names
    assert {"roles/%s/tasks/main.yml" % r for r in ROLES} <= names
    assert {"playbooks/%s" % p.name for p in (REPO / "playbooks").glob("*.yml")} <= names
    assert {"meta/runtime.yml", "meta/execution-environment.yml", "bindep.txt", "README.md", "CHANGELOG.md"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".fleetnap-build" in n]
    assert not [n for n, text in py.items() if "ansible.module_utils.fleetnap" in text]
    assert "from ansible_collections.fleetnap.power.plugins.module_utils.cpuidle import" in \
        py["plugins/modules/cpuidle_info.py"]
    # Tasks call the collection's modules and roles by FQCN; nothing else in them changed.
    src = (REPO / "roles" / "latency_profile" / "tasks" / "main.yml").read_text()
    out = (built["tree"] / "roles" / "latency_profile" / "tasks" / "main.yml").read_text()
    assert "\n  fleetnap_profile:\n" in src and "\n  fleetnap.power.fleetnap_profile:\n" in out
    short = re.compile(r"^\s*(- )?(%s):" % "|".join(MODULES), re.M)
    for top in ("roles", "playbooks"):
        for path in sorted((REPO / top).rglob("*.yml")):
            rel = path.relative_to(REPO)
            built_text = (built["tree"] / rel).read_text()
            # (a name the source gives fully qualified already, the power_records lookup, stays so)
            source = path.read_text()
            assert re.sub(r"fleetnap\.power\.", "", built_text) == re.sub(r"fleetnap\.power\.", "", source), rel
            assert built_text.count("fleetnap.power.") >= source.count("fleetnap.power."), rel
            assert not short.search(built_text), "%s still calls %s by its short name" % (rel, short.search(built_text))
    readme = (built["tree"] / "README.md").read_text()
    assert "| `fleetnap.power.cpuidle_info` | Read a host's cpuidle driver" in readme


def test_module_by_fqcn_with_module_utils_from_the_collection(built, tmp_path):
    root = materialize(DATASET, tmp_path / "root")
    cmd = [VENV_BIN / "ansible", "localhost", "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
           "-m", "%s.cpuidle_info" % FQ, "-a", json.dumps({"sysfs_root": str(root)})]
    env = _json_env(built, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=str(tmp_path / "remote"))
    proc = _run(cmd, env, built["base"])
    result = _json_report(proc)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert proc.returncode == 0 and not result.get("failed"), result.get("msg")
    facts = result["ansible_facts"]["fleetnap_cpuidle"]
    raw = raw_states(DATASET)
    assert len(facts["cpus"]) == len(raw)
    for cpu in facts["cpus"]:
        want = raw[int(cpu["cpu"])]
        assert [(s["index"], s["name"], s["latency_us"], s["disable"]) for s in cpu["states"]] == \
            [(i, want[i]["name"], int(want[i]["latency"]), int(want[i]["disable"])) for i in sorted(want)]
    # AnsiballZ packed the collection's module_utils (also the one cpuidle.py imports itself).
    (wrapper,) = (tmp_path / "remote").rglob("AnsiballZ_cpuidle_info.py")
    payload = re.search(r"^zip_data='([^']+)'", wrapper.read_text(), re.M).group(1)
    packed = zipfile.ZipFile(io.BytesIO(base64.b64decode(payload))).namelist()
    mu = "ansible_collections/fleetnap/power/plugins/module_utils/"
    assert {mu + "cpuidle.py", mu + "cpulist.py", mu + "sysfs.py", mu + "sleep.py"} <= set(packed)
    assert not [n for n in packed if n.startswith("ansible/module_utils/fleetnap")]
    # The short name does not resolve here: the module above came from the collection.
    short = _run(cmd[:-4] + ["-m", "cpuidle_info", "-a", cmd[-1]], built["env"], built["base"])
    assert short.returncode != 0 and "cpuidle_info" in short.stdout + short.stderr


def test_gear_shift_prepare_runs_in_ansibles_process_from_the_collection(built, tmp_path):
    """The collection's action plugin for gear_shift_prepare (its module_utils by their collection
    names, the repository's lines dropped by the build): on the local connection the module runs in
    Ansible's own process (no AnsiballZ payload left), and its result is the module's."""
    text = (built["tree"] / "plugins" / "action" / "gear_shift_prepare.py").read_text()
    assert "fleetnap-repository-layout" not in text and "DEFAULT_MODULE_UTILS_PATH" not in text
    assert "from ansible_collections.fleetnap.power.plugins.module_utils import preparecall" in text
    port = __import__("socket").socket()
    port.bind(("127.0.0.1", 0))             # refused: the host is silent
    args = {"lock_file": str(tmp_path / "gear" / "shift.lock"), "state_file": str(tmp_path / "gear" / "state.json"),
            "gear": 1, "replicas": 1, "probe_timeout": 0.2, "lease": 60,
            "hosts": [{"name": "a", "address": "127.0.0.1", "port": port.getsockname()[1],
                       "inventory": {"group": 1, "up_methods": ["wol"], "wol_macs": ["02:00:00:00:00:01"]}}]}
    got = {}
    try:
        for direct in ("true", "false"):
            remote = tmp_path / ("remote-" + direct)
            cmd = [VENV_BIN / "ansible", "localhost", "-i", "localhost,", "-c", "local", "--check",
                   "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, "-e", "fleetnap_direct_execution=" + direct,
                   "-m", "%s.gear_shift_prepare" % FQ, "-a", json.dumps(args)]
            proc = _run(cmd, _json_env(built, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_REMOTE_TMP=str(remote)),
                        built["base"])
            result = _json_report(proc)["plays"][0]["tasks"][0]["hosts"]["localhost"]
            assert proc.returncode == 0 and not result.get("failed"), result.get("msg")
            got[direct] = (result, sorted(p.name for p in remote.rglob("AnsiballZ_*")))
    finally:
        port.close()
    assert got["true"][1] == [] and got["false"][1] == ["AnsiballZ_gear_shift_prepare.py"], got
    same = [dict((k, v) for k, v in r.items() if k not in ("started", "started_epoch", "observe_elapsed_s", "lock",
                                                            "plan")) for r, _ in got.values()]
    plans = [[dict((k, v) for k, v in row.items() if k != "since") for row in r["plan"]["rows"]] for r, _ in got.values()]
    assert same[0] == same[1] and plans[0] == plans[1] and plans[0][0]["host"] == "a", (same, plans)


def test_ansible_doc_renders_every_module(built):
    names = ["%s.%s" % (FQ, m) for m in MODULES]
    proc = _run([VENV_BIN / "ansible-doc", "--json", *names], built["env"], built["base"])
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(docs) == names
    for name in names:
        doc = docs[name]["doc"]
        assert doc["module"] == name.rsplit(".", 1)[1] and doc["short_description"]
        assert doc["collection"] == FQ and docs[name]["examples"] and docs[name]["return"] is not None
    # Options documented once in plugins/doc_fragments/ reach the modules that extend them, with
    # their references to sibling modules fully qualified.
    redfish = docs["%s.redfish_power" % FQ]["doc"]["options"]
    assert redfish["bmc_address"]["required"] and redfish["min_interval"]["default"] == 0.25
    assert "M(%s.bmc_power)" % FQ in " ".join(redfish["rate_limit_dir"]["description"])
    assert docs["%s.gear_wave" % FQ]["doc"]["options"]["session_timeout"]["default"] == 2
    assert docs["%s.pm_debug" % FQ]["doc"]["options"]["sysfs_root"]["default"] == "/"
    listing = _run([VENV_BIN / "ansible-doc", "-l", "--json", FQ], built["env"], built["base"])
    assert sorted(json.loads(listing.stdout)) == names


SHARED_INPUTS = {"gear_schedule": "gear_shift"}


def test_ansible_doc_shows_every_roles_arguments(built):
    """Each role's meta/argument_specs.yml is its contract: ansible-doc -t role shows every option
    with a description (what AWX surveys and collection users read)."""
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
    for role in roles:
        spec = yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())
        options = spec["argument_specs"]["main"]["options"]
        # A role's options carry its prefix, but for inputs it declares as another role's (the
        # schedule's load and capacity inputs are the shift's own): those have that role's name and type.
        owner = SHARED_INPUTS.get(role)
        shared = [n for n in options if not n.startswith(role + "_")]
        assert options and all(owner and n.startswith(owner + "_") for n in shared), (role, sorted(shared))
        if shared:
            theirs = yaml.safe_load((REPO / "roles" / owner / "meta/argument_specs.yml").read_text())
            theirs = theirs["argument_specs"]["main"]["options"]
            assert all(options[n]["type"] == theirs[n]["type"] for n in shared), role
        proc = _run([VENV_BIN / "ansible-doc", "-t", "role", "--json", "%s.%s" % (FQ, role)], built["env"],
                    built["base"])
        assert proc.returncode == 0, proc.stderr
        entry_points = json.loads(proc.stdout)["%s.%s" % (FQ, role)]["entry_points"]
        doc = entry_points["main"]
        assert doc["short_description"], role
        assert set(doc["options"]) == set(options), role
        assert all(o.get("description") for o in doc["options"].values()), role
        # A role used through several task files (gear_shift's phases) has an entry point for each.
        assert set(entry_points) == set(spec["argument_specs"]), role
        for name, entry in spec["argument_specs"].items():
            shown = entry_points[name]
            assert shown["short_description"] and set(shown["options"]) == set(entry["options"]), (role, name)
            assert all(o.get("description") for o in shown["options"].values()), (role, name)


def test_every_collection_playbook_parses(built):
    """All collection playbooks by FQCN; --syntax-check resolves every module and role they name."""
    names = ["%s.%s" % (FQ, p.stem) for p in sorted((REPO / "playbooks").glob("*.yml"))]
    proc = _run([VENV_BIN / "ansible-playbook", "-i", "localhost,", "--syntax-check", *names], built["env"], built["base"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("playbook: %s/playbooks/" % built["installed"]) == len(names)


def test_collection_playbook_runs_its_role(built, tmp_path):
    """fleetnap.power.apply_profile (collection playbook) -> role fleetnap.power.latency_profile
    -> fleetnap.power.fleetnap_profile, on a captured machine: check mode changes nothing, a real run
    disables exactly what the budget says, a second run changes nothing."""
    root = materialize(DATASET, tmp_path / "root")
    budget = 50
    want = expected_disabled(DATASET, budget)
    assert want and len(want) < sum(len(s) for s in raw_states(DATASET).values())   # a real split
    extra = {"fleetnap_profiles": {"web": {"budget_us": budget}}, "fleetnap_profile": "web",
             "latency_profile_sysfs_root": str(root), "latency_profile_manage_sleep": False,
             "fleetnap_artifacts_dir": str(tmp_path / "artifacts"), "ansible_become": False,
             "ansible_python_interpreter": TARGET_PYTHON}
    cmd = [VENV_BIN / "ansible-playbook", "-i", "localhost,", "-c", "local", "%s.apply_profile" % FQ,
           "-e", json.dumps(extra)]

    def gate(proc):
        report = _json_report(proc)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        tasks = [t for p in report["plays"] for t in p["tasks"]]
        (qos,) = [t["hosts"]["localhost"] for t in tasks if t["task"]["name"].endswith("Apply the profile in one module call")]
        return qos, report["stats"]["localhost"]

    before = snapshot_tree(root)
    qos, _ = gate(_run(cmd + ["--check"], _json_env(built), built["base"]))
    assert qos["changed"] and snapshot_tree(root) == before
    assert not (tmp_path / "artifacts").exists()
    allowed = {s["name"]: s["allowed"] for s in qos["states"]}
    names = {st["name"]: int(st["latency"]) for states in raw_states(DATASET).values() for st in states.values()}
    assert allowed == {n: n == "POLL" or lat <= budget for n, lat in names.items()}

    qos, _ = gate(_run(cmd, _json_env(built), built["base"]))
    assert qos["changed"]
    disabled = {(cpu, i) for cpu, states in raw_states(DATASET).items() for i in states
                if (root / ("sys/devices/system/cpu/cpu%d/cpuidle/state%d/disable" % (cpu, i))).read_text().strip() == "1"}
    assert disabled == want
    decisions = json.loads((tmp_path / "artifacts" / "profile" / "decisions.json").read_text())
    assert decisions["localhost"]["disabled_states"] == sorted({n for n, lat in names.items() if n != "POLL" and lat > budget},
                                                               key=list(names).index)
    qos, _ = gate(_run(cmd, _json_env(built), built["base"]))
    assert not qos["changed"]


def _ee_layout(built, tmp_path):
    """packaging/execution-environment.yml beside a build/ that holds this test's tarball."""
    (tmp_path / "packaging").mkdir()
    (tmp_path / "build").mkdir()
    shutil.copy2(REPO / "packaging" / "execution-environment.yml", tmp_path / "packaging")
    shutil.copy2(built["tarball"], tmp_path / "build")
    return tmp_path / "packaging" / "execution-environment.yml"


def test_ansible_builder_create_makes_a_build_context(built, tmp_path):
    builder = VENV_BIN / "ansible-builder"
    assert builder.exists(), "ansible-builder is not in the venv: it belongs in requirements.txt"
    ee = _ee_layout(built, tmp_path)
    ctx = tmp_path / "context"
    proc = _run([builder, "create", "-f", ee, "-c", ctx, "--output-filename", "Containerfile"],
                dict(os.environ), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (ctx / "Containerfile").read_text()
    definition = yaml.safe_load(ee.read_text())
    assert 'ARG EE_BASE_IMAGE="%s"' % definition["images"]["base_image"]["name"] in containerfile
    pin = re.search(r"^ansible-core==(\S+)$", (REPO / "requirements.txt").read_text(), re.M).group(1)
    assert "ansible-core==%s" % pin in containerfile            # the EE runs what the tests ran
    assert 'ARG PYCMD="/usr/bin/python3.11"' in containerfile
    shipped = ctx / "_build" / "fleetnap-collection" / TARBALL_NAME
    assert shipped.read_bytes() == built["tarball"].read_bytes()
    assert "COPY _build/fleetnap-collection/fleetnap-power-*.tar.gz /build/fleetnap-collection/fleetnap-power.tar.gz" \
        in containerfile
    reqs = yaml.safe_load((ctx / "_build" / "requirements.yml").read_text())["collections"]
    assert {"name": "/build/fleetnap-collection/fleetnap-power.tar.gz", "type": "file"} in reqs
    assert set(GALAXY["dependencies"]) <= {r["name"] for r in reqs}
    assert "openssh-clients" in (ctx / "_build" / "bindep.txt").read_text()
    # What the collection itself asks of any EE that includes it (read at image build time).
    intro = _run([builder, "introspect", built["base"] / "collections"], dict(os.environ), tmp_path)
    assert intro.returncode == 0, intro.stderr
    deps = yaml.safe_load(intro.stdout[intro.stdout.index("---"):])
    system = " ".join(deps["system"])
    assert "ipmitool" in system and "tzdata" in system and "fleetnap.power" in system


def test_ee_without_a_tarball_is_caught(built, tmp_path):
    """ansible-builder only warns about a missing additional_build_files match; the make target
    checks for the tarball, and so does this: the context must not silently lack it."""
    ee = _ee_layout(built, tmp_path)
    (tmp_path / "build" / TARBALL_NAME).unlink()
    ctx = tmp_path / "context"
    proc = _run([VENV_BIN / "ansible-builder", "create", "-f", ee, "-c", ctx, "--output-filename", "Containerfile"],
                dict(os.environ), tmp_path)
    assert "No matches for '../build/fleetnap-power-*.tar.gz'" in proc.stdout + proc.stderr
    assert not list(ctx.rglob("fleetnap-power-*.tar.gz"))


def test_build_refuses_a_directory_it_did_not_write(tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "keep.txt").write_text("not a build\n")
    proc = _run([VENV_BIN / "python", REPO / "packaging" / "build_collection.py", "--out", out, "--no-tarball"],
                dict(os.environ), REPO)
    assert proc.returncode == 1
    assert "refusing to replace it" in proc.stderr and str(out) in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"] and (out / "keep.txt").read_text() == "not a build\n"


def test_fqcn_rewrite_touches_task_actions_and_role_names_only():
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_collection", REPO / "packaging" / "build_collection.py")
    bc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bc)
    rw = bc.FqcnRewriter(FQ, {"bmc_power", "host_wait"}, {"gear_member"})
    play = """# comment: bmc_power stays
- name: Play
  hosts: all
  vars:
    bmc_power: not a task   # a variable of the same name
  pre_tasks:
    - "bmc_power": {state: status}
  roles:
    - gear_member
    - role: gear_member
  tasks:
    - name: Nested
      block:
        - ansible.builtin.include_role:
            name: 'gear_member'
      rescue:
        - host_wait:
            host: x
          register: host_wait
"""
    out = bc.rewrite_yaml(play, "playbook", rw, REPO / "t.yml")
    assert out == play.replace('"bmc_power"', '"fleetnap.power.bmc_power"') \
        .replace("- gear_member", "- fleetnap.power.gear_member") \
        .replace("role: gear_member", "role: fleetnap.power.gear_member") \
        .replace("'gear_member'", "'fleetnap.power.gear_member'") \
        .replace("- host_wait:", "- fleetnap.power.host_wait:")
    assert "  vars:\n    bmc_power: not a task" in out and "register: host_wait" in out
    with pytest.raises(bc.BuildError, match="t.yml: not valid YAML"):
        bc.rewrite_yaml("- name: [unclosed\n", "tasks", rw, REPO / "t.yml")


def test_build_refuses_a_fragment_that_does_not_exist(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_collection", REPO / "packaging" / "build_collection.py")
    bc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bc)
    fragments = {p.stem: bc.fragment_variants(p) for p in (REPO / "doc_fragments").glob("*.py")}
    assert fragments["bmc_rate_limit"] == {"DOCUMENTATION", "REDFISH"}
    origin = REPO / "library" / "x.py"
    for ok in (["fleetnap.power.bmc", "fleetnap.power.bmc_rate_limit.redfish", "other.coll.thing"], "fleetnap.power.bmc"):
        bc.check_fragment_refs({"extends_documentation_fragment": ok}, origin, FQ, fragments)
    for bad, says in (("fleetnap.power.bmc_login", "there is no doc_fragments/bmc_login.py"),
                      ("fleetnap.power.bmc_rate_limit.ipmi", "has no IPMI (it has DOCUMENTATION, REDFISH)")):
        with pytest.raises(bc.BuildError, match=re.escape(says)):
            bc.check_fragment_refs({"extends_documentation_fragment": [bad]}, origin, FQ, fragments)
    computed = tmp_path / "computed.py"
    computed.write_text('class ModuleDocFragment(object):\n    DOCUMENTATION = "options: {}" + ""\n')
    with pytest.raises(bc.BuildError, match="must be a string literal"):
        bc.fragment_variants(computed)


def test_the_readmes_role_call_runs_as_written(built, tmp_path):
    """The README's latency_profile role call (its yaml block, as written) against the installed
    collection, on a captured machine in the group it names: the budget's states disabled, PM QoS
    set to the budget, a second run changes nothing."""
    block = re.search(r"^```yaml\n(- name: Web servers.*?)^```", (REPO / "README.md").read_text(), re.M | re.S).group(1)
    play = yaml.safe_load(block)
    assert play[0]["roles"][0]["role"] == "fleetnap.power.latency_profile"
    budget = play[0]["roles"][0]["vars"]["latency_profile_budget_us"]
    root = materialize(DATASET, tmp_path / "root")
    (root / "sys/power").mkdir(parents=True, exist_ok=True)
    (root / "sys/power/state").write_text("freeze mem disk\n")
    (root / "sys/power/mem_sleep").write_text("s2idle [deep]\n")
    (tmp_path / "play.yml").write_text(block)
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"children": {play[0]["hosts"]: {"hosts": {"web1": {
        "ansible_connection": "local", "ansible_become": False, "ansible_python_interpreter": TARGET_PYTHON,
        "latency_profile_sysfs_root": str(root)}}}}}}))
    cmd = [VENV_BIN / "ansible-playbook", "-i", tmp_path / "hosts.yml", tmp_path / "play.yml"]
    first = _run(cmd, built["env"], built["base"])
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert re.search(r"web1 +: ok=\d+ +changed=1 ", first.stdout), first.stdout[-1500:]
    names = {st["name"]: int(st["latency"]) for states in raw_states(DATASET).values() for st in states.values()}
    disabled = {n for cpu, states in raw_states(DATASET).items() for i, st in states.items() for n in [st["name"]]
                if (root / ("sys/devices/system/cpu/cpu%d/cpuidle/state%d/disable" % (cpu, i))).read_text().strip() == "1"}
    assert disabled == {n for n, lat in names.items() if n != "POLL" and lat > budget}
    qos = {p.read_text().strip() for p in root.glob("sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us")}
    assert qos == {str(budget)}
    again = _run(cmd, built["env"], built["base"])
    assert again.returncode == 0 and re.search(r"web1 +: ok=\d+ +changed=0 ", again.stdout), again.stdout[-3000:]
