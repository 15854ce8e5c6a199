"""Reading a plan file without trusting it: a bounded read of a regular file or of standard input, never a
wait on a FIFO, never a device (``diskplan apply /dev/zero disk.img`` once read until memory ran out)."""

from __future__ import annotations

import os
import stat
import sys
from typing import BinaryIO

from diskplan.backend.raw.filekind import file_kind
from diskplan.model.formats.planfile import PlanFileError

MAX_PLAN_BYTES = 4 << 20  # a plan of 128 partitions takes about 40 KiB


def not_a_file(mode: int) -> str:
    """Why a file of ``mode`` cannot be a plan ("" when it can)."""
    kind = file_kind(mode)
    return kind + " (a disk is the TARGET; the PLAN is a file)" if stat.S_ISBLK(mode) else kind


def _bounded(read: BinaryIO | int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_PLAN_BYTES:
        chunk = os.read(read, 1 << 16) if isinstance(read, int) else read.read(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > MAX_PLAN_BYTES:
        raise PlanFileError(f"more than {MAX_PLAN_BYTES >> 20} MiB: too large for a plan")
    return b"".join(chunks)


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanFileError(f"not a plan: byte {exc.start} (0x{data[exc.start]:02x}) is not UTF-8 text") from exc


def read_plan_text(path: str) -> str:
    """The text of the plan file ``path`` ("-": standard input). Raises PlanFileError for what cannot be a
    plan (not a regular file, larger than MAX_PLAN_BYTES, not UTF-8) and OSError when it cannot be read."""
    if path == "-":
        return _text(_bounded(sys.stdin.buffer))
    what = not_a_file(os.stat(path).st_mode)  # stat opens nothing: a FIFO or a tape is not even opened
    if not what:
        # O_NONBLOCK: if a FIFO took the file's place since, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            what = not_a_file(os.fstat(fd).st_mode)
            if not what:
                return _text(_bounded(fd))
        finally:
            os.close(fd)
    raise PlanFileError(f"{what}, not a plan file")
