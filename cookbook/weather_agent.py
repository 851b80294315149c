"""pydantic-ai's weather agent example, made durable: existing agent code, a few changed lines.

pydantic-ai ships an example application, a weather agent: one tool turns
a place name into coordinates (a pydantic model, ``LatLng``), another reads
the weather at those coordinates, and the model reads the tools' answers to
write a short forecast. This recipe is an agent of that shape, written for
this cookbook: its tools answer from small tables instead of web APIs and
its model is pydantic-ai's offline ``FunctionModel`` with a scripted
function, so it runs without a network or a key.

What changed to make the existing code durable, and why:

1. ``capabilities=[Durability()]`` and a ``name`` on the ``Agent``: every
   model request and tool call is recorded.
2. ``agent.run`` is called inside a ``@durable.workflow``.
3. The deps (here a client object standing for an HTTP client) are built
   inside the workflow: a connection is no workflow input and cannot be
   stored in the log.
4. The date in the instructions comes from ``durable.now()`` instead of
   ``date.today()``: a resume on another day then sees the date the first
   run saw, so the model request's identity still matches.
5. The two read-only tools say so (``tool_options(idempotent=True)``), so a
   tool call cut by a kill is simply made again.

The model code reads ``location.lat`` from the ``LatLng`` the tool returned,
as the example's own code does: inside a run the conversation holds the
same objects as outside one, on the first run and after a resume.

Run it (needs ``pip install "little-workflow[pydantic-ai]"``):

    python cookbook/weather_agent.py

It starts the agent in a child process, kills it with SIGKILL while the
second weather lookup is in flight, resumes the same run in this process and
prints how often each model request and tool call really ran.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import _crashdemo as demo

import durable

try:
    from pydantic import BaseModel
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from durable.integrations.pydantic_ai import Durability, tool_options
except ImportError:  # the optional dependency is missing: say so and succeed
    print('This recipe needs pydantic-ai: pip install "little-workflow[agents]". Skipping.')
    sys.exit(0)

RUN_ID = "forecast-bergen-porto"
READ_ONLY = tool_options(idempotent=True)
PLACES = {"Bergen": (60.39, 5.32), "Porto": (41.15, -8.61)}
WEATHER = {(60.39, 5.32): ("rain", 9), (41.15, -8.61): ("sunny", 24)}


class LatLng(BaseModel):
    """Where a place is."""

    lat: float
    lng: float


class WeatherClient:
    """Stands for the example's HTTP client: a live connection, opened per run, never stored."""

    def __init__(self) -> None:
        self.open = True

    def close(self) -> None:
        """Close the connection (the workflow does, when the run ends or fails)."""
        self.open = False


@dataclass
class Deps:
    client: WeatherClient


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


async def forecast_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: locate both places, read both forecasts, answer."""
    turn = sum(1 for m in messages if isinstance(m, ModelResponse))
    await demo.ran(f"model-turn-{turn}")
    returned = tool_returns(messages)
    if turn == 0:
        return ModelResponse(
            parts=[ToolCallPart("get_lat_lng", {"place": p}, tool_call_id=f"loc_{p}") for p in PLACES]
        )
    if turn == 1:
        # the example's model code reads attributes of the LatLng the tool returned
        located = [r.content for r in returned if r.tool_name == "get_lat_lng"]
        return ModelResponse(
            parts=[
                ToolCallPart("get_weather", {"lat": at.lat, "lng": at.lng}, tool_call_id=f"wx_{i}")
                for i, at in enumerate(located)
            ]
        )
    weather = [r.content for r in returned if r.tool_name == "get_weather"]
    text = "; ".join(
        f"{place}: {w['description']}, {w['celsius']} C" for place, w in zip(PLACES, weather, strict=True)
    )
    return ModelResponse(parts=[TextPart(text)])


agent = Agent(
    FunctionModel(forecast_model),
    name="weather",  # change 1: a name, and the capability
    deps_type=Deps,
    capabilities=[Durability()],
)


@agent.instructions
def today(ctx: RunContext[Deps]) -> str:
    # change 4: durable.now() instead of date.today(); recorded once, the same on a resume
    return f"Today is {durable.now().date().isoformat()}. Be brief."


@agent.tool(metadata=READ_ONLY)  # change 5
async def get_lat_lng(ctx: RunContext[Deps], place: str) -> LatLng:
    """Where a place is."""
    assert ctx.deps.client.open
    await demo.ran(f"get_lat_lng-{place}")
    lat, lng = PLACES[place]
    return LatLng(lat=lat, lng=lng)


@agent.tool(metadata=READ_ONLY)
async def get_weather(ctx: RunContext[Deps], lat: float, lng: float) -> dict[str, object]:
    """The weather at a point."""
    assert ctx.deps.client.open
    description, celsius = WEATHER[(lat, lng)]
    await demo.ran(f"get_weather-{description}")
    return {"description": description, "celsius": celsius}


@durable.workflow  # change 2
async def forecast(question: str) -> str:
    client = WeatherClient()  # change 3: the connection is built inside the workflow, on every attempt
    try:
        return (await agent.run(question, deps=Deps(client))).output
    finally:
        client.close()


async def attempt(data_dir: Path) -> str:
    with durable.local_world(data_dir) as world:
        return await durable.run_workflow(  # type: ignore[no-any-return]
            forecast, "What is the weather like in Bergen and in Porto?", world=world, run_id=RUN_ID
        )


def main() -> int:
    return demo.main(__file__, __doc__ or "", attempt, stop_at="get_weather-sunny")


if __name__ == "__main__":
    sys.exit(main())
