"""latency_profile with latency_profile_sleep_policy: advise (issue 36): the PowerNap advice is
decided in the profile's one module call on the host, as the budget rule is, and the curves the
module returns are written on the controller. One ansible-playbook run, two captured machines
given as two hosts of one play (a measured one and one never measured)."""

from __future__ import annotations

import json
import os
import re
import subprocess

from conftest import REPO, TARGET_PYTHON, VENV_BIN, materialize

PLAY = """- hosts: all
  connection: local
  gather_facts: false
  roles:
    - role: latency_profile
  post_tasks:
    - name: Keep the decision
      ansible.builtin.copy:
        content: "{{ latency_profile_decision | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""


def machine(root, stored):
    root = materialize("ivbep1", root)
    power = root / "sys" / "power"
    power.mkdir(parents=True, exist_ok=True)
    (power / "state").write_text("freeze mem disk\n")
    (power / "mem_sleep").write_text("[s2idle] deep\n")
    if stored is not None:
        fact = root / "etc/ansible/facts.d/fleetnap.fact"
        fact.parent.mkdir(parents=True, exist_ok=True)
        fact.write_text(json.dumps(stored))
    return root


def test_advise_is_one_module_call_and_writes_the_curves_on_the_controller(tmp_path):
    fast = machine(tmp_path / "fast", {"resume": {"end_to_end_ms": 10}})
    fresh = machine(tmp_path / "fresh", None)
    svg_dir, out_dir = tmp_path / "svg", tmp_path / "out"
    svg_dir.mkdir()
    out_dir.mkdir()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        "fast": {"latency_profile_sysfs_root": str(fast)},
        "fresh": {"latency_profile_sysfs_root": str(fresh)}}}}))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    extra = {"ansible_python_interpreter": TARGET_PYTHON, "latency_profile_budget_us": 50,
             "latency_profile_sleep_policy": "advise", "latency_profile_utilization": [0.01, 0.02, 0.015],
             "latency_profile_powernap_svg_dir": str(svg_dir), "out_dir": str(out_dir)}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"))
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play), "-e", json.dumps(extra)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    decided = {h: json.loads((out_dir / ("%s.json" % h)).read_text()) for h in ("fast", "fresh")}
    assert decided["fast"]["sleep"] == "deep"
    assert decided["fast"]["sleep_reason"].startswith("powernap_advice: sleep, resume 10 ms at 2 % load (p95 of 3")
    assert decided["fast"]["powernap"]["advice"] == "sleep"
    assert (fast / "sys/power/mem_sleep").read_text().strip() == "deep"    # written (a captured tree, no kernel)
    assert (decided["fresh"]["sleep"], decided["fresh"]["powernap"]) == ("s2idle", {})
    assert decided["fresh"]["sleep_reason"] == "resume latency not measured yet (run measure_resume.yml)"
    assert "<svg xmlns" in (svg_dir / "fast-powernap.svg").read_text()
    assert not (svg_dir / "fresh-powernap.svg").exists()
    # The role's tasks: one module on the host; nothing else of the role runs a module there.
    tasks = [t for t in re.findall(r"^TASK \[latency_profile : ([^\]]+)\]", proc.stdout, re.M)
             if not t.startswith("Validating arguments against arg spec")]
    assert tasks == ["Check the profile's inputs before changing anything", "Apply the profile in one module call",
                     "Write the PowerNap curves on the controller (advise, latency_profile_powernap_svg_dir)",
                     "Publish the decision", "Show the decision"], tasks
    assert "powernap_advice: sleep" in proc.stdout      # the table says why
