"""The agent runner: the SDK's default runner made durable inside runs, and a pass-through outside.

``install()`` makes a ``DurableAgentRunner`` the SDK's default agent runner
(the one ``Runner.run``, ``run_streamed`` and ``run_sync`` call), holding the
runner it replaces: outside a durable run every call goes to that one
unchanged. ``DurableRunner`` does the same for its own calls, and for the
runs nested in them (an agent used as a tool, a guardrail agent) while it runs.

Inside a run, an agent run:

1. wraps the agent graph in place (``_instrument``) and the run's model provider;
2. opens ``durable.session(<starting agent>)`` with the graph's manifest, so a
   resume with other agents, instructions, tools or settings fails closed;
3. runs the SDK's own loop in that session, every model response and tool call
   recorded (``_model``, ``_tools``);
4. answers interruptions (tools that need approval) through ``durable.interrupt``;
5. ends the run on a durable error as itself, wherever the SDK wrapped it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from agents import Agent, RunConfig, Runner, RunResult, RunResultStreaming
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from agents.run_state import RunState

import durable

from ...engine import (
    Carried,
    HeldSession,
    durable_cause,
    effect_body_scope,
    effect_body_scope_sync,
    hold_session,
    in_effect_body,
)
from .._effects import in_run
from .._manifest import name_part
from ._approvals import answered
from ._instrument import instrument
from ._manifest import manifest
from ._model import durable_provider
from ._session import recorded_session
from ._state import CURRENT_RUN, AgentRun
from ._tracing import quiet_replays, trace_id

_ACTIVE: ContextVar[bool] = ContextVar("durable_openai_agents_active", default=False)
"""Set while ``DurableRunner`` runs: nested runs through the default runner are durable too."""


def _surfaced(exc: BaseException, *, nested: bool) -> BaseException:
    """What an agent run that stopped on ``exc`` raises: a durable error as itself (carried when nested)."""
    cause = durable_cause(exc)
    if cause is None or cause is exc:
        return exc
    if nested:
        return exc if isinstance(exc, Carried) else Carried(cause)
    return cause


def _config(run_config: Any) -> tuple[RunConfig, bool]:
    """The run's ``RunConfig`` with a durable model provider; whether the provider is this run's own."""
    if run_config is None:
        config, own = RunConfig(), True
    elif isinstance(run_config, dict):
        config, own = RunConfig(**run_config), "model_provider" not in run_config
    else:
        config, own = run_config, False
    return dataclasses.replace(config, model_provider=durable_provider(config.model_provider)), own


class _Opened:
    """One durable agent run's session, state and prepared arguments."""

    def __init__(self, agent: Any, input: Any, kwargs: dict[str, Any]) -> None:
        config, self.owns_provider = _config(kwargs.get("run_config"))
        start = getattr(input, "_current_agent", None) if isinstance(input, RunState) else None
        instrument(agent, config)
        if start is not None:
            instrument(start)
        quiet_replays()
        held = hold_session(name_part(agent.name), tools=manifest(agent))
        assert held is not None  # callers are inside a run
        self.held: HeldSession = held
        if config.trace_id is None and held.session.path is not None and held.session.run_id is not None:
            config = dataclasses.replace(config, trace_id=trace_id(held.session.run_id, held.session.path))
        session = kwargs.get("session")
        self.kwargs = {**kwargs, "run_config": config}
        if session is not None:
            self.kwargs["session"] = recorded_session(session)
        self.state = AgentRun(agent.name, resumed=held.resumed)

    async def close_provider(self) -> None:
        if self.owns_provider:
            await self.kwargs["run_config"].model_provider.aclose()


async def run_durably(previous: AgentRunner, agent: Any, input: Any, kwargs: dict[str, Any]) -> RunResult:
    """``previous.run(agent, input, **kwargs)`` as a durable agent run of the running durable run."""
    if in_effect_body():  # an agent run inside a tool's body: its calls go below the tool's call
        async with effect_body_scope():
            return await run_durably(previous, agent, input, kwargs)
    opened = _Opened(agent, input, kwargs)
    nested = CURRENT_RUN.get() is not None
    token = CURRENT_RUN.set(opened.state)
    try:
        with opened.held.current():
            result = await previous.run(agent, input, **opened.kwargs)
            while result.interruptions:
                state = result.to_state()
                answered(result.last_agent.name, list(result.interruptions), state)
                result = await previous.run(agent, state, **opened.kwargs)
    except BaseException as exc:
        opened.held.close(exc)
        surfaced = _surfaced(exc, nested=nested)
        if surfaced is exc:
            raise
        raise surfaced from exc
    finally:
        CURRENT_RUN.reset(token)
        await opened.close_provider()
    opened.held.close()
    return result


def stream_durably(
    previous: AgentRunner, agent: Any, input: Any, kwargs: dict[str, Any]
) -> RunResultStreaming:
    """``previous.run_streamed(...)`` as a durable agent run; its events stream live."""
    if (
        in_effect_body()
    ):  # inside a tool's body: its calls go below the tool's call (its task keeps the scope)
        with effect_body_scope_sync():
            return stream_durably(previous, agent, input, kwargs)
    opened = _Opened(agent, input, kwargs)
    nested = CURRENT_RUN.get() is not None
    token = CURRENT_RUN.set(opened.state)
    try:
        with opened.held.current():  # the SDK's loop task is created here, in the session's scope
            result = previous.run_streamed(agent, input, **opened.kwargs)
    finally:
        CURRENT_RUN.reset(token)
    events = result.stream_events

    async def stream_events() -> AsyncIterator[Any]:
        current = result
        try:
            async for event in events():
                yield event
            while current.interruptions:
                state = current.to_state()
                token = CURRENT_RUN.set(opened.state)
                try:
                    with opened.held.current():
                        answered(current.last_agent.name, list(current.interruptions), state)
                        current = previous.run_streamed(agent, state, **opened.kwargs)
                finally:
                    CURRENT_RUN.reset(token)
                async for event in current.stream_events():
                    yield event
        except BaseException as exc:
            opened.held.close(exc)
            await opened.close_provider()
            surfaced = _surfaced(exc, nested=nested)
            if surfaced is exc:
                raise
            raise surfaced from exc
        if current is not result:  # the continuation's outcome is the caller's result
            result.__dict__.update({k: v for k, v in current.__dict__.items() if k != "stream_events"})
        opened.held.close()
        await opened.close_provider()

    result.stream_events = stream_events  # type: ignore[method-assign]
    return result


class DurableAgentRunner(AgentRunner):
    """The SDK's agent runner, durable inside a durable run; the runner it replaced outside one.

    Args:
        previous: The runner calls go to outside a durable run (the SDK's default one).
        always: Durable in every durable run (``install()``); else only while
            ``DurableRunner`` runs.
    """

    def __init__(self, previous: AgentRunner, *, always: bool) -> None:
        self.previous = previous
        self.always = always

    def _durable(self) -> bool:
        return (self.always or _ACTIVE.get()) and (in_run() or in_effect_body())

    async def run(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run``: durable inside a run."""
        if not self._durable():
            return await self.previous.run(starting_agent, input, **kwargs)
        return await run_durably(self.previous, starting_agent, input, kwargs)

    def run_streamed(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResultStreaming:
        """``Runner.run_streamed``: durable inside a run, its events live."""
        if not self._durable():
            return self.previous.run_streamed(starting_agent, input, **kwargs)
        return stream_durably(self.previous, starting_agent, input, kwargs)

    def run_sync(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run_sync``: refused inside a run (it starts an event loop of its own)."""
        if self._durable():
            raise durable.ConfigurationError(
                "Runner.run_sync cannot run inside a durable run: it starts an event loop of its own, "
                "and the run's calls must be made on the run's loop. Make the workflow an async def "
                "and use `await DurableRunner.run(agent, input)` (or `await Runner.run(...)` after "
                "install())."
            )
        return self.previous.run_sync(starting_agent, input, **kwargs)


def _installed(*, always: bool) -> DurableAgentRunner:
    current = get_default_agent_runner()
    if isinstance(current, DurableAgentRunner):
        current.always = current.always or always
        return current
    runner = DurableAgentRunner(current, always=always)
    set_default_agent_runner(runner)
    return runner


def install() -> None:
    """Make ``agents.Runner.run`` / ``run_streamed`` / ``run_sync`` durable inside durable runs.

    The SDK's default agent runner becomes a ``DurableAgentRunner``: inside a
    ``@durable.workflow`` every agent run's model responses and tool calls are
    recorded and replayed; outside one, every call goes to the runner it
    replaced, unchanged. Calling it again does nothing.

    Example:
        >>> from durable.integrations import openai_agents
        >>> openai_agents.install()
    """
    _installed(always=True)
    quiet_replays()


class DurableRunner:
    """``agents.Runner`` whose runs are durable inside a ``@durable.workflow``; ``Runner`` outside one.

    The same signatures and results as ``agents.Runner``. While one of its runs
    goes, agent runs nested in it (an agent used as a tool, a guardrail agent)
    are durable too, each in a scope of its own.

    Example:
        >>> import asyncio
        >>> from agents import Agent
        >>> from agents.testing import ScriptedModel, assistant_message
        >>> from durable.integrations.openai_agents import DurableRunner
        >>> agent = Agent(name="support", model=ScriptedModel([[assistant_message("hello")]]))
        >>> asyncio.run(DurableRunner.run(agent, "hi")).final_output  # outside a run: Runner.run
        'hello'
    """

    @classmethod
    async def run(cls, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run(starting_agent, input, **kwargs)``, durable inside a run."""
        with _durable_runner():
            return await Runner.run(starting_agent, input, **kwargs)

    @classmethod
    def run_streamed(cls, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResultStreaming:
        """``Runner.run_streamed(starting_agent, input, **kwargs)``, durable inside a run, streamed live."""
        with _durable_runner():
            return Runner.run_streamed(starting_agent, input, **kwargs)

    @classmethod
    def run_sync(cls, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run_sync(starting_agent, input, **kwargs)``; inside a run, refused with advice."""
        with _durable_runner():
            return Runner.run_sync(starting_agent, input, **kwargs)


@contextmanager
def _durable_runner() -> Iterator[None]:
    """The durable runner installed (durable while ``DurableRunner`` runs), and this call marked as one."""
    _installed(always=False)
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
