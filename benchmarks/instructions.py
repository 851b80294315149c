"""Instructions per durable step, per replayed step and per call outside a run.

Run from the repository root under callgrind, which counts instructions
rather than seconds, so two revisions compare on a busy machine too::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/instructions.py MODE STEPS

MODE is ``write`` (a fresh run of STEPS steps on a local world, ``"process"``
durability), ``replay`` (the resume of such a run, every step replayed),
``plain`` (STEPS calls of a decorated step outside any run) or ``none``.
The per-step figure is ``(total(MODE, N) - total(MODE, 0)) / N``; a replayed
step is the ``replay`` figure less the ``write`` one (``replay`` writes the
run first). Set ``PYTHONHASHSEED=0`` so that two runs count alike.

With ``TRACE=1`` in the environment an OpenTelemetry SDK tracer provider
is installed first (spans kept in memory, as a test would): the per-step
figure then includes a span per step. Without it no provider is set, so
tracing is off even where ``opentelemetry`` is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile

import durable

if os.environ.get("TRACE") == "1":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(_provider)

MODE = sys.argv[1] if len(sys.argv) > 1 else "write"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000


@durable.step(max_visits=1_000_000)
async def s(i: int) -> int:
    return i + 1


@durable.workflow
async def wf(n: int) -> int:
    total = 0
    for i in range(n):
        total += await s(i)
    durable.interrupt("replay me")  # the resume with an answer replays every step
    return total


async def main() -> None:
    tmp = tempfile.mkdtemp()
    try:
        if MODE == "plain":
            for i in range(STEPS):
                await s(i)
            return
        if MODE == "none":
            return
        world = durable.local_world(tmp)
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(wf, STEPS, world=world, run_id="r")
        if MODE == "replay":
            await durable.run_workflow(wf, STEPS, world=durable.local_world(tmp), run_id="r", resume="ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


asyncio.run(main())
