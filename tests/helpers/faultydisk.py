"""A disk that fails where a test says: a FUSE file (fusepy over libfuse2) that passes reads and writes through
to a real image file, except in byte ranges listed in a rules file, where it answers EIO — a given number of
times (a transient error) or always — then attached to a loop device, so diskplan sees a real failing block
device through the kernel, not an injection in its own I/O layer.

Run as a script (``python faultydisk.py IMAGE MOUNTPOINT RULES``) it serves the file ``MOUNTPOINT/disk`` in the
foreground; ``FaultyDisk`` does that in a child process, attaches the loop device and cleans both up. The rules
file is JSON, read again whenever it changes: ``[{"op": "read"|"write"|"fsync", "start": byte, "end": byte,
"times": n}]`` (``times`` -1: for ever); the count of each rule starts again when the file changes.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any


def serve(image: str, mountpoint: str, rules_path: str) -> None:
    import fuse  # type: ignore[import-untyped]  # fusepy (a test dependency, untyped): only in the serving process

    class Faulty(fuse.Operations):  # type: ignore[misc]
        def __init__(self) -> None:
            self.fd = os.open(image, os.O_RDWR)
            self.stamp: tuple[int, int] = (0, 0)
            self.rules: list[dict[str, Any]] = []

        def _rules(self) -> list[dict[str, Any]]:
            try:  # fail() replaces the file: a new inode, even within one tick of a coarse clock
                st = os.stat(rules_path)
            except OSError:
                return []
            stamp = (st.st_ino, st.st_mtime_ns)
            if stamp != self.stamp:
                self.stamp = stamp
                with open(rules_path) as f:
                    self.rules = json.load(f)
            return self.rules

        def _check(self, op: str, offset: int, size: int) -> None:
            for r in self._rules():
                if r["op"] == op and (op == "fsync" or (offset < r["end"] and offset + size > r["start"])):
                    if r["times"] == 0:
                        continue
                    if r["times"] > 0:
                        r["times"] -= 1
                    raise fuse.FuseOSError(errno.EIO)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
            if path == "/":
                return {"st_mode": 0o40755, "st_nlink": 2}
            if path != "/disk":
                raise fuse.FuseOSError(errno.ENOENT)
            return {"st_mode": 0o100600, "st_nlink": 1, "st_size": os.fstat(self.fd).st_size}

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", "disk"]

        def open(self, path: str, flags: int) -> int:
            return 0

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            self._check("read", offset, size)
            return os.pread(self.fd, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            self._check("write", offset, len(data))
            return os.pwrite(self.fd, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            raise fuse.FuseOSError(errno.EPERM)

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            self._check("fsync", 0, 0)
            os.fsync(self.fd)

        def flush(self, path: str, fh: int) -> None:
            return None

    fuse.FUSE(Faulty(), mountpoint, foreground=True, nothreads=True, direct_io=True)


class FaultyDisk:
    """``with FaultyDisk(image, tmp) as d:`` ``d.dev`` is a loop device over the failing file; ``d.fail(...)``."""

    def __init__(self, image: pathlib.Path, tmp: pathlib.Path) -> None:
        self.image, self.mnt, self.rules_path = image, tmp / "fusemnt", tmp / "faults.json"
        self.mnt.mkdir()
        self.rules_path.write_text("[]")
        self.proc: subprocess.Popen[bytes] | None = None
        self.dev = ""

    def fail(self, *rules: dict[str, Any]) -> None:
        """Replace the rules (their counts start again)."""
        tmp = self.rules_path.with_suffix(".new")
        tmp.write_text(json.dumps(list(rules)))
        os.replace(tmp, self.rules_path)
        time.sleep(0.01)  # a new mtime even on a coarse clock

    def __enter__(self) -> FaultyDisk:
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.image), str(self.mnt), str(self.rules_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 20
        while not (self.mnt / "disk").exists():
            if self.proc.poll() is not None or time.monotonic() > end:
                self.__exit__()
                raise RuntimeError("the FUSE file system did not come up")
            time.sleep(0.05)
        self.dev = subprocess.run(["losetup", "--find", "--show", str(self.mnt / "disk")], capture_output=True,
                                  text=True, check=True).stdout.strip()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dev:
            subprocess.run(["partx", "-d", self.dev], capture_output=True)
            subprocess.run(["losetup", "--detach", self.dev], capture_output=True)
            end = time.monotonic() + 10  # the loop device lets go of the file before the unmount can succeed
            while subprocess.run(["losetup", "-j", str(self.mnt / "disk")], capture_output=True, text=True).stdout \
                    and time.monotonic() < end:
                time.sleep(0.05)
        subprocess.run(["umount", str(self.mnt)], capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


if __name__ == "__main__":
    serve(*sys.argv[1:4])
