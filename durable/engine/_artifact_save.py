"""``durable.save_artifact``: store bytes by content; inside a run, an idempotent effect."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..store import sha256_of
from ._artifacts import ArtifactRef, store_bytes
from ._context import CURRENT
from ._decorators import make_decorator

if TYPE_CHECKING:
    from ._world import WorldCore

_PAYLOAD: ContextVar[bytes | None] = ContextVar("durable_artifact_payload", default=None)


async def _save_effect(name: str, sha256: str, size: int, media_type: str | None) -> ArtifactRef:
    run = CURRENT.get().run  # type: ignore[union-attr]
    data = _PAYLOAD.get()
    if data is None or sha256_of(data) != sha256:  # pragma: no cover - guarded by save_artifact
        raise ConfigurationError("save_artifact's payload was lost between its intent and its write.")
    return store_bytes(run.world, name, data, media_type, run.run_id)


_save = make_decorator("tool", _save_effect, {"name": "save_artifact", "idempotent": True})


async def save_artifact(
    name: str,
    data: bytes | bytearray | memoryview,
    media_type: str | None = None,
    *,
    world: WorldCore | None = None,
) -> ArtifactRef:
    """Store bytes by content (sha256) and return a reference to them.

    Inside a run the save is an idempotent effect: the log records the
    reference, a resume returns it without writing again, and the payload is
    checked against its hash before the resumed run executes anything.

    Args:
        name: A name for people (file name, report title); not part of the address.
        data: The payload.
        media_type: For example ``"text/markdown"``.
        world: Where to store it when called outside a run (inside a run, the run's world).

    Returns:
        The ``ArtifactRef`` (``.read()``, ``.path``, ``.sha256``).

    Raises:
        ConfigurationError: ``data`` is not bytes, or there is no run and no ``world``.
    """
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"save_artifact needs a non-empty name, not {name!r}.")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ConfigurationError(
            f"save_artifact stores bytes, not {type(data).__name__}; encode text first "
            "(for example text.encode())."
        )
    if media_type is not None and not isinstance(media_type, str):
        raise ConfigurationError(f"media_type must be a string, not {media_type!r}.")
    payload = bytes(data)
    scope = CURRENT.get()
    if scope is None:
        if world is None:
            raise ConfigurationError("save_artifact outside a run needs world=.")
        return store_bytes(world, name, payload, media_type, None)
    run = scope.run
    if world is not None and world is not run.world:
        raise ConfigurationError("inside a run, save_artifact stores in the run's own world; drop world=.")
    token = _PAYLOAD.set(payload)
    try:
        ref: ArtifactRef = await _save(name, sha256_of(payload), len(payload), media_type)
    finally:
        _PAYLOAD.reset(token)
    return ref.bound(run.world.artifacts)
