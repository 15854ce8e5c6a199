"""JSON Schemas (draft 2020-12) for what diskplan reads and writes, shipped in the package so fleet tools can
validate the plans they send and the reports they receive: ``plan-v1.schema.json`` (the JSON plan, format
version 1: what ``apply`` reads, ``export`` and Ctrl+S write) and ``check-v1.schema.json`` (``check --json``,
version 1). A schema's version is its format's: a new format version gets a new file, the old one stays.
Data files only: nothing here imports the rest of diskplan."""

from __future__ import annotations

import json
import os

NAMES = ("plan-v1", "check-v1")


def path(name: str) -> str:
    """The schema file ``name`` ("plan-v1", "check-v1") as installed."""
    if name not in NAMES:
        raise KeyError(f"no schema {name!r} (there are: {', '.join(NAMES)})")
    return os.path.join(os.path.dirname(__file__), f"{name}.schema.json")


def load(name: str) -> dict[str, object]:
    with open(path(name), encoding="utf-8") as f:
        schema: dict[str, object] = json.load(f)
    return schema
