"""Good: the looping step allows its visits, or each turn has its own branch scope."""

import durable


@durable.step(max_visits=5)
async def revise(draft: str) -> str:
    return draft + "!"


@durable.step
async def shorten(draft: str) -> str:
    return draft[:10]


@durable.workflow
async def polish(draft: str) -> str:
    for _ in range(3):
        draft = await revise(draft)
    for i in range(3):
        async with durable.branch(str(i)):
            draft = await shorten(draft)
    return draft
