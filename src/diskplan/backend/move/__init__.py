"""Data moves: the engine that checks, copies (journalled), verifies and rewrites a partition's entry,
its journal, rollback, and plans that move data."""
