"""The current code of the recorded runs under ``tests/data/`` (see ``tests/data/record_logs.py``).

Every durable function counts its executions in ``CALLS``, so a test can
show that a refused resume executed nothing.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

import durable

CALLS: Counter[str] = Counter()
"""How many times each function body ran in this process."""

STOP_BEFORE_FINISH = {"on": False}
"""When on, the ``finish`` step stops the process's run as a crash would."""

MODELS = {"worker": "gpt-5"}
"""The model slot mapping the current configuration gives."""

INPUT = {"candidates": ["ada", "grace"]}
"""The input every recorded run was started with (except the input-drift one)."""


class Crash(BaseException):
    """Stands in for a killed process: not an outcome, nothing records it."""


class ReviewInput(BaseModel):
    candidates: list[str]


class Review(BaseModel):
    id: str
    score: int
    note: str


class Summary(BaseModel):
    reviews: list[Review]
    ranks: list[int]
    report_sha256: str
    table_rows: int


@durable.tool(idempotent=True)
async def score(candidate_id: str, strict: bool = False) -> int:
    CALLS["score"] += 1
    return len(candidate_id) * 10


@durable.model_call(slot="worker")
async def ask(prompt: str) -> str:
    CALLS["ask"] += 1
    return f"notes on {prompt}"


@durable.step
async def worker(candidate_id: str) -> Review:
    CALLS["worker"] += 1
    note = await ask(f"review {candidate_id}")
    return Review(id=candidate_id, score=await score(candidate_id), note=note)


@durable.step
async def rank(candidate_id: str) -> int:
    CALLS["rank"] += 1
    return sum(map(ord, candidate_id)) % 7


@durable.workflow(version="2")
async def scoring(candidate_id: str) -> int:
    CALLS["scoring"] += 1
    return await rank(candidate_id)


@durable.step
async def table(reviews: list[Review]) -> list[str]:
    CALLS["table"] += 1
    return [f"{r.id:<12}{r.score:>6}  {r.note}" for r in reviews for _ in range(4)]


@durable.step
async def finish(rows: int) -> int:
    CALLS["finish"] += 1
    if STOP_BEFORE_FINISH["on"]:
        raise Crash("stopped before finish")
    return rows


@durable.workflow
async def review(inp: ReviewInput) -> Summary:
    reviews = await durable.parallel("review", inp.candidates, worker, key=lambda c: c)
    ranks = [await scoring(c) for c in inp.candidates]
    report = "\n".join(f"- {r.id}: {r.score}" for r in reviews)
    ref = await durable.save_artifact("report.md", report.encode(), "text/markdown")
    rows = await table(reviews)
    return Summary(reviews=reviews, ranks=ranks, report_sha256=ref.sha256, table_rows=await finish(len(rows)))
