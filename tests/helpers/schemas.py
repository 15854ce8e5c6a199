"""Validating JSON against a schema with python-jsonschema: Debian's python3-jsonschema (bootstrap --test
installs it), run by the system's Python, as the project's venv does not carry it."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers.tools import run

SYSTEM_PYTHON = "/usr/bin/python3"
_CHECK = ("import json, sys, jsonschema; schema, docs, draft = json.load(sys.stdin)\n"
          "v = getattr(jsonschema, draft)(schema)\n"
          "for i, doc in enumerate(docs):\n"
          "    for e in v.iter_errors(doc):\n"
          "        for c in [e, *e.context]: print(i, '/'.join(map(str, c.absolute_path)) + ':', c.message)")


def schema_problems(schema: object, *docs: object, draft: str = "Draft202012Validator") -> list[str]:
    """Every way each of ``docs`` breaks ``schema`` ("INDEX PATH: message" lines, with what each branch of a
    oneOf/anyOf said); [] when all are valid."""
    if subprocess.run([SYSTEM_PYTHON, "-c", "import jsonschema"], capture_output=True).returncode != 0:
        pytest.skip("python3-jsonschema is not installed (make test installs it)")
    return run(SYSTEM_PYTHON, "-c", _CHECK, input=json.dumps([schema, list(docs), draft])).splitlines()
