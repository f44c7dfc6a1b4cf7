#!/usr/bin/env python3
"""ansible-lint with fleetnap's module_utils importable, so its `args` rule checks our modules.

The `args` rule validates a task's options by importing the module in-process and running its
argument spec. ansible-lint does not honour ansible.cfg's `module_utils = module_utils`
(ansible/ansible-lint#2835, #3891), so every fleetnap module failed to import there
(`No module named 'ansible.module_utils.fleetnap'`), the rule logged an "Ignored exception" and
checked nothing for them. Here the project's module_utils is added to `ansible.module_utils`'
package path first, as ansible does for the modules it runs, and then ansible-lint runs as usual.

    .venv/bin/python tests/ansible_lint.py --profile production --strict .
"""

import sys
from pathlib import Path

import ansible.module_utils

ansible.module_utils.__path__.append(str(Path(__file__).resolve().parents[1] / "module_utils"))

from ansiblelint.__main__ import _run_cli_entrypoint  # noqa: E402

if __name__ == "__main__":
    sys.exit(_run_cli_entrypoint())
