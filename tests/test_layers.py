"""The layers point one way: model <- backend/discovery <- ui <- cli. Checked on the source, and in a
fresh interpreter that importing the model pulls in none of textual, parted or pyudev."""

from __future__ import annotations

import ast
import functools
import pathlib
import re
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
# Only one module of each kind talks to the outside library. pyparted's is the parted backend: libparted.py (the
# reads into the model, every write) over pedread.py (libparted's read as plain rows, which a reading child runs
# without importing the model, and what every call shares); pyparted's wrapper package is libparted.py's alone.
OWNERS = {"parted": {"backend/parted/libparted.py"},
          "_ped": {"backend/parted/libparted.py", "backend/parted/pedread.py"},
          "pyudev": {"discovery/udev.py"}}


@functools.cache
def _tree(path: pathlib.Path) -> ast.Module:
    """A source file parsed once for all the checks below (the sources do not change during a run; the
    checkers' own tests write theirs under a fresh tmp_path)."""
    return ast.parse(path.read_text(), str(path))


def _imports(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
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
        rel, names = str(path.relative_to(SRC)), _imports(path)
        for lib, owners in OWNERS.items():
            if _hits(names, {lib}) and rel not in owners:
                bad.append(f"{rel} imports {lib}; only {sorted(owners)} may")
    assert not bad, "\n".join(bad)


def test_only_the_parted_backend_and_fatfs_load_libparted_through_ctypes() -> None:
    """libparted's exception handler is per process: only the parted backend (pyparted's: pedread.py takes the
    filesystem types off libparted's list) and fatfs.py (in its forked child only, for libparted-fs-resize, which
    pyparted does not bind) may load libparted with ctypes."""
    allowed = {"backend/parted/pedread.py", "backend/parted/libparted.py", "backend/fs/fatfs.py"}
    loads = re.compile(r"CDLL\([^)]*_ped|find_library\(\s*[\"']parted")
    loaders = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if loads.search(p.read_text())}
    assert loaders <= allowed and "backend/fs/fatfs.py" in loaders, sorted(loaders)


def test_the_model_imports_nothing_heavy() -> None:
    code = (
        "import sys, pkgutil, importlib, diskplan.model as m\n"
        "for i in pkgutil.walk_packages(m.__path__, 'diskplan.model.'): importlib.import_module(i.name)\n"
        "print(' '.join(sorted(k for k in sys.modules if k.split('.')[0] in "
        "('textual', 'rich', 'parted', '_ped', 'pyudev'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_the_checker_catches_an_upward_import(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from diskplan.ui.app import App\nimport parted.disk\n")
    assert _hits(_imports(bad), FORBIDDEN["model"]) == {"diskplan.ui.app", "parted.disk"}


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = ["diskplan", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: pathlib.Path = SRC) -> dict[str, set[str]]:
    """Every diskplan module and the diskplan modules it imports anywhere in its source (at the top, in a
    function, under TYPE_CHECKING): ``from diskplan.backend.write import backup`` is an edge to the module
    diskplan.backend.write.backup, ``from diskplan.backend.write.steps import Host`` one to
    diskplan.backend.write.steps."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per extra dot
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                for a in node.names:
                    edges.add(f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base)
        graph[name] = {e for e in edges if e in paths and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# The planner app is one class in two files (a mixin typed as the app it is mixed into): issue 13, item 3
# takes it apart; then this entry goes.
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycle_between_modules() -> None:
    """No two modules import each other, directly or around a circle, even lazily inside a function: each
    module can be read, and moved, after the ones it builds on."""
    graph = import_graph()
    steps = "diskplan.backend.write.steps"
    assert {steps, "diskplan.backend.write.gptrepair"} <= graph["diskplan.backend.write.commit"]
    assert steps in graph["diskplan.backend.write.gptrepair"]
    kinds = {f"diskplan.backend.write.{m}" for m in ("commit", "tablewrite", "gptrepair", "restore")}
    kinds.add("diskplan.backend.move.engine")
    assert not graph["diskplan.backend.write.steps"] & kinds, "the shared write steps import a kind of write"
    found = [c for c in cycles(graph) if c not in KNOWN_CYCLES]
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_a_lazy_import_back(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.py").write_text("from diskplan.b import thing\n")
    (tmp_path / "b.py").write_text("def thing():\n    from diskplan import a  # lazy, inside a function\n")
    (tmp_path / "c.py").write_text("from diskplan import a\n")
    assert cycles(import_graph(tmp_path)) == [["diskplan.a", "diskplan.b"]]


# Inside backend and model, the sub-packages point one way as well: each may import the ones before it
# (and the layer's top-level modules), never one after it. What crosses the other way is listed with why.
SUBPACKAGES = {
    "backend": ("raw", "parted", "read", "fs", "write", "move"),
    "model": ("findings", "plan", "formats", "teach"),
}
UPWARD_ALLOWED = {
    # every write refuses a disk whose data move is unfinished: it asks the move journal
    ("diskplan.backend.write.steps", "diskplan.backend.move.movejournal"),
}


def _subpackage(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    if len(parts) < 4 or parts[1] not in SUBPACKAGES or parts[2] not in SUBPACKAGES[parts[1]]:
        return None
    return parts[1], SUBPACKAGES[parts[1]].index(parts[2])


def test_sub_packages_point_one_way() -> None:
    bad = []
    for module, edges in import_graph().items():
        here = _subpackage(module)
        if here is None:
            continue
        for other in edges:
            there = _subpackage(other)
            if there is not None and there[0] == here[0] and there[1] > here[1] \
                    and (module, other) not in UPWARD_ALLOWED:
                bad.append(f"{module} imports {other}")
    assert not bad, "\n".join(sorted(bad))


def test_every_module_of_backend_and_model_lives_in_a_sub_package_or_says_why() -> None:
    """The folders tell the architecture: a module left at a layer's top is shared vocabulary (model) or a
    tool of its own (backend), named here."""
    top = {
        # the demo images, measure's timing and labs, the loop devices diskplan attaches, the tests' crash points
        "backend": {"demo_image", "faults", "iotime", "labrun", "loopdev"},
        # the vocabulary every sub-package shares, and the storage stack inside a partition with its plan
        "model": {"disk", "exitstatus", "extent", "geometry", "grain", "labels", "mountinfo", "ptypes", "safetext",
                  "sizes", "stack", "stackplan", "table", "typenames", "units", "value"},
    }
    for layer, allowed in top.items():
        found = {p.stem for p in (SRC / layer).glob("*.py") if p.stem != "__init__"}
        assert found <= allowed, sorted(found - allowed)


# The tests share code through tests/helpers/ (README, "Tests"), never by importing each other: a test module
# imported by another runs its module-level set-up twice and ties two files that look independent.
TESTS = pathlib.Path(__file__).resolve().parent


def _test_modules_imported(path: pathlib.Path) -> set[str]:
    return {n for n in _imports(path) if n.split(".")[0].startswith("test_")}


def test_no_test_module_imports_another() -> None:
    bad = [f"{p.relative_to(TESTS)} imports {sorted(hit)}" for p in sorted(TESTS.rglob("*.py"))
           if (hit := _test_modules_imported(p))]
    assert not bad, "\n".join(bad)


def test_the_test_import_check_sees_a_lazy_one(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "test_x.py"
    bad.write_text("from helpers.plans import ok\n\ndef test_y():\n    from test_plan import GIB\n    import test_z\n")
    assert _test_modules_imported(bad) == {"test_plan", "test_z"}
