"""Bad: randomness drawn in workflow and step bodies."""

import random
import secrets
import uuid
from random import choice

import durable


@durable.tool
async def announce(winner: str) -> None:
    return None


@durable.step
async def pick(options: list[str]) -> str:
    winner = choice(options)  # expect: random
    await announce(winner)  # a durable call: a resume runs the body again and draws another winner
    return winner


@durable.workflow
async def lottery(n: int) -> str:
    ticket = random.randint(1, n)  # expect: random
    token = secrets.token_hex(8)  # expect: random
    run = uuid.uuid4()  # expect: random
    return f"{ticket} {token} {run} {await pick(['a', 'b'])}"
