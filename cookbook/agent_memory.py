"""An agent that remembers across runs, through the world's memory store.

Two runs of the same little agent, each a separate ``run_workflow`` call on a
separate ``local_world`` over one data directory (as two processes, days
apart, would be):

1. In the first conversation the user mentions a few things about
   themselves. The agent's "model" picks out the facts and the agent stores
   each one in memory under ``("users", "ada", "facts")``, with metadata.
2. In the second conversation, a new run, the user asks questions. The agent
   searches its memory (once with a metadata filter), and answers from what
   it finds.

The model is a stand-in (a ``@model_call`` with fixed rules), so the recipe
runs offline. The embedder is ``durable.lexical_embedder``: it matches shared
words, not meaning; give the store a real embedding model for semantic
recall. Inside a run every memory write is an effect (intent, then receipt)
and every search is recorded, so resuming a run replays what it saw.

Run it:

    python cookbook/agent_memory.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import durable

USER = ("users", "ada", "facts")


@durable.model_call(slot="assistant")
async def extract_facts(message: str) -> list[dict[str, str]]:
    """Stand-in model: every sentence about "I" or "my" is a fact worth keeping."""
    facts = []
    for sentence in message.split("."):
        text = sentence.strip()
        if text.lower().startswith(("i ", "my ")):
            kind = "preference" if " like" in text or "drink" in text else "possession"
            facts.append({"text": text, "kind": kind})
    return facts


@durable.model_call(slot="assistant")
async def answer(question: str, recalled: list[str]) -> str:
    """Stand-in model: answer from the best memory, or admit not knowing."""
    if not recalled:
        return "I don't know yet."
    return f"You told me: {recalled[0]}."


def build_agent(memory: durable.MemoryStore) -> tuple[object, object]:
    """The agent's two workflows, bound to one memory store."""

    @durable.workflow
    async def learn(message: str) -> int:
        facts = await extract_facts(message)
        for i, fact in enumerate(facts):
            await memory.put(USER, f"fact-{i}", fact["text"], {"kind": fact["kind"]})
        return len(facts)

    @durable.workflow
    async def ask(question: str) -> str:
        kind = "preference" if "like" in question or "drink" in question else None
        hits = await memory.search(USER, question, k=1, filter={"kind": kind} if kind else None)
        if hits:
            print(f"    memory hit: {hits[0].text!r} (distance {hits[0].distance:.2f})")
        return await answer(question, [h.text for h in hits])

    return learn, ask


def first_conversation(data_dir: Path) -> None:
    with durable.local_world(data_dir) as world:
        memory = world.memory.configure(durable.lexical_embedder(dim=256))
        learn, _ = build_agent(memory)
        message = "Hello. I drink green tea every morning. My bike is red. The weather is nice."
        print(f"Run 1, the user says: {message!r}")
        stored = asyncio.run(
            durable.run_workflow(
                learn, message, world=world, run_id="conversation-1", models={"assistant": "rules"}
            )
        )
        print(f"  the agent stored {stored} facts in memory {USER}:")
        for ns in asyncio.run(memory.namespaces(("users",))):
            print(f"    {ns}: {asyncio.run(memory.count(ns))} items")


def second_conversation(data_dir: Path) -> None:
    with durable.local_world(data_dir) as world:
        memory = world.memory.configure(durable.lexical_embedder(dim=256))
        _, ask = build_agent(memory)
        print("Run 2, a new run in a fresh world over the same data directory:")
        for i, question in enumerate(["What do I drink in the morning?", "What colour is my bike?"]):
            print(f"  the user asks: {question!r}")
            reply = asyncio.run(
                durable.run_workflow(
                    ask, question, world=world, run_id=f"conversation-2-{i}", models={"assistant": "rules"}
                )
            )
            print(f"  the agent answers: {reply!r}")
        events = [
            e.type + (f" {e.name}" if hasattr(e, "name") else "") for e in world.events("conversation-2-0")
        ]
        print("  the first question's log: " + ", ".join(events))


def main() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="agent-memory-"))
    first_conversation(data_dir)
    second_conversation(data_dir)
    print(
        f"The memory lives in {data_dir / 'memory'}; the lexical embedder matched shared words, not meaning."
    )


if __name__ == "__main__":
    main()
