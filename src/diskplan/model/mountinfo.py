"""The text of /proc/self/mountinfo (and /proc/swaps), read without touching the system."""

from __future__ import annotations


def unescape(field: str) -> str:
    """mountinfo and /proc/swaps write space, tab, newline and backslash as octal escapes."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def disk_mounts(text: str) -> list[str]:
    """The mount points in mountinfo ``text`` whose filesystem lives on a device node (a disk, a partition,
    a loop device: what an unmount must be able to finish), deepest first."""
    points = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, source = head.split(), tail.split()
        if sep and len(fields) >= 5 and len(source) >= 2 and source[1].startswith("/dev/"):
            points.append(unescape(fields[4]))
    return sorted(points, key=len, reverse=True)
