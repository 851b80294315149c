"""`little runs` shows budgets (--usage) and compensations of each run (SQLite and Postgres)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable
from durable.cli import main
from tests.conftest import Worlds
from tests.runtime.test_runs_listing import little_json, where


@durable.model_call
async def reply(turn: int) -> dict[str, Any]:
    return {"model": "small", "usage": {"input_tokens": 30, "output_tokens": 3}}


@durable.workflow
async def chat(turns: int) -> int:
    for i in range(turns):
        await reply(i)
    return turns


def test_runs_usage_lists_calls_tokens_cost_and_budget(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run's row has its model calls, tokens, cost and budget; without --usage none of them."""
    d = where(worlds)
    world = worlds.open()
    budget = durable.Budget(max_model_calls=10, prices={"small": (1000.0, 1000.0)})
    asyncio.run(durable.run_workflow(chat, 2, world=world, run_id="spent", budget=budget))
    asyncio.run(durable.run_workflow(chat, 0, world=world, run_id="idle"))
    rows, _ = little_json(capsys, "runs", *d, "--usage")
    assert isinstance(rows, list)
    by_id = {r["run_id"]: r for r in rows}
    spent = by_id["spent"]
    assert (spent["model_calls"], spent["tokens"], spent["cost"]) == (2, 66, 0.066)
    assert spent["budget"] == "calls<=10"
    assert (by_id["idle"]["model_calls"], by_id["idle"]["budget"]) == (0, "")
    plain, _ = little_json(capsys, "runs", *d)
    assert isinstance(plain, list)
    assert all("model_calls" not in r for r in plain)
    assert main(["runs", *d, "--usage"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("spent")]
    assert "calls<=10" in line


def test_runs_shows_how_many_compensations_a_failed_run_ran(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed run that undid two calls is listed with compensated 2."""
    from tests.engine.test_compensation import booking

    d = where(worlds)
    world = worlds.open()
    with pytest.raises(durable.NonRetryableError):
        asyncio.run(durable.run_workflow(booking, "o9", world=world, run_id="saga"))
    rows, _ = little_json(capsys, "runs", *d)
    assert isinstance(rows, list)
    (row,) = [r for r in rows if r["run_id"] == "saga"]
    assert (row["status"], row["compensated"]) == ("failed", 2)
    assert main(["runs", *d]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("saga")]
    assert "(compensated 2)" in line


def test_little_cancel_of_a_waiting_run_with_calls_to_undo_runs_them_given_the_workflow(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --workflow the run keeps waiting and the note says why; with it the undos run and it ends."""
    from tests.engine import test_compensation_ends as saga

    saga.LOG.clear()
    d = where(worlds)
    asyncio.run(saga._interrupted(worlds.open(), "w"))
    first, _ = little_json(capsys, "cancel", "w", *d)
    assert isinstance(first, dict)
    assert first["status"] == "interrupted"
    assert "--workflow" in first["note"]
    assert saga.LOG == ["charge o4", "reserve o4"]
    target = "tests.engine.test_compensation_ends:asks_after_booking"
    done, _ = little_json(capsys, "cancel", "w", *d, "--workflow", target)
    assert isinstance(done, dict)
    assert done["status"] == "cancelled"
    assert saga.LOG == ["charge o4", "reserve o4", "release o4 rs-o4", "refund o4 ch-o4"]
    assert durable.runtime.run_status(worlds.open(), "w").compensated == saga.UNDONE
