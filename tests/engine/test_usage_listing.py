"""Usage of many runs at once: one read of the log per level of the run trees, children found by index."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable.engine import Budget, run_usage, runs_usage
from tests.conftest import Worlds
from tests.engine.test_budgets import agent, orchestrator, parent_agent

PRICES = durable.Budget(max_model_calls=100, prices={"small": (1.0, 2.0)})


def _seed(world: durable.World) -> list[str]:
    async def go() -> None:
        await durable.run_workflow(agent, 2, world=world, run_id="a", budget=PRICES)
        await durable.run_workflow(parent_agent, 2, world=world, run_id="p", budget=PRICES)
        await durable.run_workflow(orchestrator, 3, world=world, run_id="o")

    asyncio.run(go())
    return [r.run_id for r in world.log.runs()]


def _no_whole_reads(world: durable.World, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make each read of a whole run log, and each scan of the run list, fail; count the batched reads."""
    batched: list[Any] = []
    many = world.log.rows_of_types  # type: ignore[attr-defined]

    def counted(run_ids: list[str], types: Any) -> Any:
        batched.append(list(run_ids))
        return many(run_ids, types)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run's whole log or the whole run list was read")

    monkeypatch.setattr(world.log, "rows_of_types", counted)
    for name in ("read", "iter_rows", "runs"):
        monkeypatch.setattr(world.log, name, refused)
    return batched


def test_the_usage_of_many_runs_is_what_each_runs_usage_says(worlds: Worlds) -> None:
    """Root runs, a child workflow and a child started in a tool body: the same totals and budgets."""
    world = worlds.open()
    ids = _seed(world)
    together = runs_usage(world, ids)
    for r in ids:
        assert together[r][0] == run_usage(world, r), r
    assert together["p"][0].calls == 3  # its own call and its child's two
    assert together["o"][0].calls == 4  # plan, and the three of the workflow its tool started
    assert together["p"][0].cost == pytest.approx(3 * (100 * 1.0 + 20 * 2.0) / 1e6)
    assert together["a"][1] == PRICES
    assert together["o"][1] is None


def test_the_usage_of_many_runs_reads_the_log_once_per_level_and_never_a_whole_run(
    worlds: Worlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed roots in one read, their children in a second; no run log read whole, no run list scanned."""
    world = worlds.open()
    _seed(world)
    batched = _no_whole_reads(world, monkeypatch)
    got = runs_usage(world, ["a", "p", "o"])
    assert [u.calls for u, _ in got.values()] == [2, 3, 4]
    assert len(batched) == 2
    assert sorted(batched[0]) == ["a", "o", "p"]
    assert len(batched[1]) == 2  # the child of p, and the workflow o's tool started


def test_a_compacted_run_keeps_its_usage_in_the_listing(worlds: Worlds) -> None:
    """After compaction the snapshot holds the receipts: the listed usage does not change."""
    world = worlds.open()
    _seed(world)
    before = runs_usage(world, ["a"])["a"]
    durable.compact("a", world=world)
    assert runs_usage(world, ["a"])["a"] == before


def test_a_budget_is_read_from_the_listing_as_the_run_recorded_it(world: durable.World) -> None:
    """A resumed run's last budget.set holds: the listing shows the raised budget."""
    raised = Budget(max_model_calls=5)

    async def go() -> None:
        with pytest.raises(durable.BudgetExhaustedError):
            await durable.run_workflow(agent, 4, world=world, run_id="b", budget=Budget(max_model_calls=1))
        await durable.run_workflow(agent, 4, world=world, run_id="b", budget=raised)

    asyncio.run(go())
    used, budget = runs_usage(world, ["b"])["b"]
    assert budget == raised
    assert used.calls == 4


def test_an_encrypted_log_lists_the_usage_it_decrypts(tmp_path: Any) -> None:
    """On an encrypted SQLite log the batched read opens each row: the same totals as run_usage."""
    world = Worlds("encrypted", tmp_path).open()
    ids = _seed(world)
    together = runs_usage(world, ids)
    assert {r: together[r][0] for r in ids} == {r: run_usage(world, r) for r in ids}
    assert together["p"][0].input_tokens == 300
