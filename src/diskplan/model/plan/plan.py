"""The plan: the table a user wants, shaped one step at a time on top of the table on disk.

A ``Plan`` is immutable. Every operation returns an ``Outcome``: the new plan (or the same plan, when the
step is refused, with the reason), and for moves and resizes a ``Snap`` saying where the user asked the
partition to go and where snapping put it. ``History`` keeps the plans for undo and redo.

Partitions carry a state: EXISTING (on disk, holds data: moved or resized only when asked, ``data=True`` or
``realign``, which plans a data move or a resize by its filesystem's tool, within the ``Limits`` measured on
the disk: a plan never decides what a filesystem can do), DELETE (on disk, marked
for deletion: its space is free for planning) and PROPOSED (planned). Proposed partitions snap to the grain
of the snapping target; snapping never makes partitions overlap, never enters the table's metadata, never
passes the end of the usable area. Partitions are addressed by number: live ones (EXISTING or PROPOSED)
have unique numbers; a number freed by a deletion can be reused by a proposal, as parted and sfdisk would.

A disk whose GPT is damaged offers a repair (``Disk.repair``, passed as ``Plan.open(..., offer=)``).
``plan.repair()`` makes it a pending change on its own: refused while other changes are pending, and
while it is pending every other step is refused (undo or clear takes it back). It writes the table that
is on the disk, not the plan's; once it is committed the disk is read again and planning starts from the
repaired table, which is then writable. Writing both at once would mix two kinds of write (raw sectors
from the good copy, then a libparted commit) in one confirmation, and a failed second step would leave a
disk repaired but not as planned, or the reverse.

A drag is a series of previews from one plan: ``base.move_to(n, lba)`` per mouse move, shown from
``outcome.plan``/``outcome.snap``, and one ``history.apply(outcome)`` when the button is released. Each
move or resize costs O(log n) Python steps (bisection, one slot replaced in tuples), not a full analysis.

``Plan`` is put together from one module per concern, each a base class of it: state (what a plan holds and
what a commit would write), room (gaps, the extended partition's room, the EBR chain; what every step begins
and ends with), proposing, moving (moves and resizes), realigning, editing (delete, undelete, type, name,
flags) and whole (new label, clear, snapping target, fix layout, adopt a plan file, repair). ``History``
(undo and redo) is in history.py; ``Outcome``, ``Snap`` and ``Edge`` in outcome.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from diskplan.model.plan.editing import Editing
from diskplan.model.plan.outcome import REPAIR_PENDING, Edge, Snap, Span
from diskplan.model.plan.outcome import Outcome as StepOutcome
from diskplan.model.plan.proposing import Proposing
from diskplan.model.plan.realigning import Realigning
from diskplan.model.plan.whole import WholePlan

__all__ = ["REPAIR_PENDING", "Edge", "Outcome", "Plan", "Snap", "Span"]


class Plan(WholePlan, Realigning, Editing, Proposing):
    """The plan (see the module): every step of its bases, on one immutable value."""


# What a step of a ``Plan`` gives back (outcome.Outcome for this class). At run time the class itself: built
# through the alias, each one would cost ~6 us more (typing tries to tag the frozen value and is refused).
if TYPE_CHECKING:
    Outcome: TypeAlias = StepOutcome[Plan]
else:
    Outcome = StepOutcome
