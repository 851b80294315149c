"""A refund killed between its intent and its receipt, reconciled by asking the provider.

A refund is a side effect that must not happen twice, and a process can die
after the provider made it but before the run recorded its receipt: an
*unknown commit*. The provider here (a stand-in for a payments API, kept in a
JSON file so that it outlives the processes) refunds again each time it is
called, but it keeps the idempotency key given with each refund as metadata
and can be searched by it. So the tool says ``reconcile=find_refund``: after
an unknown commit, the resume asks ``find_refund(key, input)`` first, and
uses the refund it finds instead of refunding again
(``durable.NEVER_HAPPENED`` would have made it call again). A provider that
deduplicates by key itself needs ``idempotent=True`` instead.

This script starts the run in a child process, waits until the provider has
made the refund, SIGKILLs the child while the tool still waits for the
provider's answer (the receipt was never written), then resumes the same run
id in a fresh process and checks that the provider made exactly one refund.

Run it:

    python cookbook/refund_reconcile.py
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import durable

RUN_ID = "refund_order_1042"


class RefundRequest(BaseModel):
    order_id: str
    amount_cents: int


class Refunded(BaseModel):
    order_id: str
    refund_id: str


# -- the provider: refunds by idempotency key, in a file -----------------------------


def provider_file() -> Path:
    return Path(os.environ["DEMO_DATA_DIR"]) / "provider.json"


def provider_refunds() -> list[dict[str, Any]]:
    path = provider_file()
    return list(json.loads(path.read_text())) if path.exists() else []


def provider_refund(key: str, order_id: str, amount_cents: int) -> str:
    """Make a refund (every call makes one), keeping ``key`` as its metadata."""
    refunds = provider_refunds()
    made = {"id": f"re_{len(refunds) + 1:04d}", "order": order_id, "amount": amount_cents, "key": key}
    tmp = provider_file().with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump([*refunds, made], f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, provider_file())
    return str(made["id"])


def find_refund(key: str, call_input: dict[str, Any]) -> Any:
    """``reconcile=``: the refund the provider made with this key, or NEVER_HAPPENED."""
    print(f"   reconcile asked for key {key} ({call_input})")
    made = [r for r in provider_refunds() if r["key"] == key]
    return made[0]["id"] if made else durable.NEVER_HAPPENED


# -- the run ------------------------------------------------------------------------


@durable.tool(reconcile=find_refund)
async def refund(order_id: str, amount_cents: int) -> str:
    key = durable.idempotency_key()
    assert key is not None  # inside a run, a tool always has one
    refund_id = provider_refund(key, order_id, amount_cents)
    if os.environ.get("DEMO_SLOW_ANSWER"):
        await asyncio.sleep(60)  # the provider's answer is slow to come back: the kill lands here
    return refund_id


@durable.workflow
async def refund_order(req: RefundRequest) -> Refunded:
    return Refunded(order_id=req.order_id, refund_id=await refund(req.order_id, req.amount_cents))


REQUEST = RefundRequest(order_id="order-1042", amount_cents=2599)


def child(data_dir: Path) -> None:
    """Run (or resume) the refund and print its result."""
    with durable.local_world(data_dir / "data") as world:
        out = asyncio.run(durable.run_workflow(refund_order, REQUEST, world=world, run_id=RUN_ID))
    print(f"   the run completed: {out.model_dump()}")


def spawn(data_dir: Path, *, slow: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ, DEMO_DATA_DIR=str(data_dir))
    if slow:
        env["DEMO_SLOW_ANSWER"] = "1"
    return subprocess.Popen([sys.executable, __file__, "--child", str(data_dir)], env=env)


def main() -> int:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="little-refund-"))
    os.environ["DEMO_DATA_DIR"] = str(data_dir)
    print(f"data directory: {data_dir}")

    print("1. refunding in a child process ...")
    proc = spawn(data_dir, slow=True)
    deadline = time.monotonic() + 30
    while not provider_refunds():
        if proc.poll() is not None or time.monotonic() > deadline:
            print("the child ended before the provider made the refund; something is wrong")
            return 1
        time.sleep(0.02)
    print(f"2. the provider made the refund: {provider_refunds()}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"3. killed the child with SIGKILL (exit status {proc.returncode}): intent written, no receipt")

    print("4. resuming the same run id in a fresh process ...")
    proc = spawn(data_dir, slow=False)
    if proc.wait(timeout=60) != 0:
        print("the resumed run failed")
        return 1
    refunds = provider_refunds()
    with durable.local_world(data_dir / "data") as world:
        types = [e.type for e in world.events(RUN_ID)]
    print(f"5. the provider's refunds after the resume: {refunds}")
    print(f"   the run's events: {types}")
    if len(refunds) != 1:
        print("FAIL: the order was refunded twice")
        return 1
    print("The order was refunded once: the resume asked the provider by key instead of refunding again.")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]))
    else:
        sys.exit(main())
