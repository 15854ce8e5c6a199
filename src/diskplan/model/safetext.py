"""Text from a disk or a file made safe to show: a partition name, a label, a model string, a path or a
libparted message can hold bytes a terminal acts on (ESC ] 0;title BEL retitles it, ESC [2J clears it, a
bidi override reorders what follows). Shown, such characters become visible escapes (``\\x1b``); the
stored strings are never changed (a kept partition's name is written back as it was read).

Tables of such text are laid out here too (``columns``), measured in terminal cells, for the commands
and the planner alike; and ``lookalike`` gives what to show where the output's encoding (ASCII on a
serial line or in a rescue system's C locale) has no such character."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

# Controls (C0, DEL, C1), format characters (bidi overrides and isolates, zero-width ones), lone surrogates,
# and the line and paragraph separators: a terminal acts on them or they break the line.
UNSAFE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def safe(text: str) -> str:
    """``text`` with every character a terminal could act on shown as a Python escape (``\\x1b``,
    ``\\u202e``); a tab becomes a space. Printable text (any script) is returned as it is."""
    if text.isprintable():
        return text
    return "".join(
        " " if ch == "\t" else ascii(ch)[1:-1] if unicodedata.category(ch) in UNSAFE else ch for ch in text
    )


def safe_name(name: str) -> str:
    """A file name for a script: ``safe``, but the bytes of a name that is not UTF-8 (decoded as lone
    surrogates, os.fsdecode) are kept, so the script names the file by its own bytes, as sfdisk's dump does."""
    return "".join(ch if "\udc80" <= ch <= "\udcff" else safe(ch) for ch in name)


def width(text: str) -> int:
    """Terminal cells: wide (CJK) characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text
    )


def columns(header: Sequence[str], rows: Sequence[Sequence[str]], right: int) -> list[str]:
    """Rows aligned in columns two spaces apart; the first ``right`` columns right-aligned (numbers).
    One pass to measure, one to lay out: linear in the number of rows."""
    cells = [[safe(c) for c in header], *([safe(c) for c in r] for r in rows)]
    widths = [max(width(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for r in cells:
        padded = [
            " " * (w - width(c)) + c if i < right else c + " " * (w - width(c))
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        out.append("  ".join(padded).rstrip())
    return out


# The characters the tool itself draws and writes, as ASCII of the same width: a screen keeps its columns.
LOOKALIKES = {
    "×": "x", "−": "-", "—": "-", "–": "-", "…": "~", "→": ">", "←": "<", "↑": "^", "↓": "v", "±": "~",
    "✓": "v", "√": "v", "·": ".", "∙": "o", "»": ">", "▸": ">", "░": ":", "▒": "#", "▓": "#", "█": "#",
    "“": '"', "”": '"', "‘": "'", "’": "'", "\u00a0": " ",
}


def lookalike(ch: str) -> str:
    """ASCII for one character, as wide as it is on a terminal: the tool's own symbols from LOOKALIKES, box
    drawing as ``- | +``, blocks as ``|`` or ``#``, letters without their accents (``é``: ``e``), else ``?``."""
    if ch in LOOKALIKES:
        return LOOKALIKES[ch]
    name = unicodedata.name(ch, "")
    if name.startswith("BOX DRAWINGS"):
        if " AND " in name or " ARC " in name:
            return "+"
        return "-" if "HORIZONTAL" in name or name.endswith(("LEFT", "RIGHT")) else "|"
    if name.endswith("BLOCK") or name.startswith("QUADRANT"):
        return "|" if name.startswith(("LEFT", "RIGHT")) else "#"
    plain = "".join(c for c in unicodedata.normalize("NFKD", ch) if c.isascii() and c.isprintable())
    cells = width(ch)
    return plain.ljust(cells) if plain and len(plain) <= cells else "?" * cells
