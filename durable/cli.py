"""``little``: read and maintain a data directory from the shell.

Every command takes ``--data-dir`` (default ``.little-workflow``) and
``--json``. A bad argument or an unknown run id prints one line to stderr and
exits with status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ._replay import Recorded
from ._verify import import_workflow, parse_models, report_text, verify_run
from ._world import World, local_world
from .errors import DurableError, RunNotFoundError

Handler = Callable[[World, argparse.Namespace], Any]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}
"""Command name → (help, add-arguments, handler); each handler returns JSON-able data."""
HUMAN: dict[str, Callable[[Any], str]] = {}
"""Command name → how its data is shown without ``--json`` (when not the default)."""


class CliError(Exception):
    """A one-line error for the user (exit status 1)."""


def command(
    name: str,
    help: str,
    args: Callable[[argparse.ArgumentParser], None] | None = None,
    *,
    human: Callable[[Any], str] | None = None,
) -> Callable[[Handler], Handler]:
    """Register a ``little`` subcommand (``human`` formats its data for people).

    A handler that prints as it goes (``events --follow``) returns ``None``.
    """

    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help, args or (lambda p: None), fn)
        if human is not None:
            HUMAN[name] = human
        return fn

    return register


def _run_id_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="the run's id (see `little runs`)")


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Rows as an aligned text table with upper-case headers (``(none)`` when empty)."""
    if not rows:
        return "(none)"
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _read(world: World, run_id: str) -> list[tuple[int, str, str]]:
    rows = world.log.read(run_id)
    if not rows:
        raise RunNotFoundError(f"no run {run_id!r} in this data directory; list runs with `little runs`.")
    return rows


# -- commands -----------------------------------------------------------------


def _runs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--status",
        choices=["running", "completed", "failed", "interrupted"],
        help="only runs with this status",
    )
    p.add_argument("--workflow", help="only runs of this workflow")
    p.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")
    p.add_argument("--offset", type=int, default=0, help="skip this many runs first")


@command("runs", "list runs, newest first", _runs_args)
def _runs(world: World, a: argparse.Namespace) -> Any:
    if a.limit < 1 or a.offset < 0:
        raise CliError("--limit must be at least 1 and --offset at least 0")
    infos = world.runs(status=a.status, workflow=a.workflow, limit=a.limit, offset=a.offset)
    return [
        {
            "run_id": i.run_id,
            "workflow": i.workflow,
            "status": i.status,
            "parent_run_id": i.parent_run_id,
            "created_at": i.created_at,
            "updated_at": i.updated_at,
        }
        for i in infos
    ]


def _events_args(p: argparse.ArgumentParser) -> None:
    _run_id_arg(p)
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


@command("events", "print a run's events in order", _events_args)
def _events(world: World, a: argparse.Namespace) -> Any:
    if a.follow:
        if a.interval <= 0 or a.timeout < 0:
            raise CliError("--interval must be above 0 and --timeout at least 0")
        from ._cli_history import follow_events

        try:
            for e in follow_events(world, a.run_id, interval=a.interval, timeout=a.timeout):
                if not a.types or e.type in a.types:
                    data = e.model_dump(mode="json")
                    print(json.dumps(data, default=str) if a.json else _event_line(data), flush=True)
        except KeyboardInterrupt:  # Ctrl-C is how people stop following
            pass
        return None
    events = world.events(a.run_id)
    return [e.model_dump(mode="json") for e in events if not a.types or e.type in a.types]


def _event_line(e: dict[str, Any]) -> str:
    where = e.get("path") or e.get("key") or ""
    return f"{e['seq']:>6}  {e['type']:<28} {where}".rstrip()


@command("replay", "rebuild a run's state from its log without calling anything", _run_id_arg)
def _replay(world: World, a: argparse.Namespace) -> Any:
    rec = Recorded.from_rows(_read(world, a.run_id), a.run_id)
    visits: dict[str, int] = {}
    for path, d in rec.steps_completed.items():
        base = path.split(".visit[", 1)[0] if ".visit[" in path else path
        visits[base] = max(visits.get(base, 0), d.get("visit", 0) + 1)
    waiting = [p for p in rec.interrupts if p not in rec.answers]
    started = rec.started or {}
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
    }


def _verify_args(p: argparse.ArgumentParser) -> None:
    _run_id_arg(p)
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


@command(
    "verify",
    "check a run's log integrity, artifact hashes and (with --workflow) drift; exit 1 on any finding",
    _verify_args,
    human=report_text,
)
def _verify(world: World, a: argparse.Namespace) -> Any:
    spec = import_workflow(a.workflow) if a.workflow else None
    models = parse_models(a.model) if a.model else None
    report = verify_run(world, a.run_id, spec, models)
    if not report["ok"]:
        a.exit_status = 1
    return report


# -- output -------------------------------------------------------------------


def _human(name: str, data: Any) -> str:
    if name in HUMAN:
        return HUMAN[name](data)
    if name == "runs":
        return table(data, ["run_id", "workflow", "status"])
    if name == "events":
        return "\n".join(_event_line(e) for e in data) or "(none)"
    if isinstance(data, dict):
        out = []
        for k, v in data.items():
            if isinstance(v, list | dict):
                out.append(f"{k}:" + ("" if v else " (none)"))
                items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
                out += [f"  {x}" if key is None else f"  {key}: {x}" for key, x in items]
            else:
                out.append(f"{k}: {v}")
        return "\n".join(out)
    return json.dumps(data, indent=2)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit status 2, reported as 1)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``little`` argument parser with every registered command."""
    parser = _Parser(prog="little", description="Inspect and maintain durable runs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add_args, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument(
            "--data-dir",
            default=".little-workflow",
            help="the data directory (default .little-workflow)",
        )
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")
        add_args(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``little`` with ``argv``; return the exit status."""
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0) and 1
    if a.command is None:
        parser.print_help()
        return 1
    data_dir = Path(a.data_dir)
    if not (data_dir / "events.db").exists():
        print(
            f"little: no durable data directory at {str(data_dir)!r} (no events.db); pass --data-dir",
            file=sys.stderr,
        )
        return 1
    try:
        world = local_world(data_dir)
    except DurableError as exc:
        print(f"little: {exc}", file=sys.stderr)
        return 1
    try:
        data = COMMANDS[a.command][2](world, a)
    except (DurableError, CliError) as exc:
        print(f"little: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        world.close()
    if data is not None:
        print(json.dumps(data, indent=2, default=str) if a.json else _human(a.command, data))
    return int(getattr(a, "exit_status", 0))


from . import _cli_history  # noqa: E402, F401  (registers the history and maintenance commands)

if __name__ == "__main__":  # pragma: no cover
    # Run as ``python -m durable.cli``: use the imported module, where every command registered.
    from durable.cli import main as _main

    sys.exit(_main())
