"""Generate what the wheel installs beside the program, from the command line's own argparse tree:
the man page (share/man/man1/diskplan.1) and the bash and zsh completions (shtab).

    .venv/bin/python scripts/gen_share.py           write them
    .venv/bin/python scripts/gen_share.py --check   exit 1 if one is out of date (tests/test_package.py)

The files are kept in the repository so building the wheel needs neither diskplan's dependencies nor shtab;
pyproject.toml's hatch shared-data puts share/ under the installation prefix.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from diskplan import __version__  # noqa: E402
from diskplan.cli.main import COMMANDS, parser  # noqa: E402
from diskplan.model.exitstatus import MEANINGS  # noqa: E402

MAN = pathlib.Path("share/man/man1/diskplan.1")
BASH = pathlib.Path("share/bash-completion/completions/diskplan")
ZSH = pathlib.Path("share/zsh/site-functions/_diskplan")
# The date of the version, not of the run: the page stays byte-identical until the version changes.
MAN_DATE = datetime.date(2026, 11, 23)


def roff(text: str) -> str:
    """Text for a roff line: backslashes and hyphens escaped, a leading dot or quote made literal."""
    text = " ".join(text.split()).replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"\\fI{roff(str(action.metavar or action.dest))}\\fR"
    metavar = "" if action.nargs == 0 else argparse.HelpFormatter("x")._format_args(action, action.dest.upper())
    flags = ", ".join(f"\\fB{roff(s)}\\fR" for s in action.option_strings)
    return f"{flags} \\fI{roff(metavar)}\\fR" if metavar else flags


def _options(p: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        out += [".TP", _invocation(action), roff(action.help or "")]
    return out


def _usage(p: argparse.ArgumentParser) -> str:
    usage = p.format_usage().removeprefix("usage: ")
    return "\n".join(roff(line) for line in usage.strip().splitlines())


def manpage() -> str:
    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    lines = [
        f'.TH DISKPLAN 1 "{MAN_DATE.isoformat()}" "diskplan {__version__}" "User Commands"',
        ".SH NAME",
        "diskplan \\- an interactive terminal disk layout planner",
        ".SH SYNOPSIS",
        ".B diskplan",
        "[\\fIOPTIONS\\fR] [\\fITARGET\\fR]",
        ".br",
        ".B diskplan",
        "\\fICOMMAND\\fR [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        roff(top.description or ""),
        ".SH OPTIONS",
        *_options(top),
        ".SH COMMANDS",
    ]
    for name in COMMANDS:
        p = sub.choices[name]
        lines += [".SS " + roff(name), ".nf", _usage(p).rstrip(), ".fi", ".PP", roff(p.description or "")]
        lines += _options(p)
        if p.epilog:
            lines += [".PP", roff(p.epilog)]
    lines += [
        ".SH EXIT STATUS",
        *(line for code, meaning in MEANINGS for line in (".TP", f".B {int(code)}", roff(meaning))),
        ".SH SEE ALSO",
        "\\fBparted\\fR(8), \\fBsfdisk\\fR(8), \\fBsgdisk\\fR(8), \\fBlsblk\\fR(8)",
    ]
    return "\n".join(lines) + "\n"


def _parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return [p, *(c for s in subs for c in s.choices.values())]


def completion(shell: str) -> str:
    import shtab

    top = parser()
    for p in _parsers(top):  # every argument that names a disk, an image, a plan or a file: complete paths
        for action in p._actions:
            if (not action.option_strings and p is not top) or action.metavar in ("PATH", "FILE"):
                action.complete = shtab.FILE  # type: ignore[attr-defined]  # shtab's own attribute on an Action
    return str(shtab.complete(top, shell=shell))


def generated() -> dict[pathlib.Path, str]:
    return {MAN: manpage(), BASH: completion("bash"), ZSH: completion("zsh")}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="only say whether the files are up to date")
    args = ap.parse_args(argv)
    stale = []
    for rel, text in generated().items():
        path = REPO / rel
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(rel))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)} (run scripts/gen_share.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
