"""The round-trip rule: a replayed output is the value the first run saw, or it is refused at commit."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import math
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.alias_generators import to_camel

import durable
from durable import ConfigurationError, SerializationError
from durable.engine._spec import Spec
from durable.engine._values import json_bytes, loads, to_json
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on

try:  # numpy is a test dependency of the dev extra: the tests that use it skip without it
    import numpy as np
except ImportError:  # pragma: no cover - a core-only install
    np = None


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def types(world: durable.World, run_id: str) -> list[str]:
    return [e.type for e in world.events(run_id)]


class Customer(BaseModel):
    """An API-style model: camelCase aliases, no populate_by_name."""

    model_config = ConfigDict(alias_generator=to_camel)
    customer_id: int
    display_name: str
    tags: list[str] = []


class Order(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    order_id: str
    customer: Customer


def test_aliased_models_replay_after_a_crash(worlds: Worlds) -> None:
    """Aliased models from a step and a tool come back equal on resume; nothing runs twice."""
    calls: Counter[str] = Counter()

    @durable.tool
    async def lookup(cid: int) -> Customer:
        calls["lookup"] += 1
        return Customer(customerId=cid, displayName="Ada", tags=["vip"])

    @durable.step
    async def place(cid: int) -> Order:
        calls["place"] += 1
        return Order(orderId="o-1", customer=await lookup(cid))

    @durable.step
    async def confirm(order: Order) -> str:
        calls["confirm"] += 1
        return order.order_id

    @durable.workflow
    async def wf(cid: int) -> Order:
        order = await place(cid)
        await confirm(order)
        return order

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, 7, world=worlds.crashing(on("step.completed", "confirm")), run_id="r"))
    out = run(durable.run_workflow(wf, 7, world=worlds.open(), run_id="r"))
    expected = Order(orderId="o-1", customer=Customer(customerId=7, displayName="Ada", tags=["vip"]))
    assert out == expected
    assert calls == {"lookup": 1, "place": 1, "confirm": 2}
    # The finished run's output is rebuilt from the log too.
    assert run(durable.run_workflow(wf, 7, world=worlds.open(), run_id="r")) == expected


def test_an_aliased_workflow_input_is_accepted_as_the_log_recorded_it(world: durable.World) -> None:
    """The input as ``run.started`` holds it (field names), as outer loops pass it back, resumes the run."""

    @durable.workflow
    async def wf(c: Customer) -> int:
        return c.customer_id

    run(durable.run_workflow(wf, Customer(customerId=3, displayName="Ada"), world=world, run_id="r"))
    [started] = [e for e in world.events("r") if e.type == "run.started"]
    recorded = started.input  # type: ignore[union-attr]
    assert recorded == {"customer_id": 3, "display_name": "Ada", "tags": []}
    assert run(durable.run_workflow(wf, recorded, world=world, run_id="r")) == 3


class Price(BaseModel):
    cents: int

    @field_validator("cents")
    @classmethod
    def _to_cents(cls, v: int) -> int:
        return v * 100  # transforms its input: runs again on every rebuild


class Credentials(BaseModel):
    user: str
    token: SecretStr


class Page(BaseModel):
    title: str
    raw_html: str = Field(default="", exclude=True)


CASES: dict[str, tuple[Any, Any, str]] = {
    # case: (annotation, bad value, what the message must name)
    "transforming validator": (
        Price,
        lambda: Price(cents=5),
        "field 'cents' is 500 and would come back as 50000",
    ),
    "SecretStr": (Credentials, lambda: Credentials(user="u", token="s3cret"), "field 'token' is a secret"),
    "exclude=True": (Page, lambda: Page(title="t", raw_html="<p>"), "field 'raw_html' is excluded"),
    "nan in a dict": (dict[str, Any], lambda: {"score": math.nan}, "the value at ['score'] is nan"),
    "Decimal NaN": (Decimal, lambda: Decimal("NaN"), "would be stored as 'NaN', which cannot be rebuilt as"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_that_would_not_round_trip_is_refused_at_commit(world: durable.World, case: str) -> None:
    """The first run fails at the step with a SerializationError naming path and field; a retry resumes it."""
    annotation, bad, expected = CASES[case]
    mode = {"bad": True}

    async def body() -> Any:
        return bad() if mode["bad"] else None

    body.__annotations__["return"] = annotation | None
    s = durable.step(name="s")(body)

    @durable.workflow
    async def wf() -> str:
        return repr(await s())

    with pytest.raises(SerializationError) as info:
        run(durable.run_workflow(wf, world=world, run_id="r"))
    message = str(info.value)
    assert expected in message
    assert "at path 's' in run 'r'" in message
    assert "retry_failed=True" in message and "`little resume r`" in message
    assert info.value.path == "s"
    assert types(world, "r")[-1] == "run.failed" and "step.completed" not in types(world, "r")
    mode["bad"] = False
    assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == "None"


class Clean(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()  # idempotent: its own output passes through unchanged


def test_values_that_round_trip_are_stored(worlds: Worlds) -> None:
    """Idempotent validators, typed tuples with dates and Decimals replay equal after a crash."""

    @durable.step
    async def a() -> Clean:
        return Clean(name="  x ")

    @durable.step
    async def b() -> tuple[int, datetime.date]:
        return (1, datetime.date(2024, 5, 1))

    @durable.step
    async def c() -> Decimal:
        return Decimal("1.10")

    @durable.step
    async def tail() -> None:
        return None

    @durable.workflow
    async def wf() -> list[str]:
        out = [repr(await a()), repr(await b()), repr(await c())]
        await tail()
        return out

    with pytest.raises(SimulatedCrash):
        run(durable.run_workflow(wf, world=worlds.crashing(on("step.completed", "tail")), run_id="r"))
    out = run(durable.run_workflow(wf, world=worlds.open(), run_id="r"))
    assert out == ["Clean(name='x')", "(1, datetime.date(2024, 5, 1))", "Decimal('1.10')"]


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


@dataclasses.dataclass
class Row:
    id: int


def _completion() -> Any:
    from openai.types.chat import ChatCompletion  # the openai extra: its case skips without it

    return ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hi"},
                }
            ],
        }
    )


UNANNOTATED: dict[str, tuple[Any, str]] = {
    "openai response": (
        _completion,
        "a ChatCompletion, which the log stores as JSON and gives back as a dict",
    ),
    "date": (
        lambda: datetime.date(2024, 1, 2),
        "a date, which the log stores as JSON and gives back as a str",
    ),
    "set": (lambda: {1, 2}, "a set, which the log stores as JSON and gives back as a list"),
    "dataclass": (lambda: Row(1), "a Row, which the log stores as JSON and gives back as a dict"),
    "tuple": (lambda: (1, 2), "a tuple, which the log stores as JSON and gives back as a list"),
    "int keys": (lambda: {1: "a"}, "has the key 1 of type int; JSON keys are strings"),
    "nested date": (lambda: {"when": [datetime.date(2024, 1, 2)]}, "the value at ['when'][0] is a date"),
}


@pytest.mark.parametrize("case", sorted(UNANNOTATED))
@pytest.mark.parametrize("kind", ["step", "tool"])
def test_an_unannotated_value_that_would_change_type_is_refused(
    world: durable.World, case: str, kind: str
) -> None:
    """Without a return annotation, a non-JSON value fails on the first run with advice to annotate."""
    if case == "openai response":
        pytest.importorskip("openai")
    make, expected = UNANNOTATED[case]
    mode = {"bad": True}

    async def fetch_order():  # type: ignore[no-untyped-def]  # no return annotation on purpose
        return make() if mode["bad"] else "plain"

    fn = getattr(durable, kind)(fetch_order)

    @durable.workflow
    async def wf() -> str:
        return repr(await fn())

    with pytest.raises(SerializationError) as info:
        run(durable.run_workflow(wf, world=world, run_id="r"))
    message = str(info.value)
    assert expected in message
    assert f"Annotate the return type of {kind} 'fetch_order' (tests.engine.test_roundtrip." in message
    assert types(world, "r")[-1] == "run.failed"
    if kind == "step":  # a refused tool result is an unknown commit: the tool ran
        mode["bad"] = False
        assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) == "'plain'"


def test_an_unresolvable_return_annotation_is_named_in_the_refusal(world: durable.World) -> None:
    """A model defined inside a function cannot be resolved; the message says so instead of 'annotate'."""

    class Local(BaseModel):
        x: int

    @durable.step
    async def s() -> Local:
        return Local(x=1)

    @durable.workflow
    async def wf() -> None:
        await s()

    with pytest.raises(SerializationError, match="'Local', cannot be resolved"):
        run(durable.run_workflow(wf, world=world, run_id="r"))


def test_an_unannotated_workflow_output_is_checked_too(world: durable.World) -> None:
    """A workflow's own output follows the same rule as a step's."""

    @durable.workflow
    async def wf():  # type: ignore[no-untyped-def]
        return (1, 2)

    with pytest.raises(SerializationError, match="the workflow output of workflow 'wf'"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert "run.completed" not in types(world, "r")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _exact(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_exact(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _unannotated() -> Spec:
    async def f():  # type: ignore[no-untyped-def]
        return None

    return Spec("step", f, "function")


@given(JSON)
def test_plain_json_is_stored_as_is_and_comes_back_as_itself(value: Any) -> None:
    """Any plain JSON value of an unannotated output passes the check and parses back identical."""
    spec = _unannotated()
    data = to_json(spec.out, value, what="v", run_id="r", path="p")
    assert data == value
    assert _exact(spec.rebuild(loads(json_bytes(data).decode())), value)


def test_plain_containers_are_copied_when_stored() -> None:
    """The stored data of a dict is not the caller's dict, which it may still change."""
    value = {"a": [1]}
    data = to_json(_unannotated().out, value, what="v", run_id="r", path="p")
    assert data == value and data is not value and data["a"] is not value["a"]


@pytest.mark.parametrize("where", ["output", "argument", "tool result"])
def test_an_int_too_long_to_read_back_is_refused(world: durable.World, where: str) -> None:
    """An int of more than 4,300 digits fails where it would enter the log; the log stays readable."""
    bad = {"on": True}

    def number() -> int:
        return 10**5000 if bad["on"] else 5

    @durable.tool
    async def fetch() -> int:
        return number() if where == "tool result" else 1

    @durable.step
    async def s(x: int) -> int:
        return number() if where == "output" else x

    @durable.workflow
    async def wf() -> int:
        await fetch()
        return await s(number() if where == "argument" else 2)

    with pytest.raises(SerializationError, match=r"4,300 digits|could not be read back"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert types(world, "r")[-1] == "run.failed"
    [info] = world.runs()
    assert world.events(info.run_id)  # the log reads back
    bad["on"] = False
    if where == "tool result":
        with pytest.raises(durable.UnknownCommitError):
            run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True))
    else:
        assert run(durable.run_workflow(wf, world=world, run_id="r", retry_failed=True)) in (2, 5)


def test_an_output_holding_an_int_too_long_to_read_back_is_refused(world: durable.World) -> None:
    """A step output whose dict holds an int of more than 4,300 digits fails before its commit."""

    @durable.step
    async def s() -> dict[str, int]:
        return {"n": 10**5000}

    @durable.workflow
    async def wf() -> dict[str, int]:
        return await s()

    with pytest.raises(SerializationError, match=r"4,300 digits|could not be read back"):
        run(durable.run_workflow(wf, world=world, run_id="r"))
    assert "step.completed" not in types(world, "r")


def test_a_workflow_input_too_long_to_read_back_is_refused(world: durable.World) -> None:
    """A huge int given as a workflow's input is a SerializationError before anything is recorded."""

    @durable.workflow
    async def wf(n: int) -> int:
        return 1

    with pytest.raises(SerializationError, match="more than 4,300 digits"):
        run(durable.run_workflow(wf, 10**5000, world=world, run_id="r"))
    assert world.runs() == []


def test_a_subclass_under_its_base_annotation_is_refused(world: durable.World) -> None:
    """A model subclass returned under its base's annotation would lose its fields: refused."""

    class Special(Clean):
        extra: int = 0

    @durable.step
    async def s() -> Clean:
        return Special(name="x", extra=5)

    @durable.workflow
    async def wf() -> None:
        await s()

    with pytest.raises(SerializationError, match=r"is a Special \(.*would come back as a Clean"):
        run(durable.run_workflow(wf, world=world, run_id="r"))


def test_a_return_type_pydantic_cannot_handle_fails_at_decoration() -> None:
    """``-> np.ndarray`` is a ConfigurationError when the module is imported, not after the body ran."""
    pytest.importorskip("numpy")
    with pytest.raises(ConfigurationError, match=r"return type ndarray is not a type pydantic can store"):

        @durable.step
        async def embed(text: str) -> np.ndarray:
            return np.zeros(3)


def test_a_parameter_type_pydantic_cannot_handle_fails_at_decoration() -> None:
    """An argument annotation pydantic cannot handle is refused at decoration too, naming the parameter."""
    with pytest.raises(ConfigurationError, match=r"tool 'store'.*parameter 'p' Point"):

        @durable.tool
        async def store(p: Point) -> int:
            return p.x


def test_an_unresolved_bad_annotation_fails_before_the_body_runs(world: durable.World) -> None:
    """A type named only later in the module is checked at the first call, before the body runs."""
    pytest.importorskip("numpy")
    ran: list[str] = []

    async def later():  # type: ignore[no-untyped-def]
        ran.append("body")
        return np.zeros(3)

    later.__annotations__["return"] = "Missing"
    s = durable.step(later)  # "Missing" does not resolve yet: nothing to check
    globals()["Missing"] = np.ndarray
    try:

        @durable.workflow
        async def wf() -> None:
            await s()

        with pytest.raises(ConfigurationError, match="is not a type pydantic can store"):
            run(durable.run_workflow(wf, world=world, run_id="r"))
    finally:
        del globals()["Missing"]
    assert ran == []
    assert types(world, "r")[-1] == "run.failed"
