"""``DurableSaver(world)``: a LangGraph checkpointer in the world's store, whose reads and writes replay.

Outside a durable run it is a plain checkpointer over the world's thread
store (``_rows``): SQLite (``threads.db`` beside ``events.db``), PostgreSQL
(the ``threads`` table of the world's schema) or memory, sealed under the
world's codec. It declares every capability of LangGraph's conformance
suite by overriding its async method (``aput``, ``aput_writes``,
``aget_tuple``, ``alist``, ``adelete_thread``, ``adelete_for_runs``,
``acopy_thread``, ``aprune``), and the sync twins.

Inside a durable run each read and write is a recorded call (an idempotent
``@durable.tool``): a read (``get_tuple``, ``list``) records what it found
and a resume replays that, without reading the store; a write records that
it was made and a resume does not make it again. So a resumed body that
invokes the graph again on the same thread sees the thread as the first
execution saw it (a new thread is empty again: the input is not added a
second time), while the graph's tasks run again and their finished model
and tool calls replay. The calls are keyed by what they address (thread,
namespace, checkpoint id, task id), never by the order they finish in:
LangGraph saves checkpoints in the background while the next step runs.
The checkpoint ids themselves are recorded values in a run
(``_graph_tasks``), so the keys are the same on every execution.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

import durable

from ...engine import keyed
from ...store import ThreadStore
from .._effects import in_run, run_effect
from .._from_threads import current_run, on_loop_thread, on_run_loop
from .._graph_tasks import graph_call, passing_controls
from . import _rows
from ._serde import NoPickle

T = TypeVar("T")


def _key(*parts: str) -> str:
    """A keyed scope's key from ids (brackets cannot be in a path's key)."""
    return "|".join(parts).replace("[", "(").replace("]", ")")


class DurableSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer that keeps checkpoints and pending writes in a durable world.

    ``graph.compile(checkpointer=DurableSaver(world))``, then ``await
    graph.ainvoke(input, {"configurable": {"thread_id": ...}})`` inside a
    ``@durable.workflow``. The store is the world's: ``threads.db`` beside a
    local world's log, the world's schema on PostgreSQL, the process for a
    memory world; encrypted when the world has a codec. It passes LangGraph's
    conformance suite (``langgraph-checkpoint-conformance``), base and
    extended capabilities. Rows are never pickled: values of your own classes
    are rebuilt when listed, ``saver.with_allowlist([("myapp.models", "Order")])``.

    Inside a run its reads and writes are recorded like calls (see the
    module's docstring): a resume that invokes the graph again sees the
    thread as it was, the graph's finished model and tool calls replay (wrap
    them with ``durable.integrations.langchain``) and only the call a crash
    cut runs again. Await the graph inside a run (``ainvoke``, ``astream``):
    a sync ``graph.invoke`` there would block the event loop that drives the
    run, and is refused with ``ConfigurationError``.

    Args:
        world: The world whose store keeps the checkpoints.
        serde: LangGraph's serializer to use instead of the strict default; one
            that pickles is refused.

    Example:
        >>> import durable
        >>> saver = DurableSaver(durable.memory_world())
        >>> saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
        True
    """

    def __init__(self, world: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=NoPickle(serde))
        self.world = world

    @property
    def store(self) -> ThreadStore:
        """The world's thread store."""
        store: ThreadStore = self.world.threads
        return store

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> DurableSaver:
        """A saver over the same store that also rebuilds the classes ``extra_allowlist`` names."""
        serde = self.serde
        clone = DurableSaver(self.world)
        clone.serde = serde.with_allowlist(extra_allowlist) if isinstance(serde, NoPickle) else serde
        return clone

    # -- recorded inside a run -------------------------------------------------------------

    async def _recorded(self, name: str, key: str, body: Callable[[], T], **identity: Any) -> T:
        """``body()`` (a store operation) as the idempotent tool call ``langgraph__<name>``.

        Made in the scope ``lg-<name>[key]`` below the current one, entered again
        on every use: the calls that address the same thing are numbered in the
        order they are made, whatever runs beside them.
        """

        async def run() -> Any:
            return body()

        with passing_controls(), keyed(f"lg-{name}", key):
            out: T = await run_effect("tool", f"langgraph__{name}", run, idempotent=True, **identity)
        return out

    def _sync(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """A sync method inside a run: refused on the run's loop thread, handed to it from another."""
        run = current_run()
        assert run is not None
        if on_loop_thread(run):
            raise durable.ConfigurationError(
                f"run {run.run_id!r}: DurableSaver.{what}() was called synchronously on the event loop "
                "that drives the run (a sync graph.invoke(...), graph.stream(...) or graph.get_state(...) "
                "in the workflow). Inside a durable run await the graph: 'await graph.ainvoke(...)', "
                "'graph.astream(...)', 'await graph.aget_state(...)'; then resume the run: "
                f"run_workflow(..., run_id={run.run_id!r}, retry_failed=True) or "
                f"`little resume {run.run_id}`.",
                run_id=run.run_id,
            )

        async def on_loop(_: Any) -> T:
            return await call()

        return on_run_loop(run, on_loop, what=f"DurableSaver.{what}()")

    # -- reads -------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` addresses (its namespace's newest without an id), or ``None``."""
        if not in_run():
            raw = _rows.get_raw(self.store, config)
        else:
            thread, ns, checkpoint_id = _rows.addressed(config)
            raw = await self._recorded(
                "get_tuple",
                _key(thread, ns),
                lambda: _rows.get_raw(self.store, config),
                thread=thread,
                ns=ns,
                checkpoint=checkpoint_id,
            )
        return None if raw is None else _rows.tuple_of(self.serde, raw)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``aget_tuple``, sync."""
        if in_run():
            return self._sync("get_tuple", lambda: self.aget_tuple(config))
        raw = _rows.get_raw(self.store, config)
        return None if raw is None else _rows.tuple_of(self.serde, raw)

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[_rows.Raw]:
        def read() -> list[_rows.Raw]:
            return _rows.list_raw(self.store, self.serde, config, filter=filter, before=before, limit=limit)

        if not in_run():
            return read()
        conf = (config or {}).get("configurable") or {}
        thread, ns = str(conf.get("thread_id", "")), str(conf.get("checkpoint_ns", ""))
        return await self._recorded(
            "list",
            _key(thread, ns),
            read,
            thread=conf.get("thread_id"),
            ns=conf.get("checkpoint_ns"),
            checkpoint=conf.get("checkpoint_id"),
            filter=_rows.jsonable(filter),
            before=((before or {}).get("configurable") or {}).get("checkpoint_id"),
            limit=limit,
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints that match, newest first."""
        for raw in await self._list(config, filter, before, limit):
            yield _rows.tuple_of(self.serde, raw)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """``alist``, sync."""
        if in_run():
            raws = self._sync("list", lambda: self._list(config, filter, before, limit))
        else:
            raws = _rows.list_raw(self.store, self.serde, config, filter=filter, before=before, limit=limit)
        for raw in raws:
            yield _rows.tuple_of(self.serde, raw)

    # -- writes ------------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; the config that addresses it."""
        if not in_run():
            return _rows.put_row(self.store, self.serde, config, checkpoint, metadata)
        thread, ns, parent = _rows.addressed(config)
        return await self._recorded(
            "put",
            _key(thread, ns, checkpoint["id"]),
            lambda: _rows.put_row(self.store, self.serde, config, checkpoint, metadata),
            thread=thread,
            ns=ns,
            checkpoint=checkpoint["id"],
            parent=parent,
            step=metadata.get("step"),
            source=metadata.get("source"),
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``aput``, sync."""
        if in_run():
            return self._sync("put", lambda: self.aput(config, checkpoint, metadata, new_versions))
        return _rows.put_row(self.store, self.serde, config, checkpoint, metadata)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` addresses."""

        def write() -> None:
            _rows.put_writes_rows(self.store, self.serde, config, writes, task_id, task_path)

        if not in_run():
            write()
            return
        thread, ns, checkpoint_id = _rows.addressed(config)
        await self._recorded(
            "put_writes",
            _key(thread, ns, str(checkpoint_id), task_id),
            write,
            thread=thread,
            ns=ns,
            checkpoint=checkpoint_id,
            task=task_id,
            path=task_path,
            channels=[c for c, _ in writes],
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``aput_writes``, sync."""
        if in_run():
            self._sync("put_writes", lambda: self.aput_writes(config, writes, task_id, task_path))
            return
        _rows.put_writes_rows(self.store, self.serde, config, writes, task_id, task_path)

    # -- maintenance -------------------------------------------------------------------------

    async def _admin(self, name: str, body: Callable[[], None], **identity: Any) -> None:
        if not in_run():
            body()
            return

        async def run() -> None:
            body()

        with passing_controls():
            await graph_call("tool", f"langgraph__{name}", run, idempotent=True, **identity)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and pending write of a thread."""
        thread = str(thread_id)
        await self._admin(
            "delete_thread", lambda: self.store.delete_thread(_rows.NAMESPACE, thread), thread=thread
        )

    def delete_thread(self, thread_id: str) -> None:
        """``adelete_thread``, sync."""
        if in_run():
            self._sync("delete_thread", lambda: self.adelete_thread(thread_id))
            return
        self.store.delete_thread(_rows.NAMESPACE, str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) LangGraph's runs ``run_ids`` made."""
        ids = [str(r) for r in run_ids]
        await self._admin("delete_for_runs", lambda: _rows.delete_for_runs(self.store, ids), runs=ids)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``adelete_for_runs``, sync."""
        if in_run():
            self._sync("delete_for_runs", lambda: self.adelete_for_runs(run_ids))
            return
        _rows.delete_for_runs(self.store, [str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of one thread into another."""
        src, dst = str(source_thread_id), str(target_thread_id)
        copy = lambda: _rows.copy_thread(self.store, src, dst)  # noqa: E731 - named for the line's length
        await self._admin("copy_thread", copy, source=src, target=dst)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``acopy_thread``, sync."""
        if in_run():
            self._sync("copy_thread", lambda: self.acopy_thread(source_thread_id, target_thread_id))
            return
        _rows.copy_thread(self.store, str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's newest checkpoint (``keep_latest``), or nothing (``delete``)."""
        ids = [str(t) for t in thread_ids]
        prune = lambda: _rows.prune(self.store, self.serde, ids, strategy)  # noqa: E731 - as above
        await self._admin("prune", prune, threads=ids, strategy=strategy)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``aprune``, sync."""
        if in_run():
            self._sync("prune", lambda: self.aprune(thread_ids, strategy=strategy))
            return
        _rows.prune(self.store, self.serde, [str(t) for t in thread_ids], strategy)
