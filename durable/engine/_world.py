"""The part of a world the engine needs: log, locks, artifacts, clock and sleep.

The public ``World`` (in ``_worlds``) adds the memory store, and
``local_world`` / ``memory_world`` build worlds there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Literal, Protocol

from .._clock import wall
from ..errors import ConfigurationError, LogCorruptedError, RunNotFoundError
from ..events import Event, parse_event
from ..security import Codec
from ..store import (
    DEFAULT_THRESHOLD,
    ArtifactStore,
    EncryptedArtifacts,
    EventLog,
    FileArtifacts,
    Locks,
    MemoryArtifacts,
    MessageStore,
    OutboxStore,
    RunControl,
    RunInfo,
    ScheduleStore,
    ThreadStore,
    keeps_outbox,
    messages_for,
    outbox_for,
    row_times,
    threads_for,
)
from ._group_commit import GroupCommit

Durability = Literal["process", "power"]


class MemoryService(Protocol):
    """What the engine asks of a world's memory store (``durable.memory.MemoryStore``)."""

    def manifest(self) -> dict[str, Any] | None:
        """The store as a run's manifest records it."""
        ...

    def close(self) -> None:
        """Close the store's database."""
        ...


class WorldCore:
    """The engine's view of a world; the public ``World`` adds the memory store.

    Its public attributes are documented on ``World``. The services below are
    ``None`` until the part that uses them opens them (once per world object),
    except those a world brings of its own (a Postgres world brings control,
    schedules and outer-loop manifests).

    Attributes:
        control_store: The runtime's control records (queues, claims, cancellations):
            the world's own, else ``runtime.db`` beside ``events.db``, or one in memory.
        message_store: Messages to runs, beside the log (see ``open_messages``).
        outbox_store: The outbox of ``@tool(outbox=True)``, beside the log (see ``open_outbox``).
        schedule_store: The schedules' records (``durable.runtime.schedules_of`` opens it).
        outer_loop_manifests: Outer-loop manifests by loop id, for a world without a data
            directory (a dict in memory, a table of a Postgres world).
        memory_store: The memory store once ``world.memory`` opened it.
        thread_store: The thread store once ``world.threads`` opened it (conversations, checkpoints).
        runtime_state: The runtime's state for this world object
            (``durable.runtime``'s ``RuntimeState``, made by ``runtime_of``).
    """

    def __init__(
        self,
        log: EventLog,
        locks: Locks,
        *,
        data_dir: Path | None = None,
        durability: Durability = "process",
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        artifacts: ArtifactStore | None = None,
        artifact_threshold: int = DEFAULT_THRESHOLD,
        codec: Codec | None = None,
    ):
        if (
            isinstance(artifact_threshold, bool)
            or not isinstance(artifact_threshold, int)
            or (artifact_threshold < 0)
        ):
            raise ConfigurationError(
                f"artifact_threshold must be an int >= 0 (bytes of JSON), not {artifact_threshold!r}."
            )
        self.log = log
        self.commits = GroupCommit(log)
        self.locks = locks
        self.data_dir = data_dir
        self.durability = durability
        self.clock: Callable[[], float] = clock or wall
        self.sleep: Callable[[float], Awaitable[None]] = sleep or asyncio.sleep
        self.codec = codec
        self.control_store: RunControl | None = None
        self.message_store: MessageStore | None = None
        self.outbox_store: OutboxStore | None = None
        self.schedule_store: ScheduleStore | None = None
        self.outer_loop_manifests: MutableMapping[str, str] | None = None
        self.memory_store: MemoryService | None = None
        self.thread_store: ThreadStore | None = None
        self.runtime_state: object | None = None
        if artifacts is None:
            artifacts = (
                MemoryArtifacts()
                if data_dir is None
                else FileArtifacts(data_dir, fsync=durability == "power")
            )
            if codec is not None:
                artifacts = EncryptedArtifacts(artifacts, codec)
        self.artifacts: ArtifactStore = artifacts
        self.artifact_threshold = artifact_threshold

    def events(self, run_id: str) -> list[Event]:
        """The run's events, in seq order.

        Raises:
            RunNotFoundError: The world has no run with that id.
        """
        rows = self.log.read(run_id)
        if not rows:
            raise RunNotFoundError(
                f"no run {run_id!r} in {self.where()}; list runs with `little runs`.", run_id=run_id
            )  # as run_not_found says it (the loader imports the world)
        times = row_times(self.log, run_id)
        try:
            return [parse_event(run_id, seq, type_, data, times.get(seq)) for seq, type_, data in rows]
        except (ValueError, TypeError, RecursionError):  # a damaged row: name it
            for seq, type_, data in rows:
                try:
                    parse_event(run_id, seq, type_, data)
                except (ValueError, TypeError, RecursionError) as exc:
                    first = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                    raise LogCorruptedError(
                        f"run {run_id!r}: event {seq} ({type_}) in its log is damaged and cannot be "
                        f"read ({first}). Run `little verify {run_id}` to list every damaged event.",
                        run_id=run_id,
                    ) from exc
            raise

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Runs in this world, newest first, optionally filtered (``before``: older than this key)."""
        return self.log.runs(status=status, workflow=workflow, limit=limit, offset=offset, before=before)

    def vacuum(self) -> None:
        """Give the space of deleted and compacted events back to the disk (SQLite ``VACUUM``).

        A log without a file (``MemoryLog``) has nothing to give back.
        """
        self.log.vacuum()

    def close(self) -> None:
        """Close the log, the stores beside it and the locks' file (the world is unusable afterwards)."""
        stores: tuple[object, ...] = (
            self.memory_store,
            self.control_store,
            self.schedule_store,
            self.thread_store,
        )
        self.memory_store = self.control_store = self.schedule_store = self.thread_store = None
        for store in stores:
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self.log.close()
        close_locks = getattr(self.locks, "close", None)  # FileLocks keeps one file open
        if close_locks is not None:
            close_locks()

    @property
    def threads(self) -> ThreadStore:
        """The world's thread store, opened on first use: values kept by thread.

        Conversation sessions (``durable.integrations.openai_agents.DurableSession``)
        keep their items here: ``threads.db`` beside ``events.db``, the ``threads``
        table of a Postgres world, the process for a memory world; sealed under the
        world's codec when it has one.
        """
        if self.thread_store is None:
            self.thread_store = threads_for(self.log)
        return self.thread_store

    def open_messages(self) -> MessageStore:
        """The world's message store, opened beside its log on first use.

        Raises:
            ConfigurationError: The log keeps no messages.
        """
        if self.message_store is None:
            self.message_store = messages_for(self.log)
        return self.message_store

    def keeps_outbox(self) -> bool:
        """Whether ``open_outbox`` finds an outbox (without opening it)."""
        return self.outbox_store is not None or keeps_outbox(self.log)

    def open_outbox(self) -> OutboxStore:
        """The world's outbox, opened beside its log on first use.

        Raises:
            ConfigurationError: The log has no outbox.
        """
        if self.outbox_store is None:
            self.outbox_store = outbox_for(self.log)
        return self.outbox_store

    def __enter__(self) -> WorldCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def where(self) -> str:
        """Where the world keeps its runs, in words for messages (``data directory '...'``)."""
        return f"data directory {str(self.data_dir)!r}" if self.data_dir else "this memory world"

    def __repr__(self) -> str:
        return f"<durable WorldCore {self.where()} durability={self.durability!r}>"
