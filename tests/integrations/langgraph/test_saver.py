"""DurableSaver's store: sealed under the codec, never pickled, refused where it would block the run."""

from __future__ import annotations

import asyncio
import operator
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

import durable
from durable.integrations.langgraph import DurableSaver
from durable.integrations.langgraph._rows import NAMESPACE, checkpoint_key
from durable.store import EncryptedThreads, SqliteThreads
from tests.conftest import TEST_KEY, Worlds

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def checkpoint(**values: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = dict.fromkeys(values, 1)
    return cp


@dataclass
class Order:
    """A value of the application's own class."""

    id: str


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]


def note_graph(saver: Any) -> Any:
    def add(state: Notes) -> dict[str, Any]:
        return {"notes": [f"note {len(state['notes'])}"]}

    g = StateGraph(Notes)
    g.add_node("add", add)
    g.add_edge(START, "add")
    g.add_edge("add", END)
    return g.compile(checkpointer=saver)


def test_rows_are_sealed_under_the_worlds_codec(tmp_path: Path) -> None:
    """With a codec the values in threads.db hold no plain text; another key cannot read them."""
    key = durable.EncryptionCodec(TEST_KEY)
    with durable.local_world(tmp_path, codec=key) as world:
        saver = DurableSaver(world)
        stored = saver.put(CONFIG, checkpoint(plan="secret-plan"), {"source": "input", "step": -1}, {})
        assert saver.get_tuple(stored).checkpoint["channel_values"] == {"plan": "secret-plan"}  # type: ignore[union-attr]
    raw = SqliteThreads(tmp_path / "threads.db")
    values = [i.value for i in raw.items(NAMESPACE, "t")]
    assert values and all(v.startswith(b"enc1:") and b"secret-plan" not in v for v in values)
    with pytest.raises(durable.CodecError):  # under another key the rows do not open
        EncryptedThreads(raw, durable.EncryptionCodec(bytes(range(1, 33)))).items(NAMESPACE, "t")
    raw.close()


class Boom:
    """Unpickling one of these would run code."""

    ran = False

    def __reduce__(self) -> Any:
        return (Boom._mark, ())

    @staticmethod
    def _mark() -> None:
        Boom.ran = True


def test_a_stored_pickle_row_is_refused_and_never_unpickled(worlds: Worlds) -> None:
    """A checkpoint row someone else wrote as pickle fails the read with SerializationError; no code runs."""
    world = worlds.open()
    saver = DurableSaver(world)
    stored = saver.put(CONFIG, checkpoint(x=1), {"source": "input", "step": -1}, {})
    cid = stored["configurable"]["checkpoint_id"]
    import base64
    import json

    row = json.loads(world.threads.get(NAMESPACE, "t", checkpoint_key("", cid)).value)  # type: ignore[union-attr]
    row["checkpoint"] = ["pickle", base64.b64encode(pickle.dumps(Boom())).decode()]
    world.threads.write(NAMESPACE, "t", [(checkpoint_key("", cid), json.dumps(row).encode())], replace=True)
    with pytest.raises(durable.SerializationError, match="never unpickles"):
        saver.get_tuple(CONFIG)
    assert not Boom.ran


def test_a_serializer_that_would_pickle_is_refused() -> None:
    """serde=JsonPlusSerializer(pickle_fallback=True) is a ConfigurationError at construction."""
    with pytest.raises(durable.ConfigurationError, match="never stores pickle"):
        DurableSaver(durable.memory_world(), serde=JsonPlusSerializer(pickle_fallback=True))


def test_a_value_only_pickle_could_hold_fails_the_write_with_advice(worlds: Worlds) -> None:
    """A channel value msgpack cannot encode is a SerializationError; a dataclass, as it advises, is kept."""
    saver = DurableSaver(worlds.open())
    with pytest.raises(durable.SerializationError, match="dataclasses"):
        saver.put(CONFIG, checkpoint(x=object()), {"source": "input", "step": -1}, {})
    saver.put(CONFIG, checkpoint(x=Order("o1")), {"source": "input", "step": -1}, {})
    plain = saver.get_tuple(CONFIG)
    assert plain is not None and plain.checkpoint["channel_values"]["x"] == {"id": "o1"}
    listed = saver.with_allowlist([(Order.__module__, "Order")]).get_tuple(CONFIG)
    assert listed is not None and listed.checkpoint["channel_values"]["x"] == Order("o1")


def test_a_sync_graph_invoke_inside_a_run_is_refused_with_advice_that_works(worlds: Worlds) -> None:
    """graph.invoke in a workflow is refused with the advice to await ainvoke; awaited, the run goes on."""
    world = worlds.open()
    graph = note_graph(DurableSaver(world))
    awaited = {"yes": False}

    @durable.workflow
    async def notes(thread: str) -> list[str]:
        config = {"configurable": {"thread_id": thread}}
        out = (
            await graph.ainvoke({"notes": []}, config)
            if awaited["yes"]
            else graph.invoke({"notes": []}, config)
        )
        return list(out["notes"])

    with pytest.raises(durable.ConfigurationError, match=r"await graph.ainvoke\(") as info:
        asyncio.run(durable.run_workflow(notes, "t", world=world, run_id="r"))
    assert "retry_failed=True" in str(info.value)
    awaited["yes"] = True
    again = durable.run_workflow(notes, "t", world=world, run_id="r", retry_failed=True)
    assert asyncio.run(again) == ["note 0"]


def test_outside_a_run_a_graph_keeps_its_thread_in_the_world(worlds: Worlds) -> None:
    """Without a run the saver is a plain checkpointer: a second invocation continues the thread."""
    world = worlds.open()
    graph = note_graph(DurableSaver(world))
    config = {"configurable": {"thread_id": "plain"}}
    graph.invoke({"notes": []}, config)
    assert graph.invoke({"notes": []}, config)["notes"] == ["note 0", "note 1"]
    again = note_graph(DurableSaver(worlds.open()))  # another process over the same store
    assert asyncio.run(again.aget_state(config)).values["notes"] == ["note 0", "note 1"]


def test_prune_keep_latest_refuses_to_drop_the_history_of_delta_channels(worlds: Worlds) -> None:
    """A thread whose newest checkpoint counts DeltaChannel updates is not cut down to that checkpoint."""
    saver = DurableSaver(worlds.open())
    first = saver.put(CONFIG, checkpoint(x=1), {"source": "input", "step": -1}, {})
    delta = {"source": "loop", "step": 0, "counters_since_delta_snapshot": {"log": [1, 1]}}
    saver.put(first, checkpoint(x=2), delta, {})  # type: ignore[arg-type]
    with pytest.raises(durable.ConfigurationError, match="strategy='delete'"):
        saver.prune(["t"])
    assert len(list(saver.list(CONFIG))) == 2
    saver.prune(["t"], strategy="delete")
    assert list(saver.list(CONFIG)) == []
