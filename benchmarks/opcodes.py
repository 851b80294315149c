"""Python opcodes executed per durable step: an exact count, where instructions carry noise.

Run from the repository root::

    PYTHONHASHSEED=0 python benchmarks/opcodes.py write    # a step that executes
    PYTHONHASHSEED=0 python benchmarks/opcodes.py replay   # a step that replays
    PYTHONHASHSEED=0 python benchmarks/opcodes.py write --by-function  # and where they go

It counts the opcode events of ``sys.settrace`` (``f_trace_opcodes``) over a
run of 50 and of 150 steps, after a warm-up run, and prints the difference
per step. C code (SQLite, pydantic-core, the JSON encoder) is not counted, so
the figure isolates what the Python engine does per call: the cost of a hook
such as a tracing check shows up exactly. ``TRACE=1`` installs an
OpenTelemetry SDK tracer provider first (spans kept in memory).
``--by-function`` also lists the opcodes per step of each function (file,
first line, name) that executes at least half an opcode per step, most
first: the profile that shows which function to make leaner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections import Counter
from typing import Any

import durable

if os.environ.get("TRACE") == "1":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(_provider)


@durable.step(max_visits=1_000_000)
async def s(i: int) -> int:
    return i + 1


@durable.workflow
async def wf(n: int) -> int:
    total = 0
    for i in range(n):
        total += await s(i)
    durable.interrupt("replay me")
    return total


COUNT = 0
BY_FUNCTION: Counter[tuple[str, int, str]] = Counter()
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(durable.__file__)))


def tracer(frame: Any, event: str, arg: Any) -> Any:
    global COUNT
    frame.f_trace_opcodes = True
    if event == "opcode":
        COUNT += 1
    return tracer


def function_tracer(frame: Any, event: str, arg: Any) -> Any:
    global COUNT
    frame.f_trace_opcodes = True
    if event == "opcode":
        COUNT += 1
        code = frame.f_code
        BY_FUNCTION[(code.co_filename, code.co_firstlineno, code.co_qualname)] += 1
    return function_tracer


async def run(mode: str, n: int) -> int:
    tmp = tempfile.mkdtemp()
    try:
        world = durable.local_world(tmp)
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(wf, 2, world=world, run_id="warm")  # first-call costs out of the way
        global COUNT
        if mode == "write":
            COUNT = 0
            sys.settrace(tracer)
            with contextlib.suppress(durable.RunInterrupted):
                await durable.run_workflow(wf, n, world=world, run_id=f"r{n}")
            sys.settrace(None)
            return COUNT
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(wf, n, world=world, run_id=f"r{n}")
        COUNT = 0
        sys.settrace(tracer)
        await durable.run_workflow(wf, n, world=world, run_id=f"r{n}", resume="ok")
        sys.settrace(None)
        return COUNT
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _where(filename: str) -> str:
    return os.path.relpath(filename, _ROOT) if filename.startswith(_ROOT) else os.path.basename(filename)


mode = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "write"
by_function = "--by-function" in sys.argv
if by_function:
    tracer = function_tracer  # the same count, kept per function too
a = asyncio.run(run(mode, 50))
first, BY_FUNCTION = BY_FUNCTION, Counter()
b = asyncio.run(run(mode, 150))
if by_function:
    per_step = {k: (BY_FUNCTION[k] - first[k]) / 100 for k in BY_FUNCTION | first}
    for (filename, line, name), n in sorted(per_step.items(), key=lambda kv: -kv[1]):
        if n >= 0.5:
            print(f"{n:8.1f}  {_where(filename)}:{line} {name}")
print(f"{mode} per_step_opcodes={(b - a) / 100:.1f}")
