"""``EncryptedThreads``: a thread store whose values are encrypted under the world's codec.

Each value is bound to its namespace, thread and key, so a ciphertext copied
to another key or thread does not decrypt. Namespaces, thread ids and keys
stay in the clear (they are ids and names): do not put secrets in them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...errors import CodecError, KeyMismatchError
from ...security import Codec
from ..threads._protocol import Order, ThreadItem, ThreadStore

PREFIX = b"enc1:"


def thread_ad(namespace: str, thread: str, key: str) -> bytes:
    """The associated data of a thread's value: its namespace, thread and key (length-prefixed)."""
    parts = "|".join(f"{len(p)}:{p}" for p in (namespace, thread, key))
    return f"thread|{parts}".encode("utf-8", "surrogatepass")


def seal_thread_value(codec: Codec, namespace: str, thread: str, key: str, plain: bytes) -> bytes:
    """A thread's value as ``EncryptedThreads`` stores it: ``enc1:`` and the ciphertext bound to its place."""
    return PREFIX + codec.encrypt(bytes(plain), thread_ad(namespace, thread, key))


def open_thread_value(codec: Codec, namespace: str, thread: str, key: str, stored: bytes) -> bytes:
    """The plain bytes of ``seal_thread_value``'s output.

    Raises:
        CodecError: It is not encrypted, or does not decrypt in its place (moved, edited).
        KeyMismatchError: It was encrypted under a key the codec does not hold.
    """
    what = f"the value {key!r} of thread {thread!r} ({namespace})"
    try:
        if not stored.startswith(PREFIX):
            raise CodecError("it is not encrypted")
        return codec.decrypt(stored[len(PREFIX) :], thread_ad(namespace, thread, key))
    except KeyMismatchError as exc:
        raise KeyMismatchError(f"{what}: {exc}", key_id=exc.key_id) from None
    except CodecError as exc:
        raise CodecError(
            f"{what} does not decrypt in its place ({exc}); it was moved from another one, "
            "written without the world's codec, edited or damaged."
        ) from None


class EncryptedThreads:
    """A thread store whose values are sealed with ``codec`` (``world.threads`` under a codec).

    Args:
        inner: The plain store the sealed values go to.
        codec: The world's codec.
    """

    def __init__(self, inner: ThreadStore, codec: Codec):
        self.inner = inner
        self.codec = codec

    def _open(self, namespace: str, thread: str, item: ThreadItem) -> ThreadItem:
        return replace(item, value=open_thread_value(self.codec, namespace, thread, item.key, item.value))

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    def write(
        self,
        namespace: str,
        thread: str,
        items: Sequence[tuple[str, bytes]] = (),
        *,
        replace: bool = False,
        delete: Sequence[str] = (),
    ) -> None:
        sealed = [(k, seal_thread_value(self.codec, namespace, thread, k, v)) for k, v in items]
        self.inner.write(namespace, thread, sealed, replace=replace, delete=delete)

    def get(self, namespace: str, thread: str, key: str) -> ThreadItem | None:
        item = self.inner.get(namespace, thread, key)
        return None if item is None else self._open(namespace, thread, item)

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
        found = self.inner.items(
            namespace, thread, prefix=prefix, order=order, newest_first=newest_first, limit=limit
        )
        return [self._open(namespace, thread, i) for i in found]

    def delete_thread(self, namespace: str, thread: str) -> None:
        self.inner.delete_thread(namespace, thread)

    def threads(self, namespace: str) -> list[str]:
        return self.inner.threads(namespace)
