"""A child process running OpenAI Agents SDK agents in a durable run, for the integration's crash tests.

Usage: DURABLE_TEST_DIR=DIR python -m tests.helpers.procs.openai_agents_app SCENARIO [STOP_AT]

The world is the Postgres schema ``$DURABLE_TEST_SCHEMA`` at
``$DURABLE_TEST_PG_DSN`` when both are set, else ``DIR/data``. Every model
and tool body appends its name to ``DIR/bodies.log`` (fsynced); at
``STOP_AT`` the process prints ``STOPPED <name>`` and waits to be killed. On
success it prints ``{"output": ...}``; a run that stops on a durable error
prints ``{"error": "<type>"}`` (exit 3); an interrupted run prints
``{"interrupted": <value>}`` (exit 4).

A trace processor writes each trace started and each span ended to
``DIR/spans.log``. Scenarios (run id ``r``):

- ``durable``, ``install``, ``streamed``: the support desk (a handoff, then two
  lookups at once) through ``DurableRunner.run``, ``Runner.run`` after
  ``install()``, or ``DurableRunner.run_streamed``;
- ``plain``, ``idempotent``: a cashier whose ``charge`` tool is a plain or an
  idempotent tool (its idempotency keys go to ``DIR/keys.log``);
- ``approval``: two refunds that need approval (``little answer`` drives it on
  with ``--workflow tests.helpers.procs.openai_agents_app:refunds``);
- ``mcp``: an agent whose tools come from the cookbook's notes MCP server,
  offering the tools named in ``DIR/tools.txt``;
- ``nested``: an agent that asks the billing desk, an agent used as a tool;
- ``serve``: a worker of the queue ``agents`` for these workflows (prints
  ``serving`` once it serves).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_trace_processors
from agents.tracing import TracingProcessor

import durable
from durable.integrations.openai_agents import DurableRunner, install
from tests.helpers.openai_agents_kit import (
    Deciding,
    boss_desk,
    charging_desk,
    outputs,
    refund_desk,
    support_desk,
)

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("DURABLE_TEST_DIR", "."))
STOP_AT = ""  # set by main() from the command line


def _append(file: str, line: str) -> None:
    with open(DATA / file, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def seen() -> list[str]:
    log = DATA / "bodies.log"
    return log.read_text().split() if log.exists() else []


async def ran(name: str) -> None:
    """Count one real run of ``name``; stop there (once) when the parent asked."""
    _append("bodies.log", name)
    if name == STOP_AT and seen().count(name) == 1:
        for _ in range(3):  # event-loop turns (no time passes) so finished work is written
            await asyncio.sleep(0)
        print(f"STOPPED {name}", flush=True)
        await asyncio.Event().wait()


def open_world() -> durable.World:
    dsn, schema = os.environ.get("DURABLE_TEST_PG_DSN"), os.environ.get("DURABLE_TEST_SCHEMA")
    if dsn and schema:
        return durable.postgres_world(dsn, schema=schema, max_size=4)
    return durable.local_world(DATA / "data")


TRIAGE, _, _ = support_desk(ran)


class _KeyLog(list[str]):
    def append(self, key: str) -> None:
        _append("keys.log", key)


CASHIERS = {idem: charging_desk(ran, idempotent=idem, keys=_KeyLog()) for idem in (False, True)}
REFUNDS = refund_desk(ran)
BOSS = boss_desk(ran)


@durable.workflow
async def support(how: str) -> str:
    question = "where are A1 and B2?"
    if how == "install":
        return str((await Runner.run(TRIAGE, question)).final_output)
    if how == "streamed":
        result = DurableRunner.run_streamed(TRIAGE, question)
        async for _ in result.stream_events():
            pass
        return str(result.final_output)
    return str((await DurableRunner.run(TRIAGE, question)).final_output)


@durable.workflow
async def cashier(idempotent: bool) -> str:
    return str((await DurableRunner.run(CASHIERS[idempotent], "pay")).final_output)


@durable.workflow
async def refunds(question: str) -> str:
    return str((await DurableRunner.run(REFUNDS, question)).final_output)


@durable.workflow
async def boss(question: str) -> str:
    return str((await DurableRunner.run(BOSS, question)).final_output)


def _notes_decide(call: Any) -> Any:
    from agents.testing import assistant_message, function_call

    if not outputs(call):
        return [function_call("read_note", {"city": "oslo"}, call_id="n1")]
    if len(outputs(call)) == 1:
        return [function_call("save_note", {"city": "oslo", "text": "umbrella packed"}, call_id="n2")]
    said = [o["output"] if isinstance(o["output"], str) else o["output"][0]["text"] for o in outputs(call)]
    return [assistant_message(" / ".join(said))]


@durable.workflow
async def notes(question: str) -> str:
    from agents.mcp import MCPServerStdio

    server_script = ROOT / "cookbook" / "_notes_mcp_server.py"
    args = [str(server_script), str(DATA / "server.log"), str(DATA / "tools.txt")]
    params = {"command": sys.executable, "args": args}
    async with MCPServerStdio(params=params, name="notes", cache_tools_list=False) as server:
        agent = Agent(
            name="planner",
            instructions="Keep travel notes.",
            model=Deciding("planner", _notes_decide, ran),
            mcp_servers=[server],
        )
        result = await DurableRunner.run(agent, question)
    return str(result.final_output)


class FileProcessor(TracingProcessor):
    """Writes each trace started and each span ended, as ``trace <id>`` / ``span <kind> <name>``."""

    def on_trace_start(self, trace: Any) -> None:
        _append("spans.log", f"trace-start {trace.trace_id}")

    def on_trace_end(self, trace: Any) -> None:
        _append("spans.log", f"trace-end {trace.trace_id}")

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        data = span.span_data
        _append("spans.log", f"span {data.type} {getattr(data, 'name', '') or ''}".strip())

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


WORKFLOWS: dict[str, tuple[Any, Any]] = {
    "durable": (support, "durable"),
    "install": (support, "install"),
    "streamed": (support, "streamed"),
    "plain": (cashier, False),
    "idempotent": (cashier, True),
    "approval": (refunds, "refund both"),
    "mcp": (notes, "note for oslo"),
    "nested": (boss, "ask billing"),
}


agents_queue = durable.Queue("agents")


async def serve() -> int:
    with open_world() as world:
        workflows = [support, cashier, refunds, boss, notes]
        name = f"agents-{os.getpid()}"
        worker = durable.Worker(world, workflows=workflows, queues=[agents_queue], name=name)
        await worker.start()
        print("serving", flush=True)
        await worker.run()
    return 0


async def main(scenario: str) -> int:
    if scenario == "serve":
        return await serve()
    if scenario == "install":
        install()
    set_trace_processors([FileProcessor()])
    wf, arg = WORKFLOWS[scenario]
    with open_world() as world:
        try:
            out = await durable.run_workflow(wf, arg, world=world, run_id="r")
        except durable.RunInterrupted as exc:
            print(json.dumps({"interrupted": exc.value}), flush=True)
            return 4
        except durable.DurableError as exc:
            print(json.dumps({"error": type(exc).__name__}), flush=True)
            return 3
    print(json.dumps({"output": out}), flush=True)
    return 0


if __name__ == "__main__":
    STOP_AT = sys.argv[2] if len(sys.argv) > 2 else ""
    sys.exit(asyncio.run(main(sys.argv[1])))
