"""Reading a run's rows: parsed a chunk at a time, and a damaged row named by its seq.

The index (``_recorded``) is built from these chunks. Parsing many payloads
in one call of the JSON parser costs a fraction of one call per row; when a
chunk does not parse, or an event in it lacks a field its model requires,
each row is read alone so that the error names the row that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import chain, compress, islice
from operator import itemgetter
from typing import Any, get_args

from ..errors import LogCorruptedError
from ..events import RUN_COMPLETED, RUN_STARTED, STEP_COMPLETED, Event
from ._values import loads

Json = dict[str, Any]


FIRST_TYPES = (RUN_STARTED, "snapshot")
"""What a run's log begins with: its start, or the snapshot that compaction put in place of it."""


def check_start(seq: int, type_: str, run_id: str) -> None:
    """Refuse a run's log whose first row is not its start (or a compaction's snapshot).

    Raises:
        LogCorruptedError: The start was deleted or the log cut short, so nothing may
            run as if the run were new.
    """
    if type_ not in FIRST_TYPES:
        raise LogCorruptedError(
            f"run {run_id!r}: its log begins with event {seq} ({type_}), not with its "
            "run.started: the start was deleted or the log was cut short. Nothing was run "
            f"and nothing was written. Run `little verify {run_id}` to see the damage, then "
            "restore the log from a backup or start the work again with a new run_id.",
            run_id=run_id,
        )


def from_start(rows: Iterable[tuple[int, str, str]], run_id: str) -> Iterator[tuple[int, str, str]]:
    """The rows as they are, the first checked by ``check_start`` (now: it is read here)."""
    it = iter(rows)
    for row in it:
        check_start(row[0], row[1], run_id)
        return chain((row,), it)
    return it


def until(rows: list[tuple[int, str, str]], seq: int, run_id: str) -> list[tuple[int, str, str]]:
    """The rows up to and including ``seq`` (seqs are consecutive within a log)."""
    first = rows[0][0] if rows else 1
    if not first <= seq <= rows[-1][0]:
        raise LogCorruptedError(
            f"run {run_id!r} restores to seq {seq}, which is not in its log (first seq {first}); "
            "the log was edited by hand or truncated.",
            run_id=run_id,
        )
    return rows[: seq - first + 1]


_NEEDED: dict[str, frozenset[str]] = {
    m.model_fields["type"].default: frozenset(
        name for name, f in m.model_fields.items() if f.is_required() and name != "type"
    )
    for m in get_args(get_args(Event)[0])
}
"""The fields each event type must hold (its schema's required fields)."""
_NEEDED[RUN_COMPLETED] = _NEEDED[RUN_COMPLETED] | {"output"}
_type_of = itemgetter(1)
_payload_of = itemgetter(2)


def check_fields(chunk: list[tuple[int, str, str]], parsed: list[Any], run_id: str) -> None:
    """Refuse a row that lacks a field its type requires, before the index takes it in.

    The index and what reads it later take those fields as given; a damaged
    row must stop the run here, named, not as a ``KeyError`` somewhere later.
    """
    # ``step.completed`` (most rows) is left to the index loop, which reads its fields
    # anyway; the other types are checked only when the chunk holds any.
    for row in (chunk[0], chunk[-1]):  # the log orders rows by seq: NULL first, text last
        if type(row[0]) is not int:
            raise damaged(run_id, repr(row[0]), row[1], TypeError("the event's seq is not an integer"))
    rare = set(map(_type_of, chunk))
    rare.discard(STEP_COMPLETED)
    if not rare:
        return
    needed = _NEEDED
    # Only the rows of those types are looked at (picked in C: most rows are step completions).
    for row, d in compress(zip(chunk, parsed, strict=True), map(rare.__contains__, map(_type_of, chunk))):
        want = needed.get(row[1])
        if want is not None and not (type(d) is dict and d.keys() >= want):
            missing = sorted(want - d.keys()) if type(d) is dict else None
            what = f"missing {', '.join(missing)}" if missing else f"not an object: {str(d)[:40]}"
            raise damaged(run_id, row[0], row[1], KeyError(what))


class WholeLogNeeded(Exception):
    """A streamed log met a ``run.restored``, which re-indexes earlier rows: pass the list."""


_CHUNK = 4096
"""Rows parsed per call of the JSON parser; also bounds the raw rows held at once."""


def chunks(
    rows: Iterable[tuple[int, str, str]], run_id: str = ""
) -> Iterator[tuple[list[tuple[int, str, str]], list[Any]]]:
    """The rows a chunk at a time, each with its parsed payloads.

    When ``rows`` is an iterator (as ``SqliteLog.iter_rows`` gives), only one
    chunk of raw rows is alive at a time, so a long run's index is the only
    thing that grows with its length.
    """
    it = iter(rows)
    while chunk := list(islice(it, _CHUNK)):
        yield chunk, _parse_all(chunk, run_id)


def damaged(run_id: str, seq: int | str, type_: str, exc: BaseException) -> LogCorruptedError:
    what = f"{type(exc).__name__}: {exc}"
    return LogCorruptedError(
        f"run {run_id!r}: event {seq} ({type_}) in its log is damaged and cannot be read ({what[:200]}). "
        "Nothing was changed; the events before it are intact. Run `little verify "
        f"{run_id}` to list every damaged event, then restore the file from a backup or "
        "start the work again with a new run_id.",
        run_id=run_id,
    )


def parse_row(row: tuple[int, str, str], run_id: str) -> Any:
    """One row's JSON payload (``LogCorruptedError`` naming the row when it is damaged)."""
    try:
        return json.loads(row[2])
    except (ValueError, TypeError, RecursionError) as exc:
        raise damaged(run_id, row[0], row[1], exc) from exc


def _parse_all(rows: list[tuple[int, str, str]], run_id: str = "") -> list[Any]:
    """Every row's JSON payload, parsed in one call.

    One parse of the joined payloads costs a fraction of one call
    per row, and the decoder shares the key strings of all rows. A payload
    that is not one JSON value shows up as a count mismatch; then each row is
    parsed alone, so the error names the row that is wrong.
    """
    if not rows:
        return []
    try:
        parsed = loads("[" + ",".join(map(_payload_of, rows)) + "]")
        if isinstance(parsed, list) and len(parsed) == len(rows):
            return parsed
    except (ValueError, TypeError, RecursionError):
        pass
    return [parse_row(r, run_id) for r in rows]
