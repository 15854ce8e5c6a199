"""Run the diskplan CLI with every write and flush of the files it changes recorded (tests/helpers/crashrec.py
replays the states a power cut can leave from the record).

    python tests/helpers/crashrun.py LOG WATCH... -- diskplan-arguments

LOG: a directory that gets ``events.jsonl`` (one event per line: ``["w", path, offset, at, length]`` for a
write whose bytes are at ``at`` in ``blob``, ``["t", path, length]`` for a truncation, ``["x", path, [[offset, at,
length], ...]]`` for what a filesystem's resize tool changed in the image, ``["f", path]`` for a flush of that
file or directory, ``["c", path]`` for a file created, ``["r", old, new]`` for a rename, ``["u", path]`` for an unlink:
names, durable once their directory is flushed) and ``blob``. WATCH:
files or directories whose writes are recorded (the image, the state directory). No LD_PRELOAD: the
process's own ``os`` functions are wrapped, which is every path diskplan writes an image file and its state
through (an image file is never written by libparted or by the kernel during a move, a resume or a rollback:
only the read-only checks run in other processes). The writes still happen: the run is real."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import subprocess
import sys

RESIZERS = {"resize2fs", "xfs_growfs", "ntfsresize", "btrfs", "fatresize"}
BLOCK = 4096


def _blocks(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    return [data[i : i + BLOCK] for i in range(0, len(data), BLOCK)]


def main() -> None:
    sep = sys.argv.index("--")
    log, watch = sys.argv[1], [os.path.realpath(w) for w in sys.argv[2:sep]]
    sys.argv = ["diskplan", *sys.argv[sep + 1 :]]
    os.makedirs(log, exist_ok=True)
    events = open(os.path.join(log, "events.jsonl"), "a", buffering=1)  # noqa: SIM115 - lives as long as the run
    blob = open(os.path.join(log, "blob"), "ab")  # noqa: SIM115
    paths: dict[int, str] = {}
    real = {name: getattr(os, name) for name in ("open", "close", "write", "pwrite", "pwritev", "truncate", "fsync",
                                                "fdatasync", "replace", "rename", "unlink")}

    def watched(path: str) -> bool:
        return any(path == w or path.startswith(w + os.sep) for w in watch)

    def record(fd: int, offset: int, data: bytes) -> None:
        path = paths.get(fd)
        if path is None or not data:
            return
        blob.flush()
        at = blob.tell()
        blob.write(data)
        blob.flush()
        events.write(json.dumps(["w", path, offset, at, len(data)]) + "\n")

    def flushed(fd: int) -> None:
        if fd in paths:
            events.write(json.dumps(["f", paths[fd]]) + "\n")

    def _open(path, flags, mode=0o777, *, dir_fd=None):
        full = os.path.realpath(path)
        new = dir_fd is None and bool(flags & os.O_CREAT) and not os.path.lexists(full) and watched(full)
        fd = real["open"](path, flags, mode, dir_fd=dir_fd)
        if new:
            events.write(json.dumps(["c", full]) + "\n")
        if dir_fd is None and (flags & (os.O_WRONLY | os.O_RDWR) or os.path.isdir(full)) and watched(full):
            paths[fd] = full
        else:
            paths.pop(fd, None)
        return fd

    def _close(fd):
        paths.pop(fd, None)
        return real["close"](fd)

    def _write(fd, data):
        offset = 0
        if fd in paths:
            offset = os.lseek(fd, 0, os.SEEK_END if _appending(fd) else os.SEEK_CUR)
        n = real["write"](fd, data)
        record(fd, offset, bytes(memoryview(data)[:n]))
        return n

    def _pwrite(fd, data, offset):
        n = real["pwrite"](fd, data, offset)
        record(fd, offset, bytes(memoryview(data)[:n]))
        return n

    def _pwritev(fd, buffers, offset, *flags):
        n = real["pwritev"](fd, buffers, offset, *flags)
        record(fd, offset, b"".join(bytes(b) for b in buffers)[:n])
        return n

    def _truncate(path, length):
        real["truncate"](path, length)
        full = os.path.realpath(path)
        if watched(full):
            events.write(json.dumps(["t", full, length]) + "\n")

    def _rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None, which="replace"):
        real[which](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        old, full = os.path.realpath(src), os.path.realpath(dst)
        if watched(full) or watched(old):
            events.write(json.dumps(["r", old, full]) + "\n")

    def _unlink(path, *, dir_fd=None):
        full = os.path.realpath(path)
        real["unlink"](path, dir_fd=dir_fd)
        if dir_fd is None and watched(full):
            events.write(json.dumps(["u", full]) + "\n")

    def _fsync(fd):
        real["fsync"](fd)
        flushed(fd)

    def _fdatasync(fd):
        real["fdatasync"](fd)
        flushed(fd)

    def _appending(fd: int) -> bool:
        return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)

    real_run = subprocess.run
    images = [w for w in watch if os.path.isfile(w)]

    def _run(cmd, *args, **kwargs):
        """A filesystem's resize tool writes the image through a loop device, out of this process's sight:
        its changes are recorded as one external event, flushed (a crash inside the tool is the tool's to
        survive, see backend.move.resize)."""
        if not (isinstance(cmd, list | tuple) and cmd and os.path.basename(str(cmd[0])) in RESIZERS):
            return real_run(cmd, *args, **kwargs)
        before = {w: _blocks(w) for w in images}
        got = real_run(cmd, *args, **kwargs)
        for w in images:
            runs = []
            for i, (old, new) in enumerate(zip(before[w], _blocks(w), strict=False)):
                if old != new:
                    blob.flush()
                    at = blob.tell()
                    blob.write(new)
                    runs.append([i * BLOCK, at, len(new)])
            blob.flush()
            if runs:
                events.write(json.dumps(["x", w, runs]) + "\n")
                events.write(json.dumps(["f", w]) + "\n")
        return got

    subprocess.run = _run  # type: ignore[assignment]
    os.open, os.close, os.write, os.pwrite = _open, _close, _write, _pwrite
    os.pwritev, os.fsync, os.fdatasync, os.truncate = _pwritev, _fsync, _fdatasync, _truncate
    os.replace, os.unlink = _rename, _unlink
    os.rename = functools.partial(_rename, which="rename")
    from diskplan.cli.main import program

    program()


if __name__ == "__main__":
    main()
