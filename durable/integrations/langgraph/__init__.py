"""Keep a LangGraph graph's threads in a durable world, and resume its nodes call by call: ``DurableSaver``.

``graph.compile(checkpointer=DurableSaver(world))`` keeps checkpoints and
pending writes in the world's store (SQLite beside the log, PostgreSQL, or
memory; encrypted under the world's codec), and passes LangGraph's own
checkpointer conformance suite. A compiled graph awaited inside a
``@durable.workflow``, its models and tools made durable with
``durable.integrations.langchain`` (``wrap``, ``wrap_tool``, or
``DurableMiddleware`` for a ``create_agent`` agent), resumes a node a crash
cut halfway without repeating the model and tool calls that node had
finished: the saver's reads and writes are recorded like calls, and the
checkpoint ids a graph draws inside a run are recorded values, so a graph
executed again by a resume replays to where it stopped.

An ``interrupt()`` in a node returns from ``ainvoke`` with ``__interrupt__``;
answer it through ``durable.interrupt`` (so ``handle.answer()`` and ``little
answer`` answer it from anywhere) and resume the graph with
``Command(resume=...)``.

Needs the ``langgraph`` extra (``pip install "little-workflow[langgraph]"``).
"""

from __future__ import annotations

from ._saver import DurableSaver

__all__ = ["DurableSaver"]

DurableSaver.__module__ = __name__  # reprs, docs and doctest name the public module
