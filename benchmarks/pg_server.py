"""A throwaway PostgreSQL server for the Postgres scenarios, started and stopped by the harness.

``initdb`` into a temporary folder (as the ``postgres`` system user when the
harness runs as root: PostgreSQL refuses to run as root), then ``pg_ctl``
on a unix socket and 127.0.0.1 at a free port. Unlike the test server
(``scripts/pg_test_server.sh``), ``fsync`` stays on: every commit is flushed,
as a production server does. ``pg_stat_statements`` is loaded when the
server ships it, so that the report can count the statements a run costs.

Server CPU is read from ``/proc``: the user and system time of every process
whose parent is the postmaster (the backends serving the connections, the
WAL writer, the checkpointer), summed before and after a measurement.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _bin_dir() -> Path | None:
    env = os.environ.get("PG_BIN")
    if env:
        return Path(env)
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: [int(x) for x in p.parent.name.split(".")]
    )
    if found:
        return found[-1]
    ctl = shutil.which("pg_ctl")
    return Path(ctl).parent if ctl else None


def available() -> str | None:
    """``None`` when a server can be started here, else why not."""
    b = _bin_dir()
    if b is None or not (b / "initdb").exists() or not (b / "pg_ctl").exists():
        return "no PostgreSQL server binaries (initdb, pg_ctl): install postgresql or set PG_BIN"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (the postgres extra)"
    return None


def server_cpu(postmaster: int) -> float:
    """CPU seconds used so far by the postmaster and its children (backends, background processes)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster or int(entry.name) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _has_statements(admin: str) -> bool:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone()
        return bool(row and row[0])


def counters(admin: str, db: str) -> dict[str, Any]:
    """Statements executed in ``db`` so far, from ``pg_stat_statements`` (empty without it).

    ``statements`` is every statement the server ran for the database's
    clients, ``BEGIN`` and ``COMMIT`` included (each one a round trip unless
    the client pipelines); ``by_query`` holds the calls of each normalized
    statement, the profile of where the round trips go.
    """
    import psycopg

    if not _has_statements(admin):
        return {}
    with psycopg.connect(admin, autocommit=True) as c:
        rows = c.execute(
            "SELECT s.query, sum(s.calls) FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s GROUP BY s.query",
            (db,),
        ).fetchall()
    by_query = {str(q): int(n) for q, n in rows}
    return {
        "statements": sum(by_query.values()),
        "commits": sum(n for q, n in by_query.items() if q.strip().upper().startswith("COMMIT")),
        "by_query": by_query,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One running server; ``dsn(db)`` names a database on it."""

    root: Path
    bin: Path
    port: int

    def dsn(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _as_pg(self, *argv: str) -> None:
        cmd = list(argv)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)

    def postmaster_pid(self) -> int:
        return int((self.root / "data" / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def settings(self) -> dict[str, str]:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as c:
            out = {}
            for name in (
                "server_version",
                "fsync",
                "synchronous_commit",
                "shared_buffers",
                "wal_sync_method",
            ):
                row = c.execute(f"SHOW {name}").fetchone()
                out[name] = str(row[0]) if row else "?"
            out["listen"] = f"127.0.0.1:{self.port} (TCP)"
            out["pg_stat_statements"] = "yes" if self.has_statements() else "no"
            return out

    def has_statements(self) -> bool:
        return _has_statements(self.dsn())

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._as_pg(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-w", "-m", "fast", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start(base: str | None = None) -> Server:
    """Initdb and start a server with fsync on; the caller stops it (``Server.stop``)."""
    b = _bin_dir()
    if b is None:
        raise RuntimeError(available() or "no PostgreSQL binaries")
    root = Path(tempfile.mkdtemp(prefix="durable-bench-pg-", dir=base))
    (root / "sock").mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(root / "sock", "postgres")
    server = Server(root, b, _free_port())
    try:
        server._as_pg(
            str(b / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-locale",
        )  # fmt: skip
        preload = (b.parent / "lib" / "pg_stat_statements.so").exists()
        conf = [
            "listen_addresses = '127.0.0.1'",
            f"port = {server.port}",
            f"unix_socket_directories = '{root / 'sock'}'",
            "max_connections = 200",
            "fsync = on",
            "synchronous_commit = on",
        ]
        if preload:
            conf += ["shared_preload_libraries = 'pg_stat_statements'", "pg_stat_statements.track = all"]
        with open(root / "data" / "postgresql.conf", "a") as f:
            f.write("\n".join(conf) + "\n")
        server._as_pg(
            str(b / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "server.log"), "-w", "-t", "60",
            "start",
        )  # fmt: skip
        if preload:
            import psycopg

            with psycopg.connect(server.dsn(), autocommit=True) as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except BaseException:
        server.stop()
        raise
    return server
