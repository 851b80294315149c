"""``patched(change_id)``: a change that would otherwise be nondeterministic, taken only by new executions.

A run that reaches the call while executing new code records a marker and
takes the new side (``True``). A resume that replays a log which went past
that point without the marker (the run started under older code) takes the
old side (``False``), so the old path's recorded calls replay. The marker
takes no position among the scope's calls: deleting the ``if patched(...)``
once no old run is left shifts nothing.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from ..events import PATCH_MARKED
from . import _event_writer as ev
from ._context import CURRENT
from ._keys import patch_key


def patched(change_id: str) -> bool:
    """Whether this execution takes the new side of the change ``change_id``.

    Call it where new code differs from the code that old runs recorded,
    inside a workflow or step body: ``if durable.patched("v2-scoring"): new
    else: old``. Each call counts on its own (in a loop, once per visit;
    in parallel branches, per branch).

    Args:
        change_id: A name for the change, the same in every place it guards.

    Returns:
        ``True`` on a new execution (the marker is recorded) or outside a run;
        ``False`` when a resume replays a log that went past this point without
        the marker.

    Raises:
        ConfigurationError: ``change_id`` is not a non-empty string without brackets or ``#``.

    Example:
        >>> patched("new-scoring")  # outside a run: the new code
        True
    """
    if not isinstance(change_id, str) or not change_id or any(c in change_id for c in "[]#\n"):
        raise ConfigurationError(
            f"durable.patched() takes a change id, a non-empty string without '[', ']', '#' or a "
            f'newline (e.g. "new-scoring"), not {change_id!r}.'
        )
    scope = CURRENT.get()
    if scope is None:
        return True
    counts = scope.patches if scope.patches is not None else {}
    visit = counts.get(change_id, 0)
    counts[change_id] = visit + 1
    scope.patches = counts
    run = scope.run
    key = patch_key(scope.prefix, change_id, visit)
    rec = run.recorded
    if key in rec.patches:
        return True
    if run.replaying and rec.position(scope.path, scope.n) is not None:
        return False  # the log recorded the old path's next call here: it went past without the marker
    data = ev.patch_marked(key, change_id)
    run.emit(PATCH_MARKED, data)
    rec.patches[key] = data
    run.flush_soon()
    return True
