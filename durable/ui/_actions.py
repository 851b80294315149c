"""What the inspector's buttons do: cancel, resume, answer, resolve an unknown commit, fork.

Each action goes through the same public machinery as the CLI
(``cancel_run``, ``resume_run``, the runtime's decisions, ``fork``). An
answer or a resolution is recorded in the run's log with who decided
(``inspector (user@host)``) and when; the run then goes on: back on its
queue, in this process when ``little ui`` was given the workflow
(``--workflow``), otherwise in any ``little worker`` that serves it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..engine import Spec, WorldCore, budget_from_text, recover_log
from ..errors import ConfigurationError
from ..events import RUN_STARTED
from ..ops import fork
from ..runtime import (
    HOST,
    answer_run,
    cancel_run,
    control_of,
    decided_by,
    default_driver,
    resolve_commit,
    resume_run,
    run_status,
)

BY = f"inspector ({decided_by()})"
"""Who the inspector's decisions are recorded as made by."""


class ActionError(Exception):
    """An action that cannot be done now; its message says why and what to do."""


async def cancel(world: WorldCore, run_id: str) -> str:
    """Ask the run to stop; return a sentence saying what happened."""
    status = cancel_run(world, run_id)
    return f"cancel requested: run {run_id} is {status}"


async def resume(
    world: WorldCore, run_id: str, specs: dict[str, Spec], drift: str = "", budget: str = ""
) -> str:
    """Let a cancelled, failed or blocked run continue (driven here when its workflow is known).

    ``drift``: the drift keys to accept, separated by spaces (a run a worker left because of drift).
    ``budget``: the run's new budget as JSON (``{"max_cost": 2.0}``), over its recorded one.
    """
    raised = budget_from_text(budget, recover_log(world.log, run_id).budget) if budget.strip() else None
    handle = await resume_run(
        run_id, world=world, workflows=list(specs.values()), accept_drift=drift.split(), budget=raised
    )
    return f"resume requested: run {run_id} is {await handle.status()}"


def _parse_answer(text: str, what: str = "the answer") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"{what} is not valid JSON ({exc}); write a string in double quotes") from None


async def answer(world: WorldCore, run_id: str, path: str, text: str, specs: dict[str, Spec]) -> str:
    """Record the answer to the interrupt the run waits at ``path`` and let the run go on."""
    value = _parse_answer(text)
    st = run_status(world, run_id)
    if st.status != "interrupted":
        raise ActionError(f"run {run_id} is not waiting at {path!r} (any more); reload the page")
    spec = answer_run(world, run_id, value, workflows=list(specs.values()), by=BY)
    return _goes_on("answer recorded", world, run_id, spec)


async def resolve(
    world: WorldCore, run_id: str, key: str, happened: str, text: str, specs: dict[str, Spec]
) -> str:
    """Record whether the unknown commit at ``key`` happened (``happened``: ``"1"`` or ``"0"``)."""
    did = happened == "1"
    result = _parse_answer(text, "the result") if did else None
    spec = resolve_commit(
        world, run_id, key, happened=did, result=result, workflows=list(specs.values()), by=BY
    )
    return _goes_on(f"recorded that {key} {'happened' if did else 'did not happen'}", world, run_id, spec)


def _goes_on(done: str, world: WorldCore, run_id: str, spec: Spec | None) -> str:
    st = run_status(world, run_id)
    if st.status == "enqueued":
        return f"{done}: run {run_id} is back on queue {st.queue!r}"
    if spec is None:
        return (
            f"{done}: run {run_id} goes on when a worker that knows its workflow picks it up "
            "(`little worker MODULE:ATTR`)"
        )
    return f"{done}: run {run_id} goes on here"


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
        if type_ == RUN_STARTED:
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


ACTIONS = ("cancel", "resume", "answer", "resolve", "fork")
