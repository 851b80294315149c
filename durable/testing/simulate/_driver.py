"""The simulation: one run of a program through the real runtime, under faults and decisions, checked.

``Simulation.run`` starts the run, then repeats: let virtual time pass until
the run is quiet (it ended, is blocked, waits for an answer or for code, or
nobody alive can drive it), check the invariants, and take the next action
of the fault schedule (drawn from the seed, or played from a given
schedule). Processes are ``Proc``s over one storage; the simulator reads
the world through a view of its own that never crashes.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import shlex
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import durable
from durable.runtime import cancel_run, driver_of, run_status

from .. import SimulatedCrash, virtual_time
from ._code import MODELS, Code
from ._faults import Action, choose, first_actions
from ._invariants import Checker, first_line, waits_for_code
from ._killed import KilledWorker, config_for
from ._ledger import Ledger
from ._procs import Proc, Storage, task_factory
from ._setup import RUN, Outcome, Setup

QUEUE = durable.Queue("sim")

MAX_ACTIONS = 16
SETTLE = 86_400.0
"""Virtual seconds an action's consequences may take before the run must be quiet (a day)."""


class Simulation:
    """One simulated run of ``program`` (see the module's docstring).

    Args:
        setup: What it runs (``setup_of(generate(seed))`` for a generated program).
        backend: ``memory``, ``sqlite`` or ``postgres``.
        seed: Draws the schedule's actions (``None`` with ``schedule``).
        schedule: Actions to play instead of drawing them.
        dsn: The Postgres server, for the ``postgres`` backend.
        sigkill: Workers are processes of their own, SIGKILLed for real (on the real clock;
            a generated program, on SQLite or Postgres).
    """

    def __init__(
        self,
        setup: Setup,
        *,
        backend: str = "memory",
        seed: int | None = None,
        schedule: list[Action] | None = None,
        dsn: str | None = None,
        sigkill: bool = False,
    ):
        if sigkill and (setup.program is None or backend == "memory"):
            raise durable.ConfigurationError(
                "sigkill=True kills worker processes: it needs a generated program "
                "and backend sqlite or postgres."
            )
        self.sigkill = sigkill
        self.scale = 0.05 if sigkill else 1.0  # real seconds for virtual ones
        self._tmp = tempfile.TemporaryDirectory(prefix="durable-sim-ledger-") if sigkill else None
        self.setup = setup
        self.backend = backend
        self.dsn = dsn
        self.rng = random.Random(f"faults:{seed}")
        self.script = None if schedule is None else [list(a) for a in schedule]
        self.outcome = Outcome(setup, backend)
        self.ledger = setup.ledger if setup.ledger is not None else Ledger()
        if self._tmp is not None:  # worker processes note into a file the simulation reads
            self.ledger = Ledger(Path(self._tmp.name) / "ledger.jsonl")
        self.ledger.clear()
        self.codes: dict[int, Code] = {v: setup.code(v, self.ledger) for v in range(1, setup.versions + 1)}
        self.procs: list[Any] = []  # Proc, or KilledWorker
        self.deployed = 1
        self.via = "worker"
        self.state: dict[str, Any] = {}
        self.count = 0
        self.calls: list[tuple[Proc, asyncio.Task[Any], Any]] = []

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> Outcome:
        """Play the simulation to its end; the outcome holds what broke."""
        loop = asyncio.get_running_loop()
        loop.set_task_factory(task_factory)
        loop.set_exception_handler(_quiet_dead)
        self.storage = Storage(self.backend, dsn=self.dsn)
        self.view = self.storage.view
        self.check = Checker(self.setup.expect, self.ledger, self.view, self.codes, RUN, self.storage.commits)
        try:
            for action in self._actions():
                self.outcome.schedule.append(action)
                before = self.state
                await self.act(action)
                self.state = await self.settle(action[1].get("until"))
                await self.calls_ended()
                self.outcome.steps += 1
                await self.check.after(before, self.state, action)
                if self.check.violations:
                    break
            if not self.check.violations:  # the end: the last action's consequences, all of them
                self.state = await self.settle()
                await self.calls_ended()
                self.outcome.steps += 1
                await self.check.after({}, self.state, ["end", {}])
                if not self.check.violations:
                    await self.check.at_end(self.state)
        finally:
            for p in self.procs:
                await p.close()
            for _, task, _ in self.calls:  # what a call left unread when the simulation stopped
                if task.done() and not task.cancelled():
                    task.exception()
            self.outcome.violations = list(self.check.violations)
            self.outcome.status = self.state.get("status", "")
            self.storage.close()
            if self._tmp is not None:
                self._tmp.cleanup()
        return self.outcome

    def _actions(self) -> Iterator[Action]:
        if self.script is not None:
            for action in self.script:
                self.state = self.observe()
                if self.applies(action):
                    yield action
            return
        yield from first_actions(self.rng)
        for _ in range(MAX_ACTIONS):
            drawn = choose(self.rng, self.state, self.setup.topics, self.setup.versions)
            if drawn is None:
                return
            yield drawn

    def applies(self, action: Action) -> bool:
        """Whether a played action makes sense now (a shrunk schedule skips the others)."""
        kind, args = action
        st = self.state
        if kind == "start" or st["status"] == "none":
            return bool(kind == "start" and st["status"] == "none")
        checks: dict[str, bool] = {
            "kill": kind == "kill" and args["proc"] < st["live"],
            "stop": kind == "stop" and args["proc"] < st["workers"],
            "resolve": st["status"] == "blocked" and bool(st["key"]),
            "answer": st["status"] == "interrupted",
            "deploy": self.deployed < self.setup.versions,
        }
        return checks.get(kind, True)

    # -- what the simulator sees ---------------------------------------------------------

    def live_versions(self) -> list[int]:
        return [p.code.version for p in self.procs if p.worker is not None and not p.dead]

    def observe(self) -> dict[str, Any]:
        """The run's status as a person sees it, and which processes are alive."""
        for p in self.procs:
            if isinstance(p, KilledWorker) and not p.dead and p.poll():
                self._died(p)
        live = [p for p in self.procs if not p.dead]
        state: dict[str, Any] = {
            "status": "none",
            "reason": None,
            "key": None,
            "driven": False,
            "live": len(live),
            "workers": sum(1 for p in live if p.worker is not None),
            "versions": [p.code.version for p in live if p.worker is not None],
            "deployed": self.deployed,
            "via": self.via,
            "detail": None,
            "waiting": False,
        }
        if self.view.log.info(RUN) is None and (self.view.control_store is None or self._record() is None):
            return state
        st = run_status(self.view, RUN)
        state.update(status=st.status, reason=st.reason, detail=st, waiting=waits_for_code(st))
        state["key"] = (st.error or {}).get("key") if st.status == "blocked" else None
        if st.status in ("enqueued", "running", "blocked", "interrupted"):
            state["driven"] = driver_of(self.view, RUN)["driver"] == "live"
        return state

    def _record(self) -> Any:
        store = self.view.control_store
        return None if store is None else store.get(RUN)

    def quiet(self, s: dict[str, Any]) -> bool:
        """Whether nothing moves the run now without an action."""
        if any(not task.done() for _, task, _ in self.calls):
            return False
        if s["status"] in ("completed", "failed", "cancelled", "blocked", "interrupted"):
            return not s["driven"]
        if s["waiting"]:
            return not s["driven"]
        if s["status"] in ("running", "enqueued"):
            # Nobody alive can drive it: no worker, and no live process drives it.
            return not s["driven"] and s["workers"] == 0
        return True

    async def settle(self, until: float | None = None) -> dict[str, Any]:
        """Let virtual time pass until the run is quiet (twice in a row), at most ``SETTLE`` seconds.

        With ``until``, only that long: the run may still be in flight.
        """
        loop = asyncio.get_running_loop()
        if until is not None:
            await asyncio.sleep(until * self.scale)
            return self.observe()
        end = loop.time() + SETTLE * self.scale
        delay, seen = 0.01, 0
        state = self.observe()
        while loop.time() < end:
            await asyncio.sleep(delay)
            state = self.observe()
            seen = seen + 1 if self.quiet(state) else 0
            if seen >= 2:
                return state
            delay = min(delay * 1.7, 600.0 * self.scale)
        state["timed_out"] = True
        return state

    # -- actions ---------------------------------------------------------------------------

    def proc(self, version: int, crash_at: int | None, role: str) -> Any:
        self.count += 1
        if self.sigkill and role == "worker":
            assert self.setup.program is not None
            config = config_for(self.setup.program, self.storage, self.ledger)
            killed = KilledWorker(f"{role}{self.count}-v{version}", self.codes[version], crash_at, config)
            self.procs.append(killed)
            return killed
        p = Proc(self.storage, f"{role}{self.count}-v{version}", self.codes[version], crash_at, self._died)
        self.procs.append(p)
        return p

    def _died(self, p: Any) -> None:
        self.note(f"{p.name} died: {p.death}")

    def inp(self) -> Any:
        return self.setup.input

    def budget(self) -> durable.Budget | None:
        b = self.setup.expect.budget
        return None if b is None else durable.Budget(max_model_calls=b)

    def note(self, text: str) -> None:
        self.outcome.notes.append(text)

    async def act(self, action: Action) -> None:
        kind, args = action
        code = self.codes[self.deployed]
        if kind == "start":
            self.via = args["via"]
            if self.via == "call":
                await self.call(args["crash_at"], None)
                return
            p = self.proc(1, args["crash_at"] if self.via == "background" else None, "client")
            queue = QUEUE if self.via == "worker" else None

            async def start() -> None:
                durable.start_workflow(
                    code.workflow,
                    self.inp(),
                    world=p.world,
                    run_id=RUN,
                    queue=queue,
                    models=MODELS,
                    budget=self.budget(),
                    deadline=self.setup.deadline,
                )

            await self.guard(p, start())
        elif kind == "worker":
            p = self.proc(args["version"], args["crash_at"], "worker")
            await p.start_worker(QUEUE)
        elif kind == "call":
            await self.call(args["crash_at"], None)
        elif kind == "kill":
            live = [p for p in self.procs if not p.dead]
            if args["proc"] < len(live):  # a process may have ended since the action was drawn
                await live[args["proc"]].kill()
        elif kind == "stop":
            workers = [p for p in self.procs if p.worker is not None and not p.dead]
            if args["proc"] < len(workers):
                await workers[args["proc"]].stop_worker()
        elif kind == "deploy":
            self.deployed = 2
            if args["mode"] == "replace":
                for p in self.procs:
                    if p.worker is not None and not p.dead and p.code.version == 1:
                        await p.stop_worker()
            p = self.proc(2, args["crash_at"], "worker")
            await p.start_worker(QUEUE)
        elif kind == "wait":
            await asyncio.sleep(args["seconds"] * self.scale)
        else:
            await self.decide(kind, args, code)

    async def decide(self, kind: str, args: dict[str, Any], code: Code) -> None:
        """A person's decision, taken from an operator process that knows the workflows (``--workflow``)."""
        if kind == "answer" and self.via == "call":
            await self.call(None, args["value"])
            return
        op = self.proc(self.deployed, args.get("crash_at"), "operator")
        h = durable.RunHandle(RUN, op.world)
        wfs = code.workflows()
        st = self.state.get("detail")
        if kind == "cancel":
            coro: Any = _sync(lambda: cancel_run(op.world, RUN, workflows=wfs))
        elif kind == "send":
            coro = durable.send(RUN, args["value"], topic=args["topic"], world=op.world)
        elif kind == "answer":
            coro = h.answer(args["value"], workflows=wfs)
        elif kind == "resolve":  # in the run that holds the call (a child run's, when it is in one)
            key = self.state["key"]
            holder = ((st.error if st is not None else None) or {}).get("run_id") or RUN
            found = self.ledger.result_of(_ledger_key(key, holder))
            happened = args["happened"] and found is not None
            self.check.decided(key, happened)
            coro = durable.RunHandle(holder, op.world).resolve(
                key, happened=happened, result=found["value"] if happened else None, workflows=wfs
            )
        else:  # resume
            accept = _drift_keys(st) if args["accept"] else []
            said = f"{st.detail if st else ''} {((st.error if st else None) or {}).get('error_message', '')}"
            self.check.futile = self.check.futile or bool(accept and "would not help" in said)
            budget = None
            if args["budget"] and self.setup.expect.budget is not None:
                budget = durable.Budget(max_model_calls=self.setup.expect.budget + 5)
            self.check.accepted(accept, None if budget is None else budget.max_model_calls)
            coro = durable.resume_run(RUN, world=op.world, workflows=wfs, accept_drift=accept, budget=budget)
        await self.guard(op, coro, decision=kind)

    async def guard(self, p: Proc, coro: Any, decision: str | None = None) -> None:
        """Run ``coro`` in process ``p``; note what it raised (a refused decision is checked)."""
        try:
            await p.spawn(coro)
        except BaseException as exc:
            if p.dead:
                return  # its death is noted
            if not isinstance(exc, Exception):
                raise
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.note(f"{p.name}: {type(exc).__name__}: {first}")
            if decision is not None:
                self.check.refused(decision, exc, self.state)

    async def call(self, crash_at: int | None, answer: Any) -> None:
        """``run_workflow`` with the run's id in a new process of the deployed code (the in-process path).

        The call goes on in its process while the simulation goes on; ``calls_ended``
        checks it once it returned.
        """
        p = self.proc(self.deployed, crash_at, "caller")
        code = p.code
        # What dry_resume says holds for a resume that nothing else races: no worker, no driver.
        alone = self.state.get("workers") == 0 and not self.state.get("driven")
        predicted = None
        if alone and self.view.log.info(RUN) is not None:
            predicted = await self.check.predict(code)
        call = durable.run_workflow(
            code.workflow,
            self.inp(),
            world=p.world,
            run_id=RUN,
            models=MODELS,
            budget=self.budget(),
            resume=answer,
        )
        self.calls.append((p, p.spawn(call), predicted))

    async def calls_ended(self) -> None:
        """Check each in-process call that returned: its run records its outcome as ``dry_resume`` said."""
        for entry in list(self.calls):
            p, task, predicted = entry
            if not task.done():
                continue
            self.calls.remove(entry)
            raised = asyncio.CancelledError() if task.cancelled() else task.exception()
            if p.dead:
                continue  # its death is noted
            if raised is None:
                self.note(f"{p.name}: run_workflow returned {task.result()!r}"[:200])
            else:
                self.note(f"{p.name}: run_workflow raised {first_line(raised)}"[:200])
            await p.close()
            self.check.drove(raised, predicted, self.observe())


def _ledger_key(key: str, run_id: str) -> str:
    """The idempotency key a fake body saw for the call the run's error names."""
    return key if key.startswith(run_id + ":") else f"{run_id}:{key}"


def _drift_keys(st: Any) -> list[str]:
    """The drift keys a status names (its error, or what a waiting run's code differs in)."""
    if st is None:
        return []
    keys = list((st.error or {}).get("drift_keys") or [])
    detail = st.detail or ""
    if "differs: " in detail:  # (differs: KEY, KEY)[; accepting the drift would not help (...)]
        keys += [k.strip() for k in detail.split("differs: ", 1)[1].split(")", 1)[0].split(",") if k.strip()]
    for fix in st.fixes:  # little resume RUN --accept-drift KEY ... [--workflow ...]
        words = shlex.split(fix)
        if "--accept-drift" in words:
            after = words[words.index("--accept-drift") + 1 :]
            keys += list(itertools.takewhile(lambda w: not w.startswith("--"), after))
    return sorted({k for k in keys if k != "none named"})


def _quiet_dead(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """What a dead process's tasks and callbacks raise is not news; anything else is reported."""
    if isinstance(context.get("exception"), SimulatedCrash):
        return
    loop.default_exception_handler(context)


async def _sync(fn: Any) -> Any:
    return fn()


def simulate_one(
    setup: Setup,
    *,
    backend: str = "memory",
    seed: int | None = None,
    schedule: list[Action] | None = None,
    dsn: str | None = None,
    sigkill: bool = False,
) -> Outcome:
    """Run one simulation in a new event loop on a virtual clock (see ``Simulation``).

    Args:
        setup: What it runs (``setup_of(generate(seed))``, or your own ``Setup``).
        backend: ``memory``, ``sqlite`` or ``postgres``.
        seed: Draws the actions (the same seed draws the same ones).
        schedule: Actions to play instead (an outcome's ``schedule``, a printed test's ``SCHEDULE``).
        dsn: The Postgres server, for ``postgres``.
        sigkill: Worker processes of their own, SIGKILLed for real, on the real clock.

    Returns:
        The ``Outcome``: the actions taken, the checks made, what broke. A failure of
        the simulator itself is reported as a violation ``simulator-error`` too.

    Example:
        >>> from durable.testing.simulate import generate, setup_of, simulate_one
        >>> outcome = simulate_one(setup_of(generate(3)), seed=3)
        >>> outcome.schedule[0][0]
        'start'
    """
    sim = Simulation(setup, backend=backend, seed=seed, schedule=schedule, dsn=dsn, sigkill=sigkill)
    try:
        if sigkill:  # processes of their own share the real clock
            return asyncio.run(sim.run())
        with virtual_time():
            return asyncio.run(sim.run())
    except (Exception, SimulatedCrash, durable.RunCancelled, durable.FencedError) as exc:  # reported as one
        trace = "".join(traceback.format_exception(exc)[-6:])
        sim.outcome.violations = [f"simulator-error: {first_line(exc)}\n{trace}"]
        return sim.outcome
