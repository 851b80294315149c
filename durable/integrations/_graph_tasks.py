"""The LangGraph task a call runs in: the scope its durable calls take, and checkpoint ids that replay.

LangGraph runs the tasks of one step at once (parallel nodes, ``Send``
fan-out, gathered ``@task`` calls), so the durable calls made inside a graph
cannot share one scope: completion order is timing. Every call the
integrations make inside a task is made in the scope ``lg[<task>]`` below the
scope the graph was invoked in, keyed by what identifies the task on every
execution: its node, step and path (``agent@1:pull.agent``,
``tools@2:push.0``), and for a task of a subgraph or a functional ``@task``
the namespace of the task that started it. A scope is entered again when
the same key comes back (a node retried by its ``RetryPolicy``, a node run
again when an ``interrupt()`` is answered): its calls are numbered on.

A task's id and a subgraph's namespace are hashes of the checkpoint id of
their step, which LangGraph draws from the clock and at random
(``uuid6``). Inside a durable run every checkpoint id a graph draws is a
recorded value instead (``langgraph_checkpoint_id``, recorded once and
replayed), so a graph executed again by a resume has the ids, task ids,
interrupt ids and subgraph namespaces its first execution had, and the
checkpoints it stores link up with the ones stored before the crash.
Outside a run LangGraph draws its ids as it always does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Literal

import langgraph.checkpoint.base.id as _ids
import langgraph.pregel._checkpoint as _checkpoint
from langchain_core.runnables.config import var_child_runnable_config

from ..engine import CURRENT, Scope, carried, hold_session, keyed, record_value
from ._effects import in_run, run_effect, run_effect_sync
from ._from_threads import current_run, on_loop_thread, on_run_loop
from ._manifest import name_part

_ENTERED: ContextVar[bool] = ContextVar("durable_langgraph_task_scope", default=False)

_PATH_PARTS = {"__pregel_pull": "pull", "__pregel_push": "push"}


def _path(path: Any) -> str:
    """A task's ``langgraph_path`` as text: ``("__pregel_push", 0, False)`` -> ``push.0``."""
    if not isinstance(path, tuple | list):
        return str(path)
    parts: list[str] = []
    for p in path:
        if isinstance(p, bool):
            if p:
                parts.append("call")
        elif isinstance(p, tuple | list):
            parts.append(_path(p))
        else:
            parts.append(_PATH_PARTS.get(str(p), str(p)))
    return ".".join(parts)


def _clean(text: str) -> str:
    return text.replace("[", "(").replace("]", ")")


def task_key(metadata: dict[str, Any]) -> str | None:
    """The key of the LangGraph task ``metadata`` (its config's) describes, or ``None`` outside a task.

    ``<node>@<step>:<path>``, after the namespace of the task that started
    it when there is one (``outer:<task id>|inner@0:pull.inner``).
    """
    step = metadata.get("langgraph_step")
    if step is None:
        return None
    node = str(metadata.get("langgraph_node", ""))
    own = f"{node}@{step}:{_path(metadata.get('langgraph_path', ()))}"
    ns = str(metadata.get("langgraph_checkpoint_ns", ""))
    outer = ns.rpartition("|")[0]
    return _clean(f"{outer}|{own}" if outer else own)


def current_task_key() -> str | None:
    """The key of the LangGraph task the caller runs in, or ``None``."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    return task_key(dict(config.get("metadata") or {}))


@contextmanager
def task_scope() -> Iterator[Scope | None]:
    """Make the enclosed durable calls in the current LangGraph task's scope (unchanged outside one).

    Entered once: a call made inside another one's task scope (a batch's
    items, a tool's branch) stays where it is.
    """
    scope = CURRENT.get()
    key = None if scope is None or _ENTERED.get() else current_task_key()
    if scope is None or key is None:
        yield scope
        return
    token = _ENTERED.set(True)
    try:
        with keyed("lg", key) as child:
            yield child
    finally:
        _ENTERED.reset(token)


@contextmanager
def passing_controls() -> Iterator[None]:
    """Inside a LangGraph task, durable errors leave as ``Carried``: past code that catches every Exception.

    A tool node that turns exceptions into error messages, a node's
    ``RetryPolicy`` or a ``with_fallbacks`` would otherwise take an unknown
    commit, a spent budget or a replay off the log's path for an outcome of
    the call; the run ends on the error itself (``run_workflow`` raises it).
    """
    try:
        yield
    except Exception as exc:
        out = carried(exc)
        if out is exc or var_child_runnable_config.get() is None:
            raise
        raise out from exc


def _call_scope(call_id: str | None) -> Any:
    """Calls of one task that run at once (a tool node's calls) each get ``call[<id>]``."""
    return nullcontext() if call_id is None else keyed("call", call_id)


Described = tuple[str, list[Any]]
"""A session manifest to check before a call: its role and its ``described_tool`` stand-ins."""

_DESCRIBED = "_durable_described"


def describe_once(described: Described | None) -> None:
    """Record (or, on a resume, check) the manifest ``described`` once per drive of the run.

    The session ``<role>`` is opened and closed in the scope ``described[<role>]``
    below the scope the graph runs in, the first time a drive calls something
    it describes: a resume whose tools changed fails closed there with
    ``CapabilityDriftError``, before the call runs.
    """
    scope = CURRENT.get()
    if described is None or scope is None:
        return
    role, tools = described
    seen: set[str] | None = scope.__dict__.get(_DESCRIBED)
    if seen is None:
        seen = scope.__dict__[_DESCRIBED] = set()
    if role in seen:
        return
    seen.add(role)
    with keyed("described", role):
        held = hold_session(name_part(role), tools=tools)
        if held is not None:
            held.close()


async def graph_call(
    kind: Literal["model", "tool"],
    name: str,
    body: Callable[[], Awaitable[Any]],
    *,
    call_id: str | None = None,
    described: Described | None = None,
    **options: Any,
) -> Any:
    """``run_effect`` in the current LangGraph task's scope (and ``call[<call_id>]`` in it).

    ``described`` is checked first (``describe_once``).
    """
    describe_once(described)
    with task_scope(), _call_scope(call_id):
        return await run_effect(kind, name, body, **options)


def graph_call_sync(
    kind: Literal["model", "tool"],
    name: str,
    body: Callable[[], Any],
    *,
    call_id: str | None = None,
    described: Described | None = None,
    **options: Any,
) -> Any:
    """``graph_call`` from sync code: on the run's loop thread, or handed to it from a worker thread.

    From a worker thread (a sync node of a graph awaited with ``ainvoke``) the
    call is recorded on the run's event loop and ``body`` runs back in the
    calling thread (``on_run_loop``).
    """
    run = current_run()
    assert run is not None
    if on_loop_thread(run):
        describe_once(described)
        with task_scope(), _call_scope(call_id):
            return run_effect_sync(name, body, kind=kind, **options)

    async def on_loop(proxy: Callable[[], Awaitable[Any]]) -> Any:
        return await graph_call(kind, name, proxy, call_id=call_id, described=described, **options)

    return on_run_loop(run, on_loop, body, what=f"the {kind} call {name!r}")


# -- checkpoint ids that replay ------------------------------------------------------------

_drawn = _checkpoint.uuid6  # type: ignore[attr-defined]


def _recorded_uuid6(node: int | None = None, clock_seq: int | None = None) -> _ids.UUID:
    """LangGraph's ``uuid6``, recorded once inside a durable run and replayed after."""
    if not in_run():
        return _drawn(node, clock_seq)

    def draw() -> str:
        with task_scope():
            return str(record_value("langgraph_checkpoint_id", lambda: str(_drawn(node, clock_seq))))

    run = current_run()
    assert run is not None
    if on_loop_thread(run):
        return _ids.UUID(draw())

    async def on_loop(_: Any) -> str:
        return draw()

    return _ids.UUID(on_run_loop(run, on_loop, what="a checkpoint id"))


def record_checkpoint_ids() -> None:
    """Make LangGraph draw its checkpoint ids through ``_recorded_uuid6`` (once per process)."""
    if getattr(_checkpoint, "uuid6", None) is _drawn:
        _checkpoint.uuid6 = _recorded_uuid6  # type: ignore[attr-defined]


record_checkpoint_ids()
