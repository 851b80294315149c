"""The values the memory store takes and returns: items, new items and search hits.

They are pydantic models, so inside a run they are recorded in the log as
JSON and rebuilt on replay like any other effect's result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import MemoryStoreError


class MemoryItem(BaseModel):
    """One stored item, as ``get`` returns it.

    Attributes:
        namespace: The item's namespace, e.g. ``("users", "u1", "facts")``.
        key: The item's key inside its namespace.
        text: The text that was embedded.
        metadata: The metadata that filters match on.
        created_at: When the item was first put (seconds since the epoch).
        updated_at: When the item was last put.
    """

    model_config = ConfigDict(frozen=True)

    namespace: tuple[str, ...]
    key: str
    text: str
    metadata: dict[str, Any]
    created_at: float
    updated_at: float


class SearchHit(BaseModel):
    """One result of ``search``, nearest first.

    Attributes:
        namespace: The item's namespace.
        key: The item's key.
        text: The item's text.
        metadata: The item's metadata.
        distance: Cosine distance (``1 - cos``) or Euclidean distance, by the store's metric.
    """

    model_config = ConfigDict(frozen=True)

    namespace: tuple[str, ...]
    key: str
    text: str
    metadata: dict[str, Any]
    distance: float


class NewItem(BaseModel):
    """One item to ``put_many`` (a dict with the same fields works too).

    Attributes:
        namespace: The item's namespace.
        key: The item's key inside its namespace.
        text: The text (embedded unless ``embedding`` is given).
        metadata: JSON metadata that filters match on.
        embedding: A vector to store instead of embedding ``text``.
    """

    namespace: tuple[str, ...]
    key: str
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: list[float] | None = None


class RecordedRow(BaseModel):
    """What a put records as its input: everything but the vector."""

    namespace: tuple[str, ...]
    key: str
    text: str
    metadata: dict[str, Any]


def new_item(item: NewItem | Mapping[str, Any]) -> NewItem:
    """A ``NewItem`` from a ``NewItem`` or a dict, or a ``MemoryStoreError``."""
    if isinstance(item, NewItem):
        return item
    try:
        return NewItem.model_validate(item)
    except ValidationError as exc:
        raise MemoryStoreError(
            f"an item to put needs namespace, key and text (and may have metadata and embedding): {exc}"
        ) from exc
