"""What the inspector's buttons do: cancel, resume, answer an interrupt, fork from a checkpoint.

Each action goes through the same public machinery as the CLI
(``cancel_run``, ``resume_run``, ``fork``). Answering an interrupt takes the
run's lock and a fresh fencing token, as a driver does, records the answer
(``interrupt.resumed``) and marks the run ``running``; the run then goes on
in a driver that knows its workflow: this process when ``little ui`` was
given the workflow (``--workflow``), otherwise any ``little worker`` that
serves it (the run shows as orphaned until one does).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .. import _encode as ev
from .._recorded import Recorded
from .._recovery import locked
from .._serde import ANY, to_json
from .._spec import Spec
from .._timetravel import fork
from .._world import WorldCore
from ..errors import ConfigurationError
from ..runtime import cancel_run, resume_run
from ..runtime._driver import HOST, control_of, default_driver
from ..store._protocol import Append


class ActionError(Exception):
    """An action that cannot be done now; its message says why and what to do."""


async def cancel(world: WorldCore, run_id: str) -> str:
    """Ask the run to stop; return a sentence saying what happened."""
    status = cancel_run(world, run_id)
    return f"cancel requested: run {run_id} is {status}"


async def resume(world: WorldCore, run_id: str, specs: dict[str, Spec]) -> str:
    """Let a cancelled or failed run continue (driven here when its workflow is known)."""
    handle = await resume_run(run_id, world=world, workflows=[s.fn for s in specs.values()])
    return f"resume requested: run {run_id} is {await handle.status()}"


def _parse_answer(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"the answer is not valid JSON ({exc}); write a string in double quotes") from None


async def answer(world: WorldCore, run_id: str, path: str, text: str, specs: dict[str, Spec]) -> str:
    """Record the answer to the interrupt the run waits at ``path`` and let the run go on."""
    value = _parse_answer(text)
    with locked(world, run_id, "answer the interrupt of") as token:
        rows = world.log.read(run_id)
        rec = Recorded.from_rows(rows, run_id)
        terminal = rec.terminal
        if terminal is None or terminal[0] != "run.interrupted" or terminal[1].get("path") != path:
            raise ActionError(f"run {run_id} is not waiting at {path!r} (any more); reload the page")
        data = to_json(ANY, value, what="the answer", run_id=run_id, path=path)
        event = ev.text(ev.interrupt_resumed(path, data))
        world.log.append([Append(run_id, [(rows[-1][0] + 1, "interrupt.resumed", event)], token, "running")])
    workflow = (rec.started or {}).get("workflow", "")
    spec = specs.get(workflow)
    if spec is None:
        return (
            f"answer recorded: run {run_id} goes on when a worker that knows workflow "
            f"{workflow!r} picks it up (`little worker MODULE:ATTR`)"
        )
    drive_here(world, run_id, spec)
    return f"answer recorded: run {run_id} goes on here"


async def fork_from(
    world: WorldCore, run_id: str, checkpoint: str, specs: dict[str, Spec]
) -> tuple[str, str]:
    """Fork a new run from a checkpoint (a seq); return the new run's id and a sentence."""
    try:
        seq = int(checkpoint)
    except ValueError:
        raise ActionError(f"a checkpoint is a seq number, not {checkpoint!r}") from None
    made = fork(run_id, seq, world=world)
    workflow = ""
    for _, type_, data in world.log.read(made.run_id)[:1]:
        if type_ == "run.started":
            workflow = json.loads(data).get("workflow", "")
    spec = specs.get(workflow)
    if spec is None:
        return made.run_id, (
            f"forked {made.run_id} from seq {seq}: it runs when a worker that knows {workflow!r} "
            "picks it up, or with run_workflow(wf, input, run_id=...)"
        )
    drive_here(world, made.run_id, spec)
    return made.run_id, f"forked {made.run_id} from seq {seq}: it runs here"


def drive_here(world: WorldCore, run_id: str, spec: Spec) -> None:
    """Drive a run without a live driver in this process's event loop, as a recovery would."""
    driver = default_driver(world)
    lock = driver.lock(run_id)
    if lock is None:
        return  # another driver took it already
    try:
        rec = control_of(world).adopt(
            run_id, spec.name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock()
        )
    except BaseException:
        world.locks.release(lock)
        raise
    driver.spawn(spec, rec, lock)


def check_action(name: str) -> None:
    """Refuse an action name the inspector does not have."""
    if name not in ACTIONS:
        raise ConfigurationError(f"no action {name!r}; the inspector has {', '.join(ACTIONS)}")


ACTIONS = ("cancel", "resume", "answer", "fork")
