"""Which decorated functions a workflow's code can reach.

A run's manifest describes the capabilities the workflow may use, so that a
resume can compare the ones its log shows it used with the code as it is
now. The capabilities are found from the code itself, not from a registry:
starting at the workflow function and its ``uses=`` declarations, the walk
follows the names each function refers to (globals, closures, defaults,
attributes of referenced modules), into the user's own helper functions and
classes, and collects every ``@step``, ``@tool``, ``@model_call`` and
``@workflow`` it meets, and the ``compensate=`` tool of each tool it meets
(a child workflow's body belongs to the child's own manifest and is not
walked). Library code (the standard library, installed
packages, durable itself) is not walked into.

Whatever the walk cannot see (a tool reached only through an object built
at run time) is covered by declaring it with ``@workflow(uses=[...])``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import sysconfig
import types
from typing import Any

from ._spec import Spec, spec_of

_MAX_ITEMS = 1000
"""Containers larger than this are data, not registries of tools; they are not walked."""


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(d for d in dirs if d))


def _is_library(module_name: str) -> bool:
    """Whether a module is library code (not walked into): stdlib, installed packages, durable."""
    top = module_name.partition(".")[0]
    if top in ("durable", "builtins") or top in sys.stdlib_module_names:
        return True
    module = sys.modules.get(module_name) or sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if not file:
        return False
    return any(file.startswith(d) for d in _library_dirs())


def _names(code: types.CodeType) -> set[str]:
    """Global and attribute names used by a code object and the code nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _spec(value: Any) -> Spec | None:
    """``spec_of``, for any object at all: a hostile ``__getattr__`` counts as not decorated."""
    try:
        return spec_of(value)
    except Exception:
        return None


def _is_code(value: Any) -> bool:
    # A decorated function passes isfunction too: its proxy reports the wrapped class.
    return inspect.isfunction(value) or isinstance(value, staticmethod | classmethod | functools.partial)


class _Walk:
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.found: dict[int, Spec] = {}

    def visit(self, obj: Any) -> None:
        if id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        spec = _spec(obj)
        if spec is not None:
            self.found[id(spec)] = spec
            if spec.kind == "workflow":  # a child run: its own manifest covers what it uses
                return
            self.function(spec.fn)
            for used in spec.uses:
                self.visit(used)
            if spec.compensate is not None:  # the undo runs in the run too (when it fails or is cancelled)
                self.visit(spec.compensate)
        elif isinstance(obj, staticmethod | classmethod):
            self.visit(obj.__func__)
        elif isinstance(obj, functools.partial):
            self.visit(obj.func)
            self.many(obj.args)
            self.many(obj.keywords.values())
        elif inspect.isfunction(obj) or inspect.ismethod(obj):
            fn = obj.__func__ if inspect.ismethod(obj) else obj
            if not _is_library(getattr(fn, "__module__", None) or ""):
                self.function(fn)
        elif inspect.isclass(obj):
            if not _is_library(obj.__module__):
                # Methods only: class-level data (a pydantic model's schema, say) is not code.
                self.many([v for v in vars(obj).values() if _is_code(v)])
        elif isinstance(obj, list | tuple | set | frozenset):
            self.many(obj)
        elif isinstance(obj, dict):
            self.many(obj.values())

    def many(self, items: Any) -> None:
        if len(items) > _MAX_ITEMS:
            return
        for item in list(items):
            self.visit(item)

    def function(self, fn: Any) -> None:
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            return
        names = _names(code)
        scope = getattr(fn, "__globals__", {})
        for name in sorted(names):
            if name not in scope:
                continue
            value = scope[name]
            if inspect.ismodule(value):
                self.module_attrs(value, names)
            else:
                self.visit(value)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not filled yet
                continue
            if inspect.ismodule(value):
                self.module_attrs(value, names)
            else:
                self.visit(value)
        self.many(getattr(fn, "__defaults__", None) or ())
        self.many((getattr(fn, "__kwdefaults__", None) or {}).values())

    def module_attrs(self, module: types.ModuleType, names: set[str]) -> None:
        library = _is_library(module.__name__)
        for name in sorted(names):
            try:
                value = getattr(module, name, None)
            except Exception:  # a module's own __getattr__ may raise anything
                continue
            if value is not None and (not library or _spec(value) is not None):
                self.visit(value)


def reachable(workflow: Spec) -> list[Spec]:
    """The decorated functions a workflow's code refers to, the workflow itself excluded.

    Args:
        workflow: The spec of a ``@workflow``.

    Returns:
        The specs found, sorted by kind, name and qualified name.
    """
    walk = _Walk()
    walk.seen.add(id(workflow.fn))
    walk.function(workflow.fn)
    for used in workflow.uses:
        walk.visit(used)
    found = [s for s in walk.found.values() if s is not workflow]
    return sorted(found, key=lambda s: (s.kind, s.name, s.qualname))
