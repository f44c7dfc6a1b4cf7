"""Every metrics file the tests produce is checked by Prometheus's own ``promtool check metrics``
(Debian's ``prometheus`` package, installed by ``make setup``) and for what node_exporter's
textfile collector refuses beyond it (two samples of one series).

    from promcheck import assert_valid_metrics
    assert_valid_metrics(path_or_text)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+\S+$")


def check(text: str) -> list:
    """Problems found in an exposition text: promtool's, then duplicate series."""
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    if proc.returncode != 0 and not problems:
        problems.append("promtool check metrics exited %d" % proc.returncode)
    seen = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            problems.append("not a sample line: %r" % line)
            continue
        key = (m.group(1), m.group(2) or "")
        if key in seen:
            problems.append("two samples of one series: %s%s" % key)
        seen.add(key)
    return problems


def assert_valid_metrics(source) -> str:
    """source: a path or the text itself; returns the text."""
    text = Path(source).read_text() if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and Path(source).is_file()) else source
    problems = check(text)
    assert not problems, "promtool / textfile collector would refuse this metrics file:\n%s\n---\n%s" % (
        "\n".join(problems), text[:2000])
    return text
