"""``diskplan lesson NAME --format markdown|html [-o FILE]``: a demo's lesson as a self-contained handout page
(cli.handout): the lesson, the disk, the findings with their arithmetic, the exercise and an SVG of the map.

Exit status: 0 written, 2 no such demo or the file could not be written.
"""

from __future__ import annotations

import argparse
import sys

from diskplan.cli.handout import lesson, markdown, page_html
from diskplan.cli.textout import write_document
from diskplan.model.safetext import safe
from diskplan.model.teach import demos

FORMATS = ("markdown", "html")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="diskplan lesson",
        description="Write a demo's lesson as a self-contained Markdown or HTML page for handouts: the lesson, "
        "the findings' arithmetic, the exercise and an SVG of the sector map.",
        epilog=f"NAME is a demo ({', '.join(demos.names())}). Nothing is read from or written to a disk. "
        "Exit status: 0 written, 2 no such demo or the file could not be written.",
    )
    p.add_argument("name", metavar="NAME", help="the demo (see diskplan --list-demos)")
    p.add_argument("--format", "-f", choices=FORMATS, default="markdown", help="page format (default: markdown)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        scenario = demos.find(args.name)
    except KeyError as exc:
        print(f"diskplan lesson: {safe(str(exc.args[0]))}", file=sys.stderr)
        return 2
    le = lesson(scenario)
    text = page_html(le) if args.format == "html" else markdown(le)
    if not args.output:
        write_document(text)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        print(f"diskplan lesson: {safe(args.output)}: {safe(exc.strerror or str(exc))}", file=sys.stderr)
        return 2
    return 0
