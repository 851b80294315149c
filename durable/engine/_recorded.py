"""Pure replay: what a run's recorded events say about each call.

``Recorded.from_rows`` reads a run's rows once and indexes them; the engine
then asks it, per call, for the recorded outcome. Nothing here does I/O.

The index is also the run's canonical state: ``to_state()`` gives it as JSON
(what a ``snapshot`` event stores) and ``from_state()`` rebuilds it, so a log
that starts with a snapshot recovers to the same index as the full log.
A ``run.restored`` event rolls the index back to the state at its checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import LogCorruptedError, LogFormatError
from ..events import STEP_COMPLETED
from ._event_index import ON
from ._keys import COMPENSATE, Call, parent_of, session_position, step_name
from ._log_rows import check_fields, chunks, damaged
from ._snapshots import STATE_FORMAT
from ._values import sha256_tag

Json = dict[str, Any]

_STATE_FIELDS = (
    "started",
    "steps_started",
    "steps_completed",
    "steps_failed",
    "attempts",
    "intents",
    "receipts",
    "values",
    "timers",
    "interrupts",
    "answers",
    "sessions",
    "retries",
    "streams",
    "fanouts",
    "accepted",
    "state_version",
    "cycle_completed",
    "talk",
    "patches",
)
"""The attributes of ``Recorded`` that make up the canonical state (``terminal`` is added)."""

_START_FIELDS = ("path", "visit", "attempt", "input_hash", "pos")


def start_of(d: Json) -> Json:
    """A step's start as ``step.started`` records it, from a start or a folded completion."""
    return d if "output" not in d else {k: d[k] for k in _START_FIELDS}


def _damaged_row(
    chunk: list[tuple[int, str, str]], parsed: list[Any], run_id: str, exc: BaseException
) -> LogCorruptedError:
    """The error naming the first row of ``chunk`` that cannot be indexed on its own."""
    for row, d in zip(chunk, parsed, strict=True):
        try:
            Recorded()._index([row], [d], [row], run_id)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as own:
            return damaged(run_id, row[0], row[1], own)
        except Exception:  # another kind of failure: that row is not the culprit
            continue
    return damaged(run_id, f"{chunk[0][0]}..{chunk[-1][0]}", "one of these", exc)


@dataclass
class Recorded:
    """Everything the log recorded for one run, indexed for replay.

    Attributes:
        started: ``run.started`` data, or ``None`` for a run not yet started.
        steps_started: Latest ``step.started`` data per step path; a ``step.completed``
            with its start folded in stands for its start (``start_of`` gives the start).
        steps_completed: ``step.completed`` data per step path.
        steps_failed: Final ``step.failed`` data per step path.
        attempts: Attempts started per step path.
        intents: ``effect.intent`` data per effect key.
        receipts: ``effect.receipt`` data per effect key.
        values: ``value.recorded`` data per key.
        patches: ``patch.marked`` data per key (``durable.patched`` calls that took the new side).
        timers: ``timer.set`` data per path.
        interrupts: ``interrupt`` data per path, in order.
        answers: ``interrupt.resumed`` data per path.
        sessions: ``session.started`` data per path (``completed`` set once it ended).
        retries: ``retry.decision`` data per key or path, in order.
        streams: A stream's chunks per key, from its ``stream.cursor`` events (last attempt).
        fanouts: ``fanout.started`` data per fan-out key.
        accepted: ``drift.accepted`` data, in order.
        terminal: ``(type, data)`` of the last terminal event, if any.
        last_seq: The seq of the last row.
        state_version: The run's committed state version.
        cycle_completed: ``outer_loop.cycle_completed`` data (the first one).
        talk: Per key, the last record of a call that talks to the outside (``recv``,
            ``send``, ``set_event``, ``write_stream``, ``close_stream``), its data with
            ``kind`` added; a finished ``recv`` also has ``done``.
        drift_keys: Drift keys a ``run.resolved`` accepted that no ``drift.accepted`` has
            recorded yet: the next drive accepts them.
        budget: The data of the last ``budget.set`` (the run's budget), or ``None``.
    """

    started: Json | None = None
    steps_started: dict[str, Json] = field(default_factory=dict)
    steps_completed: dict[str, Json] = field(default_factory=dict)
    steps_failed: dict[str, Json] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    intents: dict[str, Json] = field(default_factory=dict)
    receipts: dict[str, Json] = field(default_factory=dict)
    values: dict[str, Json] = field(default_factory=dict)
    patches: dict[str, Json] = field(default_factory=dict)
    timers: dict[str, Json] = field(default_factory=dict)
    interrupts: dict[str, Json] = field(default_factory=dict)
    answers: dict[str, Json] = field(default_factory=dict)
    sessions: dict[str, Json] = field(default_factory=dict)
    retries: dict[str, list[Json]] = field(default_factory=dict)
    streams: dict[str, Json] = field(default_factory=dict)
    fanouts: dict[str, Json] = field(default_factory=dict)
    accepted: list[Json] = field(default_factory=list)
    terminal: tuple[str, Json] | None = None
    last_seq: int = 0
    state_version: int = 0
    cycle_completed: Json | None = None
    talk: dict[str, Json] = field(default_factory=dict)
    drift_keys: list[str] = field(default_factory=list)
    budget: Json | None = None
    _positions: dict[tuple[str, int], Call] | None = None

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, str]], run_id: str = "") -> Recorded:
        """Index a run's rows (in seq order) for replay."""
        return cls().update(rows, run_id)

    def update(self, rows: Iterable[tuple[int, str, str]], run_id: str = "") -> Recorded:
        """Index further rows (in seq order, after ``last_seq``); returns ``self``."""
        rec = self
        rec._positions = None
        for chunk, parsed in chunks(rows, run_id):
            check_fields(chunk, parsed, run_id)
            try:
                rec._index(chunk, parsed, rows, run_id)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
                # A damaged payload (a missing field, a value of the wrong shape): the
                # hot loop does not check every row, so find the row here.
                raise _damaged_row(chunk, parsed, run_id, exc) from exc
            rec.last_seq = chunk[-1][0]
        return rec

    def _index(
        self,
        chunk: list[tuple[int, str, str]],
        parsed: list[Any],
        rows: Iterable[tuple[int, str, str]],
        run_id: str,
    ) -> None:
        on = ON
        completed, started, attempts = self.steps_completed, self.steps_started, self.attempts
        for (_, type_, _), d in zip(chunk, parsed, strict=True):
            if type_ == STEP_COMPLETED and "input_hash" in d and "output" in d:
                # The most frequent row, a step's completion with its start folded in, taken
                # in here as its table function would (a damaged one goes there and fails).
                p = d["path"]
                completed[p] = started[p] = d
                attempts[p] = attempts.get(p, 0) + 1
                self.state_version = d["state_version"]
            else:
                on[type_](self, d, rows, run_id)
                # A snapshot or a restore puts new dicts in place: read them again.
                completed, started, attempts = self.steps_completed, self.steps_started, self.attempts

    def note(self, type_: str, data: Json) -> None:
        """Index one event this driver wrote, for the calls of the same drive that depend on it.

        The driver's own steps and effects need no second look, so only the
        events that later calls of the same drive ask about go through here
        (the run's start, an interrupt and its answer, a retried run, a
        session's manifest). It is the same indexing a resume applies.
        """
        self._index([(self.last_seq, type_, "")], [data], [], "")
        self._positions = None

    def accept(self, d: Json) -> None:
        """Index accepted drift: later checks compare with the manifest it carries."""
        self.accepted.append(d)
        session = d.get("session")
        if session is not None:
            old = self.sessions.get(session) or {"path": session}
            self.sessions[session] = {
                **old,
                "manifest": d["manifest"],
                "manifest_hash": d["manifest_hash"],
                "manifest_format": 2,
            }
        elif self.started is not None:
            started = {**self.started, "manifest": d["manifest"], "manifest_hash": d["manifest_hash"]}
            if d.get("output_schema_hash") is not None:
                started["output_schema_hash"] = d["output_schema_hash"]
            self.started = started

    def inline_output(self, path: str, output: Any) -> None:
        """Put a committed step's output, read back from its artifact, into the index."""
        self.steps_completed[path]["output"] = output

    def add_cursor(self, d: Json) -> None:
        """Collect a stream's chunks; a cursor whose batch starts at chunk 0 begins a new attempt."""
        prev = self.streams.get(d["key"])
        batch = d.get("data") or []
        if prev is None or d["chunks"] - len(batch) == 0:
            self.streams[d["key"]] = {**d, "data": list(batch)}
        else:
            prev["data"].extend(batch)
            prev["chunks"] = d["chunks"]
            prev["terminal"] = d["terminal"]

    def _become(self, other: Recorded) -> None:
        """Take every attribute of ``other`` (a snapshot or a restore replaces the index)."""
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def to_state(self) -> Json:
        """The canonical state as JSON-safe data: what a snapshot stores.

        Everything a resume needs (committed outputs by path, visit counts in
        the paths, confirmed effects, recorded values, status, state version);
        not the log position, which belongs to the log.
        """
        state: Json = {"format": STATE_FORMAT}
        for name in _STATE_FIELDS:
            state[name] = getattr(self, name)
        state["steps_started"] = {p: start_of(d) for p, d in self.steps_started.items()}
        if not self.talk:  # absent when empty: the states of older runs keep their hashes
            del state["talk"]
        if self.budget is not None:
            state["budget"] = self.budget
        if not self.patches:
            del state["patches"]
        state["terminal"] = list(self.terminal) if self.terminal is not None else None
        return state

    @classmethod
    def from_state(cls, state: Json, run_id: str = "") -> Recorded:
        """Rebuild the index from ``to_state()`` data (a snapshot's ``state``).

        Raises:
            LogFormatError: The state was written in a newer layout.
        """
        if state.get("format", 1) > STATE_FORMAT:
            raise LogFormatError(
                f"run {run_id!r} has a snapshot in state format {state['format']}, written by a "
                f"newer durable; this one reads format {STATE_FORMAT}. Upgrade little-workflow.",
                run_id=run_id,
            )
        rec = cls()
        for name in _STATE_FIELDS:
            if name in state:
                setattr(rec, name, state[name])
        rec.budget = state.get("budget")
        terminal = state.get("terminal")
        rec.terminal = (terminal[0], terminal[1]) if terminal else None
        return rec

    def state_hash(self) -> str:
        """``sha256:<hex>`` of the canonical state: equal states have equal hashes."""
        return sha256_tag(self.to_state())

    def inherited(self, started: Json) -> Recorded:
        """The index a fork starts from: committed steps, confirmed effects, recorded values.

        Failures, unconfirmed intents, unanswered interrupts and the terminal
        event stay behind. Inherited step starts and intents are marked, so the
        engine runs a call again when its arguments changed in the fork.
        """
        out = Recorded(started=started, state_version=self.state_version)
        for path, done in self.steps_completed.items():
            out.steps_completed[path] = done
            if path in self.steps_started:
                out.steps_started[path] = {**start_of(self.steps_started[path]), "inherited": True}
            out.attempts[path] = self.attempts.get(path, 1)
        for key, receipt in self.receipts.items():
            if receipt.get("outcome") == "ok" and key in self.intents:
                out.intents[key] = {**self.intents[key], "inherited": True}
                out.receipts[key] = receipt
        out.values = dict(self.values)
        out.patches = dict(self.patches)
        out.timers = dict(self.timers)
        out.answers = dict(self.answers)
        out.interrupts = {p: d for p, d in self.interrupts.items() if p in self.answers}
        out.streams = {k: d for k, d in self.streams.items() if d.get("terminal")}
        out.talk = {k: d for k, d in self.talk.items() if d["kind"] != "recv" or d.get("done")}
        return out

    def resolve(self, d: Json) -> None:
        """Apply a person's decision (``run.resolved``) to the index."""
        decision, key = d.get("decision"), d.get("key")
        if decision == "happened" and key is not None:
            self.receipts[key] = {"key": key, "outcome": "ok", "result": d.get("result"), "resolved": True}
        elif decision == "not_happened" and key is not None:
            self.intents.pop(key, None)  # the call is made again, with the same key
            self._positions = None
        elif decision == "accept_drift":
            self.drift_keys = [*self.drift_keys, *d.get("drift_keys", ())]

    def forget(self, key: str) -> None:
        """Drop what was recorded for one step path or effect key, so the call runs again."""
        for index in (self.steps_started, self.steps_completed, self.attempts, self.intents, self.receipts):
            index.pop(key, None)

    def receipts_error_clear(self, key: str) -> None:
        """Forget an error receipt (and its intent) so a retry calls the effect again."""
        r = self.receipts.get(key)
        if r is not None and r.get("outcome") == "error":
            del self.receipts[key]
            self.intents.pop(key, None)
            self._positions = None

    def clear_failures(self, key: str, *, keep_own_retries: bool = False) -> None:
        """Forget the failures of ``key`` and of every call inside it, so they run again.

        A retried step runs its body again: what committed inside it replays,
        what failed inside it runs again, with a fresh attempt count.

        Args:
            key: A step path or an effect key.
            keep_own_retries: Keep the retry decisions of ``key`` itself (its
                attempt count continues); those of the calls inside restart.
        """
        inside = key + "."
        for p in [p for p in self.steps_failed if p == key or p.startswith(inside)]:
            del self.steps_failed[p]
        for k in [k for k in self.receipts if k == key or k.startswith(inside)]:
            self.receipts_error_clear(k)
        for k in [k for k in self.retries if k.startswith(inside) or (k == key and not keep_own_retries)]:
            del self.retries[k]

    def attempt(self, key: str) -> int:
        """The number of the attempt of ``key`` that is due: 1 plus its recorded retries."""
        return 1 + sum(1 for d in self.retries.get(key, ()) if d.get("decision") == "retry")

    def pending_wake(self, key: str) -> float | None:
        """The wake time of the backoff that the due attempt of ``key`` waits for, if any."""
        decisions = self.retries.get(key)
        if decisions and decisions[-1].get("decision") == "retry":
            wake = decisions[-1].get("wake_at")
            return float(wake) if wake is not None else None
        return None

    def position(self, scope: str, pos: int) -> Call | None:
        """What was recorded as the ``pos``-th durable call of ``scope``, if anything."""
        if self._positions is None:
            index: dict[tuple[str, int], Call] = {}
            for path, d in self.steps_started.items():
                index[(parent_of(path), d.get("pos", 0))] = Call(
                    "step", step_name(path), d["input_hash"], path
                )
            for key, d in self.intents.items():
                if not key.startswith(COMPENSATE):  # an undo takes no position in the body's calls
                    index[(parent_of(key), d.get("pos", 0))] = Call(
                        d["kind"], d["name"], d["input_hash"], key
                    )
            for key, d in self.values.items():
                index[(parent_of(key), d.get("pos", 0))] = Call(d["kind"], d["kind"], "", key)
            for path, d in self.sessions.items():
                at = session_position(path)
                if at is not None:
                    index[(parent_of(path), at)] = Call("session", d["role"], "", path)
            for key, d in self.timers.items():
                index[(parent_of(key), d.get("pos", 0))] = Call("sleep", "sleep", "", key)
            for key, d in self.interrupts.items():
                index[(parent_of(key), d.get("pos", 0))] = Call("interrupt", "interrupt", "", key)
            for key, d in self.talk.items():
                if d.get("pos") is not None:  # a mirrored model chunk takes no position
                    index[(parent_of(key), d["pos"])] = Call(d["kind"], d["kind"], "", key)
            self._positions = index
        return self._positions.get((scope, pos))

    def unconfirmed(self) -> list[str]:
        """Effect keys with an intent and no receipt: the unknown commits."""
        return [k for k in self.intents if k not in self.receipts]

    def status(self) -> str:
        """``completed``, ``failed``, ``interrupted``, ``running`` or ``new``."""
        if self.started is None:
            return "new"
        if self.terminal is None:
            return "running"
        return self.terminal[0].split(".", 1)[1]
