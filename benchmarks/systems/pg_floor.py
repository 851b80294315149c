"""The Postgres floor: one row inserted and committed per step with plain psycopg, on one connection.

The table has the shape of a log (``(run_id, seq)`` primary key, a JSON
payload of about 200 bytes with the row), and each row is its own
transaction: one ``INSERT`` on an autocommit connection, so the server
commits it before it answers. That is one round trip per row, the least a
client needs to make one row durable on the server (``synchronous_commit =
on``: the answer comes once the commit's WAL is flushed). An explicit
``BEGIN``, ``INSERT``, ``COMMIT`` costs three.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from benchmarks.pg_server import server_cpu

_ROW = (
    '{"path":"s.visit[0]","visit":0,"output":0,"output_hash":"0123456789abcdef0123456789abcdef",'
    '"attempt":1,"seed":"0123456789abcdef","at":1700000000.123456}'
)


def seq(dsn: str, schema: str, n: int, pg: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        table = f'"{schema}".events'
        db.execute(
            f"CREATE TABLE {table} (run_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, "
            "data jsonb NOT NULL, written_at double precision, PRIMARY KEY (run_id, seq))"
        )
        sql = f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)"
        for i in range(10):  # warm the connection and the prepared statement
            db.execute(sql, ("warm", i, "step.completed", _ROW, time.time()))
        run_id = "run_" + "0" * 32
        s0, c0, t0 = server_cpu(pg["pid"]), time.process_time(), time.perf_counter()
        for i in range(n):
            db.execute(sql, (run_id, i, "step.completed", _ROW, time.time()))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        server = server_cpu(pg["pid"]) - s0
    return {
        "seconds": seconds,
        "per_us": seconds / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "server_cpu_us": server / n * 1e6,
    }
