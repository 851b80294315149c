"""``little --dsn``: the CLI on a Postgres world."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

import durable
from durable.cli import main
from tests.helpers import pg


@durable.workflow
async def hello(name: str) -> str:
    return f"hello {name}"


@pytest.fixture
def schema(pg_server: pg.Server) -> Iterator[str]:
    name = pg.new_schema()
    yield name
    pg.drop_schema(pg_server.dsn, name)


def test_runs_and_events_read_a_postgres_world(
    pg_server: pg.Server, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`little runs --dsn` lists the world's runs and `little events --dsn` its events."""
    with durable.postgres_world(pg_server.dsn, schema=schema) as world:
        asyncio.run(durable.run_workflow(hello, "pg", world=world, run_id="r1"))
    assert main(["runs", "--dsn", pg_server.dsn, "--schema", schema, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [(r["run_id"], r["status"]) for r in runs] == [("r1", "completed")]
    assert main(["events", "r1", "--dsn", pg_server.dsn, "--schema", schema, "--json"]) == 0
    kinds = [e["type"] for e in json.loads(capsys.readouterr().out)]
    assert kinds[0] == "run.started"
    assert kinds[-1] == "run.completed"


def test_compact_and_verify_all_on_a_postgres_world(
    pg_server: pg.Server, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compact --all` and `verify --all` cover every run of a Postgres world; a locked run fails alone."""
    with durable.postgres_world(pg_server.dsn, schema=schema) as world:
        for run_id in ("a", "b", "c"):
            asyncio.run(durable.run_workflow(hello, run_id, world=world, run_id=run_id))
        held = world.locks.try_acquire("run:b")
        assert held is not None
        try:
            code = main(["compact", "--all", "--dsn", pg_server.dsn, "--schema", schema, "--json"])
        finally:
            world.locks.release(held)
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert sorted(c["run_id"] for c in data["compacted"]) == ["a", "c"]
    assert [(f["run_id"], f["reason"]) for f in data["failed"]] == [("b", "run_busy")]
    assert main(["verify", "--all", "--dsn", pg_server.dsn, "--schema", schema, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and sorted(r["run_id"] for r in report["results"]) == ["a", "b", "c"]
