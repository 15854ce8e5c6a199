"""A plan as an Ansible playbook of ``community.general.parted`` tasks, one per partition.

The module runs ``parted -s -m -a ALIGN DEV -- unit KiB mkpart TYPE [FS] START END`` for a partition number
that does not exist yet, then sets its name and flags *by that number*; parted gives a new partition the lowest
free number, so the plan's numbers must be the ones parted gives (1, 2, 3... in the order of the tasks).

A plan in exact sectors is written in sectors with ``align: none``. A relative plan is written in parted's
positions with parted's own alignment (``-a optimal``): offsets in MiB from the start (``513MiB``),
percentages (``50%``: a plan's percentages of the usable space, summed) and offsets from the end (``-4097MiB``:
the partitions after the rest). A position that is a percentage *plus* an offset has no parted form, and is
refused with the partition it concerns. Types are set as parted 3.5 sets them (a filesystem type or a flag,
as ``--format parted`` does); a type or attribute it cannot set is a ``#`` comment.
"""

from __future__ import annotations

import json
from fractions import Fraction

from diskplan.model import ptypes
from diskplan.model.extent import Partition, Role
from diskplan.model.formats import planfile
from diskplan.model.formats.planfile import PlanFileError, PlanSpec
from diskplan.model.plan import relplan
from diskplan.model.value import value

MiB = 1 << 20


class AnsibleError(PlanFileError):
    def __init__(self, why: str) -> None:
        super().__init__(f"ansible's parted module cannot express this plan: {why}")


@value
class _Task:
    part: Partition
    start: str
    end: str


def _q(text: str) -> str:
    """A YAML scalar: JSON's double-quoted strings are YAML's too."""
    return json.dumps(text)


def _mib(sectors: int, ss: int, where: str) -> int:
    n = sectors * ss
    if n % MiB:
        raise AnsibleError(f"{where} is {n} bytes, not a whole MiB: parted's -a optimal positions are MiB")
    return n // MiB


def _fixed_tasks(spec: PlanSpec) -> list[_Task]:
    order = sorted(spec.partitions, key=lambda p: (p.role is Role.LOGICAL, p.start if p.role is Role.LOGICAL
                                                   else p.number))
    return [_Task(p, f"{p.start}s", f"{p.end}s") for p in order]


def _relative_tasks(spec: PlanSpec, wants: tuple[relplan.Want, ...]) -> list[_Task]:
    """Each boundary as a parted position: from the start (MiB, or a percentage while only percentages came
    before), or from the end for the partitions after the rest."""
    ss = spec.sector_size
    tasks: list[_Task] = []
    at_mib: int | None = 1  # the cursor in MiB from the start, or None after a percentage
    at_pct: Fraction | None = Fraction(0)  # the cursor as a percentage, or None after an offset
    rest = next((i for i, w in enumerate(wants) if w.size.rest), None)
    for i, w in enumerate(wants):
        if rest is not None and i > rest:
            tasks.append(_Task(w.part, _from_end(wants, i, ss), _from_end(wants, i + 1, ss)))
            continue
        if w.start is not None:
            at_mib, at_pct = _mib(w.start, ss, f"{w.where}'s start"), None
        start = _pct(at_pct) if at_pct is not None else f"{at_mib}MiB"
        if w.size.rest:
            end = _from_end(wants, i + 1, ss)
        elif w.size.percent is not None:
            if at_pct is None:
                raise AnsibleError(f"{w.where} ({w.size.text}) ends a percentage of the disk after an offset in MiB, "
                                   "and a parted position is a percentage or an offset, not their sum")
            at_pct, at_mib = at_pct + w.size.percent, None
            end = _pct(at_pct)
        else:
            assert w.size.sectors is not None
            if at_mib is None:
                raise AnsibleError(f"{w.where} ({w.size.text}) ends a fixed size after a percentage of the disk, "
                                   "and a parted position is a percentage or an offset, not their sum")
            at_mib, at_pct = at_mib + _mib(w.size.sectors, ss, f"{w.where}'s size"), None
            end = f"{at_mib}MiB"
        tasks.append(_Task(w.part, start, end))
    return tasks


def _pct(value: Fraction) -> str:
    return f"{float(value):g}%"


def _from_end(wants: tuple[relplan.Want, ...], i: int, ss: int) -> str:
    """Where partition ``i`` of the tail after the rest starts, from the end: the tail fills up to the last
    MiB boundary (parted's 100%), each partition but the last up to the next MiB."""
    if i >= len(wants):
        return "100%"
    sizes = []
    for w in wants[i:]:
        if w.size.sectors is None or w.start is not None:
            raise AnsibleError(f"{w.where} comes after the rest, and only fixed sizes can be placed from the end")
        sizes.append(_mib(w.size.sectors, ss, f"{w.where}'s size"))
    return f"-{sum(sizes) + 1}MiB"  # + the MiB the usable space ends before (GPT's backup lies in it)


def to_ansible(spec: PlanSpec, device: str) -> str:
    """A playbook (``ansible-playbook -i HOST, playbook.yml``) that partitions ``device`` as planned."""
    relative = spec.relative is not None
    tasks = _relative_tasks(spec, spec.relative) if spec.relative is not None else _fixed_tasks(spec)
    given: set[int] = set()
    logical_next = 5
    for t in tasks:
        number = logical_next if t.part.role is Role.LOGICAL else next(n for n in range(1, 1000) if n not in given)
        logical_next += t.part.role is Role.LOGICAL
        given.add(number)
        if number != t.part.number:
            raise AnsibleError(f"parted would number partition {t.part.number} as {number}, and the module then "
                               "names and flags partitions by number (renumber the plan 1, 2, 3... in disk order)")
    how = "parted's positions, -a optimal" if relative else "exact sectors, align: none"
    lines = [f"# diskplan plan: {spec.label} table, {spec.sector_size}-byte sectors ({how}).",
             "# WARNING: on a disk with another label, the first task replaces the whole partition table.",
             "# On a disk with this label, partitions already there stay: one of the same number keeps its place.",
             "- name: Partition the disk as planned by diskplan",
             "  hosts: all",
             "  gather_facts: false",
             "  vars:",
             f"    disk: {_q(device)}",
             "  tasks:"]
    for t in tasks:
        lines += _task(spec, t, relative)
    return "\n".join(lines) + "\n"


def _task(spec: PlanSpec, t: _Task, relative: bool) -> list[str]:
    p = t.part
    out = [f"    - name: {_q(f'partition {p.number}' + (f' ({p.name})' if p.name else ''))}",
           "      community.general.parted:",
           '        device: "{{ disk }}"',
           f"        label: {spec.label}",
           f"        number: {p.number}",
           "        state: present",
           f"        part_start: {_q(t.start)}",
           f"        part_end: {_q(t.end)}"]
    if not relative:
        out.append("        align: none")
    if spec.label == "msdos":
        out.append(f"        part_type: {p.role.value}")
    else:
        if p.name and planfile.parted_word(p.name) is None:
            out.insert(0, f"    # parted cannot quote the name {p.name!r}: partition {p.number} is left unnamed")
            out.append('        name: ""')
        else:  # always a name: without one, the module's "mkpart primary" names the partition "primary"
            out.append(f"        name: !unsafe {_q(p.name)}")  # !unsafe: no Jinja templating of a name
    recipe = planfile.parted_recipe(spec.label, p.type)
    if recipe is None:
        out.insert(0, f"    # parted 3.5 cannot set type {p.type} ({ptypes.describe(p.type)}) on partition "
                      f"{p.number}; use the sfdisk script")
        recipe = ("", [], [])
    fs, on, off = recipe
    if off:  # the module sets flags off only beside a flag it sets on
        out.insert(0, f"    # the parted module cannot set {', '.join(off)} off: partition {p.number} may get "
                      f"another type than {p.type} ({ptypes.describe(p.type)}); use the sfdisk script")
    if fs:
        out.append(f"        fs_type: {_q(fs)}")
    flags = list(on)
    for f in p.flags:
        if f in planfile.PARTED_FLAGS:
            flags.append(f)
        else:
            out.insert(0, f"    # parted 3.5 cannot set {f} on partition {p.number}; use the sfdisk script")
    if flags:
        out.append(f"        flags: [{', '.join(flags)}]")
    return out
