"""Every key and path format of a run, built and parsed in one place.

A call's identity inside a run is a path made of segments joined by dots:

- a step: ``name`` (``name.visit[k]`` in a decision loop, ``k`` from 0);
- an effect: ``tool:name#n``, ``model:name#n`` or ``workflow:name#n``, where
  ``n`` is the call's ordinal in its scope;
- a recorded value, a durable sleep or an interrupt: ``now#n``,
  ``uuid4#n``, ``random#n``, ``sleep#n``, ``interrupt#n``;
- an agent session: ``session:role#n``;
- talking to runs: ``recv#n``, ``send#n``, ``set_event#n``,
  ``write_stream#n``, ``close_stream#n``; a model chunk mirrored to a
  stream: ``<model call key>~i`` for its ``i``-th chunk;
- a branch of ``parallel`` or ``branch``: ``name[key]``. Branch keys may hold
  dots, never brackets.

Outside the run, an effect is named by its idempotency key
``<run id>:<effect key>``, and a child run by ``<run id>:<effect key>``
(a workflow called in a body) or ``<run id>:<tool key>/<workflow>:<hash>``
(a workflow called inside a tool body).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

EFFECT_KINDS = ("tool", "model", "workflow")
"""The kinds of effect, each the first part of its key segment."""

VISIT_MARK = ".visit["
"""What separates a looped step's name from its visit number."""


# -- building -----------------------------------------------------------------


def scope_prefix(path: str) -> str:
    """What a scope's calls put before their segment: its path and a dot (nothing at the top)."""
    return path + "." if path else ""


def step_path(prefix: str, name: str, visit: int, looped: bool) -> str:
    """The path of a step called in the scope whose ``prefix`` is given.

    Args:
        prefix: The scope's path followed by a dot (empty for the workflow body).
        name: The step's name.
        visit: The visit number (0 for the first entry).
        looped: Whether the step has ``max_visits > 1`` (only then is the visit in the path).

    Example:
        >>> step_path("review[c1].", "worker", 0, False)
        'review[c1].worker'
        >>> step_path("", "critique", 2, True)
        'critique.visit[2]'
    """
    return f"{prefix}{name}.visit[{visit}]" if looped else prefix + name


def step_path_format(name: str, looped: bool) -> Callable[[str, int], str]:
    """``step_path`` for one step, made once: called with ``(prefix, visit)``.

    It is a bound ``str.format``, so a call costs no Python frame.

    Example:
        >>> step_path_format("critique", True)("", 2)
        'critique.visit[2]'
        >>> step_path_format("w{x}", False)("review[c1].", 0)
        'review[c1].w{x}'
    """
    safe = name.replace("{", "{{").replace("}", "}}")
    return (f"{{}}{safe}.visit[{{}}]" if looped else f"{{}}{safe}").format


def effect_key(prefix: str, kind: str, name: str, n: int) -> str:
    """The key of the ``n``-th durable call of a scope when it is an effect.

    Example:
        >>> effect_key("worker.", "tool", "score", 0)
        'worker.tool:score#0'
    """
    return f"{prefix}{kind}:{name}#{n}"


def value_key(prefix: str, kind: str, n: int) -> str:
    """The key of a recorded value, sleep or interrupt (``now#3``, ``sleep#0``…)."""
    return f"{prefix}{kind}#{n}"


def patch_key(prefix: str, change_id: str, visit: int) -> str:
    """The key of a ``durable.patched`` marker: the ``visit``-th call of ``change_id`` in its scope.

    Example:
        >>> patch_key("review[c1].", "new-scoring", 0)
        'review[c1].patched[new-scoring]#0'
    """
    return f"{prefix}patched[{change_id}]#{visit}"


def mirrored_chunk_key(effect_key: str, i: int) -> str:
    """The key of the ``i``-th chunk of a streamed model call mirrored to a stream (``stream_to=``).

    Example:
        >>> mirrored_chunk_key("model:ask#0", 3)
        'model:ask#0~3'
    """
    return f"{effect_key}~{i}"


def message_id(run_id: str, key: str) -> str:
    """The id of a message sent from inside a run: its idempotency key, so a resend is the same message."""
    return idempotency_key(run_id, key)


def fanout_key(prefix: str, m: int) -> str:
    """The key of the ``m``-th ``parallel`` fan-out of a scope (it takes no call ordinal)."""
    return f"{prefix}fanout#{m}"


def session_path(prefix: str, role: str, n: int) -> str:
    """The path of an agent session opened as the ``n``-th call of a scope."""
    return f"{prefix}session:{role}#{n}"


def branch_segment(name: str, key: str) -> str:
    """The path segment of the branch ``key`` of the fan-out ``name``: ``name[key]``."""
    return f"{name}[{key}]"


def idempotency_key(run_id: str, key: str) -> str:
    """The idempotency key an effect hands to external systems: ``<run id>:<key>``."""
    return f"{run_id}:{key}"


def child_run_id(parent_run_id: str, key: str) -> str:
    """The run id of a child workflow called in a body: ``<parent run id>:<effect key>``."""
    return f"{parent_run_id}:{key}"


def tool_child_run_id(tool_idempotency_key: str, workflow: str, input_hash: str) -> str:
    """The run id of a child workflow started inside a tool body.

    It is derived from the tool's idempotency key, the workflow's name and its
    input hash, so a tool re-driven after a crash reaches the same child run.
    """
    return f"{tool_idempotency_key}/{workflow}:{input_hash[:16]}"


# -- parsing ------------------------------------------------------------------


COMPENSATE = "compensate:"
"""The prefix of a compensation's effect key: ``compensate:<original key>``."""


def parent_of(path: str) -> str:
    """The scope path that contains ``path`` (brackets of branch keys respected).

    Example:
        >>> parent_of("review[a.b].worker.tool:score#0")
        'review[a.b].worker'
    """
    if path.endswith("]"):
        i = path.rfind(VISIT_MARK)
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
    return rest.split(VISIT_MARK, 1)[0]


def without_visit(path: str) -> str:
    """A step path without its trailing ``.visit[k]`` (the loop's path)."""
    i = path.rfind(VISIT_MARK)
    if i >= 0 and path.endswith("]") and path[i + 7 : -1].isdigit():
        return path[:i]
    return path


def ordinal(key: str) -> int:
    """The ordinal ``n`` that an effect, value, sleep or interrupt key ends with (``#n``)."""
    return int(key.rsplit("#", 1)[1])


def effect_of_idempotency_key(run_id: str, idempotency: str) -> str:
    """The effect key inside ``run_id`` that an idempotency key names."""
    return idempotency.removeprefix(f"{run_id}:")


class Call(NamedTuple):
    """A durable call as the log identifies it: ``(kind, name, input_hash, key)``."""

    kind: str
    name: str
    input_hash: str
    key: str
