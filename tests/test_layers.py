"""The layers point one way: model <- backend/discovery <- ui <- cli. Checked on the source, and in a
fresh interpreter that importing the model pulls in none of textual, parted or pyudev."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "diskplan"

# What each layer may import from third parties and from diskplan itself.
FORBIDDEN = {
    "model": {"textual", "rich", "parted", "_ped", "pyudev", "diskplan.backend", "diskplan.discovery",
              "diskplan.ui", "diskplan.cli"},
    "backend": {"textual", "pyudev", "diskplan.discovery", "diskplan.ui", "diskplan.cli"},
    "discovery": {"textual", "parted", "_ped", "diskplan.backend", "diskplan.ui", "diskplan.cli"},
    "ui": {"diskplan.cli"},
}
# Only one module of each kind talks to the outside library.
OWNERS = {"parted": {"backend/libparted.py"}, "_ped": {"backend/libparted.py"}, "pyudev": {"discovery/udev.py"}}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _hits(names: set[str], banned: set[str]) -> set[str]:
    return {n for n in names for b in banned if n == b or n.startswith(b + ".")}


def test_no_module_imports_up_a_layer() -> None:
    bad = []
    for layer, banned in FORBIDDEN.items():
        for path in sorted((SRC / layer).rglob("*.py")):
            hit = _hits(_imports(path), banned)
            if hit:
                bad.append(f"{path.relative_to(SRC)} imports {sorted(hit)}")
    assert not bad, "\n".join(bad)


def test_one_owner_per_outside_library() -> None:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        for lib, owners in OWNERS.items():
            if _hits(_imports(path), {lib}) and rel not in owners:
                bad.append(f"{rel} imports {lib}; only {sorted(owners)} may")
    assert not bad, "\n".join(bad)


def test_the_model_imports_nothing_heavy() -> None:
    code = (
        "import sys, pkgutil, importlib, diskplan.model as m\n"
        "for i in pkgutil.iter_modules(m.__path__): importlib.import_module('diskplan.model.' + i.name)\n"
        "print(' '.join(sorted(k for k in sys.modules if k.split('.')[0] in "
        "('textual', 'rich', 'parted', '_ped', 'pyudev'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_the_checker_catches_an_upward_import(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from diskplan.ui.app import App\nimport parted.disk\n")
    assert _hits(_imports(bad), FORBIDDEN["model"]) == {"diskplan.ui.app", "parted.disk"}
