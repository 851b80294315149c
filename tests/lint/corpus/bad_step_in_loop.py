"""Bad: a step with the default max_visits=1 entered on every turn of a loop."""

import durable


@durable.step
async def revise(draft: str) -> str:
    return draft + "!"


@durable.workflow
async def polish(draft: str) -> str:
    for _ in range(3):
        draft = await revise(draft)  # expect: step-in-loop
    while len(draft) < 10:
        draft = await revise(draft)  # expect: step-in-loop
    return draft
