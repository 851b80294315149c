"""``start_workflow``, ``resume_run`` and ``recover_runs``: runs that do not depend on their caller."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable
from typing import Any

from .._logging import INFO, note
from ..engine import (
    Budget,
    Spec,
    WorldCore,
    accepted_drift_keys,
    check_same_run,
    checked_budget,
    checked_run_id,
    count_recovery,
    first_started,
    open_run,
    traceparent,
    validate_input,
    value_hash,
    workflow_spec,
)
from ..errors import ConfigurationError
from ..store import ControlRecord
from ._debounce import debounce_window
from ._driver import (
    HOST,
    Driver,
    control_of,
    default_driver,
    open_input,
    runtime_of,
    say_blocked,
    seal_input,
    workflow_map,
)
from ._handle import RunHandle
from ._outcome import RECOVERY_EXHAUSTED, blocked_text
from ._queue import queue_name
from ._resolve import find_workflow, record_budget, record_resume
from ._serving import WAITING_FOR_CODE, CodeMatch, leave_waiting
from ._status import run_status

log = logging.getLogger("durable.runtime")


def _check_options(
    queue: str | None, partition_key: Any, priority: Any, dedup_id: Any, deadline: Any
) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise ConfigurationError(f"priority must be an int >= 0 (lower goes first), not {priority!r}.")
    if queue is None:
        given = [n for n, v in (("partition_key", partition_key), ("dedup_id", dedup_id)) if v is not None]
        if priority:
            given.append("priority")
        if given:
            raise ConfigurationError(
                f"{', '.join(given)} only apply to queued runs; pass queue=Queue(...) as well, "
                "or drop them. Nothing was written."
            )
    for name, v in (("partition_key", partition_key), ("dedup_id", dedup_id)):
        if v is not None and (not isinstance(v, str) or not v):
            raise ConfigurationError(f"{name} must be a non-empty string, not {v!r}.")
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int | float) or not deadline > 0
    ):
        raise ConfigurationError(f"deadline= takes a number of seconds > 0, not {deadline!r}.")


def start_workflow(
    wf: Any,
    input: Any = None,
    *,
    world: WorldCore,
    run_id: str | None = None,
    queue: Any = None,
    partition_key: str | None = None,
    priority: int = 0,
    dedup_id: str | None = None,
    deadline: float | None = None,
    models: dict[str, str] | None = None,
    budget: Budget | None = None,
    debounce_key: str | None = None,
    debounce: float | None = None,
    debounce_max: float | None = None,
) -> RunHandle:
    """Record a run durably and return its handle at once.

    Without ``queue`` this process drives the run in a background task (call
    it from async code); with ``queue`` the run is ``enqueued`` and a worker
    serving that queue claims it under the queue's limits. Either way a run
    whose process dies is recovered by any worker that knows its workflow.
    ``await start_workflow(...)`` works too.

    Args:
        wf: A function decorated with ``@workflow``.
        input: The workflow's input (validated now).
        world: Where the run lives.
        run_id: The run's id (a new one when ``None``); an existing run's handle is
            returned when it was started with the same workflow and input.
        queue: A ``Queue`` or a queue name.
        partition_key: The partition the run counts against (``partition_concurrency``).
        priority: Lower goes first (an int >= 0), FIFO within a priority.
        dedup_id: While a run of the queue with this id is unfinished, its handle is returned.
        deadline: Seconds the run may take from when it first starts executing;
            when they pass the run is cancelled (reason ``deadline``).
        models: Model slot mapping.
        budget: What the run and its child runs may spend on model calls
            (``durable.Budget``); once spent, the run is ``blocked`` (reason ``budget``).
        debounce_key: With ``queue``: while a run of the queue with this key is
            enqueued and not started, this start replaces its input and moves
            its start instead, and returns its handle.
        debounce: Seconds from this start to the run's start (needs ``debounce_key``).
        debounce_max: The latest start, in seconds from the first start of the
            burst (``None``: a steady stream of starts can delay it for ever).

    Returns:
        The run's handle.

    Raises:
        ConfigurationError: Queue-only options without a queue, a bad option or run id, or no
            running event loop for a run without a queue. Nothing is written then.
        RunFailedError: The input is not valid for the workflow, or ``run_id`` names a run
            of another workflow.
        RunInputMismatchError: ``run_id`` names a run started (or enqueued) with another
            input (a ``RunFailedError`` with reason ``run_input_mismatch``). Nothing is written.
    """
    spec = workflow_spec(wf)
    qname = queue_name(queue)
    _check_options(qname, partition_key, priority, dedup_id, deadline)
    dkey, start_at, until = debounce_window(qname, debounce_key, debounce, debounce_max, world.clock())
    rid = checked_run_id(run_id)
    if qname is None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError(
                "start_workflow without queue= drives the run in a background task of this "
                "process, so it needs a running event loop: call it from async code, or pass "
                "queue= and run a Worker."
            ) from None
    _, data, input_hash = validate_input(spec, input, rid)
    budget_text = None if budget is None else json.dumps(checked_budget(budget).to_json())
    models_text = json.dumps(dict(models or {}))
    ctl = control_of(world)
    if run_id is not None and _existing(world, spec, rid, data, input_hash):  # a new id names no run yet
        return RunHandle(rid, world, spec)
    driver = default_driver(world)
    rec = ControlRecord(
        rid,
        spec.name,
        input=seal_input(world, rid, json.dumps(data), qname, dkey),
        models=models_text,
        queue=qname,
        partition_key=partition_key,
        priority=priority,
        dedup_id=dedup_id,
        deadline=None if deadline is None else float(deadline),
        state="enqueued" if qname is not None else "claimed",
        owner=None if qname is not None else driver.owner,
        pid=None if qname is not None else os.getpid(),
        host=None if qname is not None else HOST,
        created_at=world.clock(),
        claimed_at=None if qname is not None else world.clock(),
        traceparent=traceparent(),
        drives=0 if qname is not None else 1,
        driven_at=None if qname is not None else world.clock(),
        budget=budget_text,
        debounce_key=dkey,
        start_at=start_at,
        debounce_until=until,
    )
    runtime_of(world).known[spec.name] = spec
    got = ctl.submit(rec)
    if got.run_id != rid or {**got.__dict__, "seq": rec.seq} != rec.__dict__:  # seq aside, not ours
        if got.run_id == rid and not _existing(world, spec, rid, data, input_hash):
            # enqueued (or claimed) with this id and not started yet: its record holds its input
            given = json.loads(open_input(world, got))
            check_same_run(spec, rid, got.workflow, value_hash(given), data, input_hash)
        return RunHandle(got.run_id, world, spec)  # a dedup hit, or a run that exists
    if qname is None:
        lock = driver.lock(rid)
        if lock is not None:
            driver.spawn(spec, got, lock)
    else:
        _nudge(world)
    return RunHandle(rid, world, spec)


def _existing(world: WorldCore, spec: Spec, run_id: str, data: Any, input_hash: str) -> bool:
    """Whether the run has started; if so it must be of ``spec`` with this input (else raises)."""
    started = first_started(world, run_id)
    if started is None:
        return world.log.info(run_id) is not None  # a log that no longer opens with its start
    check_same_run(spec, run_id, started.get("workflow"), started.get("input_hash", ""), data, input_hash)
    return True


def _nudge(world: WorldCore) -> None:
    """Wake the workers of this process that serve the world (a new run is enqueued)."""
    for ev in runtime_of(world).nudges:
        ev.set()


async def resume_run(
    run_id: str,
    *,
    world: WorldCore,
    workflows: Iterable[Any] = (),
    accept_drift: Iterable[str] = (),
    budget: Budget | None = None,
) -> RunHandle:
    """Let a cancelled, failed or blocked run continue, or one waiting for code that can replay it.

    A queued run goes back on its queue (its limits apply); a run without a
    queue is driven by this process in the background (its workflow must be
    one of ``workflows`` or known from an earlier ``start_workflow`` here;
    otherwise any worker that knows the workflow drives it). A failed run
    runs its failed calls again; a blocked one starts its count of
    recoveries again; a waiting one (reason ``waiting_for_code``) goes on under
    the current code once ``accept_drift`` names its drift. A running or
    completed run is left as it is.

    Args:
        run_id: The run.
        world: Its world.
        workflows: The ``@workflow`` functions this process knows.
        accept_drift: Drift keys, as ``CapabilityDriftError`` (or ``status_detail().fixes``)
            prints them, that the next drive accepts (as ``run_workflow``'s
            ``accept_drift``). The decision is recorded in the log with who and when.
        budget: The run's new budget (``durable.Budget``), recorded in its log
            before it continues: how a run blocked with reason ``budget`` gets more.

    Returns:
        The run's handle.

    Raises:
        RunNotFoundError: The world has no such run.
        ConfigurationError: ``accept_drift`` is not a list of keys, ``budget`` not a
            ``Budget``, or a budget was given for a run that is not stopped.
    """
    keys = sorted(accepted_drift_keys(accept_drift))
    raised = None if budget is None else checked_budget(budget)
    st = run_status(world, checked_run_id(run_id))
    if raised is not None:
        if st.status not in ("cancelled", "failed", "blocked", "interrupted"):
            raise ConfigurationError(
                f"run {run_id!r} is {st.status}, so resume_run cannot record a budget for it now: "
                "a budget is raised for a run that is stopped (blocked, failed, cancelled or "
                "interrupted); a running run's next resume or start passes budget= instead."
            )
        record_budget(world, run_id, raised)
    waiting = st.reason == WAITING_FOR_CODE  # no live worker's code can replay it (yet)
    if (
        st.status == "running"
        and st.queue is None
        and not waiting
        and run_id not in default_driver(world).tasks
    ):
        _drive_if_undriven(world, run_id, workflows)  # asked before, and nobody drives it
        return RunHandle(run_id, world)
    if st.status not in ("cancelled", "failed", "blocked") and not waiting:
        return RunHandle(run_id, world)
    ctl = control_of(world)
    info = world.log.info(run_id)
    rec = ctl.get(run_id)
    if rec is None:
        assert info is not None
        rec = ctl.adopt(run_id, info.workflow, owner="", pid=0, host="", now=world.clock())
    if info is not None and (keys or st.status == "blocked"):
        record_resume(world, run_id, keys)
    resume: str | None = None if st.status == "blocked" or waiting else st.status
    if info is None:  # cancelled while enqueued: it never started
        resume = None
    got = ctl.reopen(run_id, resume)
    assert got is not None
    if got.queue is not None:
        _nudge(world)
        return RunHandle(run_id, world)
    name = got.workflow or (info.workflow if info is not None else "")
    spec = find_workflow(world, name, workflows)
    if spec is None:
        log.warning(
            "run %s is not driven by this process, which does not know workflow %r: a worker "
            "that knows it drives it (`little worker MODULE:ATTR`)",
            run_id,
            name,
        )
        return RunHandle(run_id, world)
    driver = default_driver(world)
    lock = driver.lock(run_id)
    if lock is not None:
        got = ctl.adopt(run_id, name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock())
        driver.spawn(spec, got, lock)
    return RunHandle(run_id, world, spec)


def _drive_if_undriven(world: WorldCore, run_id: str, workflows: Iterable[Any]) -> None:
    """Drive a running run here when no live process holds it and this process knows its workflow."""
    info = world.log.info(run_id)
    rec = control_of(world).get(run_id)
    name = (rec.workflow if rec is not None else "") or (info.workflow if info is not None else "")
    spec = find_workflow(world, name, workflows)
    if spec is None:
        return
    driver = default_driver(world)
    lock = driver.lock(run_id)
    if lock is None:
        return  # a live driver has it
    got = control_of(world).adopt(
        run_id, name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock()
    )
    driver.spawn(spec, got, lock)


CLAIM_GRACE = 1.0
"""Seconds a run another driver just claimed is left to it (it takes the run's lock right after)."""


def backoff(cut: int) -> float:
    """Seconds before the next drive of a run whose last ``cut`` drives were cut: 0, then 1, 2, 4 ... 60."""
    return 0.0 if cut <= 1 else min(2.0 ** (cut - 2), 60.0)


def recovery_limit(driver: Driver, spec: Spec) -> int:
    """A run's bound on recoveries: its workflow's ``max_recovery_attempts``, else the driver's."""
    own: int | None = spec.max_recovery_attempts
    return own if own is not None else driver.max_recovery_attempts


def recovery_pass(
    driver: Driver, specs: dict[str, Spec], warned: set[str], code: CodeMatch | None = None
) -> list[RunHandle]:
    """Drive every run of a known workflow whose driver died; return their handles.

    Only runs this code can replay are driven (``code``, see ``_serving``): one it
    cannot is left ``waiting`` for code that can, with one warning.

    A run whose drives were cut more than its ``max_recovery_attempts`` is
    ``blocked`` (``recovery_exhausted``) instead; the recoveries of one run
    back off (the first at once, then 1, 2, 4 ... 60 seconds after its last
    drive began), so a run that kills its worker cannot take the worker's CPU.
    """
    world, ctl = driver.world, driver.control
    code = code or CodeMatch(world, driver.owner)
    seen: dict[str, str] = {}
    for rec in ctl.waiting_records():
        seen[rec.run_id] = rec.workflow
    for rec in ctl.claimed():
        if rec.workflow:  # a cancel request of a run the runtime never drove names none
            seen[rec.run_id] = rec.workflow
    for info in world.log.runs(status="running"):
        if info.parent_run_id is None:
            seen.setdefault(info.run_id, info.workflow)
    free = getattr(world.locks, "free", None)  # a store that can tell in one query (Postgres leases)
    if free is not None:
        live = {rid for rid, name in seen.items() if rid not in driver.tasks and name in specs}
        open_ = free([f"run:{rid}" for rid in live])
        for rid in live:
            if f"run:{rid}" not in open_:
                del seen[rid]  # its driver holds a live lease: no lock attempt needed
    records = ctl.records([rid for rid in seen if rid not in driver.tasks])
    now = world.clock()
    out = []
    for rid, wf_name in seen.items():
        if rid in driver.tasks:
            continue
        old = records.get(rid)
        if old is not None and old.state in ("blocked", "enqueued"):
            continue  # waits for a decision, or for a claim from its queue
        spec = specs.get(wf_name)
        if spec is None:
            if rid not in warned:
                warned.add(rid)
                log.warning("run %s of workflow %r is left alone: this worker does not know it", rid, wf_name)
            continue
        cut = old.drives if old is not None and old.state == "claimed" else 0
        just_claimed = old is not None and old.driven_at is not None and now - old.driven_at < CLAIM_GRACE
        if just_claimed and old is not None and old.owner and old.owner != driver.owner:
            continue  # just claimed: its driver takes the lock now
        exhausted = cut > recovery_limit(driver, spec)
        if old is not None and not exhausted and now < (old.driven_at or 0.0) + backoff(cut):
            continue
        if code.known_mismatch(old, spec) and old is not None and not code.stranded(old, spec):
            continue  # left waiting by a worker of this code, and nobody drove it since
        lock = driver.lock(rid)
        if lock is None:
            continue  # its driver is alive
        try:
            old = ctl.get(rid)
            if old is not None and old.state != "claimed" and world.log.info(rid) is None:
                world.locks.release(lock)
                continue
            if old is not None and old.state == "claimed" and old.drives > recovery_limit(driver, spec):
                _exhausted(driver, rid, old.drives)
                world.locks.release(lock)
                continue
            opened = open_run(world, rid)  # fenced and read once, for the code check and the drive
            started = opened[1].started
            changes = code.changes(spec, rid, started, opened[1])
            if changes:
                waiting = old or ctl.adopt(
                    rid, wf_name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock()
                )
                manifest = None if started is None else started.get("manifest_hash")
                waits = code.waiting(spec, waiting, manifest, changes, opened[1])
                leave_waiting(code, waiting, waits, counted=old is None)
                world.locks.release(lock)
                continue
            rec = ctl.adopt(rid, wf_name, owner=driver.owner, pid=os.getpid(), host=HOST, now=world.clock())
        except BaseException:
            world.locks.release(lock)
            raise
        driver.spawn(spec, rec, lock, started, opened)
        count_recovery(wf_name)
        why = (
            "no process drives it"
            if old is not None and not old.owner
            else f"its driver {old.owner} is gone"
            if old is not None
            else "its driver is gone"
        )
        note(
            INFO,
            rid,
            None,
            "%s recovered run %s (workflow %r): %s",
            driver.owner,
            rid,
            wf_name,
            why,
            logger=log,
            worker=driver.owner,
        )
        out.append(RunHandle(rid, world, spec))
    return out


def _exhausted(driver: Driver, run_id: str, drives: int) -> None:
    """Block a run whose drives were cut too often (``recovery_exhausted``), with its one warning."""
    driver.control.block(run_id, blocked_text(driver.world, run_id, RECOVERY_EXHAUSTED, None))
    say_blocked(driver.world, run_id, RECOVERY_EXHAUSTED, None)


async def recover_runs(world: WorldCore, workflows: Iterable[Any]) -> list[RunHandle]:
    """One recovery pass: drive, in the background of this process, every run whose driver died.

    A run is recovered when its status is ``running`` (or it was claimed)
    and its lock can be taken: the process that held it is gone.

    Args:
        world: The world.
        workflows: The ``@workflow`` functions this process knows.

    Returns:
        The handles of the runs now driven here.
    """
    specs = workflow_map(workflows)
    runtime_of(world).known.update(specs)
    driver = default_driver(world)
    return recovery_pass(driver, specs, set(), CodeMatch(world, driver.owner))
