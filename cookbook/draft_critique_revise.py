"""Draft, critique, revise: a decision loop with a cap on revisions.

A writer drafts; a critic (the decision step) reads the draft and answers
"accept" or "revise" with a note; a reviser applies the note. ``critique`` and
``revise`` are steps with ``max_visits``, so each round is its own durable
unit with its own path, ``critique.visit[k]`` and ``revise.visit[k]``: a
committed round never changes, and a resume replays the critic's verdicts
from the log instead of asking again, so the loop takes the same route.
The loop stops when the critic accepts or after ``MAX_REVISIONS`` revisions.

The "models" are small offline functions, so the recipe runs anywhere.

Run it:

    python cookbook/draft_critique_revise.py

It runs the loop twice: once with a critic that is satisfied after two
revisions, once with one that never is (the cap ends the loop). Then it calls
the first run again with the same run id and shows that nothing is called
again: every visit comes back from the log.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

import durable

MAX_REVISIONS = 3
NEEDED = ("a title", "an example", "a summary")

model_calls: Counter[str] = Counter()


class Task(BaseModel):
    topic: str
    strict: bool = False  # a strict critic is never satisfied


class Critique(BaseModel):
    verdict: str  # "accept" or "revise"
    note: str = ""


class Outcome(BaseModel):
    draft: str
    accepted: bool
    revisions: int


@durable.model_call(slot="writer")
async def write_draft(topic: str) -> str:
    model_calls["write_draft"] += 1
    return f"{topic}: a title."


@durable.model_call(slot="critic")
async def judge(draft: str, strict: bool) -> Critique:
    model_calls["judge"] += 1
    missing = [part for part in NEEDED if part not in draft]
    if strict:
        missing.append("more polish")
    if not missing:
        return Critique(verdict="accept")
    return Critique(verdict="revise", note=f"add {missing[0]}")


@durable.model_call(slot="writer")
async def rewrite(draft: str, note: str) -> str:
    model_calls["rewrite"] += 1
    return f"{draft} Now with {note.removeprefix('add ')}."


@durable.step
async def draft(task: Task) -> str:
    return await write_draft(task.topic)


@durable.step(max_visits=MAX_REVISIONS + 1)
async def critique(text: str, strict: bool) -> Critique:
    """The decision step: its committed verdict decides the route on every replay."""
    return await judge(text, strict)


@durable.step(max_visits=MAX_REVISIONS)
async def revise(text: str, note: str) -> str:
    return await rewrite(text, note)


@durable.workflow
async def draft_loop(task: Task) -> Outcome:
    text = await draft(task)
    for revisions in range(MAX_REVISIONS + 1):
        verdict = await critique(text, task.strict)
        if verdict.verdict == "accept":
            return Outcome(draft=text, accepted=True, revisions=revisions)
        if revisions == MAX_REVISIONS:
            break  # the cap: no fourth revision
        text = await revise(text, verdict.note)
    return Outcome(draft=text, accepted=False, revisions=MAX_REVISIONS)


def show_log(world: durable.World, run_id: str) -> None:
    for e in world.events(run_id):
        if e.type == "step.completed":
            out = e.output  # type: ignore[union-attr]
            shown = f"{out['verdict']} {out['note']}".strip() if isinstance(out, dict) else out
            print(f"    {e.path:<20} {shown}")  # type: ignore[union-attr]


async def main() -> int:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="little-loop-"))
    print(f"data directory: {data_dir}")
    with durable.local_world(data_dir) as world:
        print("\n1. a critic that accepts once the draft has a title, an example and a summary:")
        first = await durable.run_workflow(
            draft_loop, Task(topic="durable loops"), world=world, run_id="draft-1"
        )
        show_log(world, "draft-1")
        print(f"  accepted={first.accepted} after {first.revisions} revisions: {first.draft!r}")

        print(f"\n2. a critic that is never satisfied: the loop stops at {MAX_REVISIONS} revisions:")
        capped = await durable.run_workflow(
            draft_loop, Task(topic="durable loops", strict=True), world=world, run_id="draft-2"
        )
        show_log(world, "draft-2")
        print(f"  accepted={capped.accepted} after {capped.revisions} revisions")

        calls_before = dict(model_calls)
        print("\n3. calling run 'draft-1' again with the same run id ...")
        again = await durable.run_workflow(
            draft_loop, Task(topic="durable loops"), world=world, run_id="draft-1"
        )
    if (first.accepted, first.revisions, capped.accepted) != (True, 2, False):
        print("FAIL: the loops did not take the expected route")
        return 1
    if again != first or dict(model_calls) != calls_before:
        print("FAIL: the replay called a model again or returned something else")
        return 1
    print(
        f"  same outcome, and model calls are still {calls_before}: every visit of critique and "
        "revise was replayed from the log, and the critic's recorded verdicts chose the route."
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
