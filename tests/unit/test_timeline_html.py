"""The self-contained HTML timeline (module_utils/fleetnap/timeline_html.py)."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

import pytest

from screenshots import png_pixels, screenshot

from conftest import DATA, REPO
from ansible.module_utils.fleetnap.dmesg import PHASES, parse, parse_file
from ansible.module_utils.fleetnap.recommend import recommend
from ansible.module_utils.fleetnap.timeline_html import CRIT, render

LOGS = DATA / "dmesg"
MEM = LOGS / "pmgraph-skynet-mem-3.15.txt"
FREEZE = LOGS / "pmgraph-skynet-freeze-3.15.txt"
QEMU = LOGS / "qemu-debian-6.1-s3-initramfs.txt"
ARTIFACTS = REPO / "artifacts"
VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line"}


class _Checker(HTMLParser):
    """Collects tags, titles, and checks that non-void tags are balanced."""

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.tags, self.titles, self.rects = [], [], [], [], []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "rect":
            self.rects.append(dict(attrs))
        if tag == "title":
            self._in_title = True
            self.titles.append("")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID and tag not in self.stack:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("unbalanced </%s> (open: %s)" % (tag, self.stack[-3:]))
            return
        self.stack.pop()
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.titles[-1] += data


def check(page):
    c = _Checker()
    c.feed(page)
    c.close()
    assert not c.errors, c.errors[:5]
    assert not c.stack, c.stack
    return c


@pytest.mark.parametrize("log", [MEM, FREEZE, QEMU], ids=lambda p: p.name)
def test_page_is_self_contained_and_well_formed(log):
    cyc = parse_file(log)[-1]
    page = render(cyc, recommend(cyc), host="host1")
    c = check(page)
    low = page.lower()
    assert "<script" not in low and "javascript:" not in low
    # no external assets: the only URL is the SVG namespace
    assert re.findall(r"(?:src|href)\s*=", low) == []
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    assert "@import" not in low and "url(" not in low
    for p in PHASES:
        assert p in page
    # one red bar per critical callback that is drawn, all with hover titles
    crit_rects = [r for r in c.rects if r.get("fill") == CRIT]
    assert crit_rects
    assert "%.1f ms" % cyc.suspend_ms in page or ("%.3f" % cyc.suspend_ms) in page


def test_bars_have_titles_with_name_phase_duration():
    cyc = parse_file(MEM)[-1]
    c = check(render(cyc, recommend(cyc)))
    titles = c.titles
    hda = [t for t in titles if t.startswith("0000:00:1b.0 (snd_hda_intel) | resume |")]
    assert hda == ["0000:00:1b.0 (snd_hda_intel) | resume | 159.0 ms | start 1894.7 ms | async "
                   "| critical path"]
    # CPU steps and phase bands have titles too
    assert any(t.startswith("CPU1 online: 13.6 ms (serial)") for t in titles)
    assert any(t.startswith("resume_noirq: ") for t in titles)
    # recommendations and the slowest table are in the page
    assert "blacklist the sound driver (snd_hda_intel)" in cyc_page(cyc)


def cyc_page(cyc):
    return render(cyc, recommend(cyc))


def test_long_s2idle_machine_phase_is_clipped_and_said():
    cyc = parse_file(FREEZE)[-1]
    page = render(cyc, recommend(cyc))
    assert "(suspend_machine clipped: 9993.8 ms)" in page


def test_names_are_escaped():
    text = "\n".join([
        "[ 1.000000] PM: suspend entry (deep)",
        "[ 1.100000] printk: Suspending console(s)",
        "[ 1.200000] evil <b>&amp;\"x: PM: calling cb_suspend+0x0/0x10 @ 1, parent: <i>",
        "[ 1.300000] evil <b>&amp;\"x: PM: cb_suspend+0x0/0x10 returned 0 after 100000 usecs",
        "[ 1.400000] ACPI: PM: Low-level resume complete",
        "[ 1.500000] Restarting tasks ... done.",
    ])
    cyc = parse(text)[0]
    page = render(cyc, [], host="<host>")
    check(page)
    assert "<b>" not in page and "<i>" not in page and "<host>" not in page
    assert "&amp;amp;&quot;x" in page and "&lt;host&gt;" in page


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian package chromium not installed")
def test_chromium_renders_a_non_blank_timeline(tmp_path):
    cyc = parse_file(MEM)[-1]
    html_file = tmp_path / "timeline.html"
    html_file.write_text(render(cyc, recommend(cyc), host="skynet"))
    ARTIFACTS.mkdir(exist_ok=True)
    png = ARTIFACTS / "pm_timeline-mem.png"
    if png.exists():
        png.unlink()
    screenshot(html_file, png, tmp_path)
    width, height, colours = png_pixels(png)
    assert (width, height) == (1400, 900)
    # phase bands, bars, text: a blank or unstyled page has a handful of colours
    assert len(colours) > 50, len(colours)
    crit = bytes(int(CRIT[i:i + 2], 16) for i in (1, 3, 5))
    assert crit in colours, "no critical-path red in the screenshot"
