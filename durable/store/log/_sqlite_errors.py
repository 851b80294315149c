"""What a failed SQLite statement of the event log means: the file is damaged, or unusable for now."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ...errors import LogCorruptedError, LogUnavailableError
from .._sqlite_files import BUSY
from ._protocol import Row


def failure(
    exc: Exception, path: Path, run_id: str | None, rows: Sequence[Row] = ()
) -> LogCorruptedError | LogUnavailableError:
    """The durable error for a failed statement: the file is damaged, or it cannot be written now."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    where = f"run {run_id!r}: " if run_id else ""
    if rows:
        where += f"writing events from seq {rows[0][0]}: "
    if code == sqlite3.SQLITE_FULL:
        return LogUnavailableError(
            f"{where}the disk holding {str(path)!r} is full ({exc}). Nothing of this "
            "write was kept and everything committed before it is intact. Free some space, "
            "then resume the run with the same run_id.",
            run_id=run_id,
        )
    if code in BUSY or code in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM):
        return LogUnavailableError(
            f"{where}{str(path)!r} cannot be used right now ({exc}). Nothing of this "
            "write was kept and everything committed before it is intact. Fix the cause "
            "(another process holding the file, permissions, the disk), then resume.",
            run_id=run_id,
        )
    return LogCorruptedError(
        f"{where}{str(path)!r} is damaged ({exc}). Nothing was written. Run "
        "`little verify` on the run to see what can still be read, then restore the file "
        "from a backup or move it aside and start again.",
        run_id=run_id,
    )
