"""The control stores announce their changes: a ring wakes listeners in this and other processes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.store.control import _doorbell
from durable.store.control._doorbell import Doorbell
from durable.store.control._memory import MemoryControl
from durable.store.control._protocol import ControlRecord, RunControl, kinds_of
from durable.store.control._sqlite import SqliteControl


def _store(kind: str, tmp_path: Path) -> RunControl:
    return MemoryControl() if kind == "memory" else SqliteControl(tmp_path / "runtime.db")


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """A socket file's address that fits the kernel's limit, however deep the test's folder is."""
    if len(os.fsencode(path)) <= _doorbell.MAX_PATH:
        yield os.fspath(path)
        return
    with _doorbell.through_descriptor(path.parent) as via:
        assert via is not None
        yield f"{via}/{path.name}"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_every_write_that_others_wait_for_is_announced(kind: str, tmp_path: Path) -> None:
    async def main() -> list[str]:
        ctl = _store(kind, tmp_path)
        rung = asyncio.Event()
        stop = ctl.subscribe(lambda: rung.set())
        assert stop is not None
        seen = []
        for name, write in [
            ("submit", lambda: ctl.submit(ControlRecord("r", "wf", queue="q"))),
            ("cancel", lambda: ctl.request_cancel("r", "requested", 0.0)),
            ("reopen", lambda: ctl.reopen("r", None)),
            ("finish", lambda: ctl.finish("r", "done")),
        ]:
            rung.clear()
            write()
            await asyncio.wait_for(rung.wait(), 10)
            seen.append(name)
        stop()
        rung.clear()
        ctl.submit(ControlRecord("s", "wf", queue="q"))
        await asyncio.sleep(0.05)
        assert not rung.is_set()  # stopped listening
        ctl.close()
        return seen

    assert asyncio.run(main()) == ["submit", "cancel", "reopen", "finish"]


_SUBSCRIBERS: dict[str, tuple[str, ...]] = {
    "worker": ("queue:",),
    "limited worker": ("queue:", "free:"),
    "cancel watch": ("cancel:",),
    "result of r": ("run:r", "cancel:r"),
}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_each_subscriber_hears_the_kinds_of_change_it_reads_again_for(kind: str, tmp_path: Path) -> None:
    """An idle worker is not woken by runs' ends, nor a driver's cancel watch by every enqueue."""

    async def main() -> dict[str, list[str]]:
        ctl = _store(kind, tmp_path)
        heard: dict[str, list[str]] = {name: [] for name in _SUBSCRIBERS}
        every = asyncio.Event()
        doing = [""]
        stops = [ctl.subscribe(every.set)]
        for name, about in _SUBSCRIBERS.items():
            stops.append(ctl.subscribe(lambda name=name: heard[name].append(doing[0]), about))
        for name, write in [
            ("submit", lambda: ctl.submit(ControlRecord("r", "wf", queue="q"))),
            ("cancel", lambda: ctl.request_cancel("r", "requested", 0.0)),
            ("reopen", lambda: ctl.reopen("r", None)),
            ("block", lambda: ctl.block("r", "{}")),
            ("wait for code", lambda: ctl.wait_for_code("r", "{}")),
            ("finish", lambda: ctl.finish("r", "done")),
        ]:
            every.clear()
            doing[0] = name
            write()
            # One ring is one datagram, read in one turn that calls every listener it wakes.
            await asyncio.wait_for(every.wait(), 10)
        for stop in stops:
            assert stop is not None
            stop()
        ctl.close()
        return heard

    assert asyncio.run(main()) == {
        "worker": ["submit", "reopen"],
        "limited worker": ["submit", "reopen", "block", "wait for code", "finish"],
        "cancel watch": ["cancel"],
        "result of r": ["cancel", "reopen", "block", "wait for code", "finish"],
    }


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_run_without_a_queue_wakes_no_worker_when_it_is_submitted(kind: str, tmp_path: Path) -> None:
    """Its process drives it: no worker can claim it, so its submit is no news for workers."""

    async def main() -> list[str]:
        ctl = _store(kind, tmp_path)
        heard: list[str] = []
        rung = asyncio.Event()
        stops = [
            ctl.subscribe(lambda: heard.append("worker"), ("queue:",)),
            ctl.subscribe(lambda: (heard.append("result"), rung.set()), ("run:",)),
        ]
        ctl.submit(ControlRecord("here", "wf", state="claimed", owner="me"))
        ctl.finish("here", "done")  # rung after the submit: heard in the same turn or a later one
        await asyncio.wait_for(rung.wait(), 10)
        for stop in stops:
            assert stop is not None
            stop()
        ctl.close()
        return heard

    assert asyncio.run(main()) == ["result"]


@pytest.mark.parametrize("datagram", [b"!", b"", b"qz"], ids=["older SDK", "empty", "unknown kind"])
def test_a_ring_that_does_not_say_its_kind_wakes_every_listener(datagram: bytes, tmp_path: Path) -> None:
    """An SDK from before the kinds rang one byte, ``!``, for every change: its rings still wake all."""
    bells = tmp_path / "bells"
    bell = Doorbell(bells)
    heard: list[str] = []

    async def main() -> None:
        rung = asyncio.Event()
        stops = [
            bell.listen(lambda: heard.append("cancel watch"), kinds_of(("cancel:",))),
            bell.listen(lambda: (heard.append("every"), rung.set())),
        ]
        (path,) = bells.glob("*.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out, _address(path) as address:
            out.sendto(datagram, address)
        await asyncio.wait_for(rung.wait(), 10)
        for stop in stops:
            assert stop is not None
            stop()

    asyncio.run(main())
    bell.close()
    assert heard == ["cancel watch", "every"]


def test_subscribing_to_an_unknown_kind_hears_every_ring() -> None:
    assert kinds_of(()) is None
    assert kinds_of(("queue:", "lease:x")) is None
    assert kinds_of(("run:abc", "cancel:abc")) == frozenset(b"rc")


def test_a_write_in_another_process_rings_this_one(tmp_path: Path) -> None:
    """No polling is involved: the event is set only by the other process's ring."""
    script = (
        "import sys; from durable.store.control._sqlite import SqliteControl;"
        "from durable.store.control._protocol import ControlRecord;"
        "c = SqliteControl(sys.argv[1]); c.submit(ControlRecord('x', 'wf', queue='q')); c.close()"
    )

    async def main() -> None:
        ctl = SqliteControl(tmp_path / "runtime.db")
        rung = asyncio.Event()
        stop = ctl.subscribe(rung.set)
        assert stop is not None
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, str(tmp_path / "runtime.db")
        )
        assert await proc.wait() == 0
        await asyncio.wait_for(rung.wait(), 10)
        assert ctl.get("x") is not None
        stop()
        ctl.close()

    asyncio.run(main())


def test_a_run_s_end_in_another_process_wakes_its_result_and_not_an_idle_worker(tmp_path: Path) -> None:
    script = (
        "import sys; from durable.store.control._sqlite import SqliteControl;"
        "c = SqliteControl(sys.argv[1]); c.finish('x', 'done'); c.close()"
    )

    async def main() -> list[str]:
        ctl = SqliteControl(tmp_path / "runtime.db")
        heard: list[str] = []
        rung = asyncio.Event()
        stops = [
            ctl.subscribe(lambda: heard.append("worker"), ("queue:",)),
            ctl.subscribe(lambda: (heard.append("result"), rung.set()), ("run:x",)),
        ]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, str(tmp_path / "runtime.db")
        )
        assert await proc.wait() == 0
        await asyncio.wait_for(rung.wait(), 10)
        for stop in stops:
            assert stop is not None
            stop()
        ctl.close()
        return heard

    assert asyncio.run(main()) == ["result"]


@pytest.mark.parametrize("depth", ["short", "deep"])
def test_a_dead_listener_s_socket_is_removed_and_a_closed_bell_cleans_up(tmp_path: Path, depth: str) -> None:
    """A deep folder's ring, sent through the folder's descriptor, removes the socket at its real path."""
    bells = tmp_path / ("d" * 120 if depth == "deep" else "") / "bells"
    bells.mkdir(parents=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with _address(bells / "123-dead.sock") as address:
        dead.bind(address)
    dead.close()  # the file stays; nobody reads it, as after a SIGKILL
    bell = Doorbell(bells)
    bell.ring("q")
    assert not (bells / "123-dead.sock").exists()

    async def main() -> None:
        stop = bell.listen(lambda: None)
        assert stop is not None
        assert len(list(bells.glob("*.sock"))) == 1
        stop()

    asyncio.run(main())
    bell.close()
    assert list(bells.glob("*.sock")) == []


def test_listeners_one_after_another_share_one_socket_and_a_stopped_one_is_not_called(tmp_path: Path) -> None:
    """A waiter per run binds no socket per run; only the listeners still listening hear a ring."""
    bells = tmp_path / "bells"
    bell, other = Doorbell(bells), Doorbell(bells)
    heard: list[int] = []

    async def main() -> None:
        for i in range(5):
            rung = asyncio.Event()
            stop = bell.listen(lambda i=i, rung=rung: (heard.append(i), rung.set()))
            assert stop is not None
            other.ring("r")
            await asyncio.wait_for(rung.wait(), 10)
            stop()
        assert len(list(bells.glob("*.sock"))) == 1

    asyncio.run(main())
    assert heard == [0, 1, 2, 3, 4]
    bell.close()
    other.close()
    assert list(bells.glob("*.sock")) == []


def test_a_data_directory_deeper_than_a_socket_path_still_rings(tmp_path: Path) -> None:
    """A Unix socket's address holds 108 bytes; a folder's descriptor shortens a deeper path."""
    deep = tmp_path / ("d" * 120) / "bells"
    bell, other = Doorbell(deep), Doorbell(deep)

    async def main() -> None:
        rung = asyncio.Event()
        stop = bell.listen(rung.set)
        assert stop is not None
        (path,) = deep.glob("*.sock")  # bound at its real place, not under the descriptor's path
        assert len(os.fsencode(path)) > 108
        other.ring("q")
        await asyncio.wait_for(rung.wait(), 10)
        stop()

    asyncio.run(main())
    bell.close()
    other.close()
    assert list(deep.glob("*.sock")) == []


def test_a_folder_too_deep_for_any_socket_path_falls_back_to_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``/proc`` (as on macOS) a too-long path binds nothing: the waiter polls."""
    monkeypatch.setattr(_doorbell, "FD_ROOT", os.fspath(tmp_path / "no-proc"))
    deep = tmp_path / ("d" * 120)

    async def main() -> None:
        assert Doorbell(deep).listen(lambda: None) is None

    asyncio.run(main())
    Doorbell(deep).ring("q")  # no socket was bound, so a ring has nothing to send to
    assert list(deep.glob("*.sock")) == []


def test_outside_an_event_loop_there_is_nothing_to_call_back() -> None:
    assert Doorbell(Path("/nonexistent-folder")).listen(lambda: None) is None


def test_a_bell_left_to_the_garbage_collector_closes_its_sending_socket(tmp_path: Path) -> None:
    """A store dropped without ``close()`` after it rang leaves no socket open behind it."""
    bells = tmp_path / "bells"
    listener = Doorbell(bells)

    async def main() -> list[warnings.WarningMessage]:
        stop = listener.listen(lambda: None)
        assert stop is not None
        bell = Doorbell(bells)
        bell.ring("q")  # opens its sending socket
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del bell
            gc.collect()
        stop()
        return caught

    caught = asyncio.run(main())
    listener.close()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
