"""A doorbell between the processes of one data directory: "something changed, look again".

A process that waits for a change (a worker for new runs, a driver for
cancellations, a caller of ``result()``) binds a Unix datagram socket in
``bells/`` of the data directory; a process that commits a change sends one
byte to every socket there. The byte carries nothing: the reader then reads
the database as it would have on a poll, so a lost ring only delays a reader
until its next poll and can never make it act on something that is not
committed. A socket whose process died refuses the byte and is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

MAX_PATH = 100
"""Longest socket path this module binds (the kernel's limit is 108 bytes with the NUL)."""


class Doorbell:
    """The bells of one folder.

    Args:
        folder: Where the sockets live (``bells/`` of a data directory).
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self._out: socket.socket | None = None

    def usable(self) -> bool:
        """Whether a socket path in this folder fits the kernel's limit."""
        return len(os.fsencode(self.folder / f"{os.getpid()}-{'0' * 12}.sock")) <= MAX_PATH

    def ring(self) -> None:
        """Wake every listener of the folder (never raises: a ring is only a hint)."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        if self._out is None:
            self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._out.setblocking(False)
        for name in names:
            if not name.endswith(".sock"):
                continue
            path = os.path.join(self.folder, name)
            try:
                self._out.sendto(b"!", path)
            except ConnectionRefusedError:  # nobody bound: its process died
                with contextlib.suppress(OSError):
                    os.unlink(path)
            except OSError:  # a full queue already holds a ring; a vanished file needs none
                pass

    def listen(self, on_ring: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``on_ring`` in the running event loop at each ring; returns the function that stops it.

        Returns ``None`` when no bell can be bound here (no running loop, a
        path too long for a Unix socket, a folder that cannot be written):
        the caller then polls.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if not self.usable():
            return None
        path = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            sock.bind(os.fspath(path))
            sock.setblocking(False)
        except OSError:
            sock.close()
            return None

        def drain() -> None:
            with contextlib.suppress(OSError):
                while sock.recv(64):
                    pass
            on_ring()

        loop.add_reader(sock.fileno(), drain)

        def stop() -> None:
            with contextlib.suppress(Exception):
                loop.remove_reader(sock.fileno())
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(path)

        return stop

    def close(self) -> None:
        """Close the sending socket."""
        if self._out is not None:
            self._out.close()
            self._out = None
