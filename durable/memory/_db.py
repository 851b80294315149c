"""One SQLite connection with ``sqlite-vec`` loaded, whichever binding can load it.

The standard ``sqlite3`` module is used when this Python's build can load
extensions; many builds cannot (``enable_load_extension`` is missing), and
then ``apsw``, a binding that always can, is used instead. Both come through
the same small surface (``query``, ``run``, ``run_many``, ``write``), so the
memory store never knows which one it has.
"""

from __future__ import annotations

import contextlib
import importlib
import sqlite3
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from ..errors import MemoryStoreError
from ..security import refuse_linked_database

Driver = Literal["auto", "sqlite3", "apsw"]

# sqlite-vec keeps the SQLite API table it was loaded with in one process-wide
# variable, so it can serve one SQLite library per process at a time: loading it
# through apsw's SQLite while a sqlite3 connection still uses it crashes the
# process. This count of open connections per binding is the guard.
_OPEN: dict[str, int] = {"sqlite3": 0, "apsw": 0}

INSTALL_HINT = "pip install 'little-workflow[memory]'"
BUSY_TIMEOUT_MS = 30_000


def _missing(what: str) -> MemoryStoreError:
    return MemoryStoreError(
        f"the memory store needs {what}, which is not installed. Install the memory extra: {INSTALL_HINT}"
    )


def _vec_path() -> str:
    try:
        sqlite_vec = importlib.import_module("sqlite_vec")
    except ImportError:
        raise _missing("the sqlite-vec extension") from None
    return str(sqlite_vec.loadable_path())


def _release(conn: Any, driver: str) -> None:
    _OPEN[driver] -= 1
    conn.close()


def stdlib_can_load_extensions() -> bool:
    """Whether this Python's ``sqlite3`` module was built with extension loading."""
    return hasattr(sqlite3.Connection, "enable_load_extension")


class VecDb:
    """A connection to one SQLite database with ``sqlite-vec`` loaded.

    Attributes:
        driver: ``"sqlite3"`` or ``"apsw"``, the binding in use.
        path: The database file, or ``":memory:"``.
    """

    def __init__(self, path: Path | None, *, driver: Driver = "auto"):
        self.path = str(path) if path is not None else ":memory:"
        if path is not None:
            refuse_linked_database(Path(path).parent, (), Path(path).name)
        vec = _vec_path()
        self._errors: tuple[type[BaseException], ...]
        if driver == "sqlite3" and not stdlib_can_load_extensions():
            raise MemoryStoreError(
                "this Python's sqlite3 module cannot load extensions; use driver='auto' so the "
                f"apsw binding is used instead ({INSTALL_HINT} installs it)."
            )
        use = "sqlite3" if driver in ("auto", "sqlite3") and stdlib_can_load_extensions() else "apsw"
        other = "apsw" if use == "sqlite3" else "sqlite3"
        if _OPEN[other]:
            raise MemoryStoreError(
                f"this process has a memory store open through {other}; sqlite-vec serves one "
                "SQLite library per process at a time. Use driver='auto' for every store, or "
                "close the other stores first."
            )
        self.driver = use
        self._conn: Any = self._open_stdlib(vec) if use == "sqlite3" else self._open_apsw(vec)
        _OPEN[use] += 1
        # A store dropped without close() still closes its connection and frees the binding.
        self._release = weakref.finalize(self, _release, self._conn, use)
        self.run(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self.query("PRAGMA journal_mode = WAL")
            self.run("PRAGMA synchronous = NORMAL")

    def _open_stdlib(self, vec: str) -> Any:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.enable_load_extension(True)
            conn.load_extension(vec)
            conn.enable_load_extension(False)
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"cannot open the memory store {self.path!r}: {exc}") from exc
        self._errors = (sqlite3.Error,)
        return conn

    def _open_apsw(self, vec: str) -> Any:
        try:
            apsw = importlib.import_module("apsw")
        except ImportError:
            raise _missing("the apsw binding (this Python's sqlite3 module cannot load extensions)") from None
        try:
            conn = apsw.Connection(self.path)
            conn.enable_load_extension(True)
            conn.load_extension(vec)
            conn.enable_load_extension(False)
        except apsw.Error as exc:
            raise MemoryStoreError(f"cannot open the memory store {self.path!r}: {exc}") from exc
        self._errors = (apsw.Error,)
        return conn

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """The exception types the binding raises for database errors."""
        return self._errors

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement and return all its rows."""
        return list(self._conn.execute(sql, tuple(params)))

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement, discarding any rows."""
        for _ in self._conn.execute(sql, tuple(params)):
            pass

    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters."""
        cur = self._conn.executemany(sql, [tuple(r) for r in rows])
        if cur is not None:
            for _ in cur:
                pass

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it commits or none of it."""
        self.run("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.run("ROLLBACK")
            raise
        self.run("COMMIT")

    def close(self) -> None:
        """Close the connection (a second call does nothing)."""
        self._release()
