"""Worlds: where durable state lives.

``local_world(data_dir)`` keeps the event log in ``events.db`` (SQLite, WAL)
with locks, artifacts, memory and outer-loop manifests beside it;
``memory_world()`` keeps everything in the process, for tests.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine import Durability, WorldCore
from ..errors import ConfigurationError
from ..memory import MemoryStore, open_world_memory
from ..security import Codec, refuse_links
from ..store import (
    DEFAULT_THRESHOLD,
    EncryptedLog,
    EventLog,
    FileLocks,
    MemoryLocks,
    MemoryLog,
    SqliteLog,
    refuse_plain_open,
)

if TYPE_CHECKING:
    from ..runtime import Schedules


class World(WorldCore):
    """Where runs, their logs and their files live.

    Create one with ``local_world()`` or ``memory_world()``; use it as a
    context manager or call ``close()``.

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

    @property
    def memory(self) -> MemoryStore:
        """The world's memory store, opened on first use (``memory/`` in the data directory).

        Raises:
            MemoryStoreError: The ``memory`` extra is not installed; the message
                names the command that installs it.
        """
        return open_world_memory(self)

    @property
    def schedules(self) -> Schedules:
        """Create, list, pause, resume, delete and backfill the world's schedules at run time.

        Every worker of the world starts the ticks of the schedules whose
        workflow it knows; see ``durable.Schedule``.
        """
        from ..runtime import Schedules

        return Schedules(self)

    def __enter__(self) -> World:
        return self


LAYOUT = ("artifacts", "bells", "locks", "memory", "outer-loops", "runs", "rekey-journal.json")
"""The folders and files a data directory holds beside its databases (``events.db``, ``runtime.db``).

None of them may be a symbolic link: ``local_world`` refuses to open a
directory that has one (``DataDirectoryError``), and every part opens its
files without following a link, so a link planted later is refused too.
"""


def local_world(
    data_dir: str | os.PathLike[str] = ".little-workflow",
    *,
    durability: Durability = "process",
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    artifact_threshold: int = DEFAULT_THRESHOLD,
    codec: Codec | None = None,
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
        codec: Encrypts every payload at rest (``durable.EncryptionCodec(key)``, or
            your own ``durable.Codec``); the data directory then needs the same key
            to be opened. See the security page.

    Returns:
        The world. Close it with ``world.close()`` or use it as a context manager.

    Raises:
        ConfigurationError: The folder cannot be created or written.
        DataDirectoryError: A folder or file of the data directory is a symbolic link.
        LogCorruptedError: ``events.db`` exists but is not a durable log.
        KeyMismatchError: ``events.db`` is encrypted and ``codec`` is missing or holds
            another key (nothing is read or written then).
        CodecError: ``codec`` is given but ``events.db`` holds runs that are not encrypted.

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
    refuse_links(path, (), LAYOUT)
    sqlite = SqliteLog(path / "events.db", durability=durability)
    try:
        log = _with_codec(sqlite, codec, f"the event log {str(path / 'events.db')!r}")
    except BaseException:
        sqlite.close()
        raise
    return World(
        log,
        FileLocks(path / "locks"),
        data_dir=path,
        durability=durability,
        clock=clock,
        sleep=sleep,
        artifact_threshold=artifact_threshold,
        codec=codec,
    )


def _with_codec(log: SqliteLog | MemoryLog, codec: Codec | None, where: str) -> EventLog:
    """``log`` itself when it is plain and no codec is given; encrypted through ``codec`` otherwise."""
    if codec is None:
        refuse_plain_open(log, where)
        return log
    check_codec(codec)
    return EncryptedLog(log, codec, where=where)


def check_codec(codec: object) -> None:
    """Refuse an object that is not a ``durable.Codec``."""
    if not isinstance(codec, Codec):
        raise ConfigurationError(
            f"codec must have key_id, encrypt, decrypt and digests (durable.Codec), not {codec!r}."
        )


def memory_world(
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    artifact_threshold: int = DEFAULT_THRESHOLD,
    codec: Codec | None = None,
) -> World:
    """A world held in this process (``MemoryLog``, artifacts in memory): for tests and experiments.

    Args:
        clock: Replaces ``time.time`` (tests).
        sleep: Replaces ``asyncio.sleep`` (tests).
        artifact_threshold: Step outputs whose JSON is longer than this become artifacts.
        codec: Encrypts every payload, as in ``local_world`` (tests of a codec).

    Example:
        >>> memory_world().runs()
        []
    """
    return World(
        _with_codec(MemoryLog(), codec, "this memory world"),
        MemoryLocks(),
        clock=clock,
        sleep=sleep,
        artifact_threshold=artifact_threshold,
        codec=codec,
    )
