"""openai and anthropic clients wrapped with ``wrap``: recorded inside a run, untouched outside."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from _scripted_api import ScriptedAPI  # noqa: E402

import durable  # noqa: E402
from durable.integrations import anthropic as durable_anthropic  # noqa: E402
from durable.integrations import openai as durable_openai  # noqa: E402
from durable.testing import SimulatedCrash  # noqa: E402
from tests.conftest import Worlds  # noqa: E402

USER = [{"role": "user", "content": "hi"}]
LATER = [*USER, {"role": "assistant", "content": "thinking"}]


def clients(api: ScriptedAPI, *, wrapped: bool) -> tuple[Any, Any]:
    oc = openai.AsyncOpenAI(base_url=api.url + "/v1", api_key="offline", max_retries=0)
    ac = anthropic.AsyncAnthropic(base_url=api.url, api_key="offline", max_retries=0)
    if wrapped:
        return durable_openai.wrap(oc), durable_anthropic.wrap(ac)
    return oc, ac


class Box:
    """The clients of the event loop that runs now (an async client belongs to one loop)."""

    oc: Any = None
    ac: Any = None


def drive(api: ScriptedAPI, wf: Any, world: durable.World, **kw: Any) -> Any:
    """Run or resume ``wf`` with fresh wrapped clients in ``Box``, closed when the attempt ends."""

    async def attempt() -> Any:
        Box.oc, Box.ac = clients(api, wrapped=True)
        try:
            return await durable.run_workflow(wf, "q", world=world, run_id="r", **kw)
        finally:
            await Box.oc.close()
            await Box.ac.close()

    return asyncio.run(attempt())


def crash_then_resume(worlds: Worlds, api: ScriptedAPI, wf: Any, before: Any = None, **kw: Any) -> Any:
    crashing = worlds.crashing(before or (lambda t, d: t == "run.completed"))
    with pytest.raises(SimulatedCrash):
        drive(api, wf, crashing, **kw)
    return drive(api, wf, worlds.open(), **kw)


async def every_call(oc: Any, ac: Any) -> list[Any]:
    """One of each wrapped request, streamed and not, with what the caller reads from each."""
    out: list[Any] = []
    chat = await oc.chat.completions.create(model="ops", messages=USER)
    out.append((type(chat).__name__, [c.id for c in chat.choices[0].message.tool_calls]))
    stream = await oc.chat.completions.create(model="ops", messages=LATER, stream=True)
    out.append("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))
    async with oc.chat.completions.stream(model="ops", messages=LATER) as helper:
        out.append([e.type async for e in helper][-1])
        out.append((await helper.get_final_completion()).choices[0].message.content)
    response = await oc.responses.create(model="ops", input="hi")
    out.append((type(response).__name__, response.output_text))
    events = await oc.responses.create(model="ops", input="hi", stream=True)
    out.append([e.type async for e in events][-1])
    async with oc.responses.stream(model="ops", input="hi") as helper2:
        out.append((await helper2.get_final_response()).output_text)
    message = await ac.messages.create(model="claude", max_tokens=9, messages=USER)
    out.append((type(message).__name__, [b.id for b in message.content]))
    raw = await ac.messages.create(model="claude", max_tokens=9, messages=LATER, stream=True)
    out.append([e.type async for e in raw][-1])
    async with ac.messages.stream(model="claude", max_tokens=9, messages=LATER) as helper3:
        out.append("".join([t async for t in helper3.text_stream]))
        out.append((await helper3.get_final_message()).content[0].text)
    return out


EXPECTED = [
    ("ChatCompletion", ["call_a", "call_b"]),
    "answer after 1 turns ",
    "content.done",
    "answer after 1 turns ",
    ("Response", "answer after 0 turns"),
    "response.completed",
    "answer after 0 turns",
    ("Message", ["call_a", "call_b"]),
    "message_stop",
    "answer after 1 turns ",
    "answer after 1 turns ",
]


def sent(api: ScriptedAPI) -> list[tuple[str, Any]]:
    return [(r.route, r.body) for r in api.requests]


async def outside(api: ScriptedAPI, *, wrapped: bool) -> list[Any]:
    oc, ac = clients(api, wrapped=wrapped)
    try:
        return await every_call(oc, ac)
    finally:
        await oc.close()
        await ac.close()


def test_outside_a_run_wrapped_clients_send_exactly_what_plain_clients_send(api: ScriptedAPI) -> None:
    """Outside a run a wrapped client makes the same requests, with the same bodies, and returns the same."""
    plain = asyncio.run(outside(api, wrapped=False))
    plain_sent = sent(api)
    plain_helpers = [r.headers.get("x-stainless-helper-method") for r in api.requests]
    api.requests.clear()
    wrapped = asyncio.run(outside(api, wrapped=True))
    assert wrapped == plain == EXPECTED
    assert sent(api) == plain_sent
    assert [r.headers.get("x-stainless-helper-method") for r in api.requests] == plain_helpers


def test_a_resumed_run_sends_no_request_again_and_rebuilds_the_sdk_types(
    worlds: Worlds, api: ScriptedAPI
) -> None:
    """Resumed after a crash, every call replays as the SDK's own types; the server sees nothing more."""

    @durable.workflow
    async def everything(q: str) -> list[Any]:
        out = [list(x) if isinstance(x, tuple) else x for x in await every_call(Box.oc, Box.ac)]
        await asyncio.sleep(0)  # the last receipt is written on its own before the run completes
        return out

    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        drive(api, everything, crashing, models={"ops": "gpt-x"})
    first = len(api.requests)
    assert first == 9
    again = drive(api, everything, worlds.open(), models={"ops": "gpt-x"})
    assert len(api.requests) == first
    assert again == [list(x) if isinstance(x, tuple) else x for x in EXPECTED]


def test_the_runs_models_mapping_routes_a_slot_to_a_model(world: durable.World, api: ScriptedAPI) -> None:
    """create(model="ops") in a run with models={"ops": "gpt-x"} sends gpt-x; other names go as written."""

    @durable.workflow
    async def routed(q: str) -> str:
        await Box.oc.chat.completions.create(model="ops", messages=USER)
        await Box.oc.chat.completions.create(model="gpt-4o", messages=USER)
        await Box.ac.messages.create(model="ops", max_tokens=9, messages=USER)
        return "ok"

    drive(api, routed, world, models={"ops": "gpt-x"})
    assert [r.body["model"] for r in api.requests] == ["gpt-x", "gpt-4o", "gpt-x"]


def test_the_model_name_is_part_of_the_call_identity(worlds: Worlds, api: ScriptedAPI) -> None:
    """A resume whose code asks another model at a recorded position fails with NondeterminismError."""
    model = {"name": "gpt-a"}

    @durable.workflow
    async def ask(q: str) -> str:
        reply = await Box.oc.chat.completions.create(model=model["name"], messages=LATER)
        await asyncio.sleep(0)  # the receipt is written on its own before the run completes
        return str(reply.choices[0].message.content)

    with pytest.raises(SimulatedCrash):
        drive(api, ask, worlds.crashing(lambda t, d: t == "run.completed"))
    model["name"] = "gpt-b"
    with pytest.raises(durable.NondeterminismError):
        drive(api, ask, worlds.open())
    assert len(api.requests) == 1


def test_sync_clients_are_recorded_too(worlds: Worlds, api: ScriptedAPI) -> None:
    """The sync OpenAI and Anthropic clients are recorded in a run and replayed, streamed and not."""
    oc = durable_openai.wrap(openai.OpenAI(base_url=api.url + "/v1", api_key="offline", max_retries=0))
    ac = durable_anthropic.wrap(anthropic.Anthropic(base_url=api.url, api_key="offline", max_retries=0))

    @durable.workflow
    async def sync_calls(q: str) -> list[Any]:
        chat = oc.chat.completions.create(model="m", messages=USER)
        text = "".join(
            c.choices[0].delta.content or ""
            for c in oc.chat.completions.create(model="m", messages=LATER, stream=True)
        )
        with ac.messages.stream(model="m", max_tokens=9, messages=LATER) as s:
            streamed = "".join(s.text_stream)
        await asyncio.sleep(0)  # the last receipt is written on its own before the run completes
        return [type(chat).__name__, text, streamed]

    expected = ["ChatCompletion", "answer after 1 turns ", "answer after 1 turns "]
    crashing = worlds.crashing(lambda t, d: t == "run.completed")
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(sync_calls, "q", world=crashing, run_id="r"))
    assert len(api.requests) == 3
    assert asyncio.run(durable.run_workflow(sync_calls, "q", world=worlds.open(), run_id="r")) == expected
    assert len(api.requests) == 3
    oc.close()
    ac.close()


def test_a_stream_cut_by_a_crash_is_requested_again(worlds: Worlds, api: ScriptedAPI) -> None:
    """A streamed call without its terminal cursor is reissued on resume; the call before it is not."""

    @durable.workflow
    async def two(q: str) -> str:
        await Box.oc.chat.completions.create(model="m", messages=USER)
        stream = await Box.oc.chat.completions.create(model="m", messages=LATER, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream])

    cut = lambda t, d: t == "stream.cursor" and d["terminal"]  # noqa: E731
    assert crash_then_resume(worlds, api, two, cut) == "answer after 1 turns "
    assert [(r.route, r.turn, bool(r.body.get("stream"))) for r in api.requests] == [
        ("chat", 0, False),
        ("chat", 1, True),
        ("chat", 1, True),
    ]


def test_wrap_returns_the_same_client_and_wraps_once(api: ScriptedAPI) -> None:
    """wrap(client) is client, and wrapping again leaves the methods as they are."""
    oc, ac = clients(api, wrapped=True)
    create, messages_create = oc.chat.completions.create, ac.messages.create
    assert durable_openai.wrap(oc) is oc and durable_anthropic.wrap(ac) is ac
    assert oc.chat.completions.create is create and ac.messages.create is messages_create


def test_copies_made_with_with_options_are_recorded_too(worlds: Worlds, api: ScriptedAPI) -> None:
    """client.with_options(...) returns a copy that is wrapped like the client."""

    @durable.workflow
    async def copied(q: str) -> str:
        reply = await Box.oc.with_options(timeout=30).chat.completions.create(model="m", messages=LATER)
        message = await Box.ac.with_options(timeout=30).messages.create(
            model="m", max_tokens=9, messages=LATER
        )
        await asyncio.sleep(0)  # the last receipt is written on its own before the run completes
        return f"{reply.choices[0].message.content}|{message.content[0].text}"

    assert crash_then_resume(worlds, api, copied) == "answer after 1 turns|answer after 1 turns"
    assert len(api.requests) == 2


def test_inside_an_effect_body_a_wrapped_client_is_a_plain_client(worlds: Worlds, api: ScriptedAPI) -> None:
    """In the user's own @model_call the wrapped client just calls: the enclosing call is what is recorded."""

    @durable.model_call
    async def ask(messages: list[dict[str, str]]) -> str:
        reply = await Box.oc.chat.completions.create(model="m", messages=messages)
        return str(reply.choices[0].message.content)

    @durable.workflow
    async def own(q: str) -> str:
        out = await ask(LATER)
        await asyncio.sleep(0)  # the receipt is written on its own before the run completes
        return out

    assert crash_then_resume(worlds, api, own) == "answer after 1 turns"
    assert len(api.requests) == 1
    intents = [e.name for e in worlds.open().events("r") if e.type == "effect.intent"]  # type: ignore[union-attr]
    assert intents == ["ask"]


def test_a_resume_with_another_models_mapping_fails_closed(worlds: Worlds, api: ScriptedAPI) -> None:
    """The slot mapping a run started with is part of its manifest: another one is drift."""

    @durable.workflow
    async def slot(q: str) -> str:
        reply = await Box.oc.chat.completions.create(model="ops", messages=LATER)
        return str(reply.choices[0].message.content)

    with pytest.raises(SimulatedCrash):
        drive(api, slot, worlds.crashing(lambda t, d: t == "run.completed"), models={"ops": "gpt-a"})
    with pytest.raises(durable.CapabilityDriftError, match="gpt-a"):
        drive(api, slot, worlds.open(), models={"ops": "gpt-b"})
    assert [r.body["model"] for r in api.requests] == ["gpt-a"]
