"""``postgres_world(dsn)``: a world whose log, leases, queues, mailboxes and artifacts live in PostgreSQL.

Many workers on many machines open the same DSN and schema and share one
world. psycopg is imported only when a Postgres world is opened, so
``import durable`` works without the ``postgres`` extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..memory import open_postgres_memory
from ..security import Codec
from ..store import (
    DEFAULT_THRESHOLD,
    ArtifactStore,
    EncryptedArtifacts,
    EncryptedLog,
    EncryptedSchedules,
    EventLog,
    ScheduleStore,
    refuse_plain_open,
)
from ._local import World, check_codec

if TYPE_CHECKING:
    from ..memory import MemoryStore
    from ..store import Database


class PostgresWorld(World):
    """A ``World`` in a PostgreSQL schema (see ``postgres_world``).

    Attributes:
        db: The connection pool and schema every store of the world shares.
        lease: Seconds a driver's lease on a run lasts without a heartbeat.
    """

    db: Database
    lease: float

    @property
    def memory(self) -> MemoryStore:
        """The world's memory store, in its schema, on pgvector (opened on first use).

        Every process that opens the world shares it. The first use adds the
        store's vector column to the schema, and creates the ``vector``
        extension when the server has it and the role may.

        Raises:
            MemoryStoreError: The server lacks the ``vector`` extension (pgvector), or the
                role may not create it; the message says how to get it.
        """
        return open_postgres_memory(self, self.db)

    def where(self) -> str:
        return f"PostgreSQL schema {self.db.schema!r} at {self.db.where}"

    def close(self) -> None:
        """Close the control store and the log, stop the lease heartbeat, close the pool."""
        try:
            super().close()
        finally:
            close_locks = getattr(self.locks, "close", None)
            if close_locks is not None:
                close_locks()
            self.db.close()

    def __enter__(self) -> PostgresWorld:
        return self

    def __repr__(self) -> str:
        return f"<durable PostgresWorld {self.where()} lease={self.lease:g}>"


def postgres_world(
    dsn: str,
    *,
    lease: float = 10.0,
    heartbeat: float | None = None,
    schema: str = "durable",
    min_size: int = 1,
    max_size: int = 10,
    reconnect_timeout: float = 10.0,
    connect_timeout: float = 10.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    artifact_threshold: int = DEFAULT_THRESHOLD,
    codec: Codec | None = None,
) -> PostgresWorld:
    """A world in a PostgreSQL schema, shared by every process that opens the same DSN and schema.

    The log, the run leases, the runtime's queues and cancellation requests,
    messages to runs, the outbox, schedules, artifacts and outer-loop
    manifests live in ``schema`` (created and
    migrated on first use; a schema holding another application's tables is
    refused, never altered). Needs the ``postgres`` extra
    (``pip install 'little-workflow[postgres]'``).

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host:5432/db``).
        lease: Seconds a driver's lease on a run lasts without a heartbeat: a
            worker that dies loses its runs to another worker within ``lease``
            plus one heartbeat. Shorter takes over sooner; longer tolerates
            longer pauses and network blips before a run changes hands.
        heartbeat: Seconds between two lease renewals (default ``lease / 3``).
        schema: The PostgreSQL schema of this world.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most (each process has its own pool,
            plus one connection that listens for notifications).
        reconnect_timeout: Seconds an operation retries a lost connection (a
            server restart) before it raises ``LogUnavailableError``.
        connect_timeout: Seconds to wait for the first connection.
        clock: Replaces ``time.time`` (tests).
        sleep: Replaces ``asyncio.sleep`` for durable sleeps and backoffs (tests).
        artifact_threshold: Step outputs whose JSON is longer than this many
            characters are stored as artifacts (rows of their own) and referenced from the log.
        codec: Encrypts every payload at rest, as in ``local_world``
            (``durable.EncryptionCodec(key)``): event payloads, artifacts,
            outer-loop manifests, messages, outbox entries, queued and schedule
            inputs are ciphertext in the database.

    Returns:
        The world. Close it with ``world.close()`` or use it as a context manager.

    Raises:
        ConfigurationError: psycopg is not installed, or an option is invalid, or a
            rekey of the schema was stopped before it finished (run it again to finish it).
        LogUnavailableError: The server cannot be reached, or a rekey of the schema runs now.
        LogCorruptedError: The schema belongs to another application.
        LogFormatError: The schema was migrated by a newer durable.
        KeyMismatchError: The schema's log is encrypted and ``codec`` is missing or holds
            another key.

    Example:
        >>> world = durable.postgres_world("postgresql://postgres@127.0.0.1:5432/postgres")  # doctest: +SKIP
        >>> world.runs()  # doctest: +SKIP
        []
    """
    for name, value in (("lease", lease), ("reconnect_timeout", reconnect_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigurationError(
                f"postgres_world({name}=) must be a number of seconds > 0, not {value!r}."
            )
    beat = lease / 3 if heartbeat is None else heartbeat
    if isinstance(beat, bool) or not isinstance(beat, (int, float)) or not 0 < beat < lease:
        raise ConfigurationError(
            f"postgres_world(heartbeat=) must be > 0 and below lease={lease:g} s (a lease must be "
            f"renewed before it runs out), not {heartbeat!r}."
        )
    from ..store import (
        PostgresArtifacts,
        PostgresControl,
        PostgresDocuments,
        PostgresLocks,
        PostgresLog,
        PostgresSchedules,
        connect,
    )

    db = connect(
        dsn,
        schema=schema,
        min_size=min_size,
        max_size=max_size,
        reconnect_timeout=float(reconnect_timeout),
        connect_timeout=float(connect_timeout),
        stale_after=float(lease),
    )
    try:
        where = f"the PostgreSQL schema {schema!r}"
        log: EventLog = PostgresLog(db)
        artifacts: ArtifactStore = PostgresArtifacts(db)
        if codec is None:
            refuse_plain_open(log, where)
        else:
            check_codec(codec)
            log = EncryptedLog(log, codec, where=where)
            artifacts = EncryptedArtifacts(artifacts, codec)
        world = PostgresWorld(
            log,
            PostgresLocks(db, lease=float(lease), heartbeat=float(beat)),
            clock=clock,
            sleep=sleep,
            artifacts=artifacts,
            artifact_threshold=artifact_threshold,
            codec=codec,
        )
    except BaseException:
        db.close()
        raise
    world.db = db
    world.lease = float(lease)
    world.outer_loop_manifests = PostgresDocuments(db, "outer_loops")
    world.control_store = PostgresControl(db, dsn)
    schedules: ScheduleStore = PostgresSchedules(db)
    world.schedule_store = schedules if codec is None else EncryptedSchedules(schedules, codec)
    return world
