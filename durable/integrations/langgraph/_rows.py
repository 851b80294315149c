"""A graph's checkpoints and pending writes as values of the world's thread store.

One LangGraph thread is one thread of the store (namespace ``langgraph``).
A checkpoint is the value ``c|<ns>|<checkpoint id>`` (the whole checkpoint,
its metadata, its parent's id), a pending write the value
``w|<ns>|<checkpoint id>|<task id>|<idx>``; namespaces and task ids are
written with their length first, so no name can run into the next part.
Checkpoint ids are LangGraph's ``uuid6`` strings, which sort in the order
they were made: the newest checkpoint of a namespace is the one whose key
sorts last. A value is JSON holding LangGraph's serialized bytes (base64),
sealed by the store when the world has a codec.

The functions here read and write rows as ``Raw`` dicts, JSON data a durable
run can record as a call's result; ``tuple_of`` turns one into LangGraph's
``CheckpointTuple``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic_core import to_jsonable_python

import durable

from ...store import ThreadItem, ThreadStore

NAMESPACE = "langgraph"
"""The thread store's namespace of graph checkpoints."""

Raw = dict[str, Any]
"""A checkpoint with its pending writes as JSON: what a run records of a read."""


def _part(text: str) -> str:
    return f"{len(text)}:{text}"


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    """The store key of a checkpoint."""
    return f"c|{_part(ns)}|{checkpoint_id}"


def checkpoints_prefix(ns: str | None) -> str:
    """The key prefix of a namespace's checkpoints (every namespace's with ``None``)."""
    return "c|" if ns is None else f"c|{_part(ns)}|"


def writes_prefix(ns: str, checkpoint_id: str) -> str:
    """The key prefix of a checkpoint's pending writes."""
    return f"w|{_part(ns)}|{checkpoint_id}|"


def write_key(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    """The store key of one pending write."""
    return f"{writes_prefix(ns, checkpoint_id)}{_part(task_id)}|{idx}"


def _typed(serde: SerializerProtocol, value: Any) -> list[str]:
    type_, data = serde.dumps_typed(value)
    return [type_, base64.b64encode(data).decode("ascii")]


def _untyped(serde: SerializerProtocol, typed: Sequence[str]) -> Any:
    return serde.loads_typed((typed[0], base64.b64decode(typed[1])))


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loaded(item: ThreadItem) -> dict[str, Any]:
    try:
        data = json.loads(item.value)
    except ValueError as exc:
        raise durable.SerializationError(
            f"the stored graph checkpoint value {item.key!r} is not DurableSaver's JSON ({exc}); "
            "it was written by something else or damaged."
        ) from None
    if not isinstance(data, dict):
        raise durable.SerializationError(f"the stored graph checkpoint value {item.key!r} is not an object.")
    return data


def jsonable(value: Any) -> Any:
    """A config or filter as JSON for a call's identity (what JSON cannot hold shown by its kind)."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__qualname__}>")


def config_of(thread: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config that addresses one checkpoint."""
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def addressed(config: RunnableConfig) -> tuple[str, str, str | None]:
    """The thread, namespace and checkpoint id (``None``: the newest) a config addresses."""
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None:
        raise durable.ConfigurationError(
            "a graph with a DurableSaver is invoked with a thread: pass "
            'config={"configurable": {"thread_id": ...}} (inside a durable run, derive it from '
            "the run, e.g. durable.current_run().run_id)."
        )
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or ""), conf.get("checkpoint_id")


# -- reading -------------------------------------------------------------------------------


def _writes(items: Iterable[ThreadItem]) -> list[list[Any]]:
    rows = [_loaded(i) for i in items]
    rows.sort(key=lambda w: (w["path"], w["task"], w["idx"]))  # LangGraph's writes_sort_key
    return [[w["task"], w["channel"], w["value"]] for w in rows]


def _raw(store: ThreadStore, thread: str, item: ThreadItem) -> Raw:
    row = _loaded(item)
    found = store.items(NAMESPACE, thread, prefix=writes_prefix(row["ns"], row["id"]))
    return {**row, "thread": thread, "writes": _writes(found)}


def get_raw(store: ThreadStore, config: RunnableConfig) -> Raw | None:
    """The checkpoint ``config`` addresses (the newest of its namespace without an id), or ``None``."""
    thread, ns, checkpoint_id = addressed(config)
    if checkpoint_id:
        item = store.get(NAMESPACE, thread, checkpoint_key(ns, checkpoint_id))
    else:
        newest = store.items(
            NAMESPACE, thread, prefix=checkpoints_prefix(ns), order="key", newest_first=True, limit=1
        )
        item = newest[0] if newest else None
    return None if item is None else _raw(store, thread, item)


def list_raw(
    store: ThreadStore,
    serde: SerializerProtocol,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> list[Raw]:
    """The checkpoints ``list`` yields, newest first (LangGraph's ``BaseCheckpointSaver.list``)."""
    conf = (config or {}).get("configurable") or {}
    threads = [str(conf["thread_id"])] if conf.get("thread_id") is not None else store.threads(NAMESPACE)
    ns = conf.get("checkpoint_ns")
    only = conf.get("checkpoint_id")
    before_id = ((before or {}).get("configurable") or {}).get("checkpoint_id")
    found: list[Raw] = []
    for thread in threads:
        rows = [_loaded(i) for i in store.items(NAMESPACE, thread, prefix=checkpoints_prefix(ns))]
        rows.sort(key=lambda r: str(r["id"]), reverse=True)
        for row in rows:
            if (only and row["id"] != only) or (before_id and row["id"] >= before_id):
                continue
            if filter:
                metadata = _untyped(serde, row["metadata"])
                if not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
            found.append(row | {"thread": thread})
    found.sort(key=lambda r: str(r["id"]), reverse=True)
    if limit is not None:
        found = found[: max(limit, 0)]
    for row in found:
        writes = store.items(NAMESPACE, row["thread"], prefix=writes_prefix(row["ns"], row["id"]))
        row["writes"] = _writes(writes)
    return found


def tuple_of(serde: SerializerProtocol, raw: Raw) -> CheckpointTuple:
    """LangGraph's ``CheckpointTuple`` of a raw checkpoint."""
    thread, ns = raw["thread"], raw["ns"]
    checkpoint: Checkpoint = _untyped(serde, raw["checkpoint"])
    return CheckpointTuple(
        config=config_of(thread, ns, raw["id"]),
        checkpoint=checkpoint,
        metadata=_untyped(serde, raw["metadata"]),
        parent_config=config_of(thread, ns, raw["parent"]) if raw.get("parent") else None,
        pending_writes=[(task, channel, _untyped(serde, value)) for task, channel, value in raw["writes"]],
    )


# -- writing -------------------------------------------------------------------------------


def put_row(
    store: ThreadStore,
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
) -> RunnableConfig:
    """Store a checkpoint (replacing one with its id) and return the config that addresses it."""
    thread, ns, parent = addressed(config)
    full = get_serializable_checkpoint_metadata(config, metadata)
    row = {
        "ns": ns,
        "id": checkpoint["id"],
        "parent": parent,
        "checkpoint": _typed(serde, checkpoint),
        "metadata": _typed(serde, full),
        "run_id": full.get("run_id"),
    }
    store.write(NAMESPACE, thread, [(checkpoint_key(ns, checkpoint["id"]), _json(row))], replace=True)
    return config_of(thread, ns, checkpoint["id"])


def put_writes_rows(
    store: ThreadStore,
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    """Store a task's pending writes: a write of a special channel replaces its like, others are kept once."""
    thread, ns, checkpoint_id = addressed(config)
    if not checkpoint_id:
        raise durable.ConfigurationError(
            "pending writes need the config of their checkpoint (its checkpoint_id)."
        )
    items: list[tuple[str, bytes]] = []
    special: list[str] = []
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        key = write_key(ns, checkpoint_id, task_id, idx)
        if idx < 0:
            special.append(key)
        row = {"task": task_id, "path": task_path, "channel": channel, "idx": idx}
        items.append((key, _json({**row, "value": _typed(serde, value)})))
    store.write(NAMESPACE, thread, items, delete=special)


def delete_for_runs(store: ThreadStore, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints (and their writes) whose metadata names one of ``run_ids``."""
    wanted = set(run_ids)
    if not wanted:
        return
    for thread in store.threads(NAMESPACE):
        doomed: list[str] = []
        for item in store.items(NAMESPACE, thread, prefix=checkpoints_prefix(None)):
            row = _loaded(item)
            if row.get("run_id") in wanted:
                writes = store.items(NAMESPACE, thread, prefix=writes_prefix(row["ns"], row["id"]))
                doomed += [item.key, *(w.key for w in writes)]
        if doomed:
            store.write(NAMESPACE, thread, delete=doomed)


def copy_thread(store: ThreadStore, source: str, target: str) -> None:
    """Copy every checkpoint and pending write of ``source`` into ``target``."""
    items = store.items(NAMESPACE, source)
    if items:
        store.write(NAMESPACE, target, [(i.key, i.value) for i in items], replace=True)


def prune(store: ThreadStore, serde: SerializerProtocol, threads: Sequence[str], strategy: str) -> None:
    """Keep only the newest checkpoint of each namespace (``keep_latest``), or nothing (``delete``).

    Raises:
        ConfigurationError: An unknown strategy, or ``keep_latest`` on a thread
            whose graph keeps ``DeltaChannel`` state in the checkpoints it would drop.
    """
    if strategy not in ("keep_latest", "delete"):
        raise durable.ConfigurationError(
            f'prune(strategy={strategy!r}): the strategies are "keep_latest" and "delete".'
        )
    for thread in threads:
        if strategy == "delete":
            store.delete_thread(NAMESPACE, thread)
            continue
        rows = [_loaded(i) for i in store.items(NAMESPACE, thread, prefix=checkpoints_prefix(None))]
        newest: dict[str, str] = {}
        for row in rows:
            if row["id"] > newest.get(row["ns"], ""):
                newest[row["ns"]] = row["id"]
        for row in rows:
            if row["id"] == newest[row["ns"]]:
                metadata = _untyped(serde, row["metadata"])
                if metadata.get("counters_since_delta_snapshot"):
                    raise durable.ConfigurationError(
                        f"prune(strategy='keep_latest') would drop the history that thread "
                        f"{thread!r}'s DeltaChannel state is rebuilt from; prune it with "
                        "strategy='delete', or keep it."
                    )
        doomed = [f"{checkpoint_key(r['ns'], r['id'])}" for r in rows if r["id"] != newest[r["ns"]]]
        kept = {writes_prefix(ns, cid) for ns, cid in newest.items()}
        doomed += [
            i.key
            for i in store.items(NAMESPACE, thread, prefix="w|")
            if not any(i.key.startswith(p) for p in kept)
        ]
        if doomed:
            store.write(NAMESPACE, thread, delete=doomed)
