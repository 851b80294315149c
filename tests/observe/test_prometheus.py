"""``/metrics``: the Prometheus text, read by prometheus_client's own parser, matches the world."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import pytest

import durable
from durable import Queue, Worker
from durable.runtime._detail import list_runs
from durable.runtime._driver import control_of
from durable.ui._prometheus import read_metrics
from tests.conftest import Worlds
from tests.runtime.test_unhappy import blocked_on_a_cut_call

parser = pytest.importorskip("prometheus_client.parser")
testclient = pytest.importorskip("starlette.testclient")
from durable.ui._app import Inspector, create_app  # noqa: E402


@durable.tool
async def add(x: int) -> int:
    return x + 1


@durable.workflow
async def adding(x: int) -> int:
    return await add(x)


@durable.workflow
async def failing(x: int) -> int:
    raise ValueError(f"bad {x}")


@durable.workflow
async def waiting(x: int) -> Any:
    return await durable.recv("go", timeout=3600)


def scrape(
    world: durable.World, **headers: str
) -> tuple[int, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """GET /metrics from the inspector on loopback; the status and every sample by (name, labels)."""
    client = testclient.TestClient(
        create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787"
    )
    got = client.get("/metrics", headers=headers)
    if got.status_code != 200:
        return got.status_code, {}
    assert got.headers["content-type"].startswith("text/plain; version=")
    samples = {}
    for family in parser.text_string_to_metric_families(got.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return 200, samples


async def until(cond: Any) -> None:
    for _ in range(20_000):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never became true")


async def test_metrics_count_runs_queues_blocked_runs_and_workers_as_the_world_lists_them(
    worlds: Worlds,
) -> None:
    """Runs by workflow and status, queue depth and wait, blocked runs and live workers match the world."""
    world = worlds.open()
    await durable.run_workflow(adding, 1, world=world, run_id="ok-1")
    await durable.run_workflow(adding, 2, world=world, run_id="ok-2")
    with contextlib.suppress(durable.RunFailedError, ValueError):
        await durable.run_workflow(failing, 3, world=world, run_id="bad")
    durable.start_workflow(adding, 4, world=world, queue="later")
    durable.start_workflow(adding, 5, world=world, queue="later")
    await blocked_on_a_cut_call(world, "stuck")
    q = Queue("live")
    async with Worker(world, workflows=[waiting], queues=[q]):
        h = durable.start_workflow(waiting, 0, world=world, queue=q)
        await until(lambda: durable.runtime.run_status(world, h.run_id).status == "running")
        await until(lambda: read_metrics(world).workers_alive == 1)
        status, samples = scrape(world)
        await h.send(1, topic="go")
        assert await h.result(timeout=30) == 1
    assert status == 200
    rows, _ = list_runs(world, status=None, workflow=None, limit=None, offset=0)
    expected: dict[tuple[str, str], int] = {}
    for r in rows:
        if r["run_id"] != h.run_id:
            expected[(r["workflow"], r["status"])] = expected.get((r["workflow"], r["status"]), 0) + 1
    expected[("waiting", "running")] = 1
    runs = {
        (dict(labels)["workflow"], dict(labels)["status"]): v
        for (name, labels), v in samples.items()
        if name == "durable_runs"
    }
    assert runs == expected
    assert (
        runs[("charging", "blocked")] == 1
        and runs[("failing", "failed")] == 1
        and runs[("adding", "enqueued")] == 2
    )
    assert samples[("durable_queue_depth", (("queue", "later"),))] == 2
    assert samples[("durable_queue_oldest_wait_seconds", (("queue", "later"),))] >= 0
    assert ("durable_queue_depth", (("queue", "live"),)) not in samples
    assert samples[("durable_blocked_runs", ())] == 1
    assert samples[("durable_workers_alive", ())] == 1
    assert samples[("durable_workers_busy", ())] == 1


async def test_an_idle_fleet_is_alive_and_not_busy(worlds: Worlds) -> None:
    """Two workers with nothing to do are two live workers and none busy; one run makes one busy."""
    world = worlds.open()
    q = Queue("live")
    async with Worker(world, workflows=[waiting], queues=[q]), Worker(worlds.open(), workflows=[waiting]):
        m = read_metrics(world)
        assert (m.workers_alive, m.workers_busy) == (2, 0)
        h = durable.start_workflow(waiting, 0, world=world, queue=q)
        await until(lambda: read_metrics(world).workers_busy == 1)
        assert read_metrics(world).workers_alive == 2
        await h.send(1, topic="go")
        assert await h.result(timeout=30) == 1
        await until(lambda: read_metrics(world).workers_busy == 0)
    m = read_metrics(world)
    assert (m.workers_alive, m.workers_busy) == (0, 0)  # stopped workers are gone


def test_oldest_wait_is_the_age_of_the_first_enqueued_run(worlds: Worlds) -> None:
    """The oldest wait of a queue is now minus the submission time of its oldest enqueued run."""
    world = worlds.open()
    first = durable.start_workflow(adding, 1, world=world, queue="q")
    durable.start_workflow(adding, 2, world=world, queue="q")
    submitted = control_of(world).get(first.run_id).created_at
    m = read_metrics(world, now=submitted + 90.5)
    assert m.queue_depth == {"q": 2}
    assert m.oldest_wait["q"] == pytest.approx(90.5)


def test_an_empty_world_has_every_family_and_no_runs(worlds: Worlds) -> None:
    """A world without runs still answers, with zero blocked runs and zero workers."""
    status, samples = scrape(worlds.open())
    assert status == 200
    assert samples == {
        ("durable_blocked_runs", ()): 0.0,
        ("durable_workers_alive", ()): 0.0,
        ("durable_workers_busy", ()): 0.0,
    }


def test_beyond_loopback_metrics_need_the_token_as_a_bearer(worlds: Worlds) -> None:
    """A private inspector refuses /metrics without the token and serves it to `Authorization: Bearer`."""
    world = worlds.open()
    client = testclient.TestClient(create_app(Inspector(world, "s3cret", {}, private=True)))
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    got = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert got.status_code == 200 and "durable_workers_alive 0.0" in got.text


def test_metrics_is_read_only(worlds: Worlds) -> None:
    """/metrics answers GET only; a POST is refused and changes nothing."""
    world = worlds.open()
    durable.start_workflow(adding, 1, world=world, queue="q")
    client = testclient.TestClient(
        create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787"
    )
    assert client.post("/metrics").status_code == 405
    assert read_metrics(world).queue_depth == {"q": 1}
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None  # the exposition keeps no files of its own
