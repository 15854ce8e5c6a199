"""What sits inside a partition: LVM2 physical volumes, md RAID 1.x, LUKS1/LUKS2 and ext4/XFS stripe hints.

Pure parsing, bytes in and facts out (``backend.read.stack`` does the reading, read-only). Each layer says
where its own data begins, relative to where the layer begins, so the absolute byte where data lands is
the partition start plus every offset above it: the arithmetic ``stackfindings`` checks against the
page, the grain and the stripe. Formats, from their documentation and sources:

- LVM2: ``lib/label/label.h`` and ``lib/format_text/layout.h`` (a label in one of the first 4 sectors,
  "LABELONE" then "LVM2 001"; the pv_header's first data area is ``pe_start``; the metadata area holds the
  VG as text, with ``extent_size`` and each striped segment's ``stripe_size`` in 512-byte sectors).
- md: ``include/uapi/linux/raid/md_p.h``, ``struct mdp_superblock_1`` (1.0 near the end, 1.1 at 0,
  1.2 at 4 KiB; ``data_offset`` and ``chunksize`` in 512-byte sectors).
- LUKS1: the LUKS On-Disk Format Specification 1.2.3 (``payload-offset`` in 512-byte sectors, big-endian);
  LUKS2: the LUKS2 On-Disk Format Specification (a binary header, then JSON whose segment 0 ``offset`` is
  in bytes).
- ext4: ``fs/ext4/ext4.h`` (superblock at 1024: ``s_raid_stride`` at 0x164, ``s_raid_stripe_width`` at
  0x170, in filesystem blocks). XFS: ``libxfs/xfs_format.h`` (``sb_unit``/``sb_width`` at 184/188, blocks).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from diskplan.model.value import field, value

SECTOR = 512  # LVM, md and LUKS1 count in 512-byte units whatever the device's sector size

Reader = Callable[[int, int], bytes]  # (offset, length) -> bytes, relative to where the layer begins


class StackError(ValueError):
    """A header that claims a format but does not hold together."""


@value
class Layer:
    """One layer found inside a partition (LVM, md, LUKS, a filesystem) and how it lays out its data."""
    kind: str  # "lvm2-pv", "md", "luks1", "luks2", "ext4", "xfs"
    data_offset: int  # bytes from where this layer begins to where its data begins (0 for a filesystem)
    stripe: int = 0  # bytes: the chunk a striped layer spreads (md chunk, LVM stripe size, fs stride)
    full_stripe: int = 0  # bytes: one whole stripe across the data devices (md), or the fs stripe width
    facts: tuple[tuple[str, str], ...] = field(default=())  # what the tool's own dump would say, as words
    fix: str = ""  # the command that makes this layer with its data where it should be (a new one)
    level: int = -1  # md: the RAID level
    devices: int = 0  # md: raid_disks; LVM: the most stripes of any of its VG's LVs
    extent: int = 0  # LVM: the VG's extent size in bytes (0: no VG read)

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "data_offset": self.data_offset, "stripe": self.stripe,
                "full_stripe": self.full_stripe, "facts": dict(self.facts)}


def _u32le(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


def _u64le(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", b, at)[0])


# --- LVM2 -----------------------------------------------------------------------------------------------


LVM_LABEL, LVM_TYPE = b"LABELONE", b"LVM2 001"
MDA_MAGIC = b" LVM2 x[5A%r0N*>"


@value
class PvLabel:
    """An LVM physical volume's label and header."""
    sector: int  # where the label was found (0-3)
    device_size: int  # bytes, as pvcreate saw the device
    pe_start: int  # bytes: the first data area, where extent 0 begins
    metadata_areas: tuple[tuple[int, int], ...]  # (offset, size) in bytes


def parse_pv_label(head: bytes) -> PvLabel | None:
    """The LVM2 label in the first 4 sectors of ``head`` (at least 2 KiB), or None when there is none."""
    for sector in range(4):
        at = sector * SECTOR
        if head[at:at + 8] != LVM_LABEL or head[at + 24:at + 32] != LVM_TYPE:
            continue
        pvh = at + _u32le(head, at + 20)  # offset_xl: the pv_header, from the label's start
        pos = pvh + 32  # after the PV uuid
        device_size = _u64le(head, pos)
        pos += 8
        areas: list[list[tuple[int, int]]] = [[], []]  # data areas, then metadata areas, each 0-terminated
        for lst in areas:
            while pos + 16 <= len(head):
                off, size = _u64le(head, pos), _u64le(head, pos + 8)
                pos += 16
                if off == 0:
                    break
                lst.append((off, size))
        if not areas[0]:
            raise StackError("an LVM2 label without a data area")
        return PvLabel(sector, device_size, areas[0][0][0], tuple(areas[1]))
    return None


def vg_metadata_text(read: Reader, mda_offset: int) -> str:
    """The current VG metadata text from the metadata area at ``mda_offset`` (a circular buffer: the text
    may wrap to just after the 512-byte mda_header)."""
    hdr = read(mda_offset, SECTOR)
    if hdr[4:20] != MDA_MAGIC:
        raise StackError("the LVM2 metadata area has no mda_header")
    mda_size = _u64le(hdr, 32)
    off, size = _u64le(hdr, 40), _u64le(hdr, 48)
    if size == 0:
        return ""  # a PV in no VG yet
    if size > 16 << 20 or off >= mda_size:
        raise StackError("the LVM2 metadata pointer is out of its area")
    first = min(size, mda_size - off)
    text = read(mda_offset + off, first)
    if first < size:
        text += read(mda_offset + SECTOR, size - first)
    return text.rstrip(b"\0").decode("utf-8", "replace")


@value
class VgFacts:
    """What an LVM volume group's metadata says about extents and stripes."""
    name: str
    extent_size: int  # bytes
    stripes: tuple[tuple[str, int, int], ...]  # (lv name, stripe count, stripe size in bytes)


def parse_vg_metadata(text: str) -> VgFacts | None:
    import re  # here: `check` of a disk with no LVM on it imports no re (~2 ms with enum)

    m = re.search(r"^(\S+) \{", text, re.M)
    ext = re.search(r"^\s*extent_size = (\d+)", text, re.M)
    if m is None or ext is None:
        return None
    stripes: list[tuple[str, int, int]] = []
    lvs = text.find("logical_volumes {")
    if lvs >= 0:
        lv = ""
        for line in text[lvs:].splitlines():
            s = line.strip()
            if s.endswith("{") and not s.startswith("segment") and s != "logical_volumes {":
                lv = s[:-1].strip()
            count = re.match(r"stripe_count = (\d+)", s)
            if count:
                stripes.append((lv, int(count.group(1)), 0))
            size = re.match(r"stripe_size = (\d+)", s)
            if size and stripes:
                name, n, _ = stripes[-1]
                stripes[-1] = (name, n, int(size.group(1)) * SECTOR)
    return VgFacts(m.group(1), int(ext.group(1)) * SECTOR, tuple(s for s in stripes if s[1] > 1))


def lvm_layer(label: PvLabel, vg: VgFacts | None) -> Layer:
    facts = [("pe_start", f"{label.pe_start} B"), ("label sector", str(label.sector))]
    stripe = count = 0
    if vg is not None:
        facts += [("volume group", vg.name), ("extent size", f"{vg.extent_size} B")]
        for lv, n, size in vg.stripes:
            facts.append((f"LV {lv}", f"{n} stripes of {size} B"))
            stripe, count = max(stripe, size), max(count, n)
    return Layer("lvm2-pv", label.pe_start, stripe, 0, tuple(facts),
                 "pvcreate --dataalignment SIZE [--dataalignmentoffset OFF] DEV",
                 devices=count, extent=vg.extent_size if vg is not None else 0)


# --- md RAID 1.x ----------------------------------------------------------------------------------------


MD_MAGIC = 0xA92B4EFC


@value
class MdSuper:
    """An md RAID superblock's facts about its layout."""
    minor: int  # 0, 1 or 2: where the superblock sits
    level: int
    layout: int
    chunk: int  # bytes
    raid_disks: int
    data_offset: int  # bytes, from the start of the member device
    data_size: int  # bytes
    name: str


def md_super_offsets(size: int) -> dict[int, int]:
    """Where md 1.x puts its superblock on a member of ``size`` bytes: 1.1 at 0, 1.2 at 4 KiB, 1.0 at
    8 KiB before the end rounded down to 4 KiB (md_p.h, ``MD_NEW_SIZE_SECTORS`` for 1.0)."""
    end = ((size // SECTOR - 16) & ~7) * SECTOR if size >= 16 * SECTOR else -1
    return {1: 0, 2: 4096, 0: end}


def md_csum(sb: bytes) -> int:
    """``calc_sb_1_csum``: the 32-bit little-endian words of the superblock and its dev_roles, with the
    checksum field as zero, summed in 64 bits and folded."""
    max_dev = _u32le(sb, 220)
    size = 256 + 2 * max_dev
    data = bytearray(sb[:size])
    data[216:220] = b"\0\0\0\0"
    total: int = sum(struct.unpack_from(f"<{size // 4}I", data))
    return (total & 0xFFFFFFFF) + (total >> 32) & 0xFFFFFFFF


def parse_md_super(sb: bytes, minor: int) -> MdSuper | None:
    if len(sb) < 256 or _u32le(sb, 0) != MD_MAGIC:
        return None
    if _u32le(sb, 4) != 1:
        raise StackError(f"md superblock version {_u32le(sb, 4)}, not 1.x")
    if len(sb) >= 256 + 2 * _u32le(sb, 220) and md_csum(sb) != _u32le(sb, 216):
        raise StackError("md superblock checksum does not match")
    level = struct.unpack_from("<i", sb, 72)[0]
    name = sb[32:64].rstrip(b"\0").decode("utf-8", "replace")
    return MdSuper(minor, level, _u32le(sb, 76), _u32le(sb, 88) * SECTOR, _u32le(sb, 92),
                   _u64le(sb, 128) * SECTOR, _u64le(sb, 136) * SECTOR, name)


STRIPED_LEVELS = (0, 4, 5, 6, 10)  # md levels whose array bytes are spread in chunks over the members
PARITY = {4: 1, 5: 1, 6: 2}


def md_data_disks(level: int, raid_disks: int, layout: int = 0x102) -> int:
    """How many chunks of distinct data one stripe row holds: raid_disks less the parity (RAID4/5/6); for
    RAID10 (``layout`` bits 0-7 near copies, 8-15 far copies, bit 16 offset) the disks over the near copies,
    or every disk in the far layout (its first copy is a RAID0 over all of them); 0 when not striped or
    when the layout is one this arithmetic does not cover (offset, or near copies not dividing the disks)."""
    if level in (0, 4, 5, 6):
        return raid_disks - PARITY.get(level, 0)
    near, far = max(1, layout & 0xFF), max(1, (layout >> 8) & 0xFF)
    if level != 10 or layout & 0x10000 or (near > 1 and far > 1):
        return 0
    if far > 1:
        return raid_disks
    return raid_disks // near if raid_disks % near == 0 else 0


def md_layer(md: MdSuper) -> Layer:
    striped = md.level in STRIPED_LEVELS
    data = md_data_disks(md.level, md.raid_disks, md.layout) if striped else 0
    facts = (("metadata", f"1.{md.minor}"), ("level", f"raid{md.level}"), ("devices", str(md.raid_disks)),
             ("chunk", f"{md.chunk} B"), ("data offset", f"{md.data_offset} B"), ("name", md.name))
    return Layer("md", md.data_offset, md.chunk if striped else 0, md.chunk * data if data else 0, facts,
                 "mdadm --create ... --data-offset=SIZE --chunk=SIZE", level=md.level, devices=md.raid_disks)


# --- LUKS -----------------------------------------------------------------------------------------------


LUKS_MAGIC = b"LUKS\xba\xbe"


def parse_luks(head: bytes, read: Reader | None = None) -> Layer | None:
    """A LUKS1 or LUKS2 header at the start of ``head`` (LUKS2 needs its JSON area: ``read``)."""
    if head[:6] != LUKS_MAGIC:
        return None
    version = struct.unpack_from(">H", head, 6)[0]
    if version == 1:
        payload = struct.unpack_from(">I", head, 104)[0] * SECTOR
        cipher = head[8:40].rstrip(b"\0").decode("ascii", "replace")
        mode = head[40:72].rstrip(b"\0").decode("ascii", "replace")
        facts: tuple[tuple[str, str], ...] = (("version", "1"), ("payload offset", f"{payload} B"),
                                              ("cipher", f"{cipher}-{mode}"))
        return Layer("luks1", payload, 0, 0, facts, "cryptsetup luksFormat --type luks1 --align-payload SECTORS")
    if version == 2:
        hdr_size = struct.unpack_from(">Q", head, 8)[0]
        if not 4096 < hdr_size <= 4 << 20:
            raise StackError(f"a LUKS2 header size of {hdr_size} B")
        area = head[4096:hdr_size] if len(head) >= hdr_size or read is None else read(4096, hdr_size - 4096)
        try:
            import json  # here, not at the top: only a LUKS2 header needs it, and check --json pays for the import

            meta = json.loads(area.split(b"\0", 1)[0])
            seg = min(meta["segments"].values(), key=lambda s: int(s["offset"]))
            payload = int(seg["offset"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StackError(f"the LUKS2 JSON area cannot be read: {exc}") from exc
        sector_size = int(seg.get("sector_size", 512))
        facts = (("version", "2"), ("payload offset", f"{payload} B"), ("encryption sector", f"{sector_size} B"),
                 ("cipher", str(seg.get("encryption", ""))))
        return Layer("luks2", payload, 0, 0, facts, "cryptsetup luksFormat --type luks2 --offset SECTORS "
                     "(or cryptsetup reencrypt to move it)")
    raise StackError(f"LUKS version {version}")


# --- filesystems ------------------------------------------------------------------------------------


def parse_ext4(sb: bytes) -> Layer | None:
    """The ext2/3/4 superblock (``sb`` = the 1024 bytes at offset 1024)."""
    if len(sb) < 0x174 or struct.unpack_from("<H", sb, 56)[0] != 0xEF53:
        return None
    block = 1024 << _u32le(sb, 24)
    stride = struct.unpack_from("<H", sb, 0x164)[0]
    width = _u32le(sb, 0x170)
    facts = (("block size", f"{block} B"), ("RAID stride", f"{stride} blocks"),
             ("RAID stripe width", f"{width} blocks"))
    return Layer("ext4", 0, stride * block, width * block, facts,
                 "tune2fs -E stride=N,stripe_width=M DEV (N = chunk / block, M = N x data disks)")


def parse_xfs(sb: bytes) -> Layer | None:
    if len(sb) < 192 or sb[:4] != b"XFSB":
        return None
    block = struct.unpack_from(">I", sb, 4)[0]
    unit, width = struct.unpack_from(">II", sb, 184)
    facts = (("block size", f"{block} B"), ("sunit", f"{unit} blocks"), ("swidth", f"{width} blocks"))
    return Layer("xfs", 0, unit * block, width * block, facts,
                 "mkfs.xfs -d su=CHUNK,sw=DATA_DISKS (a new filesystem), or mount -o sunit=,swidth=")


# --- the walk -----------------------------------------------------------------------------------------


MAX_DEPTH = 4  # partition -> md -> LVM -> LUKS -> filesystem is as deep as real stacks go


def walk(read: Reader, size: int) -> tuple[Layer, ...]:
    """Every layer from the start of a partition (or disk) of ``size`` bytes down to the first one whose
    content cannot be read (an encrypted payload, a filesystem). ``read(offset, length)`` reads from that
    start; short reads past the end are fine. On a member of a striped md array only the layer at the
    array's start is read (its header lies in the array's first chunk, on this member as on the array);
    what that layer's data offset points to lies in another stripe row, elsewhere on this member or on
    another one, so the walk stops there."""
    layers: list[Layer] = []
    base = 0
    striped = False  # inside a striped md array: only its first chunk lies on this member as it does there
    while len(layers) < MAX_DEPTH and base < size:
        def at(off: int, n: int, b: int = base) -> bytes:
            return read(b + off, n)

        try:
            layer = _one(at, size - base)
        except (struct.error, ValueError, KeyError, TypeError, OverflowError) as exc:
            if isinstance(exc, StackError):
                raise
            raise StackError(f"a header that does not hold together: {exc}") from exc
        if layer is None:
            break
        layers.append(layer)
        if layer.kind in ("luks1", "luks2", "ext4", "xfs") or layer.data_offset <= 0 or striped:
            break  # encrypted, a filesystem, or past a striped array's first chunk: nothing more to read here
        striped = layer.kind == "md" and layer.full_stripe > 0
        base += layer.data_offset
    return tuple(layers)


def _one(read: Reader, size: int) -> Layer | None:
    head = read(0, 8192)
    if len(head) < 1024:
        return None
    label = parse_pv_label(head)
    if label is not None:
        vg = None
        for off, _ in label.metadata_areas[:1]:
            try:
                vg = parse_vg_metadata(vg_metadata_text(read, off))
            except StackError:
                vg = None
        return lvm_layer(label, vg)
    luks = parse_luks(head, read)
    if luks is not None:
        return luks
    for minor, off in md_super_offsets(size).items():
        if off < 0:
            continue
        sb = head[off:off + 4096] if off + 4096 <= len(head) else read(off, 4096)
        md = parse_md_super(sb, minor)
        if md is not None:
            return md_layer(md)
    return parse_xfs(head) or parse_ext4(head[1024:2048])
