"""Plan the whole stack aligned: from a disk's geometry and what the user means to build on a partition (md
RAID, LVM with or without striped LVs, LUKS, a filesystem), the parameter of every layer that keeps its data
on the grain of the layer below, each with its arithmetic, as the commands that make it.

Pure: it reads no device and runs nothing. The tools' defaults and units, as their manuals and sources say
(and as the tests check against the tools themselves):

- ``mdadm --create --data-offset=SIZE``: kibibytes without a suffix. mdadm 4.2's own default for 1.1/1.2
  metadata (super1.c ``validate_geometry1``): 12 KiB + bitmap space + a reshape headroom of 128 MiB halved
  while over 0.1 % of the member (but kept at least 4 chunks), rounded up to 1 MiB. The array's data is
  striped in chunks over the data disks: array byte B lies in stripe row B // (chunk × data disks).
- ``pvcreate --dataalignment SIZE``: pe_start is the end of the default metadata area (1 MiB) rounded up to a
  multiple of SIZE (192 KiB gives 1,179,648; 256 KiB gives 1 MiB).
- ``vgcreate -s SIZE``: a power of 2, or any size of at least 128 KiB (so a multiple of a 192 KiB stripe can
  be one); every extent k begins at pe_start + k × SIZE.
- ``lvcreate -i N -I SIZE``: SIZE in KiB, a power of 2; the LV's bytes are striped over N PVs.
- ``cryptsetup luksFormat --offset SECTORS``: 512-byte sectors, a multiple of 8; without it the payload is at
  16 MiB (LUKS2) or 4,096 sectors = 2 MiB (LUKS1, 512-bit keys), aligned to the device's optimal I/O.
- ``mkfs.ext4 -E stride=,stripe_width=``: in filesystem blocks (stride = chunk / block, stripe_width =
  stride × data disks); ``mkfs.xfs -d su=,sw=``: su in bytes (with a suffix), sw a count of stripe units.
"""

from __future__ import annotations

from math import lcm

from diskplan.model.findings.codes import LAYER_NOT_PAGE, LAYER_NOT_STRIPE
from diskplan.model.findings.stackfindings import device_stripe
from diskplan.model.geometry import Geometry
from diskplan.model.grain import optimal_grain
from diskplan.model.stack import PARITY, STRIPED_LEVELS, Layer, md_data_disks
from diskplan.model.units import KiB, MiB, human_bytes
from diskplan.model.value import field, value

LUKS_DEFAULT = {"luks1": 4096 * 512, "luks2": 16 * MiB}  # payload offsets cryptsetup picks unaligned
PV_METADATA_END = MiB  # lvm2's default metadata area ends here: pe_start is at least this
MDADM_CHUNK = 512 * KiB  # mdadm's default chunk
MIN_ODD_EXTENT = 128 * KiB  # vgcreate: an extent size that is not a power of 2 must be at least this
LEVELS = (0, 1, 4, 5, 6, 10)
MIN_MEMBERS = {0: 2, 1: 2, 4: 3, 5: 3, 6: 4, 10: 2}


class IntentError(ValueError):
    """A stack that cannot be built as asked (one line for the user)."""


@value
class Intent:
    """What the user means to build on the partition, bottom up. ``raid`` None: no md array."""
    raid: int | None = None
    members: int = 0
    chunk: int = MDADM_CHUNK
    lvm: bool = False
    extent: int = 4 * MiB  # vgcreate's default
    lv_stripes: int = 1  # lvcreate -i: PVs the LV is striped over (1: linear)
    lv_stripe_size: int = 64 * KiB  # lvcreate -I
    luks: str = ""  # "", "luks1" or "luks2"
    fs: str = ""  # "", "ext4" or "xfs"
    fs_block: int = 4096

    def check(self) -> None:
        if self.raid is not None:
            if self.raid not in LEVELS:
                raise IntentError(f"RAID level {self.raid}: diskplan plans md levels {', '.join(map(str, LEVELS))}")
            if self.members < MIN_MEMBERS[self.raid]:
                least = MIN_MEMBERS[self.raid]
                raise IntentError(f"RAID{self.raid} needs at least {least} members, not {self.members}")
            if self.raid in STRIPED_LEVELS and not _pow2(self.chunk, 4 * KiB):
                raise IntentError(f"a chunk of {self.chunk} B: mdadm wants a power of 2 of at least 4 KiB")
            if self.raid == 10 and self.members % 2:
                raise IntentError("RAID10 with the near-2 layout this plan assumes needs an even number of members")
        if self.lv_stripes < 1 or (self.lv_stripes > 1 and not self.lvm):
            raise IntentError("LV stripes need LVM (--lvm) and a count of at least 1")
        if self.lv_stripes > 1 and not _pow2(self.lv_stripe_size, 4 * KiB):
            raise IntentError(f"an LV stripe size of {self.lv_stripe_size} B: lvcreate wants a power of 2 of at "
                              "least 4 KiB")
        if self.lvm and (self.extent < 512 or self.extent % 512 or (not _pow2(self.extent, 512)
                                                                       and self.extent < MIN_ODD_EXTENT)):
            raise IntentError(f"an extent size of {self.extent} B: a power of 2, or at least 128 KiB in sectors")
        if self.luks not in ("", "luks1", "luks2"):
            raise IntentError(f"LUKS version {self.luks!r}: luks1 or luks2")
        if self.fs not in ("", "ext4", "xfs"):
            raise IntentError(f"filesystem {self.fs!r}: ext4 or xfs")
        if not _pow2(self.fs_block, 1024) or self.fs_block > 65536:
            raise IntentError(f"a filesystem block of {self.fs_block} B")


def _pow2(n: int, least: int) -> bool:
    return n >= least and n & (n - 1) == 0


def round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


@value
class Step:
    """One layer of the plan: the command that makes it, where its data begins and why that is aligned.

    ``space`` names whose bytes ``data`` counts: "disk" (the member disk, absolute), "array" (the striped md
    array's), "lv" (the striped LV's). ``grain`` is what ``data`` must be a multiple of in that space (counted
    from the disk's alignment offset on the disk): the grain of the layer below."""
    layer: str  # "partition", "md", "lvm2-pv", "vg", "lv", "luks1", "luks2", "luks-open", "ext4", "xfs"
    command: str
    data_offset: int  # bytes from where the layer begins to where its data begins
    data: int  # where its data begins, in ``space``
    space: str
    grain: int
    sums: tuple[str, ...]
    values: tuple[tuple[str, int], ...] = field(default=())  # the parameters, in bytes or counts, for JSON

    def as_json(self) -> dict[str, object]:
        return {"layer": self.layer, "command": self.command, "data_offset": self.data_offset, "data_start": self.data,
                "space": self.space, "grain": self.grain, "values": dict(self.values), "arithmetic": list(self.sums)}


@value
class StackPlan:
    intent: Intent
    partition_start: int  # bytes
    disk_grain: int  # bytes
    steps: tuple[Step, ...]
    stripe: tuple[int, int]  # (unit, width) in bytes a filesystem on top should be told; (0, 0): none
    notes: tuple[str, ...] = field(default=())

    def step(self, layer: str) -> Step | None:
        return next((s for s in self.steps if s.layer == layer), None)

    def commands(self) -> list[str]:
        return [s.command for s in self.steps if s.command]

    def as_json(self) -> dict[str, object]:
        i = self.intent
        return {"intent": {"raid": i.raid, "members": i.members, "chunk": i.chunk, "lvm": i.lvm, "extent": i.extent,
                           "lv_stripes": i.lv_stripes, "lv_stripe_size": i.lv_stripe_size, "luks": i.luks or None,
                           "fs": i.fs or None},
                "partition_start": self.partition_start, "disk_grain": self.disk_grain,
                "filesystem_stripe": {"unit": self.stripe[0], "width": self.stripe[1]},
                "steps": [s.as_json() for s in self.steps], "notes": list(self.notes)}


def mdadm_data_offset(member_bytes: int, chunk: int) -> int:
    """mdadm 4.2's default data offset for 1.2 metadata on a member of ``member_bytes`` (see the module's
    docstring), in bytes."""
    size = member_bytes // 512
    if size < 128:
        bm = 0
    elif size - 128 >= 200 * 1024 * 1024 * 2:
        bm = 256
    elif size - 8 > 8 * 1024 * 1024 * 2:
        bm = 128
    else:
        bm = 8
    head = 128 * 1024 * 2
    csec = chunk // 512
    while (head << 10) > size and (csec == 0 or head // 2 >= csec * 2):
        head >>= 1
    return round_up(24 + bm + head, 2048) * 512


def _k(n: int) -> str:
    """A size as the tools take it: KiB when whole (mdadm's and lvcreate's unit), else bytes."""
    return f"{n // KiB}K" if n % KiB == 0 else f"{n}B"


def plan_stack(geom: Geometry, start_lba: int, size_bytes: int, intent: Intent, dev: str = "PART") -> StackPlan:
    """The plan for ``intent`` on the partition at ``start_lba`` of ``size_bytes`` on a disk of ``geom``
    (every md member a like partition on a like disk). ``dev`` names the partition in the commands."""
    intent.check()
    ss = geom.logical
    g = optimal_grain(geom)
    grain = g.sectors * ss
    start = start_lba * ss
    off = geom.alignment_offset % grain
    steps: list[Step] = []
    notes: list[str] = []
    rem = (start - off) % grain
    steps.append(Step("partition", "", 0, start, "disk", grain, (
        f"The {'partition' if start_lba else 'stack'} starts at byte {start:,} (LBA {start_lba:,} × {ss} B); the "
        "disk's grain is "
        f"{human_bytes(grain)} ({grain:,} B: 1 MiB, the physical block and the device's I/O hints together)"
        + (f", counted from its {off} B alignment offset" if off else "") + ".",
        _mod(start, off, grain) + (": on the grain." if not rem else ": OFF the grain, so nothing above it can be: "
                                   "move the partition first (diskplan realign)."))))
    if rem:
        notes.append(f"the partition starts {rem:,} B off the {human_bytes(grain)} grain")
    # Where the next layer begins, and the grain its data must keep: on the disk, the device's own full stripe
    # when it reports one (an array or a RAID controller read directly: LVM and cryptsetup align to it), else
    # the disk's grain.
    device_unit, device_width = device_stripe(geom)
    space, at, below = "disk", start, device_width or grain
    stripe_below = device_width  # the full stripe right below (0: none), which extents should be multiples of
    unit, width = (device_unit, device_width) if device_unit and device_width else (0, 0)  # a filesystem's hints
    target = dev
    page = geom.page
    if intent.raid is not None:
        lvl, n, chunk = intent.raid, intent.members, intent.chunk
        striped = lvl in STRIPED_LEVELS
        data_disks = md_data_disks(lvl, n) if striped else 0
        default = mdadm_data_offset(size_bytes, chunk if striped else 0)
        md_off = round_up(default, grain)
        full = chunk * data_disks
        sums = [f"mdadm's own default data offset on a {human_bytes(size_bytes)} member: {default:,} B "
                f"(12 KiB + bitmap + reshape headroom, rounded up to 1 MiB)"
                + ("." if md_off == default else f"; rounded up to the {grain:,} B grain: {md_off:,} B."),
                f"The array's data begins at member byte {start:,} + {md_off:,} = {start + md_off:,}: "
                f"{start + md_off - off:,} mod {grain:,} = {(start + md_off - off) % grain:,}."]
        if striped:
            parity = PARITY.get(lvl, 0)
            why = (f"{n} members − {parity} parity" if parity else
                   f"{n} members / 2 copies" if lvl == 10 else f"{n} members")
            sums.append(f"RAID{lvl}: {human_bytes(chunk)} chunks, {data_disks} data chunks per row ({why}): a full "
                        f"stripe of {data_disks} × {chunk:,} = {full:,} B. Array byte B lies in stripe row "
                        f"B // {full:,}, at member byte {start + md_off:,} + row × {chunk:,}: above the array, "
                        f"every offset is counted in the array's bytes and must be a multiple of {full:,}.")
            if chunk % page:
                notes.append(f"the {chunk:,} B chunk is not a multiple of the {page} B page")
        else:
            sums.append(f"RAID{lvl}: every array byte lies at the same offset on each member, so offsets above "
                        "add to the member's and keep its grain.")
        cmd = (f"mdadm --create /dev/md0 --metadata=1.2 --level={lvl} --raid-devices={n}"
               + (f" --chunk={_k(chunk)}" if striped else "") + f" --data-offset={_k(md_off)} "
               + " ".join([dev] + [f"MEMBER{i + 2}" for i in range(n - 1)]))
        steps.append(Step("md", cmd, md_off, start + md_off, "disk", grain, tuple(sums),
                          (("data_offset", md_off), ("chunk", chunk if striped else 0), ("full_stripe", full),
                           ("data_disks", data_disks), ("mdadm_default", default))))
        target = "/dev/md0"
        if striped:
            space, at, below = "array", 0, full
            unit, width, stripe_below = chunk, full, full
        else:
            at = start + md_off
    if intent.lvm:
        k = intent.lv_stripes
        s_size = intent.lv_stripe_size if k > 1 else 0
        align = lcm(below, s_size or 1)
        pe = round_up(PV_METADATA_END, align)
        data = at + pe
        sums = [f"pvcreate --dataalignment {align:,}B: pe_start = {PV_METADATA_END:,} B (the end of lvm2's default "
                f"metadata area) rounded up to a multiple of {align:,} = {pe:,} B"
                + (f" = {pe // stripe_below} full stripes" if stripe_below and pe % stripe_below == 0 else "") + ".",
                f"Extent 0 begins at {space} byte {at:,} + {pe:,} = {data:,}: "
                f"{_mod(data, off if space == 'disk' else 0, below)}."]
        if s_size:
            sums.append(f"The LV stripe size {s_size:,} B divides it: {pe:,} mod {s_size:,} = {pe % s_size}.")
        steps.append(Step("lvm2-pv", f"pvcreate --dataalignment {align}B {target}", pe, data, space, below,
                          tuple(sums), (("dataalignment", align), ("pe_start", pe))))
        ext_unit = lcm(stripe_below or page, s_size or 1)
        ext = round_up(intent.extent, ext_unit)
        if ext != intent.extent and not _pow2(ext, 512) and ext < MIN_ODD_EXTENT:
            ext = round_up(MIN_ODD_EXTENT, ext_unit)
        e1 = data + ext
        esums = [f"Extent k begins at {data:,} + k × extent size. The extent size must be a multiple of "
                 f"{ext_unit:,} B" + (" (the full stripe)" if stripe_below else "")
                 + (f" and of the LV stripe {s_size:,} B" if s_size else "") + " for every extent to begin where "
                 "the first does.",
                 f"{intent.extent:,} mod {ext_unit:,} = {intent.extent % ext_unit:,}"
                 + (": as asked." if ext == intent.extent else
                    f": not; the first multiple at least {human_bytes(intent.extent)} is {ext:,} B "
                    f"({ext // ext_unit} × {ext_unit:,}; not a power of 2, which vgcreate allows at 128 KiB and up)."),
                 f"Extent 1 begins at {e1:,}: {_mod(e1, off if space == 'disk' else 0, below)}."]
        pvs = " ".join([target] + [f"PV{i + 2}" for i in range(k - 1)])
        steps.append(Step("vg", f"vgcreate -s {ext}B vg0 {pvs}", 0, data, space, below, tuple(esums),
                          (("extent_size", ext), ("asked", intent.extent))))
        if s_size:
            lsums = (f"lvcreate -i {k} -I {s_size // KiB}k: the LV's bytes go {s_size:,} B to each PV in turn, a "
                     f"full stripe of {k} × {s_size:,} = {k * s_size:,} B; LV byte 0 is extent 0 of each PV, on "
                     "the grain above.",)
            if space == "array" and s_size % below and below % s_size:
                notes.append(f"the LV stripe of {s_size:,} B is neither a multiple nor a divisor of the array's "
                             f"{below:,} B full stripe")
            steps.append(Step("lv", f"lvcreate -i {k} -I {s_size // KiB}k -l 100%FREE -n lv0 vg0", 0, 0, "lv",
                              k * s_size, lsums, (("stripes", k), ("stripe_size", s_size))))
            space, at, below = "lv", 0, k * s_size
            unit, width = s_size, k * s_size
        else:
            steps.append(Step("lv", "lvcreate -l 100%FREE -n lv0 vg0", 0, data, space, below,
                              (f"A linear LV from extent 0: LV byte 0 is {space} byte {data:,}, on the grain "
                               "above.",), (("stripes", 1),)))
            at = data
        target = "/dev/vg0/lv0"
    if intent.luks:
        base = LUKS_DEFAULT[intent.luks]
        align = lcm(below, 4096)
        payload = round_up(base, align)
        data = at + payload
        steps.append(Step(intent.luks, f"cryptsetup luksFormat --type {intent.luks} --offset {payload // 512} {target}",
                          payload, data, space, below, (
                              f"cryptsetup's default payload for {intent.luks.upper()}: {base:,} B; rounded up to a "
                              f"multiple of {align:,} B (the grain below, and --offset's 4 KiB): {payload:,} B = "
                              f"{payload // 512:,} sectors of 512 B.",
                              f"The payload begins at {space} byte {at:,} + {payload:,} = {data:,}: "
                              f"{_mod(data, off if space == 'disk' else 0, below)}."),
                          (("offset_sectors", payload // 512), ("payload", payload))))
        steps.append(Step("luks-open", f"cryptsetup open {target} crypt0", 0, data, space, below,
                          ("The mapping's byte 0 is the payload's first byte: the filesystem inherits its grain.",)))
        target, at = "/dev/mapper/crypt0", data
    if intent.fs:
        steps.append(_fs_step(intent, target, unit, width, at, space, below))
    return StackPlan(intent, start, grain, tuple(steps), (unit, width), tuple(notes))


def _mod(n: int, off: int, m: int) -> str:
    if off:
        return f"({n:,} − {off}) mod {m:,} = {(n - off) % m:,}"
    return f"{n:,} mod {m:,} = {n % m:,}"


def _fs_step(intent: Intent, target: str, unit: int, width: int, data: int, space: str, below: int) -> Step:
    b = intent.fs_block
    if not unit or not width or unit % b or width % unit:
        return Step(intent.fs, f"mkfs.{intent.fs} {'-b ' + str(b) + ' ' if intent.fs == 'ext4' else ''}{target}", 0,
                    data, space, below, ("No stripe below: the filesystem needs no stripe hints.",),
                    (("unit", 0), ("width", 0)))
    if intent.fs == "ext4":
        stride, sw = unit // b, width // b
        return Step("ext4", f"mkfs.ext4 -b {b} -E stride={stride},stripe_width={sw} {target}", 0, data, space, below,
                    (f"stride = stripe unit / block = {unit:,} / {b} = {stride}; stripe_width = full stripe / block = "
                     f"{width:,} / {b} = {sw} (mke2fs counts both in filesystem blocks).",),
                    (("unit", unit), ("width", width), ("stride", stride), ("stripe_width", sw)))
    return Step("xfs", f"mkfs.xfs -d su={_k(unit).lower()},sw={width // unit} {target}", 0, data, space, below,
                (f"su = the stripe unit, {unit:,} B; sw = full stripe / unit = {width:,} / {unit:,} = "
                 f"{width // unit}.",),
                (("unit", unit), ("width", width)))


# --- an existing stack against its plan ------------------------------------------------------------------


def intent_of(layers: tuple[Layer, ...], members: int = 0) -> Intent:
    """The intent an existing stack was built for, as its headers tell it."""
    raid: int | None = None
    n = chunk = 0
    lvm = False
    extent, stripes, s_size = 4 * MiB, 1, 64 * KiB
    luks = fs = ""
    block = 4096
    for layer in layers:
        if layer.kind == "md":
            raid, n = layer.level, layer.devices or members
            chunk = layer.stripe or MDADM_CHUNK
        elif layer.kind == "lvm2-pv":
            lvm = True
            extent = layer.extent or extent
            if layer.devices > 1 and layer.stripe:
                stripes, s_size = layer.devices, layer.stripe
        elif layer.kind in ("luks1", "luks2"):
            luks = layer.kind
        elif layer.kind in ("ext4", "xfs"):
            fs = layer.kind
            block = int(dict(layer.facts).get("block size", "4096 B").split()[0])
    return Intent(raid, n, chunk or MDADM_CHUNK, lvm, extent, stripes, s_size, luks, fs, block)


@value
class Verdict:
    """One layer of an existing stack against what the plan would have made: ``status`` "as planned",
    "differs" (on the grain below all the same: nothing to change) or "costs" (a finding whose cost is real:
    the steps that would mend it, which move every byte, are said with it)."""
    layer: str
    status: str
    lines: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"layer": self.layer, "status": self.status, "explanation": list(self.lines)}


COSTS = {
    LAYER_NOT_PAGE: "every write of a block straddles two physical blocks: a read-modify-write each time",
    LAYER_NOT_STRIPE: "a write of a full stripe of data touches two stripes: on parity RAID each half is a "
                      "partial-stripe write that reads to recompute parity",
}
PLAN_STEP = {"md": "md", "lvm2-pv": "lvm2-pv", "luks1": "luks1", "luks2": "luks2", "ext4": "ext4", "xfs": "xfs"}


def compare(geom: Geometry, start_lba: int, size_bytes: int, layers: tuple[Layer, ...], number: int | None,
            intent: Intent | None = None, dev: str = "PART") -> tuple[StackPlan, tuple[Verdict, ...]]:
    """The plan the existing ``layers`` were built for (their own intent, unless ``intent``) and, layer by
    layer, what its command would have made against what is there, judged as ``check`` judges it."""
    from diskplan.model.findings.stackfindings import REMAKE, judged

    plan = plan_stack(geom, start_lba, size_bytes, intent or intent_of(layers), dev)
    out: list[Verdict] = []
    for placed, found in judged(geom, start_lba, layers, optimal_grain(geom), number):
        layer = placed.layer
        step = plan.step(PLAN_STEP.get(layer.kind, "-"))
        if step is None:
            out.append(Verdict(layer.kind, "differs", (f"{layer.kind}: not in the intended stack.",)))
            continue
        lines: list[str] = []
        if layer.kind in ("ext4", "xfs"):
            want = dict(step.values)
            same = (layer.stripe, layer.full_stripe) == (want.get("unit", 0), want.get("width", 0))
            lines.append(f"{layer.kind}: would have been `{step.command}`; it has stripe unit {layer.stripe:,} B, "
                         f"width {layer.full_stripe:,} B" + ("." if same else f" (planned {want.get('unit', 0):,} B, "
                                                              f"{want.get('width', 0):,} B)."))
            if not same:
                lines.append("Mended in place, no data moves: tune2fs -E stride=,stripe_width= (ext4) or the mount "
                             "options sunit=,swidth= (XFS) with the planned values.")
            out.append(Verdict(layer.kind, "as planned" if same else "differs", tuple(lines)))
            continue
        where = (f"array byte {placed.rel:,}" if placed.array is not None else f"byte {placed.data:,}")
        lines.append(f"{layer.kind}: would have been `{step.command}`: data at +{step.data_offset:,} B; it is at "
                     f"+{layer.data_offset:,} B ({where}).")
        costly = [f for f in found if f.code in COSTS]
        status = "as planned" if layer.data_offset == step.data_offset else "differs"
        if layer.kind == "lvm2-pv" and layer.extent:
            vg = plan.step("vg")
            ext = dict(vg.values)["extent_size"] if vg else layer.extent
            lines.append(f"Extents: would have been {ext:,} B (`{vg.command if vg else ''}`); they are "
                         f"{layer.extent:,} B.")
            if ext != layer.extent:
                status = "differs" if status == "as planned" else status
                lines.append("The extent size is fixed when the volume group is made: nothing to move for it "
                             "(remaking the VG would move every byte to gain only the later extents' alignment).")
        if costly:
            status = "costs"
            for f in costly:
                lines.append(f"Costs: {f.message}: {COSTS[f.code]}. Measure it before deciding "
                             "(`diskplan measure` on the device).")
            lines.append(f"If that cost matters: {REMAKE.get(layer.kind, 'make the layer again')}. Every byte on "
                         "it moves, so back up first.")
        elif status == "differs":
            lines.append("On the grain below all the same (no finding): nothing to change.")
        out.append(Verdict(layer.kind, status, tuple(lines)))
    return plan, tuple(out)


# --- the intent as options (the command line's, and the planner's dialog, which takes the same words) ------


def intent_from(raid: int | None, members: int | None, chunk: int | None, lvm: bool, extent: int | None,
                lv_stripes: int, lv_stripe_size: int | None, luks: str | None, fs: str | None) -> Intent | None:
    """The intent options describe (sizes in bytes, None: not given), or None when they describe none."""
    if raid is None and not lvm and not luks and not fs:
        if members or chunk or extent or lv_stripe_size or lv_stripes != 1:
            raise IntentError("--members/--chunk need --raid, --extent/--lv-stripes/--lv-stripe-size need --lvm")
        return None
    if raid is None and (members or chunk):
        raise IntentError("--members and --chunk need --raid LEVEL")
    if raid is not None and not members:
        raise IntentError("--raid needs --members N")
    if not lvm and (extent or lv_stripe_size or lv_stripes != 1):
        raise IntentError("--extent, --lv-stripes and --lv-stripe-size need --lvm")
    return Intent(raid, members or 0, chunk or MDADM_CHUNK, lvm, extent or 4 * MiB, lv_stripes,
                  lv_stripe_size or 64 * KiB, luks or "", fs or "")


def parse_intent(text: str, sector_size: int) -> Intent | None:
    """``--raid 5 --members 4 --chunk 64KiB --lvm --luks luks2 --fs xfs``, the command line's words."""
    from diskplan.model.sizes import SizeError, parse_option

    words = text.split()
    got: dict[str, str] = {}
    flags = {"--lvm"}
    valued = {"--raid", "--members", "--chunk", "--extent", "--lv-stripes", "--lv-stripe-size", "--luks", "--fs"}
    i = 0
    while i < len(words):
        w = words[i]
        if w in flags:
            got[w] = ""
            i += 1
        elif w in valued and i + 1 < len(words):
            got[w] = words[i + 1]
            i += 2
        else:
            raise IntentError(f"{w!r}: the words are {', '.join(sorted(flags | valued))}")

    def num(key: str) -> int | None:
        if key not in got:
            return None
        if not got[key].isdigit():
            raise IntentError(f"{key} {got[key]!r}: a whole number")
        return int(got[key])

    def size(key: str) -> int | None:
        if key not in got:
            return None
        try:
            return parse_option(got[key]).nbytes(sector_size)
        except SizeError as exc:
            raise IntentError(f"{key}: {exc}") from exc

    for key, allowed in (("--luks", ("luks1", "luks2")), ("--fs", ("ext4", "xfs"))):
        if key in got and got[key] not in allowed:
            raise IntentError(f"{key} {got[key]!r}: {' or '.join(allowed)}")
    return intent_from(num("--raid"), num("--members"), size("--chunk"), "--lvm" in got, size("--extent"),
                       num("--lv-stripes") or 1, size("--lv-stripe-size"), got.get("--luks"), got.get("--fs"))


def intent_words(intent: Intent) -> str:
    """The options that describe ``intent`` (what ``parse_intent`` reads back)."""
    out: list[str] = []
    if intent.raid is not None:
        out += ["--raid", str(intent.raid), "--members", str(intent.members), "--chunk", f"{intent.chunk // KiB}KiB"]
    if intent.lvm:
        out += ["--lvm", "--extent", f"{intent.extent}B"]
        if intent.lv_stripes > 1:
            out += ["--lv-stripes", str(intent.lv_stripes), "--lv-stripe-size", f"{intent.lv_stripe_size // KiB}KiB"]
    if intent.luks:
        out += ["--luks", intent.luks]
    if intent.fs:
        out += ["--fs", intent.fs]
    return " ".join(out)


def describe_intent(intent: Intent) -> str:
    parts = []
    if intent.raid is not None:
        parts.append(f"RAID{intent.raid} of {intent.members}" + (f" × {human_bytes(intent.chunk)} chunks"
                                                                 if intent.raid != 1 else ""))
    if intent.lvm:
        parts.append("LVM" + (f" striped over {intent.lv_stripes} PVs × {human_bytes(intent.lv_stripe_size)}"
                              if intent.lv_stripes > 1 else ""))
    parts += [x.upper() if x.startswith("luks") else x for x in (intent.luks, intent.fs) if x]
    return ", ".join(parts) or "nothing above the partition"


def plan_lines(title: str, plan: StackPlan, verdicts: tuple[Verdict, ...]) -> list[str]:
    """The plan as ``diskplan stack`` prints it and the planner's dialog shows it: the commands, the
    arithmetic layer by layer, then the stack there now against it."""
    out = [f"{title}: {describe_intent(plan.intent)}", "",
           "Commands (diskplan runs none of them; MEMBER2... and PV2... are the like partitions elsewhere):"]
    out += [f"  {c}" for c in plan.commands()]
    out += ["", "Why, layer by layer:"]
    for step in plan.steps:
        out.append(f"  {step.layer}:")
        out += [f"    {line}" for line in step.sums]
    out += [f"  note: {n}" for n in plan.notes]
    if verdicts:
        out += ["", "The stack there now, against the plan:"]
        for v in verdicts:
            out.append(f"  {v.layer}: {v.status}")
            out += [f"    {line}" for line in v.lines]
    return out
