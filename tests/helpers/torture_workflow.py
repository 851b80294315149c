"""The workflow that ``test_torture.py`` kills, and the process server that runs it.

Run ``python tests/helpers/torture_workflow.py`` and write one JSON line per life to
its stdin: ``[data_dir, effects_file, life, run_id, result_file, kill_after]``.
The server (which imported everything once) forks a new process for the
life, SIGKILLs it after ``kill_after`` seconds when it is still running
(``null``: never), reaps it, and answers ``ended <exit code>`` (``-9`` for a
kill). Being the parent, the server can kill and reap without any race on
process ids.

Every side effect appends one line ``LIFE KIND KEY`` to the effects file
(opened with ``O_APPEND``, each line fsynced), so the counts survive SIGKILL.
The file also plays the external system: the reconcilable tool's effect is
its line, and ``reconcile`` looks for it there. When the run ends, the life
writes the result file (the output, or the key of an unknown commit).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

import durable
from durable.engine._keys import step_path

DATA_DIR = EFFECTS = LIFE = RUN_ID = RESULT = ""
ITEMS = 4
LOOP_VISITS = 6


def note(kind: str, key: str) -> None:
    """Append one side-effect line and make it durable before going on."""
    fd = os.open(EFFECTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{LIFE} {kind} {key}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def effect_lines() -> list[list[str]]:
    try:
        text = Path(EFFECTS).read_text()
    except FileNotFoundError:
        return []
    return [line.split(" ") for line in text.splitlines() if line]


def own_key() -> str:
    return durable.idempotency_key().split(":", 1)[1]


@durable.step
async def plan(n: int) -> list[int]:
    note("step", "plan")
    await asyncio.sleep(0.002)
    return list(range(n))


@durable.tool(idempotent=True)
async def charge(i: int) -> int:
    note("idem", own_key())
    await asyncio.sleep(0.004)
    return i * 7


@durable.tool(idempotent=True, retry=durable.RetryPolicy(max_attempts=3, backoff=0.01))
async def flaky(i: int) -> int:
    key = own_key()
    if not any(parts[1] == "flakyfail" and parts[2] == key for parts in effect_lines()):
        note("flakyfail", key)
        raise ConnectionError("the first call of each key fails")
    note("idem", key)
    return i + 100


def reconcile_ship(key: str, inp: dict[str, Any]) -> Any:
    """Ask the external system (the effects file) whether the shipment happened."""
    own = key.split(":", 1)[1]
    for parts in effect_lines():
        if parts[1] == "recon" and parts[2] == own:
            return f"shipped-{inp['i']}"
    return durable.NEVER_HAPPENED


@durable.tool(reconcile=reconcile_ship)
async def ship(i: int) -> str:
    await asyncio.sleep(0.002)
    note("recon", own_key())  # the external effect itself: one line, or nothing
    return f"shipped-{i}"


@durable.model_call(slot="writer")
async def describe(i: int, charged: int) -> str:
    note("model", own_key())
    await asyncio.sleep(0.003)
    return f"item {i} charged {charged}"


@durable.step
async def worker(i: int) -> dict[str, Any]:
    note("step", f"work[{i}].worker")
    charged = await charge(i)
    bonus = await flaky(i)
    shipped = await ship(i)
    text = await describe(i, charged)
    return {"i": i, "charged": charged, "bonus": bonus, "shipped": shipped, "text": text}


@durable.model_call(slot="judge")
async def judge(state: int) -> str:
    note("model", own_key())
    await asyncio.sleep(0.003)
    return "done" if state >= 3 else "again"


@durable.step(max_visits=LOOP_VISITS)
async def refine(state: int) -> dict[str, Any]:
    note("step", step_path("", "refine", state, True))
    verdict = await judge(state)
    return {"state": state + 1, "verdict": verdict}


@durable.tool
def notify(message: str) -> str:
    note("plain", own_key())
    return f"sent {message}"


@durable.step
async def finish(results: list[dict[str, Any]], state: int) -> str:
    note("step", "finish")
    return f"{sum(r['charged'] + r['bonus'] for r in results)}/{state}"


@durable.workflow(name="torture")
async def torture(n: int) -> dict[str, Any]:
    items = await plan(n)
    results = await durable.parallel("work", items, worker, key=str, limit=2)
    await durable.sleep(0.05)
    state = 0
    for _ in range(LOOP_VISITS):
        step = await refine(state)
        state = step["state"]
        if step["verdict"] == "done":
            break
    summary = await finish(results, state)
    sent = notify(summary)
    return {"results": results, "loop": state, "summary": summary, "sent": sent}


async def main() -> dict[str, Any]:
    world = durable.local_world(DATA_DIR)
    try:
        out = await durable.run_workflow(
            torture, ITEMS, world=world, run_id=RUN_ID, models={"writer": "w-1", "judge": "j-1"}
        )
        return {"output": out}
    except durable.UnknownCommitError as exc:
        return {"unknown_commit": exc.key}
    finally:
        world.close()


def live(args: list[str]) -> NoReturn:
    """One life, in a freshly forked process: run or resume, write the result, exit."""
    global DATA_DIR, EFFECTS, LIFE, RUN_ID, RESULT
    DATA_DIR, EFFECTS, LIFE, RUN_ID, RESULT = args
    code = 1
    try:
        result = asyncio.run(main())
        tmp = RESULT + ".tmp"
        Path(tmp).write_text(json.dumps(result))
        os.replace(tmp, RESULT)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """Fork one life per request line; kill it at its deadline; report how it ended."""
    for line in sys.stdin:
        *args, kill_after = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            live([str(a) for a in args])
        deadline = None if kill_after is None else time.monotonic() + float(kill_after)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.0005)
        print(f"ended {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    serve()
