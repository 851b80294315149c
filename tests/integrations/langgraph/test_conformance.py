"""DurableSaver passes LangGraph's own checkpointer conformance suite, every capability, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate

from durable.integrations.langgraph import DurableSaver
from tests.conftest import Worlds

CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def test_the_saver_passes_langgraphs_conformance_suite(
    worlds: Worlds, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate() runs all eight capability suites (base and extended) and every test passes."""
    world = worlds.open()

    @checkpointer_test(name=f"DurableSaver[{worlds.kind}]")
    async def saver() -> AsyncIterator[DurableSaver]:
        yield DurableSaver(world)

    report = asyncio.run(validate(saver))
    report.print_report()
    results = report.results
    assert {name for name, r in results.items() if r.detected} == CAPABILITIES
    assert report.passed_all(), {name: r.failures for name, r in results.items() if r.failures}
    assert sum(r.tests_passed for r in results.values()) >= 81
    with capsys.disabled():  # the suite's own report, in the test output
        print(f"\nDurableSaver[{worlds.kind}]: {report.conformance_level()}, ", end="")
        print(
            ", ".join(
                f"{name} {r.tests_passed}/{r.tests_passed + r.tests_failed}" for name, r in results.items()
            )
        )
