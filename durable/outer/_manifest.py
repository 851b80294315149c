"""Outer-loop manifests: the cycle-level record of an outer loop.

A local world keeps ``outer-loops/{outer_loop_id}.json`` under its data
directory; a memory world keeps the same JSON text in
``world.outer_loop_manifests``. A file is replaced atomically (written
to a temporary file in the same folder, fsynced, renamed over the old one,
and the folder fsynced), so a kill leaves either the old manifest or the new
one, never half of one; the folder and the file are opened without following
a link (``DataDirectoryError``).

The manifest is an index, not the authority: each cycle's
``outer_loop.cycle_completed`` event in the cycle run's log is. A manifest
that lags behind the logs is brought up to date from them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from ..errors import CodecError, ConfigurationError, KeyMismatchError, OuterLoopError
from ..security import read_file, write_file

if TYPE_CHECKING:
    from pydantic import SerializerFunctionWrapHandler

    from ..engine import WorldCore

FOLDER = "outer-loops"
"""The folder under a local world's data directory that holds the manifests."""

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def check_outer_loop_id(outer_loop_id: Any) -> str:
    """Return ``outer_loop_id`` when it can name a manifest file, else raise ``ConfigurationError``."""
    if not isinstance(outer_loop_id, str) or not _ID.fullmatch(outer_loop_id):
        raise ConfigurationError(
            f"outer_loop_id must be 1 to 128 letters, digits, '_', '-' or '.', not starting "
            f"with '.' or '-' (it names a manifest file), not {outer_loop_id!r}."
        )
    return outer_loop_id


class Goal(BaseModel):
    """What the loop is for: the workflow's definition hash and a description."""

    model_config = ConfigDict(extra="allow")

    workflowDefinitionHash: str
    description: str | None = None


class CycleEntry(BaseModel):
    """One committed cycle: its number (from 1), run id, status, output and summary."""

    model_config = ConfigDict(extra="allow")

    cycleNumber: int = Field(ge=1)
    runId: str
    status: str = "completed"
    output: Any = None
    summary: str | None = None

    @model_serializer(mode="wrap")
    def _drop_empty_summary(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("summary") is None:
            data.pop("summary", None)
        return data


class LoopResult(BaseModel):
    """How a finished loop ended: ``done`` (supervise said so) or ``max_cycles``."""

    kind: Literal["done", "max_cycles"]
    finalOutput: Any = None


class OuterLoopManifest(BaseModel):
    """The manifest file's content, field for field (camelCase, as stored)."""

    model_config = ConfigDict(extra="allow")

    outerLoopId: str
    goal: Goal
    maxCycles: int = Field(ge=1)
    inputHash: str | None = None
    cycles: list[CycleEntry] = Field(default_factory=list)
    pendingCycleRunId: str | None = None
    result: LoopResult | None = None

    def text(self) -> str:
        """The JSON text written to storage."""
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def _problem(m: OuterLoopManifest, outer_loop_id: str) -> str | None:
    """What makes a well-formed manifest inconsistent, or ``None``."""
    if m.outerLoopId != outer_loop_id:
        return f"it belongs to outer loop {m.outerLoopId!r}"
    numbers = [c.cycleNumber for c in m.cycles]
    if numbers != list(range(1, len(numbers) + 1)):
        return f"its cycle numbers {numbers} are not 1, 2, 3, ..."
    if len(m.cycles) > m.maxCycles:
        return f"it has {len(m.cycles)} cycles but maxCycles is {m.maxCycles}"
    if m.result is not None and m.pendingCycleRunId is not None:
        return "it has both a result and a pending cycle"
    return None


class ManifestStore:
    """Reads and writes one outer loop's manifest in a world."""

    def __init__(self, world: WorldCore, outer_loop_id: str):
        self.outer_loop_id = outer_loop_id
        self._world = world
        self.path: Path | None = (
            world.data_dir / FOLDER / f"{outer_loop_id}.json" if world.data_dir is not None else None
        )

    def where(self) -> str:
        """Where the manifest lives, for messages."""
        if self.path is not None:
            return f"manifest file {str(self.path)!r}"
        return f"outer-loop manifest {self.outer_loop_id!r} of this memory world"

    def _memory(self) -> MutableMapping[str, str]:
        found = self._world.outer_loop_manifests
        if found is None:
            found = self._world.outer_loop_manifests = {}
        return found

    def load(self) -> OuterLoopManifest | None:
        """The stored manifest, or ``None`` when the loop never started.

        Raises:
            OuterLoopError: The manifest cannot be read, is not valid JSON, or is inconsistent.
        """
        if self.path is None:
            text = self._memory().get(self.outer_loop_id)
            if text is None:
                return None
        else:
            try:
                raw = read_file(self.path.parent.parent, (FOLDER,), self.path.name)
                if raw is None:
                    return None
                text = raw.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise self._corrupt(f"it cannot be read ({exc})") from exc
        codec = getattr(self._world, "codec", None)
        if codec is not None:
            text = self._open(codec, text)
        try:
            manifest = OuterLoopManifest.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the document"
            raise self._corrupt(f"it is not a valid outer-loop manifest ({where}: {first['msg']})") from exc
        problem = _problem(manifest, self.outer_loop_id)
        if problem is not None:
            raise self._corrupt(problem)
        return manifest

    def save(self, manifest: OuterLoopManifest) -> None:
        """Replace the stored manifest atomically.

        Raises:
            OuterLoopError: The file cannot be written (the old one is left in place).
        """
        text = manifest.text()
        codec = getattr(self._world, "codec", None)
        if codec is not None:
            ct = codec.encrypt(text.encode(), self._ad())
            text = "enc1:" + base64.b64encode(ct).decode("ascii")
        if self.path is None:
            self._memory()[self.outer_loop_id] = text
            return
        try:
            write_file(self.path.parent.parent, (FOLDER,), self.path.name, text.encode("utf-8"), fsync=True)
        except OSError as exc:
            raise OuterLoopError(
                f"cannot write the {self.where()}: {exc}. The previous manifest is unchanged; "
                "fix the folder's permissions or free space and call run_outer_loop again."
            ) from exc

    def _ad(self) -> bytes:
        return f"outer-loop|{self.outer_loop_id}".encode()

    def _open(self, codec: Any, text: str) -> str:
        """The plaintext of an encrypted manifest (bound to its loop's id)."""
        if not text.startswith("enc1:"):
            raise self._corrupt("it is not encrypted, but its world has a codec")
        try:
            raw = codec.decrypt(base64.b64decode(text[5:], validate=True), self._ad())
            return str(raw.decode())
        except KeyMismatchError:
            raise
        except (CodecError, ValueError) as exc:
            raise self._corrupt(f"it does not decrypt ({exc})") from exc

    def _corrupt(self, what: str) -> OuterLoopError:
        return OuterLoopError(
            f"the {self.where()} of outer loop {self.outer_loop_id!r} is damaged: {what}. Nothing "
            "was run and nothing was written. The cycles' runs are still in the event log; restore "
            "the file from a backup, or move it aside and use a new outer_loop_id."
        )
