"""``little ui``: the web inspector from the shell (extra ``ui``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine import WorldCore, spec_of
from ._registry import CliError, command
from ._runtime import _import, show_logs


def _ui_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; others need the token to read)",
    )
    p.add_argument(
        "--port", type=int, default=8787, help="port to listen on (default 8787; 0 picks a free one)"
    )
    p.add_argument(
        "--workflow",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a @workflow the inspector may drive after an answer, resume or fork (repeatable)",
    )
    p.add_argument("--token", default=None, help="the token that guards actions (default: a random one)")


@command("ui", "serve a local web inspector over the data directory until Ctrl-C", _ui_args)
def _ui(world: WorldCore, a: argparse.Namespace) -> Any:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from ..ui import serve
    except ImportError as exc:
        raise CliError(
            f"little ui needs the ui extra: pip install 'little-workflow[ui]' ({exc.name} is missing)"
        ) from None
    specs = {}
    for target in a.workflow:
        obj = _import(target)[1]
        spec = spec_of(obj)
        if spec is None or spec.kind != "workflow":
            raise CliError(f"{target!r} is not a @workflow")
        specs[spec.name] = spec
    if a.port < 0 or a.port > 65535:
        raise CliError("--port must be between 0 and 65535")
    show_logs()
    serve(
        world,
        host=a.host,
        port=a.port,
        token=a.token,
        specs=specs,
        announce=lambda url: print(f"little ui: {url}", flush=True),
    )
    return None
