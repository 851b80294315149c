"""Snapshots: the canonical state of a run as a ``snapshot`` event stores it.

Stored plain, a snapshot would be as large as the events it replaces: it
repeats every step path in three indexes. ``encode_state`` packs it to one
row per path, drops what can be derived again, and compresses it;
``decode_state`` gives the state back.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from ..errors import LogCorruptedError, LogFormatError
from ._values import dumps, value_hash

Json = dict[str, Any]

STATE_FORMAT = 1
"""The version of the canonical state's JSON layout, stored in every snapshot."""

STATE_ENCODING = "zlib+base64"
"""How a snapshot stores the state: the compact JSON, zlib-compressed, in base64."""


def _pack_steps(state: Json) -> Json:
    """One row per step path instead of three indexes, without what can be derived again.

    Each row is ``[path, started, completed, attempts]``; ``started`` and
    ``completed`` lose their ``path`` (the row's) and ``completed`` its
    ``output_hash`` when it is the hash of its output.
    """
    started, completed, attempts = state["steps_started"], state["steps_completed"], state["attempts"]
    rows = []
    for path in {**started, **completed, **attempts}:
        s, c = started.get(path), completed.get(path)
        if s is not None and s.get("path") == path:
            s = {k: v for k, v in s.items() if k != "path"}
        if c is not None and c.get("path") == path:
            drop = {"path", "output_hash"} if c.get("output_hash") == _output_hash(c) else {"path"}
            c = {k: v for k, v in c.items() if k not in drop}
        rows.append([path, s, c, attempts.get(path)])
    packed = {k: v for k, v in state.items() if k not in ("steps_started", "steps_completed", "attempts")}
    packed["steps"] = rows
    return packed


def _unpack_steps(packed: Json) -> Json:
    state = {k: v for k, v in packed.items() if k != "steps"}
    started: Json = {}
    completed: Json = {}
    attempts: Json = {}
    for path, s, c, n in packed["steps"]:
        if s is not None:
            started[path] = s if "path" in s else {"path": path, **s}
        if c is not None:
            if "path" not in c:
                c = {"path": path, **c}
                if "output_hash" not in c:
                    c = _with_output_hash(c)
            completed[path] = c
        if n is not None:
            attempts[path] = n
    state["steps_started"], state["steps_completed"], state["attempts"] = started, completed, attempts
    return state


def _output_hash(completed: Json) -> str:
    return value_hash(completed.get("output"))


def _with_output_hash(c: Json) -> Json:
    # Put output_hash back where step.completed has it: after the output.
    out: Json = {}
    for k, v in c.items():
        out[k] = v
        if k == "output":
            out["output_hash"] = _output_hash(c)
    return out


def encode_state(state: Json) -> Json:
    """The ``state`` field of a snapshot event: the state's JSON, packed and compressed.

    Stored plain, a snapshot would be as large as the events it replaces: it
    repeats every path in three indexes. Packed to one row per path and
    compressed, it is a fraction of them.
    """
    packed = zlib.compress(dumps(_pack_steps(state)).encode(), 9)
    return {"encoding": STATE_ENCODING, "data": base64.b64encode(packed).decode("ascii")}


MIN_INFLATE_BOUND = 64 * 1024 * 1024
"""A snapshot always may inflate to this many bytes."""
INFLATE_RATIO = 64
"""...and to this many times its compressed size: packed state compresses far less than a zip bomb."""


def inflate(packed: bytes, run_id: str = "") -> bytes:
    """``zlib.decompress(packed)``, refusing to grow past a bound (a crafted snapshot is a bomb).

    Raises:
        LogCorruptedError: The data inflates past ``max(MIN_INFLATE_BOUND, INFLATE_RATIO * len(packed))``.
    """
    bound = max(MIN_INFLATE_BOUND, INFLATE_RATIO * len(packed))
    d = zlib.decompressobj()
    out = d.decompress(packed, bound)
    if d.unconsumed_tail or (not d.eof and d.decompress(b"", 1)):
        raise LogCorruptedError(
            f"run {run_id!r} has a snapshot that inflates past {bound} bytes from {len(packed)}; "
            "no snapshot durable writes does that, so the log was crafted or damaged. Restore it "
            "from a backup.",
            run_id=run_id,
        )
    if not d.eof:
        raise zlib.error("the compressed snapshot is truncated")
    return out


def decode_state(stored: Json, run_id: str = "") -> Json:
    """The canonical state held in a snapshot's ``state`` field (plain or encoded).

    Raises:
        LogFormatError: The state is in an encoding this SDK does not know.
        LogCorruptedError: The encoded state cannot be decoded.
    """
    encoding = stored.get("encoding")
    if encoding is None:
        return stored
    if encoding != STATE_ENCODING:
        raise LogFormatError(
            f"run {run_id!r} has a snapshot encoded as {encoding!r}; this durable reads "
            f"{STATE_ENCODING!r}. Upgrade little-workflow.",
            run_id=run_id,
        )
    try:
        state = _unpack_steps(json.loads(inflate(base64.b64decode(stored["data"], validate=True), run_id)))
    except (ValueError, TypeError, zlib.error, KeyError) as exc:
        raise LogCorruptedError(f"run {run_id!r} has a damaged snapshot ({exc}).", run_id=run_id) from exc
    return state
