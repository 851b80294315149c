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
back for the inspector and ``little diff``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._artifacts import store_bytes
from ._values import json_bytes

if TYPE_CHECKING:
    from ._context import RunContext

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
