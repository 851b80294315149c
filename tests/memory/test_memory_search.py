"""Exact search: every result list equals a brute-force NumPy ranking of the same vectors."""

# ruff: noqa: E402  (the extra is checked with importorskip before the imports that need it)

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

np = pytest.importorskip("numpy")  # the brute-force ranking every result is compared with

import durable

N, DIM, QUERIES, K = 3000, 24, 12, 10
NAMESPACES = [("docs", "a"), ("docs", "b"), ("other",)]


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def dataset() -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
    """Seeded random vectors, metadata with a rare group, and query vectors."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    metadata = [
        {"group": i % 20, "parity": "even" if i % 2 == 0 else "odd", "score": float(i) / N} for i in range(N)
    ]
    queries = rng.standard_normal((QUERIES, DIM)).astype(np.float32)
    return vectors, metadata, queries


def brute_force(
    vectors: np.ndarray, query: np.ndarray, metric: str, keep: np.ndarray, k: int
) -> tuple[list[int], np.ndarray]:
    """The exact top-k indices (and distances) among the kept rows, by NumPy in float64."""
    v = vectors.astype(np.float64)
    q = query.astype(np.float64)
    if metric == "cosine":
        dist = 1.0 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    else:
        dist = np.linalg.norm(v - q, axis=1)
    dist = np.where(keep, dist, np.inf)
    order = np.argsort(dist, kind="stable")[:k]
    order = order[np.isfinite(dist[order])]
    return [int(i) for i in order], dist[order]


@pytest.fixture(params=["cosine", "l2"])
def loaded(request: pytest.FixtureRequest, world: durable.World) -> tuple[durable.MemoryStore, str]:
    """A store of N random vectors across three namespaces, per metric and backend."""
    vectors, metadata, _ = dataset()
    mem = world.memory.configure(dim=DIM, metric=request.param)
    run(
        mem.put_many(
            {
                "namespace": NAMESPACES[i % 3],
                "key": f"k{i}",
                "text": f"item {i}",
                "metadata": metadata[i],
                "embedding": vectors[i].tolist(),
            }
            for i in range(N)
        )
    )
    return mem, request.param


def check(
    mem: durable.MemoryStore,
    metric: str,
    namespace: tuple[str, ...],
    flt: dict[str, Any] | None,
    keep_fn: Callable[[int], bool],
) -> None:
    vectors, _, queries = dataset()
    in_ns = [NAMESPACES[i % 3][: len(namespace)] == namespace for i in range(N)]
    keep = np.array([in_ns[i] and keep_fn(i) for i in range(N)])
    for q in queries:
        want, want_dist = brute_force(vectors, q, metric, keep, K)
        hits = run(mem.search(namespace, q.tolist(), k=K, filter=flt))
        assert [h.key for h in hits] == [f"k{i}" for i in want]  # recall@10 = 1.0, same order
        np.testing.assert_allclose([h.distance for h in hits], want_dist, rtol=1e-4, atol=1e-5)


def test_unfiltered_search_equals_brute_force(loaded: tuple[durable.MemoryStore, str]) -> None:
    """Over the whole store, the hits are exactly NumPy's top 10, in order, with its distances."""
    mem, metric = loaded
    check(mem, metric, (), None, lambda i: True)


def test_namespace_search_equals_brute_force(loaded: tuple[durable.MemoryStore, str]) -> None:
    """Under a namespace prefix, the hits are exactly NumPy's top 10 of that prefix."""
    mem, metric = loaded
    check(mem, metric, ("docs",), None, lambda i: True)


def test_filtered_search_equals_brute_force(loaded: tuple[durable.MemoryStore, str]) -> None:
    """With a range and an equality filter, the hits are NumPy's top 10 of the matching items."""
    mem, metric = loaded
    _, metadata, _ = dataset()
    flt = {"parity": "odd", "score": {"$gte": 0.25, "$lt": 0.9}}
    check(
        mem,
        metric,
        ("docs", "a"),
        flt,
        lambda i: metadata[i]["parity"] == "odd" and 0.25 <= metadata[i]["score"] < 0.9,
    )


def test_selective_filter_still_returns_k_hits(loaded: tuple[durable.MemoryStore, str]) -> None:
    """A filter that excludes most nearest items still returns the k best that match it."""
    mem, metric = loaded
    vectors, metadata, queries = dataset()
    flt = {"group": {"$in": [3]}}  # one item in twenty
    nearest, _ = brute_force(vectors, queries[0], metric, np.ones(N, dtype=bool), K)
    excluded = sum(metadata[i]["group"] != 3 for i in nearest)
    assert excluded >= K - 2  # the premise: most of the unfiltered top 10 are filtered out
    check(mem, metric, (), flt, lambda i: metadata[i]["group"] == 3)
    hits = run(mem.search((), queries[0].tolist(), k=K, filter=flt))
    assert len(hits) == K


def test_filter_matching_fewer_than_k_returns_all_of_them(
    loaded: tuple[durable.MemoryStore, str],
) -> None:
    """When fewer than k items match, every match is returned, nearest first."""
    mem, metric = loaded
    _, metadata, _ = dataset()
    flt = {"score": {"$lt": 5 / N}}  # the first five items only
    check(mem, metric, (), flt, lambda i: metadata[i]["score"] < 5 / N)


def test_text_search_ranks_shared_words_first(world: durable.World) -> None:
    """With the lexical embedder, the item that shares the query's words ranks first."""
    mem = world.memory.configure(durable.lexical_embedder(dim=128))
    run(mem.put(("n",), "tea", "Ada drinks green tea every morning"))
    run(mem.put(("n",), "bike", "Ada rides a red bicycle to work"))
    run(mem.put(("n",), "cat", "The cat sleeps on the sofa"))
    hits = run(mem.search(("n",), "what tea does Ada drink?", k=3))
    assert hits[0].key == "tea"
    assert [h.distance for h in hits] == sorted(h.distance for h in hits)
