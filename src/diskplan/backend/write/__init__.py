"""Writing a table: the shared steps of every write (lock, backup, commit, read-back), GPT repairs
and restoring a backup."""
