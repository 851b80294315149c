"""SIGKILL a real process running a LangChain agent or a LangGraph graph; resume it in a new one.

Each test runs on SQLite and on PostgreSQL. The child (``tests.helpers.procs.langgraph_app``)
counts every real model answer and tool body in ``bodies.log``, and stops at a named body
for the kill; the models decide from their messages, so the resumed process is asked the
same questions and answers them the same way.
"""

from __future__ import annotations

import asyncio
import json
import selectors
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

import durable
from tests.helpers.procs import langgraph_app as app
from tests.runtime.unhappy import ROOT, Procs, wait_for

APP = "tests.helpers.procs.langgraph_app"


@pytest.fixture(params=["sqlite", "postgres"])
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    """The child processes' world (SQLite or PostgreSQL), and this test's view of it."""
    p = Procs(request.param, tmp_path)
    yield p
    p.close()


def spawn(procs: Procs, workflow: str, value: str, run_id: str, stop_at: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", APP, "run", workflow, value, run_id],
        cwd=ROOT,
        env={**procs.env, "DURABLE_TEST_STOP_AT": stop_at},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_at(procs: Procs, workflow: str, value: str, run_id: str, stop_at: str) -> None:
    """Run the workflow in a child until it reaches ``stop_at``, then SIGKILL it there."""
    proc = spawn(procs, workflow, value, run_id, stop_at)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=60), "the child never reached its stop point"
    line = proc.stdout.readline()
    if line.strip() != f"STOPPED {stop_at}":
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(line + err)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def resume(procs: Procs, workflow: str, value: str, run_id: str) -> dict[str, object]:
    proc = spawn(procs, workflow, value, run_id)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def bodies(procs: Procs) -> Counter[str]:
    log = procs.tmp / "bodies.log"
    return Counter(log.read_text().split() if log.exists() else [])


@pytest.mark.slow
@pytest.mark.parametrize("workflow", ["agent_with_middleware", "agent_wrapped"])
def test_an_agent_killed_during_its_third_model_call_sends_only_that_call_again(
    procs: Procs, workflow: str
) -> None:
    """create_agent (DurableMiddleware, or wrapped model and tools) SIGKILLed in model call 3 of 3."""
    kill_at(procs, workflow, "refund o1", "r", "model-2")
    assert bodies(procs) == Counter(
        {"model-0": 1, "lookup-o1": 1, "model-1": 1, "refund-o1": 1, "model-2": 1}
    )
    assert resume(procs, workflow, "refund o1", "r") == {"output": "refunded o1 (30 EUR)"}
    assert bodies(procs) == Counter(
        {"model-0": 1, "lookup-o1": 1, "model-1": 1, "refund-o1": 1, "model-2": 2}
    )


@pytest.mark.slow
def test_a_node_killed_during_its_second_model_call_sends_only_the_second_again(procs: Procs) -> None:
    """A LangGraph node asking the model twice, SIGKILLed in the second call: the first replays."""
    kill_at(procs, "research", "tides", "r", "model-sources")
    assert resume(procs, "research", "tides", "r") == {
        "output": ["notes on outline tides", "notes on sources notes on outline tides", "notes on summary 2"]
    }
    assert bodies(procs) == Counter({"model-outline": 1, "model-sources": 2, "model-summary": 1})


@pytest.mark.slow
def test_a_plain_tool_cut_by_a_kill_fails_closed(procs: Procs) -> None:
    """A wrapped plain tool in a tool node (handle_tool_errors=True) cut by SIGKILL is not run again.

    ``run_workflow`` raises ``UnknownCommitError`` itself, never an error
    ToolMessage handed to the model.
    """
    kill_at(procs, "checkout", "o7", "r", "charge-o7")
    assert resume(procs, "checkout", "o7", "r")["error"] == "UnknownCommitError"
    assert bodies(procs)["charge-o7"] == 1


@pytest.mark.slow
def test_a_plain_tool_cut_under_a_worker_blocks_the_run(procs: Procs) -> None:
    """The same cut under a worker: the next worker leaves the run blocked with unknown_commit."""
    first = procs.worker(APP, DURABLE_TEST_STOP_AT="charge-o8")
    h = durable.start_workflow(app.checkout, "o8", world=procs.world, queue=app.queue)
    wait_for(lambda: bodies(procs)["charge-o8"] == 1, 60, "the tool to start")
    procs.kill(first)
    procs.worker(APP)
    st = procs.ends(h.run_id, 60)
    assert (st.status, st.reason) == ("blocked", "unknown_commit")
    assert bodies(procs)["charge-o8"] == 1


@pytest.mark.slow
def test_an_interrupt_in_a_node_is_answered_from_another_process(procs: Procs) -> None:
    """interrupt() in a node: the run waits; `little answer` from a shell; a worker completes it."""
    procs.worker(APP)
    h = durable.start_workflow(app.approval, "tides", world=procs.world, queue=app.queue)
    assert procs.ends(h.run_id, 60).status == "interrupted"
    answered = procs.little("answer", h.run_id, json.dumps("ship it"))
    assert answered.returncode == 0, answered.stderr
    assert procs.ends(h.run_id, 60).status == "completed"
    assert asyncio.run(h.result(timeout=10)) == "notes on final notes on draft tides (ship it)"
    assert bodies(procs) == Counter({"model-draft": 1, "model-final": 1})
