"""The Grafana dashboard: valid structure, fixed uid, and every query names a metric fleetnap writes."""

import json
import re
from pathlib import Path

import yaml

from conftest import REPO

DASH = REPO / "docs/grafana/fleetnap-fleet.json"


def written_metric_names():
    """Every fleetnap_* metric name that code or playbooks in the repository publish."""
    names = set()
    for path in list((REPO / "library").glob("*.py")) + list((REPO / "module_utils").rglob("*.py")) + \
            list((REPO / "playbooks").rglob("*.yml")) + list((REPO / "roles").rglob("*.yml")):
        text = path.read_text()
        names.update(re.findall(r'["\s:](fleetnap_[a-z_]+_(?:seconds|total|allowed|disabled|measured|state|result|gear|target))\b', text))
        names.update(re.findall(r'name: (fleetnap_[a-z_]+)', text))
        names.update(re.findall(r'"name": "(fleetnap_[a-z_]+)"', text))
    return names


def test_structure():
    dash = json.loads(DASH.read_text())
    assert dash["uid"] == "fleetnap-fleet" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "panel %s overlaps another" % p["title"]
                cells.add((x, y))
        assert p["datasource"]["uid"] == "${datasource}"
        assert p["targets"] and all(t["expr"] for t in p["targets"])
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource"}
    titles = " ".join(p["title"] for p in dash["panels"])
    for needed in ("Gear over time", "power states", "Resume", "Wake latency vs budget"):
        assert needed in titles


def test_every_query_uses_a_metric_fleetnap_writes():
    written = written_metric_names()
    dash = json.loads(DASH.read_text())
    used = set()
    for p in dash["panels"]:
        for t in p["targets"]:
            used.update(re.findall(r"fleetnap_[a-z_]+", t["expr"]))
    missing = sorted(used - written)
    assert not missing, "dashboard queries metrics nothing writes: %s" % missing


def test_provisioning_file():
    prov = yaml.safe_load((REPO / "docs/grafana/provisioning.yml").read_text())
    assert prov["apiVersion"] == 1 and prov["providers"][0]["type"] == "file"
