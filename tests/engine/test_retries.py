"""Retries through tenacity: decisions in the log, durable backoff, attempts that survive a crash."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import tenacity
from hypothesis import given
from hypothesis import strategies as st

import durable
from durable import ConfigurationError, NondeterminismError, NonRetryableError, RetryPolicy
from durable.engine._retry_policy import decide
from durable.testing import FakeClock, crashing_world
from tests.conftest import Worlds, step_starts
from tests.helpers.crash import SimulatedCrash, on


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def crashing(world: durable.World, when: Callable[[str, dict[str, Any]], bool]) -> durable.World:
    """The same world (clock and sleep included) whose log dies before a matching append."""
    return crashing_world(world, crash_before=when)


def events(world: durable.World, run_id: str, type_: str) -> list[Any]:
    return [e for e in world.events(run_id) if e.type == type_]


def flaky_workflow(
    calls: Counter[str], fail_times: int, policy: Any, exc: type[Exception] = ConnectionError
) -> Any:
    """A workflow whose step fails ``fail_times`` times before it returns."""

    @durable.step(retry=policy)
    async def fetch(x: int) -> int:
        calls["fetch"] += 1
        if calls["fetch"] <= fail_times:
            raise exc(f"attempt {calls['fetch']} failed")
        return x * 10

    @durable.workflow
    async def wf(x: int) -> int:
        return await fetch(x)

    return wf


# -- the policy and what retry= accepts -------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 2.5},
        {"backoff": -1},
        {"backoff": float("nan")},
        {"backoff": "soon"},
        {"retry_on": int},
        {"give_up_on": (ValueError, "x")},
    ],
)
def test_retry_policy_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    """A RetryPolicy argument that cannot work raises ConfigurationError at once."""
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    "retry",
    [
        {"stops": tenacity.stop_after_attempt(2)},
        {"stop": 3},
        tenacity.Retrying(before_sleep=lambda rs: None),
        "three times",
    ],
)
def test_bad_retry_option_fails_at_decoration_time(retry: Any) -> None:
    """retry= with something that is not a policy fails when the function is decorated."""
    with pytest.raises(ConfigurationError, match="retry"):

        @durable.tool(retry=retry)
        async def t() -> None: ...


def test_retry_on_a_sync_function_fails_at_decoration_time() -> None:
    """A sync function cannot take retry=, since the backoff is a durable async sleep."""
    with pytest.raises(ConfigurationError, match="not an async def"):

        @durable.step(retry=RetryPolicy())
        def s() -> None: ...


def test_tenacity_mapping_and_retrying_object_become_policies() -> None:
    """retry= takes a mapping of tenacity objects or a tenacity Retrying, keeping their objects."""
    stop = tenacity.stop_after_attempt(7)

    @durable.tool(retry={"stop": stop})
    async def a() -> None: ...

    @durable.model_call(retry=tenacity.AsyncRetrying(stop=stop, wait=tenacity.wait_fixed(4)))
    async def b() -> None: ...

    spec_a, spec_b = durable.engine._spec.spec_of(a), durable.engine._spec.spec_of(b)
    assert isinstance(spec_a.retry, RetryPolicy)
    assert spec_a.retry.stop is stop
    assert isinstance(spec_b.retry, RetryPolicy)
    assert spec_b.retry.stop is stop
    assert "wait_fixed(wait_fixed=4.0)" in spec_b.retry.describe()


def test_policy_description_is_stable_and_shows_its_settings() -> None:
    """Two equal policies describe themselves the same way, and a changed one differently."""
    assert (
        RetryPolicy(max_attempts=4, backoff=1).describe() == RetryPolicy(max_attempts=4, backoff=1).describe()
    )
    assert "max_attempt_number=4" in RetryPolicy(max_attempts=4).describe()
    assert RetryPolicy(max_attempts=4).describe() != RetryPolicy(max_attempts=5).describe()


# -- steps ----------------------------------------------------------------------


def test_step_is_retried_until_it_succeeds_and_each_decision_is_logged(worlds: Worlds) -> None:
    """A failing step runs again after each backoff; every decision is a retry.decision event."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    wf = flaky_workflow(calls, 2, RetryPolicy(max_attempts=3, backoff=5))

    assert run(durable.run_workflow(wf, 1, world=world, run_id="r")) == 10
    decisions = events(world, "r", "retry.decision")
    assert [(d.key, d.attempt, d.decision, d.backoff) for d in decisions] == [
        ("fetch", 1, "retry", 5.0),
        ("fetch", 2, "retry", 5.0),
    ]
    assert decisions[0].error_type == "builtins.ConnectionError"
    assert [f.final for f in events(world, "r", "step.failed")] == [False, False]
    assert [s.attempt for s in step_starts(world, "r")] == [1, 2, 3]
    assert clock.slept == [5.0, 5.0]
    assert calls["fetch"] == 3


def test_step_gives_up_after_max_attempts_and_resume_reraises(worlds: Worlds) -> None:
    """When the policy stops, the last failure is final, logged as give_up, and replayed on resume."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    wf = flaky_workflow(calls, 99, RetryPolicy(max_attempts=3, backoff=1))

    with pytest.raises(ConnectionError, match="attempt 3"):
        run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    assert [d.decision for d in events(world, "r", "retry.decision")] == ["retry", "retry", "give_up"]
    assert [f.final for f in events(world, "r", "step.failed")] == [False, False, True]
    with pytest.raises(ConnectionError, match="attempt 3"):
        run(durable.run_workflow(wf, 1, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
    assert calls["fetch"] == 3


def test_non_retryable_error_stops_at_once(world: durable.World) -> None:
    """NonRetryableError is never retried, whatever the policy allows."""
    calls = Counter[str]()
    wf = flaky_workflow(calls, 99, RetryPolicy(max_attempts=5, backoff=0), exc=NonRetryableError)

    with pytest.raises(NonRetryableError):
        run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    assert calls["fetch"] == 1
    assert [d.decision for d in events(world, "r", "retry.decision")] == ["give_up"]


def test_give_up_on_types_are_not_retried(world: durable.World) -> None:
    """An exception listed in give_up_on fails at once even though retry_on matches it."""
    calls = Counter[str]()
    policy = RetryPolicy(max_attempts=5, backoff=0, retry_on=Exception, give_up_on=KeyError)
    wf = flaky_workflow(calls, 99, policy, exc=KeyError)

    with pytest.raises(KeyError):
        run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    assert calls["fetch"] == 1


def test_exception_outside_retry_on_is_not_retried(world: durable.World) -> None:
    """Only the types in retry_on are retried."""
    calls = Counter[str]()
    wf = flaky_workflow(calls, 99, RetryPolicy(max_attempts=5, backoff=0, retry_on=OSError), exc=ValueError)

    with pytest.raises(ValueError, match="attempt 1"):
        run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    assert calls["fetch"] == 1


def test_nondeterminism_inside_a_retried_step_is_never_retried(world: durable.World) -> None:
    """A NondeterminismError (two durable calls at once in one scope) is not retried."""
    calls = Counter[str]()

    @durable.tool
    async def ping(i: int) -> int:
        calls["ping"] += 1
        await asyncio.sleep(0)
        return i

    @durable.step(retry=RetryPolicy(max_attempts=5, backoff=0))
    async def both() -> list[int]:
        calls["body"] += 1
        return list(await asyncio.gather(ping(1), ping(2)))

    @durable.workflow
    async def wf() -> list[int]:
        return await both()

    with pytest.raises(NondeterminismError):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert calls["body"] == 1
    assert events(world, "r", "retry.decision") == []


def test_tenacity_stop_after_delay_counts_injected_time(worlds: Worlds) -> None:
    """A tenacity delay-based stop reads the world's clock, so backoff time counts without waiting."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    policy = {"stop": tenacity.stop_after_delay(5), "wait": tenacity.wait_fixed(3)}
    wf = flaky_workflow(calls, 99, policy)

    with pytest.raises(ConnectionError):
        run(durable.run_workflow(wf, 1, world=world, run_id="r"))
    assert calls["fetch"] == 3  # fails at t=0, t=3 (retried), t=6 (past 5 s: gives up)
    assert clock.slept == [3.0, 3.0]


def test_retried_step_replays_what_committed_inside_it(worlds: Worlds) -> None:
    """A retried step body runs again, but a tool that succeeded in the failed attempt is not called again."""
    calls = Counter[str]()

    @durable.tool
    async def send(msg: str) -> str:
        calls["send"] += 1
        return f"sent {msg}"

    @durable.tool
    async def check() -> bool:
        calls["check"] += 1
        if calls["check"] == 1:
            raise TimeoutError("not yet")
        return True

    @durable.step(retry=RetryPolicy(max_attempts=3, backoff=0))
    async def notify(msg: str) -> str:
        calls["body"] += 1
        out = await send(msg)
        await check()
        return out

    @durable.workflow
    async def wf(msg: str) -> str:
        return await notify(msg)

    world = worlds.open()
    assert run(durable.run_workflow(wf, "hi", world=world, run_id="r")) == "sent hi"
    assert (calls["body"], calls["send"], calls["check"]) == (2, 1, 2)


# -- effects --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tool", "model"])
def test_effect_attempts_each_have_an_intent_and_a_receipt(worlds: Worlds, kind: str) -> None:
    """Each attempt of a retried effect writes its own intent and receipt under the same key."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    decorate = durable.tool if kind == "tool" else durable.model_call

    @decorate(name="fx", retry=RetryPolicy(max_attempts=4, backoff=2))
    async def fx(x: int) -> int:
        calls[durable.idempotency_key()] += 1
        if sum(calls.values()) < 3:
            raise ConnectionError("flaky")
        return x + 1

    @durable.workflow
    async def wf(x: int) -> int:
        return await fx(x)

    assert run(durable.run_workflow(wf, 1, world=world, run_id="r")) == 2
    key = f"{kind}:fx#0"
    assert calls == Counter({f"r:{key}": 3})
    assert [i.key for i in events(world, "r", "effect.intent")] == [key] * 3
    assert [r.outcome for r in events(world, "r", "effect.receipt")] == ["error", "error", "ok"]
    assert [d.attempt for d in events(world, "r", "retry.decision")] == [1, 2]
    assert clock.slept == [2.0, 2.0]


def test_effect_that_gives_up_records_a_final_error_receipt_replayed_on_resume(worlds: Worlds) -> None:
    """A retried tool that fails for good leaves an error receipt; a resume re-raises it without calling."""
    calls = Counter[str]()

    @durable.tool(retry=RetryPolicy(max_attempts=2, backoff=0))
    async def fx() -> int:
        calls["fx"] += 1
        raise PermissionError("denied")

    @durable.workflow
    async def wf() -> int:
        return await fx()

    with pytest.raises(PermissionError):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    with pytest.raises(PermissionError):
        run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert calls["fx"] == 2


# -- crashes --------------------------------------------------------------------


def test_attempt_count_continues_from_the_log_after_a_crash(worlds: Worlds) -> None:
    """A crash during the backoff does not restart the count: the resume runs attempt 2, then gives up."""
    clock = FakeClock()
    calls = Counter[str]()
    wf = flaky_workflow(calls, 99, RetryPolicy(max_attempts=2, backoff=1))
    world = worlds.open(clock=clock.time, sleep=clock.sleep)

    with pytest.raises(SimulatedCrash):
        run(
            durable.run_workflow(
                wf, 1, world=crashing(world, on("retry.decision", '"attempt":2')), run_id="r"
            )
        )
    first = worlds.open(clock=clock.time, sleep=clock.sleep)
    # The first failure and its decision were durable before the backoff began.
    assert [d.attempt for d in events(first, "r", "retry.decision")] == [1]
    with pytest.raises(ConnectionError, match="attempt 3"):
        run(durable.run_workflow(wf, 1, world=first, run_id="r"))
    decisions = events(first, "r", "retry.decision")
    assert [(d.attempt, d.decision) for d in decisions] == [(1, "retry"), (2, "give_up")]
    assert calls["fetch"] == 3  # attempt 2 was cut by the crash, then run again as attempt 2


def test_resume_sleeps_only_what_is_left_of_the_backoff(worlds: Worlds) -> None:
    """A run resumed 4 s into a 10 s backoff sleeps 6 s; resumed after it, it sleeps nothing."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    wf = flaky_workflow(calls, 1, RetryPolicy(max_attempts=3, backoff=10))

    def before_sleep(type_: str, data: dict[str, Any]) -> bool:
        # attempt 2's start (folded into its completion when nothing came between)
        return type_ in ("step.started", "step.completed") and data.get("attempt") == 2

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 1, world=crashing(world, before_sleep), run_id="r"))
    clock.slept.clear()
    clock.now = events(world, "r", "retry.decision")[0].wake_at - 6  # 4 s into the backoff
    assert (
        run(durable.run_workflow(wf, 1, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
        == 10
    )
    assert clock.slept == [pytest.approx(6.0)]


def test_backoff_already_past_on_resume_sleeps_nothing(worlds: Worlds) -> None:
    """A resume after the wake time starts the next attempt at once."""
    clock = FakeClock()
    world = worlds.open(clock=clock.time, sleep=clock.sleep)
    calls = Counter[str]()
    wf = flaky_workflow(calls, 1, RetryPolicy(max_attempts=3, backoff=10))

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 1, world=crashing(world, on("step.completed")), run_id="r"))
    clock.slept.clear()
    clock.advance(60)
    assert (
        run(durable.run_workflow(wf, 1, world=worlds.open(clock=clock.time, sleep=clock.sleep), run_id="r"))
        == 10
    )
    assert clock.slept == []


def test_non_idempotent_tool_with_unknown_commit_is_not_retried(worlds: Worlds) -> None:
    """A plain tool whose attempt ended in an unknown commit fails closed, retry policy or not."""
    calls = Counter[str]()

    @durable.tool(retry=RetryPolicy(max_attempts=5, backoff=0))
    async def pay(amount: int) -> str:
        calls["pay"] += 1
        return "paid"

    @durable.workflow
    async def wf(amount: int) -> str:
        return await pay(amount)

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 5, world=worlds.crashing(on("effect.receipt")), run_id="r"))
    world = worlds.open()
    with pytest.raises(durable.UnknownCommitError):
        run(durable.run_workflow(wf, 5, world=world, run_id="r"))
    assert calls["pay"] == 1
    assert events(world, "r", "retry.decision") == []


def test_crash_during_a_retried_steps_backoff_keeps_inner_commits(worlds: Worlds) -> None:
    """After a crash in a step's backoff, the resumed attempt replays the inner tool that succeeded."""
    calls = Counter[str]()

    @durable.tool
    async def send() -> str:
        calls["send"] += 1
        return "sent"

    @durable.tool(idempotent=True)
    async def confirm() -> str:
        calls["confirm"] += 1
        if calls["confirm"] == 1:
            raise TimeoutError("later")
        return "ok"

    @durable.step(retry=RetryPolicy(max_attempts=2, backoff=0))
    async def deliver() -> str:
        return await send() + " " + await confirm()

    @durable.workflow
    async def wf() -> str:
        return await deliver()

    def second_attempt(type_: str, data: dict[str, Any]) -> bool:
        return type_ == "effect.intent" and data["name"] == "confirm" and calls["confirm"] == 1

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(second_attempt), run_id="r"))
    assert run(durable.run_workflow(wf, world=worlds.open(), run_id="r")) == "sent ok"
    assert (calls["send"], calls["confirm"]) == (1, 2)


def test_retry_on_a_streaming_model_call_fails_at_decoration_time() -> None:
    """A streaming model call cannot take retry=."""
    with pytest.raises(ConfigurationError, match="streams"):

        @durable.model_call(retry=RetryPolicy())
        async def stream() -> Any:
            yield "chunk"


@given(
    max_attempts=st.integers(min_value=1, max_value=8),
    backoff=st.floats(min_value=0, max_value=100, allow_nan=False),
    attempt=st.integers(min_value=1, max_value=10),
)
def test_policy_retries_exactly_before_max_attempts(max_attempts: int, backoff: float, attempt: int) -> None:
    """decide() retries attempt k, with the fixed backoff, exactly when k < max_attempts."""
    policy = RetryPolicy(max_attempts=max_attempts, backoff=backoff)
    d = decide(policy, ConnectionError("x"), attempt=attempt, first_attempt_at=0.0, now=1.0, idle_for=0.0)
    assert d.retry == (attempt < max_attempts)
    assert d.backoff == (backoff if d.retry else 0.0)


@given(kinds=st.lists(st.sampled_from([KeyError, ValueError, OSError, TimeoutError]), min_size=1, max_size=4))
def test_give_up_on_wins_over_retry_on(kinds: list[type[Exception]]) -> None:
    """An exception type in give_up_on is never retried, even when retry_on lists it too."""
    never = kinds[0]
    policy = RetryPolicy(max_attempts=5, backoff=0, retry_on=tuple(kinds), give_up_on=never)
    for kind in kinds:
        d = decide(policy, kind("x"), attempt=1, first_attempt_at=0.0, now=0.0, idle_for=0.0)
        assert d.retry == (not issubclass(kind, never))


def test_changing_the_policy_of_a_declared_tool_is_drift(world: durable.World) -> None:
    """A resume whose declared tool has another retry policy fails closed with CapabilityDriftError."""

    def make(policy: RetryPolicy) -> Any:
        @durable.tool(name="send", retry=policy)
        async def send() -> str:
            return "sent"

        @durable.workflow(name="wf", uses=[send])
        async def wf() -> str:
            await send()
            return str(durable.interrupt("more?"))

        return wf

    with pytest.raises(durable.RunInterrupted):
        run(durable.run_workflow(make(RetryPolicy(max_attempts=3)), world=world, run_id="r"))
    with pytest.raises(durable.CapabilityDriftError, match="retry"):
        run(durable.run_workflow(make(RetryPolicy(max_attempts=9)), world=world, run_id="r", resume="no"))


def test_idempotent_tool_cut_during_a_retry_is_redriven_as_the_same_attempt(worlds: Worlds) -> None:
    """A crash between attempt 2's intent and receipt re-drives attempt 2 with the same key."""
    calls = Counter[str]()

    @durable.tool(idempotent=True, retry=RetryPolicy(max_attempts=2, backoff=0))
    async def book(seat: str) -> str:
        calls[durable.idempotency_key()] += 1
        if sum(calls.values()) == 1:
            raise ConnectionError("first try fails")
        return f"booked {seat}"

    @durable.workflow
    async def wf(seat: str) -> str:
        return await book(seat)

    def second_receipt(type_: str, data: dict[str, Any]) -> bool:
        return type_ == "effect.receipt" and data["outcome"] == "ok"

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, "12A", world=worlds.crashing(second_receipt), run_id="r"))
    world = worlds.open()
    assert run(durable.run_workflow(wf, "12A", world=world, run_id="r")) == "booked 12A"
    assert calls == Counter({"r:tool:book#0": 3})
    assert [(d.attempt, d.decision) for d in events(world, "r", "retry.decision")] == [(1, "retry")]
