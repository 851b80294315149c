"""Steps: the unit of memoization, from their start to their commit.

A step claims the next position of its scope, builds its path (with the
visit for a decision loop) and asks the log (``_decide.decide_step``). A recorded
output is rebuilt and returned; otherwise the body runs in its own scope
between ``step.started`` and ``step.completed`` (or ``step.failed``). When
nothing was written between the two, one ``step.completed`` carries both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..errors import MaxVisitsExceededError, StepTimeoutError
from ..events import STEP_COMPLETED, STEP_FAILED, STEP_STARTED
from . import _event_writer as ev
from ._artifacts import store_output
from ._call_inputs import INPUT_INLINE_LIMIT, large_input
from ._claim import REPLAYED, Claim
from ._context import CURRENT, NOTHING, Scope, check_awaited
from ._decide import FAIL, REPLAY, Call, decide_step
from ._failures import error_data, rebuild_from, recordable
from ._keys import step_path
from ._metrics import record_attempt
from ._rebind import earlier_input
from ._roundtrip import INT_BITS
from ._spec import Spec
from ._sync_bodies import call_sync_body
from ._values import LONG_INT_DIGITS, bytes_hash, json_bytes, readable, stored_bytes, to_json


class StepCall(Claim):
    """One step call: its claim on the scope, then its identity and attempt once it executes."""

    __slots__ = ("attempt", "input_hash", "path", "recorded_input", "spec", "started", "t0", "visit")

    spec: Spec
    path: str
    visit: int
    input_hash: str
    recorded_input: dict[str, Any]  # the ``input`` or ``input_ref`` its start records (``_call_inputs``)
    attempt: int
    started: dict[str, Any] | None
    t0: float

    def emit_started(self) -> None:
        """Buffer the attempt's ``step.started`` (kept to be folded into its completion)."""
        self.t0 = perf_counter()
        self.started = ev.step_started(
            self.path, self.visit, self.attempt, self.input_hash, self.n, self.recorded_input
        )
        self.run.emit(STEP_STARTED, self.started)


def step_begin(spec: Spec, call: StepCall, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Build the step's identity and ask the log; ``(REPLAYED, output)`` or ``(call, None)``."""
    scope = call.scope
    run = call.run
    name = spec.name
    visits = scope.visits
    visit = visits.get(name, 0)
    if visit >= spec.max_visits:
        raise _too_many_visits(spec, scope, visit)
    path = spec.path_of(scope.prefix, visit)
    visits[name] = visit + 1
    data, raw, ih = spec.dump_input(args, kwargs, run.run_id, path)
    attempt = 1
    if run.replaying:
        rec = run.recorded
        change = run.signatures.get("steps." + name) if run.signatures else None
        if change is not None:  # recorded under an earlier signature of the step?
            recorded = rec.steps_started.get(path)
            if recorded is not None and recorded["input_hash"] != ih:
                data, ih = earlier_input(spec, change, recorded["input_hash"], data, ih)
        # decide_step's first case, without the call: a completion with its start folded in
        # (its own start, so its input hash is the recorded one) of this very input.
        record = rec.steps_completed.get(path)
        if record is None or record.get("input_hash") != ih:
            action, record = decide_step(rec, run.run_id, name, ih, path, data, change)
            if action is FAIL:
                raise rebuild_from(record, run_id=run.run_id, path=path)  # type: ignore[arg-type]
            if action is not REPLAY:  # nothing recorded to return: the step executes
                call.execute(action, Call("step", name, ih, path))
                attempt = rec.attempt(path)
                record = None
        if record is not None:
            out = record["output"]
            keep = spec.keep  # Spec.rebuild's first test, without the call
            return REPLAYED, out if keep is not None and type(out) in keep else spec.rebuild(out)
    call.spec, call.path, call.visit, call.input_hash, call.attempt = spec, path, visit, ih, attempt
    call.recorded_input = recorded = (
        {"input": data} if len(raw) <= INPUT_INLINE_LIMIT else large_input(run, name, path, data, raw)
    )
    # emit_started, without the call: the attempt's start, buffered to be folded into its end
    call.t0 = perf_counter()
    call.started = started = ev.step_started(path, visit, attempt, ih, call.n, recorded)
    run.emit(STEP_STARTED, started)
    return call, None


def _too_many_visits(spec: Spec, scope: Scope, visit: int) -> MaxVisitsExceededError:
    run_id = scope.run.run_id
    path = step_path(scope.prefix, spec.name, visit, spec.max_visits > 1)
    return MaxVisitsExceededError(
        f"run {run_id!r}: step {spec.name!r} was entered {visit + 1} times in scope "
        f"{scope.path or '<workflow>'!r} (path {path!r}), more than its max_visits="
        f"{spec.max_visits}. Raise max_visits for a decision loop, or give each call its "
        "own scope with durable.branch(key).",
        run_id=run_id,
        path=path,
        step=spec.name,
        limit=spec.max_visits,
    )


def step_commit(call: StepCall, out: Any) -> None:
    """Buffer the step's ``step.completed``: its output encoded once, for the hash and the log."""
    run = call.run
    ms = round((perf_counter() - call.t0) * 1e6) / 1e3  # ev.elapsed_ms, without the call
    o = call.spec.out
    t = type(out)
    if t in o.same or (t is int and o.ints and out.bit_length() < INT_BITS):
        data = out  # a value stored as it is: to_json's first test, without the call
    else:
        data = to_json(o, out, what="the output", run_id=run.run_id, path=call.path)
    try:
        raw = json_bytes(data)
    except ValueError:
        raw = stored_bytes(data, what="the output", run_id=run.run_id, path=call.path)  # raises, named
    if len(raw) > LONG_INT_DIGITS:
        readable(raw, what="the output", run_id=run.run_id, path=call.path)
    run.state_version += 1
    artifact = None
    if len(raw) > run.world.artifact_threshold:  # large outputs live beside the log
        artifact = store_output(run, call.path, raw.decode())
    started = call.started
    buffer = run.buffer
    if started is not None and buffer and buffer[-1][2] is started:
        # Nothing was buffered since the start and nothing flushed: one event, in the
        # start's place (and seq), says both.
        event = ev.step_completed_folded(started, raw, bytes_hash(raw), run.state_version, artifact, ms)
        buffer[-1] = (buffer[-1][0], STEP_COMPLETED, event)
    else:
        event = ev.step_completed(
            call.path, call.visit, raw, bytes_hash(raw), run.state_version, artifact, ms
        )
        run.emit_encoded(STEP_COMPLETED, event)


def step_fail(call: StepCall, exc: BaseException, *, final: bool = True) -> bool:
    """Buffer ``step.failed`` for the code's own failure; say whether one was written."""
    if not recordable(exc):
        return False
    failed = ev.step_failed(
        call.path, call.visit, call.attempt, error_data(exc), final, ev.elapsed_ms(call.t0)
    )
    call.run.emit(STEP_FAILED, failed)
    return True


async def step_attempt(
    call: StepCall, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run the step's body once in its own scope and buffer its commit; return the output."""
    run = call.run
    traced = (
        None
        if run.tracer is None
        else run.tracer.start(call.spec.name, run.run_id, call.path, call.attempt, "step")
    )
    scope = Scope(run, call.path)
    token = CURRENT.set(scope)
    try:
        timeout = call.spec.timeout
        if timeout is None:
            out = await fn(*args, **kwargs)
        else:
            out = await _bounded(call, fn(*args, **kwargs), timeout)
        if scope.last is not NOTHING:  # the body made durable calls: each must have been awaited
            check_awaited(scope, f"step {call.spec.name!r}")
    except BaseException as exc:
        if traced is not None:
            traced.end(exc)
        if run.meters is not None and isinstance(exc, Exception):
            record_attempt(run.meters, "step", call.spec.name, time.perf_counter() - call.t0, ok=False)
        raise
    finally:
        CURRENT.reset(token)
    if traced is not None:
        traced.end()
    if run.meters is not None:
        record_attempt(run.meters, "step", call.spec.name, time.perf_counter() - call.t0, ok=True)
    step_commit(call, out)
    return out


async def _bounded(call: StepCall, body: Any, timeout: float) -> Any:
    """Await one attempt of the body for at most ``timeout`` seconds (``StepTimeoutError``)."""
    try:
        async with asyncio.timeout(timeout):
            return await body
    except TimeoutError as exc:
        if isinstance(exc, StepTimeoutError):
            raise
        raise StepTimeoutError(
            f"run {call.run.run_id!r}: step {call.spec.name!r} (path {call.path!r}) attempt "
            f"{call.attempt} ran longer than its timeout of {timeout} s. Raise timeout=, or give "
            "the step retry= to try again.",
            run_id=call.run.run_id,
            path=call.path,
        ) from None


async def step_async(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An async ``@step`` called inside a run."""
    claimed = StepCall(CURRENT.get(), spec.label)  # type: ignore[arg-type]
    try:  # ``with claimed:``, without the two calls (every step)
        call, replayed = step_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        run = call.run
        try:
            if run.tracer is None and run.meters is None and spec.timeout is None:
                # step_attempt with nothing to trace, meter or bound, without its coroutine
                scope = Scope(run, call.path)
                token = CURRENT.set(scope)
                try:
                    out = await fn(*args, **kwargs)
                    if scope.last is not NOTHING:  # the body made durable calls: each must have been awaited
                        check_awaited(scope, f"step {spec.name!r}")
                finally:
                    CURRENT.reset(token)
                step_commit(call, out)
            else:
                out = await step_attempt(call, fn, args, kwargs)
        except BaseException as exc:
            if step_fail(call, exc):
                await run.flush_async()
            raise
        if run.active > 1:  # branches of this run: grouped among themselves
            await run.flush_async()
        elif run.group.drives + run.group.coming > 1:  # other runs beside it: grouped with theirs
            await run.flush_shared()
        else:
            run.flush()
        return out
    finally:
        claimed.scope.busy = None


def step_sync(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A sync ``@step`` called inside a run."""
    with StepCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, replayed = step_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            return replayed
        run = call.run
        traced = None if run.tracer is None else run.tracer.start(spec.name, run.run_id, call.path, 1, "step")
        scope = Scope(run, call.path)
        token = CURRENT.set(scope)
        try:
            try:
                out = call_sync_body(
                    fn, args, kwargs, what=f"step {spec.name!r}", run_id=run.run_id, path=call.path
                )
                if scope.last is not NOTHING:  # a sync body cannot await the calls it made
                    check_awaited(scope, f"step {spec.name!r}")
            except BaseException as exc:
                if traced is not None:
                    traced.end(exc)
                raise
            finally:
                CURRENT.reset(token)
            if traced is not None:
                traced.end()
            step_commit(call, out)
        except BaseException as exc:
            if step_fail(call, exc):
                call.run.flush()
            raise
        call.run.flush()
        return out
