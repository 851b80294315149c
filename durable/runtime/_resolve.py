"""A person's decisions about a run: resolve an unknown commit, accept drift, answer an interrupt.

Each decision is written to the run's log as ``run.resolved`` (with who
decided and when), under the run's lock and a fresh fencing token like any
driver, so it never races a live one. The run then continues: back on its
queue, in the background of the calling process when it knows the
workflow, or else for any worker that knows it to pick up.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable
from typing import Any

from ..engine import (
    ANY,
    Budget,
    Recorded,
    RunContext,
    Spec,
    WorldCore,
    open_compensations,
    reachable,
    recover_log,
    to_json,
    workflow_spec,
)
from ..engine import payloads as ev
from ..errors import ConfigurationError, RunNotFoundError
from ..events import BUDGET_SET, INTERRUPT_RESUMED, RUN_INTERRUPTED, RUN_RESOLVED
from ._driver import HOST, control_of, default_driver, keeps_control, runtime_of


class _NoInfo:
    workflow = ""


def decided_by(by: str | None = None) -> str:
    """Who a decision is recorded as made by: ``by``, else ``user@host``."""
    if by:
        return by
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        user = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{HOST}"


def find_workflow(world: WorldCore, name: str, workflows: Iterable[Any] = ()) -> Spec | None:
    """The spec of the workflow recorded as ``name``.

    One of ``workflows``, one their code calls (a child run's), or one this world object knows.
    """
    specs = [wf if isinstance(wf, Spec) else workflow_spec(wf) for wf in workflows]
    for spec in specs:
        if spec.name == name:
            return spec
    for spec in specs:
        for inner in reachable(spec):
            if inner.kind == "workflow" and inner.name == name:
                return inner
    return runtime_of(world).known.get(name)


class _Held:
    """The run's lock and a fresh fencing token, for a decision written from outside a drive."""

    def __init__(self, world: WorldCore, run_id: str):
        self.world, self.run_id = world, run_id
        self.lock: object | None = None

    def __enter__(self) -> RunContext:
        world, rid = self.world, self.run_id
        self.lock = world.locks.try_acquire(f"run:{rid}")
        if self.lock is None:
            raise ConfigurationError(
                f"run {rid!r} is being driven right now, so nothing about it can be decided from "
                f"outside; wait for it to stop (`little runs`), or cancel it."
            )
        try:
            token = world.log.fence(rid)
            rec = recover_log(world.log, rid)
            if rec.started is None:
                raise RunNotFoundError(f"run {rid!r} has no log in {world.where()}.", run_id=rid)
            return RunContext(world, rid, token, rec, {})
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        if self.lock is not None:
            self.world.locks.release(self.lock)
            self.lock = None

    def __exit__(self, et: object, e: object, tb: object) -> None:
        if et is not None:
            self.release()


def _tool_spec(workflow: Spec | None, name: str) -> Spec | None:
    if workflow is None:
        return None
    for spec in reachable(workflow):
        if spec.kind == "tool" and spec.name == name:
            return spec
    return None


def _receipt_result(
    run_id: str, key: str, name: str, rec: Recorded, workflow: Spec | None, result: Any, given: list[Spec]
) -> Any:
    """``result`` checked against the return type of the tool ``name``, as the receipt stores it.

    ``given``: the workflows the caller passed (``workflows=``, ``--workflow``).
    """
    wf = (rec.started or {}).get("workflow")
    tool = _tool_spec(workflow, name)
    if tool is None and workflow is not None:
        raise ConfigurationError(
            f"run {run_id!r}: workflow {wf!r} as this process has it ({workflow.qualname}) calls no "
            f"tool {name!r}, which made the call at key {key!r}: its return type is unknown here. "
            "Run this with the code the run started with, or decide with happened=False "
            "(`--not-happened`) if the call did not take place. Nothing was written."
        )
    if tool is None and given:
        names = ", ".join(repr(s.name) for s in given)
        raise ConfigurationError(
            f"run {run_id!r} is a run of workflow {wf!r}, but the workflow given is {names}: pass "
            f"the function of workflow {wf!r} (workflows=[...]; from the shell, --workflow "
            "MODULE:FUNCTION), whose code gives the return type of tool "
            f"{name!r}. Nothing was written."
        )
    if tool is None:
        raise ConfigurationError(
            f"run {run_id!r}: to record a result for tool {name!r} (key {key!r}) this process must "
            f"know workflow {wf!r}, whose code gives the tool's return type: pass workflows=[...] "
            "(from the shell, --workflow MODULE:FUNCTION). Nothing was written."
        )
    try:
        value = tool.rebuild(result)
    except Exception as exc:
        if result is None:
            returns = tool.out.annotation or "a value"
            raise ConfigurationError(
                f"run {run_id!r}: tool {name!r} (key {key!r}) returns {returns}, so recording that "
                "its call happened needs what it returned: pass result=... (from the shell, "
                "--result JSON, e.g. --result '\"ch_123\"' for a str). Nothing was written."
            ) from exc
        raise ConfigurationError(
            f"run {run_id!r}: {result!r} is not a valid result of tool {name!r} (key {key!r}): "
            f"{str(exc).splitlines()[0]}. Nothing was written."
        ) from exc
    return to_json(tool.out, value, what="the resolved result", run_id=run_id, path=key)


def resolve_commit(
    world: WorldCore,
    run_id: str,
    key: str,
    *,
    happened: bool,
    result: Any = None,
    workflows: Iterable[Any] = (),
    by: str | None = None,
) -> Spec | None:
    """Record whether the unknown commit at ``key`` happened, then let the run continue.

    Returns:
        The workflow's spec when this process knows it.

    Raises:
        ConfigurationError: ``key`` is not an unconfirmed call of the run, the run is
            driven right now, or ``result`` does not fit the tool's return type.
        RunNotFoundError: The run has no log.
    """
    if not isinstance(happened, bool):
        raise ConfigurationError(f"resolve() takes happened=True or happened=False, not {happened!r}.")
    held = _Held(world, run_id)
    with held as run:
        rec = run.recorded
        # An unknown commit, or a compensation not confirmed (cut, failed for good, not begun).
        open_ = {k: rec.intents[k]["name"] for k in rec.unconfirmed()} | open_compensations(rec)
        if key not in open_:
            listed = ", ".join(repr(k) for k in open_) or "none"
            raise ConfigurationError(
                f"run {run_id!r} has no unconfirmed call at key {key!r} (unconfirmed: {listed}); "
                "`little doctor` names the key of a blocked run. Nothing was written."
            )
        given = [w if isinstance(w, Spec) else workflow_spec(w) for w in workflows]
        spec = find_workflow(world, (rec.started or {}).get("workflow", ""), given)
        data = _receipt_result(run_id, key, open_[key], rec, spec, result, given) if happened else None
        decision = "happened" if happened else "not_happened"
        run.record(
            RUN_RESOLVED, ev.run_resolved(decision, decided_by(by), world.clock(), key=key, result=data)
        )
        run.flush()
    go_on(world, run_id, spec, held, workflows)
    return spec


def answer_run(
    world: WorldCore, run_id: str, value: Any, *, workflows: Iterable[Any] = (), by: str | None = None
) -> Spec | None:
    """Answer the interrupt an ``interrupted`` run waits at, without its input; the run continues.

    Raises:
        ConfigurationError: The run waits for no answer, is driven right now, or is being
            cancelled (an answer does not take a cancellation back).
        SerializationError: ``value`` cannot be stored as JSON.
    """
    held = _Held(world, run_id)
    with held as run:
        terminal = run.recorded.terminal
        if terminal is None or terminal[0] != RUN_INTERRUPTED:
            status = run.recorded.status()
            raise ConfigurationError(
                f"run {run_id!r} waits for no answer (it is {status}); answer a run whose status "
                "is interrupted. Nothing was written."
            )
        refuse_answer_while_cancelling(world, run_id)
        path = terminal[1]["path"]
        answer = to_json(ANY, value, what="the answer", run_id=run_id, path=path)
        run.record(INTERRUPT_RESUMED, ev.interrupt_resumed(path, answer))
        run.record(RUN_RESOLVED, ev.run_resolved("answer", decided_by(by), world.clock(), key=path))
        run.flush(status="running")
        spec = find_workflow(world, (run.recorded.started or {}).get("workflow", ""), workflows)
    go_on(world, run_id, spec, held)
    return spec


def refuse_answer_while_cancelling(world: WorldCore, run_id: str) -> None:
    """Refuse an answer to a run asked to cancel: an answer does not take a cancellation back.

    Raises:
        ConfigurationError: A cancellation of the run is pending (its undos may have begun).
    """
    if not keeps_control(world):
        return
    rec = control_of(world).get(run_id)
    if rec is not None and rec.cancel_reason is not None:
        raise ConfigurationError(
            f"run {run_id!r} is being cancelled ({rec.cancel_reason}), so it takes no answer: "
            f"finish the cancellation with `little cancel {run_id} --workflow MODULE:FUNCTION` "
            "(its compensations run there). Nothing was written."
        )


def record_resume(world: WorldCore, run_id: str, accept_drift: list[str], by: str | None = None) -> None:
    """Record a ``resume`` of a blocked or failed run (and the drift keys it accepts) in its log."""
    held = _Held(world, run_id)
    with held as run:
        decision = "accept_drift" if accept_drift else "resume"
        run.record(
            RUN_RESOLVED,
            ev.run_resolved(decision, decided_by(by), world.clock(), drift_keys=accept_drift),
        )
        run.flush()
    held.release()


def record_budget(world: WorldCore, run_id: str, budget: Budget, by: str | None = None) -> None:
    """Record the run's new budget (``budget.set``) in its log, with who set it."""
    held = _Held(world, run_id)
    with held as run:
        run.record(BUDGET_SET, ev.budget_set(budget.to_json(), decided_by(by)))
        run.flush()
    held.release()


def go_on(
    world: WorldCore, run_id: str, spec: Spec | None, held: _Held, workflows: Iterable[Any] = ()
) -> None:
    """After a decision: back on its queue, driven here (``spec`` known), or left for a worker.

    A child run is driven by its parent's drive, so a decision in a child run's log
    lets the run at the top of its tree go on instead (``workflows``: its code).
    """
    root = run_id
    while (info := world.log.info(root)) is not None and info.parent_run_id is not None:
        root = info.parent_run_id
    if root != run_id:
        held.release()
        held = _Held(world, root)
        try:
            with held as top:
                spec = find_workflow(world, (top.recorded.started or {}).get("workflow", ""), workflows)
        except ConfigurationError:
            return  # driven right now: its drive meets the decision when it reaches the child
        run_id = root
    ctl = control_of(world)
    rec = ctl.get(run_id)
    if rec is not None and rec.queue is not None:
        held.release()
        ctl.reopen(run_id, None)
        for ev_ in runtime_of(world).nudges:
            ev_.set()
        return
    if spec is None:
        held.release()
        if rec is None:  # a run of run_workflow: give it a record, so workers see nobody drives it
            name = (world.log.info(run_id) or _NoInfo).workflow
            ctl.adopt(run_id, name, owner="", pid=0, host="", now=world.clock())
        ctl.reopen(run_id, None)  # claimed by nobody: a worker that knows the workflow drives it
        return
    driver = default_driver(world)
    lock, held.lock = held.lock, None
    assert lock is not None
    if rec is not None:
        ctl.reopen(run_id, None)
    got = ctl.adopt(run_id, spec.name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock())
    runtime_of(world).known[spec.name] = spec
    driver.spawn(spec, got, lock)
