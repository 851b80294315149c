"""Embedders: batching, sync and async functions, checks, and the lexical embedder."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys

import pytest

import durable
from durable import MemoryStoreError


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_texts_are_handed_over_in_batches_of_batch_size() -> None:
    """An embedder of batch_size 2 sees five texts as batches of 2, 2 and 1, in order."""
    seen: list[list[str]] = []

    async def embed(texts: list[str]) -> list[list[float]]:
        seen.append(texts)
        return [[float(len(t)), 1.0] for t in texts]

    e = durable.Embedder(embed, dim=2, name="len", batch_size=2)
    out = run(e.embed(["a", "bb", "ccc", "dddd", "eeeee"]))
    assert seen == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert [v[0] for v in out] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_an_embedder_returning_too_few_vectors_is_refused() -> None:
    """One vector per text is required; fewer is an error that says so."""
    e = durable.Embedder(lambda texts: [[1.0]], dim=1, name="short")
    with pytest.raises(MemoryStoreError, match="returned 1 vectors for 2 texts"):
        run(e.embed(["a", "b"]))


def test_default_name_is_the_functions_qualified_name() -> None:
    """Without name=, the manifest records the function's module and qualified name."""

    def my_embed(texts: list[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]

    assert durable.Embedder(my_embed, dim=1).name.endswith(
        "test_default_name_is_the_functions_qualified_name.<locals>.my_embed"
    )


@pytest.mark.parametrize("dim", [0, -3, 2.0, True])
def test_bad_dimension_is_refused(dim: object) -> None:
    """An embedder's dim must be a positive int."""
    with pytest.raises(MemoryStoreError, match="positive int"):
        durable.Embedder(lambda texts: [], dim=dim)  # type: ignore[arg-type]


def test_lexical_vectors_have_unit_length_and_the_declared_size() -> None:
    """Lexical vectors are normalised and as long as asked."""
    (v,) = run(durable.lexical_embedder(dim=50).embed(["Ada drinks green tea"]))
    assert len(v) == 50
    assert math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-9)


def test_lexical_embedder_ranks_shared_words_higher() -> None:
    """Texts sharing words are closer than texts sharing none."""
    a, b, c = run(durable.lexical_embedder(dim=256).embed(["green tea", "hot green tea", "red bicycle"]))
    assert cosine(a, b) > 0.5 > cosine(a, c)


def test_lexical_vectors_are_the_same_in_another_process() -> None:
    """The hashing is stable across processes (no per-process hash seed)."""
    code = (
        "import asyncio, json, durable; "
        "print(json.dumps(asyncio.run(durable.lexical_embedder(dim=16).embed(['same text here']))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == run(durable.lexical_embedder(dim=16).embed(["same text here"]))
