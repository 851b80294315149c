"""Log records of the ``durable`` logger: runs, retries, unknown commits and re-drives, locks, workers."""

from __future__ import annotations

import asyncio
import linecache
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import Queue, UnknownCommitError, Worker
from durable.store.locks import _protocol as _locks
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on
from tests.runtime.test_runtime import wait_events


class Records(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def about(self, text: str) -> list[logging.LogRecord]:
        return [r for r in self.records if text in r.getMessage()]


@pytest.fixture
def logs() -> Iterator[Records]:
    """The records of the ``durable`` logger during the test, at every level."""
    handler = Records()
    logger = logging.getLogger("durable")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


@durable.step
async def one(x: int) -> int:
    return x + 1


@durable.workflow
async def asks(x: int) -> int:
    y = await one(x)
    return y + (1 if durable.interrupt("more?") else 0)


@durable.workflow
async def breaks(x: int) -> int:
    await one(x)
    raise ValueError("no good")


TRIES: dict[str, int] = {}


@durable.step(retry=durable.RetryPolicy(max_attempts=2, backoff=0.0))
async def shaky(key: str) -> str:
    TRIES[key] = TRIES.get(key, 0) + 1
    raise RuntimeError(f"try {TRIES[key]}")


@durable.workflow
async def keeps_trying(key: str) -> str:
    return await shaky(key)


@durable.tool
async def pay(amount: int) -> str:
    return f"paid {amount}"


@durable.tool(idempotent=True)
async def lookup(q: str) -> str:
    return q.upper()


@durable.workflow
async def pays(amount: int) -> str:
    return await pay(amount)


@durable.workflow
async def looks(q: str) -> str:
    return await lookup(q)


async def test_a_run_logs_its_start_resume_and_completion_with_extras(worlds: Worlds, logs: Records) -> None:
    """Started, waiting, resumed (with the count of recorded calls) and completed, each with run_id."""
    with pytest.raises(durable.RunInterrupted):
        await durable.run_workflow(asks, 1, world=worlds.open(), run_id="r1")
    assert await durable.run_workflow(asks, 1, world=worlds.open(), run_id="r1", resume=True) == 3
    started = logs.about("run r1 started")
    assert len(started) == 1 and started[0].levelno == logging.INFO
    assert started[0].run_id == "r1" and started[0].workflow == "asks"  # type: ignore[attr-defined]
    waiting = logs.about("waiting at")
    assert waiting[0].path == "interrupt#1"  # type: ignore[attr-defined]
    resumed = logs.about("run r1 resumed")
    assert len(resumed) == 1 and resumed[0].recorded_calls == 1  # type: ignore[attr-defined]
    assert "1 recorded calls replay" in resumed[0].getMessage()
    done = logs.about("run r1 completed")
    assert len(done) == 1 and done[0].run_id == "r1"  # type: ignore[attr-defined]


async def test_a_failed_run_logs_an_error_with_its_type(worlds: Worlds, logs: Records) -> None:
    """A run whose code raises logs run failed at ERROR, with the error's type as an extra."""
    with pytest.raises(ValueError, match="no good"):
        await durable.run_workflow(breaks, 1, world=worlds.open(), run_id="bad")
    (failed,) = logs.about("run bad failed")
    assert failed.levelno == logging.ERROR
    assert failed.error_type == "ValueError" and failed.run_id == "bad"  # type: ignore[attr-defined]
    assert "no good" in failed.getMessage()


async def test_every_retry_decision_is_logged(worlds: Worlds, logs: Records) -> None:
    """One WARNING per retry and one ERROR when the policy gives up, with path and attempt."""
    TRIES.clear()
    with pytest.raises(RuntimeError):
        await durable.run_workflow(keeps_trying, "k", world=worlds.open(), run_id="rt")
    retry, give_up = logs.about("retrying"), logs.about("giving up")
    assert [(r.levelno, r.attempt, r.path) for r in retry] == [(logging.WARNING, 1, "shaky")]  # type: ignore[attr-defined]
    assert [(r.levelno, r.attempt, r.retry) for r in give_up] == [(logging.ERROR, 2, False)]  # type: ignore[attr-defined]


async def test_an_unknown_commit_is_logged_before_it_is_raised(worlds: Worlds, logs: Records) -> None:
    """A plain tool with an intent and no receipt logs the unknown commit at ERROR, with its key."""
    with pytest.raises(SimulatedCrash):
        await durable.run_workflow(pays, 5, world=worlds.crashing(on("effect.receipt")), run_id="uc")
    with pytest.raises(UnknownCommitError):
        await durable.run_workflow(pays, 5, world=worlds.open(), run_id="uc")
    (rec,) = logs.about("unknown commit")
    assert rec.levelno == logging.ERROR and rec.path == "tool:pay#0"  # type: ignore[attr-defined]


async def test_a_redrive_is_logged(worlds: Worlds, logs: Records) -> None:
    """An idempotent tool found without a receipt logs that it is called again."""
    with pytest.raises(SimulatedCrash):
        await durable.run_workflow(looks, "q", world=worlds.crashing(on("effect.receipt")), run_id="rd")
    assert await durable.run_workflow(looks, "q", world=worlds.open(), run_id="rd") == "Q"
    (rec,) = logs.about("calling it again")
    assert rec.levelno == logging.WARNING and rec.action == "redrive"  # type: ignore[attr-defined]
    assert rec.run_id == "rd" and rec.path == "tool:lookup#0"  # type: ignore[attr-defined]


async def test_a_long_lock_wait_is_logged(
    worlds: Worlds, logs: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait on a run's lock past the threshold logs a WARNING, and how long it took once taken."""
    monkeypatch.setattr(_locks, "LONG_WAIT", 0.0)
    world = worlds.open()
    handle = world.locks.try_acquire("run:held")
    assert handle is not None

    async def later() -> None:
        await asyncio.sleep(0.05)
        world.locks.release(handle)

    release = asyncio.create_task(later())
    assert await durable.run_workflow(looks, "x", world=world, run_id="held") == "X"
    await release
    (wait,) = logs.about("waiting for lock run:held")
    assert wait.levelno == logging.WARNING and wait.run_id == "held"  # type: ignore[attr-defined]
    (took,) = logs.about("took lock run:held")
    assert took.waited > 0  # type: ignore[attr-defined]


async def test_worker_claims_are_logged(worlds: Worlds, logs: Records) -> None:
    """A worker that claims a queued run logs the run, the queue and its own name."""
    world = worlds.open()
    handle = durable.start_workflow(looks, "w", world=world, queue=Queue("jobs"))
    async with Worker(world, workflows=[looks], queues=[Queue("jobs")], name="w1"):
        assert await asyncio.wait_for(handle.result(), 30) == "W"
    (claim,) = logs.about("claimed run")
    assert claim.name == "durable.runtime" and claim.queue == "jobs"  # type: ignore[attr-defined]
    assert claim.worker == "w1" and claim.run_id == handle.run_id  # type: ignore[attr-defined]


async def test_a_record_names_the_code_that_logged_it(worlds: Worlds, logs: Records) -> None:
    """A record's pathname, lineno and funcName are the engine's or the worker's line, not the helper's."""
    world = worlds.open()
    handle = durable.start_workflow(looks, "w", world=world, queue=Queue("jobs"))
    async with Worker(world, workflows=[looks], queues=[Queue("jobs")], name="w1"):
        assert await asyncio.wait_for(handle.result(), 30) == "W"
    (claim,) = logs.about("claimed run")
    (done,) = logs.about(f"run {handle.run_id} completed")
    for record, module in ((claim, "_worker.py"), (done, "_runner.py")):
        assert Path(record.pathname).name == module and record.funcName != "note"
        assert "note(" in linecache.getline(record.pathname, record.lineno)  # the line that logged it
    filter_seen: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        filter_seen.append(record.getMessage())
        return False  # a logger's filter still decides: the record reaches no handler

    logger = logging.getLogger("durable.runtime")
    logger.addFilter(keep)
    before = len(logs.records)
    try:
        h2 = durable.start_workflow(looks, "v", world=world, queue=Queue("jobs"))
        async with Worker(world, workflows=[looks], queues=[Queue("jobs")], name="w2"):
            assert await asyncio.wait_for(h2.result(), 30) == "V"
    finally:
        logger.removeFilter(keep)
    assert any("claimed run" in m for m in filter_seen)
    assert not any("claimed run" in r.getMessage() for r in logs.records[before:])


def test_a_disabled_logger_builds_no_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the durable logger above ERROR, note() builds and hands on no record."""
    from durable import _logging

    calls: list[object] = []
    make = logging.Logger.makeRecord

    def counted(self: logging.Logger, *args: Any, **kwargs: Any) -> logging.LogRecord:
        calls.append(args)
        return make(self, *args, **kwargs)

    monkeypatch.setattr(logging.Logger, "makeRecord", counted)
    logger = logging.getLogger("durable")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        _logging.note(logging.ERROR, "r", None, "nothing %s", "here")
    finally:
        logger.setLevel(old)
    assert calls == []
    logger.setLevel(logging.DEBUG)
    try:
        _logging.note(logging.ERROR, "r", None, "something %s", "here")
    finally:
        logger.setLevel(old)
    assert len(calls) == 1


@durable.workflow
async def naps(n: int) -> int:
    for _ in range(n):
        await durable.sleep(0.01)
    return n


async def test_a_recovery_is_logged(worlds: Worlds, logs: Records) -> None:
    """recover_runs logs each run it takes over from a driver that is gone."""
    from durable.runtime._driver import default_driver

    world = worlds.open()
    h = durable.start_workflow(naps, 20, world=world)
    await wait_events(world, h.run_id, 3)
    await default_driver(world).stop()  # the run stays resumable, with nobody driving it
    await durable.recover_runs(world, workflows=[naps])
    assert await h.result() == 20
    (rec,) = logs.about("recovered run")
    assert rec.name == "durable.runtime" and rec.run_id == h.run_id  # type: ignore[attr-defined]
    assert rec.levelno == logging.INFO
