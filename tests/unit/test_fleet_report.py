"""The fleet report renderer: sections from real-shaped inputs, missing ones named, bad input refused."""

import json
import os
import subprocess
from html.parser import HTMLParser

import pytest
from conftest import REPO, TARGET_PYTHON, VENV_BIN

from ansible.module_utils.fleetnap.report import ReportError, gather, render


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        assert not (tag in ("script", "link") or (tag == "img" and dict(attrs).get("src", "").startswith("http")))

    def handle_data(self, data):
        self.text.append(data)


def parsed(page):
    c = Collect()
    c.feed(page)
    return " ".join(" ".join(c.text).split()), c.tags


def test_empty_artifacts_name_the_playbooks(tmp_path):
    text, _tags = parsed(render(gather(str(tmp_path))))
    for playbook in ("apply_profile.yml", "measure_resume.yml", "measure_wake_latency.yml", "gear_shift.yml"):
        assert "run playbooks/%s" % playbook in text


def test_sections_from_inputs(tmp_path):
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile/decisions.json").write_text(json.dumps({"gw1": {
        "budget_us": 20, "sleep": "none", "sleep_reason": "resume 900 ms > budget 0 ms",
        "states": [{"name": "C1", "allowed": True, "reason": "r"}, {"name": "C6", "allowed": False, "reason": "<x>"}]}}))
    (tmp_path / "gear").mkdir()
    (tmp_path / "gear/state.json").write_text(json.dumps({"gear": 1, "target_gear": 1, "result": "ok",
                                                          "hosts": {"lab1": {"power": "on"}, "lab2": {"power": "off"}}}))
    times = ["2026-11-24T20:00:00+00:00", "2026-11-24T22:00:00+00:00", "2026-11-25T06:00:00+00:00"]
    power = [{"lab1": "on", "lab2": "on"}, {"lab1": "on", "lab2": "asleep"}, {"lab1": "on", "lab2": "on"}]
    (tmp_path / "gear/history.jsonl").write_text("\n".join(json.dumps({"finished": t, "gear": g, "power": p})
                                                             for t, g, p in zip(times, [3, 1, 3], power)) + "\n")
    (tmp_path / "gear/power_w.json").write_text(json.dumps({"lab2": {"on": 130, "asleep": 5, "off": 3}}))
    page = render(gather(str(tmp_path), until=1795590000.0))      # 2026-11-25T07:00:00Z
    text, tags = parsed(page)
    assert "gw1" in text and "C6" in text and "resume 900 ms > budget 0 ms" in text
    assert "&lt;x&gt;" in page and "<x>" not in page
    assert "3 shifts, from 2026-11-24 20:00 to 2026-11-25 06:00 (UTC)" in text and "svg" in tags
    # the gear chart: labelled axes, time ticks, the gear and hosts on/parked as series, a legend
    for words in ("time (UTC)", "gear", "hosts", "11-24 20:00", "11-25 06:00", "gear (left axis)",
                  "hosts on (right axis)", "hosts parked (right axis)"):
        assert words in text, words
    for series in ("series-gear", "series-on", "series-parked"):
        assert 'class="%s"' % series in page, series
    # where the watts came from: lab2's from the inventory (lab1 has none: host-hours only)
    assert "Watts used per host and state" in text and "0 of 3 figures measured" in text
    assert "lab2 130.0 W inventory 5.0 W inventory 3.0 W inventory" in text
    # energy: lab2 asleep 22:00-06:00 (2 h on the 24th, 6 h on the 25th) at 125 W less than on
    assert "2026-11-24" in text and "2026-11-25" in text
    assert "In all: 8.0 host-hours parked, 1.00 kWh not spent" in text
    assert "1 host(s) without power figures (fleetnap_power_w) count in host-hours only: lab1" in text
    assert "gear 1 (target 1), result ok" in text


def test_malformed_input_is_refused(tmp_path):
    (tmp_path / "resume").mkdir()
    (tmp_path / "resume/summary.json").write_text("{not json")
    with pytest.raises(ReportError, match="summary.json is not valid JSON"):
        gather(str(tmp_path))
    (tmp_path / "resume/summary.json").write_text("{}")
    (tmp_path / "gear").mkdir()
    (tmp_path / "gear/history.jsonl").write_text('{"gear": 3}\nbroken\n')
    with pytest.raises(ReportError, match="history.jsonl line 2"):
        gather(str(tmp_path))


def test_playbook_on_a_project_with_no_artifacts_writes_the_page_naming_the_playbooks(tmp_path):
    """fleet_report.yml before any other playbook ran: no artifacts directory at all."""
    artifacts = tmp_path / "artifacts"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,",
                           str(REPO / "playbooks/fleet_report.yml"),
                           "-e", "fleetnap_artifacts_dir=%s" % artifacts,
                           "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    text, _tags = parsed((artifacts / "report.html").read_text())
    for playbook in ("apply_profile.yml", "measure_resume.yml", "measure_wake_latency.yml", "gear_shift.yml"):
        assert "run playbooks/%s" % playbook in text


def test_the_gear_chart_steps_through_each_shift_in_time():
    from ansible.module_utils.fleetnap.report import gear_chart
    hist = [{"finished": "2026-11-24T20:00:00+00:00", "gear": 3, "power": {"a": "on", "b": "on", "c": "on"}},
            {"finished": "2026-11-24T22:00:00+00:00", "gear": 1, "power": {"a": "on", "b": "asleep", "c": "off"}},
            {"finished": "not a time", "gear": 2, "power": {}}]
    svg = gear_chart(hist, width=456, height=220)     # plot width 456 - 56 - 56 = 344
    gear = svg.split('class="series-gear"')[0].rsplit('points="', 1)[1].split('"')[0]
    # gear 3 at the first shift's end (x 56), a step down to 1 at the second's (x 400): y 14 + 166 - g/3 * 166
    assert gear == "56.0,14.0 400.0,14.0 400.0,124.7 400.0,124.7"
    on = svg.split('class="series-on"')[0].rsplit('points="', 1)[1].split('"')[0]
    assert on.startswith("56.0,14.0 400.0,14.0 400.0,124.7")       # 3 hosts on, then 1 (of 3)
    assert "1 without a readable end time left out" in svg


def test_the_demos_report_in_headless_chromium_has_every_section(tmp_path):
    """The page make demo ends with, as a browser renders it: the C-state decisions of simulated
    hosts (tests/golden/demo-decisions-sim.json: apply_profile.yml's decisions-sim.json from the
    demo's simulated hosts) beside a lab guest without cpuidle, the gear chart with its axes, and
    the energy with where its watts came from (sections checked in the DOM Chromium built, the
    chart's series colour in its screenshot)."""
    import shutil
    from screenshots import png_pixels, screenshot
    if not shutil.which("chromium"):
        pytest.skip("needs chromium (Debian package chromium; make setup installs it)")
    art = tmp_path / "artifacts"
    (art / "profile").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "golden" / "demo-decisions-sim.json", art / "profile" / "decisions-sim.json")
    (art / "profile" / "decisions.json").write_text(json.dumps({"lab1": {
        "budget_us": 200, "states": [], "sleep": "deep", "sleep_reason": "resume 1702 ms <= budget 3000 ms"}}))
    (art / "gear").mkdir()
    times = ["2026-11-24T20:00:00+00:00", "2026-11-24T22:00:00+00:00", "2026-11-25T06:00:00+00:00"]
    power = [{"lab1": "on", "lab2": "on"}, {"lab1": "on", "lab2": "asleep"}, {"lab1": "on", "lab2": "on"}]
    (art / "gear/history.jsonl").write_text("\n".join(json.dumps({"finished": t, "gear": g, "power": p})
                                                        for t, g, p in zip(times, [3, 1, 3], power)) + "\n")
    (art / "gear/power_w.json").write_text(json.dumps({"lab2": {"on": 130, "asleep": 5, "off": 3}}))
    page = art / "report.html"
    page.write_text(render(gather(str(art), until=1795590000.0)))
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          "--user-data-dir=%s" % (tmp_path / "profile-dom"), page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME=str(tmp_path))).stdout
    text, _tags = parsed(dom)
    sim = json.loads((REPO / "tests" / "golden" / "demo-decisions-sim.json").read_text())
    some = sorted(sim)[0]
    deciding = [s for s in sim[some]["states"] if not s["allowed"]][0]
    assert "%s %g µs" % (deciding["name"], deciding["effective_us"]) in text.replace("\xa0", " ")
    assert "1 host(s) have no cpuidle driver (lab1)" in text
    for words in ("time (UTC)", "gear (left axis)", "hosts parked (right axis)", "Watts used per host and state",
                  "kWh not spent"):
        assert words in text, words
    png = screenshot(page, tmp_path / "report.png", tmp_path, size=(1300, 2400))
    _w, _h, colours = png_pixels(png)
    assert bytes((0x25, 0x63, 0xeb)) in colours     # the gear series, drawn
