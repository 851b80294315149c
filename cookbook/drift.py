"""Drift fails closed: a run resumed with changed code stops before anything runs.

This recipe starts a run, stops it half-way (as a killed process would),
"deploys" a new version of a tool whose signature changed, and resumes:
durable refuses with a CapabilityDriftError that lists what changed. Then it
shows the two ways out: restore the code the run started with and resume
(the committed work is replayed, not redone), or start a fresh run id with
the new code.

Run it from the repository root: ``python cookbook/drift.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import durable

CALLS: list[str] = []


class Stop(BaseException):
    """Stands in for a process that was killed half-way through the run."""


def deploy(version: int, *, stop: bool = False) -> Any:
    """Build the app as version 1 or 2 of the code would define it (same names, same places)."""
    if version == 1:

        @durable.tool
        async def score(candidate_id: str) -> int:
            CALLS.append(f"score {candidate_id}")
            return len(candidate_id)

    else:

        @durable.tool
        async def score(candidate_id: str, strict: bool = False) -> int:
            CALLS.append(f"score {candidate_id}")
            return len(candidate_id) * (2 if strict else 1)

    @durable.model_call(slot="worker")
    async def summarize(total: int) -> str:
        CALLS.append("summarize")
        return f"total score {total}"

    @durable.step
    async def publish(text: str) -> str:
        CALLS.append("publish")
        if stop:
            raise Stop()
        return text

    @durable.workflow
    async def review(candidates: list[str]) -> str:
        total = 0
        for c in candidates:
            total += await score(c)
        return await publish(await summarize(total))

    return review


async def main(data_dir: str) -> None:
    world = durable.local_world(data_dir)
    candidates = ["ada", "grace"]
    models = {"worker": "gpt-5"}

    print("1. Start run 'nightly' with version 1 of the code; it stops before publishing.")
    try:
        await durable.run_workflow(
            deploy(1, stop=True), candidates, world=world, run_id="nightly", models=models
        )
    except Stop:
        print(f"   the run stopped half-way; calls made: {CALLS}")

    print("\n2. Deploy version 2 (score() gained a parameter) and a new model, then resume:")
    CALLS.clear()
    try:
        await durable.run_workflow(
            deploy(2), candidates, world=world, run_id="nightly", models={"worker": "gpt-4o-mini"}
        )
    except durable.CapabilityDriftError as exc:
        print(f"   refused before anything ran (calls made: {CALLS}). The error says:\n")
        print("   " + str(exc).replace("\n", "\n   "))
        print("\n   the changes as data:", [c.key for c in exc.changes])

    print("\n3. Way out 1: restore version 1 and the old model mapping, and resume.")
    CALLS.clear()
    out = await durable.run_workflow(deploy(1), candidates, world=world, run_id="nightly", models=models)
    print(f"   resumed: {out!r}; calls made: {CALLS} (score and summarize were replayed from the log)")

    print("\n4. Way out 2: keep version 2 and start a fresh run id.")
    CALLS.clear()
    out = await durable.run_workflow(
        deploy(2), candidates, world=world, run_id="nightly-v2", models={"worker": "gpt-4o-mini"}
    )
    print(f"   new run: {out!r}; calls made: {CALLS}")
    world.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="drift-recipe-") as tmp:
        asyncio.run(main(tmp))
