"""The memory store outside runs: items, namespaces, dimensions and bad input, on both backends."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
import durable.memory._db
from durable import MemoryStoreError
from durable.memory import PostgresMemory
from durable.memory._db import VecDb, stdlib_can_load_extensions
from durable.memory._pg_rows import PostgresRows


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.fixture
def mem(world: durable.World) -> durable.MemoryStore:
    """The world's memory store with a small lexical embedder."""
    return world.memory.configure(durable.lexical_embedder(dim=32))


def test_put_then_get_returns_the_item(mem: durable.MemoryStore) -> None:
    """An item put under a namespace and key comes back from get with its text and metadata."""
    run(mem.put(("users", "u1"), "k", "likes green tea", {"kind": "fact", "n": 2}))
    got = run(mem.get(("users", "u1"), "k"))
    assert got is not None
    assert (got.namespace, got.key, got.text, got.metadata) == (
        ("users", "u1"),
        "k",
        "likes green tea",
        {"kind": "fact", "n": 2},
    )


def test_put_replaces_the_item_with_the_same_key(mem: durable.MemoryStore) -> None:
    """A second put with the same namespace and key replaces the item instead of adding one."""
    run(mem.put(("n",), "k", "first"))
    run(mem.put(("n",), "k", "second", {"v": 2}))
    got = run(mem.get(("n",), "k"))
    assert got is not None and (got.text, got.metadata) == ("second", {"v": 2})
    assert run(mem.count()) == 1


def test_replaced_item_is_found_by_its_new_text(mem: durable.MemoryStore) -> None:
    """Replacing an item replaces its vector too, so search ranks it by the new text."""
    run(mem.put(("n",), "a", "apples and pears"))
    run(mem.put(("n",), "b", "bicycles and trains"))
    run(mem.put(("n",), "a", "bicycles and trains and buses"))
    hits = run(mem.search(("n",), "buses", k=1))
    assert [h.key for h in hits] == ["a"]


def test_same_key_in_two_namespaces_is_two_items(mem: durable.MemoryStore) -> None:
    """Keys are scoped by namespace."""
    run(mem.put(("a",), "k", "one"))
    run(mem.put(("b",), "k", "two"))
    assert run(mem.count()) == 2
    assert run(mem.get(("b",), "k")).text == "two"  # type: ignore[union-attr]


def test_get_of_a_missing_item_is_none(mem: durable.MemoryStore) -> None:
    """A get of a key that was never put returns None."""
    assert run(mem.get(("n",), "nope")) is None


def test_delete_reports_whether_the_item_existed(mem: durable.MemoryStore) -> None:
    """A delete returns True once and False after the item is gone."""
    run(mem.put(("n",), "k", "text"))
    assert run(mem.delete(("n",), "k")) is True
    assert run(mem.delete(("n",), "k")) is False
    assert run(mem.get(("n",), "k")) is None


def stored_vectors(mem: durable.MemoryStore) -> int:
    """How many vectors the store's database holds (SQLite's vec0 table, or the Postgres rows)."""
    if isinstance(mem, PostgresMemory):
        rows = mem._rows
        assert isinstance(rows, PostgresRows)
        with rows.db.pool.connection() as conn:
            got = conn.execute(rows.db.sql("SELECT count(embedding) FROM {s}.memory_items")).fetchone()
        return int(got[0]) if got else 0
    return int(mem._db.query("SELECT COUNT(*) FROM vectors")[0][0])


def test_delete_removes_the_vector(mem: durable.MemoryStore) -> None:
    """Deleting an item deletes its vector too, so search cannot return it."""
    for i, text in enumerate(["red apple", "red car", "red rose"]):
        run(mem.put(("n",), f"k{i}", text))
    run(mem.delete(("n",), "k1"))
    assert stored_vectors(mem) == 2
    hits = run(mem.search(("n",), "red car", k=3))
    assert sorted(h.key for h in hits) == ["k0", "k2"]


def test_namespaces_lists_prefix_matches_only(mem: durable.MemoryStore) -> None:
    """namespaces(prefix) lists the prefix itself and what is below it, not look-alike siblings."""
    for ns in [("users", "u1"), ("users", "u1", "facts"), ("users", "u10"), ("teams", "t")]:
        run(mem.put(ns, "k", "x y"))
    assert run(mem.namespaces(("users", "u1"))) == [("users", "u1"), ("users", "u1", "facts")]
    assert run(mem.namespaces()) == [
        ("teams", "t"),
        ("users", "u1"),
        ("users", "u1", "facts"),
        ("users", "u10"),
    ]


def test_count_counts_under_a_prefix(mem: durable.MemoryStore) -> None:
    """count(prefix) counts the items of the namespace and of those below it."""
    run(mem.put(("a",), "1", "x"))
    run(mem.put(("a", "b"), "2", "x"))
    run(mem.put(("c",), "3", "x"))
    assert (run(mem.count(("a",))), run(mem.count())) == (2, 3)


def test_search_is_limited_to_the_namespace_prefix(mem: durable.MemoryStore) -> None:
    """A search under a prefix never returns items of other namespaces."""
    run(mem.put(("users", "u1"), "a", "green tea"))
    run(mem.put(("users", "u2"), "b", "green tea"))
    hits = run(mem.search(("users", "u1"), "green tea", k=5))
    assert [(h.namespace, h.key) for h in hits] == [(("users", "u1"), "a")]


def test_unusual_labels_round_trip(mem: durable.MemoryStore) -> None:
    """Labels with quotes, commas, dots and non-ASCII text are stored and listed exactly."""
    ns = ('we"ird', "a,b", "d.o.t", "日本")
    run(mem.put(ns, "k", "word"))
    assert run(mem.namespaces((ns[0],))) == [ns]


def test_put_many_writes_all_items(mem: durable.MemoryStore) -> None:
    """put_many stores every item of the batch, from dicts or NewItems."""
    n = run(
        mem.put_many(
            [
                {"namespace": ("n",), "key": "a", "text": "one"},
                durable.NewItem(namespace=("n",), key="b", text="two", metadata={"x": 1}),
            ]
        )
    )
    assert n == 2 and run(mem.count()) == 2


def test_put_many_with_a_bad_item_writes_nothing(mem: durable.MemoryStore) -> None:
    """A batch with one item of the wrong dimension fails whole and leaves the store unchanged."""
    run(mem.put(("n",), "old", "kept"))
    items: list[dict[str, Any]] = [
        {"namespace": ("n",), "key": "a", "text": "fine"},
        {"namespace": ("n",), "key": "b", "text": "bad", "embedding": [1.0, 2.0]},
    ]
    with pytest.raises(MemoryStoreError, match="2 dimensions"):
        run(mem.put_many(items))
    assert run(mem.count()) == 1


def test_put_many_rejects_a_repeated_key(mem: durable.MemoryStore) -> None:
    """Two items with the same namespace and key in one batch are refused."""
    items = [{"namespace": ("n",), "key": "a", "text": t} for t in ("x", "y")]
    with pytest.raises(MemoryStoreError, match="twice"):
        run(mem.put_many(items))


def test_put_with_a_vector_of_the_wrong_dimension_is_refused(mem: durable.MemoryStore) -> None:
    """A put whose embedding has another size than the store's names both sizes."""
    with pytest.raises(MemoryStoreError, match=r"has 3 dimensions.*holds 32-dimension"):
        run(mem.put(("n",), "k", "t", embedding=[0.1, 0.2, 0.3]))
    assert run(mem.count()) == 0


def test_search_with_a_vector_of_the_wrong_dimension_is_refused(mem: durable.MemoryStore) -> None:
    """A query vector of another size than the store's is refused with both sizes."""
    with pytest.raises(MemoryStoreError, match=r"has 4 dimensions.*holds 32-dimension"):
        run(mem.search(("n",), [0.0, 1.0, 0.0, 1.0]))


def test_embedder_returning_the_wrong_dimension_is_refused(world: durable.World) -> None:
    """An embedder whose vectors do not have its declared dim fails before anything is written."""
    bad = durable.Embedder(lambda texts: [[1.0, 2.0] for _ in texts], dim=3, name="bad")
    mem = world.memory.configure(bad)
    with pytest.raises(MemoryStoreError, match="declared with dim=3"):
        run(mem.put(("n",), "k", "t"))
    assert run(mem.count()) == 0


def test_reopening_with_another_dimension_is_refused(tmp_path: Path) -> None:
    """A store keeps its dimension: configuring another one on the same files fails clearly."""
    with durable.local_world(tmp_path) as world:
        world.memory.configure(durable.lexical_embedder(dim=32))
    with (
        durable.local_world(tmp_path) as world,
        pytest.raises(MemoryStoreError, match="holds 32-dimension vectors"),
    ):
        world.memory.configure(durable.lexical_embedder(dim=64))


def test_reopening_with_another_metric_is_refused(tmp_path: Path) -> None:
    """A store keeps its metric: asking for the other one on the same files fails clearly."""
    with durable.local_world(tmp_path) as world:
        world.memory.configure(durable.lexical_embedder(dim=8), metric="l2")
    with (
        durable.local_world(tmp_path) as world,
        pytest.raises(MemoryStoreError, match="measures l2 distance"),
    ):
        world.memory.configure(durable.lexical_embedder(dim=8), metric="cosine")


def test_items_survive_a_new_world_over_the_same_directory(tmp_path: Path) -> None:
    """The store's files live under memory/ in the data directory and are read back by a new world."""
    with durable.local_world(tmp_path) as world:
        run(world.memory.configure(durable.lexical_embedder(dim=16)).put(("n",), "k", "kept"))
    assert (tmp_path / "memory" / "memory.db").is_file()
    with durable.local_world(tmp_path) as world:
        mem = world.memory.configure(durable.lexical_embedder(dim=16))
        assert [h.key for h in run(mem.search(("n",), "kept"))] == ["k"]


def test_text_put_without_an_embedder_is_refused(world: durable.World) -> None:
    """Storing text needs an embedder; the error says how to configure one."""
    mem = world.memory.configure(dim=4)
    with pytest.raises(MemoryStoreError, match="configure"):
        run(mem.put(("n",), "k", "text"))


def test_unconfigured_store_says_how_to_configure(world: durable.World) -> None:
    """Using a store that has no dimension yet names configure in the error."""
    with pytest.raises(MemoryStoreError, match=r"configure\("):
        run(world.memory.put(("n",), "k", "text"))


@pytest.mark.parametrize(
    "namespace", ["users", (), ("users", ""), ("users", 3)], ids=["string", "empty", "blank", "int"]
)
def test_bad_namespaces_are_refused(mem: durable.MemoryStore, namespace: Any) -> None:
    """A namespace must be a non-empty tuple of non-empty strings."""
    with pytest.raises(MemoryStoreError, match="namespace"):
        run(mem.put(namespace, "k", "t"))


def test_metadata_that_is_not_json_is_refused(mem: durable.MemoryStore) -> None:
    """Metadata that JSON cannot hold fails the put and writes nothing."""
    with pytest.raises(MemoryStoreError, match="not plain JSON"):
        run(mem.put(("n",), "k", "t", {"when": object()}))
    assert run(mem.count()) == 0


def test_non_finite_embedding_is_refused(world: durable.World) -> None:
    """A vector with NaN is refused instead of poisoning every later distance."""
    mem = world.memory.configure(dim=2, metric="l2")
    with pytest.raises(MemoryStoreError, match="NaN"):
        run(mem.put(("n",), "k", "t", embedding=[float("nan"), 1.0]))


def test_zero_vector_is_refused_under_cosine(mem: durable.MemoryStore) -> None:
    """Text without words embeds to zeros, which has no cosine distance; the error says so."""
    with pytest.raises(MemoryStoreError, match="all zeros"):
        run(mem.put(("n",), "k", "?!"))


def test_zero_query_vector_is_refused_under_cosine(mem: durable.MemoryStore) -> None:
    """A query without words embeds to zeros; the search says so instead of ranking by NaN."""
    run(mem.put(("n",), "k", "words here"))
    with pytest.raises(MemoryStoreError, match="query vector is all zeros"):
        run(mem.search(("n",), "?!"))


@pytest.mark.parametrize(
    ("key", "text", "metadata"),
    [(3, "t", {}), ("k", None, {}), ("k", "t", {1: "int key"})],
    ids=["int-key", "no-text", "int-metadata-key"],
)
def test_put_of_wrong_types_is_a_memory_store_error(
    mem: durable.MemoryStore, key: Any, text: Any, metadata: Any
) -> None:
    """A key, text or metadata of the wrong type fails with MemoryStoreError, not a raw validation error."""
    with pytest.raises(MemoryStoreError, match="needs namespace, key and text"):
        run(mem.put(("n",), key, text, metadata))
    assert run(mem.count()) == 0


@pytest.mark.parametrize("k", [0, 5000, 2.5, True])
def test_bad_k_is_refused(mem: durable.MemoryStore, k: Any) -> None:
    """A search needs k to be an int from 1 to 4096."""
    with pytest.raises(MemoryStoreError, match="k must be"):
        run(mem.search(("n",), "x", k=k))


def test_memory_world_keeps_its_store_in_the_process(world: durable.World) -> None:
    """world.memory is the same store on every access of one world."""
    assert world.memory is world.memory


def test_missing_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, world: durable.World
) -> None:
    """Without sqlite-vec, world.memory fails with the pip command of the extra (Postgres needs none)."""
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    if isinstance(world, durable.PostgresWorld):
        mem = world.memory.configure(durable.lexical_embedder(dim=8))
        run(mem.put(("n",), "k", "some words"))
        assert run(mem.count()) == 1
        return
    with pytest.raises(MemoryStoreError, match=r"pip install 'little-workflow\[memory\]'"):
        world.memory  # noqa: B018


def test_driver_is_chosen_by_what_this_python_can_load() -> None:
    """The standard sqlite3 module is used when it can load extensions, apsw otherwise."""
    db = VecDb(None)
    try:
        assert db.driver == ("sqlite3" if stdlib_can_load_extensions() else "apsw")
    finally:
        db.close()


@pytest.mark.skipif(stdlib_can_load_extensions(), reason="this Python's sqlite3 loads extensions")
def test_asking_for_sqlite3_where_it_cannot_load_is_refused() -> None:
    """driver='sqlite3' on a build without extension loading fails with what to do instead."""
    with pytest.raises(MemoryStoreError, match="cannot load extensions"):
        VecDb(None, driver="sqlite3")


def test_a_file_that_is_not_a_memory_store_is_refused(tmp_path: Path) -> None:
    """Opening another SQLite database as a memory store fails and leaves it untouched."""
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE mine (x)")
    conn.close()
    with pytest.raises(MemoryStoreError, match="not a memory store"):
        durable.MemoryStore(path)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["mine"]
    conn.close()


WRITE_WITH_APSW = """
import asyncio, json, sys
import durable
store = durable.MemoryStore(sys.argv[1], driver="apsw").configure(durable.lexical_embedder(dim=32))
for i, text in enumerate(["green tea", "black coffee", "green salad", "red wine"]):
    asyncio.run(store.put(("n",), f"k{i}", text, {"i": i}))
hits = asyncio.run(store.search(("n",), "green", k=3, filter={"i": {"$ne": 2}}))
print(json.dumps([[h.key, h.distance] for h in hits]))
"""


@pytest.mark.skipif(not stdlib_can_load_extensions(), reason="this Python's sqlite3 cannot load extensions")
def test_a_store_written_through_apsw_is_read_through_sqlite3(tmp_path: Path) -> None:
    """The two bindings share the file format: sqlite3 finds the hits an apsw process found."""
    import json
    import subprocess

    path = tmp_path / "memory.db"
    proc = subprocess.run(
        [sys.executable, "-c", WRITE_WITH_APSW, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    store = durable.MemoryStore(path, driver="sqlite3").configure(durable.lexical_embedder(dim=32))
    hits = run(store.search(("n",), "green", k=3, filter={"i": {"$ne": 2}}))
    assert store.driver == "sqlite3"
    assert [[h.key, h.distance] for h in hits] == json.loads(proc.stdout)
    store.close()


@pytest.mark.skipif(not stdlib_can_load_extensions(), reason="this Python's sqlite3 cannot load extensions")
def test_two_bindings_at_once_in_one_process_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store through apsw while one is open through sqlite3 fails instead of crashing."""
    monkeypatch.setattr(durable.memory._db, "_OPEN", {"sqlite3": 0, "apsw": 0})  # stores of other tests
    first = durable.MemoryStore(tmp_path / "a.db", driver="sqlite3")
    with pytest.raises(MemoryStoreError, match="one SQLite library per process"):
        durable.MemoryStore(tmp_path / "b.db", driver="apsw")
    first.close()
    durable.MemoryStore(tmp_path / "b.db", driver="apsw").close()
