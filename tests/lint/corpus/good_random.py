"""Good: durable.random() and durable.uuid4() are recorded once and replayed."""

import secrets

from durable import model_call, random, uuid4, workflow


@model_call(slot="writer")
async def salt() -> str:
    return secrets.token_hex(8)


@workflow
async def lottery(n: int) -> str:
    ticket = int(random() * n) + 1
    return f"{ticket} {uuid4()} {await salt()}"
