"""The part of a world the engine needs: log, locks, artifacts, clock and sleep.

The public ``World`` (in ``_worlds``) adds the memory store, and
``local_world`` / ``memory_world`` build worlds there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

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
    RunInfo,
    row_times,
)

Durability = Literal["process", "power"]


class WorldCore:
    """The engine's view of a world; the public ``World`` adds the memory store.

    Its attributes are documented on ``World``.
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
        self.locks = locks
        self.data_dir = data_dir
        self.durability = durability
        self.clock: Callable[[], float] = clock or wall
        self.sleep: Callable[[float], Awaitable[None]] = sleep or asyncio.sleep
        self.extensions: dict[str, Any] = {}
        self.codec = codec
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
                f"no run {run_id!r} in {self.where()}; list runs with `little runs`.",
                run_id=run_id,
            )
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
    ) -> list[RunInfo]:
        """Runs in this world, newest first, optionally filtered."""
        return self.log.runs(status=status, workflow=workflow, limit=limit, offset=offset)

    def vacuum(self) -> None:
        """Give the space of deleted and compacted events back to the disk (SQLite ``VACUUM``).

        A log without a file (``MemoryLog``) has nothing to give back.
        """
        self.log.vacuum()

    def close(self) -> None:
        """Close the log, the stores beside it and the locks' file (the world is unusable afterwards)."""
        for name in ("memory", "control", "schedules"):
            store = self.extensions.pop(name, None)
            if store is not None:
                store.close()
        self.log.close()
        close_locks = getattr(self.locks, "close", None)  # FileLocks keeps one file open
        if close_locks is not None:
            close_locks()

    def __enter__(self) -> WorldCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def where(self) -> str:
        return f"data directory {str(self.data_dir)!r}" if self.data_dir else "this memory world"

    def __repr__(self) -> str:
        return f"<durable WorldCore {self.where()} durability={self.durability!r}>"
