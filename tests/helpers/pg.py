"""The PostgreSQL server the tests use, and one fresh schema per test.

The server is, in order: the one ``DURABLE_TEST_PG_DSN`` names (``.ci/run``
starts a throwaway one with ``scripts/pg_test_server.sh`` and exports it);
else a throwaway server this test session starts itself when the PostgreSQL
binaries are installed; else none, and the Postgres tests skip with the
command that gets one. Under ``CI=true`` they never skip: a missing server
fails them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "DURABLE_TEST_PG_DSN"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg_test_server.sh"

HOW = (
    "no PostgreSQL for the Postgres tests: export DURABLE_TEST_PG_DSN=postgresql://... "
    "(for example: docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:16, "
    "then DURABLE_TEST_PG_DSN=postgresql://postgres@127.0.0.1:5432/postgres), or install the "
    "PostgreSQL server binaries (initdb, pg_ctl) so the tests start a throwaway server"
)


def have_psycopg() -> bool:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return False
    return True


def binaries() -> bool:
    if os.environ.get("PG_BIN"):
        return True
    found = (
        sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if Path("/usr/lib/postgresql").exists()
        else []
    )
    return bool(found) or shutil.which("pg_ctl") is not None


class Server:
    """A PostgreSQL server for this session: its DSN, and (when started here) its folder."""

    def __init__(self, dsn: str, folder: Path | None):
        self.dsn = dsn
        self.folder = folder

    @classmethod
    def start(cls) -> Server:
        folder = Path(tempfile.mkdtemp(prefix="durable-pg-"))
        out = subprocess.run(
            [str(SCRIPT), "start", str(folder)], check=True, capture_output=True, text=True, timeout=120
        )
        server = cls(out.stdout.strip().splitlines()[-1], folder)
        atexit.register(server.stop)  # also when the session ends without its fixtures' teardown
        return server

    def restart(self) -> None:
        """``pg_ctl restart`` (fast mode: connections are cut, committed data stays)."""
        assert self.folder is not None, "only a server this session started can be restarted"
        subprocess.run(
            [str(SCRIPT), "restart", str(self.folder)], check=True, capture_output=True, timeout=120
        )

    def stop(self) -> None:
        """Stop the server this session started and remove its folder (a second call does nothing)."""
        if self.folder is None or not self.folder.exists():
            return
        out = subprocess.run(
            [str(SCRIPT), "stop", str(self.folder)], check=False, capture_output=True, text=True, timeout=120
        )
        if self.folder.exists():
            raise RuntimeError(f"the test server in {self.folder} did not stop: {out.stderr.strip()}")


def unavailable_reason() -> str | None:
    """Why Postgres tests cannot run here, or ``None`` when they can."""
    if not have_psycopg():
        return "psycopg is not installed: pip install -e '.[dev,postgres]'"
    if os.environ.get(ENV) or binaries():
        return None
    return HOW


def skip_or_fail(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the Postgres tests: {reason}")
    pytest.skip(reason)


def new_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.OperationalError:
        pass


class OnPostgres:
    """A test class mixin: a migrated schema per test, dropped afterwards; ``open_log()`` opens a log."""

    dsn: str
    schema: str

    @pytest.fixture(autouse=True)
    def _schema(self, pg_server: Server) -> Iterator[None]:
        self.dsn = pg_server.dsn
        self.schema = new_schema()
        self.dbs: list[Any] = []
        yield
        for db in self.dbs:
            db.close()
        drop_schema(pg_server.dsn, self.schema)

    def open_log(self) -> Any:
        from durable.store.log._postgres import PostgresLog
        from durable.store.postgres._schema import connect

        db = connect(
            self.dsn, schema=self.schema, min_size=1, max_size=2, reconnect_timeout=5, connect_timeout=10
        )
        self.dbs.append(db)
        return PostgresLog(db)
