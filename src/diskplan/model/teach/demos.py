"""Built-in demo disks: the experiments behind diskplan (README "Where the numbers come from") rebuilt
as partition tables.

Pure definitions. ``backend.demo_image`` writes a scenario to a sparse image with libparted; the
planner then reads it back like any disk and dresses it with what the image cannot report (the
declared physical block, the I/O hints, the drive's model) via ``Scenario.dress``.
"""

from __future__ import annotations

from diskplan.model.disk import Disk
from diskplan.model.extent import Partition
from diskplan.model.formats.lvmformat import StripedVg, pv_header_pieces
from diskplan.model.geometry import Geometry
from diskplan.model.ptypes import LINUX_FS_GUID
from diskplan.model.stack import Layer, walk
from diskplan.model.table import Table, new_table, no_table
from diskplan.model.value import field, replace, value

LINUX = LINUX_FS_GUID
ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
SWAP = "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
HOME = "933AC7E1-2EB4-4F13-B844-0E14E2AEF915"


@value
class Scenario:
    name: str
    title: str  # one line
    lesson: tuple[str, ...]  # what the experiment measured and what to look at, in plain words
    sectors: int
    label: str | None
    partitions: tuple[Partition, ...] = ()
    logical: int = 512
    physical: int = 512  # what the drive has (declared for the image: files report 512)
    optimal_io: int = 0
    min_io: int = 0
    rotational: bool | None = None
    model: str = ""
    scheduler: str | None = None
    pv: StripedVg | None = None  # an LVM2 PV whose real headers the demo image carries
    pv_on: int = 0  # the partition holding that PV, 0 for the whole disk
    experiment: str = ""  # which measured experiment this rebuilds (README "Where the numbers come from")
    aliases: tuple[str, ...] = field(default=())

    @property
    def needs_loop(self) -> bool:
        """An image file always reads as 512-byte sectors; other sizes need a loop device."""
        return self.logical != 512

    def geometry(self) -> Geometry:
        return Geometry(
            sectors=self.sectors,
            logical=self.logical,
            physical=self.physical,
            optimal_io=self.optimal_io,
            min_io=self.min_io,
            rotational=self.rotational,
            scheduler=self.scheduler,
            model=self.model,
        )

    def planned_table(self) -> Table:
        geom = self.geometry()
        if self.label is None:
            return no_table(geom)
        return new_table(self.label, geom).with_partitions(self.partitions)

    def planned_disk(self) -> Disk:
        """The scenario as the model sees it, without writing anything (also the fallback when an
        image cannot be built, e.g. a 4Kn disk without root)."""
        disk = Disk(self.geometry(), self.planned_table(), source=f"demo:{self.name}", kind="demo")
        if self.pv is None:
            return disk
        return replace(disk, stacks=((self.pv_on, self.pv_stack()),))

    def pv_pieces(self) -> list[tuple[int, bytes]]:
        """(absolute byte offset, bytes) of the PV headers the image carries (empty without a PV)."""
        if self.pv is None:
            return []
        start = 0
        if self.pv_on:
            start = next(p.start for p in self.partitions if p.number == self.pv_on) * self.logical
        return [(start + off, data) for off, data in pv_header_pieces(self.pv, 0)]

    def pv_stack(self) -> tuple[Layer, ...]:
        """The layers the model reads from those headers, as backend.read.stack reads them from the image."""
        assert self.pv is not None
        head = bytearray(self.pv.pe_start)
        for off, data in pv_header_pieces(self.pv, 0):
            head[off:off + len(data)] = data
        return walk(lambda off, n: bytes(head[off:off + n]), self.pv.pv_size)

    def dress(self, disk: Disk) -> Disk:
        """Add what an image or loop device cannot report to a disk read back from this scenario."""
        geom = replace(
            disk.geometry,
            physical=max(self.physical, disk.geometry.physical),
            optimal_io=self.optimal_io or disk.geometry.optimal_io,
            min_io=self.min_io or disk.geometry.min_io,
            rotational=self.rotational,
            scheduler=self.scheduler,
            model=self.model,
        )
        return replace(disk, geometry=geom, source=f"demo:{self.name}", kind="demo")


def _p(number: int, start: int, end: int, name: str = "", type_: str = LINUX) -> Partition:
    return Partition(number=number, start=start, end=end, type=type_, name=name)


def _mib_floor(lba: int, logical: int = 512) -> int:
    """The last sector before the 1 MiB boundary at or below ``lba + 1``: a whole-MiB partition end."""
    per = (1 << 20) // logical
    return (lba + 1) // per * per - 1


_SSD_SECTORS = 500118192  # Crucial M4 256 GB, from the fio experiment's parted print
_AF_SECTORS = 3907029168  # a 2 TB drive
_DOS_SECTORS = 1875448317  # OCZ RevoDrive3 X2 960 GB, from the pg_test_fsync experiment's fdisk -l
_DOS_CYLINDER_END = 116741 * 16065 - 1  # its partition's end there: the last of 116,741 cylinders
_KN_SECTORS = 244190646  # 1 TB with 4096-byte sectors
_STRIPE_SECTORS = 2930277168  # 1.5 TB volume
_MODERN_SECTORS = 1953525168  # 1 TB
_RAID5_SECTORS = 3 * (8 << 30) // 512  # 3 data disks of 8 GiB
_LVM_SECTORS = 12_500_000_000  # 6.4 TB: the experiment's partitions end at 6390GB
_EMPTY_SECTORS = 134217728  # 64 GiB

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="ssd-gpt-34",
        title="SSD with a GPT partition from sector 34: sequential 4 KiB writes 19x slower",
        lesson=(
            "parted let the user start at 34s, the first sector after the GPT entries "
            "(`mkpart UnAlign 34s 100%`, warning ignored).",
            "The SSD (a Crucial M4 256 GB) reports 512 B logical and 512 B physical sectors, yet it writes "
            "flash pages of 4 KiB or more: it is not rotational, so diskplan judges it against a 4 KiB page.",
            "34 x 512 B = 17,408 B = 4 KiB x 4 + 1,024 B: every 4 KiB filesystem block straddles two pages.",
            "Measured with fio, sequential 4 KiB direct I/O (-rw read / -rw write, 8 jobs, iodepth 4): reads "
            "~21,400 IOPS at 34s vs 24,700-30,500 at 2048s (mean ~28,700: 1.3x); writes ~1,500 IOPS vs ~28,000 "
            "(19x).",
            "Each 4 KiB direct write is one isolated write that straddles two pages, so each pays a "
            "read-modify-write: that is why the ratio is so large here.",
            "The same SSD model under fio 4 KiB buffered I/O (CentOS 7, ext4) showed no scheduler winning "
            "everywhere: cfq best for sequential reads (62,815 vs 57,809 IOPS with noop), sequential writes within "
            "0.2% of each other, random writes within 3.6%; few, short, buffered runs, so indicative only. "
            "The facts panel shows this disk's schedulers.",
            "Press 1 (one sector per cell) to see the partition begin between two 4 KiB page lines; "
            "0 shows the whole disk again.",
        ),
        sectors=_SSD_SECTORS,
        label="gpt",
        partitions=(_p(1, 34, _SSD_SECTORS - 34, "UnAlign"),),
        physical=512,
        rotational=False,
        model="M4-CT256M4SSD2 (demo)",
        scheduler="none",
        experiment="ssd-fio",
        aliases=("ssd", "gpt-34"),
    ),
    Scenario(
        name="dos-63",
        title="DOS-era disk: the first partition at sector 63 (PCIe SSD: 4 kB synced writes +25% aligned)",
        lesson=(
            "CentOS 5's fdisk started the first partition one track in, at sector 63 (63 x 512 B = 32,256 B), "
            "and ended it on a cylinder boundary: cylinders of 255 x 63 = 16,065 sectors, so the end is "
            "1,875,444,164 = 116,741 x 16,065 - 1.",
            "32,256 is not a multiple of 4,096: no 4 KiB page of the partition lines up with the flash.",
            "The fix: start at sector 2048 (1 MiB), typed into `fdisk -u`, and end on a whole MiB "
            "(1,867,775,999 = 912,000 MiB - 1); the author notes `fdisk -c -u` (no DOS compatibility) starts "
            "at 2048 by default. The later split into two halves was not for alignment: that SSD slows down "
            "past half full.",
            "Measured on an OCZ RevoDrive3 X2 with pg_test_fsync, 63s -> 2048s: 4 x 4 kB open_sync writes "
            "3,991 -> 4,989 ops/s (+25%), the clearest alignment effect; one 16 kB write + fdatasync "
            "9,700 -> 10,500 ops/s (+8%).",
            "Why not 19x as fio measured on the 34s SSD? fio's 4 KiB direct writes each straddle two pages "
            "and pay the read-modify-write alone; a 16 kB write followed by a flush spends most of its time "
            "in the flush, and only its edges are misaligned.",
        ),
        sectors=_DOS_SECTORS,
        label="msdos",
        partitions=(_p(1, 63, _DOS_CYLINDER_END, type_="0x83"),),
        physical=512,
        rotational=False,
        model="OCZ RevoDrive3 X2 (demo)",
        scheduler="none",
        experiment="pg-fsync",
        aliases=("dos", "msdos", "63"),
    ),
    Scenario(
        name="advanced-format",
        title="512e Advanced Format HDD: one partition at 17.4 kB, one at 1 MiB (bonnie++ 2.6x)",
        lesson=(
            "An 'Advanced Format' drive stores 4096-byte physical sectors but shows 512-byte logical ones "
            "(512e), so a start at 34s is legal and still misaligned.",
            "Partition 1 is what `parted mkpart a 0 1MiB` gives: 34s, which `parted print` shows as 17.4kB, "
            "and parted warns. Partition 2 starts at 2048s, which `parted print` shows as 1049kB "
            "(2048 x 512 B = 1,048,576 B); `align-check opt 2` says aligned. A 512e disk reports a minimum I/O "
            "of 4096 B, so even `align-check min 1` says `1 not aligned: 34s % 8s != 0s`.",
            "On an empty disk `mkpart b 0% 100%` lands on 2048s only because parted's default alignment is "
            "`-a optimal`: 0% accepts any start within half a percent of the disk and optimal alignment picks the "
            "1 MiB boundary in it; with `-a none` the same command starts at 34s, with `-a minimal` at 40s (the "
            "first 4 KiB physical block after the GPT; 34s on a 512/512 disk). With partition 1 already at "
            "34s, parted refuses 0% (\"Unable to satisfy all constraints on the partition\"). `1MiB` is 2048s "
            "exactly; `1MB` (1,000,000 B = 1953.125s) becomes 2048s through the same window (half a unit, "
            "500 kB) and -a optimal.",
            "Measured with bonnie++ on 2 TB AF drives: misaligned file creation up to 2.6x slower, random "
            "deletes 1.6x, while sequential throughput barely changed: what pays is the size of each I/O, not "
            "whether it is sequential. Metadata work is many small writes that each pay a read-modify-write; "
            "bonnie++'s sequential phase writes large I/Os that pay it only at their edges (the SSD's sequential "
            "4 KiB direct writes, each small, paid 19x).",
            "On a hard disk with true 512-byte sectors the same 17.4 kB start costs nothing; an SSD that "
            "reports 512/512 still pays (see the ssd-gpt-34 demo): flash pages are 4 KiB or more.",
        ),
        sectors=_AF_SECTORS,
        label="gpt",
        partitions=(
            _p(1, 34, 2047, "at-17.4kB"),
            _p(2, 2048, _mib_floor(_AF_SECTORS - 34), "at-1MiB"),
        ),
        physical=4096,
        min_io=4096,  # what a 512e drive reports in queue/minimum_io_size: its physical block
        rotational=True,
        model="2 TB Advanced Format HDD (demo)",
        scheduler="mq-deadline",
        experiment="af-bonnie",
        aliases=("af", "512e", "hdd"),
    ),
    Scenario(
        name="4kn",
        title="4Kn disk: 4096-byte logical sectors, where 1 MiB is 256 sectors",
        lesson=(
            "Every LBA of a 4Kn disk is a whole 4096-byte physical block: a start can miss the 1 MiB grain "
            "but can never straddle a physical block.",
            "Sector numbers mean 8x more bytes: 1 MiB = 256s, the GPT entries end at LBA 5 (first usable 6), "
            "and a script that hard-codes 512-byte numbers like 34s lands at 136 KiB (partition 1).",
            "Tools that assume 512-byte sectors get sizes wrong by 8x (disko #497). diskplan reads the "
            "sector size from the device; image files need a loop device made with --sector-size 4096.",
        ),
        sectors=_KN_SECTORS,
        label="gpt",
        logical=4096,
        partitions=(
            _p(1, 34, 255, "script-34s"),
            _p(2, 256, 131327, "EFI", ESP),
            _p(3, 131328, _mib_floor(_KN_SECTORS - 6, 4096), "root"),
        ),
        physical=4096,
        rotational=False,
        model="1 TB 4Kn SSD (demo)",
        scheduler="none",
        aliases=("4k", "4kn-disk"),
    ),
    Scenario(
        name="stripe",
        title="Striped volume: optimal I/O 196,608 B (192 KiB) is not a divisor of 1 MiB",
        lesson=(
            "A RAID 5 of four disks with 64 KiB chunks reports minimum I/O 64 KiB and optimal I/O "
            "192 KiB (three data chunks: one full stripe).",
            "fdisk's grain is max(optimal I/O, 1 MiB) = 1 MiB, so it starts at 2048s (partition 1): "
            "1,048,576 mod 196,608 = 65,536, so full-stripe writes straddle two stripes and the RAID "
            "must read old data and parity to recompute parity: a read-modify-write (util-linux #688).",
            "parted -a optimal uses the 192 KiB optimal I/O size itself (384s), since 1 MiB is not a multiple "
            "of it; diskplan's grain is lcm(1 MiB, 192 KiB) = 3 MiB = 6144s, on both. Partition 2 starts on it.",
            "A 1 MiB start suits an 8 KiB stripe (an LVM stripe, no parity) because 8 KiB divides 1 MiB; "
            "192 KiB does not. The LVM experiment (two PCIe SSDs, 8 KiB stripes, six parallel dd direct writes: "
            "2.9 GB/s with PVs on whole disks, 5.9 GB/s on partitions) is not explained by that arithmetic: both "
            "layouts put extent 0 on 8 KiB boundaries (demos lvm-whole-disk and lvm-partition).",
        ),
        sectors=_STRIPE_SECTORS,
        label="gpt",
        partitions=(
            _p(1, 2048, 209717247, "fdisk-1MiB"),
            _p(2, 209719296, (_STRIPE_SECTORS - 34 + 1) // 6144 * 6144 - 1, "lcm-3MiB"),
        ),
        optimal_io=196608,
        min_io=65536,
        rotational=True,
        model="RAID 5 volume, 4 x 64 KiB chunks (demo)",
        scheduler="mq-deadline",
        experiment="lvm-stripe",
        aliases=("raid", "striped"),
    ),
    Scenario(
        name="lvm-whole-disk",
        title="LVM stripe over two SSDs, PVs on whole disks: 2.9 GB/s in the experiment",
        lesson=(
            "Two PCIe SSDs striped with LVM: `pvcreate /dev/xxa`, `pvcreate /dev/xxb`, `vgcreate -s 128M`, "
            "`lvcreate -i 2 -I 8` (8 KiB stripes). Six parallel `dd bs=1024k oflag=direct` wrote 2.9 GB/s.",
            "This image carries the PV header pvcreate writes (`pvs -o +pe_start` reads it): extent 0 begins at "
            "pe_start = 1 MiB, today's lvm2 default, so at byte 1,048,576 of the disk; every 8 KiB stripe "
            "chunk lies on 4 KiB pages (1,048,576 mod 8,192 = 0).",
            "The experiment then put each PV on a partition from `parted -a optimal ... mkpart primary 1MB` "
            "and wrote 5.9 GB/s (demo lvm-partition). There extent 0 is at 1 MiB + 1 MiB = 2 MiB.",
            "The arithmetic: 1 MiB and 2 MiB leave the same remainder modulo every power-of-two unit up to "
            "1 MiB, and the same holds for any pe_start (older lvm2 used 192 KiB). A 1 MiB partition start "
            "cannot change where the stripes fall on pages; check pe_start with `pvs -o +pe_start` before "
            "believing a fix.",
            "The author's explanation (writes crossing a flash write unit, written twice) would need a "
            "pe_start that differed between the two runs, e.g. from hints lvm2 read from the whole disk; the "
            "experiment does not print it. Press e on the PV to walk down its layers.",
        ),
        sectors=_LVM_SECTORS,
        label=None,
        rotational=False,
        model="PCIe SSD 6.4 TB (demo)",
        scheduler="none",
        pv=StripedVg("vgdata01", _LVM_SECTORS * 512, 1 << 20, 128 << 20, 8192),
        experiment="lvm-stripe",
        aliases=("lvm", "lvm-whole"),
    ),
    Scenario(
        name="lvm-partition",
        title="LVM stripe over two SSDs, PVs on partitions from parted -a optimal 1MB: 5.9 GB/s",
        lesson=(
            "The experiment's fix: `parted -a optimal -s /dev/xxa mklabel gpt mkpart primary 1MB 6390GB`, "
            "then `pvcreate /dev/xxa1` (and xxb1), `vgcreate -s 128M`, `lvcreate -i 2 -I 8`: 5.9 GB/s, "
            "6.4 GB/s with three filesystems, 6.5 GB/s without LVM (an ext4 on each partition: the sum of the two "
            "disks).",
            "parted's `1MB` (1,000,000 B) became 2048s only through its half-unit window and -a optimal; "
            "the partition starts at byte 1,048,576.",
            "The PV header in this image: pe_start 1 MiB, so extent 0 lands at 1 MiB + 1 MiB = byte 2,097,152, "
            "on 4 KiB pages and 8 KiB stripes: 2,097,152 mod 8,192 = 0. The 128 MiB extents follow on whole MiB.",
            "Compare demo lvm-whole-disk: the data there is at 1 MiB, the same remainder modulo every power "
            "of two up to 1 MiB. By the arithmetic both layouts are aligned; the doubling needs another cause "
            "(a different pe_start, the device's hints, the runs themselves) that the experiment does not show.",
        ),
        sectors=_LVM_SECTORS,
        label="gpt",
        partitions=(_p(1, 2048, _mib_floor(6390 * 10**9 // 512), "primary"),),
        rotational=False,
        model="PCIe SSD 6.4 TB (demo)",
        scheduler="none",
        pv=StripedVg("vgdata01", (_mib_floor(6390 * 10**9 // 512) - 2048 + 1) * 512, 1 << 20, 128 << 20, 8192),
        pv_on=1,
        experiment="lvm-stripe",
        aliases=("lvm-part",),
    ),
    Scenario(
        name="lvm-raid5",
        title="LVM on an md RAID5 of 4 x 64 KiB chunks: extent 0 on a stripe, extent 1 off it",
        lesson=(
            "An md RAID5 of four disks with 64 KiB chunks: each stripe row holds 3 data chunks and one parity "
            "chunk, a full stripe of 3 × 65,536 = 196,608 B, which the array reports as its optimal I/O. A "
            "write of less than a full stripe makes md read to recompute the parity (demo stripe).",
            "pvcreate on the array reads that hint: pe_start is 1 MiB rounded up to a multiple of 196,608 = "
            "1,179,648 = 6 full stripes, so extent 0 begins on a stripe. That is LVM aligning itself, not a fault.",
            "vgcreate's default extent is 4 MiB, and 4,194,304 mod 196,608 = 65,536: extent 1 begins at "
            "1,179,648 + 4,194,304 = 5,373,952, 64 KiB into stripe 27; extent 2 128 KiB into one; only every "
            "third extent (0, 3, 6 ...) begins on a stripe. An LV that begins on extent 1 (the VG's second LV, "
            "or a filesystem told the array's stripe) has every full-stripe write split over two stripes.",
            "Plan it: S on the disk (or `diskplan stack`) prints vgcreate -s 4325376B, 22 full stripes and not "
            "a power of 2 (vgcreate takes that from 128 KiB up): extent 1 then begins at 5,505,024 = 28 stripes. "
            "Seen in a virtual-machine run of md RAID5 with LVM on it; mdadm, pvcreate and vgcreate were the "
            "real tools there.",
        ),
        sectors=_RAID5_SECTORS,
        label=None,
        optimal_io=196608,
        min_io=65536,
        rotational=True,
        model="md RAID5 array, 4 x 64 KiB chunks (demo)",
        scheduler="mq-deadline",
        pv=StripedVg("vgraid", _RAID5_SECTORS * 512, 1_179_648, 4 << 20, 0, pv_count=1),
        experiment="lvm-stripe",
        aliases=("lvm-raid", "raid5"),
    ),
    Scenario(
        name="modern",
        title="Modern aligned layout: what parted -a optimal and fdisk make today",
        lesson=(
            "Every start is a multiple of 2048 sectors (1 MiB): every physical block and flash page "
            "(4-16 KiB) divides it, so no write is split; every size is whole MiB, so the next start is "
            "aligned too.",
            "1 MiB does not cover erase blocks, which are usually several MiB: the drive's firmware maps "
            "pages into them. If you know the erase block, --grain SIZE makes starts land on it too.",
            "EFI system 512 MiB, swap 16 GiB, root 100 GiB, home the rest: nothing to flag.",
            "Move the cursor over a partition: its first 4 KiB block sits in exactly one physical block.",
        ),
        sectors=_MODERN_SECTORS,
        label="gpt",
        partitions=(
            _p(1, 2048, 1050623, "EFI", ESP),
            _p(2, 1050624, 34605055, "swap", SWAP),
            _p(3, 34605056, 244320255, "root"),
            _p(4, 244320256, _mib_floor(_MODERN_SECTORS - 34), "home", HOME),
        ),
        physical=4096,
        rotational=False,
        model="1 TB NVMe SSD (demo)",
        scheduler="none",
        aliases=("aligned", "good"),
    ),
    Scenario(
        name="empty",
        title="Empty disk: no partition table yet",
        lesson=(
            "A blank 64 GiB disk: no label, every sector free.",
            "fdisk, sfdisk and `parted -a optimal` would all start the first partition at 2048s (1 MiB), "
            "the first boundary of the 1 MiB grain after the table.",
        ),
        sectors=_EMPTY_SECTORS,
        label=None,
        physical=4096,
        rotational=False,
        model="64 GiB blank disk (demo)",
        aliases=("blank", "new"),
    ),
)

DEFAULT = SCENARIOS[0].name


def names() -> list[str]:
    return [s.name for s in SCENARIOS]


def find(name: str) -> Scenario:
    """The scenario called ``name`` (or one of its aliases, or an unambiguous prefix)."""
    key = name.strip().lower()
    for s in SCENARIOS:
        if key == s.name or key in s.aliases:
            return s
    matches = [s for s in SCENARIOS if s.name.startswith(key)]
    if len(matches) == 1:
        return matches[0]
    raise KeyError(f"no demo called {name!r}; choose one of: {', '.join(names())}")
