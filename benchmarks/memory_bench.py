"""Memory store benchmark: put and search throughput, and recall against brute force.

Runs durable's memory store and, when installed, LangGraph's ``SqliteStore``
vector search side by side on the same vectors and the same queries, in one
process, each on its own SQLite file. Both are given the same embedder (a
lookup of precomputed random vectors), so the numbers measure the stores,
not a model. Recall@k of both is measured against an exact NumPy ranking.

    python benchmarks/memory_bench.py                  # 10,000 and 100,000 items, 384 dims
    python benchmarks/memory_bench.py --smoke          # a few seconds, for CI
    python benchmarks/memory_bench.py --sizes 20000 --dim 768 --queries 20

LangGraph's ``SqliteStore`` loads sqlite-vec through the standard ``sqlite3``
module; on a Python whose ``sqlite3`` cannot load extensions the benchmark
hands it a ``pysqlite3`` connection instead (``pip install pysqlite3-binary``),
and skips it when neither is there.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import durable

NAMESPACE = ("bench",)
BATCH = 1000


def make_data(n: int, queries: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((n, dim)).astype(np.float32),
        rng.standard_normal((queries, dim)).astype(np.float32),
    )


def exact_top_k(items: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """Exact cosine ranking by NumPy: the reference both stores are measured against."""
    a = items / np.linalg.norm(items, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = q @ a.T
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return [sorted(row.tolist(), key=lambda i, r=r: -sims[r, i]) for r, row in enumerate(top)]


def recall(got: list[list[int]], want: list[list[int]]) -> float:
    return sum(len(set(g) & set(w)) for g, w in zip(got, want, strict=True)) / sum(len(w) for w in want)


def lookup_embedder(items: np.ndarray, queries: np.ndarray) -> Callable[[Sequence[str]], list[list[float]]]:
    """Texts 'i<n>' and 'q<n>' map to the n-th item or query vector."""
    item_lists, query_lists = items.tolist(), queries.tolist()

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [(item_lists if t[0] == "i" else query_lists)[int(t[1:])] for t in texts]

    return embed


def timed_searches(search: Callable[[str], list[int]], queries: int) -> tuple[list[list[int]], list[float]]:
    got, took = [], []
    for j in range(queries):
        start = time.perf_counter()
        got.append(search(f"q{j}"))
        took.append(time.perf_counter() - start)
    return got, took


def rss_mb() -> float:
    """This process's resident memory (Linux), or NaN where /proc is not there."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def summary(
    name: str, n: int, put_s: float, took: list[float], rec: float, disk: int, search_rss: float
) -> dict[str, Any]:
    return {
        "store": name,
        "items": n,
        "put_items_per_s": n / put_s,
        "search_ms_p50": 1000 * statistics.median(took),
        "search_ms_mean": 1000 * statistics.fmean(took),
        "search_qps": len(took) / sum(took),
        "recall_at_k": rec,
        "disk_mb": disk / 1e6,
        "search_rss_growth_mb": search_rss,
    }


def bench_durable(
    folder: Path, items: np.ndarray, queries: np.ndarray, k: int, want: list[list[int]]
) -> dict[str, Any]:
    n, dim = items.shape
    embedder = durable.Embedder(
        lookup_embedder(items, queries), dim=dim, name="bench-lookup", batch_size=BATCH
    )
    with durable.local_world(folder) as world:
        mem = world.memory.configure(embedder)

        async def put_all() -> None:
            for start in range(0, n, BATCH):
                await mem.put_many(
                    {"namespace": NAMESPACE, "key": str(i), "text": f"i{i}", "metadata": {"n": i}}
                    for i in range(start, min(n, start + BATCH))
                )

        start = time.perf_counter()
        asyncio.run(put_all())
        put_s = time.perf_counter() - start
    rss_before = rss_mb()  # searches run in a fresh world, as a new process would open the store
    with durable.local_world(folder) as world:
        mem = world.memory.configure(embedder)

        def search(text: str) -> list[int]:
            hits = asyncio.run(mem.search(NAMESPACE, text, k=k))
            return [int(h.key) for h in hits]

        got, took = timed_searches(search, len(queries))
        rss_growth = rss_mb() - rss_before
        driver = mem.driver
    disk = sum(p.stat().st_size for p in (folder / "memory").iterdir())
    return summary(f"durable ({driver})", n, put_s, took, recall(got, want), disk, rss_growth)


def langgraph_connection(path: Path) -> Any | None:
    """A DB-API connection that can load sqlite-vec, or None."""
    module: Any = sqlite3
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        try:
            module = importlib.import_module("pysqlite3.dbapi2")
        except ImportError:
            return None
    return module.connect(str(path), check_same_thread=False, isolation_level=None)


def bench_langgraph(
    folder: Path, items: np.ndarray, queries: np.ndarray, k: int, want: list[list[int]]
) -> dict[str, Any] | str:
    try:
        from langgraph.store.base import PutOp
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        return "langgraph-checkpoint-sqlite is not installed"
    conn = langgraph_connection(folder / "langgraph.db")
    if conn is None:
        return "no sqlite3 module here can load extensions (pip install pysqlite3-binary)"
    n, dim = items.shape
    index: Any = {
        "dims": dim,
        "embed": lookup_embedder(items, queries),
        "text_fields": ["text"],
        "distance_type": "cosine",
    }
    store = SqliteStore(conn, index=index)
    store.setup()
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        store.batch(
            [PutOp(NAMESPACE, str(i), {"text": f"i{i}", "n": i}) for i in range(lo, min(n, lo + BATCH))]
        )
    put_s = time.perf_counter() - start
    conn.close()
    rss_before = rss_mb()
    conn = langgraph_connection(folder / "langgraph.db")
    store = SqliteStore(conn, index=index)
    store.setup()

    def search(text: str) -> list[int]:
        return [int(h.key) for h in store.search(NAMESPACE, query=text, limit=k)]

    got, took = timed_searches(search, len(queries))
    rss_growth = rss_mb() - rss_before
    conn.close()
    disk = sum(p.stat().st_size for p in folder.glob("langgraph.db*"))
    return summary("LangGraph SqliteStore", n, put_s, took, recall(got, want), disk, rss_growth)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| items | store | put (items/s) | search p50 (ms) | search mean (ms) | recall@k | disk (MB) "
        "| memory growth while searching (MB) |"
    )
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['items']:,} | {r['store']} | {r['put_items_per_s']:,.0f} | {r['search_ms_p50']:.1f} "
            f"| {r['search_ms_mean']:.1f} | {r['recall_at_k']:.3f} | {r['disk_mb']:.0f} "
            f"| {r['search_rss_growth_mb']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--no-peers", action="store_true", help="measure durable only")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.dim, args.queries = [500], 32, 5
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for n in args.sizes:
        items, queries = make_data(n, args.queries, args.dim)
        want = exact_top_k(items, queries, args.k)
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(bench_durable(Path(tmp) / "durable", items, queries, args.k, want))
            if not args.no_peers:
                peer = bench_langgraph(Path(tmp), items, queries, args.k, want)
                if isinstance(peer, str):
                    notes.append(f"LangGraph skipped: {peer}")
                else:
                    rows.append(peer)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{args.dim} dimensions, {args.queries} queries, k={args.k}, cosine, one process\n")
        print(table(rows))
        for note in dict.fromkeys(notes):
            print(f"\n{note}")
    bad = [r for r in rows if r["store"].startswith("durable") and r["recall_at_k"] < 1.0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
