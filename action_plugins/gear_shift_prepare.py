# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of M(gear_shift_prepare): on the controller, the module runs in Ansible's own process.

The prepare call always runs on the controller (the role delegates it to localhost). There, building
its AnsiballZ payload (the syntax trees of the module and of every module_utils file it sends) and
starting a second Python that imports them all from a zip without bytecode cost more than the rest
of an up-shift's orchestration. So when the task runs over the local connection, without become,
not async, without a task timeout (its alarm would cut the call short between its lock and the
lock's release, where the module's own process finishes) and without an ``environment`` of its own
(the module's process would have it), this plugin runs the module in the task's worker process
instead, the way ansible.netcommon's direct execution does: AnsibleModule itself (its argument spec,
checks, no_log and warnings), with the task's arguments given directly instead of read from stdin,
and the result taken from AnsibleModule's result hook (``_record_module_result``, ansible-core
2.19.1+, kept by ansible-core for this use); the arguments and the result pass through JSON, as the
module's would. Elsewhere (another connection, become, async, a timeout, an environment, an
ansible-core without the hook, arguments JSON cannot carry) or with ``fleetnap_direct_execution:
false`` among the task's variables, the module runs as any module does.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

from ansible.errors import AnsibleError
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys

DIRECT_VAR = "fleetnap_direct_execution"


def _preparecall():
    """The module's code (module_utils/fleetnap/preparecall.py), imported when it runs here only."""
    # fleetnap-repository-layout: begin (the collection's build drops these lines)
    # In this repository's layout the module_utils are a directory ansible.cfg names (module_utils):
    # AnsiballZ finds them there for a module, and this process the same way.
    import os
    import ansible.module_utils
    from ansible import constants as C
    for path in C.DEFAULT_MODULE_UTILS_PATH or []:
        if os.path.isdir(os.path.join(path, "fleetnap")) and path not in ansible.module_utils.__path__:
            ansible.module_utils.__path__.append(path)
    # fleetnap-repository-layout: end
    from ansible.module_utils.fleetnap import preparecall
    return preparecall


class _NotPlain(Exception):
    """The task's arguments are not plain JSON values."""


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        if self._direct(task_vars):
            try:
                return merge_hash(result, self._run_here(task_vars))
            except _NotPlain:
                pass        # arguments JSON cannot carry: the module's own way says what is wrong with them
        # as the normal action runs a module
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _direct(self, task_vars):
        """Whether the module runs in this process: the task's own connection is the controller."""
        given = self._templar.template(task_vars.get(DIRECT_VAR, True))
        try:
            wanted = boolean(given, strict=True)
        except TypeError:
            raise AnsibleError("%s must be true or false, got %r" % (DIRECT_VAR, given))
        env = self._task.environment
        own_env = any(e for e in (env if isinstance(env, list) else [env]))     # the default is [{}]
        return (wanted and getattr(self._connection, "transport", None) == "local"
                and not self._play_context.become and not self._task.async_val and not self._task.timeout
                and not own_env and hasattr(AnsibleModule, "_record_module_result"))

    def _run_here(self, task_vars):
        """The module's result, run in this process (see this file's docstring)."""
        try:        # plain JSON values, as the module reads its arguments (not the controller's tagged ones)
            args = json.loads(json.dumps(dict(self._task.args)))
        except (TypeError, ValueError):
            raise _NotPlain()
        self._update_module_args(self._task.action, args, task_vars)
        preparecall = _preparecall()
        recorded = []

        class HereModule(AnsibleModule):
            def _load_params(self):
                self.params = args

            def _record_module_result(self, o):
                recorded.append(o)

        out, err = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                preparecall.run(HereModule(**preparecall.module_kwargs()))
        except SystemExit:
            pass        # exit_json / fail_json: the result was recorded
        except Exception as exc:  # a defect: the task fails naming it, never a traceback of the worker
            return dict(failed=True, msg="gear_shift_prepare failed in the controller's process: %s: %s"
                        % (exc.__class__.__name__, exc), stdout=out.getvalue(), stderr=err.getvalue())
        if not recorded:
            return dict(failed=True, msg="gear_shift_prepare ended without a result in the controller's process",
                        stdout=out.getvalue(), stderr=err.getvalue())
        try:        # as the module's result reaches the controller: JSON values
            data = json.loads(json.dumps(recorded[-1]))
        except (TypeError, ValueError) as exc:
            return dict(failed=True, msg="gear_shift_prepare's result is not JSON in the controller's process: %s"
                        % exc)
        remove_internal_keys(data)
        return data
