# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleetnap's module_utils served from their sources, for the self-contained programs the roles
install on hosts (the C-state residency collector of node_exporter, Slurm's power-saving programs
of slurm_power): such a program embeds, verbatim, the module_utils files it needs and this one,
runs this file's source and calls :func:`install`; the files are then imported under their usual
names (``PACKAGE.X``), with no file of theirs on the host. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys


class EmbeddedModuleUtils(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``package``'s parent packages (empty), ``package`` itself (``__init__``) and its modules
    from ``sources`` (module name -> source text); tracebacks name ``origin`` and the module."""

    def __init__(self, package, sources, origin):
        parts = package.split(".")
        self.package = package
        self.origin = origin
        self.parents = set(".".join(parts[:i]) for i in range(1, len(parts)))
        self.modules = {package: "__init__"}
        self.modules.update(("%s.%s" % (package, name), name) for name in sources if name != "__init__")
        self.sources = sources

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.parents or fullname == self.package:
            return importlib.machinery.ModuleSpec(fullname, self, origin=self.origin, is_package=True)
        if fullname in self.modules:
            return importlib.machinery.ModuleSpec(fullname, self, origin=self.origin)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = self.modules.get(module.__name__)
        if name is not None and name in self.sources:
            filename = "%s <%s/%s.py>" % (self.origin, module.__name__.replace(".", "/"), name)
            exec(compile(self.sources[name], filename, "exec"), module.__dict__)


def install(package, sources, origin):
    """Put the finder first on sys.meta_path; return it."""
    finder = EmbeddedModuleUtils(package, sources, origin)
    sys.meta_path.insert(0, finder)
    return finder
