"""One registry of finding codes (model.findings.codes): docs/check.md documents exactly its codes, with their
severities and lines, and no other module spells a code out."""

from __future__ import annotations

import pathlib
import re

from diskplan.model.findings.codes import CODES, SEVERITY_RANK

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (error|warning|notice) \| (.+) \|$")


def readme_codes(text: str) -> dict[str, tuple[str, str]]:
    """docs/check.md's table of codes: code -> (severity, when)."""
    start = text.index("| code | severity | when |")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    out: dict[str, tuple[str, str]] = {}
    for row in rows:
        m = ROW.match(row)
        assert m, f"not a row of the table of codes: {row}"
        assert m[1] not in out, f"{m[1]} is documented twice"
        out[m[1]] = (m[2], m[3])
    return out


def test_the_readme_documents_every_code_and_no_other() -> None:
    documented = readme_codes((ROOT / "docs" / "check.md").read_text())
    registered = {c.code: (c.severity, c.when) for c in CODES.values()}
    assert sorted(set(documented) - set(registered)) == [], "documented but not in model/findings/codes.py"
    assert sorted(set(registered) - set(documented)) == [], "in model/findings/codes.py but not in docs/check.md"
    assert documented == registered


def test_a_missing_row_is_noticed() -> None:
    text = (ROOT / "docs" / "check.md").read_text()
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `tiny-disk` |"))
    assert set(CODES) - set(readme_codes(without)) == {"tiny-disk"}


def test_every_code_has_a_severity_and_is_spelled_out_only_in_the_registry() -> None:
    assert all(c.severity in SEVERITY_RANK for c in CODES.values())
    src = ROOT / "src" / "diskplan"
    elsewhere = []
    for path in src.rglob("*.py"):
        if path.name == "codes.py":
            continue
        text = path.read_text()
        elsewhere += [f"{path.relative_to(src)}: {code}" for code in CODES if f'"{code}"' in text]
    assert not elsewhere, elsewhere
