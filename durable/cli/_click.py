"""The ``little`` command line on Click, built from the command registry.

Command modules declare their arguments as they always have, with
``p.add_argument(...)`` in argparse's vocabulary (``store_true``,
``append``, ``type=``, ``choices=``, ``metavar=``, ``dest=``,
``nargs="?"`` and ``nargs="*"``); ``Args``
records each declaration as a Click parameter, so registering a new command
stays one decorator and one small function, and each handler still receives
an ``argparse.Namespace``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from ._registry import CHECKS, COMMANDS, CliError

ORDER = [
    "runs",
    "events",
    "replay",
    "diff",
    "lint",
    "checkpoints",
    "restore",
    "fork",
    "compact",
    "gc",
    "verify",
    "worker",
    "cancel",
    "resume",
    "resolve",
    "answer",
    "doctor",
    "dry-resume",
    "export",
    "outbox",
    "schedules",
    "rekey",
    "ui",
]
"""The order commands are listed in (reading first, then time travel, maintenance and the runtime)."""


class Args:
    """An ``add_argument`` recorder that makes Click parameters (positional arguments keep their help)."""

    def __init__(self) -> None:
        self.params: list[click.Parameter] = []
        self.positional_help: list[tuple[str, str]] = []

    def add_argument(
        self,
        *flags: str,
        action: str | None = None,
        type: Callable[[str], Any] | None = None,
        default: Any = None,
        help: str | None = None,
        choices: Sequence[str] | None = None,
        metavar: str | None = None,
        dest: str | None = None,
        required: bool = False,
        nargs: str | None = None,
    ) -> None:
        """Declare one argument as ``argparse.ArgumentParser.add_argument`` would."""
        kind: Any = click.Choice(list(choices)) if choices else _click_type(type)
        if not flags[0].startswith("-"):
            name = flags[0]
            if nargs not in (None, "?", "*"):
                raise TypeError(f"little's positional arguments take nargs='?', '*' or none, not {nargs!r}")
            shown = metavar or name.upper()
            if nargs == "*":
                shown = f"[{shown}]..."
            optional: dict[str, Any] = {}
            if nargs == "?":
                optional = {"required": False, "default": default}
            elif nargs == "*":  # any number, none included (argparse's "*")
                optional = {"required": False, "nargs": -1}
            self.params.append(click.Argument([name], type=kind, metavar=shown, **optional))
            self.positional_help.append((shown, help or ""))
            return
        name = dest or flags[-1].lstrip("-").replace("-", "_")
        decls = [*flags, name]
        if action == "store_true":
            self.params.append(click.Option(decls, is_flag=True, default=False, help=help))
        elif action == "append":
            self.params.append(click.Option(decls, multiple=True, type=kind, metavar=metavar, help=help))
        elif action is None:
            extra = {} if default is None else {"default": default}  # Click tells "no default" from None
            self.params.append(
                click.Option(decls, type=kind, metavar=metavar, help=help, required=required, **extra)
            )
        else:
            raise TypeError(f"little commands support store_true and append actions, not {action!r}")


def _click_type(fn: Callable[[str], Any] | None) -> Any:
    if fn is None or fn is str:
        return click.STRING
    if fn is int:
        return click.INT
    if fn is float:
        return click.FLOAT
    return click.STRING  # anything else converts in the handler, as before


def _epilog(positional: list[tuple[str, str]]) -> str | None:
    if not positional:
        return None
    return "Arguments:\n\n\b\n" + "\n".join(f"  {name:<18} {text}" for name, text in positional)


def build_group(on_command: Callable[[str, argparse.Namespace], None]) -> click.Group:
    """The ``little`` group with every registered command; a parsed command is handed to ``on_command``."""
    from .. import __version__

    order = {name: i for i, name in enumerate(ORDER)}

    class _Ordered(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(self.commands, key=lambda n: (order.get(n, len(order)), n))

    group = _Ordered(
        name="little",
        help="Inspect and maintain durable runs.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    group.params.append(
        click.Option(
            ["--version"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            help="Show the version and exit.",
            callback=lambda ctx, _p, v: _version(ctx, v, __version__),
        )
    )
    for name, (help_, add_args, _) in COMMANDS.items():
        args = Args()
        args.add_argument(
            "--data-dir", default=".little-workflow", help="the data directory (default .little-workflow)"
        )
        args.add_argument(
            "--dsn",
            default=os.environ.get("DURABLE_DSN") or None,
            help="a PostgreSQL DSN: use the Postgres world there instead of a data directory "
            "(default $DURABLE_DSN)",
        )
        args.add_argument("--schema", default="durable", help="the Postgres world's schema (default durable)")
        args.add_argument("--json", action="store_true", help="print machine-readable JSON")
        add_args(args)  # type: ignore[arg-type]

        def callback(_name: str = name, **kwargs: Any) -> None:
            values = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
            a = argparse.Namespace(command=_name, **values)
            if _name in CHECKS:
                try:
                    CHECKS[_name](a)
                except CliError as exc:
                    raise click.UsageError(str(exc), ctx=click.get_current_context()) from None
            on_command(_name, a)

        group.add_command(
            click.Command(
                name,
                params=args.params,
                callback=callback,
                help=help_,
                short_help=help_,
                epilog=_epilog(args.positional_help),
                context_settings={"help_option_names": ["-h", "--help"]},
            )
        )
    return group


def _version(ctx: click.Context, value: bool, version: str) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"little {version}")
        ctx.exit(0)


def help_text(group: click.Group, name: str | None, width: int) -> str:
    """The help of the group (``name=None``) or of one command, at a fixed width."""
    root = click.Context(group, info_name="little", terminal_width=width, max_content_width=width)
    if name is None:
        return group.get_help(root).rstrip()
    cmd = group.commands[name]
    ctx = click.Context(cmd, info_name=name, parent=root, terminal_width=width, max_content_width=width)
    return cmd.get_help(ctx).rstrip()
