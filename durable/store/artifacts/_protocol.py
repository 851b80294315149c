"""Artifact payload stores: content-addressed files under ``artifacts/``, or memory.

The stores know bytes and manifests only; references, effects and checks
live in ``_artifacts``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Protocol

from ...errors import ArtifactIntegrityError
from ...security import list_folder, read_file, refuse_links, remove_file, remove_folder, write_file

DEFAULT_THRESHOLD = 256 * 1024
"""Step outputs whose JSON text is longer than this (in characters) become artifacts."""


def sha256_of(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def hex_of(tag: str) -> str:
    """The hex digest of a ``sha256:<hex>`` tag; anything else (a crafted tag) is refused."""
    hexdigest = tag.partition(":")[2]
    if len(hexdigest) != 64 or hexdigest.strip("0123456789abcdef"):
        raise ValueError(f"not a sha256 tag: {tag[:80]!r}")
    return hexdigest


def safe_location(location: str) -> bool:
    """Whether an artifact location read from a log stays inside the data directory's ``artifacts/``.

    A location is ``artifacts/<2 hex>/<64 hex>``: relative, POSIX, with no
    ``..``, no absolute part, no NUL and no backslash.
    """
    parts = location.split("/")
    return (
        len(parts) == 3
        and parts[0] == "artifacts"
        and len(parts[1]) == 2
        and len(parts[2]) == 64
        and not parts[2].strip("0123456789abcdef")
        and parts[2].startswith(parts[1])
    )


class ArtifactStore(Protocol):
    """Where artifact payloads and their manifests live, addressed by content hash."""

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        """Store ``data`` under its hash (once: storing the same bytes again is a no-op).

        Args:
            data: The payload.
            manifest: JSON-safe facts about it (name, media type, size), kept beside it.

        Returns:
            Where it is stored (for ``resolve``), or ``None`` for a store without files.
        """

    def get(self, sha256: str) -> bytes | None:
        """The stored payload.

        Args:
            sha256: Its tag, ``sha256:<hex>``.

        Returns:
            The bytes, or ``None`` when the store has no such payload.
        """

    def delete(self, sha256: str) -> None:
        """Remove the payload and its manifest (``gc``, once no kept run references it); absent is fine.

        Args:
            sha256: Its tag, ``sha256:<hex>``.
        """

    def resolve(self, location: str | None) -> Path | None:
        """The file behind a location.

        Args:
            location: What ``put`` returned.

        Returns:
            The file, or ``None`` for a store without files.
        """


class FileArtifacts:
    """Artifacts in a folder, one file per content plus a JSON manifest beside it.

    Every file is opened relative to its folder without following a link
    (``durable.security``): a link planted at ``artifacts/``, at one of its
    folders or at a file raises ``DataDirectoryError`` instead of reading,
    writing or deleting what it points at.
    """

    FOLDER = "artifacts"
    """The folder of the data directory that holds the artifacts."""

    def __init__(self, data_dir: Path, *, fsync: bool = False):
        self.data_dir = data_dir
        self.root = data_dir / self.FOLDER
        self.fsync = fsync

    def _blob(self, hexdigest: str) -> Path:
        return self.root / hexdigest[:2] / hexdigest

    def _folder(self, hexdigest: str) -> tuple[str, str]:
        return (self.FOLDER, hexdigest[:2])

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        hexdigest = hex_of(manifest["sha256"])
        where = self._folder(hexdigest)
        if self.get(manifest["sha256"]) != data:  # absent, or damaged: (re)write it
            write_file(self.data_dir, where, hexdigest, data, fsync=self.fsync)
        if read_file(self.data_dir, where, hexdigest + ".json") is None:
            text = json.dumps(manifest, indent=2, sort_keys=True).encode()
            write_file(self.data_dir, where, hexdigest + ".json", text, fsync=self.fsync)
        return self._blob(hexdigest).relative_to(self.data_dir).as_posix()

    def get(self, sha256: str) -> bytes | None:
        hexdigest = hex_of(sha256)
        return read_file(self.data_dir, self._folder(hexdigest), hexdigest)

    def delete(self, sha256: str) -> None:
        hexdigest = hex_of(sha256)
        for name in (hexdigest, hexdigest + ".json"):
            remove_file(self.data_dir, self._folder(hexdigest), name)

    def holds_any(self) -> bool:
        """Whether the store holds any payload (``gc`` reads the logs of the runs it deletes only then)."""
        return self.root.is_dir() and any(self.root.iterdir())

    def manifests(self) -> list[tuple[str, bytes]]:
        """Every stored manifest: the file name it is stored under (a digest) and its bytes."""
        out = []
        for sub in list_folder(self.data_dir, (self.FOLDER,)):
            if len(sub) != 2 or sub.startswith("."):
                continue
            for name in list_folder(self.data_dir, (self.FOLDER, sub)):
                if name.endswith(".json") and not name.startswith("."):
                    text = read_file(self.data_dir, (self.FOLDER, sub), name)
                    if text is not None:
                        out.append((name[: -len(".json")], text))
        return out

    def remove(self, digest: str) -> None:
        """Delete the payload and the manifest stored under ``digest``, and their folder once empty."""
        where = (self.FOLDER, digest[:2])
        for name in (digest, digest + ".json"):
            remove_file(self.data_dir, where, name)
        remove_folder(self.data_dir, where)

    def remove_leftovers(self) -> None:
        """Delete the temporary files a write cut by a kill left behind."""
        for sub in list_folder(self.data_dir, (self.FOLDER,)):
            if len(sub) == 2:
                for name in list_folder(self.data_dir, (self.FOLDER, sub)):
                    if name.startswith(".tmp-"):
                        remove_file(self.data_dir, (self.FOLDER, sub), name)

    def resolve(self, location: str | None) -> Path | None:
        if location is None:
            return None
        if not safe_location(location):
            raise ArtifactIntegrityError(
                f"the artifact location {location!r} points outside {str(self.root)!r}; the log "
                "that holds it was edited or crafted. Run `little verify` on the run.",
                artifact=location,
            )
        _, sub, name = location.split("/")
        refuse_links(self.data_dir, (self.FOLDER, sub), [name])
        return self.data_dir / location


class MemoryArtifacts:
    """Artifacts held in this process (``memory_world()``)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.manifests: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, manifest: dict[str, Any]) -> str | None:
        with self._lock:
            self.blobs[manifest["sha256"]] = data
            self.manifests.setdefault(manifest["sha256"], manifest)
        return None

    def get(self, sha256: str) -> bytes | None:
        return self.blobs.get(sha256)

    def delete(self, sha256: str) -> None:
        with self._lock:
            self.blobs.pop(sha256, None)
            self.manifests.pop(sha256, None)

    def holds_any(self) -> bool:
        """Whether the store holds any payload (``gc`` reads the logs of the runs it deletes only then)."""
        return bool(self.blobs)

    def resolve(self, location: str | None) -> Path | None:
        return None
