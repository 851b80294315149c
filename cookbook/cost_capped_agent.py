"""An agent with a cost cap: the engine stops it before the call that would overspend; a person raises it.

A research agent asks an openai model, turn after turn, until the model says
it is done. Its run is started with ``durable.Budget(max_cost=..., prices=...)``:
each response's token usage is recorded in the call's receipt and priced per
million tokens, and before every model call the engine checks what the run
has spent. Once the cap is reached the run is ``blocked`` with reason
``budget``, before that call sends anything. A person looks at what it did
and raises the cap; the run continues where it stopped, and the calls it
already paid for replay from the log instead of being sent (and paid) again.

Here the person raises the cap from Python, with
``durable.resume_run(run_id, world=..., budget=...)``. The same decision can be
made from the shell (``little resume RUN_ID --budget '{"max_cost": 0.05}'``)
or from the inspector (``little ui``: the run's page has a "raise the budget"
form); each is recorded in the run's log as a ``budget.set`` event with who
made it.

The model is a real ``openai.AsyncOpenAI`` client whose HTTP goes to an
``httpx.MockTransport`` that answers like the API (with ``usage``), so the
recipe runs offline. Run it:

    python cookbook/cost_capped_agent.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

import httpx
import openai

import durable
from durable.integrations import openai as durable_openai

PRICES = {"gpt-research": (2.0, 8.0)}  # dollars per million input and output tokens
SENT: list[int] = []  # the requests that really left this process


def answer(request: httpx.Request) -> httpx.Response:
    """The model: five notes, then "done"; each response reports 1,500 input and 500 output tokens."""
    body = json.loads(request.content)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    SENT.append(turn)
    text = "done" if turn >= 5 else f"note {turn + 1}"
    return httpx.Response(
        200,
        json={
            "id": f"c{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-research",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
            ],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 500, "total_tokens": 2000},
        },
    )


client = durable_openai.wrap(
    openai.AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="offline",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )
)


@durable.workflow
async def research(topic: str) -> list[str]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Research {topic}; say done when done."}]
    notes: list[str] = []
    while True:
        reply = await client.chat.completions.create(model="gpt-research", messages=messages)
        text = reply.choices[0].message.content or ""
        if text == "done":
            return notes
        notes.append(text)
        messages.append({"role": "assistant", "content": text})


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, durable.local_world(tmp) as world:
        # Each call costs 1500 * 2 / 1e6 + 500 * 8 / 1e6 = $0.007: the cap of $0.02 allows three.
        cap = durable.Budget(max_cost=0.02, prices=PRICES)
        h = await durable.start_workflow(research, "tides", world=world, budget=cap)
        try:
            await h.result(timeout=30)
            raise SystemExit("the run should have stopped at its cap")
        except durable.RunBlockedError as blocked:
            reason, fix = blocked.reason, blocked.fixes[0]
        print(f"blocked ({reason}); a person could run: {fix}")
        assert reason == "budget"
        spent = await h.usage()
        tokens = spent.input_tokens + spent.output_tokens
        print(f"spent ${spent.cost:.3f} on {spent.calls} calls ({tokens} tokens)")
        assert spent.calls == 3
        assert SENT == [0, 1, 2]

        # The person looks at the notes so far and raises the cap to $0.05.
        await durable.resume_run(h.run_id, world=world, budget=durable.Budget(max_cost=0.05, prices=PRICES))
        notes = await h.result(timeout=30)
        spent = await h.usage()
        print(f"notes: {notes}; spent ${spent.cost:.3f} on {spent.calls} calls")
        assert notes == [f"note {n}" for n in range(1, 6)]
        assert SENT == [0, 1, 2, 3, 4, 5]  # the three paid calls replayed: none was sent twice
        assert spent.calls == 6


if __name__ == "__main__":
    asyncio.run(main())
