"""The live workers of a world and the code each one runs.

A ``Worker`` registers itself in its world's control store when it starts
(its name, pid and host, and for each workflow it serves the hash of its
code, ``engine.code_hash``) and holds the lock ``worker:<name>`` until it
stops. The kernel (a data directory) or the lease's expiry (Postgres) frees
the lock of a worker that died, so a record whose lock can be taken is a
dead worker's: it is removed when found. This is how a worker whose replay
of a run diverges knows whether a live worker runs the code the run was
recorded with (``_serving``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable

from ..engine import Spec, WorldCore, code_hash, memory_manifest, run_manifest
from ..store import WorkerRecord, worker_lock
from ._driver import HOST, control_of

log = logging.getLogger("durable.runtime")


def spec_code(world: WorldCore, spec: Spec) -> str:
    """The hash of a workflow's code as this process defines it (``engine.code_hash``)."""
    return code_hash(run_manifest(spec, {}, memory_manifest(world)))


def register(world: WorldCore, name: str, specs: Iterable[Spec], queues: Iterable[str] = ()) -> object | None:
    """Register a worker that starts serving ``specs`` from ``queues``; the lock it holds while it serves.

    Returns ``None`` (and says why) when a live worker holds the name already:
    the worker then serves unregistered.
    """
    lock = world.locks.try_acquire(worker_lock(name))
    if lock is None:
        log.warning(
            "worker %s is not registered: a live worker of this world has that name; give each "
            "worker its own name (Worker(name=...)), so that other workers can tell which code it runs",
            name,
        )
        return None
    code = {spec.name: spec_code(world, spec) for spec in specs}
    try:
        control_of(world).register_worker(
            WorkerRecord(
                name, os.getpid(), HOST, world.clock(), json.dumps(code, sort_keys=True), tuple(queues)
            )
        )
    except BaseException:
        world.locks.release(lock)
        raise
    return lock


def unregister(world: WorldCore, name: str, lock: object) -> None:
    """Remove a worker that stops from the records, then give its lock back."""
    try:
        control_of(world).unregister_worker(name)
    finally:
        world.locks.release(lock)


def live_workers(world: WorldCore) -> list[WorkerRecord]:
    """The workers of ``world`` alive now (their lock is held); dead ones' records are removed."""
    ctl = control_of(world)
    alive = []
    for worker in ctl.workers():
        probe = world.locks.try_acquire(worker_lock(worker.name))
        if probe is None:
            alive.append(worker)
            continue
        try:
            ctl.unregister_worker(worker.name)
        finally:
            world.locks.release(probe)
    return alive


def codes_of(worker: WorkerRecord) -> dict[str, str]:
    """A worker record's workflows and the hash of its code for each (empty when unreadable)."""
    try:
        data = json.loads(worker.code)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def runs_code(world: WorldCore, workflow: str, code: str) -> bool:
    """Whether a live worker serves ``workflow`` with the code whose hash is ``code``."""
    return any(codes_of(w).get(workflow) == code for w in live_workers(world))
