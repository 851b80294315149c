"""durable: the workflows every scenario runs, with the engine as shipped."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from typing import Any

import durable

RUN_ID = "bench_run"
STEPS = 10**7  # max_visits: one step name called many times in one scope

_kill_at: int | None = None


@durable.step(max_visits=STEPS)
async def trivial(i: int) -> int:
    return i


@durable.tool
async def echo(i: int) -> int:
    return i


@durable.step(max_visits=STEPS)
async def with_tool(i: int) -> int:
    return await echo(i)


@durable.step
async def branch_step(i: int) -> int:
    return i


@durable.workflow
async def sequential(n: int) -> int:
    for i in range(n):
        if i == _kill_at:
            os._exit(0)  # the crash: steps before i are committed, nothing after
        await trivial(i)
    if n == _kill_at:
        os._exit(0)
    return n


@durable.workflow
async def sequential_tools(n: int) -> int:
    for i in range(n):
        await with_tool(i)
    return n


@durable.workflow
async def fan_out(n: int) -> int:
    out = await durable.parallel("b", range(n), branch_step, key=str)
    return len(out)


@durable.workflow
async def one_step(i: int) -> int:
    return await branch_step(i)


async def _plain_trivial(i: int) -> int:
    return i


async def _plain_sequential(n: int) -> int:
    for i in range(n):
        await _plain_trivial(i)
    return n


def _db_bytes(dir: str) -> int:
    path = os.path.join(dir, "events.db")
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return os.path.getsize(path)


def seq(dir: str, n: int, durability: str, tool: bool = False, codec: bool = False) -> dict[str, Any]:
    wf = sequential_tools if tool else sequential
    with durable.local_world(dir, durability=durability, codec=_codec(codec)) as world:  # type: ignore[arg-type]
        asyncio.run(durable.run_workflow(wf, 3, world=world, run_id="warm"))
        empty = _db_bytes(dir)
        c0, t0 = time.process_time(), time.perf_counter()
        asyncio.run(durable.run_workflow(wf, n, world=world, run_id=RUN_ID))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "per_us": seconds / max(n, 1) * 1e6,
        "cpu_us": cpu / max(n, 1) * 1e6,
        "bytes_per_step": (_db_bytes(dir) - empty) / n,
    }


def _codec(on: bool) -> durable.EncryptionCodec | None:
    return durable.EncryptionCodec(bytes(range(32))) if on else None


def build(
    dir: str, n: int, kill_at: int | None = None, others: int = 0, codec: bool = False
) -> dict[str, Any]:
    global _kill_at
    with durable.local_world(dir, codec=_codec(codec)) as world:

        async def main() -> None:
            for k in range(others):
                await durable.run_workflow(one_step, k, world=world, run_id=f"other_{k:06d}")
            await durable.run_workflow(sequential, n, world=world, run_id=RUN_ID)

        _kill_at = kill_at
        asyncio.run(main())
    return {}


def resume(dir: str, n: int, codec: bool = False) -> dict[str, Any]:
    import resource

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with durable.local_world(dir, codec=_codec(codec)) as world:
        c0, t0 = time.process_time(), time.perf_counter()
        out = asyncio.run(durable.run_workflow(sequential, n, world=world, run_id=RUN_ID))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert out == n
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    asyncio.run(_plain_sequential(n))
    plain = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "per_us": seconds / max(n, 1) * 1e6,
        "cpu_us": cpu / max(n, 1) * 1e6,
        "plain_per_us": plain / max(n, 1) * 1e6,
        "peak_mb": peak / 1024,
        "base_mb": base / 1024,
    }


def fanout(dir: str, n: int, durability: str) -> dict[str, Any]:
    with durable.local_world(dir, durability=durability) as world:  # type: ignore[arg-type]
        asyncio.run(durable.run_workflow(fan_out, 3, world=world, run_id="warm"))
        t0 = time.perf_counter()
        out = asyncio.run(durable.run_workflow(fan_out, n, world=world, run_id=RUN_ID))
        seconds = time.perf_counter() - t0
        rows = len(world.log.read(RUN_ID))
    assert out == n
    return {"seconds": seconds, "per_us": seconds / max(n, 1) * 1e6, "events": rows}


def outside(n: int) -> dict[str, Any]:
    def plain(x: int) -> int:
        return x

    decorated = durable.step(plain)

    async def aplain(x: int) -> int:
        return x

    adecorated = durable.step(aplain)

    def loop(f: Any) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            f(i)
        return time.perf_counter() - t0

    async def aloop(f: Any) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            await f(i)
        return time.perf_counter() - t0

    # Interleave and keep the best of several passes: the figure is a difference
    # of two small numbers, and the best pass is the least disturbed one.
    p, d, ap, ad = [], [], [], []
    for _ in range(5):
        p.append(loop(plain))
        d.append(loop(decorated))
        ap.append(asyncio.run(aloop(aplain)))
        ad.append(asyncio.run(aloop(adecorated)))
    return {
        "plain_ns": min(p) / n * 1e9,
        "decorated_ns": min(d) / n * 1e9,
        "per_us": (min(d) - min(p)) / n * 1e6,
        "async_plain_ns": min(ap) / n * 1e9,
        "async_decorated_ns": min(ad) / n * 1e9,
        "async_per_us": (min(ad) - min(ap)) / n * 1e6,
    }
