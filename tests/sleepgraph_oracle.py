"""sleepgraph (Intel pm-graph, from PyPI) loaded as a library: the oracle for our dmesg parser."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

SLEEPGRAPH = Path(sys.executable).parent / "sleepgraph.py"


def load_sleepgraph():
    """The sleepgraph module installed in this Python's environment (pip install sleepgraph==5.6)."""
    if not SLEEPGRAPH.exists():
        raise RuntimeError("sleepgraph is a test dependency: pip install sleepgraph==5.6 into the venv "
                           "(%s missing)" % SLEEPGRAPH)
    spec = importlib.util.spec_from_file_location("sleepgraph_oracle", str(SLEEPGRAPH))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sleepgraph_parse(sg, path):
    """sleepgraph's dmesg-only analysis of ``path``: its Data objects, one per cycle."""
    sg.sysvals.dmesgfile = str(path)
    sg.sysvals.usetraceevents = False
    with contextlib.redirect_stdout(io.StringIO()):
        runs = sg.loadKernelLog()
        for data in runs:
            sg.parseKernelLog(data)
    return runs
