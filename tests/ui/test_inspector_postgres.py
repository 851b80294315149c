"""The inspector over a Postgres world: the same pages and actions as over a data directory."""

# ruff: noqa: E402  (the extra is checked with importorskip before the imports that need it)

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

testclient = pytest.importorskip("starlette.testclient")  # the ui extra

import durable
from durable.ui._app import Inspector, create_app
from durable.ui._pages import run_href
from tests.helpers import pg
from tests.ui import app


@pytest.fixture
def world(pg_server: pg.Server) -> Iterator[durable.World]:
    schema = pg.new_schema()
    w = durable.postgres_world(pg_server.dsn, schema=schema, max_size=4)

    async def seed() -> None:
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(app.approval, "pg", world=w, run_id="waits")

    asyncio.run(seed())
    durable.start_workflow(app.ticking, 1, world=w, run_id="queued", queue=durable.Queue("slow"))
    try:
        yield w
    finally:
        w.close()
        pg.drop_schema(pg_server.dsn, schema)


def test_pages_and_an_answer_work_over_postgres(world: durable.World) -> None:
    """The list, a run's page with its event times, the queues, and a confirmed answer."""
    client = testclient.TestClient(
        create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787"
    )
    listing = client.get("/").text
    assert 'data-run-id="waits"' in listing and 'data-status="interrupted"' in listing
    assert 'data-run-id="queued"' in listing and 'data-status="waiting"' in listing
    page = client.get(run_href("waits")).text
    assert "Waiting for an answer" in page and "<time datetime=" in page
    assert "<td>slow</td><td>enqueued: 1</td>" in client.get("/runtime").text
    refused = client.post("/action/answer", data={"id": "waits", "path": "interrupt#1", "answer": '"yes"'})
    assert refused.status_code == 403
    got = client.post(
        "/action/answer",
        data={"id": "waits", "path": "interrupt#1", "answer": '"yes"', "token": "s3cret"},
        follow_redirects=False,
    )
    assert got.status_code == 303
    last = world.events("waits")[-1]
    assert last.type == "interrupt.resumed" and last.value == "yes"  # type: ignore[union-attr]
    assert last.at is not None
