"""The PostgreSQL schema of a Postgres world: created, recognised and migrated by the library.

Everything lives in one schema of its own (``durable`` unless told
otherwise). Its ``durable_meta`` table names the application and the schema
version, and ``migrations`` records every named migration applied. A schema
that holds tables but no ``durable_meta`` of this library belongs to another
application: it is refused before anything is written to it. Migrations run
in one transaction under an advisory lock, so many workers starting at once
migrate once.

``Database`` bundles the connection pool with the schema's quoted name and
runs every operation through ``run``: a lost connection (a server restart, a
network blip) is retried on a fresh connection until ``reconnect_timeout``
passes, then surfaces as ``LogUnavailableError``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ...errors import ConfigurationError, LogCorruptedError, LogFormatError, LogUnavailableError
from ..log._protocol import Append, Row
from ._handover import Handover
from ._migrations import MIGRATIONS, OWN_TABLES, SCHEMA_VERSION

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

T = TypeVar("T")

APP = "little-workflow"
"""What ``durable_meta.app`` says in a schema of this library."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> None:
    """Refuse a schema name that is not a plain identifier (it is quoted anyway; this keeps it readable).

    Raises:
        ConfigurationError: The name is not letters, digits and ``_`` (at most 63, not starting with a digit).
    """
    if not isinstance(schema, str) or not _NAME.match(schema):
        raise ConfigurationError(
            f"postgres_world(schema=) must be a plain PostgreSQL name (letters, digits and _, at most "
            f"63, not starting with a digit), not {schema!r}."
        )


def quote(name: str) -> str:
    """A PostgreSQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def _lock_key(schema: str, purpose: str = "migrate") -> int:
    """A stable 63-bit key for one of the schema's advisory locks (``migrate``, ``world``)."""
    return int.from_bytes(hashlib.sha256(f"durable-{purpose}:{schema}".encode()).digest()[:8], "big") >> 1


REKEY_JOURNAL = "rekey"
"""The key, in the ``meta`` namespace of ``documents``, of the journal of a rekey not finished yet."""


def world_lock(schema: str) -> int:
    """The advisory lock of a world: every session of a process with it open holds it shared.

    ``little rekey --dsn`` takes it exclusively, so it runs only when no
    process has the world open, and no process opens it while it runs.
    """
    return _lock_key(schema, "world")


class Database:
    """A connection pool and the schema a Postgres world lives in.

    Args:
        pool: An open ``psycopg_pool.ConnectionPool`` whose connections autocommit.
        schema: The schema's name (letters, digits and ``_``; created when missing).
        reconnect_timeout: Seconds an operation retries a lost connection before
            it raises ``LogUnavailableError``.
        where: How messages name the database (the DSN without its password).
    """

    def __init__(self, pool: ConnectionPool[Any], schema: str, *, reconnect_timeout: float, where: str):
        check_schema_name(schema)
        self.pool = pool
        self.schema = schema
        self.s = quote(schema)
        self.channel = f"durable_{schema}"[:63]
        """The ``NOTIFY`` channel of this schema's changes."""
        self.reconnect_timeout = reconnect_timeout
        self.where = where
        self.handover = Handover()
        """Leases and tokens a claim took for this process's next drive, and the leases it holds."""

    def run(self, op: Callable[[Connection[Any], int], T], *, run_id: str | None = None) -> T:
        """``op(connection, attempt)`` on a pooled connection, retried on a lost connection.

        ``attempt`` is 0 the first time; a later attempt knows that an earlier
        one may have committed before its connection was lost (its outcome
        is unknown) and checks for its own work before it redoes it.

        Raises:
            LogUnavailableError: The server stayed unreachable for ``reconnect_timeout`` seconds.
        """
        import psycopg
        from psycopg_pool import PoolClosed

        give_up = time.monotonic() + self.reconnect_timeout
        delay = 0.02
        attempt = 0
        while True:
            try:
                with self.pool.connection(timeout=max(self.reconnect_timeout, 0.1)) as conn:
                    return op(conn, attempt)
            except PoolClosed as exc:
                raise LogUnavailableError(
                    f"the world on {self.where} (schema {self.schema!r}) was closed; open it again "
                    "with postgres_world() to use it.",
                    run_id=run_id,
                ) from exc
            except psycopg.OperationalError as exc:
                if time.monotonic() + delay > give_up:
                    where = f"run {run_id!r}: " if run_id else ""
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise LogUnavailableError(
                        f"{where}the PostgreSQL server at {self.where} cannot be reached ({first}); "
                        f"retried for {self.reconnect_timeout:g} s. Everything committed before is "
                        "intact; a write whose commit was not confirmed is found by the next resume. "
                        "Bring the server back (or fix the network), then resume the run with the "
                        "same run_id.",
                        run_id=run_id,
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                attempt += 1

    def sql(self, text: str) -> str:
        """``text`` with ``{s}`` replaced by the quoted schema."""
        return text.replace("{s}", self.s)

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()


def ensure_schema(db: Database) -> None:
    """Create or migrate the schema; refuse one that belongs to another application.

    Raises:
        LogCorruptedError: The schema holds tables of another application (nothing is changed).
        LogFormatError: The schema was migrated by a newer durable.
    """

    def migrate(conn: Connection[Any], attempt: int) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(db.schema),))
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (db.schema,),
                )
            }
            version = _recognise(conn, db, tables)
            applied: set[str] = set()
            if version:
                applied = {r[0] for r in conn.execute(db.sql("SELECT name FROM {s}.migrations"))}
            if version == SCHEMA_VERSION and len(applied) == len(MIGRATIONS):
                return
            conn.execute(db.sql("CREATE SCHEMA IF NOT EXISTS {s}"))
            if version == 0:
                conn.execute(
                    db.sql(
                        "CREATE TABLE {s}.durable_meta (app TEXT NOT NULL, version INTEGER NOT NULL, "
                        "migrated_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                    )
                )
                conn.execute(
                    db.sql(
                        "CREATE TABLE {s}.migrations (name TEXT PRIMARY KEY, "
                        "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                    )
                )
                conn.execute(db.sql("INSERT INTO {s}.durable_meta (app, version) VALUES (%s, 0)"), (APP,))
            for name, text in MIGRATIONS:
                if name in applied:  # by name: a schema's version once lagged its migrations
                    continue
                for stmt in db.sql(text).split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.execute(db.sql("INSERT INTO {s}.migrations (name) VALUES (%s)"), (name,))
            conn.execute(
                db.sql("UPDATE {s}.durable_meta SET version = %s, migrated_at = now()"), (SCHEMA_VERSION,)
            )

    db.run(migrate)


def _recognise(conn: Connection[Any], db: Database, tables: set[str]) -> int:
    """The schema's version (0 when empty or absent), or an error for a schema not ours."""
    if not tables:
        return 0
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    foreign = LogCorruptedError(
        f"the schema {db.schema!r} of {db.where} holds tables of another application ({shown}), "
        "not a durable world's. Nothing was changed in it. Give postgres_world(schema=...) a "
        "schema of its own (it is created when missing)."
    )
    if "durable_meta" not in tables:
        raise foreign
    row = conn.execute(db.sql("SELECT app, version FROM {s}.durable_meta LIMIT 1")).fetchone()
    if row is None or row[0] != APP:
        raise foreign
    version = int(row[1])
    if version > SCHEMA_VERSION:
        raise LogFormatError(
            f"the schema {db.schema!r} of {db.where} has version {version}, migrated by a newer "
            f"durable; this one reads version {SCHEMA_VERSION}. Upgrade little-workflow on this machine."
        )
    strangers = tables - OWN_TABLES
    if strangers:
        raise LogCorruptedError(
            f"the schema {db.schema!r} of {db.where} holds tables durable did not create "
            f"({', '.join(sorted(strangers)[:5])}). Nothing was changed in it. Move those tables to "
            "a schema of their own, or give postgres_world(schema=...) another schema."
        )
    return version


def recognise_world(conn: Connection[Any], schema: str, where: str) -> None:
    """Refuse a schema that holds no durable world, or one not at this durable's version (for maintenance).

    Unlike ``connect``, nothing is created or migrated.

    Raises:
        ConfigurationError: The schema holds no durable world.
        LogCorruptedError: It holds tables of another application.
        LogFormatError: It is at another version than this durable's.
    """
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
    }
    if "durable_meta" not in tables:
        raise ConfigurationError(
            f"{where} holds no durable world: check --dsn and --schema (`little runs --dsn DSN "
            "--schema NAME` lists a world's runs)."
        )
    row = conn.execute(f"SELECT app, version FROM {quote(schema)}.durable_meta LIMIT 1").fetchone()
    if row is None or row[0] != APP or tables - OWN_TABLES:
        raise LogCorruptedError(f"{where} holds tables of another application; nothing was changed.")
    version = int(row[1])
    if version != SCHEMA_VERSION or OWN_TABLES - tables:
        newer = version > SCHEMA_VERSION
        raise LogFormatError(
            f"{where} is at version {version}, and this durable works on version {SCHEMA_VERSION}: "
            + (
                "upgrade little-workflow on this machine."
                if newer
                else "open the world once with this durable (`little runs --dsn DSN --schema NAME` "
                "does), which migrates it, then run this again."
            )
        )


def describe_dsn(dsn: str) -> str:
    """The DSN as messages show it: host, port and database, never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "the given DSN"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def connect(
    dsn: str,
    *,
    schema: str,
    min_size: int,
    max_size: int,
    reconnect_timeout: float,
    connect_timeout: float,
    stale_after: float | None = None,
) -> Database:
    """Open a pool on ``dsn`` and create or migrate ``schema`` in it.

    With ``stale_after`` (the world's lease), the server ends a transaction
    left open longer than that (``idle_in_transaction_session_timeout``): a
    worker paused in the middle of one (SIGSTOP, a long GC pause) must not
    hold its row and advisory locks past its lease and block the worker that
    takes its runs over.

    Raises:
        ConfigurationError: psycopg is not installed, or a size is invalid.
        LogUnavailableError: The server cannot be reached within ``connect_timeout`` seconds.
        LogCorruptedError: The schema belongs to another application.
        LogFormatError: The schema was migrated by a newer durable.
    """
    try:
        import psycopg  # noqa: F401  (the pool needs it; a missing one is named here)
        from psycopg_pool import ConnectionPool, PoolTimeout
    except ImportError as exc:
        raise ConfigurationError(
            "postgres_world() needs psycopg 3 and its pool: pip install 'little-workflow[postgres]'."
        ) from exc
    for name, value in (("min_size", min_size), ("max_size", max_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "min_size" else 1):
            raise ConfigurationError(f"postgres_world({name}=) must be a whole number >= 1, not {value!r}.")
    if min_size > max_size:
        raise ConfigurationError(f"postgres_world(min_size={min_size}) is above max_size={max_size}.")
    check_schema_name(schema)
    where = describe_dsn(dsn)
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "prepare_threshold": 0},  # every statement planned once per connection
        configure=_configure(stale_after, world_lock(schema)),
        open=False,
        name=f"durable:{schema}",
        timeout=connect_timeout,
    )
    try:
        pool.open(wait=True, timeout=connect_timeout)
    except PoolTimeout as exc:
        pool.close()
        raise LogUnavailableError(
            f"cannot connect to the PostgreSQL server at {where} within {connect_timeout:g} s. "
            "Check that it runs and that the DSN (host, port, user, database) is right; "
            "`pg_isready -d DSN` tells you from the shell."
        ) from exc
    db = Database(pool, schema, reconnect_timeout=reconnect_timeout, where=where)
    try:
        ensure_schema(db)
        refuse_during_rekey(db)
    except BaseException:
        pool.close()
        raise
    return db


def refuse_during_rekey(db: Database) -> None:
    """Refuse to open a world that a rekey rewrites now, or whose rekey was stopped before it finished.

    Raises:
        LogUnavailableError: A rekey of the schema runs now (it holds the world's lock).
        ConfigurationError: A rekey was stopped: its journal says to which key, and
            the world stays closed until a rerun finishes it.
    """

    def op(conn: Connection[Any], attempt: int) -> tuple[bool, str | None]:
        row = conn.execute(
            db.sql(
                "SELECT pg_try_advisory_lock_shared(%s), "
                "(SELECT value FROM {s}.documents WHERE namespace = 'meta' AND key = %s)"
            ),
            (world_lock(db.schema), REKEY_JOURNAL),
        ).fetchone()
        assert row is not None
        return bool(row[0]), row[1]

    shared, journal = db.run(op)
    if not shared:
        raise LogUnavailableError(
            f"a rekey of the schema {db.schema!r} of {db.where} runs now (`little rekey --dsn`); "
            "the world opens again once it has finished."
        )
    if journal is not None:
        try:
            to = json.loads(journal).get("to_key_id")
        except (ValueError, AttributeError):
            to = "(unreadable)"
        key = f"LITTLE_KEY set to the key of id {to}" if to else "the current key in LITTLE_KEY and --decrypt"
        raise ConfigurationError(
            f"a rekey of the schema {db.schema!r} of {db.where} was stopped before it finished, so "
            f"its rows are under two keys: run `little rekey --dsn DSN --schema {db.schema}` again "
            f"with {key} (and the old key in LITTLE_OLD_KEYS) to finish it. Nothing was read or written."
        )


def _configure(stale_after: float | None, lock: int) -> Callable[[Any], None]:
    """A pool ``configure`` hook: how each session of the pool plans and times out.

    Every statement is planned once per session and its plan kept
    (``plan_cache_mode = force_generic_plan``): durable's statements take
    their values as parameters and arrays, and for a statement of arrays
    the planner would otherwise plan anew at every execution, which costs
    the server more than running it. With ``stale_after`` (the world's
    lease) the server also ends this session's transactions idle past it.
    Each session holds the world's lock shared (``world_lock``) until it
    closes, so a rekey knows the world is open.
    """
    ms = None if stale_after is None else max(int(stale_after * 1000), 1)

    def configure(conn: Any) -> None:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        if ms is not None:
            conn.execute(f"SET idle_in_transaction_session_timeout = {ms}")
        conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (lock,))

    return configure


class GuardedLog(Protocol):
    """What the message store and the outbox need of the Postgres log (``PostgresLog`` is one)."""

    db: Database

    def write_guarded(self, conn: Connection[Any], a: Append) -> None:
        """Inside the caller's transaction: check the fencing token and insert the rows."""
        ...

    def stored(self, conn: Connection[Any], run_id: str, rows: Sequence[Row]) -> bool:
        """Whether ``rows`` are stored exactly as given (a retried commit that landed)."""
        ...
