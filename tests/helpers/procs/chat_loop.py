"""A child-process agent loop: each turn a model call reads the whole conversation.

Usage: python -m tests.helpers.procs.chat_loop DATA_DIR RUN_ID TURNS [KILL_AT]

With KILL_AT set, the model call of that turn SIGKILLs its own process
before it answers: the turns before it are in the log, that one is not.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import durable

DATA, RUN_ID, TURNS = sys.argv[1], sys.argv[2], int(sys.argv[3])
KILL_AT = int(sys.argv[4]) if len(sys.argv) > 4 else -1


@durable.model_call(slot="worker", name="chat")
async def chat(messages: list[dict[str, str]], temperature: float = 0.5) -> dict[str, str]:
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"role": "assistant", "content": f"turn {turn}: look up item {turn * 7 % 101}"}


@durable.tool(name="lookup")
async def lookup(item: str) -> str:
    return f"item {item} is in stock"


@durable.workflow(name="chat-loop")
async def loop(turns: int) -> int:
    messages = [{"role": "user", "content": "keep checking the stock"}]
    async with durable.session("worker", tools=[lookup]):
        for _ in range(turns):
            reply = await chat(messages)
            messages.append(reply)
            messages.append({"role": "tool", "content": await lookup(reply["content"].rsplit(" ", 1)[1])})
    return len(messages)


if __name__ == "__main__":
    with durable.local_world(DATA) as world:
        print(asyncio.run(durable.run_workflow(loop, TURNS, world=world, run_id=RUN_ID)))
