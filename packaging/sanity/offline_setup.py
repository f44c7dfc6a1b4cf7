#!/usr/bin/env python3
"""Prepare ansible-test to run its sanity tests without downloading anything while they run.

ansible-test creates a virtual environment per sanity test (pylint, validate-modules, ...)
without pip, and bootstraps pip into each with a get-pip script it downloads from
ci-files.testing.ansible.com -- a host outside the package registries this project may use.
Its own error message names the way around it: a script saved in its cache,
``$HOME/.ansible/test/cache/get_pip_X_Y.py``, is used instead of the download. This script,
for HOME = .cache/ansible-test-home (the HOME `make lint` gives ansible-test):

1. downloads, from the package index pip is configured with, the pip wheel ansible-test pins
   and every requirement file of its sanity tests into a wheelhouse (--wheels);
2. writes HOME/.config/pip/pip.conf: no index, find-links = that wheelhouse (ansible-test passes
   HOME, not PIP_* variables, to the pip it runs in those environments);
3. installs packaging/sanity/get_pip_offline.py as the cached get-pip script of that version.

Run by `make lint-setup` (once; a stamp remembers). Afterwards ansible-test needs no network.

    offline_setup.py --home DIR --wheels DIR --python PYTHON
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ansible_test_dir(python: str) -> Path:
    out = subprocess.run([python, "-c", "import ansible_test, os; print(os.path.dirname(ansible_test.__file__))"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("offline_setup: ansible-test is not installed for %s: %s" % (python, out.stderr.strip()))
    return Path(out.stdout.strip())


def pinned_pip(at: Path) -> str:
    text = (at / "_internal" / "python_requirements.py").read_text()
    found = re.search(r"pip='([0-9.]+)'", text)
    if not found:
        sys.exit("offline_setup: cannot find the pip version ansible-test pins in %s" % at)
    return found.group(1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, type=Path)
    ap.add_argument("--wheels", required=True, type=Path)
    ap.add_argument("--python", required=True)
    a = ap.parse_args(argv)
    home, wheels = a.home.resolve(), a.wheels.resolve()
    at = ansible_test_dir(a.python)
    pip_version = pinned_pip(at)
    reqs = sorted((at / "_data" / "requirements").glob("sanity.*.txt"))
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [a.python, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
           "-d", str(wheels), "pip==%s" % pip_version]
    for req in reqs:
        cmd += ["-r", str(req)]
    if subprocess.run(cmd).returncode != 0:
        sys.exit("offline_setup: pip download of ansible-test's sanity requirements failed")
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text("[global]\nno-index = true\nfind-links = %s\n" % wheels)
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "get_pip_offline.py", cache / ("get_pip_%s.py" % pip_version.replace(".", "_")))
    print("ansible-test offline: pip %s, %d wheels in %s, pip.conf and get-pip in %s"
          % (pip_version, len(list(wheels.glob("*.whl"))), wheels, home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
