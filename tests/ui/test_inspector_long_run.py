"""The page of a long run: its last calls with a link to more, and reads bounded by what it shows."""

# ruff: noqa: E402  (the extra is checked with importorskip before the imports that need it)

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

testclient = pytest.importorskip("starlette.testclient")  # the ui extra

import durable
from durable.store import Row
from durable.ui._app import Inspector, create_app
from durable.ui._run_model import CALLS, run_fingerprint
from tests.conftest import Worlds


@durable.tool
async def note(i: int) -> str:
    return f"noted {i}"


@durable.step(max_visits=100_000)
async def work(i: int) -> int:
    await note(i)
    return i


@durable.workflow(name="long")
async def long(n: int) -> int:
    for i in range(n):
        await work(i)
    if n < 0:
        raise ValueError("never")
    return n


@durable.step(max_visits=100_000)
async def tick(i: int) -> int:
    return i


@durable.workflow(name="long_failing")
async def long_failing(n: int) -> int:
    for i in range(n):
        await tick(i)
    raise ValueError(f"failed after {n} steps")


@durable.model_call(name="chat")
async def chat(messages: list[str]) -> str:
    return f"reply {len(messages)}: " + "x" * 200


@durable.workflow(name="agent")
async def agent(turns: int) -> int:
    messages = ["start"]
    for _ in range(turns):
        messages.append(await chat(messages))
    return len(messages)


class CountingLog:
    """A log that counts the rows its readers get back, whatever method they ask through."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.rows = 0

    def read(self, run_id: str, after_seq: int = 0) -> list[Row]:
        got: list[Row] = self.inner.read(run_id, after_seq)
        self.rows += len(got)
        return got

    def iter_rows(self, run_id: str, after_seq: int = 0) -> Iterator[Row]:
        for row in self.inner.iter_rows(run_id, after_seq):
            self.rows += 1
            yield row

    def last_row(self, run_id: str) -> Row | None:
        got: Row | None = self.inner.last_row(run_id)
        self.rows += got is not None
        return got

    def times(self, run_id: str, after_seq: int = 0) -> dict[int, float]:
        got: dict[int, float] = self.inner.times(run_id, after_seq)
        self.rows += len(got)
        return got

    def rows_of_types(self, run_ids: Sequence[str], types: Sequence[str]) -> dict[str, list[Row]]:
        got: dict[str, list[Row]] = self.inner.rows_of_types(run_ids, types)
        self.rows += sum(map(len, got.values()))
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _run(world: durable.World, wf: Any, n: int, run_id: str) -> None:
    with contextlib.suppress(ValueError):
        asyncio.run(durable.run_workflow(wf, n, world=world, run_id=run_id))


def _calls(page: str) -> list[str]:
    """The keys of the call rows of a run's page, top to bottom (grouping lines left out)."""
    rows = re.findall(r'<tr class="item" [^>]*data-key="([^"]*)" data-kind="([^"]*)"', page)
    return [key for key, kind in rows if kind not in ("loop", "branch")]


def _client(world: durable.World) -> Any:
    return testclient.TestClient(create_app(Inspector(world, "t", {})), base_url="http://127.0.0.1:8787")


def _last(n_steps: int, shown: int) -> list[str]:
    """The last ``shown`` calls of ``long(n_steps)`` as the tree lists them: each visit, then its tool."""
    out = []
    for i in range(n_steps):
        out += [f"work.visit[{i}]", f"work.visit[{i}].tool:note#0"]
    return out[-shown:]


def test_a_long_run_s_page_shows_its_last_calls_and_shows_more_on_asking(worlds: Worlds) -> None:
    """Of 300 steps (600 calls) the page lists the last N; its link lists the last 2N; a big N lists all."""
    world = worlds.open()
    _run(world, long, 300, "long-run")
    client = _client(world)
    page = client.get("/runs/long-run", params={"calls": 10}).text
    assert _calls(page) == _last(300, 10)
    assert "the calls before them are left out" in page
    more = re.search(r'<a class="more" href="([^"]+)">show the last 20 calls</a>', page)
    assert more is not None
    page = client.get(more.group(1).replace("&amp;", "&")).text
    assert _calls(page) == _last(300, 20)
    default = client.get("/runs/long-run").text
    assert _calls(default) == _last(300, CALLS)
    everything = client.get("/runs/long-run", params={"calls": 1000}).text
    assert _calls(everything) == _last(300, 600)
    assert 'class="more"' not in everything
    assert 'id="run-status"><span class="badge s-completed"' in everything
    assert '<dd class="run-output">' in default and "300</pre>" in default.split('class="run-output"')[1]
    assert '<dd class="run-input">' in default  # from the run's first row, outside the events read


def test_a_short_run_s_page_is_whole_and_offers_no_more(worlds: Worlds) -> None:
    """A run of fewer calls than the page shows is listed whole, with no link and no note."""
    world = worlds.open()
    _run(world, long, 3, "short-run")
    page = _client(world).get("/runs/short-run").text
    assert _calls(page) == _last(3, 6)
    assert 'class="more"' not in page and 'class="window' not in page
    assert "Raw events (14)" in page


@pytest.mark.parametrize("wf", [long, long_failing])
def test_the_page_fragment_and_change_check_of_a_long_run_read_as_many_rows_at_any_length(
    worlds: Worlds, wf: Any
) -> None:
    """A run four times longer costs the page, its live fragment and its change check no more rows."""
    world = worlds.open()
    _run(world, wf, 500, "shorter")
    _run(world, wf, 2000, "longer")
    counting = CountingLog(world.log)
    with contextlib.suppress(durable.ConfigurationError):
        world.open_messages()  # beside the real log, before the counting one stands in for it
    world.log = counting  # type: ignore[assignment]
    client = _client(world)
    read: dict[str, dict[str, int]] = {}
    for run_id in ("shorter", "longer"):
        read[run_id] = {}
        for what, params in (("page", {}), ("fragment", {"fragment": "1"})):
            counting.rows = 0
            got = client.get(f"/runs/{run_id}", params=params)
            assert got.status_code == 200
            assert ".visit[499]" in got.text or ".visit[1999]" in got.text
            read[run_id][what] = counting.rows
        counting.rows = 0
        assert run_fingerprint(world, run_id).startswith("completed:" if wf is long else "failed:")
        read[run_id]["change check"] = counting.rows
    assert read["longer"] == read["shorter"], read
    assert read["longer"]["change check"] <= 3  # its last row, and a failed run's first (what fixes it)
    assert read["longer"]["fragment"] < 1000  # of 8,002 (long) or 2,002 (long_failing) rows in the log


def test_an_input_chained_to_a_call_before_the_events_read_links_to_the_whole_of_it(worlds: Worlds) -> None:
    """An agent's last turns record their conversation as deltas on earlier ones: the page links it whole."""
    world = worlds.open()
    _run(world, agent, 120, "agent-run")
    page = _client(world).get("/runs/agent-run", params={"calls": 3}).text
    assert _calls(page) == ["model:chat#117", "model:chat#118", "model:chat#119"]
    earlier = re.findall(
        r'<p class="hint input-earlier"[^>]*>.*?<a class="whole" href="([^"]+)">whole input</a>', page
    )
    assert len(earlier) == 3
    whole = _client(world).get(earlier[-1].replace("&amp;", "&"))
    assert whole.status_code == 200
    assert (
        whole.json()["messages"][:2] == ["start", "reply 1: " + "x" * 200]
        and len(whole.json()["messages"]) == 120
    )
