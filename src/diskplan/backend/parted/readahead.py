"""libparted's reads, started ahead: forked before the rest of the reader (backend.read.reader) is imported, so
they run on another core while this process imports what judges their answers. Light on purpose: only
backend.parted.isolate is imported here; each child imports libparted (and the model) itself."""

from __future__ import annotations

from collections.abc import Sequence

from diskplan.backend.parted.isolate import IsolatedMap

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:
    from diskplan.model.disk import Disk


class ReadError(Exception):
    """Nothing to plan on (cannot open, or smaller than one sector): ``str(exc)`` is one line."""


def read(path: str, filesystems: bool = True) -> Disk:
    """libparted's read of ``path`` in this process: what the children run."""
    from diskplan.backend.parted.libparted import read_disk  # imported in the child only: keeps start-up light

    return read_disk(path, filesystems)


def _read(path: str) -> Disk:
    return read(path)


def _read_tables(path: str) -> Disk:
    return read(path, filesystems=False)


def start(paths: Sequence[str], timeout: float = 30.0, lanes: int = 1, filesystems: bool = True) -> IsolatedMap[Disk]:
    """libparted's read of each path, begun now in ``lanes`` children side by side (isolate.IsolatedMap),
    each read bounded by ``timeout``; ``filesystems=False``: no partition is probed for a filesystem (its
    ``fs`` stays empty). The paths must have passed filekind's checks (a FIFO must never be opened)."""
    return IsolatedMap(_read if filesystems else _read_tables, paths, timeout=timeout, lanes=lanes)
