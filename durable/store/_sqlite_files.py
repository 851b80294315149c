"""What a failure to open a store's SQLite file means: another process holds it, or the disk refused it.

A lock is worth waiting for; a full disk, a read-only file system or a
missing permission is not: the opener says what happened at once, with the
OS error, and that the file is not damaged. The event log, the control
store and the schedules (``runtime.db``) all open their files through this.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import LogUnavailableError

BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""Result codes that say another connection holds the file: wait and try again."""

NOT_NOW = (
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_PERM,
)
"""Result codes at open that say the file cannot be used now, not that it is damaged."""


def code_of(exc: BaseException) -> int:
    """The primary SQLite result code of a failed statement (0 when it carries none)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def busy(exc: BaseException) -> bool:
    """Whether a failed statement only met another process's lock (worth a wait)."""
    return code_of(exc) in BUSY


def disk_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has no block left for this process."""
    try:
        stat = os.statvfs(path.parent)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < 64 * 1024  # less than SQLite needs to open a file


def refused(path: Path, exc: BaseException) -> LogUnavailableError | None:
    """The error for a file the disk or the file system refused at open (``None``: it may be damaged).

    Args:
        path: The file.
        exc: What SQLite raised.
    """
    code = code_of(exc)
    if code == sqlite3.SQLITE_FULL or (code in NOT_NOW and disk_full(path)):
        return LogUnavailableError(
            f"the disk holding {str(path)!r} is full ({exc}). The file is not damaged and nothing "
            "was written to it. Free some space, then try again."
        )
    if code in NOT_NOW:
        return LogUnavailableError(
            f"{str(path)!r} cannot be opened right now ({exc}). The file is not damaged and nothing "
            "was written to it. Fix the cause (permissions, the disk, another process holding "
            "it), then try again."
        )
    return None


def stayed_locked(path: Path, busy_timeout: int, exc: BaseException) -> LogUnavailableError:
    """The error for a file another process kept locked for all of ``busy_timeout`` (milliseconds)."""
    return LogUnavailableError(
        f"{str(path)!r} stayed locked by another process for {busy_timeout / 1000:g} s while "
        f"this one opened it ({exc}). The file is not damaged: try again once that process has "
        "let go of it."
    )
