"""The current run and scope, and the run's write buffer.

A ``RunContext`` exists while one caller drives one run. A ``Scope`` is the
place of a call inside it: the workflow body, a step body or a branch. The
current scope travels in a ``ContextVar``, so ``asyncio`` tasks started by
``parallel`` or ``branch`` each carry their own.

Writes are buffered and flushed in one transaction at each durable point
(an intent, a step commit, the end of the run). While several branches run
at once, their flushes that fall in the same event-loop turn are grouped
into one commit.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from .._clock import VIRTUAL, poll_sleep
from ..errors import ConfigurationError, DriftChange
from ..events import DRIFT_ACCEPTED
from ..store import Append, EventLog, Row
from ._event_writer import encode
from ._keys import branch_segment
from ._recorded import Recorded

if TYPE_CHECKING:
    from ._budget import Account
    from ._metrics import Meters
    from ._rebind import SignatureChange
    from ._spec import Spec
    from ._tracing import Tracing
    from ._world import WorldCore


CURRENT: ContextVar[Scope | None] = ContextVar("durable_scope", default=None)
"""The scope of the running durable call, or ``None`` outside any run."""

EFFECT_KEY: ContextVar[str | None] = ContextVar("durable_effect_key", default=None)
"""The idempotency key of the effect whose body is running."""

_TOOL_CALL_ID = re.compile(r"(call|toolu|tool|fc|chatcmpl)[-_][A-Za-z0-9_-]*$")
"""What the tool-call ids of the common model APIs look like (``call_…``, ``toolu_…``, ``fc_…``)."""


class Guard(Protocol):
    """What a runtime watches over a run with: cancellation, deadlines, a worker's stop.

    The engine asks it at every durable call (``check``) and hands it every
    durable wait (``pause``); without one (a plain ``run_workflow``) neither
    costs anything but one attribute test. ``durable.runtime`` implements it.
    """

    def check(self, run: RunContext) -> None:
        """Raise (``RunCancelled``, or a stop) when the run must not go on."""

    async def pause(self, run: RunContext, seconds: float, sleep: Any = None) -> None:
        """Wait ``seconds`` with ``run.sleep``, raising as ``check`` does if the run must stop."""

    def child(self, run: RunContext) -> Guard:
        """The guard of a child run started by ``run`` (a parent's cancellation reaches it)."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class RunContext:
    """One driver's view of one run: identity, recorded events, write buffer."""

    __slots__ = (
        "_flush_scheduled",
        "_waiters",
        "accept_drift",
        "account",
        "active",
        "broken",
        "buffer",
        "children",
        "clock",
        "group",
        "guard",
        "log",
        "loop",
        "loop_thread",
        "meters",
        "models",
        "previous_inputs",
        "recorded",
        "replaying",
        "run_id",
        "seq",
        "signatures",
        "sleep",
        "state_version",
        "takeover",
        "token",
        "tracer",
        "undoable",
        "world",
    )

    def __init__(
        self,
        world: WorldCore,
        run_id: str,
        token: int,
        recorded: Recorded,
        models: dict[str, str],
    ):
        self.world = world
        self.log: EventLog = world.log
        # The event loop that drives the run and its thread: a framework's worker thread
        # (a sync node, a sync tool) hands its durable calls to them (``None`` outside a loop).
        self.loop: asyncio.AbstractEventLoop | None = _running_loop()
        self.loop_thread = threading.get_ident()
        self.group = world.commits
        self.run_id = run_id
        self.token = token
        self.recorded = recorded
        self.replaying = recorded.started is not None
        self.models = models
        self.seq = recorded.last_seq
        self.state_version = recorded.state_version
        self.buffer: list[tuple[int, str, dict[str, Any] | str]] = []
        self.active = 1
        self.clock: Callable[[], float] = world.clock
        self.sleep: Callable[[float], Awaitable[None]] = world.sleep
        self._waiters: list[asyncio.Future[None]] = []
        self._flush_scheduled = False
        self.broken: BaseException | None = None
        self.accept_drift: frozenset[str] = frozenset()
        # Capabilities whose signature changed under the run, by key (``_rebind``).
        self.signatures: dict[str, SignatureChange] = {}
        # The ``drift.accepted`` by which this code takes the run's manifest over, written with
        # its first write (``_run_open.check_resume``): a drive that only replays writes nothing.
        self.takeover: dict[str, Any] | None = None
        self.guard: Guard | None = None
        self.tracer: Tracing | None = None  # set by the runner when tracing is on
        self.meters: Meters | None = None  # set by the runner when metrics are on
        self.account: Account | None = None  # set by the runner for a run with a budget
        self.children: set[asyncio.Task[Any]] | None = None  # tasks driving child runs (_child_runs)
        self.undoable: dict[str, Spec] | None = None  # tools with compensate= this drive called, by name
        # Each function's last large call in this drive: its key and list arguments (``_call_inputs``).
        self.previous_inputs: dict[str, tuple[str, dict[str, tuple[bytes, int]]]] = {}

    async def pause(self, seconds: float, *, poll: bool = False) -> None:
        """A durable wait (a sleep, a retry's backoff): a guard may end it early by raising.

        ``poll``: the wait only looks again later (``recv``); in virtual time the clock
        does not jump for it (``durable._clock.poll_sleep``).
        """
        sleep = poll_sleep if poll and VIRTUAL.get() is not None else self.sleep
        guard = self.guard
        if guard is None:
            await sleep(seconds)
        else:
            await guard.pause(self, seconds, sleep)

    def accepts(self, changes: list[DriftChange]) -> bool:
        """Whether the caller accepted every one of these drift changes (``accept_drift=``)."""
        return bool(changes) and all(c.key in self.accept_drift for c in changes)

    async def halt_children(self) -> None:
        """Stop the tasks still driving child runs of this run, other than this one, and wait for them.

        The runner calls it when the workflow body has ended: such a task is
        one the body left running (a sibling of ``asyncio.gather`` whose other
        call failed). Cancelled, its child run stops where it is and stays
        resumable; the parent's resume drives it on.
        """
        me = asyncio.current_task()
        left = [t for t in self.children or () if t is not me and not t.done()]
        for t in left:
            t.cancel()
        if left:
            await asyncio.wait(left)

    # -- writing -------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any]) -> int:
        """Buffer one event; it becomes durable at the next flush. Returns its seq.

        ``data`` is turned into JSON text when it is flushed; until then it
        must not change.
        """
        self.seq += 1
        self.buffer.append((self.seq, type_, data))
        return self.seq

    def emit_encoded(self, type_: str, data: str) -> int:
        """Buffer one event whose payload is already JSON text; returns its seq."""
        self.seq += 1
        self.buffer.append((self.seq, type_, data))
        return self.seq

    def record(self, type_: str, data: dict[str, Any]) -> int:
        """Buffer one event that later calls of this drive ask the index about; returns its seq."""
        seq = self.emit(type_, data)
        self.recorded.note(type_, data)
        return seq

    def flush(
        self,
        *,
        status: str | None = None,
        created: tuple[str, str | None] | None = None,
        code: str | None = None,
        sync: bool = True,
    ) -> None:
        """Write the buffer in one transaction (a no-op when it is empty).

        ``sync=False`` asks only for a commit that survives a process crash
        (see ``EventLog.append``); ``created`` and ``code`` start the run's summary.
        """
        if self.broken is not None:
            raise self.broken
        if not self.buffer and status is None:
            return
        try:
            appends = [Append(self.run_id, self._take_rows(), self.token, status, created, code)]
            if sync:
                self.log.append(appends)
            else:
                self.log.append(appends, sync=False)
        except BaseException as exc:
            # Nothing of the batch was written, and outcomes in it (receipts) are lost
            # to this driver: it must stop; a resume reads what really is in the log.
            self.broken = exc
            raise

    async def flush_shared(
        self,
        *,
        status: str | None = None,
        created: tuple[str, str | None] | None = None,
        code: str | None = None,
    ) -> None:
        """``flush``, in the world's group commit while other runs are driven beside this one."""
        if not self.group.takes(self):
            self.flush(status=status, created=created, code=code)
            return
        if self.broken is not None:
            raise self.broken
        if not self.buffer and status is None:
            return
        try:
            append = Append(self.run_id, self._take_rows(), self.token, status, created, code)
        except BaseException as exc:
            self.broken = exc
            raise
        await self.group.commit(self, append)

    def _take_rows(self) -> list[Row]:
        """The buffered events as rows, taken out of the buffer (after a pending ``takeover``)."""
        buffered, self.buffer = self.buffer, []
        if self.takeover is not None and buffered:
            buffered = self._taken_over(buffered)
        if len(buffered) == 1 and type(buffered[0][2]) is str:
            return buffered  # type: ignore[return-value]  # one encoded event (a step's end): its row
        return [
            (seq, type_, data if isinstance(data, str) else encode(data)) for seq, type_, data in buffered
        ]

    def _taken_over(
        self, buffered: list[tuple[int, str, dict[str, Any] | str]]
    ) -> list[tuple[int, str, dict[str, Any] | str]]:
        """``buffered`` after the run's ``takeover``, which takes the first seq; indexed at once."""
        data, self.takeover = self.takeover, None
        assert data is not None
        self.seq += 1
        self.recorded.note(DRIFT_ACCEPTED, data)
        return [(buffered[0][0], DRIFT_ACCEPTED, data), *((seq + 1, t, d) for seq, t, d in buffered)]

    def take_append(self) -> Append:
        """The buffered events as one ``Append``, taken out of the buffer.

        For a store that commits the run's events with a write of its own in
        one transaction (an outbox entry); if that write fails the driver
        must stop (set ``broken``), as after a failed flush.
        """
        if self.broken is not None:
            raise self.broken
        return Append(self.run_id, self._take_rows(), self.token)

    async def flush_async(self) -> None:
        """Make the buffer durable; grouped with other branches' flushes of this turn."""
        if self.active <= 1:
            self.flush()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._schedule()
        await fut

    def flush_soon(self) -> None:
        """Make the buffer durable at the next event-loop turn at the latest."""
        try:
            self._schedule()
        except RuntimeError:  # no running loop (a sync call): flush now
            self.flush()

    def _schedule(self) -> None:
        if not self._flush_scheduled:
            asyncio.get_running_loop().call_soon(self._group_flush)
            self._flush_scheduled = True

    def _group_flush(self) -> None:
        self._flush_scheduled = False
        waiters, self._waiters = self._waiters, []
        try:
            self.flush()
        except BaseException as exc:
            # Kept in ``broken`` too: without a waiter (a receipt that rides with the next turn),
            # the run's next durable call or its end raises it, not the event loop's callback.
            for w in waiters:
                if not w.done():
                    w.set_exception(exc)
            return
        for w in waiters:
            if not w.done():
                w.set_result(None)


Made = tuple[Any, Any, int]
"""A durable call's coroutine as its scope keeps it: (coroutine, caller's frame, caller's line)."""


async def _finished() -> None:
    pass


_done = _finished()
_done.close()
NOTHING: Made = (_done, None, 0)
"""A scope's newest call before it made one: a coroutine that has finished (no test for ``None``)."""


class Scope:
    """The place of a durable call inside a run: a body or a branch.

    Durable calls inside one scope must be sequential; each gets the next
    ordinal ``n`` (``_claim.Claim`` takes it and holds ``busy``), and each
    step name counts its visits.
    """

    __slots__ = ("__dict__", "busy", "held", "last", "n", "path", "prefix", "run", "visits")
    held: list[Made] | None  # set on first use: older calls not finished when a newer one was made
    # What few scopes use starts as these class defaults; a scope that sets one gets its own.
    used_branches: set[str] | None = None
    fanouts = 0
    nested: dict[str, Scope] | None = None  # the scopes of calls made in its effects' bodies
    patches: dict[str, int] | None = None  # durable.patched() calls made here, per change id
    keyed: dict[str, Scope] | None = None  # child scopes entered again by key (_held_scopes.keyed)

    def __init__(self, run: RunContext, path: str):
        self.last: Made = NOTHING  # the newest durable call made here (see check_awaited)
        self.run = run
        self.path = path
        self.prefix = path + "." if path else ""  # _keys.scope_prefix, inlined: one per step body
        self.n = 0
        self.visits: dict[str, int] = {}
        self.busy: str | None = None

    def child_branch(self, name: str, key: str) -> Scope:
        """A new branch scope ``name[key]`` below this one (each used once)."""
        if "[" in key or "]" in key:
            raise ConfigurationError(
                f"branch key {key!r} contains '[' or ']'; branch keys name a path segment "
                "and must not contain brackets."
            )
        seg = branch_segment(name, key)
        used = self.used_branches
        if used is None:
            used = self.used_branches = set()
        if seg in used:
            hint = (
                " Model tool-call ids can repeat across turns: key the branch by turn and id, "
                'for example durable.branch(f"{turn}:{call_id}").'
                if _TOOL_CALL_ID.match(key)
                else ""
            )
            raise ConfigurationError(
                f"run {self.run.run_id!r}: branch {seg!r} was already used in scope "
                f"{self.path or '<workflow>'!r}; branch keys must be unique within a scope.{hint}",
                run_id=self.run.run_id,
                path=self.prefix + seg,
            )
        used.add(seg)
        return Scope(self.run, self.prefix + seg)


def current_scope(what: str) -> Scope:
    """The current scope, or a ``ConfigurationError`` saying ``what`` needs a run."""
    scope = CURRENT.get()
    if scope is None:
        raise ConfigurationError(f"{what} can only be called inside a durable run.")
    return scope


def made(scope: Scope, coro: Any, frame: Any) -> None:
    """Note a durable call's coroutine made in ``scope`` by code at ``frame``.

    Only the newest is kept, plus any older one that had not finished when a
    newer one was made (calls awaited one after another never pile up).
    The decorators' fast path inlines this.
    """
    last = scope.last
    if last[0].cr_frame is not None:
        hold(scope, last)
    scope.last = (coro, frame, frame.f_lineno)


def hold(scope: Scope, entry: Made) -> None:
    """Keep a call made in ``scope`` that had not finished when a newer one was made."""
    held: list[Made] | None = getattr(scope, "held", None)  # unset until a scope needs it
    if held is None:
        scope.held = held = []
    held.append(entry)


def _forgotten(coro: Any) -> bool:
    """Whether a coroutine never started and no task will start it (a forgotten ``await``)."""
    if coro.cr_frame is None or coro.cr_running or coro.cr_suspended:
        return False  # finished, closed, running or started
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop: nothing can schedule it any more
        return True
    return not any(t.get_coro() is coro for t in tasks)


def check_awaited(scope: Scope, where: str) -> None:
    """Fail when a durable call made in ``scope`` was never awaited or scheduled.

    Called when a step body, branch or workflow body returns (only when it
    made a durable call, so a step without inner calls pays one test).

    Raises:
        ConfigurationError: A call's coroutine was created and never awaited,
            passed to ``asyncio.gather``/``create_task`` or ``durable.parallel``;
            it names the call and the file and line that made it.
    """
    entries = [*(getattr(scope, "held", None) or ()), scope.last]
    scope.last, scope.held = NOTHING, None
    forgotten = [e for e in entries if _forgotten(e[0])]
    if not forgotten:
        return
    coro, frame, line = forgotten[0]
    spec = coro.cr_frame.f_locals.get("spec")  # every handler's first parameter
    what = f"{spec.kind} {spec.name!r}" if spec is not None else "a durable call"
    for c, _, _ in forgotten:
        c.close()  # it never runs; closing it also spares Python's own warning
    file = frame.f_code.co_filename
    more = f" (and {len(forgotten) - 1} more)" if len(forgotten) > 1 else ""
    run_id = scope.run.run_id
    raise ConfigurationError(
        f"run {run_id!r}: {what} was called at {file}:{line} but never awaited{more}, so it never "
        f"ran and nothing of it was recorded; {where} returned without it. Put `await` before the "
        "call, or pass its coroutine to asyncio.gather, asyncio.create_task or durable.parallel.",
        run_id=run_id,
        path=scope.path or None,
    )
