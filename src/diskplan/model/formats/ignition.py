"""A plan as an Ignition config (spec v3.4.0): ``storage.disks[].partitions``, where the plan fits, and otherwise
the exact reason it does not.

Ignition partitions GPT disks only (it runs sgdisk) and counts in MiB: ``startMiB`` and ``sizeMiB`` are whole
mebibytes, 0 meaning "the start of the largest free block" and "as large as possible"; it has no percentages,
no sizes from the end and no attribute bits. So a plan fits when every start and size is whole MiB and no
partition has a flag; a relative plan fits without percentages, with its "rest" last.
"""

from __future__ import annotations

from diskplan.model.extent import Partition
from diskplan.model.formats.jsontext import as_text
from diskplan.model.formats.planfile import PlanFileError, PlanSpec

VERSION = "3.4.0"
MiB = 1 << 20


class IgnitionError(PlanFileError):
    def __init__(self, why: str) -> None:
        super().__init__(f"Ignition cannot express this plan: {why}")


def _mib(sectors: int, ss: int, what: str) -> int:
    n = sectors * ss
    if n % MiB:
        raise IgnitionError(f"{what} is {n} bytes, not a whole MiB (Ignition counts in MiB)")
    return n // MiB


def _entry(p: Partition, start_mib: int | None, size_mib: int) -> dict[str, object]:
    if p.flags:
        raise IgnitionError(f"partition {p.number} has the attribute {', '.join(p.flags)}, and Ignition's "
                            "partitions carry no attribute bits")
    entry: dict[str, object] = {"number": p.number, "label": p.name, "sizeMiB": size_mib}
    if start_mib is not None:
        entry["startMiB"] = start_mib
    entry["typeGuid"] = p.type.lower()
    return entry


def ignition_config(spec: PlanSpec, device: str) -> dict[str, object]:
    """The config as a JSON value. Raises IgnitionError (a PlanFileError) when the plan does not fit."""
    if spec.label != "gpt":
        raise IgnitionError(f"it is a {spec.label} plan, and Ignition writes GPT only")
    ss = spec.sector_size
    if spec.relative is None:
        parts = [_entry(p, _mib(p.start, ss, f"partition {p.number}'s start"),
                        _mib(p.size, ss, f"partition {p.number}'s size"))
                 for p in sorted(spec.partitions, key=lambda p: p.start)]
    else:
        parts = []
        for i, w in enumerate(spec.relative):
            if w.size.percent is not None:
                raise IgnitionError(f"{w.where} asks for {w.size.text}, and Ignition sizes are MiB (or 0: as "
                                    "large as possible), never a share of the disk")
            if w.size.rest and i + 1 < len(spec.relative):
                raise IgnitionError(f"{w.where} takes the rest before {spec.relative[i + 1].where}; Ignition's "
                                    "sizeMiB 0 takes all the space to the end, and it cannot place a partition "
                                    "from the end of the disk")
            start = None if w.start is None else _mib(w.start, ss, f"{w.where}'s start")
            size = 0 if w.size.sectors is None else _mib(w.size.sectors, ss, f"{w.where}'s size")
            parts.append(_entry(w.part, start, size))
    disk = {"device": device, "wipeTable": True, "partitions": parts}
    return {"ignition": {"version": VERSION}, "storage": {"disks": [disk]}}


def to_ignition(spec: PlanSpec, device: str) -> str:
    return as_text(ignition_config(spec, device)) + "\n"
