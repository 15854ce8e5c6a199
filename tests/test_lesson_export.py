"""``diskplan lesson NAME --format markdown|html``: a self-contained handout. The Markdown carries the lesson,
every finding's arithmetic and the exercise; the HTML parses, holds one inline <svg> whose partition rectangles
sit where the demo's extents put them (checked against the model's sectors, scaled here on their own), and
whose detail rows draw page lines where the pages begin."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from diskplan.cli import handout
from diskplan.cli.main import main
from diskplan.model.teach import demos
from diskplan.model.teach.exercise import GOALS

NAMES = demos.names()


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(text: str) -> _Collect:
    p = _Collect()
    p.feed(text)
    p.close()
    return p


@pytest.mark.parametrize("name", NAMES)
def test_markdown_has_the_lesson_the_arithmetic_and_the_exercise(name: str) -> None:
    le = handout.lesson(demos.find(name))
    text = handout.markdown(le)
    assert text.startswith(f"# {le.scenario.title}\n")
    for line in le.scenario.lesson:
        assert f"- {line}" in text
    for f in le.findings:  # every finding, each line of its arithmetic
        assert f"[{f.code}]" in text
        for line in f.explanation:
            assert f"- {line}" in text
    for line in GOALS[name].task:
        assert line in text
    svg = re.search(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", text)
    assert svg is not None and b"<svg" in base64.b64decode(svg.group(1))
    lines = text.split("\n")
    for i, line in enumerate(lines[1:], 1):  # a heading stands apart, as in the rest of the page
        if line.startswith("#"):
            assert lines[i - 1] == "", (name, lines[i - 1], line)


def test_the_arithmetic_lines_are_the_experiments_numbers() -> None:
    text = handout.markdown(handout.lesson(demos.find("ssd-gpt-34")))
    assert "- Start: 34 × 512 B = 17408 B (17.4 kB); 17408 B mod 4096 = 1024." in text
    assert "~1,500 IOPS from 34s, ~28,000 from 2048s (19x)" in text
    text = handout.markdown(handout.lesson(demos.find("stripe")))
    assert "1048576 B mod 3145728 = 1048576" in text
    text = handout.markdown(handout.lesson(demos.find("lvm-partition")))  # a layer's finding-free walk
    assert "No findings" in text


@pytest.mark.parametrize("name", NAMES)
def test_html_parses_and_its_svg_draws_the_demo_s_extents(name: str) -> None:
    s = demos.find(name)
    le = handout.lesson(s)
    page = _parse(handout.page_html(le))
    tags = [t for t, _ in page.tags]
    assert tags.count("svg") == 1 and "html" in tags and "title" in tags
    disk = next(a for t, a in page.tags if t == "rect" and a.get("class") == "disk")
    sectors = int(disk["data-sectors"] or 0)
    assert sectors == s.sectors
    x0, width = float(disk["x"] or 0), float(disk["width"] or 0)
    rects = {int(a["data-number"] or 0): a for t, a in page.tags if t == "rect" and a.get("class") == "partition"}
    live = {p.number: p for p in s.planned_disk().table.live}
    assert set(rects) == set(live)
    for n, p in live.items():
        r = rects[n]
        assert (int(r["data-start"] or -1), int(r["data-end"] or -1)) == (p.start, p.end)
        assert float(r["x"] or 0) == pytest.approx(x0 + p.start * width / sectors, abs=0.01)
        assert float(r["width"] or 0) == pytest.approx(max(1.0, p.size * width / sectors), abs=0.01)
        assert float(r["x"] or 0) + float(r["width"] or 0) <= x0 + width + 1.0
    # Detail rows: a page line exactly where a page begins (logical 512 B sectors, pages of geom.page bytes).
    geom = le.disk.geometry
    for t, a in page.tags:
        if t == "line" and a.get("class") in ("page", "grain"):
            lba = int(a["data-lba"] or 0)
            assert lba * geom.logical % geom.page == 0, (name, lba)
            assert (a.get("class") == "grain") == (lba % le.grain.sectors == 0)
    text = "".join(page.text)
    for f in le.findings:
        assert f.explanation[0] in text


def test_the_34s_start_is_drawn_between_two_page_lines() -> None:
    page = _parse(handout.page_html(handout.lesson(demos.find("ssd-gpt-34"))))
    lines = sorted(int(a["data-lba"] or 0) for t, a in page.tags if t == "line")
    assert 32 in lines and 40 in lines and 34 not in lines  # pages of 8 sectors: 34 lies inside 32..39
    cells = {int(a["data-lba"] or 0): a["fill"] for t, a in page.tags if t == "rect" and a.get("data-lba")}
    assert cells[33] == "#bbbbbb" and cells[34] != cells[33]  # the GPT's last sector, then the partition


def test_the_command_writes_a_file_and_refuses_an_unknown_demo(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dos.html"
    assert main(["lesson", "dos", "--format", "html", "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "32256 B mod 4096 = 3584" in page
    assert main(["lesson", "dos-63"]) == 0
    assert "## Findings and their arithmetic" in capsys.readouterr().out
    assert main(["lesson", "no-such-demo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no demo called 'no-such-demo'" in err
    assert main(["lesson", "dos", "-o", str(tmp_path / "missing" / "x.md")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
