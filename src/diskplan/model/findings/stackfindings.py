"""Where each layer inside a partition puts its data, in absolute bytes, checked against the page, the grain
and the stripe: findings with the arithmetic, and what to run to fix the layer.

A partition can start on 1 MiB and its data still land off the page: an LVM physical volume made with
``--dataalignmentoffset``, an md array or a LUKS header with an odd offset shifts everything above it.
"""

from __future__ import annotations

from math import lcm

from diskplan.model.disk import Disk
from diskplan.model.findings.codes import (
    EXTENT_NOT_STRIPE,
    FS_HINT_MISMATCH,
    LAYER_NOT_GRAIN,
    LAYER_NOT_PAGE,
    LAYER_NOT_STRIPE,
    NOTICE,
)
from diskplan.model.findings.placement import Finding
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
    """A layer and the absolute bytes where it begins and where its data begins. Above a striped md array
    (``array``) a layer lies in the array's bytes, not the member's: ``rel`` is its data start counted from
    the array's data start, and ``begins``/``data`` the member bytes where those stripe rows begin."""

    layer: Layer
    begins: int
    data: int
    array: Placed | None = None
    rel: int = 0


def member_byte(array: Placed, rel: int) -> int:
    """Where array byte ``rel`` of the striped ``array`` lands on a member: it lies in stripe row
    rel // full stripe, and that row begins on every member at the array's data start + row × chunk (which
    member holds its chunk depends on the layout; the row is the same on all)."""
    row, within = divmod(rel, array.layer.full_stripe)
    return array.data + row * array.layer.stripe + within % array.layer.stripe


def place(start: int, layers: tuple[Layer, ...]) -> tuple[Placed, ...]:
    """Each layer where it lies. Bytes map one to one down through RAID1, linear md, LUKS and LVM's
    pe_start, so offsets add up; above a striped md array (RAID0/4/5/6/10) they do not: array byte B is in
    stripe row B // (chunk × data disks), so the layers above are placed in the array's bytes."""
    out: list[Placed] = []
    at, array, rel = start, None, 0
    for layer in layers:
        if array is None:
            out.append(Placed(layer, at, at + layer.data_offset))
            at += layer.data_offset
        else:
            out.append(Placed(layer, member_byte(array, rel), member_byte(array, rel + layer.data_offset), array,
                              rel + layer.data_offset))
            rel += layer.data_offset
        if array is None and layer.kind == "md" and layer.full_stripe and layer.stripe:
            array = out[-1]
    return tuple(out)


def _row(p: Placed, rel: int) -> str:
    """Array byte ``rel`` as a stripe row and the member byte where that row lies."""
    assert p.array is not None
    md = p.array.layer
    row, within = divmod(rel, md.full_stripe)
    head = f"array byte {rel:,} = stripe row {row:,} ({rel:,} // {md.full_stripe:,} B full stripe"
    if within:
        head += f", {within:,} B into it"
    which = "every member" if not within else "the member holding that chunk"
    return (f"{head}), i.e. byte {member_byte(p.array, rel):,} of {which} ({p.array.data:,} + {row:,} × "
            f"{md.stripe:,} B chunk" + (f" + {within % md.stripe:,}" if within % md.stripe else "") + ")")


def walk_lines(geom: Geometry, start_lba: int, layers: tuple[Layer, ...], where: str = "The partition") -> list[str]:
    """The stack from the partition's first byte down, one line per layer, with the sums."""
    start = start_lba * geom.logical
    lines = [f"{where} starts at byte {start:,} (LBA {start_lba:,} × {geom.logical} B)."]
    for p in place(start, layers):
        name = NAMES.get(p.layer.kind, p.layer.kind)
        facts = ", ".join(f"{k} {v}" for k, v in p.layer.facts if k not in ("payload offset", "pe_start",
                                                                            "data offset"))
        tail = f" ({facts})" if facts else ""
        if p.array is not None:
            begin = p.rel - p.layer.data_offset
            what = (f"{DATA[p.layer.kind]} at +{p.layer.data_offset:,} B = {_row(p, p.rel)}" if p.layer.kind in DATA
                    else "its data")
            lines.append(f"{name} at array byte {begin:,} (counted in the array's bytes, not the member's): "
                         f"{what}{tail}.")
        elif p.layer.kind in DATA:
            lines.append(f"{name} at byte {p.begins:,}: {DATA[p.layer.kind]} at +{p.layer.data_offset:,} B = byte "
                         f"{p.data:,}{tail}.")
        else:
            lines.append(f"{name} at byte {p.begins:,}{tail}.")
        if p.layer.kind == "md" and p.layer.full_stripe and p.layer.stripe:
            lines.append(f"The array's bytes are striped from byte {p.data:,}: {p.layer.stripe:,} B chunks, "
                         f"{p.layer.full_stripe // p.layer.stripe} data chunks per row = a "
                         f"{p.layer.full_stripe:,} B full stripe; what lies above is placed in the array's bytes.")
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


# What remaking a layer in use costs: every byte on it moves (said only where a warning's cost justifies it).
REMAKE = {
    "lvm2-pv": "for a PV in use that means moving every extent off it first (pvmove to another PV, vgreduce, "
               "pvremove), then pvcreate and vgextend: every byte on it is copied",
    "md": "for an array in use that means copying every byte off, mdadm --create anew, and copying it back",
    "luks1": "for a mapping in use that means cryptsetup reencrypt (every byte is rewritten) or copying every byte "
             "off and back",
    "luks2": "for a mapping in use that means cryptsetup reencrypt (every byte is rewritten) or copying every byte "
             "off and back",
}


def _fix(layer: Layer, costly: bool) -> str:
    """The fix line: a warning's cost (every write split) justifies the steps that move every byte; a
    notice's (a convention) does not: the command is only for when the layer is made again."""
    if costly:
        remake = REMAKE.get(layer.kind)
        return f"Fix: {layer.fix}" + (f"; {remake}." if remake else ".")
    return f"Nothing to move for this: it costs no split write. When this layer is made again: {layer.fix}."


def judged(
    geom: Geometry, start_lba: int, layers: tuple[Layer, ...], grain: Grain, number: int | None
) -> list[tuple[Placed, list[Finding]]]:
    """Each layer where it lies, with the findings about its own data start (or its stripe hints).

    A data start is judged on the page (in member bytes), then on the stripe below it when there is one: a
    striped md array's full stripe (counted in the array's bytes), or the device's own optimal I/O (an
    array or RAID controller read directly, where LVM and cryptsetup align to it themselves). Only where
    there is no stripe below is it judged against the grain, a convention (a notice)."""
    where = f"Partition {number}" if number is not None else "The whole disk"
    walk = walk_lines(geom, start_lba, layers, where)
    gbytes = grain.sectors * geom.logical
    device_width = device_stripe(geom)[1]
    judgements: list[tuple[Placed, list[Finding]]] = []
    for p in place(start_lba * geom.logical, layers):
        out: list[Finding] = []
        judgements.append((p, out))
        layer, name = p.layer, NAMES.get(p.layer.kind, p.layer.kind)
        below = p.array.layer if p.array is not None else None
        if layer.kind in DATA:
            arith, rem = offset_mod(geom, p.data, geom.page)
            on_page = not rem
            if rem:
                out.append(Finding(
                    LAYER_NOT_PAGE,
                    f"the {name}'s data begins {rem} B into a {geom.page} B {_unit(geom)} (byte {p.data:,})",
                    (*walk, f"{arith}: every {geom.page} B block of {DATA[layer.kind]} straddles two "
                     f"{_unit(geom)}s, so writing one alone is a read-modify-write.", _fix(layer, True)),
                    number))
            if below is not None:
                full = below.full_stripe
                if p.rel % full:
                    arith = f"{p.rel:,} B from the array's data start mod {full:,} = {p.rel % full:,}"
                    out.append(_stripe_finding(walk, name, arith, full, "the md array below", layer, number))
            elif device_width and on_page:
                arith, rem = offset_mod(geom, p.data, device_width)
                if rem:
                    out.append(_stripe_finding(walk, name, arith, device_width, "the device's optimal I/O", layer,
                                               number))
            elif on_page:
                arith, rem = offset_mod(geom, p.data, gbytes)
                if rem:
                    out.append(Finding(
                        LAYER_NOT_GRAIN,
                        f"the {name}'s data begins off the {human_bytes(gbytes)} grain (byte {p.data:,})",
                        (*walk, f"{arith}: on the {geom.page} B {_unit(geom)}, so no write is split, but not on "
                         "the grain a stripe or an erase block would want.", _fix(layer, False)),
                        number))
            if layer.kind == "lvm2-pv" and layer.stripe and on_page:  # off the page says it already
                arith, rem = offset_mod(geom, p.data, layer.stripe)
                if rem:
                    out.append(_stripe_finding(walk, name, arith, layer.stripe, "its own striped LV", layer, number))
            full = below.full_stripe if below is not None else device_width
            if layer.kind == "lvm2-pv" and layer.extent and full and layer.extent % full:
                out.append(_extent_finding(walk, p, full, number))
        else:  # a filesystem: do its stripe hints match the stripe below it?
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
    return judgements


def _extent_finding(walk: list[str], p: Placed, full: int, number: int | None) -> Finding:
    """Extent 0 is where pe_start puts it; extent k is k extents further, so it is on the full stripe only
    when k × (extent mod full stripe) is: every lcm(extent, full) / extent-th extent."""
    ext = p.layer.extent
    first = p.rel if p.array is not None else p.data
    every = lcm(ext, full) // ext
    e1 = first + ext
    return Finding(
        EXTENT_NOT_STRIPE,
        f"the {human_bytes(ext)} extents are not a multiple of the {human_bytes(full)} full stripe: extent 0 "
        f"{'starts' if first % full == 0 else 'does not start'} on a stripe, extent 1 does not"
        + (f", only one extent in {every} does" if every > 1 else ""),
        (*walk, f"Extent k begins at {first:,} + k × {ext:,}. Extent 1: {e1:,} mod {full:,} = {e1 % full:,}; "
         f"{ext:,} mod {full:,} = {ext % full:,}, so only the extents whose number is a multiple of "
         f"lcm({ext:,}, {full:,}) / {ext:,} = {every} begin where a stripe does. An LV that begins on another "
         "extent, and every write at an extent boundary, straddles two stripes.",
         f"Nothing to move for this. When the volume group is made again: vgcreate -s {_extent_on(ext, full)}B "
         f"(a multiple of {full:,} B; a size that is not a power of 2 must be at least 128 KiB)."),
        number)


def _extent_on(ext: int, full: int) -> int:
    """The smallest multiple of the full stripe at least ``ext``."""
    return -(-ext // full) * full


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
        (*walk, f"{arith}: {_stripe_cost(whose, stripe)}", _fix(layer, True)),
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


STACK_CODES = frozenset({LAYER_NOT_PAGE, LAYER_NOT_GRAIN, LAYER_NOT_STRIPE, EXTENT_NOT_STRIPE, FS_HINT_MISMATCH})


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
    return [{**p.layer.as_json(), "begins": p.begins, "data_start": p.data,
             "array_data_start": p.rel if p.array is not None else None}
            for p in place(start_lba * geom.logical, layers)]
