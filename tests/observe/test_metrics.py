"""OpenTelemetry metrics of runs, steps, effects, recoveries and queue waits (SDK in-memory reader)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

import durable
from durable import Queue, Worker
from durable.engine._metrics import meters
from tests.conftest import Worlds
from tests.runtime.test_unhappy import blocked_on_a_cut_call

CALLS: list[str] = []


@durable.tool
async def fetch(x: int) -> int:
    CALLS.append(f"fetch:{x}")
    return x * 10


@durable.step
async def double(x: int) -> int:
    return 2 * await fetch(x)


@durable.workflow
async def pipeline(x: int) -> int:
    first = await double(x)
    answer = durable.interrupt("go on?")
    return first + (1 if answer == "yes" else 0)


@durable.step
async def explode(x: int) -> int:
    raise ValueError(f"no {x}")


@durable.workflow
async def broken(x: int) -> int:
    return await explode(x)


def points(reader: Any) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Metric name → (attributes, data point) of everything the reader collected."""
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    out.setdefault(metric.name, []).append((dict(p.attributes), p))
    return out


def total(found: dict[str, list[tuple[dict[str, Any], Any]]], metric: str, **attrs: str) -> float:
    """The sum of a counter's points (or a histogram's counts) whose attributes include ``attrs``."""
    n = 0.0
    for a, p in found.get(metric, []):
        if all(a.get(f"durable.{k}") == v for k, v in attrs.items()):
            n += p.count if hasattr(p, "count") else p.value
    return n


async def test_runs_started_and_completed_are_counted_once_across_a_resume(
    worlds: Worlds, metric_reader: Any
) -> None:
    """An interrupted then resumed run counts one start and one completion; replayed calls are not timed."""
    world = worlds.open()
    with contextlib.suppress(durable.RunInterrupted):
        await durable.run_workflow(pipeline, 1, world=world, run_id="r")
    await durable.run_workflow(pipeline, 1, world=world, run_id="r", resume="yes")
    found = points(metric_reader)
    assert total(found, "durable.runs.started", workflow="pipeline") == 1
    assert total(found, "durable.runs.completed", workflow="pipeline") == 1
    assert total(found, "durable.runs.failed") == 0
    assert total(found, "durable.step.duration", name="double", kind="step", outcome="ok") == 1
    assert total(found, "durable.effect.duration", name="fetch", kind="tool", outcome="ok") == 1
    [(_, p)] = found["durable.effect.duration"]
    assert p.sum >= 0 and p.min <= p.max


async def test_a_failed_run_and_its_failed_step_attempt_are_recorded(
    worlds: Worlds, metric_reader: Any
) -> None:
    """A step that raises is one error attempt, and its run is counted failed, not completed."""
    world = worlds.open()
    with pytest.raises((durable.RunFailedError, durable.StepFailedError, ValueError)):
        await durable.run_workflow(broken, 2, world=world, run_id="b")
    found = points(metric_reader)
    assert total(found, "durable.runs.failed", workflow="broken") == 1
    assert total(found, "durable.runs.completed") == 0
    assert total(found, "durable.step.duration", name="explode", outcome="error") >= 1
    assert total(found, "durable.step.duration", name="explode", outcome="ok") == 0


async def test_a_recovered_run_that_blocks_counts_a_recovery_and_a_blocked_run(
    worlds: Worlds, metric_reader: Any
) -> None:
    """A run whose driver died mid-call is recovered once, then blocked on its unknown commit."""
    world = worlds.open()
    await blocked_on_a_cut_call(world, "cut")
    found = points(metric_reader)
    assert total(found, "durable.recoveries", workflow="charging") == 1
    assert total(found, "durable.runs.blocked", workflow="charging") == 1


async def test_queue_wait_is_recorded_when_a_worker_claims(worlds: Worlds, metric_reader: Any) -> None:
    """Each run a worker claims from a queue records one queue wait, attributed to that queue."""
    world = worlds.open()
    q = Queue("jobs")
    handles = [durable.start_workflow(double_workflow, i, world=world, queue=q) for i in range(3)]
    async with Worker(world, workflows=[double_workflow], queues=[q]):
        for h in handles:
            await h.result(timeout=30)
    found = points(metric_reader)
    assert total(found, "durable.queue.wait", queue="jobs") == 3
    assert all(p.min >= 0 for _, p in found["durable.queue.wait"])


@durable.workflow
async def double_workflow(x: int) -> int:
    return await double(x)


def test_without_a_meter_provider_metrics_are_off() -> None:
    """With no meter provider set, no instrument is made and the hooks do nothing."""
    assert meters() is None
