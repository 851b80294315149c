"""A booking saga: charge, reserve, ship; shipping fails, and everything done is undone, once.

Each step that changes the world declares how to undo it:
``@durable.tool(compensate=refund)`` on ``charge``, ``compensate=release`` on
``reserve``. When the run fails for good (here the courier refuses the
parcel), the engine calls the undo tools of the confirmed calls, newest
first: ``release`` then ``refund``, each with the original arguments and
``result=`` what the call returned. Each undo is a durable effect of its own
(key ``compensate:<key of the call>``): the process is killed in the middle
of the refund here, and the resumed run does not release the stock a second
time; the refund, idempotent, is called again with the same idempotency key,
which the payment service deduplicates. The run ends ``failed`` with the
compensations in its status detail.

The services are in-memory stand-ins that count what happened. Run it:

    python cookbook/booking_saga.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import durable

DATA = Path(os.environ.get("SAGA_DATA", "."))


def ledger(line: str) -> None:
    """What the outside world saw, one line a call (a file, so it survives the killed process)."""
    with open(DATA / "ledger.txt", "a") as f:
        f.write(line + "\n")


@durable.tool(idempotent=True)
async def refund(order: str, amount: int, result: str) -> str:
    key = durable.idempotency_key()  # the payment service deduplicates on it
    if any(line.endswith(key) for line in seen("refund")):
        return f"refund of {result} already done"
    ledger(f"refund {result} {key}")
    if os.environ.get("DIE_IN_REFUND"):
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies after the refund left
    return f"refunded {result}"


@durable.tool(compensate=refund)
async def charge(order: str, amount: int) -> str:
    ledger(f"charge {order} {amount}")
    return f"payment-{order}"


@durable.tool
async def release(order: str, result: str) -> None:
    ledger(f"release {result}")


@durable.tool(compensate=release)
async def reserve(order: str) -> str:
    ledger(f"reserve {order}")
    return f"stock-{order}"


@durable.tool
async def ship(order: str) -> str:
    ledger(f"ship {order} refused")
    raise durable.NonRetryableError(f"the courier refused order {order}")


@durable.workflow
async def book(order: str) -> str:
    await charge(order, 4200)
    await reserve(order)
    return await ship(order)


def seen(prefix: str = "") -> list[str]:
    path = DATA / "ledger.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if line.startswith(prefix)]


async def drive() -> None:
    """Run (or resume) the booking in this process; it fails after undoing what it did."""
    with durable.local_world(DATA / "data") as world:
        try:
            await durable.run_workflow(book, "o-17", world=world, run_id="booking-o-17")
        except durable.NonRetryableError as exc:
            print(f"failed: {exc}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SAGA_DATA": tmp}
        # First attempt: dies in the middle of the refund (after release was confirmed).
        died = subprocess.run(
            [sys.executable, __file__, "drive"], env={**env, "DIE_IN_REFUND": "1"}, check=False
        )
        assert died.returncode == -signal.SIGKILL
        # The resume, in a new process: only the unconfirmed refund is called again.
        subprocess.run([sys.executable, __file__, "drive"], env=env, check=True)
        global DATA
        DATA = Path(tmp)
        print("the outside world saw:", *seen(), sep="\n  ")
        assert len(seen("charge")) == 1
        assert len(seen("reserve")) == 1
        assert len(seen("release")) == 1  # confirmed before the kill: never again
        assert len(seen("refund")) == 1  # called twice, with one key, deduplicated by the service
        with durable.local_world(Path(tmp) / "data") as world:
            end = world.events("booking-o-17")[-1]
            print(f"{end.type}, compensated: {end.compensated}")  # type: ignore[union-attr]
            assert end.compensated == ["compensate:tool:reserve#1", "compensate:tool:charge#0"]  # type: ignore[union-attr]


if __name__ == "__main__":
    if sys.argv[1:] == ["drive"]:
        asyncio.run(drive())
    else:
        main()
