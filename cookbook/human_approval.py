"""A human approval step: the run drafts, waits for a person, then finishes.

The workflow drafts a refund with a step, then calls ``durable.interrupt``
with the draft. The first ``run_workflow`` ends with ``RunInterrupted``: the
run is recorded as waiting, and nothing keeps running while the person
thinks (minutes or days; the process may exit). ``little replay`` shows the
run waiting for an answer. Later, ``run_workflow(..., resume=answer)``
answers: the body runs again from the top, the committed draft is replayed
from the log (not drafted again), ``interrupt`` returns the answer, and the
refund is paid.

Run it:

    python cookbook/human_approval.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel

import durable
from durable.cli import main as little

RUN_ID = "refund_order_1042"


class Refund(BaseModel):
    order_id: str
    amount_cents: int
    reason: str


drafts = 0  # counts real drafting work, to show the draft is not redone


@durable.step
async def draft_refund(order_id: str) -> Refund:
    global drafts
    drafts += 1
    return Refund(order_id=order_id, amount_cents=4_990, reason="parcel arrived damaged")


@durable.tool(idempotent=True)
async def pay_refund(refund: Refund) -> str:
    # A real tool would call the payment provider with durable.idempotency_key().
    return f"refunded {refund.amount_cents / 100:.2f} EUR for {refund.order_id}"


@durable.workflow
async def refund_with_approval(order_id: str) -> str:
    refund = await draft_refund(order_id)
    answer = durable.interrupt({"question": "Pay this refund?", "refund": refund.model_dump()})
    if answer.get("approved") is not True:
        return f"refund for {order_id} rejected by {answer.get('by', 'someone')}"
    return await pay_refund(refund)


async def main(data_dir: Path) -> None:
    with durable.local_world(data_dir) as world:
        try:
            await durable.run_workflow(refund_with_approval, "order-1042", world=world, run_id=RUN_ID)
        except durable.RunInterrupted as waiting:
            print(f"1. The run waits at {waiting.path!r} and asks: {waiting.value['question']}")
            print(f"   draft: {waiting.value['refund']}")

    print("2. `little replay` shows the waiting run:")
    little(["replay", RUN_ID, "--data-dir", str(data_dir)])

    with durable.local_world(data_dir) as world:  # later, perhaps in another process
        out = await durable.run_workflow(
            refund_with_approval,
            "order-1042",
            world=world,
            run_id=RUN_ID,
            resume={"approved": True, "by": "dana"},
        )
        print(f"3. Answered 'approved by dana'; the run finished: {out}")
        print(f"   The refund was drafted {drafts} time(s): the resume replayed the committed draft.")
    assert drafts == 1


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "data"))
