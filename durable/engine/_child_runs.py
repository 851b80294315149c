"""Child workflows started from inside a ``@tool`` or ``@model_call`` body.

A ``@workflow`` called in a workflow or step body is an effect of its own
(``_dispatch._child_workflow``). Called inside a tool body, for example an
orchestrator's ``start_workflow`` tool, the tool's own intent and receipt
already bracket it, so the child run is started (or resumed) directly. Its
run id is derived from the tool's idempotency key, the workflow's name and
its input hash, so a tool re-driven after a crash reaches the same child run,
which then replays its own log: each level recovers on its own.

``drive_child`` drives a child run for either, and notes the task that drives
it on the parent's ``RunContext``: a parent's drive that ends while a task its
body left behind still drives a child (``asyncio.gather`` of child runs after
one of them failed) stops that task before its own end is recorded
(``RunContext.halt_children``), so no child run outlives the drive of its
parent, and no receipt reaches a log whose run another driver took over.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._context import CURRENT, EFFECT_KEY, RunContext
from ._keys import effect_of_idempotency_key, tool_child_run_id
from ._run_input import DriveOptions
from ._spec import Spec


async def drive_child(run: RunContext, spec: Spec, value: Any, run_id: str, parent_key: str) -> Any:
    """Drive ``run``'s child run ``run_id`` (started by the call at ``parent_key``) to its end."""
    from ._runner import drive  # the runner imports the engine; bind at call time

    task = asyncio.current_task()
    children = run.children
    if children is None:
        children = run.children = set()
    if task is not None:
        children.add(task)
    try:
        return await drive(
            spec,
            value,
            run.world,
            run_id=run_id,
            models=run.models,
            parent=(run.run_id, parent_key),
            account=run.account,  # a child run counts against its parent's budget
            options=DriveOptions(guard=None if run.guard is None else run.guard.child(run)),
        )
    finally:
        if task is not None:
            children.discard(task)


async def child_of_effect(spec: Spec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Start or resume the child run of a workflow called inside an effect body."""
    scope = CURRENT.get()
    effect_key = EFFECT_KEY.get()
    assert scope is not None  # the caller checked both
    assert effect_key is not None
    run = scope.run
    parent_key = effect_of_idempotency_key(run.run_id, effect_key)
    _, _, ih = spec.dump_input(args, kwargs, run_id=run.run_id, path=parent_key)
    value = args[0] if args else (next(iter(kwargs.values())) if kwargs else None)
    token = EFFECT_KEY.set(None)  # the child's own body is not inside the tool
    try:
        return await drive_child(run, spec, value, tool_child_run_id(effect_key, spec.name, ih), parent_key)
    finally:
        EFFECT_KEY.reset(token)
