"""OpenTelemetry metrics of runs, steps, effects, recoveries and queues (extra ``otel``).

Metrics are on when ``opentelemetry-api`` is importable and the application
installed a real meter provider (``metrics.set_meter_provider``); otherwise
every hook here is one look at the provider and returns. The instruments are
made once per meter provider (kept beside it, weakly), from the meter
``durable``:

- ``durable.runs.started``, ``durable.runs.completed``, ``durable.runs.failed``,
  ``durable.runs.blocked`` (counters, attribute ``durable.workflow``);
- ``durable.recoveries`` (counter, ``durable.workflow``): drives of runs whose
  driver died, taken over by a worker or ``recover_runs``;
- ``durable.step.duration`` and ``durable.effect.duration`` (histograms, in
  seconds, attributes ``durable.name``, ``durable.kind`` and ``durable.outcome``
  ``ok`` or ``error``): one attempt of a step's body or of a tool or model call;
- ``durable.queue.wait`` (histogram, seconds, ``durable.queue``): how long a
  run waited in its queue before a worker claimed it.

Replayed calls record nothing: a measurement means the body ran. The
instruments of a drive are looked up when it starts (``RunContext.meters``),
as its tracer is: a provider installed during a drive counts from the next.
"""

from __future__ import annotations

import weakref
from typing import Any

try:
    from opentelemetry import metrics as _metrics
except ImportError:  # the extra is not installed: metrics stay off
    _metrics = None  # type: ignore[assignment]

_RUN_EVENTS = ("started", "completed", "failed", "blocked")


class Meters:
    """The instruments of one meter provider."""

    def __init__(self, meter: Any) -> None:
        self.runs = {
            what: meter.create_counter(f"durable.runs.{what}", unit="{run}", description=f"Runs {what}.")
            for what in _RUN_EVENTS
        }
        self.recoveries = meter.create_counter(
            "durable.recoveries", unit="{drive}", description="Drives of runs whose driver died."
        )
        self.step_duration = meter.create_histogram(
            "durable.step.duration", unit="s", description="One attempt of a step's body."
        )
        self.effect_duration = meter.create_histogram(
            "durable.effect.duration", unit="s", description="One attempt of a tool or model call."
        )
        self.queue_wait = meter.create_histogram(
            "durable.queue.wait", unit="s", description="Time a run waited in its queue before a claim."
        )


_BY_PROVIDER: weakref.WeakKeyDictionary[Any, Meters] = weakref.WeakKeyDictionary()
"""Instruments made for each meter provider (a provider set later gets its own)."""


def meters() -> Meters | None:
    """The instruments of the application's meter provider, or ``None`` when none was configured."""
    if _metrics is None:
        return None
    provider = _metrics.get_meter_provider()
    if isinstance(provider, _metrics.NoOpMeterProvider) or type(provider).__name__ == "_ProxyMeterProvider":
        return None
    found = _BY_PROVIDER.get(provider)
    if found is None:
        found = _BY_PROVIDER[provider] = Meters(provider.get_meter("durable"))
    return found


_LOOK: Any = object()


def count_run(what: str, workflow: str, m: Meters | None = _LOOK) -> None:
    """Count a run ``started``, ``completed``, ``failed`` or ``blocked``.

    ``m``: the drive's instruments (``RunContext.meters``) when the caller
    looked them up already; else they are looked up here.
    """
    if m is _LOOK:
        m = meters()
    if m is not None:
        m.runs[what].add(1, {"durable.workflow": workflow})


def count_recovery(workflow: str) -> None:
    """Count one recovery: a drive of a run whose driver died."""
    m = meters()
    if m is not None:
        m.recoveries.add(1, {"durable.workflow": workflow})


def record_attempt(m: Meters, kind: str, name: str, seconds: float, ok: bool) -> None:
    """Record the duration of one attempt of a step (``kind`` step) or an effect (tool, model).

    ``m`` is the drive's ``RunContext.meters``: the engine looks the provider
    up once per drive, and calls this only when metrics are on.
    """
    histogram = m.step_duration if kind == "step" else m.effect_duration
    outcome = "ok" if ok else "error"
    histogram.record(
        seconds, attributes={"durable.name": name, "durable.kind": kind, "durable.outcome": outcome}
    )


def record_queue_wait(queue: str, seconds: float) -> None:
    """Record how long a run waited in ``queue`` before a worker claimed it."""
    m = meters()
    if m is not None:
        m.queue_wait.record(max(0.0, seconds), attributes={"durable.queue": queue})
