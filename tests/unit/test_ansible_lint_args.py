"""The lint wrapper makes ansible-lint's `args` rule check fleetnap's own modules.

Plain ansible-lint cannot import our modules (their module_utils is not on its path), logs an
"Ignored exception" and checks nothing; `make lint` runs tests/ansible_lint.py, which can.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = """---
- name: Probe
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the C-state table
      cpuidle_info:
        per_cpu: false
    - name: Read it with an option cpuidle_info does not have
      cpuidle_info:
        per_cpu: false
        bogus_option: 1
"""


def test_only_the_unknown_option_of_a_fleetnap_module_is_reported(tmp_path):
    play = tmp_path / "probe.yml"
    play.write_text(PROBE)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), NO_COLOR="1",
               PATH="%s%s%s" % (Path(sys.executable).parent, os.pathsep, os.environ.get("PATH", "")))
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "ansible_lint.py"), "--offline", "--strict",
                           "--format=pep8", "--profile", "production", str(play)],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "Ignored exception" not in out, out
    findings = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(findings) == 1, out
    assert findings[0].startswith("%s:9:" % play), out  # the second task
    assert "args[module]" in findings[0] and "bogus_option" in findings[0], out
    assert proc.returncode != 0, out  # strict, as make lint runs it: the finding fails the lint
