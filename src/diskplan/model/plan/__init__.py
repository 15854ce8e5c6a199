"""The plan: the wanted table shaped step by step over the table on disk, its operations, snapping,
data-move schedules, relative plans and repairs."""
