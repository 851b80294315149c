"""Artifacts: bytes stored by content (sha256) beside the log, and checked on resume.

``await durable.save_artifact(name, data)`` stores ``data`` once per content
under ``<data_dir>/artifacts/<hex[:2]>/<hex>`` with a small JSON manifest
(``<hex>.json``: name, size, hash, media type, run, path) and returns an
``ArtifactRef``. Inside a run the save is an idempotent effect, so a resume
returns the recorded reference without writing again. A step output whose
JSON is longer than ``world.artifact_threshold`` bytes (UTF-8) is stored the
same way and referenced from its ``step.completed`` event, so the log stays
small however large the outputs are.

Before a resumed run executes anything, every artifact its log references is
read and hashed; a changed or missing payload raises ``ArtifactIntegrityError``.
A memory world keeps artifacts in memory.
"""

from __future__ import annotations

import json
from operator import methodcaller
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from ..errors import ArtifactIntegrityError, ConfigurationError
from ..store import ArtifactStore, hex_of, sha256_of
from ._context import CURRENT, RunContext
from ._recorded import Recorded

if TYPE_CHECKING:
    from ._world import WorldCore

_OUTPUT_MEDIA_TYPE = "application/json"


class ArtifactRef(BaseModel):
    """A stored artifact: what ``save_artifact`` returns and step events reference.

    Attributes:
        name: The name it was saved under.
        sha256: ``sha256:<hex>`` of the payload.
        size: The payload's length in bytes.
        media_type: The media type given when saving, if any.
        run_id: The run that saved it (``None`` outside a run).
        location: The payload's path relative to the data directory (``None`` in memory).

    Example:
        >>> import asyncio, durable
        >>> world = durable.memory_world()
        >>> ref = asyncio.run(durable.save_artifact("note.txt", b"hi", world=world))
        >>> ref.read(), ref.size
        (b'hi', 2)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    size: int
    media_type: str | None = None
    run_id: str | None = None
    location: str | None = None
    _store: ArtifactStore | None = PrivateAttr(default=None)

    def bound(self, store: ArtifactStore) -> ArtifactRef:
        """This reference, reading from ``store``."""
        self._store = store
        return self

    def _current_store(self) -> ArtifactStore:
        if self._store is not None:
            return self._store
        scope = CURRENT.get()
        if scope is not None:
            return scope.run.world.artifacts
        raise ConfigurationError(
            f"artifact {self.name!r} is not bound to a world; read it inside a run, or get it "
            "from save_artifact(..., world=world)."
        )

    @property
    def path(self) -> Path | None:
        """The payload's file (``None`` for an artifact held in memory)."""
        store = self._store
        if store is None:
            return None if self.location is None else Path(self.location)
        return store.resolve(self.location)

    def read(self) -> bytes:
        """The payload, checked against its hash.

        Raises:
            ArtifactIntegrityError: The payload is missing or does not match ``sha256``.
        """
        data = self._current_store().get(self.sha256)
        verify_payload(self, data, run_id=self.run_id)
        assert data is not None
        return data


def verify_payload(ref: ArtifactRef, data: bytes | None, *, run_id: str | None) -> None:
    """Raise ``ArtifactIntegrityError`` unless ``data`` is the payload ``ref`` recorded."""
    found = None if data is None else sha256_of(data)
    if found == ref.sha256:
        return
    where = f" ({ref.location})" if ref.location else ""
    what = "is missing" if found is None else "was changed"
    raise ArtifactIntegrityError(
        f"run {run_id!r}: artifact {ref.name!r}{where} {what}: the log recorded {ref.sha256}, "
        f"found {found or '(missing)'}. Restore the artifact from a backup and resume, or start "
        "a new run id.",
        run_id=run_id,
        artifact=ref.name,
        expected=ref.sha256,
        actual=found,
    )


# -- saving ---------------------------------------------------------------------------


def _manifest(name: str, sha: str, size: int, media_type: str | None, run_id: str | None) -> dict[str, Any]:
    return {"name": name, "sha256": sha, "size": size, "media_type": media_type, "run_id": run_id}


def store_bytes(
    world: WorldCore, name: str, data: bytes, media_type: str | None, run_id: str | None
) -> ArtifactRef:
    """Store ``data`` in ``world`` and return its bound reference (no log event)."""
    sha = sha256_of(data)
    meta = _manifest(name, sha, len(data), media_type, run_id)
    if world.data_dir is not None:
        hexdigest = hex_of(sha)
        meta["path"] = f"artifacts/{hexdigest[:2]}/{hexdigest}"
    location = world.artifacts.put(data, meta)
    ref = ArtifactRef(
        name=name, sha256=sha, size=len(data), media_type=media_type, run_id=run_id, location=location
    )
    return ref.bound(world.artifacts)


def store_output(run: RunContext, path: str, text: str) -> dict[str, Any]:
    """Store a large step output's JSON text; return the reference its event records."""
    ref = store_bytes(run.world, path, text.encode(), _OUTPUT_MEDIA_TYPE, run.run_id)
    return ref.model_dump()


# -- checking ---------------------------------------------------------------------------


def _is_ref(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("sha256"), str)
        and value["sha256"].startswith("sha256:")
        and isinstance(value.get("name"), str)
        and isinstance(value.get("size"), int)
    )


def artifact_ref(data: dict[str, Any], run_id: str) -> ArtifactRef:
    """An artifact reference the log holds, checked (a damaged one raises ``ArtifactIntegrityError``)."""
    try:
        return ArtifactRef.model_validate(data)
    except ValidationError as exc:  # never let a damaged log name a file outside artifacts/
        raise ArtifactIntegrityError(
            f"run {run_id!r}: the log holds a malformed artifact reference {data!r}; the log is "
            "damaged. Restore it from a backup, or start a new run id.",
            run_id=run_id,
            artifact=str(data.get("name")),
            expected=str(data.get("sha256")),
        ) from exc


_artifact_of = methodcaller("get", "artifact")


def referenced(rec: Recorded, run_id: str = "") -> list[tuple[ArtifactRef, str | None]]:
    """Every artifact a run's log references, with the step path whose output it holds.

    Raises:
        ArtifactIntegrityError: A reference in the log is malformed.
    """
    refs: list[tuple[ArtifactRef, str | None]] = []
    if any(map(_artifact_of, rec.steps_completed.values())):  # scanned in C: most runs have none
        for path, d in rec.steps_completed.items():
            artifact = d.get("artifact")
            if artifact is not None and _is_ref(artifact):
                refs.append((artifact_ref(artifact, run_id), path))
    for key, intent in rec.intents.items():
        receipt = rec.receipts.get(key)
        if (
            intent.get("kind") == "tool"
            and intent.get("name") == "save_artifact"
            and receipt is not None
            and receipt.get("outcome") == "ok"
            and _is_ref(receipt.get("result"))
        ):
            refs.append((artifact_ref(receipt["result"], run_id), None))
    return refs


def check_artifacts(world: WorldCore, rec: Recorded, run_id: str) -> None:
    """Check every artifact the run references; load large step outputs for replay.

    Raises:
        ArtifactIntegrityError: A payload is missing or changed.
    """
    for ref, path in referenced(rec, run_id):
        data = world.artifacts.get(ref.sha256)
        verify_payload(ref, data, run_id=run_id)
        if path is not None:
            assert data is not None
            rec.inline_output(path, json.loads(data))
