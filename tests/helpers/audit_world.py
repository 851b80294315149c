"""A world filled with marked values in every place that can hold one, for the plaintext audits.

``fill(world)`` drives runs whose every kind of value carries a marker of
``MARKS``: inputs and outputs, step outputs, tool arguments and results,
model prompts and responses, errors (a failed step, a failed run, a run
blocked by a failing compensation), events, streams, artifacts and their
names, outbox entries (delivered and failed), messages (consumed and
waiting), queued and debounced inputs, schedule inputs, an interrupt and
its answer, a child run, an outer loop's manifest, a compacted run's
snapshot, a thread store's value, and memory items where the world has a
memory store. The audits
then look for the markers in every table (and file) the world has.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import pytest

import durable
from durable import Continue, Done, Schedule
from durable.runtime import run_status, schedules_of
from tests.helpers.waiting import until

MARKS: dict[str, str] = {
    "input": "ZEBRA-INPUT",
    "output": "ZEBRA-OUTPUT",
    "step": "ZEBRA-STEP-OUT",
    "tool_arg": "ZEBRA-TOOL-ARG",
    "tool_result": "ZEBRA-TOOL-RESULT",
    "prompt": "ZEBRA-PROMPT",
    "response": "ZEBRA-RESPONSE",
    "step_error": "ZEBRA-STEP-ERROR",
    "run_error": "ZEBRA-RUN-ERROR",
    "blocked_error": "ZEBRA-BLOCKED-ERROR",
    "event": "ZEBRA-EVENT",
    "stream": "ZEBRA-STREAM",
    "artifact": "ZEBRA-ARTIFACT-BODY",
    "artifact_name": "ZEBRA-ARTIFACT-NAME",
    "big_output": "ZEBRA-BIG-OUTPUT",
    "outbox_arg": "ZEBRA-OUTBOX-ARG",
    "outbox_result": "ZEBRA-OUTBOX-RESULT",
    "outbox_error": "ZEBRA-OUTBOX-ERROR",
    "message": "ZEBRA-MESSAGE",
    "message_waiting": "ZEBRA-MESSAGE-WAITING",
    "question": "ZEBRA-QUESTION",
    "answer": "ZEBRA-ANSWER",
    "child": "ZEBRA-CHILD",
    "queued": "ZEBRA-QUEUED",
    "debounced": "ZEBRA-DEBOUNCED",
    "schedule": "ZEBRA-SCHEDULE",
    "outer_loop": "ZEBRA-OUTER-LOOP",
    "snapshot": "ZEBRA-SNAPSHOT",
    "waiting": "ZEBRA-WAITING",
    "thread": "ZEBRA-THREAD",
    "memory_text": "ZEBRA-MEMORY-TEXT",
    "memory_meta": "ZEBRA-MEMORY-META",
}
"""The marker of each kind of value ``fill`` writes (memory ones only where the world has memory)."""

THREADS = "audit.conversation"
"""The thread store namespace ``fill`` writes its value in."""

M = MARKS


@durable.step
async def summarise(x: str) -> str:
    return f"{x} {M['step']}"


@durable.step
async def big(x: str) -> str:
    return f"{M['big_output']} " * 40  # above the world's artifact threshold: an artifact


@durable.step(retry=durable.RetryPolicy(max_attempts=1))
async def fails(x: str) -> str:
    raise ValueError(f"{M['step_error']} in the message")


@durable.tool
async def lookup(q: str) -> str:
    return f"{M['tool_result']} for {q[:4]}"


@durable.model_call(slot="writer", name="draft")
async def draft(prompt: str) -> str:
    return f"{M['response']} to {prompt[:4]}"


@durable.tool(outbox=True, retry=durable.RetryPolicy(max_attempts=1))
async def audit_notify(body: str) -> str:
    return f"{M['outbox_result']} {body[:4]}"


@durable.tool(outbox=True, retry=durable.RetryPolicy(max_attempts=1))
async def audit_page(body: str) -> str:
    raise durable.NonRetryableError(f"{M['outbox_error']} pager down")


@durable.workflow
async def child(x: str) -> str:
    return f"{x} done"


@durable.workflow
async def audited(x: str) -> str:
    """Every kind of durable call, each value marked."""
    a = await summarise(x)
    b = await lookup(f"{a} {M['tool_arg']}")
    async with durable.session("writer"):
        c = await draft(f"{M['prompt']} {b}")
    with contextlib.suppress(ValueError):
        await fails(x)
    await big(x)
    ref = await durable.save_artifact(f"{M['artifact_name']}.txt", f"{M['artifact']} body".encode())
    durable.set_event("status", M["event"])
    await durable.write_stream("tokens", M["stream"])
    durable.close_stream("tokens")
    got = await durable.recv("inbox")
    await audit_notify(M["outbox_arg"])
    with contextlib.suppress(durable.NonRetryableError):
        await audit_page(M["outbox_arg"])
    kid = await child(M["child"])
    answer = durable.interrupt(M["question"])
    return f"{M['output']} {c[:4]} {len(ref.read())} {got} {kid} {answer}"


@durable.workflow
async def failing(x: str) -> str:
    raise durable.NonRetryableError(f"{M['run_error']} {x[:4]}")


@durable.tool(retry=durable.RetryPolicy(max_attempts=1))
async def refund(order: str, result: str) -> str:
    raise durable.NonRetryableError(f"{M['blocked_error']} the bank is down")


@durable.tool(compensate=refund)
async def charge(order: str) -> str:
    return f"ch-{order}"


@durable.workflow
async def blocked(order: str) -> str:
    await charge(order)
    raise durable.NonRetryableError("no courier")


@durable.workflow
async def parked(x: str) -> str:
    return x


@durable.workflow
async def snapshotted(x: str) -> str:
    return await summarise(f"{x} {M['snapshot']}")


@durable.workflow
async def cycle(x: str) -> str:
    return f"{x} {M['outer_loop']}"


@durable.workflow
async def waiting(x: str) -> str:
    answer = durable.interrupt(f"{x} {M['waiting']}")
    return f"{x} then {answer}"


WORKFLOWS = [audited, child, failing, blocked, parked, snapshotted, cycle, waiting]


def fill(world: durable.World, *, memory: bool) -> str:
    """Drive every marked value into ``world``; returns the audited run's output."""
    return asyncio.run(_fill(world, memory=memory))


async def _fill(world: durable.World, *, memory: bool) -> str:
    run = durable.start_workflow(audited, M["input"], world=world, run_id="a1", queue="q")
    await durable.send("a1", M["message"], topic="inbox", world=world)
    await durable.send("a1", M["message_waiting"], topic="never", world=world)
    durable.start_workflow(failing, M["input"], world=world, run_id="f1", queue="q")
    durable.start_workflow(blocked, M["input"], world=world, run_id="b1", queue="q")
    durable.start_workflow(parked, M["queued"], world=world, run_id="p1", queue="nobody")
    for n, rid in ((1, "d1"), (2, None)):  # the second start replaces the first's input
        durable.start_workflow(
            parked,
            f"{M['debounced']} {n}",
            world=world,
            run_id=rid,
            queue="nobody",
            debounce_key="k",
            debounce=3600,
        )
    world.schedules.create(Schedule("nightly", parked, every=86400, input=M["schedule"]))
    async with durable.Worker(world, workflows=WORKFLOWS, queues=["q"]):
        with contextlib.suppress(durable.RunInterrupted):  # its drive has ended, and released the run
            await run.result(timeout=60)
        await run.answer(M["answer"])
        out: str = await run.result(timeout=60)
        await until(lambda: _status(world, "b1") == "blocked", what="the blocked run")
        await until(lambda: _status(world, "f1") == "failed", what="the failed run")
        store = world.open_outbox()
        await until(
            lambda: {e.state for e in store.entries(run_id="a1")} == {"delivered", "dead"},
            what="the outbox entries",
        )
    await durable.run_workflow(snapshotted, M["input"], world=world, run_id="s1")
    durable.compact("s1", world=world)
    await durable.run_outer_loop(
        cycle,
        M["input"],
        supervise=lambda c: Done(c.output) if c.number > 1 else Continue(c.output),
        max_cycles=3,
        outer_loop_id="loop1",
        world=world,
    )
    world.threads.write(THREADS, "chat-1", [("item:1", M["thread"].encode())])
    if memory:
        world.memory.configure(durable.lexical_embedder(dim=64))
        await world.memory.put(("notes",), "n1", M["memory_text"], {"tag": M["memory_meta"]})
    with contextlib.suppress(durable.RunInterrupted):  # left waiting: answered by ``goes_on``
        await durable.run_workflow(waiting, "w", world=world, run_id="w1")
    return out


def goes_on(open_world: Callable[[Callable[[], float]], durable.World], *, memory: bool) -> None:
    """``fill``'s world, opened by ``open_world(clock)``, reads whole and its runs go on to their end.

    The finished runs' results, the blocked run's error, the schedule's input,
    the outbox entries and messages, the outer loop's result and the memory
    item read back; the waiting run is answered, the queued run and the
    debounced one (with its last input) are driven to their end.
    """
    asyncio.run(_goes_on(open_world, memory=memory))


async def _goes_on(open_world: Callable[[Callable[[], float]], durable.World], *, memory: bool) -> None:
    now = [time.time()]
    with open_world(lambda: now[0]) as world:
        out = await durable.handle("a1", world=world).result()
        assert out.startswith(M["output"]) and M["answer"] in out
        with pytest.raises(durable.RunBlockedError) as blocked:
            await durable.handle("b1", world=world).result()
        assert M["blocked_error"] in str(blocked.value.cause)
        assert [s.name for s in world.schedules.list()] == ["nightly"]
        assert M["schedule"] in str(schedules_of(world).get("nightly"))
        entries = world.open_outbox().entries(run_id="a1")
        assert sorted(e.state for e in entries) == ["dead", "delivered"]
        assert all(M["outbox_arg"] in e.input for e in entries)
        messages = world.open_messages().messages("a1")
        assert [M["message_waiting"] in m.data for m in messages] == [False, True]
        loop = await durable.run_outer_loop(
            cycle,
            M["input"],
            supervise=lambda c: Done(None),
            max_cycles=3,
            outer_loop_id="loop1",
            world=world,
        )
        assert M["outer_loop"] in str(loop.final_output)
        kept = world.threads.get(THREADS, "chat-1", "item:1")
        assert kept is not None and kept.value == M["thread"].encode()
        if memory:
            world.memory.configure(durable.lexical_embedder(dim=64))
            item = await world.memory.get(("notes",), "n1")
            assert item is not None and item.text == M["memory_text"]
        w1 = durable.handle("w1", world=world)
        await w1.answer("yes", workflows=[waiting])
        assert await w1.result(timeout=60) == "w then yes"
        now[0] += 7200  # the debounced run's start has come
        async with durable.Worker(world, workflows=[parked], queues=["nobody"]):
            assert await durable.handle("p1", world=world).result(timeout=60) == M["queued"]
            assert await durable.handle("d1", world=world).result(timeout=60) == f"{M['debounced']} 2"


def _status(world: durable.World, run_id: str) -> str:
    return run_status(world, run_id).status
