"""Byte counts and times for people: IEC (KiB, MiB) and SI (kB, MB) are different things, so we say which."""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4


def human_bytes(n: int) -> str:
    """Binary (IEC) units, as partitioning tools should show them: 1048576 -> '1 MiB'."""
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            value = n / size
            text = f"{value:.1f}".rstrip("0").rstrip(".") if value < 100 else f"{value:.0f}"
            return f"{text} {unit}"
    return f"{n} B"


def human_si(n: int) -> str:
    """Decimal (SI) units, as disk vendors and parted's default unit count: 17408 -> '17.4 kB'."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def human_duration(seconds: float) -> str:
    """A time (an estimate, what is left): 42 -> '42 s', 187 -> '3 min 7 s', 3900 -> '1 h 5 min'.
    Any time above nothing is at least '1 s': '0 s' would read as done."""
    s = max(1, round(seconds)) if seconds > 0 else 0
    return f"{s // 3600} h {s // 60 % 60} min" if s >= 3600 else f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless one: "1 sector", "2,048 sectors"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"
