"""``little resolve``, ``answer`` and ``doctor``: decisions about stuck runs, and where they are."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ..engine import WorldCore
from ..runtime import default_driver, doctor, finding_line, handle
from ._registry import CliError, command, run_id_arg
from ._runtime import workflow_of


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{what} must be JSON (quote a string as '\"text\"'), not {text!r}: {exc}") from None


async def _drive_here(world: WorldCore, run_id: str) -> str:
    """Wait for the run when this process drives it now (no queue, workflow known); its status."""
    task = default_driver(world).tasks.get(run_id)
    if task is not None:
        await asyncio.wait([task])
    return await handle(run_id, world=world).status()


def _after(world: WorldCore, run_id: str, status: str) -> dict[str, Any]:
    out: dict[str, Any] = {"run_id": run_id, "status": status}
    if status == "running":
        out["note"] = (
            "a worker that knows its workflow drives it (pass --workflow MODULE:FUNCTION to drive it here)"
        )
    elif status == "enqueued":
        out["note"] = "back on its queue: a worker serving the queue drives it"
    return out


def _resolve_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    p.add_argument(
        "key",
        help="the key of the unconfirmed tool call or compensation, as `little doctor` or the error names it",
    )
    p.add_argument("--happened", action="store_true", help="the call took place: --result is its receipt")
    p.add_argument("--not-happened", action="store_true", help="the call did not take place: call it again")
    p.add_argument(
        "--result",
        metavar="JSON",
        help="with --happened: what the tool returned, as JSON (needed unless the tool returns None)",
    )
    p.add_argument(
        "--workflow",
        metavar="MODULE:FUNCTION",
        help="the run's workflow: needed with --result (the tool's return type) and to drive "
        "a run without a queue here",
    )


def _check_resolve(a: argparse.Namespace) -> None:
    if a.happened == a.not_happened:
        raise CliError("say what happened: --happened [--result JSON] or --not-happened")
    if a.not_happened and a.result is not None:
        raise CliError("--result goes with --happened: a call that did not happen has no result")


@command(
    "resolve",
    "decide an unknown commit or a compensation of a blocked run: --happened [--result JSON] "
    "or --not-happened",
    _resolve_args,
    check=_check_resolve,
)
def _resolve(world: WorldCore, a: argparse.Namespace) -> Any:
    result = _json_arg(a.result, "--result") if a.result is not None else None

    async def go() -> str:
        h = handle(a.run_id, world=world)
        await h.resolve(a.key, happened=a.happened, result=result, workflows=workflow_of(a), by=None)
        return await _drive_here(world, a.run_id)

    out = _after(world, a.run_id, asyncio.run(go()))
    if a.happened and a.result is None:  # refused above unless the tool's return type takes None
        out["result"] = "None (no --result was given, and the tool's return type takes None)"
    return out


def _answer_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    p.add_argument("value", metavar="JSON", help="the answer, as JSON (durable.interrupt returns it)")
    p.add_argument(
        "--workflow", metavar="MODULE:FUNCTION", help="drive a run without a queue here until it stops"
    )


@command("answer", "answer the interrupt a run waits at, without its input", _answer_args)
def _answer(world: WorldCore, a: argparse.Namespace) -> Any:
    value = _json_arg(a.value, "the answer")

    async def go() -> str:
        await handle(a.run_id, world=world).answer(value, workflows=workflow_of(a))
        return await _drive_here(world, a.run_id)

    return _after(world, a.run_id, asyncio.run(go()))


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stale",
        type=float,
        default=60.0,
        help="seconds an enqueued run may wait unclaimed before it is listed (default 60)",
    )


def _doctor_text(data: Any) -> str:
    if not data:
        return "nothing is stuck: every run can make progress by itself"
    return "\n".join(finding_line(f) for f in data)


@command(
    "doctor",
    "list every run or entry that cannot make progress by itself, with the command that fixes it",
    _doctor_args,
    human=_doctor_text,
)
def _doctor(world: WorldCore, a: argparse.Namespace) -> Any:
    found = doctor(world, stale=a.stale)
    a.exit_status = 1 if found else 0
    return [f.as_dict() for f in found]
