"""A disk as read: its geometry, its table, and what the reader had to say about it."""

from __future__ import annotations

from diskplan.model.geometry import Geometry
from diskplan.model.table import Table
from diskplan.model.value import field, replace, value

TYPE_CHECKING = False  # typing is not imported on `check`'s path (~3.5 ms)
if TYPE_CHECKING:  # only named here: a libparted reader's child builds a Disk without importing them
    from diskplan.model.findings.placement import Finding
    from diskplan.model.plan.repair import GptRepair
    from diskplan.model.stack import Layer


# Whole-disk contents that are not filesystems (blkid's names): said as what they are.
_NOT_FILESYSTEMS = {"LVM2_member": "an LVM2 physical volume", "lvm2 pv": "an LVM2 physical volume",
                    "linux_raid_member": "an md RAID member", "crypto_LUKS": "a LUKS container",
                    "swap": "swap space", "linux-swap(v1)": "swap space", "linux-swap(v0)": "swap space"}


def content_phrase(name: str) -> str:
    """What a whole-disk content is, with its article: "an ext4 filesystem", "an LVM2 physical volume"."""
    if name in _NOT_FILESYSTEMS:
        return _NOT_FILESYSTEMS[name]
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name} filesystem"


@value
class Disk:
    """A disk as read: its geometry, its table, and what the reader had to say about it."""
    geometry: Geometry
    table: Table
    source: str = ""  # path the user gave
    kind: str = "file"  # "file", "block", "demo"
    filesystem: str = ""  # a filesystem found on the whole disk (no table)
    messages: tuple[str, ...] = field(default=())  # what libparted or our own checks said while reading
    # What the reader found about the table itself (damage, hybrid MBR, unreadable label): stable codes
    # from model.findings.tablefindings; ``partition`` set when one partition is concerned.
    findings: tuple[Finding, ...] = field(default=())
    views: tuple[Table, ...] = field(default=())  # other readings of the same sectors: a hybrid MBR's half
    repair: GptRepair | None = None  # a repair the plan can offer (nothing is written until commit)
    # What sits inside each partition (number -> layers, 0 for a table-less disk): LVM, md, LUKS, a
    # filesystem's stripe hints (model.stack); read by backend.read.stack, read-only.
    stacks: tuple[tuple[int, tuple[Layer, ...]], ...] = field(default=())

    def stack(self, number: int) -> tuple[Layer, ...]:
        # The number -> layers index is made on the first call and kept (a report asks once per partition:
        # made each time it was O(n^2) over the partitions). Kept outside the fields: equality, hashing,
        # repr and replace() see only ``stacks``.
        index = self.__dict__.get("_stack_index")
        if index is None:
            index = self.__dict__["_stack_index"] = dict(self.stacks)
        layers: tuple[Layer, ...] = index.get(number, ())
        return layers

    def with_geometry(self, geometry: Geometry) -> Disk:
        return replace(self, geometry=geometry)
