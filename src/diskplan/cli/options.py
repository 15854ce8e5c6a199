"""Options shared by every command: what the firmware does not say about a disk, and opening a target.

argparse is imported where a parser is built (~7 ms with re and gettext): `check` of plain targets opens them
without one (cli.check's ``_plain_args``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:  # the model is imported when used: `check` starts its reads before importing it
    import argparse
    from collections.abc import Generator, Sequence

    from diskplan.backend.parted.isolate import IsolatedMap
    from diskplan.backend.parted.pedread import Rows
    from diskplan.backend.parted.readahead import ReadError
    from diskplan.backend.write.steps import Host
    from diskplan.model.disk import Disk
    from diskplan.model.sizes import Amount


class TargetError(Exception):
    """The target could not be opened or read: one line for the user."""


def _size(text: str) -> Amount:
    """The planner's size parser (model.sizes): ``100M`` is refused as ambiguous there and here, ``3s`` is
    three sectors of the disk's own size; a bare number is bytes (``--physical-block 4096``)."""
    import argparse

    from diskplan.model.sizes import SizeError, parse_option

    try:
        return parse_option(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


# What add_overrides' options are when none is given (tests/test_check_path.py holds this to argparse's defaults).
NO_OVERRIDES: dict[str, object] = {"physical_block": None, "alignment_offset": None, "optimal_io": None,
                                   "min_io": None, "ssd": None, "grain": None}


def add_overrides(parser: argparse.ArgumentParser) -> None:
    import argparse

    g = parser.add_argument_group("what the device does not say (image files, lying firmware)")
    g.add_argument("--physical-block", type=_size, metavar="SIZE", help="physical block / flash page, e.g. 4096")
    g.add_argument("--alignment-offset", type=_size, metavar="SIZE", help="bytes LBA 0 lies before a boundary")
    g.add_argument("--optimal-io", type=_size, metavar="SIZE", help="optimal I/O size, e.g. a stripe: 196608")
    g.add_argument("--min-io", type=_size, metavar="SIZE", help="minimum I/O size")
    g.add_argument(
        "--ssd",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the device is flash (an image, or firmware that says rotational): judge starts against a 4 KiB "
        "page at least, whatever physical block it reports; --no-ssd: it is not, whatever sysfs says",
    )
    g.add_argument(
        "--grain",
        type=_size,
        action="append",
        metavar="SIZE",
        help="a boundary the kernel cannot know (erase block, RAID/LVM stripe); repeatable",
    )


def apply_overrides(disk: Disk, args: argparse.Namespace) -> Disk:
    from diskplan.model.findings.stackfindings import with_stack_findings

    ss = disk.geometry.logical

    def nbytes(amount: Amount | None) -> int | None:
        return None if amount is None else amount.nbytes(ss)

    try:
        geom = disk.geometry.with_overrides(
            physical=nbytes(args.physical_block),
            alignment_offset=nbytes(args.alignment_offset),
            optimal_io=nbytes(args.optimal_io),
            min_io=nbytes(args.min_io),
            grains=tuple(a.nbytes(ss) for a in args.grain) if args.grain else None,
            ssd=getattr(args, "ssd", None),
        )
    except ValueError as exc:
        raise TargetError(str(exc)) from exc
    return with_stack_findings(disk.with_geometry(geom))


def open_target(path: str, args: argparse.Namespace | None = None) -> Disk:
    """Read ``path`` with its sysfs topology, then the user's overrides."""
    (opened,) = open_targets([path], args)
    if isinstance(opened, TargetError):
        raise opened
    return opened


def open_targets(
    paths: Sequence[str], args: argparse.Namespace | None = None, lanes: int = 1, filesystems: bool = True,
    begun: IsolatedMap[Rows] | None = None,
) -> Generator[Disk | TargetError, None, None]:
    """``open_target`` for each path in turn, as a Disk or the TargetError saying why not. libparted's reads
    of them all start at once, in ``lanes`` children side by side (backend.read.reader.read_many);
    ``filesystems=False`` spares probing partitions for filesystems (``Partition.fs`` stays empty). ``begun``:
    those reads started already (readahead.start with these ``lanes`` and ``filesystems``), used when they are
    of exactly the paths that pass filekind's checks now, else ended and started again."""
    # Imported here: the planner's process starts without the backend (a demo is read in a forked child).
    from diskplan.backend.parted import readahead
    from diskplan.backend.raw.filekind import target_problem

    problems = [target_problem(path) for path in paths]  # (a FIFO must never reach the reader)
    readable = [path for path, why in zip(paths, problems, strict=True) if not why]
    if begun is not None and begun.items != readable:  # (a path that changed kind in between)
        begun.close()
        begun = None
    reads = begun if begun is not None else readahead.start(readable, lanes=lanes, filesystems=filesystems)
    # The reads run in their children while the rest of the reader, and the model, are imported here.
    import diskplan.backend.read.stack
    import diskplan.discovery.topology  # noqa: F401 (for _dressed)
    from diskplan.backend.read.reader import survey

    disks = survey(readable, reads)

    def one(path: str, problem: str | None) -> Disk | TargetError:
        if problem:
            return TargetError(problem)
        return _finished(path, next(disks), args)

    def opened() -> Generator[Disk | TargetError, None, None]:
        try:
            for path, problem in zip(paths, problems, strict=True):
                yield one(path, problem)
        finally:
            disks.close()

    return opened()


def open_target_here(path: str, filesystems: bool = True) -> Disk | TargetError:
    """``open_target`` with libparted in this very process (backend.read.reader.read_here): only in a process
    that is itself an isolated child."""
    from diskplan.backend.raw.filekind import target_problem
    from diskplan.backend.read.reader import read_here

    problem = target_problem(path)
    if problem:
        return TargetError(problem)
    return _finished(path, read_here(path, filesystems), None)


def _finished(path: str, read: Disk | ReadError, args: argparse.Namespace | None) -> Disk | TargetError:
    """What was read, dressed (``_dressed``), or the TargetError saying why there is nothing to plan on."""
    from diskplan.backend.parted.readahead import ReadError

    if isinstance(read, ReadError):
        return TargetError(f"{path}: {read}")
    try:
        return _dressed(path, read, args)
    except TargetError as exc:
        return exc


def _dressed(path: str, disk: Disk, args: argparse.Namespace | None) -> Disk:
    """``disk`` as read, with its sysfs topology, its stacks, then the user's overrides."""
    from diskplan.backend.read.stack import read_stacks
    from diskplan.discovery.topology import topology
    from diskplan.model.value import replace

    topo = topology(path)
    if topo is not None:
        geom = replace(
            disk.geometry,
            physical=max(topo.physical, disk.geometry.logical) or disk.geometry.physical,
            min_io=topo.min_io,
            optimal_io=topo.optimal_io,
            alignment_offset=topo.alignment_offset,
            discard_granularity=topo.discard_granularity,
            rotational=topo.rotational,
            scheduler=topo.scheduler,
            schedulers=topo.schedulers,
            model=disk.geometry.model or topo.model,
            serial=topo.serial,
        )
        disk = replace(disk, geometry=geom, kind="block")
    disk = replace(disk, stacks=tuple(read_stacks(path, disk).items()))
    return apply_overrides(disk, args) if args is not None else disk


def add_open_writers(parser: argparse.ArgumentParser) -> None:
    """The write commands' --allow-open-writers: what makes ``host`` let a process that holds the disk open
    for writing (no lock, no mount) be said, not refuse."""
    parser.add_argument("--allow-open-writers", action="store_true",
                        help="write even while another process holds the disk or one of its partitions open for "
                             "writing (each is still named); without it, such a process refuses the write")


def host(args: argparse.Namespace | None = None) -> Host:
    """Who uses a disk (discovery, which the backend may not import) and the kernel's partition list (read
    by backend.kernelparts, which tells the kernel a written table: one reader for both). ``args``: a write
    command's, whose --allow-open-writers (``add_open_writers``) is honoured."""
    import functools

    from diskplan.backend.raw import kernelparts
    from diskplan.backend.write.steps import Host
    from diskplan.discovery import inuse

    allowed = bool(getattr(args, "allow_open_writers", False))
    return Host(users=functools.partial(inuse.find_users, writers_allowed=allowed),
                kernel_partitions=kernelparts.kernel_list)
