"""``little runs``, ``events``, ``replay`` and ``verify``: reading a data directory."""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import shlex
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..engine import Budget, Recorded, Usage, WorldCore, budget_text, runs_usage, without_visit
from ..errors import RunNotFoundError
from ..events import RUN_FAILED, Event, parse_event
from ..ops import import_workflow, parse_models, report_text, verify_run
from ..runtime import iter_runs, list_runs, short_hash
from ..store import row_times
from ._bulk import check_runs, exit_status, many, runs_args, verify_many, verify_text
from ._registry import CliError, colour, command, plain_table, read_rows, run_id_arg, table
from ._safe import safe


def _runs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--status",
        choices=["enqueued", "running", "interrupted", "completed", "failed", "cancelled"],
        help="only runs with this status",
    )
    p.add_argument("--workflow", help="only runs of this workflow")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="at most this many runs (default: every run, printed as it is read); says how many it left out",
    )
    p.add_argument("--offset", type=int, default=0, help="skip this many runs first")
    p.add_argument(
        "--usage",
        action="store_true",
        help="add what each run spent on model calls (calls, tokens, cost) and its budget (reads each log)",
    )
    watch_args(p)


def watch_args(p: argparse.ArgumentParser) -> None:
    """``--watch``, ``--interval`` and ``--timeout``: print again whenever the output changes."""
    p.add_argument(
        "--watch",
        action="store_true",
        help="print again whenever the output changes, until Ctrl-C or --timeout (--json: one object a line)",
    )
    p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between looks with --watch (default 1)"
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="stop watching after this many seconds (default 300)"
    )


def iso(t: Any) -> str:
    """A Unix time as ISO 8601 in UTC, or ``""`` for none."""
    if not isinstance(t, int | float) or isinstance(t, bool) or not t:
        return ""
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).isoformat(timespec="seconds")


def iso_ms(t: Any) -> str:
    """A Unix time as ISO 8601 in UTC with milliseconds, or ``""`` for none."""
    if not isinstance(t, int | float) or isinstance(t, bool) or not t:
        return ""
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).isoformat(timespec="milliseconds")


_COLUMNS = ["run_id", "workflow", "code", "status", "driver", "created"]


def _runs_human(rows: list[dict[str, Any]]) -> str:
    note = rows[-1].get("left_out_note") if rows else None
    if note is not None:
        rows = rows[:-1]
    columns = list(_COLUMNS)
    if any("model_calls" in r for r in rows):
        columns += ["model_calls", "tokens", "cost", "budget"]
    text = table(_cells(rows), columns)
    return text if note is None else f"{text}\n{note}"


def _cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r | {"created": iso(r.get("created_at")), "code": r.get("code") or ""} for r in rows]


def _stream(rows: Iterator[dict[str, Any]], as_json: bool, chunk: int = 500) -> None:
    """Print every run as the listing reads it, a page at a time (``little runs`` without ``--limit``).

    The JSON is the list ``--limit`` prints, written an item at a time; the
    table takes its column widths from its first page.
    """
    first = True
    widths: list[int] | None = None
    while page := list(itertools.islice(rows, chunk)):
        if as_json:
            items = ",\n".join(textwrap.indent(json.dumps(r, indent=2, default=str), "  ") for r in page)
            print(("[\n" if first else ",\n") + items, end="", flush=True)
        elif colour():
            print(table(_cells(safe(page)), _COLUMNS), flush=True)
        else:
            text, widths = plain_table(_cells(safe(page)), _COLUMNS, widths)
            print(text, flush=True)
        first = False
    if as_json:
        print("[]" if first else "\n]", flush=True)
    elif first:
        print("(none)", flush=True)


def usage_columns(used: Usage, budget: Budget | None) -> dict[str, Any]:
    """A run's usage and budget as ``little runs --usage`` shows them."""
    return {
        "model_calls": used.calls,
        "tokens": used.input_tokens + used.output_tokens,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cost": round(used.cost, 6),
        "budget": "" if budget is None else budget_text(budget),
    }


def _left_out_note(left_out: int, shown: int, offset: int, limit: int | None) -> str:
    what = "run" if left_out == 1 else "runs"
    flags = " ".join(
        f for f in (f"--limit {limit}" if limit else "", f"--offset {offset}" if offset else "") if f
    )
    return f"{left_out} more {what} left out ({flags}); pass --limit {shown + left_out} to list them all"


@command(
    "runs",
    "list every run, newest first (--limit N: the newest N, and how many it left out)",
    _runs_args,
    human=_runs_human,
)
def _runs(world: WorldCore, a: argparse.Namespace) -> Any:
    if (a.limit is not None and a.limit < 1) or a.offset < 0:
        raise CliError("--limit must be at least 1 and --offset at least 0")
    if a.limit is None and not a.usage and not getattr(a, "watch", False):
        every = iter_runs(world, status=a.status, workflow=a.workflow)
        _stream(itertools.islice(every, a.offset, None), a.json)
        return None
    rows, left_out = list_runs(world, status=a.status, workflow=a.workflow, limit=a.limit, offset=a.offset)
    if a.usage:
        spent = runs_usage(world, [r["run_id"] for r in rows if r.get("status") != "enqueued"])
        rows = [r | usage_columns(*spent[r["run_id"]]) if r["run_id"] in spent else r for r in rows]
    if not left_out:
        return rows
    note = _left_out_note(left_out, len(rows), a.offset, a.limit)
    if a.json:  # the JSON stays the list of runs; the note goes beside it
        if not getattr(a, "watch", False):
            print(f"little: {note}", file=sys.stderr)
        return rows
    return [*rows, {"left_out_note": note}]


def follow_events(
    world: WorldCore,
    run_id: str,
    *,
    interval: float = 0.5,
    timeout: float = 300.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Event]:
    """Yield a run's events as they are written, until it stops running or ``timeout`` passes.

    The status is read before the rows, and a status change is written in the
    same transaction as its rows, so the last events are never missed.

    Raises:
        RunNotFoundError: The world has no run with that id.
    """
    if not world.log.read(run_id):
        raise RunNotFoundError(f"no run {run_id!r} in this data directory; list runs with `little runs`.")
    deadline = clock() + timeout
    last = 0
    while True:
        info = world.log.info(run_id)
        rows = world.log.read(run_id, after_seq=last)
        times = row_times(world.log, run_id, last) if rows else {}
        for seq, type_, data in rows:
            last = seq
            yield parse_event(run_id, seq, type_, data, times.get(seq))
        if info is None or info.status != "running" or clock() >= deadline:
            return
        sleep(interval)


def _events_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    p.add_argument("--type", action="append", dest="types", help="only events of this type (repeatable)")
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep printing new events until the run stops running (--json prints one object a line)",
    )
    p.add_argument(
        "--interval", type=float, default=0.5, help="seconds between polls with --follow (default 0.5)"
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="stop following after this many seconds (default 300)"
    )


@command(
    "events",
    "print a run's events in order, each with the time it was committed (ISO 8601, UTC)",
    _events_args,
    human=lambda events: "\n".join(_event_line(e) for e in events) or "(none)",
)
def _events(world: WorldCore, a: argparse.Namespace) -> Any:
    if a.follow:
        if a.interval <= 0 or a.timeout < 0:
            raise CliError("--interval must be above 0 and --timeout at least 0")
        try:
            for e in follow_events(world, a.run_id, interval=a.interval, timeout=a.timeout):
                if not a.types or e.type in a.types:
                    data = _event_data(e)
                    print(json.dumps(data, default=str) if a.json else _event_line(safe(data)), flush=True)
        except KeyboardInterrupt:  # Ctrl-C is how people stop following
            pass
        return None
    events = world.events(a.run_id)
    return [_event_data(e) for e in events if not a.types or e.type in a.types]


def _event_data(e: Event) -> dict[str, Any]:
    """An event as ``--json`` prints it: its fields, and ``at`` once more in ISO 8601."""
    data = e.model_dump(mode="json")
    data["at_iso"] = iso_ms(e.at)
    return data


_TIMES = ("wake_at", "deadline_at", "first_attempt_at")
"""Fields of events that hold a Unix time, shown in ISO 8601 by the human output."""


def _event_line(e: dict[str, Any]) -> str:
    where = e.get("path") or e.get("key") or ""
    times = " ".join(f"{f}={iso(e[f])}" for f in _TIMES if e.get(f))
    at = e.get("at_iso") or "-"
    return f"{e['seq']:>6}  {at:<29}  {e['type']:<28} {where} {times}".rstrip()


def _replay_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    watch_args(p)


@command("replay", "rebuild a run's state from its log without calling anything", _replay_args)
def _replay(world: WorldCore, a: argparse.Namespace) -> Any:
    rec = Recorded.from_rows(read_rows(world, a.run_id), a.run_id)
    visits: dict[str, int] = {}
    for path, d in rec.steps_completed.items():
        base = without_visit(path)
        visits[base] = max(visits.get(base, 0), d.get("visit", 0) + 1)
    waiting = [p for p in rec.interrupts if p not in rec.answers]
    started = rec.started or {}
    error = None
    retry = None
    if rec.terminal is not None and rec.terminal[0] == RUN_FAILED:
        d = rec.terminal[1]
        error = {"type": d.get("error_type"), "message": d.get("error_message"), "path": d.get("path")}
        retry = f"little resume {shlex.quote(a.run_id)} --workflow MODULE:FUNCTION"
    return {
        "run_id": a.run_id,
        "workflow": started.get("workflow"),
        "status": rec.status(),
        "state_version": rec.state_version,
        "committed_steps": sorted(rec.steps_completed),
        "visits": visits,
        "failed_steps": sorted(rec.steps_failed),
        "confirmed_effects": sorted(k for k in rec.intents if k in rec.receipts),
        "unconfirmed_effects": rec.unconfirmed(),
        "pending_steps": sorted(
            p for p in rec.steps_started if p not in rec.steps_completed and p not in rec.steps_failed
        ),
        "waiting_for_answer": waiting,
        "timers": [
            {"path": p, "wake_at": t.get("wake_at"), "wake_at_iso": iso(t.get("wake_at"))}
            for p, t in rec.timers.items()
        ],
        "error": error,
        "retry_command": retry,
        "accepted_drift": [
            {"key": c["key"], "old": c["old"], "new": c["new"], "session": d.get("session")}
            for d in rec.accepted
            for c in d["changes"]
        ],
        "code": short_hash(started.get("manifest_hash")),
        "patches": [{"key": k, "change_id": d["change_id"]} for k, d in sorted(rec.patches.items())],
    }


def _verify_args(p: argparse.ArgumentParser) -> None:
    runs_args(p, "check", "check every run in the data directory (with --workflow: every run of it)")
    p.add_argument(
        "--workflow",
        metavar="MODULE:FUNCTION",
        help="also check drift against this @workflow in the current code",
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="SLOT=ID",
        help="a model slot mapping to compare (repeatable; default: the recorded mapping)",
    )


def _verify_human(report: dict[str, Any]) -> str:
    return verify_text(report) if "runs_checked" in report else report_text(report)


@command(
    "verify",
    "check runs' log integrity, artifact hashes and (with --workflow) drift; exit 1 on any finding",
    _verify_args,
    human=_verify_human,
    check=check_runs,
)
def _verify(world: WorldCore, a: argparse.Namespace) -> Any:
    spec = import_workflow(a.workflow) if a.workflow else None
    models = parse_models(a.model) if a.model else None
    if many(a):
        report = verify_many(world, None if a.every else a.run_ids, spec, models)
        a.exit_status = exit_status(report)
        return report
    report = verify_run(world, a.run_ids[0], spec, models)
    if not report["ok"]:
        a.exit_status = 1
    return report
