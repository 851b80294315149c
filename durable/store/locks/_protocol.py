"""One driver per run: OS file locks for local worlds, in-process locks for memory worlds.

A file lock (a byte of one shared file on Linux, else ``flock`` on a file per
name) is released by the kernel when its process dies, so a lock left by a
killed process is recovered without any manual step. A
waiting caller polls, so its own timeout and cancellation are honoured.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import struct
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from ..._logging import INFO, WARNING, note
from ...security import open_file, read_file

_POLL_MIN = 0.001
_POLL_MAX = 0.05


class Locks(Protocol):
    """Named exclusive locks: the engine holds ``run:<run_id>`` while it drives a run.

    A lock held by a process that dies must come free (``FileLocks`` uses OS
    file locks, which the kernel releases with the process). The fencing token
    of ``EventLog`` guards the log even when a lock is lost.
    """

    def try_acquire(self, name: str) -> object | None:
        """Take the lock now, without waiting.

        Args:
            name: The lock's name.

        Returns:
            A handle to pass to ``release``, or ``None`` when another holder has it.
        """

    def release(self, handle: object) -> None:
        """Give the lock back.

        Args:
            handle: What ``try_acquire`` returned.
        """


def _file_name(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80]
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:16]}.lock"


_OFD = getattr(fcntl, "F_OFD_SETLK", None)
"""Linux's open-file-description locks: byte ranges of one file, released when the process dies."""

SHARED_FILE = "held.lock"
"""The one file, in the locks folder, whose bytes are the locks (where ``F_OFD_SETLK`` exists)."""


def _byte_of(name: str) -> int:
    """The byte of the shared file that stands for ``name``: 62 bits of its hash."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest()) >> 2


def _range(kind: int, byte: int) -> bytes:
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock).
    return struct.pack("hhqqi", kind, os.SEEK_SET, byte, 1, 0)


class FileLocks:
    """OS locks in a folder (``locks/`` under the data directory), freed by the kernel at exit.

    The lock files are opened without following a link: a link planted at the
    folder or at a lock file raises ``DataDirectoryError``.

    On Linux a lock is one byte of one shared file, locked with
    ``F_OFD_SETLK``: taking or giving back a lock is one system call on a
    file opened once, where a file of its own per run would be created
    (the costliest part of a short run). Elsewhere each name has a file of
    its own, locked with ``flock``. Either way the lock belongs to the open
    file, so two ``FileLocks`` on one folder exclude each other as two
    processes do, and the kernel frees the locks of a process that dies.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self._fd: int | None = None  # the shared file, opened at the first lock
        self._held: dict[int, str] = {}  # byte -> name, of the locks this object holds
        self._mutex = threading.Lock()

    def try_acquire(self, name: str) -> object | None:
        if _OFD is None:
            return self._try_flock(name)
        byte = _byte_of(name)
        with self._mutex:
            if byte in self._held:  # this object holds it: the kernel would say yes again
                return None
            fd = self._fd
            if fd is None:
                fd = self._fd = self._open(SHARED_FILE)
            try:
                fcntl.fcntl(fd, _OFD, _range(fcntl.F_WRLCK, byte))
            except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another holder has it
                return None
            self._held[byte] = name
            return _Held(byte)

    def _open(self, name: str) -> int:
        """The lock file ``name`` (made when missing); a link there or at the folder is refused."""
        return open_file(self.folder.parent, (self.folder.name,), name, os.O_RDWR | os.O_CREAT)

    def _try_flock(self, name: str) -> object | None:
        fd = self._open(_file_name(name))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def holder(self, name: str) -> int | None:
        """The pid that the last holder of ``name`` wrote into its lock file, if any.

        Only a lock file per name holds a pid: a byte of the shared file names
        no process (the kernel reports none for it), so this is ``None`` there
        and a run's driver is known from its claim.
        """
        if _OFD is not None:
            return None
        try:
            raw = read_file(self.folder.parent, (self.folder.name,), _file_name(name))
        except OSError:
            return None
        text = (raw or b"").decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None

    def release(self, handle: object) -> None:
        if isinstance(handle, _Held):
            with self._mutex:
                if self._held.pop(handle.byte, None) is not None and self._fd is not None:
                    with contextlib.suppress(OSError):
                        fcntl.fcntl(self._fd, _OFD, _range(fcntl.F_UNLCK, handle.byte))  # type: ignore[arg-type]
            return
        assert isinstance(handle, int)
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_UN)
        os.close(handle)

    def close(self) -> None:
        """Close the shared file: every lock this object still holds is given back."""
        with self._mutex:
            fd, self._fd = self._fd, None
            self._held.clear()
        if fd is not None:
            os.close(fd)


class _Held:
    """A lock taken in the shared file: the byte that stands for its name."""

    __slots__ = ("byte",)

    def __init__(self, byte: int):
        self.byte = byte


class MemoryLocks:
    """In-process locks for ``memory_world()``."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    def try_acquire(self, name: str) -> object | None:
        with self._mutex:
            if name in self._held:
                return None
            self._held.add(name)
            return name

    def release(self, handle: object) -> None:
        with self._mutex:
            self._held.discard(str(handle))


@contextlib.asynccontextmanager
async def hold(locks: Locks, name: str) -> AsyncIterator[None]:
    """Hold ``name`` for the block, waiting (cancellably) while another caller holds it."""
    handle = locks.try_acquire(name)
    if handle is None:
        handle = await _wait(locks, name)
    try:
        yield
    finally:
        locks.release(handle)


LONG_WAIT = 1.0
"""Seconds of waiting for a lock after which the wait is logged."""


async def _wait(locks: Locks, name: str) -> object:
    """Poll until ``name`` comes free; a wait past ``LONG_WAIT`` is logged when it starts and ends."""
    delay = _POLL_MIN
    start = time.monotonic()
    told = False
    handle = None
    while handle is None:
        await asyncio.sleep(delay)  # a real wait on another driver; timeouts cancel it
        delay = min(delay * 2, _POLL_MAX)
        handle = locks.try_acquire(name)
        if not told and handle is None and time.monotonic() - start > LONG_WAIT:
            told = True
            note(
                WARNING, _run_of(name), None, "waiting for lock %s: another driver holds it", name, lock=name
            )
    if told:
        waited = time.monotonic() - start
        note(INFO, _run_of(name), None, "took lock %s after %.1f s", name, waited, lock=name, waited=waited)
    return handle


def _run_of(name: str) -> str | None:
    return name[4:] if name.startswith("run:") else None
