"""Text from a disk or a file made safe to show: a partition name, a label, a model string, a path or a
libparted message can hold bytes a terminal acts on (ESC ] 0;title BEL retitles it, ESC [2J clears it, a
bidi override reorders what follows). Shown, such characters become visible escapes (``\\x1b``); the
stored strings are never changed (a kept partition's name is written back as it was read)."""

from __future__ import annotations

import unicodedata

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
