"""The importable name of a module, however it was started.

A module run as a script (``python app.py``) is named ``__main__`` in its own
process and ``app`` in every other one (a resume script, ``little verify``, a
worker). Identities recorded in a run's manifest use the importable name, so
that any program importing the module resumes and verifies the run.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from pathlib import Path
from typing import Any


def module_name(fn: Any) -> str:
    """The name other programs import ``fn``'s module by (``app`` for ``python app.py``)."""
    module: str = getattr(fn, "__module__", None) or "__main__"
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if name and name != "__main__":  # python -m app
        return str(name)
    code = getattr(fn, "__code__", None)
    file = getattr(main, "__file__", None) or getattr(code, "co_filename", None)
    if not file or file.startswith("<"):
        return module  # python -c, an interactive session: there is no module to import
    return _from_path(os.path.realpath(file), tuple(sys.path)) or module


def main_module() -> str:
    """The importable name of the ``__main__`` module (``__main__`` when it has none)."""
    main = sys.modules.get("__main__")
    return module_name(types.SimpleNamespace(__module__="__main__", __code__=getattr(main, "__code__", None)))


def module_of(qualname: str, fn: Any) -> str:
    """The module part of a recorded-style ``module.qualname`` of ``fn``."""
    own = getattr(fn, "__qualname__", "")
    return qualname[: -len(own) - 1] if own and qualname.endswith("." + own) else qualname


@functools.lru_cache(maxsize=64)
def _from_path(file: str, search: tuple[str, ...]) -> str | None:
    """The dotted name ``file`` is imported by through the first ``sys.path`` entry that holds it."""
    path = Path(file)
    if path.suffix != ".py":
        return None
    for entry in search:
        base = Path(os.path.realpath(entry or os.getcwd()))
        try:
            parts = path.with_suffix("").relative_to(base).parts
        except ValueError:
            continue
        if not parts or not all(p.isidentifier() for p in parts):
            continue
        if all((base.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            return ".".join(parts)
    return None
