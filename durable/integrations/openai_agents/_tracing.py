"""The SDK's traces, emitted once: what a resumed run replays is not traced again.

A resumed agent run runs the SDK's loop again from its start: the runner
opens its trace, agent and turn spans again, and its tools' function spans,
though the replayed calls run nothing. Every processor of the SDK's trace
provider hears of a trace or span through one multi-processor; its methods
are wrapped in place, once, so that inside a durable agent run:

- the trace of a resumed run (same id: a durable run's agent runs get a trace
  id derived from the run and its session) is not started again;
- a span that ends before the resumed run made a live call, or covered a
  replayed tool call, is dropped; one that started then and ends after live
  work (the agent span around the cut call) is told when it ends, start first.

Spans of the first execution still queued in an exporter when the process
was killed are lost: once, never twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agents.tracing import get_current_span, get_trace_provider

from ._state import CURRENT_RUN

WRAPPED = "__durable_wrapped__"


def trace_id(run_id: str, path: str) -> str:
    """The trace id of a durable run's agent run: the same on every resume."""
    return "trace_" + hashlib.sha256(f"{run_id}:{path}".encode()).hexdigest()[:32]


def replayed_call() -> None:
    """Note that the current span (a tool's function span) covered a replayed call."""
    span_id = getattr(get_current_span(), "span_id", None)
    run = CURRENT_RUN.get()
    if isinstance(span_id, str) and run is not None:
        run.replayed.add(span_id)


def quiet_replays() -> None:
    """Wrap the trace provider's processors so replayed work is not traced twice (once)."""
    multi = getattr(get_trace_provider(), "_multi_processor", None)
    if multi is None or getattr(multi.on_span_end, WRAPPED, False):
        return
    trace_start, span_start, span_end = multi.on_trace_start, multi.on_span_start, multi.on_span_end

    def on_trace_start(trace: Any) -> None:
        run = CURRENT_RUN.get()
        if run is None or not (run.resumed and not run.live):
            trace_start(trace)

    def on_span_start(span: Any) -> None:
        run = CURRENT_RUN.get()
        if run is not None and run.resumed and not run.live:
            run.quiet.add(span.span_id)
            return
        span_start(span)

    def on_span_end(span: Any) -> None:
        run = CURRENT_RUN.get()
        if run is None:
            span_end(span)
            return
        span_id = span.span_id
        replayed = span_id in run.replayed
        run.replayed.discard(span_id)
        if replayed or (run.resumed and not run.live):
            run.quiet.discard(span_id)
            return
        if span_id in run.quiet:  # it began in the replay and ends after live work: told once, now
            run.quiet.discard(span_id)
            span_start(span)
        span_end(span)

    for fn in (on_trace_start, on_span_start, on_span_end):
        setattr(fn, WRAPPED, True)
    multi.on_trace_start = on_trace_start
    multi.on_span_start = on_span_start
    multi.on_span_end = on_span_end
