#!/usr/bin/env python3
"""Boot a throw-away QEMU guest with disks of a chosen geometry and run commands in it (scripts/guestvm.py).

    scripts/guest.py --disk e512:a:64M --disk ssd:b --udevd -- 'diskplan check $DISK_a' 'lsblk -t'

Each command is one case (``sh -e``), run in the repository with the venv on PATH; ``$DISK_<name>`` is the
node of the disk named <name>. Prints each case's output and exit status, and the boot time. Kinds:
plain (512/512 rotational), e512 (512/4096), n4k (4096/4096), ssd (virtio-scsi, non-rotational, 512/4096);
``--hints MIN:OPT`` adds I/O size hints to the virtio disks. Disk images are kept with ``--workdir``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import guestvm

SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_disk(spec: str, hints: tuple[int, int] | None) -> guestvm.Disk:
    kind, _, rest = spec.partition(":")
    name, _, size_text = rest.partition(":")
    size = 64 << 20
    if size_text:
        size = int(size_text[:-1]) * SUFFIX[size_text[-1].upper()] if size_text[-1].isalpha() else int(size_text)
    min_io, opt_io = hints if hints else (None, None)
    if kind == "plain":
        return guestvm.Disk(name, size, min_io=min_io, opt_io=opt_io)
    if kind == "e512":
        return guestvm.e512(name, size, min_io=min_io, opt_io=opt_io)
    if kind == "n4k":
        return guestvm.n4k(name, size)
    if kind == "ssd":
        return guestvm.ssd(name, size)
    raise SystemExit(f"guest.py: unknown disk kind {kind!r} (plain, e512, n4k, ssd)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--disk", action="append", default=[], help="KIND:NAME[:SIZE], e.g. e512:a:64M")
    parser.add_argument("--hints", help="MIN:OPT I/O sizes in bytes for the virtio disks")
    parser.add_argument("--udevd", action="store_true", help="start systemd-udevd in the guest")
    parser.add_argument("--workdir", type=pathlib.Path, help="keep the disk images here")
    parser.add_argument("--console", action="store_true", help="print the guest's console too")
    parser.add_argument("commands", nargs="*", default=["lsblk -t"])
    args = parser.parse_args()
    hints = None
    if args.hints:
        low, _, high = args.hints.partition(":")
        hints = (int(low), int(high))
    disks = [parse_disk(spec, hints) for spec in args.disk]
    cases = [guestvm.Case(f"c{i}", cmd) for i, cmd in enumerate(args.commands)]
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        run = guestvm.boot(disks, cases, workdir=args.workdir, udevd=args.udevd)
    except (guestvm.GuestUnavailable, guestvm.GuestFailed) as exc:
        print(f"guest.py: {exc}", file=sys.stderr)
        return 2
    if args.console:
        print(run.console)
    for case, cmd in zip(run.cases.values(), args.commands, strict=True):
        print(f"$ {cmd}   [exit {case.rc}, {case.seconds:.1f} s]")
        sys.stdout.write(case.out)
        sys.stderr.write(case.err)
    print(f"boot {run.boot_seconds or 0:.1f} s, whole run {run.seconds:.1f} s")
    return 0 if all(c.rc == 0 for c in run.cases.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
