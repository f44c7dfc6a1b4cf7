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
    for needed in ("Gear over time", "power states", "Resume", "Wake latency vs budget", "Sleep states allowed",
                   "Suspend mode and masked sleep targets", "C-state residency", "Residency collector"):
        assert needed in titles


def metric_names(expr):
    """fleetnap_* metric names in a PromQL expression (not in label values such as file=~".*/x.prom")."""
    return set(re.findall(r"fleetnap_[a-z_]+", re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)))


def test_every_query_uses_a_metric_fleetnap_writes():
    written = written_metric_names()
    dash = json.loads(DASH.read_text())
    used = set()
    for p in dash["panels"]:
        for t in p["targets"]:
            used.update(metric_names(t["expr"]))
    missing = sorted(used - written)
    assert not missing, "dashboard queries metrics nothing writes: %s" % missing


def test_provisioning_file():
    prov = yaml.safe_load((REPO / "docs/grafana/provisioning.yml").read_text())
    assert prov["apiVersion"] == 1 and prov["providers"][0]["type"] == "file"


def dashboard_metrics():
    dash = json.loads(DASH.read_text())
    return {m for p in dash["panels"] for t in p["targets"] for m in metric_names(t["expr"])}


def test_every_sleep_policy_and_residency_family_has_a_panel():
    """The families sleep_policy and the residency collector write (from the code itself) are all plotted."""
    from ansible.module_utils.fleetnap.residency import residency_metrics
    from ansible.module_utils.fleetnap.sleep import policy_metrics

    offered = {"mem_sleep_options": ["s2idle", "deep"], "s3_available": True, "s2idle_available": True}
    families = {m["name"] for m in policy_metrics("deep", offered, "deep", [])}
    families |= {m["name"] for m in residency_metrics({"cpus": []})}
    assert len(families) == 11
    missing = sorted(families - dashboard_metrics())
    assert not missing, "no panel plots %s" % missing


def test_one_hot_families_are_not_collapsed_by_max():
    """fleetnap_gear_shift_last_result is one series per result (1 = this one): max() would hide which."""
    dash = json.loads(DASH.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    for family in ("fleetnap_gear_shift_last_result", "fleetnap_sleep_mem_sleep_mode"):
        uses = [e for e in exprs if family in e]
        assert uses and not any(re.search(r"\bmax\((?:[^()]*\()?%s" % family, e) for e in uses), uses
