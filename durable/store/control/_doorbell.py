"""A doorbell between the processes of one data directory: "something changed, look again".

A process that waits for a change (a worker for new runs, a driver for
cancellations, a caller of ``result()``) binds a Unix datagram socket in
``bells/`` of the data directory; a process that commits a change sends one
byte to every socket there. The byte carries nothing: the reader then reads
the database as it would have on a poll, so a lost ring only delays a reader
until its next poll and can never make it act on something that is not
committed. A socket whose process died refuses the byte and is removed.

A Unix socket's address holds at most 108 bytes, far less than a data
directory's path may take. Where the folder's own path is too long, the
sockets are addressed through a descriptor of the folder
(``/proc/self/fd/<fd>/<name>``, Linux), so a deep data directory rings like
any other; only where neither fits does a waiter fall back to polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from ...errors import DataDirectoryError
from ...security import open_folder, remove_file
from ._protocol import KINDS

MAX_PATH = 100
"""Longest socket path this module binds (the kernel's limit is 108 bytes with the NUL)."""

FD_ROOT = "/proc/self/fd"
"""Where a folder's descriptor names the folder with a short path (Linux)."""

_NAME_LEN = len(f"{2**22}-{'0' * 12}.sock")  # a socket's file name: the pid (at most 2**22) and 12 hex
_KNOWN = frozenset(ord(k) for k in KINDS.values())


def _fits(folder: str) -> bool:
    return len(os.fsencode(folder)) + 1 + _NAME_LEN <= MAX_PATH


@contextlib.contextmanager
def through_descriptor(folder: Path) -> Iterator[str | None]:
    """A short path naming ``folder`` through a descriptor held open for the block; ``None`` if none fits.

    For a folder whose own path leaves no room for a socket's name: the
    socket files keep their real place, only their address is shorter.
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        via = f"{FD_ROOT}/{fd}"
        yield via if _fits(via) and os.path.isdir(via) else None
    finally:
        os.close(fd)


class Doorbell:
    """The bells of one folder.

    Args:
        folder: Where the sockets live (``bells/`` of a data directory).
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self._short = _fits(os.fspath(folder))  # its own path leaves room for a socket's name
        self._out: list[socket.socket] = []  # the sending socket, once something rang
        self._ears: dict[asyncio.AbstractEventLoop, _Ear] = {}
        # A store left open to the garbage collector still closes its sockets and their files.
        weakref.finalize(self, _close_all, self._out, self._ears)

    def ring(self, kinds: str) -> None:
        """Wake the listeners of the folder that wait for one of ``kinds`` (never raises: a ring is a hint).

        Args:
            kinds: The bytes of ``KINDS`` that say what changed (``"rf"``: a run
                ended and freed a slot of its queue).
        """
        data = kinds.encode("ascii")
        try:
            names = [name for name in os.listdir(self.folder) if name.endswith(".sock")]
        except OSError:
            return
        if not names:
            return
        if not self._out:
            out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            out.setblocking(False)
            self._out.append(out)
        if self._short:
            self._send(data, os.fspath(self.folder), names)
            return
        with through_descriptor(self.folder) as via:
            if via is not None:
                self._send(data, via, names)

    def _send(self, data: bytes, folder: str, names: list[str]) -> None:
        """Send ``data`` to the sockets ``names`` of the folder addressed as ``folder``."""
        out = self._out[0]
        for name in names:
            try:
                out.sendto(data, os.path.join(folder, name))
            except ConnectionRefusedError:  # nobody bound: its process died
                with contextlib.suppress(OSError, DataDirectoryError):  # a link is left alone
                    remove_file(self.folder.parent, (self.folder.name,), name)
            except OSError:  # a full queue already holds a ring; a vanished file needs none
                pass

    def listen(
        self, on_ring: Callable[[], None], kinds: frozenset[int] | None = None
    ) -> Callable[[], None] | None:
        """Call ``on_ring`` in the running event loop at each ring; returns the function that stops it.

        ``kinds`` (from ``kinds_of``) narrows the calls to the rings that carry
        one of those bytes; ``None`` hears every ring.

        The listeners of one event loop share one socket, bound at the first
        and kept until ``close()``: a worker that drives one short run after
        another, or a caller waiting on one result after another, does not
        create and remove a socket file for each.

        Returns ``None`` when no bell can be bound here (no running loop, a
        folder that cannot be written, or a path too long for a Unix socket
        where no folder descriptor can shorten it): the caller then polls.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        ear = self._ears.get(loop)
        if ear is None:
            for old in [old for old in self._ears if old.is_closed()]:  # loops that ended
                self._ears.pop(old).close()
            ear = _Ear.bind(self.folder, self._short, loop)
            if ear is None:
                return None
            self._ears[loop] = ear
        call = (on_ring, kinds)
        ear.calls.append(call)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                ear.calls.remove(call)

        return stop

    def close(self) -> None:
        """Close the sending socket and every bell this object bound (their files are removed)."""
        _close_all(self._out, self._ears)


def _close_all(out: list[socket.socket], ears: dict[asyncio.AbstractEventLoop, _Ear]) -> None:
    for sock in out:
        sock.close()
    out.clear()
    for ear in list(ears.values()):
        ear.close()
    ears.clear()


class _Ear:
    """One bound socket and the listeners of one event loop that it calls at each ring."""

    def __init__(self, sock: socket.socket, path: Path, loop: asyncio.AbstractEventLoop):
        self.sock, self.path, self.loop = sock, path, loop
        self.calls: list[tuple[Callable[[], None], frozenset[int] | None]] = []

    @classmethod
    def bind(cls, folder: Path, short: bool, loop: asyncio.AbstractEventLoop) -> _Ear | None:
        """Bind a socket in ``folder``, through a descriptor of it opened without following a link.

        ``None`` when no bell can be bound there (the caller polls): no address
        fits, the folder cannot be written, or it is a link (nothing is made
        where it points).
        """
        path = folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        fd: int | None = None
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)  # the data directory: the caller's to name
            fd = open_folder(folder.parent, (folder.name,), create=True)
            assert fd is not None
            via = f"{FD_ROOT}/{fd}"
            if _fits(via) and os.path.isdir(via):
                sock.bind(f"{via}/{path.name}")
            elif short:  # no /proc: the path, checked just before
                sock.bind(os.fspath(path))
            else:  # no address fits: the caller polls
                raise OSError(f"no Unix socket address fits {folder}")
            sock.setblocking(False)
        except (OSError, DataDirectoryError):
            sock.close()
            return None
        finally:
            if fd is not None:
                os.close(fd)
        ear = cls(sock, path, loop)
        loop.add_reader(sock.fileno(), ear.drain)
        return ear

    def drain(self) -> None:
        heard: set[int] = set()
        with contextlib.suppress(OSError):
            while True:
                data = self.sock.recv(64)
                if not data:  # an empty datagram says nothing: anything may have changed
                    heard.add(0)
                heard.update(data)
        anything = not heard or not heard <= _KNOWN
        for on_ring, kinds in list(self.calls):
            if anything or kinds is None or not kinds.isdisjoint(heard):
                on_ring()

    def close(self) -> None:
        if not self.loop.is_closed():
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
