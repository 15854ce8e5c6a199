"""Commit a plan to a disk: the front the planner and ``diskplan apply`` call, which sends a plan with a
pending GPT repair (``Plan.pending_repair``) to backend.write.gptrepair and any other plan to backend.write.tablewrite.
Both are built on the shared write steps of backend.write.steps.

``prepare(target, desired, host, repair=...)`` reads the disk and says what would be written and what
refuses it (nothing is written); ``execute(proposal, answer, host)`` writes it after the user's answer:
the lock, the checks again under it, the backup, the write, the verification and the ``WriteOutcome``.
"""

from __future__ import annotations

from diskplan.backend.write.gptrepair import execute_repair, prepare_repair
from diskplan.backend.write.steps import Fault, Host, Progress, Proposal, WriteOutcome
from diskplan.backend.write.tablewrite import execute_table, prepare_table
from diskplan.model.disk import Disk
from diskplan.model.plan.operations import Changes
from diskplan.model.plan.repair import GptRepair
from diskplan.model.table import Table


def prepare(
    target: str,
    desired: Table | Changes,
    host: Host,
    *,
    sector_size: int | None = None,
    sectors: int | None = None,
    current: Disk | None = None,
    repair: GptRepair | None = None,
    made_against: str | None = None,
) -> Proposal:
    """Everything to show before asking (``tablewrite.prepare_table``). ``repair``: the plan's pending
    repair: then the proposal writes that repair and nothing else (``gptrepair.prepare_repair``), and
    ``desired`` must keep the disk's partitions as they are. Raises CommitError only when the target
    cannot be read at all."""
    if repair is not None:
        table = desired.current if isinstance(desired, Changes) else desired
        return prepare_repair(target, host, current=current, expect=repair, desired=table,
                              sector_size=sector_size, sectors=sectors)
    return prepare_table(target, desired, host, sector_size=sector_size, sectors=sectors, current=current,
                         made_against=made_against)


def execute(
    p: Proposal,
    answer: str,
    host: Host,
    *,
    backup_path: str | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
) -> WriteOutcome:
    """Back up, write, tell the kernel, verify. ``answer`` is what the user typed (``p.accepts``)."""
    run = execute_repair if p.repair is not None else execute_table
    return run(p, answer, host, backup_path=backup_path, progress=progress, fault=fault)
