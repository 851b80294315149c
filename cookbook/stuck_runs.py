"""Stuck runs: provoke each kind of blocked run, find it with doctor, and unblock it.

A run under the runtime either ends (``completed``, ``failed``,
``cancelled``) or is ``blocked``: it waits for a person's decision, with a
reason, the error, and the exact commands that unblock it. This recipe
makes one run of each kind and resolves it:

1. ``unknown_commit``: a process dies inside a plain tool (a payment). Nobody
   knows whether it happened, so the recovered run blocks. One is resolved
   as "it happened, here is the receipt", the other as "it did not happen,
   call it again" (from the shell, with ``little resolve``).
2. ``nondeterminism``: the code changes under a waiting run, so the answered
   run no longer matches its log. Put back, ``resume_run`` completes it.
3. ``recovery_exhausted``: a poison run kills its process on every drive.
   After ``max_recovery_attempts`` recoveries it is blocked instead of
   driven again; ``little doctor`` lists it, and a cancel ends it.

The processes that die are children of this one (``python stuck_runs.py
die ...``); everything else happens here.

Run it:

    python cookbook/stuck_runs.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import durable
from durable.cli import main as little

CODE = {"shape": "left"}  # stands for the code of a deploy: "right" is the changed one


@durable.tool
async def pay(cents: int) -> str:
    if os.environ.get("DIE_IN_PAY"):
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-call: did the payment happen?
    return f"paid {cents / 100:.2f} EUR"


@durable.workflow
async def checkout(cents: int) -> str:
    receipt = await pay(cents)
    return f"order confirmed, {receipt}"


@durable.step
async def left(x: int) -> int:
    return x


@durable.step
async def right(x: int) -> int:
    return x


@durable.workflow
async def review(x: int) -> str:
    first = await (left(x) if CODE["shape"] == "left" else right(x))
    answer = durable.interrupt("approve?")
    return f"reviewed {first}: {answer}"


@durable.workflow(max_recovery_attempts=1)
async def poison(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)  # durable: ignore[environment]  (a crash on every drive)
    return x


def die(data: Path, what: str, run_id: str) -> None:
    """In a child process: start (or recover) a run that kills this process."""

    async def go() -> None:
        world = durable.local_world(data)
        if what == "checkout":
            await durable.run_workflow(checkout, 1250, world=world, run_id=run_id)
        elif what == "poison-recover":
            while not await durable.recover_runs(world, [poison]):  # noqa: ASYNC110  (its second drive, once due)
                await asyncio.sleep(0.05)
        else:
            durable.start_workflow(poison, 1, world=world, run_id=run_id)
        await asyncio.sleep(30)  # the drive kills this process long before

    asyncio.run(go())


def child(data: Path, what: str, run_id: str, **env: str) -> None:
    subprocess.run(
        [sys.executable, __file__, "die", str(data), what, run_id],
        env={**os.environ, **env},
        check=False,
    )


async def blocked(world: durable.World, run_id: str) -> durable.RunStatus:
    """Wait until the run is blocked (its result() raises RunBlockedError); its status and fixes."""
    h = durable.handle(run_id, world=world)
    with contextlib.suppress(durable.RunBlockedError):
        await h.result(timeout=30)
    return await h.status_detail()


async def main() -> None:
    data = Path(tempfile.mkdtemp()) / "data"
    world = durable.local_world(data)

    # 1. unknown_commit: two checkouts whose process died inside pay().
    for rid in ("order-1", "order-2"):
        child(data, "checkout", rid, DIE_IN_PAY="1")
    await durable.recover_runs(world, [checkout])  # recovery finds the cut calls
    one = await blocked(world, "order-1")
    await blocked(world, "order-2")
    print(f"order-1 is {one.status} ({one.reason}); unblock it with:")
    for fix in one.fixes:
        print("   ", fix)
    key = one.error["key"] if one.error else ""
    h = durable.handle("order-1", world=world)
    try:
        await h.result(timeout=1)
    except durable.RunBlockedError as exc:
        print(f"result() raises RunBlockedError: reason {exc.reason}, cause {type(exc.cause).__name__}")
    # The payment provider shows the charge for idempotency key order-1:<key>: it happened.
    await h.resolve(key, happened=True, result="paid 12.50 EUR (found at the provider)")
    print("order-1:", await h.result(timeout=10))
    # No charge for order-2: it did not happen, so the call runs again (same key), from the shell.
    shell = ["resolve", "order-2", key, "--not-happened", "--data-dir", str(data)]
    assert await asyncio.to_thread(little, shell) == 0  # the shell is another program: not this loop
    await durable.recover_runs(world, [checkout])  # a worker that knows the workflow drives it
    print("order-2:", await durable.handle("order-2", world=world).result(timeout=10))

    # 2. nondeterminism: the code changes while a run waits for an answer.
    async with durable.Worker(world, workflows=[review], queues=["reviews"]):
        r = durable.start_workflow(review, 7, world=world, run_id="review-1", queue="reviews")
        with contextlib.suppress(durable.RunInterrupted):
            await r.result(timeout=30)  # it waits for the answer
        CODE["shape"] = "right"  # a deploy that calls another step first
        await r.answer("yes")
        st = await blocked(world, "review-1")
        print(f"review-1 is {st.status} ({st.reason}): {st.error and st.error['error_type']}")
        CODE["shape"] = "left"  # the deploy is rolled back
        await durable.resume_run("review-1", world=world)
        print("review-1:", await r.result(timeout=10))

    # 3. recovery_exhausted: a run that kills its process on every drive.
    child(data, "poison-start", "poison-1")  # its first drive
    child(data, "poison-recover", "poison-1")  # its one recovery (max_recovery_attempts=1)
    while durable.runtime.run_status(world, "poison-1").status != "blocked":
        await durable.recover_runs(world, [poison])  # one more would be too many: blocked, not driven
        await asyncio.sleep(0.05)
    st = await blocked(world, "poison-1")
    print(f"poison-1 is {st.status} ({st.reason})")
    print("little doctor:")
    doctor = ["doctor", "--data-dir", str(data)]
    assert await asyncio.to_thread(little, doctor) == 1  # exit 1: something is stuck
    await durable.handle("poison-1", world=world).cancel()
    assert await asyncio.to_thread(little, doctor) == 0
    decided = [
        e for rid in ("order-1", "order-2", "review-1") for e in world.events(rid) if e.type == "run.resolved"
    ]
    print("decisions recorded:", [(e.run_id, e.decision, e.by) for e in decided])  # type: ignore[union-attr]
    world.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["die"]:
        die(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        asyncio.run(main())
