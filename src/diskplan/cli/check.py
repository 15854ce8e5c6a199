"""``diskplan check TARGET...``: every partition's alignment at once, like ``parted align-check`` for all.

Several targets are checked in one process (fleets, CI): one report after another, or with ``--json`` one
document holding every disk's report (like ``lsblk -J``).

Exit status: 0 nothing found, 1 findings, 2 a target could not be read (the others are still checked).
"""

from __future__ import annotations

import gc
import os
import sys

from diskplan.model.safetext import safe

# libparted's reads start before anything else is imported (``_early_reads``), even the options (cli.options): the
# model and the output's modules (checkjson, checktext) are imported while they run in their children. A plain
# command line (``_plain_args``) imports no argparse at all, nor is typing imported (~3.5 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator
    from typing import Any

    from diskplan.backend.parted.isolate import IsolatedMap
    from diskplan.backend.parted.pedread import Rows
    from diskplan.cli.options import TargetError
    from diskplan.model.disk import Disk
    from diskplan.model.findings.report import Report
    from diskplan.model.geometry import Geometry


def parser() -> argparse.ArgumentParser:
    import argparse

    from diskplan.cli.helpformat import LateWidthFormatter
    from diskplan.cli.options import add_overrides

    p = argparse.ArgumentParser(
        prog="diskplan check",
        formatter_class=LateWidthFormatter,
        description="Check every partition's alignment and explain each finding.",
        epilog="Exit status: 0 nothing found, 1 findings, 2 a target could not be read (the others are still "
        "checked).",
    )
    p.add_argument("target", nargs="+", help="block device or image file (several: each is checked)")
    p.add_argument("--json", action="store_true", help="print one JSON object; for several targets one document "
                   "with a list of them (see docs/check.md)")
    add_overrides(p)
    return p


MAX_LANES = 8  # reading children at most, one per core
FLEET = 16  # from this many targets on, the children run whole checks, not only libparted's reads
CHECK_TIMEOUT = 60.0  # seconds for one target's whole check in a child (its read alone has 30)


def _lanes() -> int:
    return min(os.cpu_count() or 1, MAX_LANES)


def _plain_targets(argv: list[str]) -> list[str] | None:
    """The targets of a command line that is plainly targets and ``--json`` (no word starts with "-" but
    ``--json``, and the targets stand together: argparse takes one run of them, `A --json B` is its error), else
    None (an option, ``--help``, no target)."""
    targets = [word for word in argv if word != "--json"]
    if not targets or any(word.startswith("-") for word in targets):
        return None
    first = argv.index(targets[0])
    return targets if argv[first : first + len(targets)] == targets else None


def _plain_args(argv: list[str]) -> argparse.Namespace | None:
    """What ``parser().parse_args(argv)`` gives a plain command line (``_plain_targets``), without importing
    argparse (~7 ms with re and gettext); None for any other."""
    targets = _plain_targets(argv)
    if targets is None:
        return None
    from types import SimpleNamespace  # (imported already, by contextlib)

    from diskplan.cli.options import NO_OVERRIDES

    return SimpleNamespace(target=targets, json="--json" in argv, **NO_OVERRIDES)  # type: ignore[return-value]


def _early_reads(targets: list[str] | None) -> IsolatedMap[Rows] | None:
    """libparted's reads of the ``targets`` of a plain command line (``_plain_targets``), fewer than FLEET, begun
    before the rest of this command, even the options, is imported: ``checked`` takes them over. None for any
    other command line (an option, ``--help``, a fleet): that is read the usual way, after parsing. The targets
    that filekind refuses (a FIFO must never reach the reader) are left out, as ``checked`` leaves them out."""
    if targets is None or len(targets) >= FLEET:
        return None
    from diskplan.backend.parted import readahead
    from diskplan.backend.raw.filekind import target_problem

    return readahead.start([t for t in targets if not target_problem(t)], lanes=_lanes(), filesystems=False)


def checked(
    targets: list[str], args: argparse.Namespace, begun: IsolatedMap[Rows] | None = None
) -> Iterator[tuple[Report | None, Geometry | None, str]]:
    """For each target in turn: (the report, the geometry as the device reports it, "") or (None, None, why it
    could not be read). The report judges the geometry with the user's overrides; what the other tools would
    say uses the reported one. libparted's reads all start at once, in one child per core; no partition is
    probed for a filesystem (nothing here shows libparted's guess; the layers are diskplan's own sniffing).
    The reads begin when this is called, or were ``begun`` already (``_early_reads`` of the same targets); the
    rest of the reader, the report and the output's modules are imported while they run."""
    from diskplan.cli.options import open_targets

    if begun is None:
        # What the reading children build their answers with, imported once here (they inherit it; on a busy
        # machine the cores are not free to import it side by side); the rest comes while they read.
        import diskplan.backend.raw.gptcheck
        import diskplan.model.disk  # noqa: F401

    opening = open_targets(targets, lanes=_lanes(), filesystems=False, begun=begun)
    return (_reported(opened, args) for opened in opening)


def _reported(opened: Disk | TargetError, args: argparse.Namespace) -> tuple[Report | None, Geometry | None, str]:
    from diskplan.cli.options import TargetError, apply_overrides
    from diskplan.model.findings.report import build_report

    try:
        disk = opened if isinstance(opened, TargetError) else apply_overrides(opened, args)
    except TargetError as exc:
        disk = exc
    if isinstance(disk, TargetError) or isinstance(opened, TargetError):
        return None, None, str(disk)
    return build_report(disk), opened.geometry, ""


def _whole_check(args: argparse.Namespace, as_json: bool, target: str) -> object:
    """In a child: one target's whole check, as ``checked`` gives it, or with ``as_json`` its json_result."""
    from diskplan.backend.raw.gptcheck import one_look
    from diskplan.cli.options import open_target_here

    with one_look():  # libparted's types, the survey and the JSON read the GPT once
        result = _reported(open_target_here(target, filesystems=False), args)
        if not as_json:
            return result
        from diskplan.cli.checkjson import json_result

        return json_result(result)


def checked_in_children(targets: list[str], args: argparse.Namespace, as_json: bool) -> Iterator[Any]:
    """What ``checked`` gives (``json_result``'s of it with ``as_json``), each target checked whole in one of
    the children, one per core, that take the targets in turn (isolate.IsolatedMap): this process only
    gathers the answers. A target whose child crashed or hung is checked again here, the usual way."""
    import functools

    # What a whole check imports, imported once here: every child inherits it instead of importing it again
    # (on a busy machine the cores are not free to do that side by side).
    import diskplan.backend.parted.libparted
    import diskplan.backend.read.reader
    import diskplan.backend.read.stack
    import diskplan.cli.checkjson
    import diskplan.discovery.topology
    import diskplan.model.findings.stackfindings  # noqa: F401
    from diskplan.backend.parted.isolate import IsolatedFailure, IsolatedMap

    lanes = min(os.cpu_count() or 1, MAX_LANES)
    answers = iter(IsolatedMap(functools.partial(_whole_check, args, as_json), targets, timeout=CHECK_TIMEOUT,
                               lanes=lanes))

    def results() -> Iterator[Any]:
        try:
            for target in targets:
                answer = next(answers)
                if isinstance(answer, IsolatedFailure):
                    (answer,) = checked([target], args)
                    if as_json:
                        from diskplan.cli.checkjson import json_result

                        answer = json_result(answer)
                yield answer
        finally:
            answers.close()

    return results()


# The cyclic garbage collector's first generation runs every 700 net allocations by default: a 128-partition
# check made 12 passes (counted with gc.callbacks), 5 ms at the least of a run of ~60, for next to no cycles
# (the records are values, freed by reference counting). A check lives for a moment: it collects every GEN0
# allocations instead, which a single check does not reach (tests/test_check_json_text.py counts them).
GEN0 = 50_000


def main(argv: list[str]) -> int:
    before = gc.get_threshold()
    gc.set_threshold(GEN0, *before[1:])  # (before the reads begin: their children inherit it)
    begun = _early_reads(_plain_targets(argv))
    try:
        return _check(_plain_args(argv) or parser().parse_args(argv), begun)
    finally:
        if begun is not None:  # (done ones: reaped; those an error cut short: ended)
            begun.close()
        # A caller in the same process (a test) keeps its own thresholds. Restoring them would make the next
        # allocation collect every object this check made (~2 ms, just before the process ends): frozen and then
        # unfrozen, they are in the oldest generation, which that collection does not walk.
        gc.freeze()
        gc.set_threshold(*before)
        gc.unfreeze()


def _check(args: argparse.Namespace, begun: IsolatedMap[Rows] | None) -> int:
    many = len(args.target) >= FLEET
    # The reads (or whole checks) run from here on, while the output's modules are imported.
    reports = checked_in_children(args.target, args, args.json) if many else checked(args.target, args, begun)
    from diskplan.backend.raw.gptcheck import one_look

    with one_look():  # this process writes nothing: the survey and the JSON read each GPT once
        return _json_output(args, reports, many) if args.json else _text_output(reports)


def _json_output(args: argparse.Namespace, reports: Iterator[Any], many: bool) -> int:
    from diskplan.cli.checkjson import json_result
    from diskplan.model.findings.report import CHECK_FORMAT, CHECK_VERSION
    from diskplan.model.formats.jsontext import as_text

    results = list(reports) if many else [json_result(r) for r in reports]
    for _, _, error in results:
        if error:
            print(f"diskplan check: {safe(error)}", file=sys.stderr)
    codes = [code for code, _, _ in results]
    if len(args.target) == 1:
        if results[0][1] is not None:
            print(as_text(results[0][1]))
    else:  # one document for all of them, its status the worst of theirs
        print(as_text({"format": CHECK_FORMAT, "version": CHECK_VERSION,
                       "disks": [doc for _, doc, _ in results if doc is not None],
                       "errors": [{"target": t, "error": e} for t, (_, _, e) in zip(args.target, results,
                                                                                   strict=True) if e],
                       "status": max(codes)}))
    return max(codes)


def _text_output(reports: Iterator[tuple[Report | None, Geometry | None, str]]) -> int:
    from diskplan.cli.checktext import console, render

    codes = []
    out = console()
    for i, (report, reported, error) in enumerate(reports):
        if report is None or reported is None:
            print(f"diskplan check: {safe(error)}", file=sys.stderr)
            codes.append(2)
            continue
        codes.append(1 if report.all_findings else 0)
        if i:
            out.print()
        render(report, out, reported)
    return max(codes)
