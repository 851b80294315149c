"""``little worker MODULE:ATTR`` naming a Worker object serves that worker as it is configured."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import durable
from durable.cli._runtime import build_worker
from tests.helpers.procs import worker_object

TARGET = "tests.helpers.procs.worker_object:worker"


def _options(w: durable.Worker) -> dict[str, Any]:
    """What a worker serves, by the name of the constructor option that sets it."""
    return {
        "workflows": sorted(w.specs),
        "queues": [q.limits() for q in w.queues],
        "concurrency": w.concurrency,
        "schedules": [s.name for s in w.schedules],
        "name": w.name,
        "max_recovery_attempts": w.driver.max_recovery_attempts,
    }


def test_a_worker_object_is_served_with_every_option_it_was_given(tmp_path: Path) -> None:
    """Each option of Worker's constructor (max_recovery_attempts included) reaches the served worker."""
    with durable.local_world(tmp_path / "data") as world:
        served = build_worker(world, TARGET, [], None, None)
        given = _options(worker_object.worker)
        options = set(inspect.signature(durable.Worker).parameters) - {"world"}
        assert set(given) == options  # a new option of Worker: serve it, and name it in _options
        assert _options(served) == given
        assert served.world is world  # the command's world, as every command's


def test_the_commands_options_change_only_what_they_name(tmp_path: Path) -> None:
    """--queue adds a queue, --concurrency and --name replace the object's; the rest stays as configured."""
    with durable.local_world(tmp_path / "data") as world:
        served = _options(build_worker(world, TARGET, ["extra"], 2, "cli-name"))
    given = _options(worker_object.worker)
    assert served["queues"] == [*given["queues"], durable.Queue("extra").limits()]
    assert (served["concurrency"], served["name"]) == (2, "cli-name")
    assert {k: v for k, v in served.items() if k not in ("queues", "concurrency", "name")} == {
        k: v for k, v in given.items() if k not in ("queues", "concurrency", "name")
    }
