"""Writing events: one payload builder per event type, and the one encoder of the log.

The schema is the models of ``durable.events``; each function here builds
the payload of one of them, under the field names of its model, and
nothing else in the package spells a field. ``tests`` validate every
builder's payload against its model (which forbids unknown fields), so a
field cannot exist under two spellings.

``text`` turns a payload into the JSON text a row stores. A step's output
is already encoded when it is hashed; ``step_completed`` splices those
bytes into the event instead of encoding the output a second time. A
call's arguments are recorded in its start (``step_started``,
``effect_intent``) as ``_call_inputs`` says.
"""

from __future__ import annotations

import time
from typing import Any

import pydantic_core

Json = dict[str, Any]

_to_json = pydantic_core.to_json


def encode(payload: Json) -> str:
    """The JSON text of an event payload, as the log stores it."""
    return _to_json(payload).decode()


def text(payload: Json | str) -> str:
    """The JSON text of an event payload (text that is already encoded passes through)."""
    return payload if type(payload) is str else _to_json(payload).decode()


# -- a run ----------------------------------------------------------------------


def run_started(
    workflow: str,
    input: Any,
    input_hash: str,
    manifest: Json,
    manifest_hash: str,
    models: dict[str, str],
    output_schema_hash: str,
    format_version: int,
    *,
    parent: tuple[str, str] | None = None,
    fork: tuple[str, int] | None = None,
    deadline_at: float | None = None,
    traceparent: str | None = None,
) -> Json:
    """``run.started``: everything a resume must match (and its deadline and trace, when it has them)."""
    data: Json = {
        "workflow": workflow,
        "input": input,
        "input_hash": input_hash,
        "manifest": manifest,
        "manifest_hash": manifest_hash,
        "models": models,
        "output_schema_hash": output_schema_hash,
        "format_version": format_version,
    }
    if parent is not None:
        data["parent_run_id"], data["parent_key"] = parent
    if fork is not None:
        data["fork_of"], data["fork_seq"] = fork
    if deadline_at is not None:
        data["deadline_at"] = deadline_at
    if traceparent is not None:
        data["traceparent"] = traceparent
    return data


def run_completed(output: Any, output_hash: str) -> Json:
    """``run.completed``."""
    return {"output": output, "output_hash": output_hash}


def run_failed(error: Json, path: str | None, compensated: list[str] | None = None) -> Json:
    """``run.failed``: ``error`` is ``error_data(exc)`` (type, message, args); the compensations it ran."""
    data: Json = {**error, "path": path}
    if compensated:
        data["compensated"] = compensated
    return data


def run_interrupted(path: str, value: Any) -> Json:
    """``run.interrupted``: the run waits at ``path``."""
    return {"path": path, "value": value}


def run_cancelled(reason: str, compensated: list[str] | None = None) -> Json:
    """``run.cancelled``: the run stopped on a cancellation or its deadline; the compensations it ran."""
    data: Json = {"reason": reason}
    if compensated:
        data["compensated"] = compensated
    return data


def run_resumed(reason: str) -> Json:
    """``run.resumed``: the cancellation (of this reason) is forgotten; the run goes on."""
    return {"reason": reason}


def run_resolved(
    decision: str,
    by: str,
    decided_at: float,
    *,
    key: str | None = None,
    result: Any = None,
    drift_keys: list[str] | None = None,
) -> Json:
    """``run.resolved``: a person's decision about the run, with who and when."""
    out: Json = {"decision": decision, "by": by, "decided_at": decided_at}
    if key is not None:
        out["key"] = key
    if decision == "happened":
        out["result"] = result
    if drift_keys:
        out["drift_keys"] = list(drift_keys)
    return out


def run_retried(paths: list[str]) -> Json:
    """``run.retried``: failures of these paths are forgotten."""
    return {"paths": paths}


def run_restored(checkpoint: int, state_version: int) -> Json:
    """``run.restored``: the state rolls back to ``checkpoint``."""
    return {"checkpoint": checkpoint, "state_version": state_version}


def snapshot(state: Json, state_hash: str, base_seq: int) -> Json:
    """``snapshot``: the canonical state that replaces the events up to ``base_seq``."""
    return {"state": state, "state_hash": state_hash, "base_seq": base_seq}


# -- steps ----------------------------------------------------------------------


def step_started(path: str, visit: int, attempt: int, input_hash: str, pos: int, recorded: Json) -> Json:
    """``step.started``; ``recorded`` is its arguments' ``input`` or ``input_ref`` (``_call_inputs``)."""
    return {
        "path": path,
        "visit": visit,
        "attempt": attempt,
        "input_hash": input_hash,
        "pos": pos,
        **recorded,
    }


def step_completed(
    path: str,
    visit: int,
    raw: bytes,
    output_hash: str,
    state_version: int,
    artifact: Json | None,
    ms: float | None = None,
) -> str:
    """``step.completed`` as text, the output's encoded bytes ``raw`` spliced in.

    With ``artifact`` set the output lives beside the log and the event's
    output is null.
    """
    head: Json = {"path": path, "visit": visit, "output_hash": output_hash, "state_version": state_version}
    if ms is not None:
        head["ms"] = ms
    if artifact is not None:
        head["artifact"] = artifact
        raw = b"null"
    return (_to_json(head)[:-1] + b',"output":' + raw + b"}").decode()


def step_completed_folded(
    started: Json,
    raw: bytes,
    output_hash: str,
    state_version: int,
    artifact: Json | None,
    ms: float | None = None,
) -> str:
    """``step.completed`` that carries its start (``step_started``'s payload) as well."""
    head: Json = {**started, "output_hash": output_hash, "state_version": state_version}
    if ms is not None:
        head["ms"] = ms
    if artifact is not None:
        head["artifact"] = artifact
        raw = b"null"
    return (_to_json(head)[:-1] + b',"output":' + raw + b"}").decode()


def step_failed(
    path: str, visit: int, attempt: int, error: Json, final: bool, ms: float | None = None
) -> Json:
    """``step.failed``: ``error`` is ``error_data(exc)``."""
    data: Json = {"path": path, "visit": visit, "attempt": attempt, **error, "final": final}
    if ms is not None:
        data["ms"] = ms
    return data


# -- effects --------------------------------------------------------------------


def effect_intent(
    key: str, kind: str, name: str, input_hash: str, pos: int, child_run_id: str | None, recorded: Json
) -> Json:
    """``effect.intent``, durable before the external call; ``recorded`` as in ``step_started``."""
    data: Json = {"key": key, "kind": kind, "name": name, "input_hash": input_hash, "pos": pos, **recorded}
    if child_run_id is not None:
        data["child_run_id"] = child_run_id
    return data


def receipt_ok(key: str, result: Any, ms: float | None = None) -> Json:
    """``effect.receipt`` of an effect that returned ``result`` (JSON-safe)."""
    data: Json = {"key": key, "outcome": "ok", "result": result}
    if ms is not None:
        data["ms"] = ms
    return data


def budget_set(budget: Json, by: str | None = None) -> Json:
    """``budget.set``: the run's budget (``Budget.to_json()``), and who raised it."""
    data: Json = dict(budget)
    if by is not None:
        data["by"] = by
    return data


def receipt_error(key: str, error: Json, ms: float | None = None) -> Json:
    """``effect.receipt`` of an effect that raised: ``error`` is ``error_data(exc)``."""
    data: Json = {"key": key, "outcome": "error", **error}
    if ms is not None:
        data["ms"] = ms
    return data


def elapsed_ms(since: float) -> float:
    """Milliseconds from ``since`` (a ``time.perf_counter()`` reading) to now, to a microsecond."""
    return round((time.perf_counter() - since) * 1e6) / 1e3  # round(ms, 3) costs twice this


def stream_cursor(key: str, chunks: int, terminal: bool, data: list[Any]) -> Json:
    """``stream.cursor``: a batch of a streamed call's chunks."""
    return {"key": key, "chunks": chunks, "terminal": terminal, "data": data}


def retry_decision(
    key: str,
    attempt: int,
    retry: bool,
    backoff: float,
    wake_at: float | None,
    error_type: str,
    first_attempt_at: float,
) -> Json:
    """``retry.decision`` after a failed attempt of the step or effect ``key``."""
    return {
        "key": key,
        "attempt": attempt,
        "decision": "retry" if retry else "give_up",
        "backoff": backoff,
        "wake_at": wake_at,
        "error_type": error_type,
        "first_attempt_at": first_attempt_at,
    }


# -- values, time, interrupts, sessions ----------------------------------------


def value_recorded(key: str, kind: str, value: Any, pos: int) -> Json:
    """``value.recorded``: what ``now()``, ``uuid4()`` or ``random()`` returned."""
    return {"key": key, "kind": kind, "value": value, "pos": pos}


def patch_marked(key: str, change_id: str) -> Json:
    """``patch.marked``: the run took the new side of ``durable.patched(change_id)`` at ``key``."""
    return {"key": key, "change_id": change_id}


def fanout_started(path: str, name: str, keys: list[str]) -> Json:
    """``fanout.started``: a ``parallel`` call's name and branch keys."""
    return {"path": path, "name": name, "keys": keys}


def drift_accepted(
    changes: list[Json],
    manifest: Json,
    manifest_hash: str,
    *,
    output_schema_hash: str | None = None,
    session: str | None = None,
    replaced: list[Json] | None = None,
) -> Json:
    """``drift.accepted``: drift a resume accepted, and the manifest compared from now on.

    ``replaced``: the other differences from the manifest it replaces (format 9 on).
    """
    data: Json = {"changes": changes, "manifest": manifest, "manifest_hash": manifest_hash}
    if output_schema_hash is not None:
        data["output_schema_hash"] = output_schema_hash
    if session is not None:
        data["session"] = session
    if replaced is not None:
        data["replaced"] = replaced
    return data


def timer_set(path: str, wake_at: float, pos: int) -> Json:
    """``timer.set``: the wake time of a durable sleep."""
    return {"path": path, "wake_at": wake_at, "pos": pos}


def interrupt(path: str, value: Any, pos: int) -> Json:
    """``interrupt``: the run asks ``value`` and waits."""
    return {"path": path, "value": value, "pos": pos}


def interrupt_resumed(path: str, value: Any) -> Json:
    """``interrupt.resumed``: the answer to the interrupt at ``path``."""
    return {"path": path, "value": value}


def session_started(path: str, role: str, manifest: Json, manifest_hash: str, manifest_format: int) -> Json:
    """``session.started``: an agent session and its manifest."""
    return {
        "path": path,
        "role": role,
        "manifest": manifest,
        "manifest_hash": manifest_hash,
        "manifest_format": manifest_format,
    }


def session_completed(path: str, role: str, manifest_hash: str) -> Json:
    """``session.completed``."""
    return {"path": path, "role": role, "manifest_hash": manifest_hash}


def cycle_completed(
    outer_loop_id: str,
    cycle: int,
    output: Any,
    decision: str,
    next_input: Any,
    final_output: Any,
    summary: str | None,
) -> Json:
    """``outer_loop.cycle_completed``: what ``supervise`` decided after a cycle."""
    return {
        "outer_loop_id": outer_loop_id,
        "cycle": cycle,
        "output": output,
        "decision": decision,
        "next_input": next_input,
        "final_output": final_output,
        "summary": summary,
    }


# -- talking to runs: messages, events, streams -------------------------------


def message_waiting(key: str, topic: str | None, wake_at: float, pos: int) -> Json:
    """``message.waiting``: when the wait of a ``recv`` with a timeout ends."""
    return {"key": key, "topic": topic, "wake_at": wake_at, "pos": pos}


def message_received(
    key: str, topic: str | None, message_id: str | None, value: Any, timed_out: bool, pos: int
) -> Json:
    """``message.received``: what a ``recv`` returned (a message, or its timeout)."""
    return {
        "key": key,
        "topic": topic,
        "message_id": message_id,
        "value": value,
        "timed_out": timed_out,
        "pos": pos,
    }


def message_sent(key: str, target: str, topic: str | None, message_id: str, pos: int) -> Json:
    """``message.sent``: a message this run sent, stored under ``message_id``."""
    return {"key": key, "target": target, "topic": topic, "message_id": message_id, "pos": pos}


def event_set(key: str, name: str, value: Any, pos: int) -> Json:
    """``event.set``: the new value of the run's event ``name``."""
    return {"key": key, "name": name, "value": value, "pos": pos}


def stream_write(key: str, stream: str, value: Any, pos: int | None) -> Json:
    """``stream.write``: one value of the stream ``stream`` (``pos`` is ``None`` for a mirrored chunk)."""
    return {"key": key, "stream": stream, "value": value, "pos": pos}


def stream_closed(key: str, stream: str, pos: int) -> Json:
    """``stream.closed``: the stream ``stream`` has no more values."""
    return {"key": key, "stream": stream, "pos": pos}
