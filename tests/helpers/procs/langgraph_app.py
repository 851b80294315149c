"""LangChain agents and LangGraph graphs in a process of their own, for the SIGKILL tests.

Usage:
    python -m tests.helpers.procs.langgraph_app run WORKFLOW INPUT RUN_ID
        runs (or resumes) one workflow with ``run_workflow`` and prints
        ``{"output": ...}``, or ``{"error": <type>, "message": ...}``.
    python -m tests.helpers.procs.langgraph_app
        serves the ``langgraph`` queue (prints ``serving`` once it does) until SIGTERM.

The world is a Postgres one when ``DURABLE_TEST_PG_DSN`` and
``DURABLE_TEST_SCHEMA`` are set, else ``$DURABLE_TEST_DIR/data``. Every model
answer and tool body appends its name to ``$DURABLE_TEST_DIR/bodies.log``
(fsynced), so the parent counts what really ran across processes. When the
body named ``$DURABLE_TEST_STOP_AT`` runs for the first time, the process
prints ``STOPPED <name>`` and waits to be killed. The models decide from
their messages (``DecidingChatModel``), so a model asked again in a new
process answers the same.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import durable
from durable.errors import DurableControl
from durable.integrations.langchain import DurableMiddleware, wrap, wrap_tool
from durable.integrations.langgraph import DurableSaver
from tests.helpers.langchain_doubles import DecidingChatModel, tool_call, tool_loop, turn

queue = durable.Queue("langgraph")


def here() -> Path:
    return Path(os.environ["DURABLE_TEST_DIR"])


def open_world() -> durable.World:
    dsn, schema = os.environ.get("DURABLE_TEST_PG_DSN"), os.environ.get("DURABLE_TEST_SCHEMA")
    if dsn and schema:
        return durable.postgres_world(dsn, schema=schema, lease=1.5, max_size=4)
    return durable.local_world(here() / "data")


def seen() -> list[str]:
    log = here() / "bodies.log"
    return log.read_text().split() if log.exists() else []


def ran(name: str) -> None:
    """Count one real run of ``name``; stop there (the first time) when the parent asked."""
    stop = os.environ.get("DURABLE_TEST_STOP_AT")
    first = name not in seen()
    with open(here() / "bodies.log", "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    if name == stop and first:
        print(f"STOPPED {name}", flush=True)
        threading.Event().wait()  # bodies run in executor threads: the loop stays free


WORLD: durable.World | None = None


def world() -> durable.World:
    global WORLD
    if WORLD is None:
        WORLD = open_world()
    return WORLD


# -- a create_agent agent: lookup, then refund, then the answer ----------------------------


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    ran(f"lookup-{order}")
    return f"{order}: paid 30 EUR"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    ran(f"refund-{order}")
    return f"refunded {order}"


def support(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
    t = turn(messages)
    ran(f"model-{t}")
    if t == 0:
        return AIMessage(content="", tool_calls=[tool_call("lookup", {"order": "o1"}, "call_lookup")])
    if t == 1:
        return AIMessage(content="", tool_calls=[tool_call("refund", {"order": "o1"}, "call_refund")])
    return "refunded o1 (30 EUR)"


def agent(wrapped: bool) -> Any:
    model = DecidingChatModel(decide=support)
    if wrapped:
        return create_agent(
            wrap(model),
            [wrap_tool(lookup, idempotent=True), wrap_tool(refund)],
            checkpointer=DurableSaver(world()),
        )
    return create_agent(
        model,
        [lookup, refund],
        middleware=[DurableMiddleware(tools={"lookup": {"idempotent": True}})],
        checkpointer=DurableSaver(world()),
    )


async def answer(agent: Any, question: str, thread: str) -> str:
    out = await agent.ainvoke({"messages": [("user", question)]}, {"configurable": {"thread_id": thread}})
    return str(out["messages"][-1].content)


@durable.workflow
async def agent_with_middleware(question: str) -> str:
    return await answer(agent(False), question, "support-m")


@durable.workflow
async def agent_wrapped(question: str) -> str:
    return await answer(agent(True), question, "support-w")


# -- a node that asks the model twice ------------------------------------------------------


def researcher(messages: list[BaseMessage], call: dict[str, Any]) -> str:
    text = str(messages[-1].content)
    ran(f"model-{text.split()[0]}")
    return f"notes on {text}"


class Research(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]


@durable.workflow
async def research(topic: str) -> list[str]:
    model = wrap(DecidingChatModel(decide=researcher))

    async def gather(state: Research) -> dict[str, Any]:
        outline = await model.ainvoke([HumanMessage(f"outline {state['topic']}")])
        sources = await model.ainvoke([HumanMessage(f"sources {outline.content}")])
        return {"notes": [str(outline.content), str(sources.content)]}

    async def summarize(state: Research) -> dict[str, Any]:
        summary = await model.ainvoke([HumanMessage(f"summary {len(state['notes'])}")])
        return {"notes": [str(summary.content)]}

    g = StateGraph(Research)
    g.add_node("gather", gather)
    g.add_node("summarize", summarize)
    g.add_edge(START, "gather")
    g.add_edge("gather", "summarize")
    g.add_edge("summarize", END)
    graph = g.compile(checkpointer=DurableSaver(world()))
    out = await graph.ainvoke(
        {"topic": topic, "notes": []}, {"configurable": {"thread_id": f"research-{topic}"}}
    )
    return list(out["notes"])


# -- a draft a person approves with interrupt() --------------------------------------------


class Draft(TypedDict):
    topic: str
    draft: str
    final: str


@durable.workflow
async def approval(topic: str) -> str:
    model = wrap(DecidingChatModel(decide=researcher))

    async def write(state: Draft) -> dict[str, Any]:
        return {"draft": str((await model.ainvoke([HumanMessage(f"draft {state['topic']}")])).content)}

    async def review(state: Draft) -> dict[str, Any]:
        verdict = interrupt({"draft": state["draft"]})
        final = await model.ainvoke([HumanMessage(f"final {state['draft']} ({verdict})")])
        return {"final": str(final.content)}

    g = StateGraph(Draft)
    g.add_node("write", write)
    g.add_node("review", review)
    g.add_edge(START, "write")
    g.add_edge("write", "review")
    g.add_edge("review", END)
    graph = g.compile(checkpointer=DurableSaver(world()))
    config = {"configurable": {"thread_id": f"approval-{topic}"}}
    out = await graph.ainvoke({"topic": topic}, config)
    while "__interrupt__" in out:
        verdict = durable.interrupt([i.value for i in out["__interrupt__"]])
        out = await graph.ainvoke(Command(resume=verdict), config)
    return str(out["final"])


# -- a plain tool, cut ---------------------------------------------------------------------


@tool
def charge(order: str) -> str:
    """Charge an order's card."""
    ran(f"charge-{order}")
    return f"charged {order}"


def cashier(messages: list[BaseMessage], call: dict[str, Any]) -> AIMessage | str:
    order = str(messages[0].content)
    if turn(messages) == 0:
        return AIMessage(content="", tool_calls=[tool_call("charge", {"order": order}, "call_charge")])
    return f"charged {order}"


@durable.workflow
async def checkout(order: str) -> str:
    graph = tool_loop(
        cashier, [wrap_tool(charge)], handle_tool_errors=True, checkpointer=DurableSaver(world())
    )
    out = await graph.ainvoke(
        {"messages": [HumanMessage(order)]}, {"configurable": {"thread_id": f"co-{order}"}}
    )
    return str(out["messages"][-1].content)


WORKFLOWS = [agent_with_middleware, agent_wrapped, research, approval, checkout]


async def run(name: str, value: str, run_id: str) -> None:
    wf = {w.__name__: w for w in WORKFLOWS}[name]
    try:
        out = await durable.run_workflow(wf, value, world=world(), run_id=run_id)
        print(json.dumps({"output": out}), flush=True)
    except (durable.DurableError, DurableControl) as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)


async def serve() -> None:
    worker = durable.Worker(world(), workflows=WORKFLOWS, queues=[queue], name=f"langgraph-{os.getpid()}")
    await worker.start()
    print("serving", flush=True)
    try:
        await worker.run()
    finally:
        world().close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        asyncio.run(run(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        asyncio.run(serve())
