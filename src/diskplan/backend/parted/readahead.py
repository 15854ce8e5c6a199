"""libparted's reads, started ahead: forked before the rest of the reader (backend.read.reader) is imported, so
they run on another core while this process imports what judges their answers. Light on purpose: only
backend.parted.isolate is imported here; each child imports pyparted itself (backend.parted.pedread), and
answers with plain rows, which this process makes a Disk (``disk``): neither the child nor the unpickling
imports the model for it."""

from __future__ import annotations

from collections.abc import Sequence

from diskplan.backend.parted.isolate import IsolatedMap

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:
    from diskplan.backend.parted.pedread import Rows
    from diskplan.model.disk import Disk


class ReadError(Exception):
    """Nothing to plan on (cannot open, or smaller than one sector): ``str(exc)`` is one line."""


def read(path: str, filesystems: bool = True) -> Disk:
    """libparted's read of ``path`` in this process, as a Disk: only in a process that is itself an isolated child."""
    from diskplan.backend.parted.libparted import read_disk

    return read_disk(path, filesystems)


def disk(path: str, rows: Rows) -> Disk:
    """The Disk a child's answer (its rows) describes (backend.parted.pedrows)."""
    from diskplan.backend.parted.pedrows import disk_from_rows

    return disk_from_rows(path, rows)


def _read(path: str) -> Rows:
    from diskplan.backend.parted.pedread import read_rows  # imported in the child only: keeps start-up light

    return read_rows(path)


def _read_tables(path: str) -> Rows:
    from diskplan.backend.parted.pedread import read_rows

    return read_rows(path, filesystems=False)


def start(paths: Sequence[str], timeout: float = 30.0, lanes: int = 1, filesystems: bool = True) -> IsolatedMap[Rows]:
    """libparted's read of each path, begun now in ``lanes`` children side by side (isolate.IsolatedMap),
    each read bounded by ``timeout``; ``filesystems=False``: no partition is probed for a filesystem (its
    ``fs`` stays empty). The paths must have passed filekind's checks (a FIFO must never be opened). Each answer
    is libparted's rows (pedread.read_rows): ``disk`` makes them a Disk."""
    return IsolatedMap(_read if filesystems else _read_tables, paths, timeout=timeout, lanes=lanes)
