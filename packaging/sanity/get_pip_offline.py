"""Offline stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py).

ansible-test creates one virtual environment per sanity test (pylint, validate-modules, ...)
without pip and bootstraps pip into it with a get-pip script that it downloads from a host
outside the package registries, whatever the environment option (--local, --venv): `--local`
only spares the install of the controller's requirements, not those per-test environments.
`make lint` installs this file where ansible-test caches that script
($HOME/.ansible/test/cache/get_pip_X_Y.py, HOME being the project's .cache/ansible-test-home),
so the bootstrap installs pip from the local wheelhouse (`find-links` of
$HOME/.config/pip/pip.conf, with `no-index`, both written by `make lint-setup`, which fills the
wheelhouse from the pins of the installed ansible-test; ansible-test passes HOME but no PIP_*
variable to pip), and nothing is downloaded when the tests run. Called as get-pip is: ``python get_pip_X_Y.py [pip options] pip==X.Y ...``.
"""

import configparser
import glob
import os
import sys


def main():
    conf = configparser.ConfigParser()
    conf.read(os.path.expanduser("~/.config/pip/pip.conf"))
    wheels = os.environ.get("PIP_FIND_LINKS") or conf.get("global", "find-links", fallback="")
    found = sorted(glob.glob(os.path.join(wheels, "pip-*.whl"))) if wheels else []
    if not found:
        sys.exit("get_pip_offline: no pip wheel in find-links %r (run make lint-setup)" % wheels)
    sys.path.insert(0, found[-1])      # pip runs from its own wheel, as get-pip does
    from pip._internal.cli.main import main as pip_main
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    sys.exit(pip_main(["install", "--no-index", "--find-links", wheels] + args))


if __name__ == "__main__":
    main()
