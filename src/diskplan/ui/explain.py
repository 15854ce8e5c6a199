"""The words the planner shows: the cursor's status line, what lies under the cursor and why it matters,
and the device facts. Pure functions over the model (no Textual), so they are tested as text.
"""

from __future__ import annotations

import re

from diskplan.model.disk import Disk, content_phrase
from diskplan.model.extent import Extent, Partition, Role, State
from diskplan.model.findings.codes import NOTICE
from diskplan.model.findings.placement import nearby_starts
from diskplan.model.findings.stackfindings import NAMES, DataStart, judged, offset_mod, place, walk_lines
from diskplan.model.findings.toolsay import tool_say
from diskplan.model.geometry import Geometry
from diskplan.model.grain import Grain, libfdisk_grain, libparted_optimum, mib_grain
from diskplan.model.ptypes import describe
from diskplan.model.safetext import safe
from diskplan.model.stack import Layer
from diskplan.model.table import Table, gpt_entry_sectors
from diskplan.model.units import MiB, human_bytes, human_si, plural
from diskplan.model.value import value
from diskplan.ui.cells import Item, Kind

FS_BLOCK = 4096  # the block size of ext4, XFS, btrfs and NTFS by default


@value
class Line:
    style: str  # "heading", "text", "dim", "error", "warning", "notice", "good"
    text: str


def num(n: int) -> str:
    return f"{n:,}"


def blocks_touched(geom: Geometry, first_lba: int, nbytes: int = FS_BLOCK) -> tuple[Extent, int, int]:
    """The sectors of an ``nbytes`` block starting at ``first_lba``, and the first and last pages (physical
    blocks, or on flash at least 4 KiB: ``Geometry.page``) they touch."""
    sectors = max(1, -(-nbytes // geom.logical))
    ext = Extent(first_lba, first_lba + sectors - 1)
    return ext, geom.page_of(ext.start), geom.page_of(ext.end)


def physical_block_extent(geom: Geometry, block: int) -> Extent:
    off = geom.alignment_offset % geom.physical
    lo = (block * geom.physical + off) // geom.logical
    return Extent(lo, lo + geom.sectors_per_physical - 1)


def page_extent(geom: Geometry, page: int) -> Extent:
    off = geom.alignment_offset % geom.page
    lo = (page * geom.page + off) // geom.logical
    return Extent(lo, lo + geom.sectors_per_page - 1)


def status(geom: Geometry, lba: int, item: Item | None, sep: str = "│", width: int = 0, layers: str = "") -> str:
    """LBA, byte offset, MiB, physical block (or flash page) and what lies there, for the status line. Fits ``width``
    (0: any) by leaving out the MiB, then the bytes, then the offset into the block, then the block: what
    lies under the cursor is the last thing to be shortened. ``layers``: whose data begins in the cell
    (``layers_here``), after what lies there."""
    nbytes = lba * geom.logical
    block = geom.page_of(lba)  # on flash that reports small sectors, the assumed page
    into = nbytes - page_extent(geom, block).start * geom.logical
    pb = f"{'phys block' if geom.page == geom.physical else 'page'} {num(block)}"
    what = describe_item(item, short=True) if item else "past the end of the disk"
    if layers:
        what += f" {sep} {layers}"
    at, nb, mib = f"LBA {num(lba)}", f"{num(nbytes)} B", f"{nbytes / MiB:,.3f} MiB"
    into_text = f" +{into} B" if into else ""
    forms = ((at, nb, mib, pb + into_text, what), (at, nb, pb + into_text, what), (at, pb + into_text, what),
             (at, pb, what), (at, what))
    text = ""
    for form in forms:
        text = " " + f" {sep} ".join(form)
        if not width or len(text) <= width:
            return text
    return shorten(text, width)


def layers_here(starts: tuple[DataStart, ...]) -> str:
    """"LVM2 physical volume data begins here (byte 2,097,152)", and what it misses: for the status line."""
    said = []
    for d in starts:
        misses = f", {' and '.join(d.misses)}" if d.misses else ""
        said.append(f"{d.name} data begins here (byte {num(d.byte)}{misses})")
    return "; ".join(said)


def shorten(text: str, width: int, mark: str = "") -> str:
    """``text`` cut to ``width`` at the end of a word (a cut word says something wrong: "#5 (lo"), ending in
    ``mark`` (an ellipsis) when it was cut."""
    if len(text) <= width:
        return text
    room = max(0, width - len(mark))
    cut = text[: room + 1].rstrip()
    space = cut.rfind(" ", 0, room + 1)
    return (cut[:space] if space > 0 else text[:room]).rstrip(" │|,;:(") + mark


def fold_path(path: str, width: int) -> str:
    """``path`` with a line break after a "/" wherever a line would be wider than ``width`` (0: as it is): a
    wrapped path then breaks between its directories and reads (and copies) whole; folded at the edge of
    the screen, it broke mid-name."""
    if width <= 0 or len(path) <= width:
        return path
    lines, line = [], ""
    for part in re.findall(r"[^/]*/|[^/]+$", path):  # "/", "root/", ..., "name.dpbackup"
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])


def placed_path(path: str, width: int, after: int) -> str:
    """``path`` where it follows ``after`` characters of a line ``width`` wide (0: unknown): there when it
    fits, else on lines of its own, broken after a "/"."""
    if width <= 0 or after + len(path) <= width:
        return path
    return "\n" + fold_path(path, width)


def describe_item(item: Item, short: bool = False) -> str:
    if item.partition is not None:
        flag = f" ({item.severity})" if item.severity else ""
        label = item.label
        if short:
            label = label.replace("partition ", "#", 1)
        return f"{label}{flag}"
    if item.kind is Kind.FREE:
        return "free space"
    return item.label


def zoom_text(geom: Geometry, spc: int, short: bool = False) -> str:
    if spc == 1:
        return f"1 cell = 1 sector ({geom.logical} B)" if not short else f"1 cell = {geom.logical} B"
    if short:
        return f"1 cell = {human_bytes(spc * geom.logical)}"
    return f"1 cell = {plural(spc, 'sector')} ({human_bytes(spc * geom.logical)})"


def plan_hints(item: Item | None, blocked: str = "") -> list[Line]:
    """What the planner can do with what lies under the cursor (after its explanation)."""
    if item is None:
        return []
    if blocked and item.kind is Kind.FREE:
        return [Line("dim", ""), Line("dim", f"To plan here: L makes a new label ({blocked}).")]
    state = item.state
    if item.kind is Kind.FREE:
        text = "n proposes a partition in this free space."
    elif state is State.PROPOSED:
        text = ("Proposed: m moves it, r resizes it (or drag it, or its [ ] edges, with the mouse), t sets its "
                "type, name and flags, x removes it.")
    elif state is State.DELETE:
        text = "Marked for deletion: its space is free for planning; x keeps it after all."
    elif state is State.EXISTING:
        text = ("On the disk, holding data: m moves it with its data, r resizes it with its filesystem (or drag it, "
                "or its edges), A realigns it; x marks it for deletion; t changes its type.")
    else:
        return []
    return [Line("dim", ""), Line("dim", text)]


# --- the explain panel ----------------------------------------------------------------------------


def explain(
    item: Item | None, geom: Geometry, grain: Grain, table: Table | None = None, filesystem: str = "",
    stack: tuple[Layer, ...] = (), *, served: bool = False,
) -> list[Line]:
    """``stack``: the layers inside the partition under the cursor (``Disk.stack(number)``), walked down
    after the partition's own lines. ``served`` (diskplan serve): the command-line options the text names
    are said to be the terminal planner's, which a browser cannot give."""
    if item is None:
        return [Line("dim", "Past the end of the disk.")]
    if item.kind is Kind.FREE:
        if table is not None and table.label is None:
            if filesystem:
                return [
                    Line("heading", f"Whole disk: {content_phrase(filesystem)}"),
                    Line("text", f"There is no partition table: {content_phrase(filesystem)} starts at LBA 0 and "
                         "fills the disk. Creating a table here would destroy it."),
                    *(stack_walk(geom, 0, stack, grain) if stack else ()),
                ]
            return _explain_blank(item, geom, grain)
        return _explain_free(item, geom, grain)
    if item.kind is Kind.METADATA:
        return _explain_metadata(item, geom)
    assert item.partition is not None
    out = _explain_partition(item, item.partition, geom, grain, table, served)
    if stack and item.partition.role is not Role.EXTENDED:
        out[2:2] = stack_walk(geom, item.partition.start, stack, grain)
    return out


def stack_walk(geom: Geometry, start_lba: int, stack: tuple[Layer, ...], grain: Grain) -> list[Line]:
    """Down the stack: where each layer begins, where its data lands in absolute bytes, and whether that
    byte is on the page and on the grain, judged as the findings judge it (the findings, if any, follow with
    the fix)."""
    out = [Line("heading", "Inside it, layer by layer")]
    out += [Line("text", text) for text in walk_lines(geom, start_lba, stack)]
    for placed, found in judged(geom, start_lba, stack, grain, None):
        if placed.layer.data_offset == 0:
            continue
        style = "good" if not found else "notice" if all(f.severity == NOTICE for f in found) else "warning"
        name = NAMES.get(placed.layer.kind, placed.layer.kind)
        out.append(Line(style, f"{name}: data at byte {num(placed.data)}; {_data_sums(geom, placed.data, grain)}."))
    return out


def _data_sums(geom: Geometry, data: int, grain: Grain) -> str:
    """A data start's remainders on the page and on the grain, counted from the alignment offset as the
    findings count them (model.findings.stackfindings.offset_mod)."""
    page, _ = offset_mod(geom, data, geom.page)
    on_grain, _ = offset_mod(geom, data, grain.sectors * geom.logical)
    return f"{page}, {on_grain}"


def lbas(ext: Extent) -> str:
    """"LBA 6" for one sector, "LBA 6-13" for a run."""
    return f"LBA {num(ext.start)}" if ext.size == 1 else f"LBA {num(ext.start)}-{num(ext.end)}"


def _where(geom: Geometry, ext: Extent) -> str:
    nbytes = ext.size * geom.logical
    size = human_bytes(nbytes)
    if human_si(nbytes) != size and nbytes >= 1000:
        size += f" ({human_si(nbytes)})"
    if ext.size == 1:
        return f"LBA {num(ext.start)}: 1 sector = {size}"
    return f"LBA {num(ext.start)}-{num(ext.end)}: {plural(ext.size, 'sector')} = {size}"


def _explain_partition(item: Item, p: Partition, geom: Geometry, grain: Grain, table: Table | None,
                       served: bool = False) -> list[Line]:
    out = [Line("heading", item.label[0].upper() + item.label[1:])]
    kind = describe(p.type) if p.type else p.role.value
    start_bytes = p.start * geom.logical
    out.append(
        Line("text", f"{_where(geom, p.extent)}, {kind}; starts at byte {num(start_bytes)} ({human_si(start_bytes)}).")
    )
    if p.role is Role.EXTENDED:
        out.append(Line("text", "An extended partition only holds logical partitions (each behind an EBR)."))
        return out + _findings(item, served)
    out.extend(_first_block(geom, p, served))
    gtext = f"{num(grain.sectors)}s = {human_bytes(grain.sectors * geom.logical)}"
    if grain.is_aligned(p.start):
        out.append(Line("good", f"The start is on the {gtext} grain."))
    elif near := nearby_starts(grain, p.start, table):
        out.append(Line("text", f"The {gtext} grain's nearest starts in the usable area: {near}."))
    found = _findings(item, served)
    if not found:
        out.append(Line("good", "No findings: nothing here costs extra I/O."))
    return out + found + (_tools(geom, table, p) if table is not None and p.state is State.EXISTING else [])


def _tools(geom: Geometry, table: Table, p: Partition) -> list[Line]:
    """What parted, fdisk and sgdisk print about this partition (``diskplan check`` gives every text)."""
    say = tool_say(geom, table, p)
    out = [Line("heading", "What the tools say"),
           Line("dim", f"parted align-check opt {p.number}: {say.opt.text}; min: {say.minimum.text}"),
           Line("dim", f"parted print: Start {say.parted_start}, End {say.parted_end}")]
    if say.fdisk:
        out.append(Line("dim", f"fdisk -l: {say.fdisk}"))
    out += [Line("dim", "sgdisk -v: " + c.split(" This may")[0]) for c in say.sgdisk]
    return out


def _first_block(geom: Geometry, p: Partition, served: bool = False) -> list[Line]:
    ext, first, last = blocks_touched(geom, p.start)
    touched = last - first + 1
    head = f"Its first 4 KiB filesystem block is {lbas(ext)} (highlighted on the map)"
    if geom.page < FS_BLOCK:
        return [
            Line("text", f"{head}: {touched} whole {geom.page} B physical blocks, so no write is split on a hard "
                 "disk with true 512 B sectors."),
            Line("dim", "An SSD writes pages of 4 KiB or more whatever it reports: "
                 + ("diskplan --ssd says so, in a terminal." if served else "say so with --ssd.")),
        ]
    assumed = geom.page != geom.physical
    unit = "flash page" if assumed else "physical block"
    blocks = " and ".join(f"{num(b)} ({lbas(page_extent(geom, b))})" for b in range(first, last + 1))
    if touched == 1:
        return [Line("good", f"{head}: inside {unit} {blocks}{' (assumed)' if assumed else ''}. One write, no "
                     "read-modify-write.")]
    return [
        Line(
            "warning",
            f"{head}: it touches {touched} {unit}s of {geom.page} B{' (assumed)' if assumed else ''}, {blocks}. "
            "Writing those 4 KiB alone "
            f"makes the drive read {touched} of them, merge, and write {touched} back: {touched} media writes "
            "instead of 1.",
        )
    ]


def _findings(item: Item, served: bool = False) -> list[Line]:
    out: list[Line] = []
    for f in item.findings:
        out.append(Line(f.severity, f"{f.severity.upper()}: {safe(f.message)} [{f.code}]"))
        out.extend(Line("text", "  " + e) for e in f.explanation)
        if served and (said := terminal_options(" ".join(f.explanation))):
            out.append(Line("dim", "  " + said))
    return out


OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*[a-z]")


def terminal_options(text: str) -> str:
    """For the served planner: the command-line options ``text`` names are the terminal planner's (a browser
    gives none; its demo disks are judged as they are described); "" when it names none."""
    names = list(dict.fromkeys(OPTION.findall(text)))
    if not names:
        return ""
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    which = "is an option" if len(names) == 1 else "are options"
    return (f"{listed} {which} of diskplan run in a terminal: a browser cannot give "
            f"{'it' if len(names) == 1 else 'them'}, and this demo disk is judged as it is described.")


METADATA_TEXT = {
    "pmbr": "A protective MBR: tells MBR-only tools that the whole disk is in use.",
    "gpt-header": "A GPT header: where the entries are, the usable area and the checksums. The backup "
    "header sits in the last sector.",
    "gpt-entries": "GPT partition entries: 128 entries of 128 B = 16 KiB. On 512-byte sectors they fill "
    "LBA 2-33, which is why parted's first usable sector is 34 (17,408 B, not a multiple of 4 KiB).",
    "mbr": "The MBR: boot code and the four primary partition entries.",
    "ebr": "An extended boot record: one sector that links one logical partition to the next.",
    "ebr-gap": "Unused sectors after an EBR: libparted reserves them with the EBR (old tables kept a whole "
    "track of 63 sectors), but the EBR itself is its first sector only. Nothing is stored here.",
    "metadata": "Sectors libparted keeps for the table: after an MBR, the rest of the first track (old fdisk "
    "left 63 sectors before the first partition, and bootloaders hid there).",
}


def _explain_metadata(item: Item, geom: Geometry) -> list[Line]:
    kind = item.region.kind if item.region else "metadata"
    out = [Line("heading", item.label[0].upper() + item.label[1:]), Line("text", _where(geom, item.extent) + ".")]
    out.append(Line("text", METADATA_TEXT.get(kind, "Sectors the partition table uses for itself.")))
    return out


def _explain_free(item: Item, geom: Geometry, grain: Grain) -> list[Line]:
    ext = item.extent
    out = [Line("heading", "Free space"), Line("text", _where(geom, ext) + ".")]
    first = grain.align_up(ext.start)
    if first <= ext.end:
        out.append(
            Line("good", f"The first start on the {human_bytes(grain.sectors * geom.logical)} grain here is "
                 f"LBA {num(first)} ({human_bytes(first * geom.logical)} into the disk).")
        )
    else:
        out.append(Line("dim", "Too small to hold a partition that starts on the grain."))
    return out


def _explain_blank(item: Item, geom: Geometry, grain: Grain) -> list[Line]:
    entries = gpt_entry_sectors(geom)
    first = grain.align_up(2 + entries)
    return [
        Line("heading", "No partition table"),
        Line("text", _where(geom, item.extent) + ": every sector is free."),
        Line(
            "text",
            f"A new GPT label would take LBA 0-{1 + entries} (protective MBR, header, {entries} sectors of entries) "
            f"and a backup copy in the last {1 + entries} sectors; an msdos label only LBA 0.",
        ),
        Line("good", f"The first partition would start on the grain at LBA {num(first)} "
             f"({human_bytes(first * geom.logical)}), as fdisk and parted -a optimal do."),
    ]


# --- device facts -----------------------------------------------------------------------------------


def facts(disk: Disk, grain: Grain, *, served: bool = False) -> list[tuple[str, str]]:
    """``served``: the options the rows name are said to be the terminal planner's."""
    g, t = disk.geometry, disk.table
    rows = [
        ("Model", safe(g.model) or "-"),
        ("Size", f"{num(g.sectors)} sectors x {g.logical} B = {human_bytes(g.size_bytes)} ({human_si(g.size_bytes)})"),
        ("Logical sector", f"{g.logical} B"),
        ("Physical block", f"{g.physical} B = {g.sectors_per_physical} sector(s)"),
        ("Alignment offset", f"{g.alignment_offset} B"),
        ("Minimum I/O", f"{g.min_io} B" if g.min_io else "not reported"),
        ("Optimal I/O", f"{num(g.optimal_io)} B" if g.optimal_io else "not reported"),
        ("Your grains", ", ".join(human_bytes(x) for x in g.user_grains)
         or ("none (diskplan --grain SIZE, in a terminal)" if served else "none (--grain SIZE)")),
        ("diskplan grain", f"{num(grain.sectors)}s = {human_bytes(grain.sectors * g.logical)}"
         + (f", offset {grain.offset}s" if grain.offset else "")),
        ("fdisk would use", _grain_text(libfdisk_grain(g), g)),
        ("parted optimal", _grain_text(libparted_optimum(g), g)),
        ("Rotational", {True: "yes (HDD)", False: "no (SSD/flash)", None: "unknown"}[g.rotational]
         + {True: ", marked --ssd", False: ", marked --no-ssd", None: ""}[g.ssd]),
        ("Starts judged by", g.page_rule()),
        *([("Options", said)] if served and (said := terminal_options(g.page_rule())) else []),
        ("I/O scheduler", (g.scheduler or "unknown")
         + (f" (available: {', '.join(x for x in g.schedulers if x != g.scheduler)})"
            if len(g.schedulers) > 1 else "")),
        ("Discard granularity", f"{g.discard_granularity} B" if g.discard_granularity else "not reported"),
    ]
    if t.label is None:
        rows.append(("Table", "none"))
    else:
        rows.append(("Table", f"{t.label}, {len(t.partitions)} partition(s), room for {t.max_partitions}"))
        rows.append(("Usable area", f"LBA {num(t.first_usable)}-{num(t.last_usable)}"))
    if g.sectors_per_physical > 1 and mib_grain(g).sectors % g.sectors_per_physical == 0:
        rows.append(("1 MiB", f"{MiB // g.logical}s = {MiB // g.physical} physical blocks"))
    rows.extend(stack_rows(disk, grain))
    return rows


def stack_rows(disk: Disk, grain: Grain) -> list[tuple[str, str]]:
    """One row per layer inside each partition: where its data lands, and the remainders that judge it."""
    g = disk.geometry
    starts = {p.number: p.start for p in disk.table.partitions}
    rows = []
    for number, layers in disk.stacks:
        where = f"Inside #{number}" if number else "Inside the disk"
        for placed in place(starts.get(number, 0) * g.logical, layers):
            name = NAMES.get(placed.layer.kind, placed.layer.kind)
            if placed.layer.data_offset:
                rows.append((where, f"{name} at byte {num(placed.begins)}, data at +{num(placed.layer.data_offset)} "
                             f"= byte {num(placed.data)}: {_data_sums(g, placed.data, grain)}"))
            else:
                facts = ", ".join(f"{k} {v}" for k, v in placed.layer.facts)
                rows.append((where, f"{name} at byte {num(placed.begins)} ({facts})"))
    return rows


def _grain_text(grain: Grain, g: Geometry) -> str:
    text = f"{num(grain.sectors)}s = {human_bytes(grain.sectors * g.logical)}"
    return text + (f", offset {grain.offset}s" if grain.offset else "")
