"""Fork an agent run with another model mapping, without paying again for its research, and compare.

An agent researches a question (a costly ``researcher`` model call per
source), drafts an answer with the ``writer`` model, and reviews it. The
first run maps ``writer`` to a small model. This script lists the run's
checkpoints, forks the run right after the research step with ``writer``
mapped to a bigger model, and runs the fork: the research comes from the
parent's log (no researcher call is made again) and only the draft and the
review run, with the new model. A call ledger proves it. Last, it compares
the two runs call by call with ``little diff``: the research is the same,
the draft changed, and the review, whose verdict is the same, was called
with another input (the new draft): the log records each call's input, so
the comparison says which argument differs and how.

Run it:

    python cookbook/fork_models.py

The same from the shell, given the data directory it prints:

    little checkpoints run_agent --data-dir DIR
    little fork run_agent research --model writer=big-writer --data-dir DIR
    little diff run_agent run_agent_big_writer --data-dir DIR

and side by side in the browser: ``little ui --data-dir DIR``, then the
fork's page links to its comparison with ``run_agent``
(``/compare?a=run_agent&b=run_agent_big_writer``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from collections import Counter

import durable

ledger: Counter[str] = Counter()
"""How often each model really answered (a replayed call does not count)."""


def fake_model(model: str, prompt: str) -> str:
    """Stands in for a model API: offline and deterministic."""
    ledger[model] += 1
    return f"[{model}] {prompt[:60]}"


@durable.model_call(slot="researcher")
async def read_source(source: str) -> str:
    return fake_model(durable.model_for("researcher"), f"notes from {source}")


@durable.model_call(slot="writer")
async def draft(question: str, notes: list[str]) -> str:
    return fake_model(durable.model_for("writer"), f"answer to {question!r} from {len(notes)} notes")


@durable.step
async def research(question: str) -> list[str]:
    return [await read_source(s) for s in ("paper-1", "paper-2", "paper-3")]


@durable.step
async def write(question: str, notes: list[str]) -> str:
    return await draft(question, notes)


@durable.step
async def review(answer: str) -> str:
    return "approved" if answer else "rejected"


@durable.workflow
async def agent(question: str) -> dict[str, str]:
    notes = await research(question)
    answer = await write(question, notes)
    return {"answer": answer, "review": await review(answer)}


QUESTION = "why do owls hoot at night?"
SMALL = {"researcher": "research-model", "writer": "small-writer"}


async def main() -> str:
    data_dir = tempfile.mkdtemp(prefix="fork-models-")
    with durable.local_world(data_dir) as world:
        first = await durable.run_workflow(agent, QUESTION, world=world, run_id="run_agent", models=SMALL)
        print(f"first run answered: {first['answer']}")
        print(f"model calls so far: {dict(ledger)}")

        print("\ncheckpoints of run_agent (one per committed step):")
        for cp in durable.checkpoints("run_agent", world=world):
            print(f"  seq {cp.seq:>3}  {cp.path}")

        fork = durable.fork(
            "run_agent",
            "research",
            world=world,
            new_run_id="run_agent_big_writer",
            models={**SMALL, "writer": "big-writer"},
        )
        print(f"\nforked {fork.run_id} at checkpoint {fork.checkpoint.seq} ({fork.checkpoint.path})")
        print(f"it inherits: {', '.join(fork.reused)}")

        ledger.clear()
        second = await durable.run_workflow(
            agent, fork.input, world=world, run_id=fork.run_id, models=fork.models
        )
        print(f"\nthe fork answered: {second['answer']}")
        print(f"model calls made by the fork: {dict(ledger)}")

        assert ledger == Counter({"big-writer": 1}), ledger
        assert second["answer"].startswith("[big-writer]")
        started = world.events(fork.run_id)[0]
        assert started.type == "run.started"
        assert started.fork_of == "run_agent"
        print(
            "\nThe research was not paid for again: the fork reused the parent's three researcher "
            "calls and called only the new writer model."
        )

    return data_dir


def compare(data_dir: str, run_a: str, run_b: str) -> None:
    """Compare two runs call by call, as `little diff` prints them (``--json``: one object a path)."""
    command = [sys.executable, "-m", "durable.cli", "diff", run_a, run_b, "--data-dir", data_dir, "--json"]
    rows = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    print(f"\nlittle diff {run_a} {run_b}:")
    for row in rows:
        print(f"  {row['status']:<8} {row['path']}")
    status = {row["path"]: row["status"] for row in rows}
    assert status["research"] == "same"
    assert status["research.model:read_source#0"] == "same"
    assert status["write"] == "changed"
    assert status["write.model:draft#0"] == "changed"
    draft = next(row for row in rows if row["path"] == "write.model:draft#0")
    print(f"\n  the draft before: {draft['a']['output']}")
    print(f"  the draft after:  {draft['b']['output']}")
    inputs = {row["path"]: row["b"]["input_change"] for row in rows if row["a"] and row["b"]}
    print("\ninputs that differ (each side's input is in row['a']['input'] and row['b']['input']):")
    for path, change in inputs.items():
        for line in change["changes"]:
            print(f"  {path}: {line}")
    assert inputs["write"]["status"] == "same"  # the same question and the inherited notes
    assert status["review"] == "same"  # the same verdict...
    assert inputs["review"]["status"] == "changed"  # ...on another draft
    assert inputs["review"]["changes"][0].startswith('answer: "[small-writer]')
    print(f"\ndata directory: {data_dir}")
    print(f"see them side by side: little ui --data-dir {data_dir}, then open the fork's page")


if __name__ == "__main__":
    compare(asyncio.run(main()), "run_agent", "run_agent_big_writer")
