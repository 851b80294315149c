"""Workers register themselves while they serve, with the code of each workflow (every backend)."""

from __future__ import annotations

import json

import durable
from durable.runtime._driver import control_of
from durable.runtime._live_workers import codes_of, live_workers, runs_code, spec_code
from durable.store import WorkerRecord
from tests.conftest import Worlds
from tests.runtime.test_runtime import plus_one


async def test_a_serving_worker_is_live_with_its_code_and_gone_once_it_stops(worlds: Worlds) -> None:
    """Its record names its queues and each workflow's code; another world sees it; its stop removes it."""
    world = worlds.open()
    code = spec_code(world, durable.engine.workflow_spec(plus_one))
    async with durable.Worker(world, workflows=[plus_one], queues=["emails"], name="w-live"):
        seen = worlds.open()  # another process's view of the same store
        [worker] = live_workers(seen)
        assert worker.name == "w-live"
        assert codes_of(worker) == {"plus_one": code}
        assert worker.workflows == ("plus_one",) and worker.queues == ("emails",)
        assert runs_code(seen, "plus_one", code)
        assert not runs_code(seen, "plus_one", "sha256:other")
    assert live_workers(worlds.open()) == []
    assert control_of(world).workers() == []


async def test_a_record_whose_worker_holds_no_lock_is_a_dead_workers_and_is_removed(worlds: Worlds) -> None:
    """A worker that died left its record: it is not live, and the look removes it."""
    world = worlds.open()
    dead = WorkerRecord("w-dead", 1, "elsewhere", 0.0, json.dumps({"plus_one": "sha256:0"}))
    control_of(world).register_worker(dead)
    assert live_workers(world) == []
    assert control_of(world).workers() == []


async def test_two_workers_with_one_name_register_once(worlds: Worlds) -> None:
    """The second worker of a name serves unregistered (and says so); the first stays the live one."""
    world = worlds.open()
    async with durable.Worker(world, workflows=[plus_one], name="twin"):
        async with durable.Worker(worlds.open(), workflows=[plus_one], name="twin"):
            assert [w.name for w in live_workers(world)] == ["twin"]
        assert [w.name for w in live_workers(world)] == ["twin"]  # the second's stop left the first's
