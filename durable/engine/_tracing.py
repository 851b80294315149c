"""OpenTelemetry spans for a run's drive, its step attempts, effects and child runs (extra ``otel``).

Tracing is asked for once per drive (``tracing()``): it is on when
``opentelemetry-api`` is importable and the application installed a real
tracer provider (``trace.set_tracer_provider``); otherwise the run's
``tracer`` stays ``None`` and every hook in the engine is one ``is None``
test. Nothing is exported unless the application configured an exporter on
its provider.

Spans, each named after its call:

- ``run <workflow>``: one drive of a run (a resume is a new drive). A new
  run records its span's ``traceparent`` in ``run.started``; a resumed run's
  span links to that recorded context. A run started by ``start_workflow``
  continues the trace of the code that started it, wherever it is driven.
- ``step <name>``: one attempt of a step's body.
- ``tool <name>`` / ``model <name>``: one attempt of an effect (a tool or a model call).
- ``workflow <name>``: a child run called from a run; the child's own
  ``run <name>`` span is its child, in the same trace.

Replayed calls emit no span: a span means the body ran. The run span says
how many recorded calls its drive found (``durable.recorded_calls``).
"""

from __future__ import annotations

from typing import Any

from ..events import RUN_STARTED

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the extra is not installed: tracing stays off
    _trace = None  # type: ignore[assignment]

_PROPAGATOR: Any = None if _trace is None else TraceContextTextMapPropagator()
_INSTRUMENTATION = "durable"


class Traced:
    """A started span made current; ``end`` detaches it and ends it, with the outcome."""

    __slots__ = ("span", "token")

    def __init__(self, span: Any, token: object | None):
        self.span = span
        self.token = token

    def end(self, exc: BaseException | None = None) -> None:
        """End the span: an ``Exception`` marks it as an error, a control-flow stop is noted."""
        span = self.span
        if exc is not None:
            if isinstance(exc, Exception):
                span.record_exception(exc)
                span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            else:  # an interrupt, a cancellation, a stopping worker: not a failure of the call
                span.set_attribute("durable.stopped", type(exc).__name__)
        if self.token is not None:
            _otel_context.detach(self.token)  # type: ignore[arg-type]
        span.end()


class Tracing:
    """The tracer of one drive (made only when tracing is on)."""

    __slots__ = ("tracer",)

    def __init__(self, tracer: Any):
        self.tracer = tracer

    def start(
        self, name: str, run_id: str, path: str, attempt: int, kind: str, *, current: bool = True
    ) -> Traced:
        """Start a call's span (``kind`` is step, tool, model, workflow).

        ``current=False`` leaves the current context alone: a stream's body
        runs between the consumer's steps, in the consumer's context.
        """
        span = self.tracer.start_span(
            f"{kind} {name}",
            attributes={
                "durable.run_id": run_id,
                "durable.path": path,
                "durable.attempt": attempt,
                "durable.replayed": False,
                "durable.kind": kind,
            },
        )
        if not current:
            return Traced(span, None)
        return Traced(span, _otel_context.attach(_trace.set_span_in_context(span)))

    def start_session(self, role: str, run_id: str, path: str, resumed: bool) -> Traced:
        """Start an agent session's span (``resumed``: the log recorded its start before)."""
        span = self.tracer.start_span(
            f"session {role}",
            attributes={
                "durable.run_id": run_id,
                "durable.path": path,
                "durable.attempt": 1,
                "durable.replayed": resumed,
                "durable.kind": "session",
                "durable.role": role,
            },
        )
        return Traced(span, _otel_context.attach(_trace.set_span_in_context(span)))

    def start_run(
        self,
        workflow: str,
        run_id: str,
        *,
        resumed: bool,
        recorded_calls: int,
        link_to: str | None,
        parent: str | None,
    ) -> Traced:
        """Start a drive's span: under ``parent`` (a traceparent) if given, linked to ``link_to``."""
        ctx = _PROPAGATOR.extract({"traceparent": parent}) if parent else None
        links = []
        if link_to:
            linked = _trace.get_current_span(_PROPAGATOR.extract({"traceparent": link_to})).get_span_context()
            if linked.is_valid:
                links.append(_trace.Link(linked, {"durable.link": RUN_STARTED}))
        span = self.tracer.start_span(
            f"run {workflow}",
            context=ctx,
            links=links,
            attributes={
                "durable.run_id": run_id,
                "durable.path": "",
                "durable.attempt": 1,
                "durable.replayed": resumed,
                "durable.kind": "run",
                "durable.workflow": workflow,
                "durable.recorded_calls": recorded_calls,
            },
        )
        return Traced(span, _otel_context.attach(_trace.set_span_in_context(span)))


def tracing() -> Tracing | None:
    """The tracer for a new drive, or ``None`` when no tracer provider was configured."""
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider):
        return None
    return Tracing(provider.get_tracer(_INSTRUMENTATION))


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or ``None`` (no tracing, no valid span)."""
    if _trace is None or not _trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")
