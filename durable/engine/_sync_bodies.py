"""Sync bodies run on the run's event loop; code in one that needs a loop of its own is refused with advice.

A sync ``@workflow`` or ``@step`` body is called on the event loop that drives
the run, so ``agent.run_sync()``, ``asyncio.run()`` or
``loop.run_until_complete()`` inside it finds that loop busy and fails with a
bare ``RuntimeError``. That is a condition to fix in the code, not the run's
outcome: it is raised as ``ConfigurationError`` (never recorded as the run's
failure), so once the body is ``async def`` the same ``run_id`` runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError

_LOOP_BUSY = ("This event loop is already running", "cannot be called from a running event loop")


def call_sync_body(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    what: str,
    run_id: str,
    path: str,
) -> Any:
    """Call a sync body; a nested event-loop start inside it becomes a ``ConfigurationError`` with advice."""
    try:
        return fn(*args, **kwargs)
    except RuntimeError as exc:
        if not any(text in str(exc) for text in _LOOP_BUSY):
            raise
        raise ConfigurationError(
            f"run {run_id!r}: the sync {what} started an event loop of its own (agent.run_sync(), "
            "asyncio.run() or loop.run_until_complete()), but a sync body runs on the event loop that "
            f"drives the run: {exc}. Make the {what} 'async def' and await the async call instead "
            "('await agent.run(...)' for 'agent.run_sync(...)'), then resume the run: "
            f"run_workflow(..., run_id={run_id!r}, retry_failed=True) or `little resume {run_id}`.",
            run_id=run_id,
            path=path or None,
        ) from exc
