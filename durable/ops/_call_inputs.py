"""Each call's input read back from a run's log: inline, from an artifact, or rebuilt along a delta chain.

The engine records a call's arguments in its ``step.started`` (or folded
``step.completed``) and ``effect.intent`` (see ``durable.engine``'s
``_call_inputs``): ``input`` inline, or ``input_ref`` for longer ones, which
names an artifact or is a *delta* (the items its list arguments appended to
the arguments of an earlier call, its ``base``). ``InputReader`` reads the
rows in seq order and rebuilds each input as of its own event, so a delta
always meets its base as it was then; artifacts are read once per reader
(what one page needs). Logs written before format 8 record no input: their
calls read as ``not recorded``.

``input_artifacts`` lists the artifacts inputs live in (what ``gc`` keeps and
``little verify`` checks); ``self_contained`` rewrites the inputs of a
state about to stand alone (a compaction's snapshot, a fork's inherited
calls) whose chain reaches a call the state does not keep.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..engine import FIRST_TYPES, Recorded, WorldCore, apply_delta, value_hash
from ..errors import ArtifactIntegrityError
from ..events import EFFECT_INTENT, STEP_COMPLETED, STEP_STARTED

RECORDED = "recorded"
NOT_RECORDED = "not recorded"
UNREADABLE = "unreadable"
EARLIER = "earlier"
"""A delta whose chain reaches a call before the rows read (the inspector reads a long run's last rows)."""

Json = dict[str, Any]
Where = tuple[str, str]  # ("step", path) or ("effect", key)


@dataclass(frozen=True)
class CallInput:
    """A call's input as its log records it.

    Attributes:
        state: ``recorded``, ``not recorded`` (a log older than format 8), ``unreadable``, or
            ``earlier`` (a delta on a call before the rows read: the whole log has it).
        value: The arguments by parameter name (``None`` unless recorded).
        stored: How the log holds it: ``inline``, ``artifact`` or ``delta`` (``""`` when not recorded).
        problem: Why a recorded input cannot be read back (a missing artifact, a lost base).
        input_hash: The hash its event records (what ``little verify`` checks the value against).
    """

    state: str
    value: Any = None
    stored: str = ""
    problem: str | None = None
    input_hash: str | None = None


NONE = CallInput(NOT_RECORDED)


def fields_of(d: Json | None) -> Json | None:
    """The ``input`` or ``input_ref`` an event's data holds, or ``None``."""
    if d is None:
        return None
    if "input" in d and "input_hash" in d:
        return {"input": d["input"]}
    ref = d.get("input_ref")
    return {"input_ref": ref} if isinstance(ref, dict) else None


def state_entries(rec: Recorded) -> Iterator[tuple[Where, Json]]:
    """Each step start (its folded completion when the start lost its fields) and intent of a state."""
    for path in dict.fromkeys([*rec.steps_started, *rec.steps_completed]):
        d = rec.steps_started.get(path)
        if fields_of(d) is None:
            d = rec.steps_completed.get(path)
        if d is not None and fields_of(d) is not None:
            yield ("step", path), d
    for key, d in rec.intents.items():
        if fields_of(d) is not None:
            yield ("effect", key), d


class InputReader:
    """Rebuilds the inputs of one run's calls, reading each artifact at most once."""

    def __init__(self, world: WorldCore, run_id: str):
        self.world = world
        self.run_id = run_id
        self.inputs: dict[Where, CallInput] = {}
        self._artifacts: dict[str, Any] = {}
        self._begins = 0
        """The seq the rows read begin at when they are not the whole log (0: they are)."""

    def read_rows(self, rows: Iterable[tuple[int, str, str]]) -> InputReader:
        """Take a run's rows in seq order (a snapshot's state included); return the reader.

        The rows may be the log's last ones only (the inspector's page of a long
        run): a delta whose base was recorded before them is unreadable, and says so.
        """
        first = True
        for seq, type_, data in rows:
            if first and type_ not in FIRST_TYPES:
                self._begins = seq
            first = False
            if type_ in (STEP_STARTED, STEP_COMPLETED, EFFECT_INTENT):
                d = json.loads(data)
                fields = fields_of(d)
                if fields is None:
                    continue
                where = ("effect", d["key"]) if type_ == EFFECT_INTENT else ("step", d["path"])
                got = self.resolve(where, fields, self.inputs)
                self.inputs[where] = replace(got, input_hash=d.get("input_hash"))
            elif type_ == "snapshot":
                self.read_state(Recorded.from_rows([(seq, type_, data)], self.run_id))
        return self

    def read_state(self, rec: Recorded) -> None:
        """Take the inputs of a canonical state, whose deltas reach bases inside it or read before it."""
        pending = dict(state_entries(rec))
        done: dict[Where, CallInput] = {}

        def lookup(where: Where) -> CallInput | None:
            if where in done:
                return done[where]
            d = pending.pop(where, None)
            if d is None:
                return self.inputs.get(where)
            done[where] = CallInput(UNREADABLE, problem="its delta chain loops")  # while it resolves
            got = self.resolve(where, fields_of(d) or {}, _Lookup(lookup))
            done[where] = replace(got, input_hash=d.get("input_hash"))
            return done[where]

        while pending:
            lookup(next(iter(pending)))
        self.inputs.update(done)

    def get(self, kind: str, key: str) -> CallInput:
        """The input of the step (``kind="step"``) or effect at ``key``."""
        return self.inputs.get(("step" if kind == "step" else "effect", key), NONE)

    def resolve(self, where: Where, fields: Json, known: Any) -> CallInput:
        """The input ``fields`` record, its base looked up in ``known`` (a mapping of ``Where``)."""
        if "input" in fields:
            return CallInput(RECORDED, fields["input"], "inline")
        ref = fields["input_ref"]
        base_key = ref.get("base")
        if base_key is None:
            return self._from_artifact(ref.get("artifact"), "artifact", where)
        body: Any = ref
        if "artifact" in ref:
            got = self._from_artifact(ref["artifact"], "delta", where)
            if got.state != RECORDED:
                return got
            body = got.value
        base = known.get((where[0], str(base_key)))
        if base is None and self._begins:
            why = f"its base {base_key} was recorded before seq {self._begins}, where the rows read begin"
            return CallInput(EARLIER, stored="delta", problem=why)
        if base is not None and base.state == EARLIER:
            return CallInput(EARLIER, stored="delta", problem=base.problem)
        if base is None or base.state != RECORDED:
            why = base.problem if base is not None else "the log no longer holds it"
            return CallInput(UNREADABLE, stored="delta", problem=f"its base {base_key} is unreadable: {why}")
        return _apply(base.value, body, base_key)

    def _from_artifact(self, ref: Any, stored: str, where: Where) -> CallInput:
        sha = ref.get("sha256") if isinstance(ref, dict) else None
        if not isinstance(sha, str):
            return CallInput(UNREADABLE, stored=stored, problem=f"the input of {where[1]} names no artifact")
        if sha not in self._artifacts:
            data = self.world.artifacts.get(sha)
            try:
                self._artifacts[sha] = None if data is None else json.loads(data)
            except ValueError:
                self._artifacts[sha] = None
        value = self._artifacts[sha]
        if value is None:
            problem = (
                f"the input of {where[1]} (artifact {sha}) is missing from the artifact store or not JSON"
            )
            return CallInput(UNREADABLE, stored=stored, problem=problem)
        return CallInput(RECORDED, value, stored)


class _Lookup:
    """A mapping view over a resolving function (``known.get`` for ``InputReader.resolve``)."""

    def __init__(self, fn: Any):
        self.fn = fn

    def get(self, where: Where) -> CallInput | None:
        return self.fn(where)  # type: ignore[no-any-return]


def _apply(base: Any, body: Any, base_key: object) -> CallInput:
    """The arguments a delta ``body`` (``append`` and ``args``) makes of its base's arguments."""
    try:
        return CallInput(RECORDED, apply_delta(base, body, base_key), "delta")
    except ValueError as exc:
        return CallInput(UNREADABLE, stored="delta", problem=str(exc))


def read_inputs(world: WorldCore, run_id: str, rows: Iterable[tuple[int, str, str]]) -> InputReader:
    """Every call input of a run's ``rows`` (what the inspector and ``little diff`` show)."""
    return InputReader(world, run_id).read_rows(rows)


def input_artifacts(rec: Recorded, run_id: str, rows: Iterable[tuple[int, str, str]] = ()) -> set[str]:
    """The hashes of the artifacts the inputs of a state and of its ``rows`` are stored in.

    Raises:
        ArtifactIntegrityError: A reference in the log is malformed.
    """
    found: set[str] = set()
    entries: list[Json] = [d for _, d in state_entries(rec)]
    for _, type_, data in rows:
        if type_ in (STEP_STARTED, STEP_COMPLETED, EFFECT_INTENT) and '"input_ref"' in data:
            entries.append(json.loads(data))
    for d in entries:
        ref = d.get("input_ref")
        if not isinstance(ref, dict) or "artifact" not in ref:
            continue
        sha = ref["artifact"].get("sha256") if isinstance(ref["artifact"], dict) else None
        if not isinstance(sha, str) or not sha.startswith("sha256:"):
            raise ArtifactIntegrityError(
                f"run {run_id!r}: the log holds a malformed input reference {ref!r}; the log is "
                "damaged. Restore it from a backup, or start a new run id.",
                run_id=run_id,
                artifact=str(ref.get("artifact")),
                expected=str(sha),
            )
        found.add(sha)
    return found


def self_contained(rec: Recorded, reader: InputReader) -> int:
    """Give each input of ``rec`` whose delta chain leaves it its whole value (from ``reader``); how many.

    A compaction drops the events a chain may run through (a base whose
    call was made again, or forgotten by a restore), and a fork keeps only
    the confirmed calls: what stands alone must read alone.
    """
    alone = InputReader(reader.world, reader.run_id)
    alone._artifacts = reader._artifacts
    alone.read_state(rec)
    fixed = 0
    for where, d in state_entries(rec):
        whole, read_alone = reader.inputs.get(where), alone.inputs.get(where, NONE)
        if whole is None or whole.state != RECORDED:
            continue
        if read_alone.state == RECORDED and read_alone.value == whole.value:
            continue
        d.pop("input_ref", None)
        d["input"] = whole.value
        fixed += 1
    return fixed


def input_problems(reader: InputReader) -> list[str]:
    """What ``little verify`` says of a run's inputs: each unreadable one, each of another hash."""
    problems = []
    for (_, key), got in reader.inputs.items():
        if got.state == UNREADABLE:
            problems.append(f"the input of {key} cannot be read back: {got.problem}")
        elif got.state == RECORDED and got.input_hash and value_hash(got.value) != got.input_hash:
            problems.append(
                f"the input of {key} ({got.stored}) does not match its input_hash; the log or an "
                "artifact was changed"
            )
    return problems
