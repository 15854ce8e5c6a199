"""Plain line output for the one-shot commands (apply, restore): whole lines, never wrapped (a path cut
in two cannot be pasted; scripts read whole lines), coloured only on a terminal.

Not rich: importing it and laying out a 128-row table took longer than writing the table to the disk.
Text that comes from a disk or a plan (partition names, paths, libparted's messages) is shown with its
control characters escaped, so a crafted name cannot move the cursor or retitle the terminal.

On a serial line or in a rescue system the output's encoding may be ASCII (a C locale) or Latin-1:
``fit_streams`` makes stdout and stderr show what they cannot encode as ASCII lookalikes instead of
raising, and ``write_document`` writes a document (JSON, a script, a page) as UTF-8, its own encoding.
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Sequence

from diskplan.model.safetext import lookalike
from diskplan.model.safetext import safe as clean  # text from a disk or a plan, made safe to show

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~2 ms)
if TYPE_CHECKING:
    from typing import TextIO

SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

Part = str | tuple[str, str]  # text, or (text, style) with style like "bold red"


def _use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Out:
    """One output stream: ``print("text", style="bold")`` or ``print("a ", ("b", "red"))``."""

    def __init__(self, stream: TextIO, colour: bool | None = None) -> None:
        self.stream = stream
        self.colour = _use_colour(stream) if colour is None else colour

    def styled(self, text: str, style: str) -> str:
        text = clean(text)
        codes = [SGR[w] for w in style.split() if w in SGR]
        if not (self.colour and codes):
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def print(self, *parts: Part, style: str = "") -> None:
        line = "".join(self.styled(p, style) if isinstance(p, str) else self.styled(*p) for p in parts)
        self.stream.write(line + "\n")

    def lines(self, lines: Sequence[str]) -> None:
        """Many plain lines in one write."""
        if lines:
            self.stream.write("".join(clean(line) + "\n" for line in lines))

    def flush(self) -> None:
        self.stream.flush()


def consoles() -> tuple[Out, Out]:
    """stdout and stderr: whole lines, colour only on a terminal."""
    return Out(sys.stdout), Out(sys.stderr)


LOOKALIKE = "diskplan-lookalike"  # the codec error handler fit_streams gives stdout and stderr


def _escaped(ch: str) -> bool:
    """A byte that was not UTF-8 (a file name's), read by Python as a lone surrogate (surrogateescape)."""
    return 0xDC80 <= ord(ch) <= 0xDCFF


def _lookalikes(exc: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    span = exc.object[exc.start:exc.end]
    if any(_escaped(ch) for ch in span):  # the byte it stood for, as surrogateescape (the C locale's) writes it
        return b"".join(bytes([ord(ch) - 0xDC00]) if _escaped(ch) else lookalike(ch).encode("ascii")
                        for ch in span), exc.end
    return "".join(lookalike(ch) for ch in span), exc.end


codecs.register_error(LOOKALIKE, _lookalikes)


def _unicode(stream: TextIO) -> bool:
    """Whether ``stream`` encodes every character (a UTF codec)."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name.startswith("utf")
    except LookupError:
        return False


def fit_streams() -> None:
    """stdout and stderr (the planner draws on stderr) show a character their encoding lacks as its
    lookalike (``×`` as ``x``, ``─`` as ``-``) instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not _unicode(stream):
            reconfigure(errors=LOOKALIKE)


def write_document(text: str, stream: TextIO | None = None) -> None:
    """A document for a program or a file (JSON, a script, a page: UTF-8 by definition) on standard output,
    as UTF-8 bytes whatever the stream's encoding, so a name is never altered on its way to a file
    (``> plan.json``), as sfdisk --dump writes names whatever the locale; a file name's bytes that were not
    UTF-8 are written back as they were (surrogateescape)."""
    stream = stream or sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None or text.isascii():
        stream.write(text)
        return
    stream.flush()
    buffer.write(text.encode("utf-8", "surrogateescape"))
    buffer.flush()
