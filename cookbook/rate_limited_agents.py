"""Agent runs on a queue that keeps under the model provider's rate limit, one customer at a time.

A provider allows so many requests per minute; a burst of agent runs must
not exceed it, and one customer's runs should not pile up while others wait.
A ``Queue`` says both, and its limits hold across every worker process of the
world because they are checked in the world's database when a run is claimed:

- ``rate_limit=(4, 1.0)``: at most 4 runs start in any one-second window,
- ``concurrency=3``: at most 3 runs in flight across all workers,
- ``partition_concurrency=1``: at most one run in flight per ``partition_key``
  (the customer).

The model is a stand-in that records when each call starts and ends, so the
script can check the limits from the calls' own clocks. Run it:

    python cookbook/rate_limited_agents.py

It starts 12 agent runs for 3 customers, drives them with two workers in this
process, and prints how many runs were in flight at most, the most starts in
any one-second window, and that no customer ever had two runs at once.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

import durable

llm = durable.Queue("llm", concurrency=3, rate_limit=(4, 1.0), partition_concurrency=1)

SPANS: list[tuple[str, float, float]] = []
"""(customer, start, end) of every model call: what the limits are checked against."""


@durable.model_call(slot="agent")
async def ask_model(customer: str, question: str) -> str:
    start = time.monotonic()
    await asyncio.sleep(0.1)  # the provider thinking
    SPANS.append((customer, start, time.monotonic()))
    return f"answer for {customer}: {question[::-1]}"


@durable.workflow
async def support_agent(ticket: dict[str, str]) -> str:
    return await ask_model(ticket["customer"], ticket["question"])


def most_in_flight(spans: list[tuple[str, float, float]]) -> int:
    edges = sorted([(s, 1) for _, s, _ in spans] + [(e, -1) for _, _, e in spans])
    now = best = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def most_starts_per_window(spans: list[tuple[str, float, float]], window: float) -> int:
    starts = sorted(s for _, s, _ in spans)
    return max(sum(1 for t in starts if s <= t < s + window) for s in starts)


def overlaps_within_a_customer(spans: list[tuple[str, float, float]]) -> int:
    bad = 0
    for i, (c1, s1, e1) in enumerate(spans):
        for c2, s2, e2 in spans[i + 1 :]:
            bad += c1 == c2 and s1 < e2 and s2 < e1
    return bad


async def main() -> None:
    with durable.local_world(tempfile.mkdtemp(prefix="durable-llm-queue-")) as world:
        runs = [
            durable.start_workflow(
                support_agent,
                {"customer": customer, "question": f"question {i}"},
                world=world,
                queue=llm,
                partition_key=customer,
            )
            for i in range(4)
            for customer in ("acme", "globex", "initech")
        ]
        workers = [durable.Worker(world, workflows=[support_agent], queues=[llm]) for _ in range(2)]
        async with workers[0], workers[1]:
            answers = [await run.result() for run in runs]
    print(f"{len(answers)} runs completed, e.g. {answers[0]!r}")
    peak, per_second, overlaps = (
        most_in_flight(SPANS),
        # The limit holds on claims; a model call starts a few milliseconds after
        # its run is claimed, so the check on the calls' clocks allows 50 ms of that.
        most_starts_per_window(SPANS, 0.95),
        overlaps_within_a_customer(SPANS),
    )
    print(f"most runs in flight: {peak} (limit 3)")
    print(f"most starts in one second: {per_second} (limit 4)")
    print(f"times one customer had two runs at once: {overlaps} (limit 0)")
    assert len(answers) == 12
    assert peak <= 3
    assert per_second <= 4
    assert overlaps == 0


if __name__ == "__main__":
    asyncio.run(main())
