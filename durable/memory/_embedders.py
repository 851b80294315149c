"""Embedders: the user's function from a batch of texts to vectors, named and sized.

An ``Embedder`` wraps any function ``texts -> vectors`` (sync or async, or a
``@model_call`` so a resumed run replays its embeddings instead of paying for
them again) with the name and dimension that a run's manifest records.
``lexical_embedder`` is a small deterministic embedder for tests and demos.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
from array import array
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..engine import EFFECT_KEY, spec_of
from ..errors import MemoryStoreError

EmbedFn = Callable[[list[str]], "Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]"]

_WORD = re.compile(r"\w+", re.UNICODE)


def _name_of(fn: Callable[..., Any]) -> str:
    spec = spec_of(fn)
    if spec is not None:
        return spec.qualname
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


class Embedder:
    """A batch embedding function with the name and dimension the manifest records.

    Args:
        fn: ``fn(texts: list[str]) -> list[list[float]]``, sync or async. A
            ``@model_call`` works too: inside a run its embeddings are recorded
            and a resumed run replays them.
        dim: How many numbers each vector has.
        name: The name the run manifest records (default: the function's
            qualified name). Change it when the model behind ``fn`` changes, so
            resuming a run under another model fails as drift.
        batch_size: The most texts handed to ``fn`` at once.

    Example:
        >>> import asyncio
        >>> e = Embedder(lambda texts: [[float(len(t)), 1.0] for t in texts], dim=2, name="len")
        >>> asyncio.run(e.embed(["abc"]))
        [[3.0, 1.0]]
    """

    def __init__(self, fn: EmbedFn, *, dim: int, name: str | None = None, batch_size: int = 256):
        if not callable(fn):
            raise MemoryStoreError(f"an embedder is a function of a list of texts, not {fn!r}.")
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise MemoryStoreError(f"an embedder's dim must be a positive int, not {dim!r}.")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise MemoryStoreError(f"batch_size must be a positive int, not {batch_size!r}.")
        self.fn = fn
        self.dim = dim
        self.name = name if name is not None else _name_of(fn)
        self.batch_size = batch_size

    def describe(self) -> dict[str, Any]:
        """What the run manifest records about this embedder."""
        return {"name": self.name, "dim": self.dim}

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches and check what comes back.

        Raises:
            MemoryStoreError: The function returned the wrong number of vectors
                or a vector of the wrong size.
        """
        fn: Callable[..., Any] = self.fn
        if EFFECT_KEY.get() is not None and spec_of(fn) is not None:
            # Inside a tool body the enclosing effect is the durable unit; a nested
            # durable call would collide with it, so the plain function runs.
            fn = fn.__wrapped__  # type: ignore[attr-defined]
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            got = fn(batch)
            if inspect.isawaitable(got):
                got = await got
            # Arrays (NumPy and friends) become lists; vectors are checked, not copied.
            vectors = [v.tolist() if hasattr(v, "tolist") else v for v in got]
            if len(vectors) != len(batch):
                raise MemoryStoreError(
                    f"embedder {self.name!r} returned {len(vectors)} vectors for {len(batch)} "
                    "texts; it must return one vector per text, in order."
                )
            for v in vectors:
                if len(v) != self.dim:
                    raise MemoryStoreError(
                        f"embedder {self.name!r} returned a vector of {len(v)} dimensions but is "
                        f"declared with dim={self.dim}; fix the dim or the function."
                    )
            out.extend(vectors)
        return out

    def __repr__(self) -> str:
        return f"<durable Embedder {self.name!r} dim={self.dim}>"


def _bucket(token: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    h = int.from_bytes(digest, "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


def lexical_vector(text: str, dim: int) -> list[float]:
    """The lexical hashing vector of one text (unit length, or zeros without words).

    Words count fully and their character trigrams count half, so "cat" and
    "cats" share something; meaning does not enter at all.
    """
    vec = array("d", bytes(8 * dim))
    for word in _WORD.findall(text.lower()):
        i, sign = _bucket("w:" + word, dim)
        vec[i] += sign
        padded = f"<{word}>"
        for j in range(len(padded) - 2):
            i, sign = _bucket("g:" + padded[j : j + 3], dim)
            vec[i] += 0.5 * sign
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else list(vec)


def lexical_embedder(dim: int = 256) -> Embedder:
    """A deterministic LEXICAL embedder: the hashing trick over words and trigrams.

    It matches texts that share words, not texts that share meaning ("car" and
    "automobile" are unrelated to it). It needs no model and no network, gives
    the same vectors in every process, and suits tests, demos and keyword-like
    recall. Use a real embedding model for semantic search.

    Args:
        dim: The vector size.

    Example:
        >>> import asyncio
        >>> e = lexical_embedder(dim=32)
        >>> a, b = asyncio.run(e.embed(["the cat sat", "a cat sat"]))
        >>> round(sum(x * y for x, y in zip(a, b)), 2) > 0.5
        True
    """
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise MemoryStoreError(f"lexical_embedder dim must be a positive int, not {dim!r}.")

    def embed(texts: list[str]) -> list[list[float]]:
        return [lexical_vector(t, dim) for t in texts]

    return Embedder(embed, dim=dim, name="durable.lexical_hash_v1")
