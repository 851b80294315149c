"""Diagnostic mode of the Postgres scenarios: count the statements each process sends, by caller.

``install(path)`` wraps ``psycopg.Cursor.execute`` (which
``Connection.execute`` calls) in this process; every call is counted under the
durable function that made it (the innermost frame in ``durable/``) and the
statement's first words. At exit the counts are written to ``path`` as JSON.
The benchmark's workers and client install it when ``BENCH_SQL_TRACE`` names
a folder (``python -m benchmarks.postgres --sql-trace DIR``), which shows
which part of a run each round trip belongs to. Counting costs CPU, so the
timings of a traced run are not figures.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import sys
import threading
from typing import Any

_counts: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()


def _caller() -> str:
    f: Any = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if f"{os.sep}durable{os.sep}" in name and f"{os.sep}benchmarks{os.sep}" not in name:
            rel = name.rsplit(f"{os.sep}durable{os.sep}", 1)[1]
            return f"{rel}:{f.f_code.co_name}"
        f = f.f_back
    return "?"


def _words(query: Any) -> str:
    text = query if isinstance(query, str) else str(getattr(query, "as_string", lambda _c: query)(None))
    return " ".join(text.split())[:70]


def install(path: str) -> None:
    """Count every ``execute`` of this process; write the counts to ``path`` at exit."""
    import psycopg

    def wrap(cls: Any) -> None:
        original = cls.execute

        def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            key = f"{_caller()} | {_words(query)}"
            with _lock:
                _counts[key] += 1
            return original(self, query, *args, **kwargs)

        cls.execute = execute

    wrap(psycopg.Cursor)  # Connection.execute goes through a cursor's

    def dump() -> None:
        with open(path, "w") as f:
            json.dump(dict(_counts.most_common()), f, indent=1)

    atexit.register(dump)


def mark() -> dict[str, int]:
    """The counts so far (to subtract warm-up from a measured interval)."""
    with _lock:
        return dict(_counts)
