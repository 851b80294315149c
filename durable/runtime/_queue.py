"""``Queue``: a named line of runs that workers claim under limits."""

from __future__ import annotations

from ..errors import ConfigurationError
from ..store import QueueLimits


def _bound(name: str, what: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"Queue {name!r}: {what} must be an int >= 1 or None, not {value!r}.")
    return value


class Queue:
    """A queue of runs, claimed by the workers that serve it under its limits.

    The limits hold across every worker process of the world: they are
    checked in the world's database when a worker claims.

    Args:
        name: The queue's name (``start_workflow(queue=...)`` and ``Worker(queues=...)``).
        concurrency: Runs of the queue in flight across all workers.
        worker_concurrency: Runs of the queue in flight on one worker.
        rate_limit: ``(n, seconds)``: at most ``n`` runs start in any window of ``seconds``.
        partition_concurrency: Runs in flight per ``partition_key`` (one customer at a time).

    Raises:
        ConfigurationError: A limit is not a positive int (or ``rate_limit`` not ``(n, seconds)``).

    Example:
        >>> q = Queue("llm", concurrency=4, rate_limit=(60, 60.0))
        >>> q.name
        'llm'
    """

    __slots__ = ("concurrency", "name", "partition_concurrency", "rate_limit", "worker_concurrency")

    def __init__(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        rate_limit: tuple[int, float] | None = None,
        partition_concurrency: int | None = None,
    ):
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a Queue needs a non-empty name, not {name!r}.")
        self.name = name
        self.concurrency = _bound(name, "concurrency", concurrency)
        self.worker_concurrency = _bound(name, "worker_concurrency", worker_concurrency)
        self.partition_concurrency = _bound(name, "partition_concurrency", partition_concurrency)
        if rate_limit is not None:
            ok = isinstance(rate_limit, tuple) and len(rate_limit) == 2
            n, window = rate_limit if ok else (None, None)
            if not ok or _bound(name, "rate_limit[0]", n) is None or not isinstance(window, int | float):
                raise ConfigurationError(
                    f"Queue {name!r}: rate_limit takes (n, seconds), e.g. (60, 60.0), not {rate_limit!r}."
                )
            if window <= 0:
                raise ConfigurationError(
                    f"Queue {name!r}: the rate_limit window must be > 0 s, not {window!r}."
                )
            rate_limit = (int(n), float(window))  # type: ignore[arg-type]
        self.rate_limit = rate_limit

    def limits(self) -> QueueLimits:
        """The limits the store applies when a worker claims from this queue."""
        return QueueLimits(self.name, self.concurrency, self.rate_limit, self.partition_concurrency)

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"


def queue_name(queue: Queue | str | None) -> str | None:
    """The name of a queue given as a ``Queue`` or its name."""
    if queue is None or isinstance(queue, Queue):
        return None if queue is None else queue.name
    if isinstance(queue, str) and queue:
        return queue
    raise ConfigurationError(f"queue= takes a Queue or a queue name, not {queue!r}.")
