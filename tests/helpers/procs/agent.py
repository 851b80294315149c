"""A child-process agent for crash tests: an orchestrator loop over a scripted model.

Usage: python -m tests.helpers.procs.agent DATA_DIR RUN_ID [STOP_AT]

The orchestrator session runs four model turns: a lookup, a batch of two
parallel fetches keyed by tool_call_id, a streamed turn that starts the
``scoring`` child workflow, and a final answer. Every model, tool and child
body appends its name to ``DATA_DIR/bodies.log`` (fsynced), so the parent
can count how often each really ran across kills. When the point named
``STOP_AT`` is reached for the first time, the process prints
``STOPPED <name>`` and waits forever, for the parent to SIGKILL it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import durable

DATA = Path(sys.argv[1])
RUN_ID = sys.argv[2]
STOP_AT = sys.argv[3] if len(sys.argv) > 3 else ""

SCRIPT: list[dict[str, Any]] = [
    {"content": "", "tool_calls": [{"id": "call_0", "name": "lookup", "args": {"q": "ada"}}]},
    {
        "content": "",
        "tool_calls": [
            {"id": "call_1a", "name": "fetch", "args": {"url": "cv/ada"}},
            {"id": "call_1b", "name": "fetch", "args": {"url": "refs/ada"}},
        ],
    },
    {"content": "", "tool_calls": [{"id": "call_2", "name": "start_workflow", "args": {"cid": "ada"}}]},
    {"content": "hire ada", "tool_calls": []},
]
FINAL = "hire ada"


def seen() -> list[str]:
    log = DATA / "bodies.log"
    return log.read_text().split() if log.exists() else []


async def point(name: str) -> None:
    """A place the parent may stop the process at; earlier writes are made durable first."""
    if name == STOP_AT and f"stopped:{name}" not in seen():
        for _ in range(3):  # event-loop turns (no time passes) so buffered outcomes are written
            await asyncio.sleep(0)
        body(f"stopped:{name}")
        print(f"STOPPED {name}", flush=True)
        await asyncio.Event().wait()


def body(name: str) -> None:
    with open(DATA / "bodies.log", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


def turn_of(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


@durable.model_call(slot="orchestrator")
async def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    turn = turn_of(messages)
    body(f"model-{turn}")
    await point(f"model-{turn}")
    return SCRIPT[turn]


@durable.model_call(slot="orchestrator")
async def chat_stream(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
    turn = turn_of(messages)
    body(f"stream-{turn}")
    text = json.dumps(SCRIPT[turn])
    for i in range(0, len(text), 2):
        if i == 80:
            await point(f"stream-{turn}")
        await asyncio.sleep(0)
        yield text[i : i + 2]


@durable.tool(idempotent=True)
async def lookup(q: str) -> str:
    body(f"lookup-{q}")
    await point(f"lookup-{q}")
    return f"{q}: senior engineer"


FETCHED: dict[str, asyncio.Event] = {}


@durable.tool(idempotent=True)
async def fetch(url: str) -> str:
    name = "fetch-" + url.replace("/", "_")
    body(name)
    if url == "refs/ada" and STOP_AT:  # first run: the second call finishes after the first
        await FETCHED.setdefault("cv/ada", asyncio.Event()).wait()
    await point(name)
    FETCHED.setdefault(url, asyncio.Event()).set()
    return f"contents of {url}"


@durable.tool(idempotent=True)
async def score_part(part: str) -> int:
    body(f"child-{part}")
    await point(f"child-{part}")
    return len(part)


@durable.workflow
async def scoring(cid: str) -> int:
    total = 0
    for part in ("skills", "references"):
        total += await score_part(f"{cid}-{part}")
    return total


async def run_tool(call: dict[str, Any]) -> str:
    async with durable.branch(call["id"]):
        if call["name"] == "lookup":
            return await lookup(**call["args"])
        if call["name"] == "fetch":
            return await fetch(**call["args"])
        return f"score {await scoring(call['args']['cid'])}"


@durable.workflow
async def hiring(goal: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": goal}]
    async with durable.session("orchestrator", tools=[lookup, fetch], workflows=[scoring]):
        while True:
            if turn_of(messages) == 2:
                reply = json.loads("".join([c async for c in chat_stream(messages)]))
            else:
                reply = await chat(messages)
            messages.append({"role": "assistant", **reply})
            await point(f"between-{turn_of(messages) - 1}")
            if not reply["tool_calls"]:
                return str(reply["content"])
            results = await asyncio.gather(*(run_tool(c) for c in reply["tool_calls"]))
            for call, result in zip(reply["tool_calls"], results, strict=True):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


async def main() -> None:
    with durable.local_world(DATA) as world:
        out = await durable.run_workflow(
            hiring, "hire a staff engineer", world=world, run_id=RUN_ID, models={"orchestrator": "m-1"}
        )
    print(json.dumps({"output": out}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
