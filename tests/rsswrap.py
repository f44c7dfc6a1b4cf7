#!/usr/bin/python3
"""A Python interpreter for modules under test that notes the module's peak memory.

The bad-input tables run their modules with this as ``ansible_python_interpreter``: it runs
/usr/bin/python3 with the same arguments and standard input (Ansible pipes the module there), then
appends the child's peak resident size in KiB to ``$FLEETNAP_RSS_LOG``, one line per module run.
"""
import os
import resource
import signal
import subprocess
import sys

child = subprocess.Popen(["/usr/bin/python3"] + sys.argv[1:])
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda s, _f: child.send_signal(s))
rc = child.wait()
log = os.environ.get("FLEETNAP_RSS_LOG")
if log:
    with open(log, "a") as f:
        f.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc if rc >= 0 else 128 - rc)
