"""A LangGraph research graph SIGKILLed in the middle of a node, resumed: what each checkpointer runs again.

The graph plans three topics, then one node investigates them (for each: a
``search`` tool call, then a model call that summarizes what it found), then
a node writes the report. A child process runs it and is killed with SIGKILL
during the third summary; a fresh process resumes it. The script does this
twice, with the same graph:

- with durable: the graph's checkpointer is ``DurableSaver(world)``, its model
  is ``wrap(model)`` and its tool ``wrap_tool(search, idempotent=True)``; the
  graph runs inside a ``@durable.workflow`` and the resume is the same
  ``run_workflow`` call with the same ``run_id``;
- with LangGraph's own SQLite checkpointer (``AsyncSqliteSaver``, from
  ``langgraph-checkpoint-sqlite``); the resume is LangGraph's
  ``graph.ainvoke(None, config)``. Without that package the script says so
  and runs the durable half only.

Every real model answer and tool call is appended to a log, so the script
counts the calls each checkpointer makes again after the kill: LangGraph
saves state between nodes, so the node runs again from its start; durable
records every call, so only the summary the kill cut is asked again. The
model is a small offline one that answers from its messages.

Run it:

    python cookbook/langgraph_research.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

import durable
from durable.integrations.langchain import wrap, wrap_tool
from durable.integrations.langgraph import DurableSaver

QUESTION = "why do tides happen"
THREAD = {"configurable": {"thread_id": "research-tides"}}
KILL_AT = "summarize:orbits"  # the third summary


def log_call(name: str) -> None:
    """One line per real call, fsynced so it survives the kill; at KILL_AT the first time, wait there."""
    path = Path(os.environ["RESEARCH_LOG"])
    first = name not in (path.read_text().split("\n") if path.exists() else [])
    with open(path, "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    if name == os.environ.get("RESEARCH_KILL_AT") and first:
        print("STOPPED", flush=True)
        threading.Event().wait()  # the parent kills the process here


class Researcher(BaseChatModel):
    """An offline chat model that answers from the last message it is given."""

    @property
    def _llm_type(self) -> str:
        return "researcher"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        ask = str(messages[-1].content)
        kind, _, subject = ask.partition(": ")
        log_call(f"{kind}:{subject.split(' |')[0]}")
        if kind == "plan":
            answer = "moon, sun, orbits"
        elif kind == "summarize":
            answer = f"{subject.split(' |')[0]} pull the oceans"
        else:
            answer = f"Tides: {subject}."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


@tool
async def search(topic: str) -> str:
    """Search the library for a topic."""
    log_call(f"search:{topic}")
    return f"three papers on {topic}"


class Research(TypedDict):
    question: str
    topics: list[str]
    notes: list[str]
    report: str


def build(durable_calls: bool, checkpointer: Any) -> Any:
    """The research graph; with ``durable_calls`` its model and tool are made durable."""
    model = wrap(Researcher()) if durable_calls else Researcher()
    lookup = wrap_tool(search, idempotent=True) if durable_calls else search

    async def plan(state: Research) -> dict[str, Any]:
        topics = (await model.ainvoke([HumanMessage(f"plan: {state['question']}")])).content
        return {"topics": str(topics).split(", ")}

    async def investigate(state: Research) -> dict[str, Any]:
        notes = []
        for topic in state["topics"]:
            found = await lookup.ainvoke({"topic": topic})
            summary = await model.ainvoke([HumanMessage(f"summarize: {topic} | {found}")])
            notes.append(str(summary.content))
        return {"notes": notes}

    async def write(state: Research) -> dict[str, Any]:
        report = await model.ainvoke([HumanMessage(f"write: {'; '.join(state['notes'])}")])
        return {"report": str(report.content)}

    g = StateGraph(Research)
    g.add_node("plan", plan)
    g.add_node("investigate", investigate)
    g.add_node("write", write)
    g.add_edge(START, "plan")
    g.add_edge("plan", "investigate")
    g.add_edge("investigate", "write")
    g.add_edge("write", END)
    return g.compile(checkpointer=checkpointer)


GRAPHS: dict[str, Any] = {}
"""The graph each process builds at start (its checkpointer needs the process's world)."""


@durable.workflow
async def research(question: str) -> str:
    out = await GRAPHS["durable"].ainvoke(
        {"question": question, "topics": [], "notes": [], "report": ""}, THREAD
    )
    return str(out["report"])


async def child_durable(data: Path) -> str:
    with durable.local_world(data) as world:
        GRAPHS["durable"] = build(True, DurableSaver(world))
        return str(await durable.run_workflow(research, QUESTION, world=world, run_id="research-tides"))


async def child_sqlite(data: Path) -> str:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(data / "checkpoints.db")) as saver:
        graph = build(False, saver)
        started = await saver.aget_tuple(THREAD) is not None
        start = None if started else {"question": QUESTION, "topics": [], "notes": [], "report": ""}
        out = await graph.ainvoke(start, THREAD)  # LangGraph's resume: invoke(None) on the thread
        return str(out["report"])


def kill_and_resume(mode: str, data: Path) -> tuple[dict[str, int], str]:
    """Run the graph in a child, SIGKILL it at KILL_AT, resume it in a new child; calls made again, report."""
    env = {**os.environ, "RESEARCH_LOG": str(data / "calls.log"), "RESEARCH_KILL_AT": KILL_AT}
    data.mkdir(parents=True, exist_ok=True)
    child = [sys.executable, __file__, "--child", mode, str(data)]
    first = subprocess.Popen(child, env=env, stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    if first.stdout.readline().strip() != "STOPPED":
        raise SystemExit(f"the {mode} child never reached {KILL_AT}")
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = (data / "calls.log").read_text().split()
    resumed = subprocess.run(
        child, env={**env, "RESEARCH_KILL_AT": ""}, capture_output=True, text=True, timeout=90
    )
    if resumed.returncode != 0:
        raise SystemExit(resumed.stderr)
    after = (data / "calls.log").read_text().split()[len(before) :]
    again = {"model": 0, "tool": 0}
    for call in after:
        if call in before:
            again["tool" if call.startswith("search:") else "model"] += 1
    return again, resumed.stdout.strip().splitlines()[-1]


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="langgraph-research-"))
    print(f"data directories: {root}")
    ours, report = kill_and_resume("durable", root / "durable")
    print(f"report: {report}")
    print(
        f"durable (DurableSaver, wrapped model and tool), killed in {KILL_AT}: made again "
        f"{ours['model']} model call(s), {ours['tool']} tool call(s)"
    )
    assert ours == {"model": 1, "tool": 0}, ours  # only the summary the kill cut
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        print("LangGraph's SQLite checkpointer: skipped (pip install langgraph-checkpoint-sqlite to compare)")
        return
    theirs, their_report = kill_and_resume("sqlite", root / "sqlite")
    assert their_report == report
    print(
        f"LangGraph's AsyncSqliteSaver, the same kill: made again "
        f"{theirs['model']} model call(s), {theirs['tool']} tool call(s)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        run = child_durable if sys.argv[2] == "durable" else child_sqlite
        print(asyncio.run(run(Path(sys.argv[3]))), flush=True)
    else:
        main()
