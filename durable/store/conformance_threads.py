"""The rules of a thread store, as pytest tests a new backend can run.

Subclass ``ThreadStoreConformance`` in your test suite and say how to open
your store over a place (an empty folder the test gives); pytest runs every
rule against it. durable's own tests run it on the memory, SQLite, Postgres
and encrypted stores (``tests/store/test_thread_conformance.py``)::

    class TestMyThreads(ThreadStoreConformance):
        def open_store(self, where: Path) -> ThreadStore:
            return MyThreads(where / "threads.db")
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..errors import ConfigurationError
from .threads._protocol import ThreadStore

NS = "tests.conversation"


def _keys(store: ThreadStore, thread: str = "t", **kwargs: object) -> list[str]:
    return [i.key for i in store.items(NS, thread, **kwargs)]  # type: ignore[arg-type]


class ThreadStoreConformance:
    """The rules every ``ThreadStore`` keeps."""

    def open_store(self, where: Path) -> ThreadStore:
        """A store over ``where`` (an empty folder); a second call opens the same place again."""
        raise NotImplementedError

    def test_a_written_value_is_read_back_as_its_bytes(self, tmp_path: Path) -> None:
        """Any bytes, NUL and non-UTF-8 included, come back as written."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("a", b"\x00\xff{}"), ("b", b"")])
        got = store.get(NS, "t", "a")
        assert got is not None
        assert (got.key, got.value) == ("a", b"\x00\xff{}")
        b = store.get(NS, "t", "b")
        assert b is not None
        assert b.value == b""
        assert store.get(NS, "t", "missing") is None

    def test_a_key_is_stored_once_unless_replaced_in_its_place(self, tmp_path: Path) -> None:
        """Writing a stored key again keeps the first value; ``replace`` changes it and keeps its seq."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("a", b"1"), ("b", b"2")])
        first = store.get(NS, "t", "a")
        store.write(NS, "t", [("a", b"again"), ("c", b"3")])
        assert [(i.key, i.value) for i in store.items(NS, "t")] == [("a", b"1"), ("b", b"2"), ("c", b"3")]
        store.write(NS, "t", [("a", b"new")], replace=True)
        replaced = store.get(NS, "t", "a")
        assert first is not None
        assert replaced is not None
        assert (replaced.value, replaced.seq) == (b"new", first.seq)
        assert _keys(store) == ["a", "b", "c"]

    def test_seq_grows_with_every_new_value_across_threads(self, tmp_path: Path) -> None:
        """A value written later has a higher seq, whichever thread it is in."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("x", b"")])
        store.write(NS, "u", [("x", b"")])
        store.write(NS, "t", [("y", b""), ("z", b"")])
        seqs = [store.get(NS, t, k).seq for t, k in (("t", "x"), ("u", "x"), ("t", "y"), ("t", "z"))]  # type: ignore[union-attr]
        assert seqs == sorted(seqs)
        assert len(set(seqs)) == 4

    def test_items_come_by_seq_or_by_key_either_way_with_a_limit_and_a_prefix(self, tmp_path: Path) -> None:
        """``order``, ``newest_first``, ``limit`` and ``prefix`` select and sort as documented."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("item:b", b""), ("item:a", b""), ("pop:1", b""), ("item:c", b"")])
        assert _keys(store) == ["item:b", "item:a", "pop:1", "item:c"]
        assert _keys(store, prefix="item:") == ["item:b", "item:a", "item:c"]
        assert _keys(store, prefix="item:", newest_first=True, limit=2) == ["item:c", "item:a"]
        assert _keys(store, order="key") == ["item:a", "item:b", "item:c", "pop:1"]
        assert _keys(store, order="key", newest_first=True, limit=1) == ["pop:1"]
        assert _keys(store, prefix="none") == []
        assert _keys(store, limit=0) == []

    def test_keys_sort_by_code_point(self, tmp_path: Path) -> None:
        """Keys sort as Python sorts strings, whatever the backend's collation."""
        store = self.open_store(tmp_path)
        keys = ["b", "B", "é", "a", "中", "Z", "ab"]
        store.write(NS, "t", [(k, b"") for k in keys])
        assert _keys(store, order="key") == sorted(keys)

    def test_a_write_deletes_and_stores_in_one_go(self, tmp_path: Path) -> None:
        """``delete`` keys go and ``items`` come in the same write (a pop and its record)."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("item:1", b"one"), ("item:2", b"two")])
        store.write(NS, "t", [("pop:k", b"item:2")], delete=["item:2", "never-there"])
        assert _keys(store) == ["item:1", "pop:k"]

    def test_threads_and_namespaces_keep_their_values_apart(self, tmp_path: Path) -> None:
        """The same key in two threads or namespaces is two values; ``threads`` lists a namespace's."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("k", b"1")])
        store.write(NS, "u", [("k", b"2")])
        store.write("tests.other", "t", [("k", b"3")])
        assert [store.get(ns, t, "k").value for ns, t in ((NS, "t"), (NS, "u"), ("tests.other", "t"))] == [  # type: ignore[union-attr]
            b"1",
            b"2",
            b"3",
        ]
        assert store.threads(NS) == ["t", "u"]
        assert store.threads("tests.other") == ["t"]
        assert store.threads("tests.none") == []

    def test_a_deleted_thread_is_gone_and_the_others_stay(self, tmp_path: Path) -> None:
        """``delete_thread`` removes one thread's values; a thread with no value is not listed."""
        store = self.open_store(tmp_path)
        store.write(NS, "t", [("a", b""), ("b", b"")])
        store.write(NS, "u", [("a", b"")])
        store.delete_thread(NS, "t")
        assert _keys(store, "t") == []
        assert _keys(store, "u") == ["a"]
        store.write(NS, "u", delete=["a"])
        assert store.threads(NS) == []

    def test_a_store_opened_again_over_the_same_place_sees_the_values(self, tmp_path: Path) -> None:
        """What one store object wrote, another over the same place reads (another process would)."""
        self.open_store(tmp_path).write(NS, "t", [("a", b"kept")])
        again = self.open_store(tmp_path).get(NS, "t", "a")
        assert again is not None
        assert again.value == b"kept"

    def test_an_unknown_order_is_refused(self, tmp_path: Path) -> None:
        """``order`` is ``"seq"`` or ``"key"``; anything else is a ``ConfigurationError``."""
        store = self.open_store(tmp_path)
        with pytest.raises(ConfigurationError, match='"seq" or "key"'):
            store.items(NS, "t", order="time")  # type: ignore[arg-type]
