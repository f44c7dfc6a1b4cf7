# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a program and read all of its output: the one way fleetnap's modules run a command whose
output they read (ipmitool, dmesg, cyclictest, tc, systemctl is-active).

``AnsibleModule.run_command`` reads a command's pipes in a select loop with a one-second timeout
and leaves the loop when a select returned nothing and the process has exited. A command that
writes its output and exits just after such a select timed out - one that needed about a second
to answer, as ipmitool does from a busy BMC - loses all of its output and still returns 0
(ansible/ansible#51393, still so in ansible-core 2.19). Its caller then finds no answer where the
command gave one: "cannot read the power state from ipmitool output ''".

:func:`run` reads both pipes to their end (``Popen.communicate``) and only then takes the exit
status. The environment is the module's with ``environ_update`` on top (ipmitool's password
travels there, never in argv); stdin is /dev/null (nothing may wait for a prompt). A program that
cannot be started is, as a shell reports it, exit status 127 (not found) or 126 (found, not run)
with "cannot run PROGRAM: why" on stderr, so that every caller's failure message names it; with
``raise_oserror`` it raises OSError instead (ipmi.run_local: a BMC error of its own kind).

Standard library only.
"""

from __future__ import annotations

import errno
import os
import subprocess


def run(argv, environ_update=None, raise_oserror=False):
    """(rc, stdout, stderr) of ``argv`` (a list; no shell), both outputs read to their end and
    decoded as UTF-8 (a byte that is not becomes U+FFFD)."""
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("a command is a non-empty list of strings, got %r" % (argv,))
    env = dict(os.environ)
    env.update(environ_update or {})
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, close_fds=True)
    except OSError as exc:
        if raise_oserror:
            raise
        return (127 if exc.errno == errno.ENOENT else 126), "", "cannot run %s: %s" % (argv[0], exc.strerror or exc)
    out, err = proc.communicate()
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
