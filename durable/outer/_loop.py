"""Outer loops: a workflow run cycle after cycle under a ``supervise`` function.

Each cycle is a run of the workflow with its own run id. One cycle goes:

1. the manifest records ``pendingCycleRunId`` (the cycle's run id) before the run starts;
2. the run executes (or, after a crash, resumes and replays what it committed);
3. ``supervise(cycle)`` answers ``Done`` or ``Continue``, and that answer is appended
   to the cycle run's own log as ``outer_loop.cycle_completed``: the commit point;
4. the manifest gets the cycle and loses the pending id (and gets the result when
   the loop ends).

A resume reads the manifest, and when a pending cycle already committed, takes
its answer from the log: supervise is never asked twice about one cycle.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from pydantic import ValidationError

from ..engine import (
    ANY,
    Recorded,
    Spec,
    WorldCore,
    definition_hash,
    matches,
    new_run_id,
    spec_of,
    to_json,
    validate_input,
)
from ..engine import payloads as ev
from ..errors import ConfigurationError, OuterLoopError, RunFailedError, RunTimeoutError
from ..events import OUTER_LOOP_CYCLE_COMPLETED
from ..runtime import run_workflow
from ..store import Append, hold
from ._manifest import CycleEntry, Goal, LoopResult, ManifestStore, OuterLoopManifest, check_outer_loop_id
from ._types import Continue, Cycle, CycleRecord, Done, OuterLoopResult, Supervise

Json = dict[str, Any]


def _runtime_config_error(message: str, reason: str) -> RunFailedError:
    return RunFailedError(message, cause_code="runtime_config_error", reason=reason)


class _Loop:
    """One driver's view of one outer loop while it holds the loop's lock."""

    def __init__(
        self,
        spec: Spec,
        wf: Any,
        world: WorldCore,
        outer_loop_id: str,
        supervise: Supervise,
        max_cycles: int,
        description: str | None,
    ):
        self.spec = spec
        self.wf = wf
        self.world = world
        self.id = outer_loop_id
        self.supervise = supervise
        self.max_cycles = max_cycles
        self.description = description
        self.store = ManifestStore(world, outer_loop_id)
        self._records: dict[str, CycleRecord] = {}

    # -- reading the logs -------------------------------------------------------

    def _recorded(self, run_id: str) -> Recorded:
        return Recorded.from_rows(self.world.log.read(run_id), run_id)

    def _record(self, entry: CycleEntry) -> CycleRecord:
        """The committed cycle, rebuilt from its run's log (the authority)."""
        found = self._records.get(entry.runId)
        if found is not None:
            return found
        rec = self._recorded(entry.runId)
        commit, started = rec.cycle_completed, rec.started
        if commit is None or started is None:
            raise OuterLoopError(
                f"the {self.store.where()} lists cycle {entry.cycleNumber} as run "
                f"{entry.runId!r}, but this world's log holds no committed cycle for that run. "
                "Open the world the loop ran in, or use a new outer_loop_id."
            )
        record = CycleRecord(
            number=entry.cycleNumber,
            run_id=entry.runId,
            input=validate_input(self.spec, started.get("input"), entry.runId)[0],
            output=self.spec.rebuild(commit.get("output")),
            decision=commit["decision"],
            summary=commit.get("summary"),
        )
        self._records[entry.runId] = record
        return record

    def _final(self, data: Any) -> Any:
        try:
            return self.spec.rebuild(data)
        except ValidationError:
            return data

    # -- the manifest -----------------------------------------------------------

    def open(self, data: Any, input_hash: str) -> OuterLoopManifest:
        """Load (or create) the manifest and check it against the caller."""
        goal = definition_hash(self.spec)
        m = self.store.load()
        if m is None:
            m = OuterLoopManifest(
                outerLoopId=self.id,
                goal=Goal(workflowDefinitionHash=goal, description=self.description),
                maxCycles=self.max_cycles,
                inputHash=input_hash,
            )
            self.store.save(m)
            return m
        if m.goal.workflowDefinitionHash != goal:
            raise _runtime_config_error(
                f"outer loop {self.id!r} was started with another definition of its workflow "
                f"(hash {m.goal.workflowDefinitionHash}, now {goal} for {self.spec.name!r}). "
                "Restore the workflow the loop was started with and resume, or use a new "
                "outer_loop_id.",
                "outer_loop_goal_mismatch",
            )
        if m.maxCycles != self.max_cycles:
            raise _runtime_config_error(
                f"outer loop {self.id!r} was started with max_cycles={m.maxCycles}, not "
                f"{self.max_cycles}. Resume it with max_cycles={m.maxCycles}, or use a new "
                "outer_loop_id.",
                "outer_loop_max_cycles_mismatch",
            )
        recorded = m.inputHash if m.inputHash is not None else self._legacy_input_hash(m)
        if recorded is not None and not matches(recorded, data, input_hash):
            raise _runtime_config_error(
                f"outer loop {self.id!r} was started with another input (hash {recorded}, now "
                f"{input_hash}); a resume must pass the same input. Use a new outer_loop_id for "
                "new input.",
                "outer_loop_input_mismatch",
            )
        changed = False
        if m.inputHash is None:
            m.inputHash = input_hash
            changed = True
        if m.goal.description is None and self.description is not None:
            m.goal.description = self.description
            changed = True
        if changed:
            self.store.save(m)
        return m

    def _legacy_input_hash(self, m: OuterLoopManifest) -> str | None:
        """A manifest without ``inputHash``: the input its first cycle's run recorded, if any."""
        first = m.cycles[0].runId if m.cycles else m.pendingCycleRunId
        if first is None:
            return None
        started = self._recorded(first).started
        if started is None:
            return None
        found = started.get("input_hash")
        return found if isinstance(found, str) else None

    def fold(self, m: OuterLoopManifest, run_id: str, commit: Json) -> None:
        """Add a committed cycle to the manifest, and the result when the loop ends."""
        number = len(m.cycles) + 1
        if commit.get("cycle") != number or commit.get("outer_loop_id") != self.id:
            raise OuterLoopError(
                f"run {run_id!r} committed cycle {commit.get('cycle')} of outer loop "
                f"{commit.get('outer_loop_id')!r}, but the {self.store.where()} expects cycle "
                f"{number} of {self.id!r}. The manifest and the log disagree; restore the manifest "
                "from a backup or use a new outer_loop_id."
            )
        m.cycles.append(
            CycleEntry(
                cycleNumber=number,
                runId=run_id,
                status="completed",
                output=commit.get("output"),
                summary=commit.get("summary"),
            )
        )
        m.pendingCycleRunId = None
        if commit["decision"] == "done":
            m.result = LoopResult(kind="done", finalOutput=commit.get("final_output"))
        elif number >= m.maxCycles:
            m.result = LoopResult(kind="max_cycles", finalOutput=commit.get("output"))

    def result(self, m: OuterLoopManifest) -> OuterLoopResult:
        """The finished loop's result, from the manifest and the cycles' logs."""
        assert m.result is not None
        return OuterLoopResult(
            outer_loop_id=self.id,
            final_output=self._final(m.result.finalOutput),
            cycles=tuple(self._record(c) for c in m.cycles),
            ended=m.result.kind,
        )

    # -- driving ----------------------------------------------------------------

    def recover(self, m: OuterLoopManifest) -> None:
        """Fold a pending cycle that committed before a crash; supervise is not asked again."""
        pending = m.pendingCycleRunId
        if pending is None:
            return
        commit = self._recorded(pending).cycle_completed
        if commit is not None:
            self.fold(m, pending, commit)
            self.store.save(m)

    async def cycle(self, m: OuterLoopManifest, first_input: Any) -> None:
        """Run (or resume) the next cycle, ask supervise once, commit, update the manifest."""
        number = len(m.cycles) + 1
        history = tuple(self._record(c) for c in m.cycles)
        if number == 1:
            value = first_input
        else:
            prev = self._recorded(m.cycles[-1].runId).cycle_completed
            assert prev is not None  # _record checked it
            value = validate_input(self.spec, prev.get("next_input"), m.cycles[-1].runId)[0]
        run_id = m.pendingCycleRunId
        if run_id is None:
            run_id = new_run_id()
            m.pendingCycleRunId = run_id
            self.store.save(m)
        output = await run_workflow(self.wf, value, world=self.world, run_id=run_id)
        # recover() folded a pending cycle that had committed, so this one has not:
        # supervise is asked exactly once, and _append_commit keeps the first answer.
        terminal = self._recorded(run_id).terminal
        output_data = terminal[1].get("output") if terminal is not None else None
        answer = self.supervise(Cycle(self.id, number, run_id, value, output, history, m.maxCycles))
        if inspect.isawaitable(answer):
            answer = await answer
        data = self._commit_data(number, run_id, output_data, answer)
        commit = await _append_commit(self.world, run_id, data)
        self.fold(m, run_id, commit)
        self.store.save(m)

    def _commit_data(self, number: int, run_id: str, output: Any, answer: Any) -> Json:
        where = f"outer loop {self.id!r} cycle {number}"
        if isinstance(answer, Done):
            final = to_json(ANY, answer.final_output, what="Done.final_output", run_id=run_id, path=where)
            return ev.cycle_completed(self.id, number, output, "done", None, final, None)
        if isinstance(answer, Continue):
            if answer.summary is not None and not isinstance(answer.summary, str):
                raise ConfigurationError(
                    f"{where}: Continue(summary=...) takes a string or None, not {answer.summary!r}."
                )
            try:
                _, next_data, _ = validate_input(self.spec, answer.next_input, run_id)
            except RunFailedError as exc:
                raise RunFailedError(
                    f"{where}: supervise returned Continue(next_input=...) that is not a valid input "
                    f"of workflow {self.spec.name!r}; nothing was committed.\n{exc}",
                    cause_code="runtime_config_error",
                    reason="invalid_input",
                    run_id=run_id,
                ) from exc
            return ev.cycle_completed(self.id, number, output, "continue", next_data, None, answer.summary)
        raise ConfigurationError(
            f"{where}: supervise must return durable.Done(final_output) or "
            f"durable.Continue(next_input), not {answer!r}; nothing was committed."
        )


async def _append_commit(world: WorldCore, run_id: str, data: Json) -> Json:
    """Append ``outer_loop.cycle_completed`` to the cycle run's log, unless one is there already.

    Returns:
        The authoritative commit: the first one in the log.
    """
    async with hold(world.locks, f"run:{run_id}"):
        token = world.log.fence(run_id)
        rec = Recorded.from_rows(world.log.read(run_id), run_id)
        if rec.cycle_completed is not None:
            return rec.cycle_completed
        text = ev.text(data)
        world.log.append([Append(run_id, [(rec.last_seq + 1, OUTER_LOOP_CYCLE_COMPLETED, text)], token)])
        committed: Json = json.loads(text)
        return committed


async def _drive(loop: _Loop, input: Any) -> OuterLoopResult:
    try:
        value, data, input_hash = validate_input(loop.spec, input, loop.id)
    except RunFailedError as exc:
        raise RunFailedError(
            f"the input of outer loop {loop.id!r} is not valid for workflow {loop.spec.name!r}; "
            f"nothing was recorded.\n{exc}",
            cause_code=exc.cause_code,
            reason=exc.reason,
        ) from exc
    async with hold(loop.world.locks, f"outer-loop:{loop.id}"):
        m = loop.open(data, input_hash)
        loop.recover(m)
        while m.result is None:
            await loop.cycle(m, value)
        return loop.result(m)


async def run_outer_loop(
    wf: Any,
    input: Any = None,
    *,
    supervise: Supervise,
    max_cycles: int,
    outer_loop_id: str,
    world: WorldCore,
    timeout: float | None = None,
    description: str | None = None,
) -> OuterLoopResult:
    """Run a workflow cycle after cycle until ``supervise`` says ``Done``, or resume such a loop.

    Each cycle is a run of ``wf`` with its own run id. After each run,
    ``supervise(cycle)`` (sync or async) gets a ``Cycle`` (number, input,
    output, history) and returns ``Done(final_output)`` to end the loop or
    ``Continue(next_input, summary=None)`` to run another cycle on
    ``next_input``. After ``max_cycles`` cycles without ``Done`` the loop ends
    with ``ended="max_cycles"`` and the last cycle's output as its final output.
    Supervise runs outside any run: the calls it makes are not recorded, its
    answer is.

    Call again with the same ``outer_loop_id`` and world after a crash: the
    committed cycles are not run again, the cycle that was in flight resumes
    in its own run, and supervise is never asked twice about one cycle. A
    finished loop returns its recorded result. One caller drives a loop at a
    time; a second one waits, then gets the same result.

    Args:
        wf: A function decorated with ``@workflow``.
        input: The first cycle's input.
        supervise: Judges each finished cycle; returns ``Done`` or ``Continue``.
        max_cycles: The most cycles the loop runs (at least 1).
        outer_loop_id: The loop's stable id; it names the manifest file.
        world: Where the cycles' logs and the manifest live.
        timeout: Seconds to wait in all (lock wait included); the loop stays resumable.
        description: A note on the loop's goal, kept in the manifest.

    Returns:
        The final output, every cycle, and how the loop ended.

    Raises:
        RunFailedError: Bad input, or a resume with another workflow, ``max_cycles`` or
            input (reasons ``outer_loop_goal_mismatch``, ``outer_loop_max_cycles_mismatch``,
            ``outer_loop_input_mismatch``); nothing runs.
        OuterLoopError: The manifest is damaged or disagrees with the log.
        ConfigurationError: Bad arguments, or supervise returned something else than
            ``Done`` or ``Continue``.
        RunTimeoutError: ``timeout`` passed first.

    Example:
        >>> import asyncio, durable
        >>> @durable.workflow
        ... async def grow(text: str) -> str:
        ...     return text + "!"
        >>> def supervise(cycle):
        ...     return durable.Done(cycle.output) if cycle.number == 3 else durable.Continue(cycle.output)
        >>> result = asyncio.run(durable.run_outer_loop(
        ...     grow, "hi", supervise=supervise, max_cycles=5, outer_loop_id="ol_demo",
        ...     world=durable.memory_world()))
        >>> result.final_output, len(result.cycles), result.ended
        ('hi!!!', 3, 'done')
    """
    spec = spec_of(wf)
    if spec is None or spec.kind != "workflow":
        raise ConfigurationError(f"run_outer_loop needs a function decorated with @workflow, not {wf!r}.")
    check_outer_loop_id(outer_loop_id)
    if not isinstance(max_cycles, int) or isinstance(max_cycles, bool) or max_cycles < 1:
        raise ConfigurationError(f"max_cycles must be an int >= 1, not {max_cycles!r}.")
    if not callable(supervise):
        raise ConfigurationError(f"supervise must be a callable taking a Cycle, not {supervise!r}.")
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f"description must be a string or None, not {description!r}.")
    loop = _Loop(spec, wf, world, outer_loop_id, supervise, max_cycles, description)
    if timeout is None:
        return await _drive(loop, input)
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await _drive(loop, input)
    except TimeoutError:
        if not deadline.expired():
            raise
        raise RunTimeoutError(
            f"outer loop {outer_loop_id!r} did not finish within {timeout} s; it stays resumable: "
            "call run_outer_loop again with the same outer_loop_id."
        ) from None
