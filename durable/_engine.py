"""What a durable call does inside a run: steps, effects and child workflows.

Each call claims the next ordinal of its scope, builds its identity (a step
path or an effect key), asks the recorded events whether it already
happened, and either returns the recorded outcome or runs the body between
the events that make it durable:

- a step: ``step.started`` … ``step.completed`` (or ``step.failed``); when
  nothing was written between the two, one ``step.completed`` carries both;
- an effect: ``effect.intent`` (durable first) … ``effect.receipt``;
- a child workflow: an effect whose intent carries the child's run id.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ._artifacts import store_output
from ._context import CURRENT, EFFECT_KEY, RunContext, Scope
from ._failures import error_data, rebuild_from, recordable
from ._serde import bytes_hash, matches, stored_bytes, to_json
from ._spec import Spec
from .errors import (
    MaxVisitsExceededError,
    NondeterminismError,
    UnknownCommitError,
)

_EFFECT_PREFIX = {"tool": "tool", "model": "model", "workflow": "workflow"}


class _NeverHappened:
    """The answer a ``reconcile=`` function gives when the effect never took place."""

    _instance: _NeverHappened | None = None

    def __new__(cls) -> _NeverHappened:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "durable.NEVER_HAPPENED"


NEVER_HAPPENED = _NeverHappened()


def _mismatch(
    run: RunContext,
    where: str,
    recorded: tuple[str, str, str, str],
    attempted: tuple[str, str, str, str],
) -> NondeterminismError:
    rk, rn, rh, rp = recorded
    ak, an, ah, ap = attempted
    return NondeterminismError(
        f"run {run.run_id!r}: the code made a different durable call at {where} than the log "
        f"recorded.\n  recorded:  {rk} {rn!r} at {rp!r} (input {rh[:12]})\n"
        f"  attempted: {ak} {an!r} at {ap!r} (input {ah[:12]})\n"
        "Restore the code the run was started with and resume, or start a new run id.",
        run_id=run.run_id,
        path=ap,
        recorded={"kind": rk, "name": rn, "input_hash": rh, "path": rp},
        attempted={"kind": ak, "name": an, "input_hash": ah, "path": ap},
    )


def check_position(run: RunContext, scope: Scope, n: int, attempted: tuple[str, str, str, str]) -> None:
    rec = run.recorded.position(scope.path, n)
    if rec is not None and (rec[0], rec[1], rec[3]) != (attempted[0], attempted[1], attempted[3]):
        raise _mismatch(run, f"position {n} of scope {scope.path or '<workflow>'!r}", rec, attempted)


# -- steps ----------------------------------------------------------------------


class StepCall:
    __slots__ = ("attempt", "input_hash", "n", "path", "run", "scope", "spec", "started", "visit")

    def __init__(self, spec: Spec, scope: Scope, n: int, path: str, visit: int, input_hash: str):
        self.spec = spec
        self.scope = scope
        self.run = scope.run
        self.n = n
        self.path = path
        self.visit = visit
        self.attempt = 1
        self.input_hash = input_hash
        self.started: dict[str, Any] | None = None

    def emit_started(self) -> None:
        """Buffer the attempt's ``step.started`` (kept to be folded into its completion)."""
        self.started = {
            "path": self.path,
            "visit": self.visit,
            "attempt": self.attempt,
            "input_hash": self.input_hash,
            "pos": self.n,
        }
        self.run.emit("step.started", self.started)


REPLAYED = object()
"""The first item ``step_begin`` and ``effect_begin`` return when the outcome is recorded."""


def step_begin(spec: Spec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Claim identity; return ``(REPLAYED, output)`` or ``(call, None)`` to execute."""
    scope: Scope = CURRENT.get()  # type: ignore[assignment]
    run = scope.run
    n = scope.enter(spec.label)
    try:
        name = spec.name
        visit = scope.visits.get(name, 0)
        if spec.max_visits > 1:
            if visit >= spec.max_visits:
                raise _too_many_visits(spec, scope, visit)
            path = f"{scope.prefix}{name}.visit[{visit}]"
        elif visit:
            raise _too_many_visits(spec, scope, visit)
        else:
            path = scope.prefix + name
        scope.visits[name] = visit + 1
        data, ih = spec.dump_input(args, kwargs, run.run_id, path)
        attempt = 1
        if run.replaying:
            rec = run.recorded
            started = rec.steps_started.get(path)
            if (
                started is not None
                and started["input_hash"] != ih
                and not matches(started["input_hash"], data, ih)
            ):
                if started.get("inherited"):
                    # A fork's inherited result whose arguments changed: it depends on
                    # what the fork changed, so it runs again.
                    rec.forget(path)
                    started = None
                else:
                    raise _mismatch(
                        run,
                        f"step {path!r}",
                        ("step", name, started["input_hash"], path),
                        ("step", name, ih, path),
                    )
            done = rec.steps_completed.get(path)
            if done is not None:
                scope.busy = None
                return REPLAYED, spec.rebuild(done["output"])
            failed = rec.steps_failed.get(path)
            if failed is not None:
                raise rebuild_from(failed, run_id=run.run_id, path=path)
            check_position(run, scope, n, ("step", name, ih, path))
            attempt = rec.attempt(path)
        call = StepCall(spec, scope, n, path, visit, ih)
        call.attempt = attempt
        call.emit_started()
        return call, None
    except BaseException:
        scope.busy = None
        raise


def _too_many_visits(spec: Spec, scope: Scope, visit: int) -> MaxVisitsExceededError:
    run_id = scope.run.run_id
    path = scope.prefix + spec.name + (f".visit[{visit}]" if spec.max_visits > 1 else "")
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


def _step_commit(call: StepCall, out: Any) -> None:
    run = call.run
    data = to_json(call.spec.out, out, what="the output", run_id=run.run_id, path=call.path)
    raw = stored_bytes(data, what="the output", run_id=run.run_id, path=call.path)
    run.state_version += 1
    started = call.started
    if started is not None and run.unemit(started):
        # Nothing was buffered since the start and nothing flushed: one event says both.
        event = {**started, "output": data}
    else:
        event = {"path": call.path, "visit": call.visit, "output": data}
    event["output_hash"] = bytes_hash(raw)
    event["state_version"] = run.state_version
    if len(raw) > run.world.artifact_threshold:  # large outputs live beside the log
        event["output"] = None
        event["artifact"] = store_output(run, call.path, raw.decode())
    run.emit("step.completed", event)


def step_fail(call: StepCall, exc: BaseException, *, final: bool = True) -> bool:
    if not recordable(exc):
        return False
    call.run.emit(
        "step.failed",
        {"path": call.path, "visit": call.visit, "attempt": call.attempt, **error_data(exc), "final": final},
    )
    return True


async def step_attempt(
    call: StepCall, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run the step's body once in its own scope and buffer its commit; return the output."""
    token = CURRENT.set(Scope(call.run, call.path))
    try:
        out = await fn(*args, **kwargs)
    finally:
        CURRENT.reset(token)
    _step_commit(call, out)
    return out


async def step_async(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    call, replayed = step_begin(spec, args, kwargs)
    if call is REPLAYED:
        return replayed
    scope = call.scope
    try:
        out = await step_attempt(call, fn, args, kwargs)
    except BaseException as exc:
        if step_fail(call, exc):
            await call.run.flush_async()
        scope.busy = None
        raise
    await call.run.flush_async()
    scope.busy = None
    return out


def step_sync(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call, replayed = step_begin(spec, args, kwargs)
    if call is REPLAYED:
        return replayed
    scope = call.scope
    token = CURRENT.set(Scope(call.run, call.path))
    try:
        try:
            out = fn(*args, **kwargs)
        finally:
            CURRENT.reset(token)
        _step_commit(call, out)
    except BaseException as exc:
        if step_fail(call, exc):
            call.run.flush()
        scope.busy = None
        raise
    call.run.flush()
    scope.busy = None
    return out


# -- effects --------------------------------------------------------------------


class EffectCall:
    __slots__ = ("ih", "input", "key", "mode", "run", "scope", "spec")

    def __init__(self, spec: Spec, scope: Scope, key: str, inp: dict[str, Any], ih: str, mode: str):
        self.spec = spec
        self.scope = scope
        self.run = scope.run
        self.key = key
        self.input = inp
        self.ih = ih
        self.mode = mode  # "call" (intent buffered), "redrive" or "reconcile"


def effect_begin(
    spec: Spec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    child_run_id: Callable[[str], str] | None = None,
) -> tuple[Any, Any]:
    scope: Scope = CURRENT.get()  # type: ignore[assignment]
    run = scope.run
    kind = spec.kind
    n = scope.enter(spec.label)
    try:
        key = f"{scope.prefix}{_EFFECT_PREFIX[kind]}:{spec.name}#{n}"
        inp, ih = spec.dump_input(args, kwargs, run.run_id, key)
        mode = "call"
        if run.replaying:
            rec = run.recorded
            intent = rec.intents.get(key)
            if intent is not None and (
                intent["name"] != spec.name or not matches(intent["input_hash"], inp, ih)
            ):
                if intent.get("inherited") and intent["name"] == spec.name:
                    rec.forget(key)  # a fork's inherited effect whose input changed runs again
                    intent = None
                else:
                    raise _mismatch(
                        run,
                        f"effect {key!r}",
                        (intent["kind"], intent["name"], intent["input_hash"], key),
                        (kind, spec.name, ih, key),
                    )
            receipt = rec.receipts.get(key)
            if receipt is not None:
                scope.busy = None
                if receipt["outcome"] == "ok":
                    # A stream's chunks are in its stream.cursor events; _streams rebuilds them.
                    result = receipt["result"]
                    return REPLAYED, result if spec.is_asyncgen else spec.rebuild(result)
                raise rebuild_from(receipt, run_id=run.run_id, path=key)
            if intent is not None:
                if kind in ("model", "workflow") or spec.idempotent:
                    mode = "redrive"
                elif spec.reconcile is not None:
                    mode = "reconcile"
                else:
                    raise UnknownCommitError(
                        f"run {run.run_id!r}: tool {spec.name!r} (key {key!r}) was started before "
                        "the crash and never confirmed, so it may or may not have happened. It is "
                        "not idempotent and has no reconcile=, so durable will not call it again. "
                        "Check the external system for idempotency key "
                        f"{run.run_id}:{key}, then mark the tool idempotent=True, give it a "
                        "reconcile= function, or start a new run.",
                        run_id=run.run_id,
                        key=key,
                    )
            else:
                check_position(run, scope, n, (kind, spec.name, ih, key))
        if mode == "call":
            data: dict[str, Any] = {
                "key": key,
                "kind": kind,
                "name": spec.name,
                "input_hash": ih,
                "pos": n,
            }
            if child_run_id is not None:
                data["child_run_id"] = child_run_id(key)
            run.emit("effect.intent", data)
        return EffectCall(spec, scope, key, inp, ih, mode), None
    except BaseException:
        scope.busy = None
        raise


def receipt_ok(call: EffectCall, result: Any) -> None:
    data = to_json(call.spec.out, result, what="the result", run_id=call.run.run_id, path=call.key)
    stored_bytes(data, what="the result", run_id=call.run.run_id, path=call.key)
    call.run.emit("effect.receipt", {"key": call.key, "outcome": "ok", "result": data})


def receipt_error(call: EffectCall, exc: BaseException) -> bool:
    if not recordable(exc):
        return False
    call.run.emit(
        "effect.receipt",
        {
            "key": call.key,
            "outcome": "error",
            **error_data(exc),
        },
    )
    return True


async def _reconcile_async(call: EffectCall) -> Any:
    answer = call.spec.reconcile(f"{call.run.run_id}:{call.key}", call.input)  # type: ignore[misc]
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


async def effect_attempt(
    call: EffectCall, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """One attempt of an effect: ask ``reconcile=`` or make the intent durable, then call.

    Returns the effect's result (or the reconciled one); the caller writes the receipt.
    """
    run = call.run
    if call.mode == "reconcile":
        answer = await _reconcile_async(call)
        if answer is not NEVER_HAPPENED:
            return answer
    elif call.mode == "call":
        await run.flush_async()  # the intent is durable before anything leaves
    token = EFFECT_KEY.set(f"{run.run_id}:{call.key}")
    try:
        return await fn(*args, **kwargs)
    finally:
        EFFECT_KEY.reset(token)


async def effect_async(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    call, replayed = effect_begin(spec, args, kwargs)
    if call is REPLAYED:
        return replayed
    return await confirm(call, effect_attempt(call, fn, args, kwargs))


async def confirm(call: EffectCall, outcome: Awaitable[Any]) -> Any:
    """Await an effect's outcome and record it: its receipt, or its error (durable at once)."""
    run = call.run
    try:
        result = await outcome
        receipt_ok(call, result)
    except BaseException as exc:
        if receipt_error(call, exc):
            await run.flush_async()
        raise
    finally:
        call.scope.busy = None
    run.flush_soon()
    return result


def effect_sync(spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call, replayed = effect_begin(spec, args, kwargs)
    if call is REPLAYED:
        return replayed
    run = call.run
    try:
        if call.mode == "reconcile":
            answer = call.spec.reconcile(f"{run.run_id}:{call.key}", call.input)
            if answer is not NEVER_HAPPENED:
                receipt_ok(call, answer)
                run.flush()
                return answer
        elif call.mode == "call":
            run.flush()
        token = EFFECT_KEY.set(f"{run.run_id}:{call.key}")
        try:
            result = fn(*args, **kwargs)
        finally:
            EFFECT_KEY.reset(token)
        receipt_ok(call, result)
    except BaseException as exc:
        if receipt_error(call, exc):
            run.flush()
        raise
    finally:
        call.scope.busy = None
    run.flush()
    return result


def current_effect_key() -> str:
    """The idempotency key of the running effect (``durable.idempotency_key()``)."""
    key = EFFECT_KEY.get()
    if key is None:
        from .errors import ConfigurationError

        raise ConfigurationError(
            "durable.idempotency_key() is only available inside a @tool or @model_call body "
            "running in a durable run."
        )
    return key
