"""What ``/metrics`` says about a world, in the Prometheus text format (extra ``ui``).

Every scrape reads the world afresh (a ``prometheus_client`` custom collector,
no counter kept in this process), so the numbers are the world's whatever
process wrote it: runs by workflow and status, runs waiting in each queue and
how long the oldest has waited, blocked runs, the live workers, and those
of them that drive a run now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..engine import WorldCore


@dataclass
class WorldMetrics:
    """One look at a world: the numbers ``/metrics`` shows."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    """(workflow, status) → runs."""
    queue_depth: dict[str, int] = field(default_factory=dict)
    """Queue → runs enqueued and not claimed yet."""
    oldest_wait: dict[str, float] = field(default_factory=dict)
    """Queue → seconds the oldest enqueued run has waited."""
    blocked: int = 0
    workers_alive: int = 0
    """Workers serving the world now, idle or not."""
    workers_busy: int = 0
    """Live workers that drive at least one run now."""


def read_metrics(world: WorldCore, now: float | None = None) -> WorldMetrics:
    """The numbers of ``world`` now (``now`` in Unix seconds, default the world's clock)."""
    from ..runtime import control_of, driver_of, keeps_control, list_runs, live_workers

    now = world.clock() if now is None else now
    out = WorldMetrics()
    rows, _ = list_runs(world, status=None, workflow=None, limit=None, offset=0)
    for r in rows:
        key = (str(r["workflow"]), str(r["status"]))
        out.runs[key] = out.runs.get(key, 0) + 1
    out.blocked = sum(n for (_, status), n in out.runs.items() if status == "blocked")
    if not keeps_control(world):
        return out
    ctl = control_of(world)
    for rec in ctl.unstarted():
        if rec.state != "enqueued" or rec.queue is None:
            continue
        out.queue_depth[rec.queue] = out.queue_depth.get(rec.queue, 0) + 1
        waited = max(0.0, now - rec.created_at)
        out.oldest_wait[rec.queue] = max(out.oldest_wait.get(rec.queue, 0.0), waited)
    live = {w.name for w in live_workers(world)}
    busy = {
        rec.owner
        for rec in ctl.claimed()
        if rec.owner in live
        and world.log.info(rec.run_id)
        and driver_of(world, rec.run_id)["driver"] == "live"
    }
    out.workers_alive = len(live)
    out.workers_busy = len(busy)
    return out


class WorldCollector:
    """A ``prometheus_client`` collector that reads ``world`` on every scrape."""

    def __init__(self, world: WorldCore, clock: Callable[[], float] | None = None) -> None:
        self.world = world
        self.clock = clock

    def collect(self) -> Iterator[Any]:
        """The metric families of one look at the world."""
        from prometheus_client.core import GaugeMetricFamily

        m = read_metrics(self.world, None if self.clock is None else self.clock())
        runs = GaugeMetricFamily(
            "durable_runs", "Runs by workflow and status.", labels=["workflow", "status"]
        )
        for (workflow, status), n in sorted(m.runs.items()):
            runs.add_metric([workflow, status], n)
        yield runs
        depth = GaugeMetricFamily(
            "durable_queue_depth", "Runs enqueued and not claimed yet, by queue.", labels=["queue"]
        )
        wait = GaugeMetricFamily(
            "durable_queue_oldest_wait_seconds",
            "Seconds the oldest enqueued run of the queue has waited.",
            labels=["queue"],
        )
        for queue in sorted(m.queue_depth):
            depth.add_metric([queue], m.queue_depth[queue])
            wait.add_metric([queue], m.oldest_wait[queue])
        yield depth
        yield wait
        yield GaugeMetricFamily(
            "durable_blocked_runs", "Runs blocked until a person decides.", value=m.blocked
        )
        yield GaugeMetricFamily(
            "durable_workers_alive", "Workers serving the world now, idle or busy.", value=m.workers_alive
        )
        yield GaugeMetricFamily(
            "durable_workers_busy", "Live workers that drive at least one run now.", value=m.workers_busy
        )


def exposition(world: WorldCore) -> tuple[bytes, str]:
    """The Prometheus text of ``world`` and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorldCollector(world))
    return generate_latest(registry), CONTENT_TYPE_LATEST
