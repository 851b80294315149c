"""The queries of ``PostgresLog`` that only read: row times, rows by type, summaries, the integrity check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._protocol import Row, RunInfo, listing_where

if TYPE_CHECKING:
    from psycopg import Connection

    from ..postgres._schema import Database

INFO_COLUMNS = "run_id, workflow, status, parent_run_id, created_at, updated_at, code"


class PostgresReads:
    """What a Postgres log reads besides a run's rows (``PostgresLog`` adds the writes and the rows)."""

    db: Database

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        """When each row of a run above ``after_seq`` was written (the server's clock), by seq.

        Rows written before migration ``0004_event_times`` are left out.
        """

        def op(conn: Connection[Any], attempt: int) -> dict[int, float]:
            cur = conn.execute(
                self.db.sql(
                    "SELECT seq, written_at FROM {s}.events WHERE run_id = %s AND seq > %s "
                    "AND written_at IS NOT NULL"
                ),
                (run_id, after_seq),
            )
            return {int(r[0]): float(r[1]) for r in cur}

        return self.db.run(op, run_id=run_id)

    def rows_of_types(self, run_ids: Sequence[str], types: Sequence[str]) -> dict[str, list[Row]]:
        """The rows of these types of several runs, by run, in seq order, in one query."""
        query = self.db.sql(
            "SELECT run_id, seq, type, data FROM {s}.events WHERE run_id = ANY(%s) AND type = ANY(%s) "
            "ORDER BY run_id, seq"
        )
        ids, kinds = list(dict.fromkeys(run_ids)), list(types)

        def op(conn: Connection[Any], attempt: int) -> dict[str, list[Row]]:
            out: dict[str, list[Row]] = {r: [] for r in ids}
            for run_id, seq, type_, data in conn.execute(query, (ids, kinds)):
                out[run_id].append((int(seq), type_, data))
            return out

        return self.db.run(op)

    def child_runs(self, parent_ids: Sequence[str]) -> dict[str, list[str]]:
        """The runs each of these runs started, by parent (through the index on ``parent_run_id``)."""
        query = self.db.sql(
            "SELECT parent_run_id, run_id FROM {s}.runs WHERE parent_run_id = ANY(%s) AND workflow != '' "
            "ORDER BY run_id"
        )
        ids = list(dict.fromkeys(parent_ids))

        def op(conn: Connection[Any], attempt: int) -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for parent, run_id in conn.execute(query, (ids,)):
                out.setdefault(parent, []).append(run_id)
            return out

        return self.db.run(op)

    def last_row(self, run_id: str) -> Row | None:
        """The run's row with the highest seq (its outcome, once it has ended), or ``None``."""
        query = self.db.sql(
            "SELECT seq, type, data FROM {s}.events WHERE run_id = %s ORDER BY seq DESC LIMIT 1"
        )

        def op(conn: Connection[Any], attempt: int) -> Row | None:
            found = conn.execute(query, (run_id,)).fetchone()
            return None if found is None else (int(found[0]), found[1], found[2])

        return self.db.run(op, run_id=run_id)

    def info(self, run_id: str) -> RunInfo | None:
        """The run's summary, or ``None`` when no append started it."""

        def op(conn: Connection[Any], attempt: int) -> RunInfo | None:
            row = conn.execute(
                self.db.sql(f"SELECT {INFO_COLUMNS} FROM {{s}}.runs WHERE run_id = %s AND workflow != ''"),
                (run_id,),
            ).fetchone()
            return RunInfo(*row) if row else None

        return self.db.run(op, run_id=run_id)

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before: tuple[float, str] | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first (ties by run id, descending), optionally filtered, a page by offset or key."""
        where, args = listing_where(status, workflow, "%s")
        if before is not None:
            where += " AND (created_at, run_id) < (%s, %s)"
            args += [before[0], before[1]]
        query = self.db.sql(
            f"SELECT {INFO_COLUMNS} FROM {{s}}.runs WHERE {where} "
            "ORDER BY created_at DESC, run_id DESC LIMIT %s OFFSET %s"
        )
        args += [limit, offset]

        def op(conn: Connection[Any], attempt: int) -> list[RunInfo]:
            # Planned for its own arguments each time: a generic plan of ``status = $1`` would
            # not know that ``running`` is a handful of rows among months of finished ones.
            return [RunInfo(*r) for r in conn.execute(query, args, prepare=False)]

        return self.db.run(op)

    def count(self, *, status: str | None = None, workflow: str | None = None) -> int:
        """How many runs ``runs`` lists with these filters (one ``count(*)``)."""
        where, args = listing_where(status, workflow, "%s")
        query = self.db.sql(f"SELECT count(*) FROM {{s}}.runs WHERE {where}")

        def op(conn: Connection[Any], attempt: int) -> int:
            row = conn.execute(query, args).fetchone()
            return int(row[0]) if row else 0

        return self.db.run(op)

    def integrity_check(self) -> str:
        """``"ok"`` when the schema is at this SDK's version and every summary's rows are readable."""
        from ..postgres._migrations import SCHEMA_VERSION

        def op(conn: Connection[Any], attempt: int) -> str:
            row = conn.execute(self.db.sql("SELECT version FROM {s}.durable_meta")).fetchone()
            if row is None or int(row[0]) != SCHEMA_VERSION:
                return (
                    f"schema {self.db.schema!r} has version {row[0] if row else None}, not {SCHEMA_VERSION}"
                )
            bad = conn.execute(
                self.db.sql("SELECT count(*) FROM {s}.events WHERE seq < 1 OR type = ''")
            ).fetchone()
            if bad is not None and int(bad[0]):
                return f"{bad[0]} event rows have no seq or no type"
            return "ok"

        return self.db.run(op)
