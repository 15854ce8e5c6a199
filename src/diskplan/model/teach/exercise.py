"""Exercises: each demo as a layout to fix. A ``Goal`` says what to achieve (aligned starts by the demo's
own rules, which partitions hold data to keep, which are expendable, sizes within a stated tolerance); ``check``
judges a plan against it and says what is still wrong, each point with the findings' arithmetic, or, when
it is right, ties the result back to the experiment's numbers. ``Step``s are the walk-through: where to put
the cursor, how far to zoom, and one line of why.

Pure: the planner (ui) and the lesson export (cli) show the same goals and verdicts.
"""

from __future__ import annotations

from diskplan.model.extent import Partition, State
from diskplan.model.findings import placement as F
from diskplan.model.findings.codes import END_NOT_PHYSICAL, SEVERITY_RANK
from diskplan.model.findings.stackfindings import offset_mod
from diskplan.model.grain import optimal_grain
from diskplan.model.plan.plan import Plan
from diskplan.model.units import human_bytes
from diskplan.model.value import value

TOLERANCE = 0.01  # a recreated partition keeps its size within 1%: the grain rounds its edges, nothing more


@value
class Step:
    """One step of the walk-through: the cursor goes to ``lba``; ``zoom`` "sector" (one sector per cell),
    "fit" (the whole disk) or "" (as it is)."""

    lba: int
    zoom: str
    text: str


@value
class Goal:
    demo: str
    task: tuple[str, ...]  # what to achieve, in plain words: the rules below said for a student
    keep: tuple[int, ...] = ()  # partitions whose data must survive: kept, or moved with their data (A, m)
    recreate: tuple[int, ...] = ()  # expendable: may be deleted, but a partition of that number and size must be back
    drop: tuple[int, ...] = ()  # expendable and not needed: may be deleted
    label: str | None = None  # the table the result must have (None: whatever the disk has)
    needs: tuple[tuple[int, str], ...] = ()  # (at least this many bytes, what for): partitions the result must have
    measured: str = ""  # the experiment's numbers, quoted when the goal is reached
    steps: tuple[Step, ...] = ()


@value
class Verdict:
    solved: bool
    wrong: tuple[tuple[str, ...], ...]  # each point: its line, then the arithmetic
    result: tuple[str, ...]  # when solved: each start's arithmetic and the experiment's numbers

    def lines(self) -> list[str]:
        if self.solved:
            return ["Solved.", *self.result]
        return [f"Not yet: {len(self.wrong)} thing{'s' if len(self.wrong) != 1 else ''} still wrong."] + [
            line for point in self.wrong for line in (f"- {point[0]}", *(f"  {x}" for x in point[1:]))]


def _original(plan: Plan, number: int) -> Partition | None:
    return plan.base.by_number(number)


def _size_line(plan: Plan, was: Partition, now: Partition) -> tuple[str, ...] | None:
    """Why ``now`` does not keep ``was``'s size within TOLERANCE (None when it does)."""
    ss = plan.geometry.logical
    diff = now.size - was.size
    if abs(diff) <= was.size * TOLERANCE:
        return None
    return (f"partition {now.number} is {human_bytes(now.size * ss)}, not about {human_bytes(was.size * ss)}",
            f"{now.size:,}s − {was.size:,}s = {diff:+,}s = {diff / was.size:+.2%}; the goal allows ±{TOLERANCE:.0%}.")


def _data_lost(plan: Plan, number: int) -> tuple[str, ...] | None:
    was = _original(plan, number)
    if was is None:
        return None
    now = plan.partition(number)
    if plan.fresh:
        return (f"partition {number}'s data is lost: the new {plan.table.label} label replaces the whole table",
                "u takes the label back; A realigns the partition with its data instead.")
    if now is None or now.state is not State.EXISTING:
        return (f"partition {number}'s data is lost: it is marked for deletion (or replaced by a new partition)",
                f"It holds {human_bytes(was.size * plan.geometry.logical)} the goal keeps: x on it again keeps it; "
                "A realigns it with its data.")
    return None


def check(goal: Goal, plan: Plan) -> Verdict:
    """Judge ``plan`` against ``goal``: data kept, sizes kept, the label and partitions asked for, every start
    aligned by the demo's rules (no finding on a live partition, the findings' own arithmetic quoted: the
    physical block, the flash page, the grain, the DOS-era start; overlaps), and writable."""
    wrong: list[tuple[str, ...]] = []
    if goal.label is not None and plan.table.label != goal.label:
        wrong.append((f"the disk needs a {goal.label} label (it has {plan.table.label or 'none'})",
                      f"L makes a new {goal.label} label."))
    for n in goal.keep:
        lost = _data_lost(plan, n)
        if lost:
            wrong.append(lost)
    for n in goal.recreate:
        was, now = _original(plan, n), plan.partition(n)
        if was is None:
            continue
        if now is None:
            wrong.append((f"partition {n} is gone: make it again ({human_bytes(was.size * plan.geometry.logical)}, "
                          f"{was.size:,}s ±{TOLERANCE:.0%})", "n in the free space proposes a new partition."))
            continue
        bad = _size_line(plan, was, now)
        if bad:
            wrong.append(bad)
    wrong += _missing_needs(goal, plan)
    # Every finding about a partition counts, but an end off a physical block: a last partition that fills the
    # disk (parted's 100%) ends where the table does, and the goal asks for aligned starts and kept sizes.
    found = [f for f in F.analyze(plan.geometry, plan.table) if f.partition is not None and f.code != END_NOT_PHYSICAL]
    for f in sorted(found, key=lambda f: (f.partition or 0, SEVERITY_RANK[f.severity])):
        wrong.append((f"partition {f.partition}: {f.message} ({f.code})", f.explanation[0]))
    if plan.table.label is not None:  # without one, the missing label says it already
        wrong += [(f"the plan cannot be written: {p}",) for p in plan.problems()]
    if wrong:
        return Verdict(False, tuple(wrong), ())
    return Verdict(True, (), _result(goal, plan))


def _missing_needs(goal: Goal, plan: Plan) -> list[tuple[str, ...]]:
    free = sorted((p.size * plan.geometry.logical for p in plan.live), reverse=True)
    out: list[tuple[str, ...]] = []
    for nbytes, what in sorted(goal.needs, reverse=True):  # the largest need takes the largest partition
        got = next((b for b in free if b >= nbytes), None)
        if got is None:
            out.append((f"no partition for {what}: it needs at least {human_bytes(nbytes)} ({nbytes:,} B)",
                        "n in the free space proposes one."))
        else:
            free.remove(got)
    return out


def _result(goal: Goal, plan: Plan) -> tuple[str, ...]:
    geom, grain = plan.geometry, optimal_grain(plan.geometry)
    gbytes = grain.sectors * geom.logical
    lines = []
    for p in sorted(plan.live, key=lambda p: p.start):
        nbytes = p.start * geom.logical
        page, _ = offset_mod(geom, nbytes, geom.page)
        on_grain, _ = offset_mod(geom, nbytes, gbytes)
        how = ""
        if p.moved_from is not None:
            how = f" (moved with its data from {p.moved_from:,}s)"
        elif p.state is State.PROPOSED:
            how = " (new)"
        lines.append(f"Partition {p.number} starts at {p.start:,}s{how}: {p.start:,} × {geom.logical} B = "
                     f"{nbytes:,} B; {page}; {on_grain}.")
    dropped = [n for n in goal.drop if plan.partition(n) is None]
    if dropped:
        lines.append(f"Partition{'s' if len(dropped) > 1 else ''} {', '.join(map(str, dropped))} "
                     f"{'are' if len(dropped) > 1 else 'is'} gone: nothing of the disk starts off the grain.")
    if goal.measured:
        lines.append(goal.measured)
    return tuple(lines)


_MIB = 2048  # sectors of 512 B in 1 MiB

GOALS: dict[str, Goal] = {g.demo: g for g in (
    Goal(
        "ssd-gpt-34",
        ("Start partition 1 on the 1 MiB grain (2048s), as the experiment's `mkpart Align 0% 100%` did.",
         "It fills the disk, so there is no room to move it with its data (A refuses): its data is expendable "
         "(the experiment made a new filesystem). Delete it (x) and make it again (n) at 2048s.",
         f"Its size must stay within {TOLERANCE:.0%} of 500,118,125 sectors."),
        recreate=(1,),
        measured=F.MEASURED_SSD,
        steps=(
            Step(34, "sector", "Partition 1 starts at 34s: 34 × 512 B = 17,408 B = 4 × 4 KiB + 1,024 B, between "
                 "two 4 KiB page lines."),
            Step(34, "fit", "It fills the whole disk: no aligned start leaves room for it, so A (realign with "
                 "its data) refuses. The goal says its data is expendable."),
            Step(34, "", "x on it marks it for deletion: its space becomes free for planning."),
            Step(2048, "sector", "n at 2048s proposes a partition there: 2048 × 512 B = 1,048,576 B, a whole "
                 "MiB, on every page. Give it the rest of the disk; then k checks the exercise."),
        ),
    ),
    Goal(
        "dos-63",
        ("Start partition 1 on the 1 MiB grain (2048s) and keep its data: A realigns it, copying its data.",
         "There is room: the last cylinder ends at 1,875,444,164 and the disk has 1,875,448,317 sectors, so "
         "the partition fits 1,985 sectors further right.",
         "The table stays msdos; a new label would lose the data."),
        keep=(1,),
        label="msdos",
        measured=F.MEASURED_DOS,
        steps=(
            Step(63, "sector", "Partition 1 starts at 63s, one track in: 63 × 512 B = 32,256 B; "
                 "32,256 mod 4,096 = 3,584."),
            Step(1875444164, "sector", "It ends on the last cylinder: 116,741 × 16,065 − 1 = 1,875,444,164. "
                 "4,152 sectors are free after it: room to slide it right to 2048s."),
            Step(63, "", "A realigns the partition under the cursor: its data moves to 2048s when the plan is "
                 "written. Then k checks the exercise."),
        ),
    ),
    Goal(
        "advanced-format",
        ("Leave no partition off the 4096 B physical blocks, and keep partition 2's data where it is.",
         "Partition 1 (34s..2047s) was a test from `mkpart a 0 1MiB`: it holds nothing worth keeping. No "
         "aligned start below 2048s leaves room for it, so remove it (x)."),
        keep=(2,),
        drop=(1,),
        measured=F.MEASURED_AF,
        steps=(
            Step(34, "sector", "Partition 1 starts at 34s: 17,408 B, 1,024 B into a 4,096 B physical block."),
            Step(2048, "sector", "Partition 2 starts at 2048s (1 MiB, `parted print` shows 1049kB): aligned, "
                 "and it holds the data to keep."),
            Step(34, "", "Below 2048s the only 1 MiB boundary is 0, which holds the GPT: partition 1 cannot be "
                 "aligned there. x marks it for deletion; then k checks the exercise."),
        ),
    ),
    Goal(
        "4kn",
        ("Leave no partition off the 1 MiB grain (256 sectors of 4096 B), keeping the EFI and root partitions' data.",
         "Partition 1 comes from a script that hard-coded 34s (= 136 KiB here): it is expendable, and no 1 MiB "
         "boundary below the EFI partition leaves room for it. Remove it (x)."),
        keep=(2, 3),
        drop=(1,),
        steps=(
            Step(34, "sector", "Partition 1 starts at 34s: 34 × 4,096 B = 139,264 B; 139,264 mod 1,048,576 = "
                 "139,264. A whole 4 KiB block, but off the 1 MiB grain."),
            Step(256, "sector", "The EFI partition starts at 256s = 1 MiB: on 4Kn, 1 MiB is 256 sectors, not 2048."),
            Step(34, "", "x marks partition 1 for deletion; then k checks the exercise."),
        ),
    ),
    Goal(
        "stripe",
        ("Start every partition on diskplan's 3 MiB grain (6144s): lcm(1 MiB, the 192 KiB full stripe).",
         "Partition 1 (fdisk's 1 MiB start) has no room to move right with its data: partition 2 follows 2048 "
         "sectors after its end. Its data is expendable (a new volume): delete it (x) and make it again (n) "
         f"from 6144s, its size within {TOLERANCE:.0%}. Partition 2 keeps its data."),
        keep=(2,),
        recreate=(1,),
        measured=F.MEASURED_STRIPE,
        steps=(
            Step(2048, "sector", "Partition 1 starts at 2048s: 1,048,576 B; 1,048,576 mod 196,608 = 65,536, so "
                 "full-stripe writes straddle two stripes."),
            Step(209719296, "", "Partition 2 starts at 209,719,296s = 34,134 × 6144: on the 3 MiB grain."),
            Step(2048, "", "x marks partition 1 for deletion; n at 6144s proposes it again on the grain (the "
                 "proposal snaps there). Then k checks the exercise."),
        ),
    ),
    Goal(
        "lvm-whole-disk",
        ("Do what the experiment did next: a GPT label and one partition from 1 MiB for the PV "
         "(`parted -a optimal ... mkpart primary 1MB 6390GB`).",
         "The PV on the whole disk is expendable (the experiment ran pvremove): L makes the label, n the "
         "partition, at least 6,389 GB."),
        label="gpt",
        needs=((6_389_000_000_000, "the PV (1MB..6390GB)"),),
        measured=F.MEASURED_STRIPE + " By the arithmetic both places are aligned: the PV's extent 0 moves from "
        "1 MiB to 2 MiB, the same remainder modulo every power of two up to 1 MiB.",
        steps=(
            Step(2048, "sector", "The PV header sits at the start of the disk; extent 0 begins at pe_start = 1 MiB "
                 "(byte 1,048,576): 1,048,576 mod 8,192 = 0, on the 8 KiB stripes."),
            Step(0, "fit", "L makes a GPT label (the PV goes with the old contents); n at 2048s proposes the "
                 "partition, up to at least 6390GB. Then k checks the exercise."),
        ),
    ),
    Goal(
        "lvm-partition",
        ("Nothing here is off the grain: confirm it. Keep partition 1 and its PV; the checker accepts the "
         "plan unchanged (k).",
         "Walk through (Enter) to see why the 1 MiB start and the 1 MiB pe_start put extent 0 at 2 MiB."),
        keep=(1,),
        measured=F.MEASURED_STRIPE,
        steps=(
            Step(2048, "sector", "Partition 1 starts at 2048s = 1,048,576 B: parted's `1MB` moved to 1 MiB by "
                 "-a optimal."),
            Step(4096, "sector", "Extent 0 of the PV begins at pe_start 1 MiB into the partition: byte 2,097,152; "
                 "2,097,152 mod 8,192 = 0. k checks the exercise."),
        ),
    ),
    Goal(
        "lvm-raid5",
        ("Plan the stack on the array (S on the disk, or `diskplan stack`): where do extent 0 and extent 1 "
         "fall against the 196,608 B full stripes, and which extent size puts every extent on one?",
         "Nothing on the disk needs to change: the PV is where LVM put it. The checker accepts the plan "
         "unchanged (k); walk through (Enter) to see the extents against the stripe lines."),
        steps=(
            Step(2304, "sector", "Extent 0 begins at pe_start = 1,179,648 B (LBA 2,304) = 6 × 196,608: on a "
                 "stripe line."),
            Step(10496, "sector", "Extent 1 begins 4 MiB later, at 5,373,952 B (LBA 10,496): 5,373,952 mod "
                 "196,608 = 65,536, one chunk into stripe 27."),
            Step(26880, "sector", "Extent 3 begins at 13,762,560 B (LBA 26,880) = 70 × 196,608: on a line "
                 "again. 4 MiB is 21⅓ stripes, so only every third extent starts on one."),
            Step(0, "fit", "S plans the stack: vgcreate -s 4325376B (22 stripes) puts extent 1 at 5,505,024 = "
                 "28 × 196,608, and mkfs.xfs -d su=64k,sw=3 tells the filesystem the stripe. k checks."),
        ),
    ),
    Goal(
        "modern",
        ("Nothing here is off the grain: confirm it. Keep every partition's data; the checker accepts the "
         "plan unchanged (k).",),
        keep=(1, 2, 3, 4),
        steps=(
            Step(2048, "sector", "EFI starts at 2048s: 1,048,576 B, a whole MiB."),
            Step(1050624, "", "swap starts at 1,050,624s = 513 × 2048: whole MiB sizes keep the next start aligned."),
            Step(0, "fit", "Every start is a multiple of 2048s. k checks the exercise."),
        ),
    ),
    Goal(
        "empty",
        ("Lay out the blank disk: a GPT label, an EFI system partition of at least 512 MiB and a root "
         "partition of at least 60 GiB, every start on the 1 MiB grain.",),
        label="gpt",
        needs=((512 << 20, "the EFI system partition"), (60 << 30, "root")),
        steps=(
            Step(0, "fit", "No table yet: L makes a GPT label (its header takes LBA 1, its entries LBA 2-33)."),
            Step(2048, "sector", "n at 2048s proposes the EFI partition on the first 1 MiB boundary after the "
                 "table; n again after it for root. Then k checks the exercise."),
        ),
    ),
)}
