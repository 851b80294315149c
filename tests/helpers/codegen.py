"""Import source text as a named module: how a test deploys "changed code" in one process."""

from __future__ import annotations

import sys
import types

import pytest


def load_source(monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> types.ModuleType:
    """Execute ``source`` as module ``name`` (replacing an earlier version), removed after the test."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
