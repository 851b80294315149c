"""The layering of the package, read from its imports (nothing is imported): the rules live here once.

A part is a folder of ``durable/`` (or one of the leaf modules). A part may
import only parts of a lower layer, and only through their door: the part's
package (``durable.engine``, ``durable.store``), never a private module inside
it. The public façade ``durable`` re-exports private names by design and is
the one module that may reach into every part below it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import durable

# Lowest first. A part imports parts of lower rows only; the leaves are imported by every row.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "_logging",
        "errors",
        "events",
    ),  # leaves: the logger's records, the error tree, the log's schema
    ("_clock",),  # the clock every part reads (real, or virtual under testing.virtual_time)
    ("security",),  # codecs, keys, files opened without following links
    ("store",),  # the stores by kind, with the encrypted ones
    ("engine",),  # decorators, claim/decide/record, replay, the runner
    ("memory",),  # the memory store
    ("ops",),  # maintenance: compaction, gc, time travel, verify, rekey
    ("runtime",),  # handles, workers, queues, schedules, the outbox dispatcher
    ("outer",),  # outer loops
    ("worlds",),  # local_world, memory_world, postgres_world: every part put together
    ("__init__",),  # the public façade ``durable``
    ("integrations", "testing"),  # built on the public API
    ("ui",),  # the inspector
    ("cli",),  # ``little``
)
# The one module allowed into any part's private modules: it re-exports the public names.
FACADES = frozenset({"durable"})

RANK = {part: rank for rank, row in enumerate(LAYERS) for part in row}
PACKAGE = Path(durable.__file__).parent


def module_name(root: Path, path: Path) -> str:
    """The dotted name of a file under ``root`` (the folder holding ``durable/``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_names_of(package: Path) -> dict[str, set[str]]:
    """Every module of the package and the ``door:name`` pairs of underscore names it imports from a door."""
    root = package.parent
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = module_name(root, path)
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base_parts = here[: len(here) - node.level + 1] if node.level else []
                base = ".".join(base_parts + ([node.module] if node.module else []))
                for alias in node.names:
                    name, where = alias.name, root.joinpath(*base.split("."), alias.name)
                    is_module = where.is_dir() or where.with_suffix(".py").exists()
                    if name.startswith("_") and not name.startswith("__") and not is_module:
                        found.setdefault(module, set()).add(f"{base}:{name}")
    return found


def private_name_violations(names: dict[str, set[str]]) -> list[str]:
    """Each underscore name a part imports through another part's door, said in one line."""
    out = []
    for module, pairs in sorted(names.items()):
        for pair in sorted(pairs):
            door, name = pair.split(":")
            if part_of(door) != part_of(module) and module not in FACADES:
                out.append(f"{module} imports {name} from {door}: a private name; give it a public name")
    return out


def imports_of(package: Path) -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports (nested imports included)."""
    root = package.parent
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = module_name(root, path)
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base_parts = here[: len(here) - node.level + 1] if node.level else []
                base = ".".join(base_parts + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    is_module = (
                        root.joinpath(*sub.split(".")).with_suffix(".py").exists()
                        or root.joinpath(*sub.split(".")).is_dir()
                    )
                    found.add(sub if is_module else base)
        graph[module] = {m for m in found if m == "durable" or m.startswith("durable.")}
    return graph


def part_of(module: str) -> str:
    """The part a module belongs to: its folder under ``durable/``, a leaf module, or the façade."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def door_of(part: str) -> str:
    """The one module of a part that other parts import."""
    return "durable" if part == "__init__" else f"durable.{part}"


def is_private(module: str) -> bool:
    """A module inside a part whose dotted name has a private component (``durable.engine._runner``)."""
    return any(p.startswith("_") for p in module.split(".")[2:])


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that breaks a rule, said in one line: who, whom, which rule."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = part_of(module)
        if mine not in RANK:
            out.append(f"{module}: its part {mine!r} is in no layer of LAYERS")
            continue
        for target in sorted(targets):
            theirs = part_of(target)
            if theirs == mine:
                continue
            if theirs not in RANK:
                out.append(f"{module} imports {target}: its part {theirs!r} is in no layer of LAYERS")
            elif RANK[theirs] >= RANK[mine]:
                out.append(f"{module} imports {target}: layer {mine!r} may not import {theirs!r}")
            elif module not in FACADES and is_private(target) and target != door_of(theirs):
                out.append(
                    f"{module} imports {target}: a private module of {theirs!r}; use {door_of(theirs)}"
                )
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a ring (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_package_keeps_its_layers():
    """No part imports a higher layer or another part's private module."""
    assert violations(imports_of(PACKAGE)) == []


def test_no_part_imports_a_private_name_through_a_door():
    """A door passes public names only: an outer part never imports ``_name`` from another part."""
    assert private_name_violations(private_names_of(PACKAGE)) == []


def test_a_private_name_through_a_door_is_refused():
    """The runtime importing ``_drift_keys`` from the engine's door breaks the rule of doors."""
    found = private_name_violations({"durable.runtime._start": {"durable.engine:_drift_keys"}})
    assert found == [
        "durable.runtime._start imports _drift_keys from durable.engine: a private name; "
        "give it a public name"
    ]


def test_a_private_name_within_a_part_is_allowed():
    """A module may import a private name of its own part (the store's log helpers inside the store)."""
    assert (
        private_name_violations({"durable.store.outbox._sqlite": {"durable.store.log._protocol:_stale"}})
        == []
    )


def test_a_private_name_planted_in_a_copy_of_the_package_is_found(tmp_path: Path):
    """The inspector's model importing ``_planted`` from the runtime's door fails on a copy of the tree."""
    copy = tmp_path / "durable"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    model = copy / "ui" / "_model.py"
    model.write_text(model.read_text() + "\nfrom ..runtime import _planted  # planted\n")
    found = private_name_violations(private_names_of(copy))
    assert found == [
        "durable.ui._model imports _planted from durable.runtime: a private name; give it a public name"
    ]


def test_the_package_has_no_import_circles():
    """No two modules import each other, not even inside a function or for type checking only."""
    assert circles(imports_of(PACKAGE)) == []


def test_an_import_circle_is_found():
    """Two modules that import each other around a third are reported as one group."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_every_folder_of_the_package_is_a_layer():
    """A new folder under durable/ must be given its row in LAYERS."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - set(RANK) == set()


def test_a_private_module_of_another_part_is_refused():
    """An outer part that reaches into a private module of the engine breaks the rule of doors."""
    found = violations({"durable.runtime._start": {"durable.engine._runner"}})
    assert found == [
        "durable.runtime._start imports durable.engine._runner: "
        "a private module of 'engine'; use durable.engine"
    ]


def test_an_import_of_a_higher_layer_is_refused():
    """The store importing the runtime runs upward, door or not."""
    found = violations({"durable.store.log._sqlite": {"durable.runtime"}})
    assert found == [
        "durable.store.log._sqlite imports durable.runtime: layer 'store' may not import 'runtime'"
    ]


def test_a_violation_planted_in_a_copy_of_the_package_is_found(tmp_path: Path):
    """The inspector's model importing a private module of the CLI fails the check on a copy of the tree."""
    copy = tmp_path / "durable"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    model = copy / "ui" / "_model.py"
    model.write_text(model.read_text() + "\nfrom ..cli import _bulk  # planted\n")
    found = violations(imports_of(copy))
    assert found == ["durable.ui._model imports durable.cli._bulk: layer 'ui' may not import 'cli'"]
