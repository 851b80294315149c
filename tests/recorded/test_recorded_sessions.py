"""A recorded agent-session log replayed against the code, as it is and deliberately drifted.

``tests/data/orchestrator_session.jsonl`` holds the rows of a run of ``orchestrate``
(``tests/helpers/session_app.py``) that stopped at an interrupt after its session's
model and tool calls. A change to how manifests are computed (a signature's text,
a definition hash) would make every such run drift after an upgrade; replaying the
recorded log catches it. Regenerate it only for a deliberate format change:
``python -c "from tests.recorded.test_recorded_sessions import record; record()"``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import durable
from durable.store import Append
from tests.conftest import Worlds
from tests.helpers.recorded import import_as

DATA = Path(__file__).parents[1] / "data" / "orchestrator_session.jsonl"
# The module name the recorded manifests carry (where this code lived when it was recorded).
app = import_as("tests.test_recorded_sessions", Path(__file__).parents[1] / "helpers" / "session_app.py")
MODELS, CALLS, build, lookup, lookup_v2 = app.MODELS, app.CALLS, app.build, app.lookup, app.lookup_v2


def load(world: durable.World) -> None:
    rows = [tuple(json.loads(line)) for line in DATA.read_text().splitlines()]
    world.log.append([Append("r", rows, world.log.fence("r"), "interrupted", ("orchestrate", None))])  # type: ignore[arg-type]


def test_recorded_session_resumes_without_calls(worlds: Worlds) -> None:
    """The recorded run resumes with today's code, replaying its model and tool calls."""
    world = worlds.open()
    load(world)
    CALLS.clear()
    out = asyncio.run(
        durable.run_workflow(build(lookup), "ada", world=world, run_id="r", models=MODELS, resume="yes")
    )
    assert out == "answer 0/ADA/yes"
    assert not CALLS


def test_recorded_session_with_a_drifted_tool_fails_closed(worlds: Worlds) -> None:
    """The recorded run resumed with a tool whose signature changed raises CapabilityDriftError."""
    world = worlds.open()
    load(world)
    CALLS.clear()
    with pytest.raises(durable.CapabilityDriftError, match=r"availableTools\[0\]\.signature"):
        asyncio.run(
            durable.run_workflow(
                build(lookup_v2), "ada", world=world, run_id="r", models=MODELS, resume="yes"
            )
        )
    assert not CALLS


def test_recorded_session_with_another_model_fails_closed(worlds: Worlds) -> None:
    """The recorded run resumed with another model behind its slot raises CapabilityDriftError."""
    world = worlds.open()
    load(world)
    with pytest.raises(durable.CapabilityDriftError, match='orchestratorModelSlotId: "gpt-5" → "gpt-4o"'):
        asyncio.run(
            durable.run_workflow(
                build(lookup), "ada", world=world, run_id="r", models={"orchestrator": "gpt-4o"}, resume="yes"
            )
        )


def record() -> None:
    world = durable.memory_world()
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(build(lookup), "ada", world=world, run_id="r", models=MODELS))
    DATA.write_text("".join(json.dumps(list(row)) + "\n" for row in world.log.read("r")))
