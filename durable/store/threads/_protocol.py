"""Threads: the ``ThreadStore`` protocol, its item, and ``MemoryThreads``.

A thread store keeps values by thread: a conversation's items, a graph's
checkpoints and pending writes. Each value lives at ``(namespace, thread,
key)``; the namespace says whose values they are (``openai_agents.session``,
``langgraph.checkpoints``), the thread which conversation or graph thread,
the key which value. Every stored value gets a ``seq``, increasing across
the store, the order it was first written in.

Writes are one transaction each and keyed: writing a key that is already
stored keeps the stored value (or replaces it, in its place, when asked), so
a write repeated with the same keys after a crash stores nothing twice. A
write may delete keys in the same transaction (a conversation's last item
popped, with a record of the pop under a key of its own).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ...errors import ConfigurationError

Order = Literal["seq", "key"]


@dataclass(frozen=True)
class ThreadItem:
    """One stored value of a thread.

    Attributes:
        key: Its key in the thread.
        value: The stored bytes.
        seq: When it was first written, in the store's order (increasing).
    """

    key: str
    value: bytes
    seq: int


class ThreadStore(Protocol):
    """The protocol a world's thread store implements (each method is one transaction)."""

    def write(
        self,
        namespace: str,
        thread: str,
        items: Sequence[tuple[str, bytes]] = (),
        *,
        replace: bool = False,
        delete: Sequence[str] = (),
    ) -> None:
        """Delete the keys ``delete``, then store ``items``, in one transaction.

        A key already stored keeps its value, unless ``replace`` is true: then
        its value is replaced and it keeps its ``seq``.
        """

    def get(self, namespace: str, thread: str, key: str) -> ThreadItem | None:
        """The value at ``key``, or ``None``."""

    def items(
        self,
        namespace: str,
        thread: str,
        *,
        prefix: str = "",
        order: Order = "seq",
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[ThreadItem]:
        """The thread's values whose key starts with ``prefix``, by ``seq`` or by key.

        ``newest_first`` reverses the order (the highest seq or key first);
        ``limit`` keeps that many from the start of the order.
        """

    def delete_thread(self, namespace: str, thread: str) -> None:
        """Remove every value of the thread."""

    def threads(self, namespace: str) -> list[str]:
        """The threads of ``namespace`` that hold a value, sorted."""

    def close(self) -> None:
        """Release what the store holds open."""


def check_order(order: object) -> None:
    """Refuse an ``order`` that is neither ``"seq"`` nor ``"key"``."""
    if order not in ("seq", "key"):
        raise ConfigurationError(f'a thread\'s items are ordered by "seq" or "key", not {order!r}.')


class MemoryThreads:
    """Threads held in this process (``memory_world``)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], dict[str, ThreadItem]] = {}
        self._seq = 0
        self._mutex = threading.Lock()

    def close(self) -> None:
        """Nothing to release."""

    def write(
        self,
        namespace: str,
        thread: str,
        items: Sequence[tuple[str, bytes]] = (),
        *,
        replace: bool = False,
        delete: Sequence[str] = (),
    ) -> None:
        with self._mutex:
            stored = self._items.setdefault((namespace, thread), {})
            for key in delete:
                stored.pop(key, None)
            for key, value in items:
                old = stored.get(key)
                if old is None:
                    self._seq += 1
                    stored[key] = ThreadItem(key, bytes(value), self._seq)
                elif replace:
                    stored[key] = ThreadItem(key, bytes(value), old.seq)
            if not stored:
                del self._items[(namespace, thread)]

    def get(self, namespace: str, thread: str, key: str) -> ThreadItem | None:
        return self._items.get((namespace, thread), {}).get(key)

    def items(
        self,
        namespace: str,
        thread: str,
        *,
        prefix: str = "",
        order: Order = "seq",
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[ThreadItem]:
        check_order(order)
        with self._mutex:
            found = [i for k, i in self._items.get((namespace, thread), {}).items() if k.startswith(prefix)]
        if order == "seq":
            found.sort(key=lambda i: i.seq, reverse=newest_first)
        else:
            found.sort(key=lambda i: i.key, reverse=newest_first)
        return found if limit is None else found[:limit]

    def delete_thread(self, namespace: str, thread: str) -> None:
        with self._mutex:
            self._items.pop((namespace, thread), None)

    def threads(self, namespace: str) -> list[str]:
        with self._mutex:
            return sorted(t for ns, t in self._items if ns == namespace)
