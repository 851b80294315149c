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
from durable.ui._pages import compare_href, run_href
from tests.helpers import pg
from tests.ui import app
from tests.ui.harness import seed_fork


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
    last, decided = world.events("waits")[-2:]
    assert last.type == "interrupt.resumed" and last.value == "yes"  # type: ignore[union-attr]
    assert decided.type == "run.resolved" and decided.decision == "answer"  # type: ignore[union-attr]
    assert last.at is not None


def test_the_tree_and_the_comparison_work_over_postgres(world: durable.World) -> None:
    """A fork's tree of calls, its link to the comparison, and the comparison itself, over Postgres."""
    asyncio.run(seed_fork(world))
    client = testclient.TestClient(
        create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787"
    )
    page = client.get(run_href("support-big")).text
    assert 'data-key="research.tool:lookup_customer_record#0"' in page and 'data-depth="1"' in page
    assert 'class="compare-fork"' in page and "inherited" in page
    compared = client.get(compare_href("support-small", "support-big")).text
    assert 'data-path="research" data-status="same"' in compared
    assert 'data-path="session:writer#1.model:write_reply#0" data-status="changed"' in compared
    assert '<mark class="ins">big</mark>' in compared
    whole = client.get(
        "/value", params={"run": "support-small", "path": "research.tool:lookup_customer_record#0"}
    )
    assert whole.json()["plan"] == "enterprise"
