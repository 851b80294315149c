"""A rolling deploy under live runs: old and new workers side by side, and nothing fails.

An onboarding workflow creates an account, waits for a person's approval,
then sends a welcome. The new version of the code changes the signature of
``create_account`` (its parameter is renamed, from ``name`` to ``email``: a
rename is drift, unlike a new parameter with a default). Runs that already created their
account under the old code cannot be replayed by the new code; runs that
start under the new code are the new code's.

1. An old worker serves the queue; two onboardings start and wait for approval.
2. Before the deploy, ``little dry-resume`` checks the new code against every
   unfinished run: both would fail (drift ``steps.create_account.signature``),
   so exit status 1. Here that means: keep an old worker until they finish.
3. The deploy: a new worker starts beside the old one. The two waiting runs are
   approved; whichever worker sees them first, only the old one drives them
   (a new worker leaves a run it cannot replay alone, with one warning, and it
   holds no slot of the queue). Both complete on the old code.
4. Nothing needs the old worker any more: it stops. A new onboarding runs on
   the new code, and ``little doctor`` finds nothing stuck.

The workers are children of this process (``python rolling_deploy.py worker
DATA_DIR``), the version of their code chosen by ``ROLLING_DEPLOY_CODE``.

Run it:

    python cookbook/rolling_deploy.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import durable
from durable.cli import main as little

CODE = os.environ.get("ROLLING_DEPLOY_CODE", "old")
"""Which version of the code this process runs."""

onboarding = durable.Queue("onboarding", concurrency=2)


if CODE == "new":

    @durable.step
    async def create_account(email: str) -> str:
        return f"{email}:free"

else:

    @durable.step
    async def create_account(name: str) -> str:
        return f"{name}:free"


@durable.step
async def send_welcome(account: str) -> str:
    return f"welcome {account} (sent by the {CODE} code)"


@durable.workflow
async def onboard(name: str) -> str:
    account = await create_account(name)
    durable.interrupt(f"approve {account}?")
    return await send_welcome(account)


def start_worker(data: Path, code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ROLLING_DEPLOY_CODE": code}
    p = subprocess.Popen(
        [sys.executable, __file__, "worker", str(data)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    assert "serving" in p.stdout.readline()
    return p


def wait_for(world: durable.World, run_id: str, status: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while durable.runtime.run_status(world, run_id).status != status:
        assert time.monotonic() < end, f"run {run_id} did not become {status}"
        time.sleep(0.05)


def dry_resume_with_new_code(data: Path) -> int:
    """``little dry-resume`` as a CI job would run it, from a checkout of the new code."""
    env = {**os.environ, "ROLLING_DEPLOY_CODE": "new"}
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "durable.cli",
            "dry-resume",
            "rolling_deploy:onboard",
            "--all",
            "--data-dir",
            str(data),
        ],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(got.stdout.rstrip())
    return got.returncode


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        world = durable.local_world(data)
        old = start_worker(data, "old")
        waiting = [
            durable.start_workflow(onboard, name, world=world, queue=onboarding) for name in ("ada", "grace")
        ]
        for h in waiting:
            wait_for(world, h.run_id, "interrupted")
        print("1. two onboardings wait for approval under the old code")

        print("2. before the deploy: little dry-resume with the new code")
        status = dry_resume_with_new_code(data)
        assert status == 1, "the new code cannot replay the waiting runs"
        print(f"   exit status {status}: keep an old worker until these runs finish")

        new = start_worker(data, "new")
        for h in waiting:
            asyncio.run(h.answer("approved"))
        print("3. a new worker runs beside the old one, and the waiting runs are approved")
        for h in waiting:
            wait_for(world, h.run_id, "completed")
            result = asyncio.run(h.result(timeout=5))
            assert "old code" in result
            print(f"   {h.run_id[:12]}…: {result}")

        old.send_signal(signal.SIGTERM)
        old.wait(timeout=60)
        fresh = durable.start_workflow(onboard, "linus", world=world, queue=onboarding)
        wait_for(world, fresh.run_id, "interrupted")
        asyncio.run(fresh.answer("approved"))
        wait_for(world, fresh.run_id, "completed")
        result = asyncio.run(fresh.result(timeout=5))
        assert "new code" in result
        print(f"4. the old worker is stopped; a new onboarding runs on the new code: {result}")
        assert durable.doctor(world) == []
        new.send_signal(signal.SIGTERM)
        new.wait(timeout=60)
        for p in (old, new):
            if p.stdout is not None:
                p.stdout.close()
        world.close()
        little(["runs", "--data-dir", str(data)])


async def serve(data: Path) -> None:
    world = durable.local_world(data)
    worker = durable.Worker(world, workflows=[onboard], queues=[onboarding], name=f"{CODE}-code")
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(serve(Path(sys.argv[2])))
    else:
        main()
