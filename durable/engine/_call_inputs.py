"""A call's input as the log records it: inline, beside the log, or as what it adds to the previous one.

A step's ``step.started`` and an effect's ``effect.intent`` carry the call's
arguments (log format 8 on), in one of two fields:

- ``input``: the arguments by parameter name, as hashed for ``input_hash``,
  when their JSON is at most ``INPUT_INLINE_LIMIT`` bytes (most calls);
- ``input_ref``: larger arguments, stored one of two ways:
    - ``{"artifact": ref}``: the arguments' JSON as an artifact;
    - ``{"base": key, "append": {...}, "args": {...}}``: a *delta*. An agent
      loop passes its whole conversation to every model call, so arguments
      kept whole would grow the store with the square of the turns. When a
      list argument starts with the same items as that argument of the
      previous large call of the same function in this drive, only the new
      items are recorded (``append``, by parameter name), the other
      arguments whole (``args``), and ``base`` names that previous call (a
      step path or an effect key). A delta past the limit keeps its
      ``append`` and ``args`` in an artifact: ``{"base": key, "artifact": ref}``.

Replay never reads an input: ``input_hash`` decides. The first large call of
a function in a drive (after a resume, too) is stored whole, so a chain
never reaches into another drive's memory. ``durable.ops`` reads the chains
back for the inspector and ``little diff``; ``effect_input`` reads one
effect's back for the engine (the undo of a confirmed call is called with
its arguments).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ._artifacts import artifact_ref, store_bytes, verify_payload
from ._values import json_bytes

if TYPE_CHECKING:
    from ._context import RunContext
    from ._recorded import Recorded
    from ._world import WorldCore

INPUT_INLINE_LIMIT = 1024
"""The most bytes of arguments a call's event holds inline; larger ones are stored by ``input_ref``."""

INPUT_MEDIA_TYPE = "application/vnd.durable.input+json"
"""The media type of an artifact that holds a call's arguments."""

DELTA_MEDIA_TYPE = "application/vnd.durable.input-delta+json"
"""The media type of an artifact that holds a delta's ``append`` and ``args``."""

Json = dict[str, Any]


def recorded_input(run: RunContext, name: str, key: str, data: Json, raw: bytes) -> Json:
    """The field that records a call's arguments: ``{"input": data}``, or ``large_input``'s when long."""
    return {"input": data} if len(raw) <= INPUT_INLINE_LIMIT else large_input(run, name, key, data, raw)


def large_input(run: RunContext, name: str, key: str, data: Json, raw: bytes) -> Json:
    """The ``input_ref`` fields of arguments longer than ``INPUT_INLINE_LIMIT`` (``raw`` their JSON).

    Args:
        run: The running run (its world stores artifacts; it remembers each function's last large call).
        name: The function's durable name: deltas chain the calls of one function.
        key: The call's step path or effect key.
        data: The arguments by parameter name, as JSON data.
        raw: Their JSON bytes, as hashed.
    """
    lists = {n: (json_bytes(v), len(v)) for n, v in data.items() if type(v) is list}
    previous = run.previous_inputs.get(name)
    run.previous_inputs[name] = (key, lists)
    if previous is not None and previous[0] != key and lists:
        delta = _delta(previous[1], lists, data)
        if delta is not None:
            body = {"append": delta[0], "args": delta[1]}
            encoded = json_bytes(body)
            if len(encoded) <= INPUT_INLINE_LIMIT:
                return {"input_ref": {"base": previous[0], **body}}
            ref = store_bytes(run.world, key, encoded, DELTA_MEDIA_TYPE, run.run_id)
            return {"input_ref": {"base": previous[0], "artifact": ref.model_dump()}}
    ref = store_bytes(run.world, key, raw, INPUT_MEDIA_TYPE, run.run_id)
    return {"input_ref": {"artifact": ref.model_dump()}}


def input_again(run: RunContext, name: str, key: str, data: Json, raw: bytes) -> Json:
    """The recorded ``input_ref`` of a large effect whose intent the log holds (re-driven, reconciled).

    Nothing is stored again; a retry's new intent repeats the field.
    """
    ref = (run.recorded.intents.get(key) or {}).get("input_ref")
    return {"input_ref": ref} if isinstance(ref, dict) else large_input(run, name, key, data, raw)


def _delta(
    before: dict[str, tuple[bytes, int]], now: dict[str, tuple[bytes, int]], data: Json
) -> tuple[Json, Json] | None:
    """The items each list argument appended to ``before``'s, and the other arguments (``None``: none did).

    Compared as JSON bytes (a list changed in place since the previous call is
    not mistaken for the same items): the previous list's text without its
    ``]``, then a ``,``, starts the new one.
    """
    append: Json = {}
    for n, (text, count) in now.items():
        old = before.get(n)
        if old is None or old[1] == 0 or count < old[1]:
            continue
        old_text = old[0]
        if text == old_text:
            append[n] = []
        elif text.startswith(old_text[:-1]) and text[len(old_text) - 1 : len(old_text)] == b",":
            append[n] = data[n][old[1] :]
    if not append:
        return None
    return append, {n: v for n, v in data.items() if n not in append}


def effect_input(world: WorldCore, rec: Recorded, key: str, run_id: str) -> Json | None:
    """The arguments the intent of the effect at ``key`` records, read back (``None``: it records none).

    A log older than format 8 records no arguments. A delta is applied to
    its base's arguments, along the chain of bases the index holds.

    Raises:
        ArtifactIntegrityError: An artifact the input is stored in is missing or changed.
        ValueError: The chain is broken or malformed (the message says where).
    """
    deltas: list[tuple[Any, str]] = []  # (delta, its base's key), newest first, down to a whole input
    at = key
    while True:
        d = rec.intents.get(at) or {}
        ref = d.get("input_ref")
        if "input" in d:
            whole: Any = d["input"]
            break
        if not isinstance(ref, dict):
            if not deltas:
                return None  # recorded before format 8
            raise ValueError(f"its base {at} is not in the log, or records no arguments")
        body = _artifact_json(world, ref["artifact"], run_id) if "artifact" in ref else ref
        if ref.get("base") is None:
            whole = body
            break
        if len(deltas) > len(rec.intents):
            raise ValueError("its delta chain loops")
        at = str(ref["base"])
        deltas.append((body, at))
    for body, base in reversed(deltas):
        whole = apply_delta(whole, body, base)
    if not isinstance(whole, dict):
        raise ValueError(f"the arguments recorded for {key} are not an object")
    return whole


def _artifact_json(world: WorldCore, ref: Any, run_id: str) -> Any:
    """The JSON an input's artifact holds, its hash checked."""
    if not isinstance(ref, dict):
        raise ValueError(f"a malformed artifact reference {ref!r}")
    bound = artifact_ref(ref, run_id)
    data = world.artifacts.get(bound.sha256)
    verify_payload(bound, data, run_id=run_id)
    assert data is not None
    return json.loads(data)


def apply_delta(base: Any, body: Any, base_key: object) -> Json:
    """The arguments a delta's ``append`` and ``args`` make of its base's arguments.

    Raises:
        ValueError: The delta or its base is malformed (the message says how).
    """
    append, args = (body.get("append"), body.get("args")) if isinstance(body, dict) else (None, None)
    if not isinstance(base, dict) or not isinstance(append, dict) or not isinstance(args, dict):
        raise ValueError(f"a malformed delta on {base_key}")
    out: Json = {}
    for name in [*base, *args, *append]:
        if name in out:
            continue
        if name in append:
            before = base.get(name)
            if not isinstance(before, list) or not isinstance(append[name], list):
                raise ValueError(f"{name} of {base_key} is not a list")
            out[name] = [*before, *append[name]]
        elif name in args:
            out[name] = args[name]
    return out
