"""Named units: ``MiB`` is always bytes; a size in 512-byte sectors says so (``MiB_SECTORS``)."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
SECTOR = 512  # bytes in the sectors the tests' images use unless they say otherwise
MiB_SECTORS = MiB // SECTOR  # 2048: one MiB in 512-byte sectors
