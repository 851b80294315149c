"""Worlds: where durable state lives.

``local_world(data_dir)`` keeps the event log in ``events.db`` (SQLite, WAL)
with locks, artifacts, memory and outer-loop manifests beside it;
``memory_world()`` keeps everything in the process, for tests.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._artifact_store import DEFAULT_THRESHOLD, ArtifactStore, FileArtifacts, MemoryArtifacts
from ._locks import FileLocks, Locks, MemoryLocks
from ._log import EventLog, MemoryLog, RunInfo
from ._sqlite import SqliteLog
from .errors import ConfigurationError, RunNotFoundError
from .events import Event, parse_event

if TYPE_CHECKING:
    from ._memory import MemoryStore

Durability = Literal["process", "power"]


class World:
    """Where runs, their logs and their files live.

    Create one with ``local_world()`` or ``memory_world()``.

    Attributes:
        log: The event log backend.
        data_dir: The data directory (``None`` for a memory world).
        durability: ``"process"`` or ``"power"``.
        clock: The wall clock (seconds since the epoch), injectable for tests.
        sleep: The async sleep, injectable for tests.
        artifacts: Where artifact payloads live (files under ``artifacts/``, or memory).
        artifact_threshold: Step outputs whose JSON is longer than this many
            characters are stored as artifacts and referenced from the log.
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
    ):
        if (
            isinstance(artifact_threshold, bool)
            or not isinstance(artifact_threshold, int)
            or (artifact_threshold < 0)
        ):
            raise ConfigurationError(
                f"artifact_threshold must be an int >= 0 (characters of JSON), not {artifact_threshold!r}."
            )
        self.log = log
        self.locks = locks
        self.data_dir = data_dir
        self.durability = durability
        self.clock: Callable[[], float] = clock or time.time
        self.sleep: Callable[[float], Awaitable[None]] = sleep or asyncio.sleep
        self.extensions: dict[str, Any] = {}
        if artifacts is None:
            artifacts = (
                MemoryArtifacts()
                if data_dir is None
                else FileArtifacts(data_dir, fsync=durability == "power")
            )
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
                f"no run {run_id!r} in {self._where()}; list runs with `little runs`.",
                run_id=run_id,
            )
        return [parse_event(run_id, *row) for row in rows]

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
        vacuum = getattr(self.log, "vacuum", None)
        if vacuum is not None:
            vacuum()

    @property
    def memory(self) -> MemoryStore:
        """The world's memory store, opened on first use (``memory/`` in the data directory).

        Raises:
            MemoryStoreError: The ``memory`` extra is not installed; the message
                names the command that installs it.
        """
        # Bound late: the store's effects reach the runner, which imports worlds.
        from ._memory import open_world_memory

        return open_world_memory(self)

    def close(self) -> None:
        """Close the log and the memory store (the world is unusable afterwards)."""
        store = self.extensions.pop("memory", None)
        if store is not None:
            store.close()
        self.log.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _where(self) -> str:
        return f"data directory {str(self.data_dir)!r}" if self.data_dir else "this memory world"

    def __repr__(self) -> str:
        return f"<durable World {self._where()} durability={self.durability!r}>"


def local_world(
    data_dir: str | os.PathLike[str] = ".little-workflow",
    *,
    durability: Durability = "process",
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    artifact_threshold: int = DEFAULT_THRESHOLD,
) -> World:
    """A world in a data directory: ``events.db`` (SQLite, WAL) and folders beside it.

    Args:
        data_dir: The folder (created when missing).
        durability: ``"process"`` survives any process kill (``synchronous=NORMAL``);
            ``"power"`` also survives power loss (``synchronous=FULL``, one fsync per commit).
        clock: Replaces ``time.time`` (tests).
        sleep: Replaces ``asyncio.sleep`` for durable sleeps and backoffs (tests).
        artifact_threshold: Step outputs whose JSON is longer than this many characters
            are stored under ``artifacts/`` and referenced from the log.

    Returns:
        The world. Close it with ``world.close()`` or use it as a context manager.

    Raises:
        ConfigurationError: The folder cannot be created or written.
        LogCorruptedError: ``events.db`` exists but is not a durable log.

    Example:
        >>> import tempfile
        >>> with local_world(tempfile.mkdtemp()) as world:
        ...     world.runs()
        []
    """
    if durability not in ("process", "power"):
        raise ConfigurationError(f"durability must be 'process' or 'power', not {durability!r}.")
    path = Path(data_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create the data directory {str(path)!r}: {exc.strerror}. "
            "Choose a folder you can write to."
        ) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigurationError(
            f"the data directory {str(path)!r} is not writable; choose a folder you can write to "
            "or fix its permissions."
        )
    log = SqliteLog(path / "events.db", durability=durability)
    return World(
        log,
        FileLocks(path / "locks"),
        data_dir=path,
        durability=durability,
        clock=clock,
        sleep=sleep,
        artifact_threshold=artifact_threshold,
    )


def memory_world(
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    artifact_threshold: int = DEFAULT_THRESHOLD,
) -> World:
    """A world held in this process (``MemoryLog``, artifacts in memory): for tests and experiments.

    Example:
        >>> memory_world().runs()
        []
    """
    return World(MemoryLog(), MemoryLocks(), clock=clock, sleep=sleep, artifact_threshold=artifact_threshold)
