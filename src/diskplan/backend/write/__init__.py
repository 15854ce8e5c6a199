"""Writing a table: the shared steps of every write (lock, backup, commit, read-back), GPT repairs
and restoring a backup."""

import sys


def write_began() -> str:
    """The table backup this process's latest write saved, "" when no write began (each saves its backup before
    its first sector: backup.SAVED). Looked up without importing the backup module, which the commands that never
    write do not load: what a Ctrl+C or an internal error reaching the top may truthfully say, and exit with."""
    saved: list[str] = getattr(sys.modules.get("diskplan.backend.write.backup"), "SAVED", [])
    return saved[-1] if saved else ""
