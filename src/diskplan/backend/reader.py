"""Read a disk where a libparted crash cannot hurt us: in a forked child, with a deadline."""

from __future__ import annotations

from diskplan.backend.isolate import IsolatedFailure, run_isolated
from diskplan.model.disk import Disk


class ReadError(Exception):
    """The table could not be read (safely): ``str(exc)`` is one line for the user."""


def _read(path: str) -> Disk:
    from diskplan.backend.libparted import read_disk  # imported in the child only: keeps start-up light

    return read_disk(path)


def read(path: str, timeout: float = 30.0) -> Disk:
    try:
        return run_isolated(_read, path, timeout=timeout)
    except IsolatedFailure as exc:
        if exc.signal_number is not None:
            raise ReadError(f"this table could not be read safely: {exc.reason}") from exc
        raise ReadError(exc.reason) from exc
