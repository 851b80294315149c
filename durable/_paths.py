"""Step paths and effect keys: the scope a path was made in, and a step's name.

A path is the scope's path, a dot, and the call's segment: ``name`` for a
step (``name.visit[k]`` in a decision loop), ``tool:name#n`` for an effect,
``name[key]`` for a branch. Branch keys may hold dots, never brackets.
"""

from __future__ import annotations

import re


def parent_of(path: str) -> str:
    """The scope path that contains ``path`` (brackets of branch keys respected)."""
    if path.endswith("]"):
        i = path.rfind(".visit[")
        if i > 0 and path[i + 7 : -1].isdigit() and "]" not in path[:i]:
            return path[:i].rpartition(".")[0]  # ``a.b.visit[3]``: no branch key anywhere
    elif "]" not in path:
        return path.rpartition(".")[0]  # no branch key, so every dot separates segments
    return _parent_of_bracketed(path)


def _parent_of_bracketed(path: str) -> str:
    depth = 0
    for i in range(len(path) - 1, -1, -1):
        c = path[i]
        if c == "]":
            depth += 1
        elif c == "[":
            depth -= 1
        elif c == "." and depth == 0:
            parent = path[:i]
            return parent_of(parent) if path[i + 1 :].startswith("visit[") else parent
    return ""


_SESSION_SEGMENT = re.compile(r"(?:^|\.)session:[^.\[\]]+#(\d+)$")


def session_position(path: str) -> int | None:
    """The ordinal a ``session:<role>#<n>`` path took in its parent scope, else ``None``."""
    m = _SESSION_SEGMENT.search(path)
    return int(m.group(1)) if m else None


def step_name(path: str) -> str:
    """The step name a step path ends with (without its visit suffix)."""
    parent = parent_of(path)
    rest = path[len(parent) + 1 :] if parent else path
    return rest.split(".visit[", 1)[0]
