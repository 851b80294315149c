"""LangGraph graphs in runs: concurrent tasks keyed by task, threads seen as first seen, signals unchanged."""

from __future__ import annotations

import asyncio
import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langchain")

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.types import Command, RetryPolicy, Send, interrupt

import durable
from durable.integrations.langchain import wrap
from durable.integrations.langgraph import DurableSaver
from durable.testing import SimulatedCrash, run_replaying_always
from tests.conftest import Worlds
from tests.helpers.langchain_doubles import DecidingChatModel

ASKED: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ASKED.clear()


def echo(messages: list[BaseMessage], call: dict[str, Any]) -> str:
    question = str(messages[-1].content)
    ASKED[question] += 1
    return f"re: {question}"


MODEL = wrap(DecidingChatModel(decide=echo))


class Research(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    notes: Annotated[list[str], operator.add]


async def research(state: Research) -> dict[str, Any]:
    topic = str(state["messages"][-1].content)
    outline = await MODEL.ainvoke([HumanMessage(f"outline {topic}")])
    sources = await MODEL.ainvoke([HumanMessage(f"sources {outline.content}")])
    return {"notes": [str(sources.content)]}


def fan_out(state: Research) -> list[Send]:
    return [Send("detail", {"messages": [], "notes": [f"part {i}"]}) for i in range(3)]


def detail(state: Research) -> dict[str, Any]:
    """A sync node: under ainvoke LangGraph runs it in a worker thread."""
    return {"notes": [str(MODEL.invoke([HumanMessage(f"detail {state['notes'][0]}")]).content)]}


async def side(state: Research) -> dict[str, Any]:
    """A node that runs beside ``research`` in the same step."""
    return {"notes": [str((await MODEL.ainvoke([HumanMessage("side note")])).content)]}


async def write(state: Research) -> dict[str, Any]:
    joined = ", ".join(sorted(state["notes"]))
    return {"messages": [await MODEL.ainvoke([HumanMessage(f"write {len(state['notes'])} notes: {joined}")])]}


def research_graph(saver: Any) -> Any:
    g = StateGraph(Research)
    for name, node in (("research", research), ("side", side), ("detail", detail), ("write", write)):
        g.add_node(name, node)
    g.add_edge(START, "research")
    g.add_edge(START, "side")
    g.add_conditional_edges("research", fan_out, ["detail"])
    g.add_edge("detail", "write")
    g.add_edge("side", "write")
    g.add_edge("write", END)
    return g.compile(checkpointer=saver)


def two_turns(graph: Any) -> Any:
    """A workflow that invokes the graph twice on one thread (two user turns)."""

    @durable.workflow
    async def chat(topic: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": f"chat-{topic}"}}
        await graph.ainvoke({"messages": [("user", topic)]}, config)
        out = await graph.ainvoke({"messages": [("user", f"more {topic}")]}, config)
        await asyncio.sleep(0)
        return {"messages": [m.content for m in out["messages"]], "notes": sorted(out["notes"])}

    return chat


def thread(world: durable.World, thread_id: str) -> tuple[list[Any], int]:
    """The stored thread: its newest state's messages, and how many checkpoints it holds."""
    saver = DurableSaver(world)
    config = {"configurable": {"thread_id": thread_id}}
    latest = saver.get_tuple(config)
    assert latest is not None
    messages = [(type(m).__name__, m.content) for m in latest.checkpoint["channel_values"]["messages"]]
    return messages, len(list(saver.list(config)))


def test_concurrent_tasks_replay_and_the_thread_ends_as_an_uncrashed_runs(worlds: Worlds) -> None:
    """Parallel nodes, Send fan-out to sync nodes, two turns: each replay gives the uncrashed result."""
    reference = durable.memory_world()
    expected = asyncio.run(
        durable.run_workflow(
            two_turns(research_graph(DurableSaver(reference))), "tides", world=reference, run_id="r"
        )
    )
    world = worlds.open()
    replayed = asyncio.run(
        run_replaying_always(two_turns(research_graph(DurableSaver(world))), "tides", world=world, run_id="r")
    )
    assert replayed.output == expected
    assert thread(worlds.open(), "chat-tides") == thread(reference, "chat-tides")
    messages, _ = thread(reference, "chat-tides")
    assert [m for m in messages if m[0] == "HumanMessage"] == [
        ("HumanMessage", "tides"),
        ("HumanMessage", "more tides"),
    ]
    keys = {e.key for e in worlds.open().events("r") if e.type == "effect.receipt"}  # type: ignore[attr-defined]
    model = "model:langchain__DecidingChatModel"
    assert {f"lg[detail@2:push.0].{model}#0", f"lg[side@1:pull.side].{model}#0"} <= keys


def test_a_crash_in_the_second_turn_neither_repeats_the_input_nor_a_finished_node(worlds: Worlds) -> None:
    """Killed in turn two: the resume replays turn one as it was and sends only the call that was cut."""
    graph = research_graph(DurableSaver(worlds.open()))
    cut = worlds.crashing(
        lambda t, d: t == "effect.receipt" and d["key"].startswith("lg[write@8:")
    )  # turn two
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(two_turns(graph), "tides", world=cut, run_id="r"))
    before = dict(ASKED)
    world = worlds.open()
    out = asyncio.run(
        durable.run_workflow(two_turns(research_graph(DurableSaver(world))), "tides", world=world, run_id="r")
    )
    again = {q: n - before.get(q, 0) for q, n in ASKED.items() if n != before.get(q, 0)}
    assert list(again.values()) == [1]  # only the write of turn two, cut, is asked again
    assert out["messages"][0] == "tides" and out["messages"].count("tides") == 1
    assert out["messages"].count("more tides") == 1


@task
async def summarize(part: str) -> str:
    return str((await MODEL.ainvoke([HumanMessage(f"summary {part}")])).content)


def functional(saver: Any) -> Any:
    @entrypoint(checkpointer=saver)
    async def digest(parts: list[str]) -> list[str]:
        return list(await asyncio.gather(*(summarize(p) for p in parts)))

    return digest


def test_gathered_tasks_of_the_functional_api_replay(worlds: Worlds) -> None:
    """@task calls gathered in an @entrypoint each call the model in a scope of their own, and replay."""
    world = worlds.open()
    digest = functional(DurableSaver(world))

    @durable.workflow
    async def run(parts: list[str]) -> list[str]:
        out = await digest.ainvoke(parts, {"configurable": {"thread_id": "digest"}})
        await asyncio.sleep(0)
        return list(out)

    result = asyncio.run(run_replaying_always(run, ["a", "b", "c"], world=world, run_id="r"))
    assert result.output == ["re: summary a", "re: summary b", "re: summary c"]


class Doc(TypedDict):
    parts: list[str]
    done: Annotated[list[str], operator.add]


def subgraph_in_branches(saver: Any) -> Any:
    async def polish(state: Doc) -> dict[str, Any]:
        return {"done": [str((await MODEL.ainvoke([HumanMessage(f"polish {state['parts'][0]}")])).content)]}

    inner = StateGraph(Doc)
    inner.add_node("polish", polish)
    inner.add_edge(START, "polish")
    inner_graph = inner.compile()

    async def each(state: Doc) -> dict[str, Any]:
        out = await inner_graph.ainvoke({"parts": state["parts"], "done": []})
        return {"done": out["done"]}

    outer = StateGraph(Doc)
    outer.add_node("each", each)
    outer.add_conditional_edges(
        START, lambda s: [Send("each", {"parts": [p], "done": []}) for p in s["parts"]]
    )
    outer.add_edge("each", END)
    return outer.compile(checkpointer=saver)


def test_a_subgraph_run_by_send_branches_replays(worlds: Worlds) -> None:
    """The same subgraph in three Send branches at once: its calls are keyed below each branch's task."""
    world = worlds.open()
    graph = subgraph_in_branches(DurableSaver(world))

    @durable.workflow
    async def run(parts: list[str]) -> list[str]:
        out = await graph.ainvoke({"parts": parts, "done": []}, {"configurable": {"thread_id": "doc"}})
        await asyncio.sleep(0)
        return sorted(out["done"])

    result = asyncio.run(run_replaying_always(run, ["x", "y", "z"], world=world, run_id="r"))
    assert result.output == ["re: polish x", "re: polish y", "re: polish z"]


def test_a_sync_graph_whose_tasks_need_the_blocked_loop_is_refused_not_hung(worlds: Worlds) -> None:
    """graph.invoke (no saver) with two sync nodes at once: their model calls are refused with advice."""

    def left(state: Research) -> dict[str, Any]:
        return {"notes": [str(MODEL.invoke("left").content)]}

    def right(state: Research) -> dict[str, Any]:
        return {"notes": [str(MODEL.invoke("right").content)]}

    g = StateGraph(Research)
    g.add_node("left", left)
    g.add_node("right", right)
    g.add_edge(START, "left")
    g.add_edge(START, "right")
    graph = g.compile()

    fixed = {"yes": False}

    @durable.workflow
    async def both(topic: str) -> list[str]:
        start = {"messages": [], "notes": []}
        out = await graph.ainvoke(start) if fixed["yes"] else graph.invoke(start)
        return sorted(out["notes"])

    world = worlds.open()
    with pytest.raises(durable.ConfigurationError, match=r"await graph.ainvoke") as info:
        asyncio.run(durable.run_workflow(both, "x", world=world, run_id="r"))
    assert "retry_failed=True" in str(info.value)
    fixed["yes"] = True  # the advice followed: the graph awaited, the run resumed
    again = durable.run_workflow(both, "x", world=world, run_id="r", retry_failed=True)
    assert len(asyncio.run(again)) == 2


class Draft(TypedDict):
    topic: str
    draft: str
    final: str


def approval_graph(saver: Any) -> Any:
    async def draft(state: Draft) -> dict[str, Any]:
        return {"draft": str((await MODEL.ainvoke([HumanMessage(f"draft {state['topic']}")])).content)}

    async def review(state: Draft) -> dict[str, Any]:
        verdict = interrupt({"draft": state["draft"]})
        return {"final": str((await MODEL.ainvoke([HumanMessage(f"final ({verdict})")])).content)}

    g = StateGraph(Draft)
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=saver)


def approved(graph: Any) -> Any:
    @durable.workflow
    async def approve(topic: str) -> str:
        config = {"configurable": {"thread_id": f"approve-{topic}"}}
        out = await graph.ainvoke({"topic": topic}, config)
        while "__interrupt__" in out:
            out = await graph.ainvoke(
                Command(resume=durable.interrupt([i.value for i in out["__interrupt__"]])), config
            )
        return str(out["final"])

    return approve


def test_an_interrupt_in_a_node_is_answered_through_the_run(worlds: Worlds) -> None:
    """interrupt() ends the run interrupted with its value; resume= answers it; no model call is repeated."""
    world = worlds.open()
    wf = approved(approval_graph(DurableSaver(world)))
    with pytest.raises(durable.RunInterrupted) as info:
        asyncio.run(durable.run_workflow(wf, "tides", world=world, run_id="r"))
    assert info.value.value == [{"draft": "re: draft tides"}]
    out = asyncio.run(durable.run_workflow(wf, "tides", world=worlds.open(), run_id="r", resume="ship it"))
    assert out == "re: final (ship it)"
    assert Counter({"draft tides": 1, "final (ship it)": 1}) == ASKED


def test_durable_interrupt_in_a_node_waits_and_the_node_runs_again_with_the_answer(worlds: Worlds) -> None:
    """durable.interrupt in a node (past a RetryPolicy) ends the run interrupted; the answer reaches it."""

    async def ask(state: Research) -> dict[str, Any]:
        draft = str((await MODEL.ainvoke([HumanMessage("draft")])).content)
        return {"notes": [draft, str(durable.interrupt({"draft": draft}))]}

    g = StateGraph(Research)
    g.add_node("ask", ask, retry_policy=RetryPolicy(retry_on=lambda e: True))
    g.add_edge(START, "ask")
    world = worlds.open()
    graph = g.compile(checkpointer=DurableSaver(world))

    @durable.workflow
    async def run(topic: str) -> list[str]:
        out = await graph.ainvoke({"messages": [], "notes": []}, {"configurable": {"thread_id": topic}})
        return list(out["notes"])

    with pytest.raises(durable.RunInterrupted) as info:
        asyncio.run(durable.run_workflow(run, "t", world=world, run_id="r"))
    assert info.value.value == {"draft": "re: draft"}
    assert asyncio.run(durable.run_workflow(run, "t", world=world, run_id="r", resume="ok")) == [
        "re: draft",
        "ok",
    ]
    assert dict(ASKED) == {"draft": 1}


def test_a_replay_off_the_logs_path_inside_a_node_ends_the_run_past_its_retry_policy(worlds: Worlds) -> None:
    """A NondeterminismError raised in a node with RetryPolicy(retry_on=everything) is not retried."""
    prompts = {"first": "outline"}
    attempts: list[int] = []

    async def node(state: Research) -> dict[str, Any]:
        attempts.append(1)
        return {"notes": [str((await MODEL.ainvoke([HumanMessage(prompts["first"])])).content)]}

    g = StateGraph(Research)
    g.add_node("node", node, retry_policy=RetryPolicy(retry_on=lambda e: True, max_attempts=5))
    g.add_edge(START, "node")
    graph = g.compile()

    @durable.workflow
    async def run(topic: str) -> list[str]:
        out = await graph.ainvoke({"messages": [], "notes": []})
        await asyncio.sleep(0)
        return list(out["notes"])

    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                run, "x", world=worlds.crashing(lambda t, d: t == "run.completed"), run_id="r"
            )
        )
    prompts["first"] = "a changed prompt"
    attempts.clear()
    with pytest.raises(durable.NondeterminismError):
        asyncio.run(durable.run_workflow(run, "x", world=worlds.open(), run_id="r"))
    assert attempts == [1]


def test_a_cancel_during_a_tool_call_ends_the_run_cancelled(worlds: Worlds) -> None:
    """handle.cancel() while a node's tool runs: the tool finishes, the next call ends the run cancelled."""
    from langchain_core.tools import tool

    from durable.integrations.langchain import wrap_tool

    world = worlds.open()
    started = asyncio.Event
    gate: dict[str, Any] = {}

    @tool
    async def slow(order: str) -> str:
        """A tool that waits for the test."""
        gate["started"].set()
        await gate["go"].wait()
        return f"done {order}"

    wrapped = wrap_tool(slow, idempotent=True)

    async def node(state: Research) -> dict[str, Any]:
        out = await wrapped.ainvoke({"order": "o1"})
        return {"notes": [out, str((await MODEL.ainvoke([HumanMessage("after the tool")])).content)]}

    g = StateGraph(Research)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=DurableSaver(world))

    @durable.workflow
    async def run(topic: str) -> list[str]:
        out = await graph.ainvoke({"messages": [], "notes": []}, {"configurable": {"thread_id": "c"}})
        return list(out["notes"])

    async def main() -> str:
        gate["started"], gate["go"] = started(), started()
        h = durable.start_workflow(run, "x", world=world)
        await gate["started"].wait()
        await h.cancel()
        gate["go"].set()
        with pytest.raises(durable.RunCancelledError):
            await h.result(timeout=30)
        return h.run_id

    run_id = asyncio.run(main())
    assert world.events(run_id)[-1].type == "run.cancelled"
    assert ASKED["after the tool"] == 0
