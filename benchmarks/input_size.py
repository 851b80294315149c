"""What recording call inputs costs an agent loop: the store's size at 100, 200 and 500 turns.

Run from the repository root: ``python benchmarks/input_size.py [TURNS ...]``
(default 100 200 500). Each turn of the loop is one model call that reads
the whole conversation, then one tool call; both answers join the
conversation (the loop of ``tests/engine/test_conversation.py``). Each size
runs in a fresh SQLite data directory; the script prints the stored event
payload bytes, the bytes of the artifact folder, the file size of the log
after a vacuum, and the bytes per turn, for two ways of storing the model
call's input:

- ``delta``: what the SDK does, each long input stored as the messages it
  appends to the previous call's;
- ``whole``: every long input stored whole as an artifact (deltas switched
  off), the design that grows with the square of the turns.

Run against an SDK from before inputs were recorded (log format 7), the
script prints one mode, ``hash``: the log keeps each input's hash only.
Linear growth shows as a constant ``bytes/turn`` column.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import durable

try:
    from durable.engine import _call_inputs
except ImportError:  # an SDK from before inputs were recorded: its log keeps their hashes only
    _call_inputs = None  # type: ignore[assignment]


@durable.model_call(slot="worker", name="chat")
async def chat(messages: list[dict[str, str]]) -> dict[str, str]:
    turn = sum(1 for m in messages if m["role"] == "assistant")
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


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def measure(turns: int) -> tuple[int, int, int]:
    """The event payload bytes, artifact bytes and log file bytes of one run of ``turns`` turns."""
    with tempfile.TemporaryDirectory() as tmp:
        with durable.local_world(tmp) as world:
            asyncio.run(durable.run_workflow(loop, turns, world=world, run_id="chat"))
            payload = sum(len(d) for _, _, d in world.log.read("chat"))
            world.vacuum()
        return payload, _folder_bytes(Path(tmp) / "artifacts"), (Path(tmp) / "events.db").stat().st_size


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 200, 500]
    head = ("mode", 6), ("turns", 7), ("payload bytes", 15), ("artifact bytes", 16), ("file bytes", 12)
    print("".join(f"{name:>{width}}" for name, width in head) + f"{'bytes/turn':>12}")
    if _call_inputs is None:
        _rows("hash", sizes)
        return
    delta = _call_inputs._delta
    try:
        _rows("delta", sizes)
        _call_inputs._delta = lambda *_: None  # type: ignore[assignment]
        _rows("whole", sizes)
    finally:
        _call_inputs._delta = delta


def _rows(mode: str, sizes: list[int]) -> None:
    for turns in sizes:
        payload, artifacts, file = measure(turns)
        per_turn = (payload + artifacts) / turns
        print(f"{mode:>6}{turns:>7}{payload:>15}{artifacts:>16}{file:>12}{per_turn:>12.0f}")


if __name__ == "__main__":
    main()
