"""Two runs side by side: their calls aligned by path, each ``same``, ``changed``, ``only_a`` or ``only_b``.

Everything here is pure: it takes a run's recorded index (``Recorded``) and
its events as data and returns data. ``little diff`` prints what ``align``
returns, and the inspector's ``/compare`` page renders it; the run page
builds its tree of calls from ``calls_of`` too.

A call's *output* is what a replay would return at its path: a step's
committed output, an effect's receipt (its result, or its error), a
recorded value, an interrupt's answer. Two calls at the same path are
``same`` when their outcome, output and error are equal, and ``changed``
otherwise (the status is about outputs). Each aligned path also says how
the two calls' inputs compare (``input_change``, in side B): logs of format 8 on
record inputs, so a differing one names the arguments that differ; older
logs keep only the input's hash.

Example:
    >>> a = {"draft": Call("draft", "step", "draft", "ok", "hi")}
    >>> b = {"draft": Call("draft", "step", "draft", "ok", "hello")}
    >>> [r["status"] for r in align(a, b)]
    ['changed']
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..engine import EFFECT_KINDS, Recorded, parent_of

DIFF_STATUSES = ("same", "changed", "only_a", "only_b")
"""What ``align`` says of a path: in both runs with equal outputs, with different ones, in one run only."""

_PATH_FIELDS = ("path", "key")


@dataclass(frozen=True)
class Call:
    """One call of a run as the log recorded it, at its path.

    Attributes:
        path: The call's path (a step path or an effect key).
        kind: ``step``, ``tool``, ``model``, ``workflow``, ``session``, ``interrupt``
            or the kind of a recorded value (``now``, ``uuid4``, ``random``, ``recv``...).
        name: The function, role or value name.
        outcome: ``ok``, ``error``, ``running``, ``unconfirmed`` or ``waiting``.
        output: What a replay returns at the path (JSON data; ``None`` when none).
        error: The recorded error (``Type: message``), or ``None``.
        input_hash: The hash of its input, when the log records one.
        pos: Its position among the calls of its scope.
        artifact: The artifact reference of a step output stored beside the log.
        input: The call's arguments by parameter name, when its log records them (``input_state``).
        input_state: ``recorded``, ``not recorded`` (a log before format 8, or a kind of call
            without arguments) or ``unreadable``.
        input_note: How the input is stored (``inline``, ``artifact``, ``delta``) or why it cannot be read.
    """

    path: str
    kind: str
    name: str
    outcome: str
    output: Any = None
    error: str | None = None
    input_hash: str | None = None
    pos: int = 0
    artifact: dict[str, Any] | None = None
    input: Any = None
    input_state: str = "not recorded"
    input_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The call as JSON data (what ``little diff --json`` prints for each side)."""
        return asdict(self)


def _segment(path: str) -> str:
    parent = parent_of(path)
    return path[len(parent) + 1 :] if parent else path


def _error_text(d: Mapping[str, Any]) -> str:
    return f"{d.get('error_type') or 'Error'}: {d.get('error_message') or ''}".strip()


def _pos(d: Mapping[str, Any] | None) -> int:
    p = (d or {}).get("pos")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0


def _steps(rec: Recorded) -> Iterable[Call]:
    paths = dict.fromkeys([*rec.steps_started, *rec.steps_completed, *rec.steps_failed])
    for path in paths:
        started = rec.steps_started.get(path) or rec.steps_completed.get(path) or {}
        done, failed = rec.steps_completed.get(path), rec.steps_failed.get(path)
        name = _segment(path).split(".visit[", 1)[0]
        common: dict[str, Any] = {"input_hash": started.get("input_hash"), "pos": _pos(started)}
        if done is not None:
            art = done.get("artifact")
            yield Call(path, "step", name, "ok", done.get("output"), artifact=art, **common)
        elif failed is not None:
            yield Call(path, "step", name, "error", None, _error_text(failed), **common)
        else:
            yield Call(path, "step", name, "running", **common)


def _effects(rec: Recorded) -> Iterable[Call]:
    for key, intent in rec.intents.items():
        kind = _segment(key).split(":", 1)[0]
        kind = kind if kind in EFFECT_KINDS else "effect"
        name = str(intent.get("name") or _segment(key))
        common: dict[str, Any] = {"input_hash": intent.get("input_hash"), "pos": _pos(intent)}
        receipt = rec.receipts.get(key)
        if receipt is None:
            yield Call(key, kind, name, "unconfirmed", **common)
        elif receipt.get("outcome") == "error":
            yield Call(key, kind, name, "error", None, _error_text(receipt), **common)
        else:
            yield Call(key, kind, name, "ok", receipt.get("result"), **common)


def _others(rec: Recorded) -> Iterable[Call]:
    for path, s in rec.sessions.items():
        role = str(s.get("role") or _segment(path))
        yield Call(path, "session", role, "ok" if s.get("completed") else "running", pos=_pos(s))
    for key, v in rec.values.items():
        kind = str(v.get("kind") or "value")
        yield Call(key, kind, kind, "ok", v.get("value"), pos=_pos(v))
    for path, i in rec.interrupts.items():
        answer = rec.answers.get(path)
        if answer is None:
            yield Call(path, "interrupt", "interrupt", "waiting", pos=_pos(i))
        else:
            yield Call(path, "interrupt", "interrupt", "ok", answer.get("value"), pos=_pos(i))
    for key, t in rec.talk.items():
        kind = str(t.get("kind") or "talk")
        done = kind != "recv" or t.get("done")
        yield Call(key, kind, kind, "ok" if done else "waiting", t.get("value"), pos=_pos(t))


def first_seqs(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The seq of the first event that names each path or key (what orders a run's calls)."""
    seen: dict[str, int] = {}
    for ev in events:
        for f in _PATH_FIELDS:
            p = ev.get(f)
            if isinstance(p, str) and p not in seen:
                seen[p] = int(ev.get("seq") or 0)
    return seen


def calls_of(rec: Recorded, order: Mapping[str, int] | None = None) -> dict[str, Call]:
    """Every call the run recorded, by path, in the order its first event was written.

    Args:
        rec: The run's recorded index (canonical state: a fork's inherited calls included).
        order: The first seq of each path (``first_seqs``); a call it does not
            know (inherited from a snapshot) comes first, by position and path.

    Returns:
        Path → call, ordered.
    """
    seqs = order or {}
    found = [*_steps(rec), *_effects(rec), *_others(rec)]
    found.sort(key=lambda c: (seqs.get(c.path, 0), c.pos, c.path))
    return {c.path: c for c in found}


def _same(a: Call, b: Call) -> bool:
    if (a.outcome, a.error) != (b.outcome, b.error):
        return False
    if a.artifact is not None or b.artifact is not None:
        ha = (a.artifact or {}).get("sha256")
        return ha is not None and ha == (b.artifact or {}).get("sha256")
    return canonical(a.output) == canonical(b.output)


def canonical(value: Any) -> str:
    """A value as canonical JSON text (sorted keys), the form outputs are compared in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def align(a: Mapping[str, Call], b: Mapping[str, Call]) -> list[dict[str, Any]]:
    """Two runs' calls aligned by path, in run A's order with B's own calls placed after their predecessor.

    Args:
        a: Run A's calls by path (``calls_of``).
        b: Run B's calls by path.

    Returns:
        One ``{"path", "status", "a", "b"}`` per path of either run; ``status``
        is one of ``DIFF_STATUSES``, ``a`` and ``b`` the calls as JSON data
        (``None`` on the side that lacks the path); when both have it, ``b``
        also holds ``input_change``, how its input compares with A's (``input_change``).
    """
    paths = list(a)
    placed = set(paths)
    after: dict[str | None, list[str]] = {}
    previous: str | None = None
    for p in b:
        if p in placed:
            previous = p
        else:
            after.setdefault(previous, []).append(p)
    ordered = list(after.get(None, []))
    for p in paths:
        ordered.append(p)
        ordered += after.get(p, [])
    out = []
    for p in ordered:
        ca, cb = a.get(p), b.get(p)
        if ca is None:
            status = "only_b"
        elif cb is None:
            status = "only_a"
        else:
            status = "same" if _same(ca, cb) else "changed"
        side_b = cb.to_json() if cb else None
        if ca is not None and cb is not None and side_b is not None:
            side_b["input_change"] = input_change(ca, cb)  # what B's input changed of A's
        out.append({"path": p, "status": status, "a": ca.to_json() if ca else None, "b": side_b})
    return out


def input_change(a: Call, b: Call) -> dict[str, Any]:
    """How two calls' inputs compare: ``{"status", "changes"}``, one line per argument that differs.

    ``status`` is ``same``, ``changed`` or ``not recorded`` (either log keeps
    only the input's hash: ``changes`` then says whether the hashes differ).
    """
    if a.input_state != "recorded" or b.input_state != "recorded":
        if a.input_hash == b.input_hash:
            return {"status": "same" if a.input_hash else "not recorded", "changes": []}
        return {"status": "not recorded", "changes": ["called with another input (its hash differs)"]}
    if canonical(a.input) == canonical(b.input):
        return {"status": "same", "changes": []}
    ia, ib = a.input, b.input
    if not isinstance(ia, dict) or not isinstance(ib, dict):
        return {"status": "changed", "changes": ["the input differs"]}
    changes = [_argument_change(n, ia, ib) for n in dict.fromkeys([*ia, *ib])]
    return {"status": "changed", "changes": [c for c in changes if c]}


def _argument_change(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    if name not in a:
        return f"{name}: only in B"
    if name not in b:
        return f"{name}: only in A"
    va, vb = a[name], b[name]
    if canonical(va) == canonical(vb):
        return ""
    if isinstance(va, list) and isinstance(vb, list):
        common = 0
        for x, y in zip(va, vb):  # noqa: B905 (the shorter list bounds the common prefix)
            if canonical(x) != canonical(y):
                break
            common += 1
        return f"{name}: {len(va)} items in A, {len(vb)} in B, the first {common} the same"
    return f"{name}: {_short(va)} in A, {_short(vb)} in B"


def _short(value: Any) -> str:
    text = canonical(value)
    return text if len(text) <= 60 else text[:57] + "..."


def pretty(value: Any) -> str:
    """A value as indented JSON text, as the inspector shows it."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def highlight(a: str, b: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Both texts cut into runs of ``(text, differs)``: what ``b`` changed, word by word.

    Joining each side's texts gives the side back exactly.
    """
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    left: list[tuple[str, bool]] = []
    right: list[tuple[str, bool]] = []
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if i2 > i1:
            _push(left, "".join(ta[i1:i2]), op != "equal")
        if j2 > j1:
            _push(right, "".join(tb[j1:j2]), op != "equal")
    return left, right


def _push(side: list[tuple[str, bool]], text: str, differs: bool) -> None:
    if side and side[-1][1] == differs:
        side[-1] = (side[-1][0] + text, differs)
    else:
        side.append((text, differs))


def summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many paths have each status (every status named, zero included)."""
    counts = dict.fromkeys(DIFF_STATUSES, 0)
    for r in rows:
        counts[r["status"]] += 1
    return counts
