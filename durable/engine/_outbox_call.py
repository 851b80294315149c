"""``@tool(outbox=True)`` inside a run: record the call and its outbox entry in one transaction.

The call claims its position and key like any tool (``tool:name#n``), buffers
its ``effect.intent`` and an ``effect.receipt`` whose result is the
``OutboxRef``, and hands the buffer and the entry to the world's outbox
(``durable.store.OutboxStore.enqueue``), which commits both together. The
body is not called here: a dispatcher in a worker calls it after the commit
(``durable.runtime``). A replay returns the recorded ``OutboxRef``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..events import EFFECT_RECEIPT
from ..store import OutboxEntry
from . import _event_writer as ev
from ._call_inputs import recorded_input
from ._context import CURRENT
from ._decide import EXECUTE, FAIL, REPLAY, Call
from ._effects import EffectCall, asked_hash
from ._failures import rebuild_from
from ._keys import effect_key, idempotency_key
from ._spec import Spec

OUTBOX_TOOLS: dict[str, Spec] = {}
"""The ``@tool(outbox=True)`` functions this process defined, by recorded name (the dispatcher's map)."""


@dataclass(frozen=True)
class OutboxRef:
    """What a ``@tool(outbox=True)`` call returns inside a run: its entry in the outbox.

    The call is durable once this is returned; a dispatcher calls the tool's
    body later with ``key`` as its idempotency key.

    Attributes:
        key: The call's idempotency key, the outbox entry's identity
            (``little outbox`` lists it; ``little outbox retry KEY`` re-drives a dead one).
        tool: The tool's recorded name.
        run_id: The run that made the call.
    """

    key: str
    tool: str
    run_id: str

    def to_json(self) -> dict[str, str]:
        """The reference as the receipt records it."""
        return {"outbox": self.key, "tool": self.tool, "run_id": self.run_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutboxRef:
        """The reference a receipt recorded."""
        return cls(data["outbox"], data["tool"], data["run_id"])


def register(spec: Spec) -> None:
    """Make an outbox tool known to the dispatchers of this process (at decoration)."""
    OUTBOX_TOOLS[spec.name] = spec


async def outbox_effect(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> OutboxRef:
    """Record an outbox tool call and its entry in one transaction; return its ``OutboxRef``."""
    with EffectCall(CURRENT.get(), spec.label) as call:  # type: ignore[arg-type]
        run = call.run
        key = effect_key(call.scope.prefix, "tool", spec.name, call.n)
        inp, raw, ih = spec.dump_input(args, kwargs, run.run_id, key)
        action = EXECUTE
        if run.replaying:
            # The entry is idempotent by key: an intent without a receipt (a fork's) enqueues again.
            asked, change = asked_hash(run, spec, key, inp, ih) if run.signatures else (ih, None)
            action, receipt = call.effect(
                Call("tool", spec.name, asked, key),
                inp,
                redrivable=True,
                reconcilable=False,
                signature=change,
            )
            if action is REPLAY:
                assert receipt is not None
                return OutboxRef.from_json(receipt["result"])
            if action is FAIL:
                assert receipt is not None
                raise rebuild_from(receipt, run_id=run.run_id, path=key)
        call.spec, call.key, call.input, call.ih, call.action = spec, key, inp, ih, action
        if action is EXECUTE:
            call.recorded_input = recorded_input(run, spec.name, key, inp, raw)
            call.emit_intent()
        ref = OutboxRef(idempotency_key(run.run_id, key), spec.name, run.run_id)
        run.emit(EFFECT_RECEIPT, ev.receipt_ok(key, ref.to_json()))
        now = run.clock()
        entry = OutboxEntry(
            ref.key, run.run_id, spec.name, ev.encode(inp), created_at=now, next_at=now, updated_at=now
        )
        store = run.world.open_outbox()
        append = run.take_append()
        try:
            store.enqueue(append, entry)
        except BaseException as exc:
            run.broken = exc  # as a failed flush: this driver stops, a resume reads the log
            raise
        return ref
