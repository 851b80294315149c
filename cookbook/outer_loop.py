"""An outer loop that improves a draft cycle after cycle until a supervisor accepts it.

Each cycle is one run of the ``improve`` workflow: it finds what the draft
lacks and rewrites it. After each cycle ``supervise`` scores the draft and
answers ``Continue(draft)`` (another cycle on the improved draft) or
``Done(draft)`` (accept it). ``run_outer_loop`` keeps the loop's record in
``outer-loops/<outer_loop_id>.json`` and commits each answer to the cycle's
own log, so a killed loop resumes where it was and the supervisor is never
asked twice about one cycle.

The "models" are small offline functions, so the recipe runs anywhere.

Run it:

    python cookbook/outer_loop.py

It starts the loop in a child process, SIGKILLs the child while cycle 2 is
rewriting, resumes the loop in a fresh process, and shows from an append-only
record of supervise calls that cycle 1 was not supervised again and that
cycle 2 resumed in the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

import durable

OUTER_LOOP_ID = "ol_improve_draft"
CRITERIA = ("an example", "a summary", "a conclusion")


class Draft(BaseModel):
    text: str


def note(data_dir: Path, line: str) -> None:
    """Append one line that survives a kill (fsynced)."""
    with open(data_dir / "journal.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def journal(data_dir: Path) -> list[str]:
    path = data_dir / "journal.log"
    return path.read_text().splitlines() if path.exists() else []


@durable.model_call(slot="critic")
async def find_gap(text: str) -> str:
    return next((c for c in CRITERIA if c not in text), "")


@durable.model_call(slot="writer")
async def rewrite(text: str, gap: str) -> str:
    if os.environ.get("DEMO_PAUSE_IN_CYCLE") == gap:
        print(f"PAUSED rewriting for {gap}", flush=True)
        sys.stdin.readline()  # the parent kills the process here
    return f"{text} It has {gap}."


@durable.workflow
async def improve(draft: Draft) -> Draft:
    gap = await find_gap(draft.text)
    return Draft(text=await rewrite(draft.text, gap)) if gap else draft


def score(text: str) -> int:
    return sum(c in text for c in CRITERIA)


Answer = durable.Done[Draft] | durable.Continue[Draft]


def make_supervise(data_dir: Path) -> Callable[[durable.Cycle], Answer]:
    def supervise(cycle: durable.Cycle) -> Answer:
        points = score(cycle.output.text)
        note(data_dir, f"supervise cycle {cycle.number} run {cycle.run_id} score {points}")
        if points == len(CRITERIA):
            return durable.Done(cycle.output)
        return durable.Continue(cycle.output, summary=f"score {points}/{len(CRITERIA)}")

    return supervise


def child(data_dir: Path) -> None:
    """Run (or resume) the loop and print its result."""
    with durable.local_world(data_dir) as world:
        result = asyncio.run(
            durable.run_outer_loop(
                improve,
                Draft(text="Loops in durable."),
                supervise=make_supervise(data_dir),
                max_cycles=5,
                outer_loop_id=OUTER_LOOP_ID,
                world=world,
                description="improve a draft until it has an example, a summary and a conclusion",
            )
        )
    print("RESULT " + json.dumps({"final": result.final_output.text, "cycles": len(result.cycles)}))


def spawn(data_dir: Path, pause_in: str = "") -> subprocess.Popen[str]:
    env = dict(os.environ, DEMO_PAUSE_IN_CYCLE=pause_in)
    return subprocess.Popen(
        [sys.executable, __file__, "--child", str(data_dir)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def main() -> int:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="little-outer-"))
    manifest_path = data_dir / "outer-loops" / f"{OUTER_LOOP_ID}.json"
    print(f"data directory: {data_dir}")

    print("1. starting the outer loop in a child process ...")
    proc = spawn(data_dir, pause_in="a summary")  # cycle 2 adds the summary
    assert proc.stdout is not None
    assert proc.stdin is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("PAUSED"):
        print(f"the child did not reach cycle 2 (it printed {line!r})")
        return 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    manifest = json.loads(manifest_path.read_text())
    before = journal(data_dir)
    print(f"2. killed the child with SIGKILL (exit status {proc.returncode}) while cycle 2 was rewriting.")
    print(f"   supervise calls so far: {before}")
    print(f"   the manifest holds {len(manifest['cycles'])} committed cycle(s) and the pending run")
    print(f"   {manifest['pendingCycleRunId']} of cycle 2.")

    print("3. resuming the loop in a fresh process ...")
    proc = spawn(data_dir)
    out, _ = proc.communicate(timeout=60)
    if proc.returncode != 0:
        print("the resumed loop failed:\n" + out)
        return 1
    result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    after = journal(data_dir)
    done = json.loads(manifest_path.read_text())
    print(f"4. the supervisor accepted after {result['cycles']} cycles: {result['final']!r}")
    for entry in done["cycles"]:
        print(f"   cycle {entry['cycleNumber']}: run {entry['runId']}, {entry.get('summary', 'accepted')}")

    asked = [x.split(" run ")[0] for x in after]
    if asked != [f"supervise cycle {n}" for n in range(1, result["cycles"] + 1)]:
        print(f"FAIL: supervise was not asked exactly once per cycle: {after}")
        return 1
    if done["cycles"][1]["runId"] != manifest["pendingCycleRunId"]:
        print("FAIL: cycle 2 did not resume in its pending run")
        return 1
    print(
        "Cycle 1 was committed before the kill and was not run or supervised again. Cycle 2 "
        "resumed in the run the manifest had marked as pending, and supervise was asked once "
        "per cycle in total."
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]))
    else:
        sys.exit(main())
