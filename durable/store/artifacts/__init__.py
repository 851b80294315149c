"""Artifact payload stores: large payloads by content hash, beside the log.

``ArtifactStore`` is the protocol; ``MemoryArtifacts``, ``FileArtifacts`` and
``PostgresArtifacts`` implement it.
"""

from __future__ import annotations
