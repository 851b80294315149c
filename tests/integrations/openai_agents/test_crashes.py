"""SIGKILL a real process running OpenAI Agents SDK agents in a durable run; resume in a new one.

Each test runs on SQLite and on Postgres. The agents' models decide from
their input (``tests.helpers.openai_agents_kit``), so the resumed process
answers a re-sent request as the killed one would have; every model and tool
body counts itself in ``bodies.log``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")

from agents.run_internal.items import REJECTION_MESSAGE

import durable
from tests.helpers.openai_agents_kit import ANSWER
from tests.integrations.openai_agents.children import Children
from tests.runtime.unhappy import wait_for

pytestmark = pytest.mark.slow

DESK = ["model-triage-0", "model-billing-1", "lookup-A1", "lookup-B2", "model-billing-3"]


@pytest.fixture(params=["sqlite", "postgres"])
def children(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Children]:
    """Child processes of the agents app on each backend."""
    c = Children(request.param, tmp_path)
    yield c
    c.close()


@pytest.mark.parametrize("how", ["durable", "install", "streamed"])
def test_a_kill_during_the_third_model_call_sends_only_that_call_again(children: Children, how: str) -> None:
    """Killed in the third model call: the resume sends it once more; the handoff and both lookups replay.

    The SDK's traces are sent once: the trace starts once, each agent's, handoff's and tool's
    span is sent once across both processes.
    """
    children.kill_at(how, "model-billing-3")
    assert children.bodies() == Counter(DESK)
    assert Counter(children.lines("spans.log"))["span function lookup_order"] == 2
    rec = children.recorded()
    cut = "session:triage#0.model:openai_agents__model" + ("_stream#2" if how == "streamed" else "#2")
    assert cut in rec.intents
    assert cut not in rec.receipts
    code, out = children.finish(how)
    assert code == 0, out
    assert out["output"].startswith(ANSWER)
    assert children.bodies() == Counter(DESK) + Counter(["model-billing-3"])
    spans = Counter(children.lines("spans.log"))
    assert sum(n for line, n in spans.items() if line.startswith("trace-start")) == 1
    assert spans["span function lookup_order"] == 2
    assert (spans["span agent triage"], spans["span agent billing"], spans["span handoff"]) == (1, 1, 1)


def test_a_plain_tool_cut_mid_call_blocks_the_run(children: Children) -> None:
    """A plain ``charge`` cut by the kill may have happened: the resume stops with ``UnknownCommitError``."""
    children.kill_at("plain", "charge")
    code, out = children.finish("plain")
    assert (code, out) == (3, {"error": "UnknownCommitError"})
    assert children.bodies()["charge"] == 1


def test_a_plain_tool_cut_mid_call_under_a_worker_leaves_the_run_blocked(children: Children) -> None:
    """Under workers the run is ``blocked`` with reason ``unknown_commit``; ``charge`` ran once."""
    from tests.helpers.procs import openai_agents_app as app

    first = children.worker(stop_at="charge")
    with children.world() as world:
        h = durable.start_workflow(app.cashier, False, world=world, queue=app.agents_queue)
        wait_for(lambda: children.bodies()["charge"], 60, "the charge to start")
        children.kill(first)
        children.worker()
        status = wait_for(
            lambda: (st := durable.runtime.run_status(world, h.run_id)).status == "blocked" and st,
            60,
            "the run to block",
        )
    assert status.reason == "unknown_commit"
    assert children.bodies()["charge"] == 1


def test_the_same_tool_made_idempotent_is_called_again_with_the_same_key(children: Children) -> None:
    """With ``tool_options(idempotent=True)`` the cut ``charge`` runs again, under the same key."""
    children.kill_at("idempotent", "charge")
    code, out = children.finish("idempotent")
    assert code == 0, out
    assert out["output"] == "charged 20"
    assert children.bodies()["charge"] == 2
    first, again = children.lines("keys.log")
    assert first == again == "r:session:cashier#0.turn-0[0].tool:openai_agents__tool__charge#0"


def test_refunds_that_need_approval_are_answered_with_little_answer(children: Children) -> None:
    """The run waits naming each refund; ``little answer`` from another process approves one, rejects one."""
    code, out = children.finish("approval")
    assert code == 4
    asked = out["interrupted"]["approvals"]
    assert [(a["call_id"], a["tool"], a["arguments"]) for a in asked] == [
        ("r1", "refund", {"order_id": "A1", "amount": 5}),
        ("r2", "refund", {"order_id": "B2", "amount": 7}),
    ]
    assert children.bodies() == Counter(["model-refunds-0"])
    app = "tests.helpers.procs.openai_agents_app:refunds"
    done = children.little("answer", "r", '{"r1": true, "r2": false}', "--workflow", app)
    assert done.returncode == 0, done.stderr
    assert children.bodies() == Counter(["model-refunds-0", "refund-A1", "model-refunds-2"])
    assert children.bodies()["refund-B2"] == 0
    rec = children.recorded()
    models = [k for k in rec.receipts if ".model:openai_agents__model#" in k]
    final = rec.receipts[models[-1]]["result"]["response"]["output"][0]["content"][0]["text"]
    assert final == f"refunded 5 on A1 | {REJECTION_MESSAGE}"


def test_an_mcp_server_whose_tools_change_between_the_kill_and_the_resume(children: Children) -> None:
    """The tool list recorded before the kill is the one the resumed run sees; the server's calls run once."""
    (children.tmp / "tools.txt").write_text("read_note\nsave_note\n")
    children.kill_at("mcp", "model-planner-1")
    (children.tmp / "tools.txt").write_text("read_note\nsave_note\ndelete_note\n")  # a deploy of the server
    code, out = children.finish("mcp")
    assert code == 0, out
    assert out["output"].startswith("Pack an umbrella")
    assert Counter(children.lines("server.log")) == Counter(["read_note", "save_note"])
    rec = children.recorded()
    listings = [k for k in rec.intents if k.endswith("list_tools#0")]
    assert listings == ["session:planner#0.mcp[notes].tool:openai_agents__mcp__notes__list_tools#0"]
    listed = rec.receipts[listings[0]]["result"]["tools"]
    assert [t["name"] for t in listed] == ["read_note", "save_note"]
    assert "session:planner#0.turn-0[0].tool:openai_agents__mcp__notes__read_note#0" in rec.receipts


def test_a_kill_inside_an_agent_used_as_a_tool_sends_only_the_cut_call_again(children: Children) -> None:
    """Killed in the nested agent's second model call: its first call and its lookups replay."""
    children.kill_at("nested", "model-billing-2")
    code, out = children.finish("nested")
    assert code == 0, out
    assert out["output"].startswith("billing says: " + ANSWER)
    once = ["model-boss-0", "model-billing-0", "lookup-A1", "lookup-B2", "model-billing-2", "model-boss-1"]
    assert children.bodies() == Counter(once) + Counter(["model-billing-2"])
    rec = children.recorded()
    nested = "session:boss#0.turn-0[0].tool:openai_agents__tool__ask_billing#0.session:billing#0"
    assert f"{nested}.model:openai_agents__model#1" in rec.receipts
