"""Where each layer inside a partition puts its data, in absolute bytes, checked against the page, the grain
and the stripe: findings with the arithmetic, and what to run to fix the layer.

A partition can start on 1 MiB and its data still land off the page: an LVM physical volume made with
``--dataalignmentoffset``, an md array or a LUKS header with an odd offset shifts everything above it.
"""

from __future__ import annotations

from diskplan.model.codes import FS_HINT_MISMATCH, LAYER_NOT_GRAIN, LAYER_NOT_PAGE, LAYER_NOT_STRIPE, NOTICE
from diskplan.model.disk import Disk
from diskplan.model.findings import Finding
from diskplan.model.geometry import Geometry
from diskplan.model.grain import BOGUS_OPTIMAL_IO, Grain, optimal_grain
from diskplan.model.stack import Layer
from diskplan.model.units import human_bytes
from diskplan.model.value import replace, value

NAMES = {"lvm2-pv": "LVM2 physical volume", "md": "md RAID member", "luks1": "LUKS1 header",
         "luks2": "LUKS2 header", "ext4": "ext4 filesystem", "xfs": "XFS filesystem"}
DATA = {"lvm2-pv": "extent 0 (pe_start)", "md": "the array's data (data offset)",
        "luks1": "the encrypted payload", "luks2": "the encrypted payload"}


@value
class Placed:
    """A layer and the absolute bytes where it begins and where its data begins."""

    layer: Layer
    begins: int
    data: int


def place(start: int, layers: tuple[Layer, ...]) -> tuple[Placed, ...]:
    out, at = [], start
    for layer in layers:
        out.append(Placed(layer, at, at + layer.data_offset))
        at += layer.data_offset
    return tuple(out)


def walk_lines(geom: Geometry, start_lba: int, layers: tuple[Layer, ...], where: str = "The partition") -> list[str]:
    """The stack from the partition's first byte down, one line per layer, with the sums."""
    start = start_lba * geom.logical
    lines = [f"{where} starts at byte {start:,} (LBA {start_lba:,} × {geom.logical} B)."]
    for p in place(start, layers):
        name = NAMES.get(p.layer.kind, p.layer.kind)
        facts = ", ".join(f"{k} {v}" for k, v in p.layer.facts if k not in ("payload offset", "pe_start",
                                                                            "data offset"))
        if p.layer.kind in DATA:
            lines.append(f"{name} at byte {p.begins:,}: {DATA[p.layer.kind]} at +{p.layer.data_offset:,} B = byte "
                         f"{p.data:,}" + (f" ({facts})" if facts else "") + ".")
        else:
            lines.append(f"{name} at byte {p.begins:,}" + (f" ({facts})" if facts else "") + ".")
    return lines


def offset_mod(geom: Geometry, nbytes: int, modulus: int) -> tuple[str, int]:
    """``nbytes`` (an absolute byte on the disk) modulo ``modulus``, counted from the device's alignment
    offset, as the sum the findings and the planner's panels print, and the remainder."""
    off = geom.alignment_offset % modulus
    rem = (nbytes - off) % modulus
    if off:
        return f"({nbytes:,} − {off} B alignment offset) mod {modulus:,} = {rem:,}", rem
    return f"{nbytes:,} mod {modulus:,} = {rem:,}", rem


def stack_findings(
    geom: Geometry, start_lba: int, layers: tuple[Layer, ...], grain: Grain, number: int | None
) -> list[Finding]:
    """The findings for the layers of the partition ``number`` (None: the whole disk) starting at ``start_lba``."""
    return [f for _, found in judged(geom, start_lba, layers, grain, number) for f in found]


def judged(
    geom: Geometry, start_lba: int, layers: tuple[Layer, ...], grain: Grain, number: int | None
) -> list[tuple[Placed, list[Finding]]]:
    """Each layer where it lies, with the findings about its own data start (or its stripe hints)."""
    where = f"Partition {number}" if number is not None else "The whole disk"
    walk = walk_lines(geom, start_lba, layers, where)
    gbytes = grain.sectors * geom.logical
    judgements: list[tuple[Placed, list[Finding]]] = []
    placed = place(start_lba * geom.logical, layers)
    striped_below: Placed | None = None  # the nearest layer below that spreads data in stripes (md)
    for p in placed:
        out: list[Finding] = []
        judgements.append((p, out))
        layer, name = p.layer, NAMES.get(p.layer.kind, p.layer.kind)
        if layer.kind in DATA:
            arith, rem = offset_mod(geom, p.data, geom.page)
            on_page = not rem
            if rem:
                out.append(Finding(
                    LAYER_NOT_PAGE,
                    f"the {name}'s data begins {rem} B into a {geom.page} B {_unit(geom)} (byte {p.data:,})",
                    (*walk, f"{arith}: every {geom.page} B block of {DATA[layer.kind]} straddles two "
                     f"{_unit(geom)}s, so writing one alone is a read-modify-write.", f"Fix: {layer.fix}."),
                    number))
            else:
                arith, rem = offset_mod(geom, p.data, gbytes)
                if rem:
                    out.append(Finding(
                        LAYER_NOT_GRAIN,
                        f"the {name}'s data begins off the {human_bytes(gbytes)} grain (byte {p.data:,})",
                        (*walk, f"{arith}: on the {geom.page} B {_unit(geom)}, so no write is split, but not on "
                         "the grain a stripe or an erase block would want.", f"Fix: {layer.fix}."),
                        number))
            if layer.kind == "lvm2-pv" and layer.stripe and on_page:  # off the page says it already
                arith, rem = offset_mod(geom, p.data, layer.stripe)
                if rem:
                    out.append(_stripe_finding(walk, name, arith, layer.stripe, "its own striped LV", layer, number))
            if striped_below is not None and striped_below.layer.full_stripe:
                rel = p.data - striped_below.data
                full = striped_below.layer.full_stripe
                if rel % full:
                    arith = f"{rel:,} B from the array's data start mod {full:,} = {rel % full:,}"
                    out.append(_stripe_finding(walk, name, arith, full, "the md array below", layer, number))
        else:  # a filesystem: do its stripe hints match the stripe below it?
            below = striped_below.layer if striped_below is not None else None
            want = (below.stripe, below.full_stripe) if below else device_stripe(geom)
            if any(want) and (layer.stripe, layer.full_stripe) != want:
                src = "the md array below" if below else "the device's minimum/optimal I/O"
                out.append(Finding(
                    FS_HINT_MISMATCH,
                    f"the {name}'s stripe hints ({layer.stripe} B / {layer.full_stripe} B) differ from "
                    f"{src} ({want[0]} B / {want[1]} B)",
                    (*walk, "The filesystem places files and metadata on its stripe unit and width; with the "
                     "wrong ones, full-stripe writes become partial ones (a parity RAID then reads to "
                     "recompute parity).", f"Fix: {layer.fix}."),
                    number))
        if layer.kind == "md" and layer.full_stripe:
            striped_below = p
    return judgements


def device_stripe(geom: Geometry) -> tuple[int, int]:
    """(unit, width) in bytes of the stripe the device's I/O hints describe, as mkfs.ext4 and mkfs.xfs take
    them: a minimum I/O larger than the physical block is the unit, an optimal I/O larger than it the width.
    A minimum I/O of one physical block (every plain disk, every loop device) is no stripe: a filesystem
    made there has no hints, and suggesting stride=1 to it would be wrong."""
    unit = geom.min_io if geom.min_io > geom.physical else 0
    width = geom.optimal_io if geom.optimal_io > geom.physical and geom.optimal_io != BOGUS_OPTIMAL_IO else 0
    return unit, width


def _unit(geom: Geometry) -> str:
    return "physical block" if geom.page == geom.physical else "flash page"


def _stripe_finding(walk: list[str], name: str, arith: str, stripe: int, whose: str, layer: Layer,
                    number: int | None) -> Finding:
    return Finding(
        LAYER_NOT_STRIPE,
        f"the {name}'s data is not on the {human_bytes(stripe)} stripe of {whose}",
        (*walk, f"{arith}: {_stripe_cost(whose, stripe)}", f"Fix: {layer.fix}."),
        number)


def _stripe_cost(whose: str, stripe: int) -> str:
    """What a data start off a stripe costs, said for the volume that has the stripe: an md array below
    (which may or may not keep parity) or the PV's own striped LV (LVM stripes keep no parity)."""
    if whose == "the md array below":
        return (f"a {stripe:,} B write from this layer covers parts of two of the array's stripes: on RAID 0 it "
                "is split into more, smaller I/Os; on RAID 5/6 each partial stripe costs a read-modify-write "
                "of parity.")
    return (f"the LV's {stripe:,} B stripe chunks begin off {stripe:,} B boundaries of this PV's device, so a "
            "chunk-sized write that LVM sends here crosses one of them (a page group, a stripe of an array "
            "below) and reaches the device as two partial pieces; an LVM stripe keeps no parity, so nothing "
            "is read back for it.")


STACK_CODES = frozenset({LAYER_NOT_PAGE, LAYER_NOT_GRAIN, LAYER_NOT_STRIPE, FS_HINT_MISMATCH})


def with_stack_findings(disk: Disk, grain: Grain | None = None) -> Disk:
    """``disk`` with the findings of its stacks judged on its geometry as it is now (after the user's
    overrides): earlier stack findings are replaced, so calling it again after an override is safe."""
    geom = disk.geometry
    grain = grain or optimal_grain(geom)
    kept = tuple(f for f in disk.findings if f.code not in STACK_CODES)
    starts = _stack_starts(disk)
    new = [f for number, layers in disk.stacks if number in starts
           for f in stack_findings(geom, starts[number], layers, grain, number or None)]
    return replace(disk, findings=kept + tuple(new))


def _stack_starts(disk: Disk) -> dict[int, int]:
    """The first LBA of each place a stack can be read from: a live partition by its number, or 0 for the
    whole disk when it has no table."""
    starts = {p.number: p.start for p in disk.table.live}
    if disk.table.label is None:
        starts[0] = 0
    return starts


# What a misplaced data start misses, in the status line's words, worst first.
MISSES = {LAYER_NOT_PAGE: "off the page", LAYER_NOT_STRIPE: "off the stripe", LAYER_NOT_GRAIN: "off the grain"}


@value
class DataStart:
    """Where a layer's data begins on the disk, as read: the sector map marks the LBA holding that byte while
    the partition (``number``, 0: the whole disk without a table) still starts at ``part_start``."""

    number: int
    part_start: int
    kind: str
    byte: int
    lba: int
    misses: tuple[str, ...]  # MISSES' words for its findings: () when on the page, the grain and the stripe
    level: int  # 0 aligned, 1 a notice (off the grain), 2 a warning (off the page or the stripe)

    @property
    def name(self) -> str:
        return NAMES.get(self.kind, self.kind)


def data_starts(disk: Disk, grain: Grain | None = None) -> tuple[DataStart, ...]:
    """The data start of every layer that has one (LVM, md, LUKS: not a filesystem) inside the partitions
    of ``disk`` as it was read, judged as ``stack_findings`` judges them."""
    geom = disk.geometry
    grain = grain or optimal_grain(geom)
    starts = _stack_starts(disk)
    out: list[DataStart] = []
    for number, layers in disk.stacks:
        if number not in starts:
            continue
        for placed, found in judged(geom, starts[number], layers, grain, number or None):
            if placed.layer.kind not in DATA:
                continue
            codes = {f.code for f in found}
            level = max((2 if f.severity != NOTICE else 1 for f in found), default=0)
            out.append(DataStart(number, starts[number], placed.layer.kind, placed.data,
                                 placed.data // geom.logical, tuple(w for c, w in MISSES.items() if c in codes),
                                 level))
    return tuple(out)


def layers_json(geom: Geometry, start_lba: int, layers: tuple[Layer, ...]) -> list[dict[str, object]]:
    """Each layer with the absolute bytes where it begins and where its data begins (``check --json``)."""
    return [{**p.layer.as_json(), "begins": p.begins, "data_start": p.data}
            for p in place(start_lba * geom.logical, layers)]
