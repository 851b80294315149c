"""What a durable body can ask about the call it runs in: its idempotency key and its model."""

from __future__ import annotations

from ..errors import ConfigurationError
from ._context import current_scope
from ._effects import current_effect_key


def idempotency_key() -> str | None:
    """The stable idempotency key of the running ``@tool`` or ``@model_call``.

    Hand it to external systems so they can deduplicate a re-driven call.
    It is ``"<run_id>:<effect key>"`` and does not change across resumes.
    Outside a run it is ``None``: there a decorated function is a plain
    call, which nothing re-drives, so there is nothing to deduplicate.

    Returns:
        The key inside an effect body in a run; ``None`` outside any run.

    Raises:
        ConfigurationError: Called inside a run, but outside a tool or model call body
            (a step or workflow body has no idempotency key).
    """
    return current_effect_key()


def model_for(slot: str, default: str | None = None) -> str:
    """The model the running run maps ``slot`` to (``run_workflow(models=...)``).

    A ``@model_call`` body asks this which model to call, so a fork with
    another model mapping calls other models after its checkpoint.

    Args:
        slot: The slot name, e.g. ``"worker"``.
        default: What to return when the run maps no model to ``slot``.

    Raises:
        ConfigurationError: Called outside a run, or the slot is unmapped and there is no default.
    """
    models = current_scope("durable.model_for()").run.models
    if slot in models:
        return models[slot]
    if default is None:
        raise ConfigurationError(
            f"this run maps no model to slot {slot!r} (mapped: {sorted(models)}); pass "
            f"models={{{slot!r}: ...}} to run_workflow, or give model_for a default."
        )
    return default
