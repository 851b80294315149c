"""OpenTelemetry spans of runs, steps, effects and child runs, on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import durable
from durable import Queue, Worker
from tests.conftest import Worlds

CALLS: list[str] = []


@durable.tool
async def fetch(x: int) -> int:
    CALLS.append(f"fetch:{x}")
    return x * 10


@durable.step
async def double(x: int) -> int:
    CALLS.append(f"double:{x}")
    return 2 * await fetch(x)


@durable.workflow
async def pipeline(x: int) -> int:
    first = await double(x)
    answer = durable.interrupt("go on?")
    return first + (1 if answer == "yes" else 0)


@durable.workflow
async def child(x: int) -> int:
    return await double(x)


@durable.workflow
async def parent(x: int) -> int:
    return await child(x) + 1


FLAKY: dict[str, int] = {}


@durable.step(retry=durable.RetryPolicy(max_attempts=3, backoff=0.0))
async def flaky(key: str) -> str:
    FLAKY[key] = FLAKY.get(key, 0) + 1
    if FLAKY[key] < 2:
        raise ValueError(f"attempt {FLAKY[key]} fails")
    return key


@durable.workflow
async def retried(key: str) -> str:
    return await flaky(key)


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in exporter.get_finished_spans():
        out.setdefault(s.name, []).append(s)
    return out


async def test_spans_are_named_after_the_calls_with_their_attributes(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """A run's drive, its step and its tool each make a span with run id, path, attempt and replayed."""
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(pipeline, 3, world=world, run_id="traced")
    got = by_name(spans)
    assert sorted(got) == ["run pipeline", "step double", "tool fetch"]
    run, step, tool = got["run pipeline"][0], got["step double"][0], got["tool fetch"][0]
    assert run.attributes["durable.run_id"] == "traced"
    assert run.attributes["durable.replayed"] is False
    assert step.attributes["durable.path"] == "double"
    assert step.attributes["durable.attempt"] == 1
    assert step.attributes["durable.replayed"] is False
    assert tool.attributes["durable.run_id"] == "traced"
    assert tool.attributes["durable.path"] == "double.tool:fetch#0"
    assert step.parent.span_id == run.context.span_id
    assert tool.parent.span_id == step.context.span_id
    assert run.attributes["durable.stopped"] == "RunInterrupted"


async def test_a_resumed_run_makes_no_spans_for_replayed_calls_and_links_its_start(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """The resume's run span links to the first drive's span; the replayed step and tool make none."""
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(pipeline, 4, world=world, run_id="resumed")
    first = by_name(spans)["run pipeline"][0]
    started = world.events("resumed")[0]
    assert started.traceparent is not None  # type: ignore[union-attr]
    assert f"{first.context.trace_id:032x}" in started.traceparent  # type: ignore[union-attr]
    spans.clear()
    assert await durable.run_workflow(pipeline, 4, world=worlds.open(), run_id="resumed", resume="yes") == 81
    got = by_name(spans)
    assert sorted(got) == ["run pipeline"]
    again = got["run pipeline"][0]
    assert again.attributes["durable.replayed"] is True
    assert again.attributes["durable.recorded_calls"] == 2
    assert [(link.context.trace_id, link.context.span_id) for link in again.links] == [
        (first.context.trace_id, first.context.span_id)
    ]


async def test_a_child_run_continues_its_parents_trace(worlds: Worlds, spans: InMemorySpanExporter) -> None:
    """The child run's span sits under the parent's child-run span, in the parent's trace."""
    assert await durable.run_workflow(parent, 1, world=worlds.open(), run_id="fam") == 21
    got = by_name(spans)
    outer, call, inner = got["run parent"][0], got["workflow child"][0], got["run child"][0]
    assert call.parent.span_id == outer.context.span_id
    assert inner.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {outer.context.trace_id}
    assert inner.attributes["durable.run_id"] != "fam"
    assert call.attributes["durable.child_run_id"] == inner.attributes["durable.run_id"]


async def test_each_step_attempt_has_a_span_and_a_failed_one_is_an_error(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """A retried step makes one span per attempt, numbered; the failed attempt records its error."""
    FLAKY.clear()
    assert await durable.run_workflow(retried, "k", world=worlds.open(), run_id="retry") == "k"
    attempts = sorted(by_name(spans)["step flaky"], key=lambda s: s.attributes["durable.attempt"])
    assert [s.attributes["durable.attempt"] for s in attempts] == [1, 2]
    assert attempts[0].status.status_code == trace.StatusCode.ERROR
    assert "attempt 1 fails" in attempts[0].status.description
    assert attempts[0].events[0].name == "exception"
    assert attempts[1].status.status_code == trace.StatusCode.UNSET


@durable.tool
async def lookup(q: str) -> str:
    CALLS.append(f"lookup:{q}")
    return q.upper()


@durable.workflow
async def agent(q: str) -> str:
    async with durable.session("planner", tools=[lookup]):
        found = await lookup(q)
        answer = durable.interrupt("send it?")
        return f"{found}:{answer}"


async def test_an_agent_session_has_a_span_over_its_calls(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """A session's calls sit under its span; a resumed session's span says so and has no replayed calls."""
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(agent, "q", world=world, run_id="agent")
    got = by_name(spans)
    run, session, tool = got["run agent"][0], got["session planner"][0], got["tool lookup"][0]
    assert session.parent.span_id == run.context.span_id
    assert tool.parent.span_id == session.context.span_id
    assert session.attributes["durable.path"] == "session:planner#0"
    assert session.attributes["durable.kind"] == "session"
    assert session.attributes["durable.role"] == "planner"
    assert session.attributes["durable.replayed"] is False
    assert session.attributes["durable.stopped"] == "RunInterrupted"
    spans.clear()
    assert await durable.run_workflow(agent, "q", world=worlds.open(), run_id="agent", resume="ok") == "Q:ok"
    got = by_name(spans)
    assert sorted(got) == ["run agent", "session planner"]  # the replayed tool makes no span
    again = got["session planner"][0]
    assert again.attributes["durable.replayed"] is True
    assert again.parent.span_id == got["run agent"][0].context.span_id
    assert "durable.stopped" not in again.attributes


async def test_a_worker_driven_run_continues_the_trace_that_started_it(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """start_workflow records the caller's trace context; the worker's run span continues it."""
    world = worlds.open()
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        handle = durable.start_workflow(child, 2, world=world, queue=Queue("q"))
    async with Worker(world, workflows=[child], queues=[Queue("q")]):
        assert await asyncio.wait_for(handle.result(), 30) == 40
    run = by_name(spans)["run child"][0]
    assert run.context.trace_id == request.get_span_context().trace_id
    assert run.parent.span_id == request.get_span_context().span_id


async def test_without_a_tracer_provider_nothing_is_traced_or_recorded(worlds: Worlds) -> None:
    """With no provider configured the run records no trace context."""
    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(pipeline, 1, world=world, run_id="dark")
    assert world.events("dark")[0].traceparent is None  # type: ignore[union-attr]


def test_the_opcode_benchmark_counts_executed_and_replayed_steps() -> None:
    """benchmarks/opcodes.py prints a positive per-step count for both modes."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for mode in ("write", "replay"):
        out = subprocess.run(
            [sys.executable, "benchmarks/opcodes.py", mode],
            capture_output=True,
            text=True,
            cwd=root,
            env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
            timeout=120,
            check=True,
        ).stdout
        assert out.startswith(f"{mode} per_step_opcodes=")
        assert float(out.split("=")[1]) > 100


def test_without_opentelemetry_installed_runs_work_and_record_no_trace(tmp_path: Any) -> None:
    """With the opentelemetry package unimportable, a run completes and its run.started has no traceparent."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
        "import asyncio, durable\n"
        "from durable.engine import _tracing\n"
        "assert _tracing._trace is None and _tracing.tracing() is None and _tracing.traceparent() is None\n"
        "@durable.step\n"
        "async def one(x: int) -> int:\n"
        "    return x + 1\n"
        "@durable.workflow\n"
        "async def wf(x: int) -> int:\n"
        "    return await one(x)\n"
        f"w = durable.local_world({str(tmp_path / 'data')!r})\n"
        "assert asyncio.run(durable.run_workflow(wf, 1, world=w, run_id='r')) == 2\n"
        "print(w.events('r')[0].traceparent)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120, check=True
    ).stdout
    assert out.strip() == "None"


@durable.model_call
async def priced(turn: int) -> dict[str, Any]:
    return {"model": "small", "usage": {"prompt_tokens": 70, "completion_tokens": 7}, "turn": turn}


@durable.workflow
async def priced_loop(turns: int) -> int:
    for i in range(turns):
        await priced(i)
    return turns


async def test_a_model_calls_span_carries_its_usage_and_the_budget_spent_so_far(
    worlds: Worlds, spans: InMemorySpanExporter
) -> None:
    """Each model span has durable.usage.* from its response and durable.budget.* spent with it."""
    world = worlds.open()
    await durable.run_workflow(
        priced_loop, 2, world=world, run_id="u", budget=durable.Budget(max_tokens=1000)
    )
    calls = by_name(spans)["model priced"]
    assert [s.attributes["durable.usage.input_tokens"] for s in calls] == [70, 70]
    assert [s.attributes["durable.usage.output_tokens"] for s in calls] == [7, 7]
    assert calls[0].attributes["durable.usage.model"] == "small"
    assert [s.attributes["durable.budget.calls"] for s in calls] == [1, 2]
    assert [s.attributes["durable.budget.tokens"] for s in calls] == [77, 154]
