"""Streaming model calls: ``@model_call`` on an async generator.

The call is an effect like any other (intent durable before the first
chunk is asked for), and its chunks are recorded in ``stream.cursor``
events: one every ``CURSOR_BATCH`` chunks, and a terminal one when the
stream ends, followed by the receipt. A replay yields the recorded chunks
without calling the model. A stream cut by a crash (cursors but no
terminal one) is reissued from its start; the reissued attempt's first
cursor starts again at chunk 0, so replay never mixes two attempts.

With ``@model_call(stream_to=name)`` each chunk is also written to the run's
stream ``name`` (a ``stream.write`` keyed ``<call key>~<i>``) as it arrives.

The usage the chunks report (``_budget.chunk_usage``: a chunk with a
``usage``, or a ``message`` or ``response`` holding one) goes in the receipt,
and the call counts against the run's budget as an unstreamed one does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ..errors import LogCorruptedError
from ..events import EFFECT_RECEIPT, STREAM_CURSOR, STREAM_WRITE
from . import _event_writer as ev
from ._budget import chunk_usage, merged_usage
from ._claim import REPLAYED, Claim
from ._context import CURRENT, EFFECT_KEY, RunContext
from ._decide import EXECUTE
from ._effects import EffectCall, effect_begin, receipt_error, start_span
from ._failures import recordable
from ._keys import effect_key, mirrored_chunk_key
from ._spec import Spec
from ._values import to_json

CURSOR_BATCH = 32
"""How many chunks one non-terminal ``stream.cursor`` event carries."""


async def stream_effect(
    spec: Spec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncIterator[Any]:
    """Run (or replay) one streamed model call, yielding its chunks."""
    with EffectCall(CURRENT.get(), spec.label) as claimed:  # type: ignore[arg-type]
        call, _ = effect_begin(spec, claimed, args, kwargs)
        if call is REPLAYED:
            for chunk in recorded_chunks(spec, claimed.run, call_key(spec, claimed)):
                yield chunk
            return
        run = call.run
        key = call.key
        count = 0
        batch: list[Any] = []
        mirror = spec.stream_to
        finished = False
        usage: dict[str, Any] | None = None

        def cursor(terminal: bool) -> None:
            nonlocal batch
            run.emit(STREAM_CURSOR, ev.stream_cursor(key, count, terminal, batch))
            batch = []

        traced = None if run.tracer is None else start_span(call, 1, current=False)
        try:
            if call.action is EXECUTE:
                await run.flush_async()  # the intent is durable before the model is asked
            gen = fn(*args, **kwargs)
            try:
                while True:
                    token = EFFECT_KEY.set(call.idempotency_key)
                    try:
                        chunk = await gen.__anext__()
                    except StopAsyncIteration:
                        break
                    finally:
                        EFFECT_KEY.reset(token)
                    data = to_json(spec.out, chunk, what="a stream chunk", run_id=run.run_id, path=key)
                    batch.append(data)
                    reported = chunk_usage(data)
                    if reported is not None:
                        usage = merged_usage(usage, reported)
                    if mirror is not None:
                        mirror_chunk(run, mirror, key, count, data)
                    count += 1
                    if len(batch) >= CURSOR_BATCH:
                        cursor(False)
                        run.flush_soon()
                    yield chunk
            finally:
                await gen.aclose()
            finished = True
        except GeneratorExit:
            # The consumer stopped early: the chunks it saw are the stream's outcome.
            finished = True
            raise
        except BaseException as exc:
            if traced is not None:
                traced.end(exc)
                traced = None
            if recordable(exc):
                cursor(True)
                receipt_error(call, exc)
                run.flush_soon()
            raise
        finally:
            if traced is not None:
                traced.span.set_attribute("durable.chunks", count)
                traced.end()
            if finished:
                cursor(True)
                receipt = ev.receipt_ok(key, {"chunks": count})
                if usage is not None:
                    receipt["usage"] = usage
                if run.account is not None:
                    run.account.add(receipt)
                run.emit(EFFECT_RECEIPT, receipt)
                run.flush_soon()


def mirror_chunk(run: RunContext, stream: str, key: str, i: int, data: Any) -> None:
    """Write the ``i``-th chunk of the call ``key`` to the run's stream, unless it is there already.

    A stream reissued after a crash yields its first chunks again; those
    that reached the stream before the crash are not written twice.
    """
    ck = mirrored_chunk_key(key, i)
    if ck not in run.recorded.talk:
        run.emit(STREAM_WRITE, ev.stream_write(ck, stream, data, None))
        run.flush_soon()


def call_key(spec: Spec, claim: Claim) -> str:
    """The key of the streamed model call that ``claim`` holds."""
    return effect_key(claim.scope.prefix, "model", spec.name, claim.n)


def recorded_chunks(spec: Spec, run: RunContext, key: str) -> list[Any]:
    """The chunks of a finished stream, rebuilt from its ``stream.cursor`` events."""
    cur = run.recorded.streams.get(key)
    receipt = run.recorded.receipts.get(key) or {}
    total = (receipt.get("result") or {}).get("chunks")
    if cur is None or not cur.get("terminal") or len(cur["data"]) != total:
        raise LogCorruptedError(
            f"run {run.run_id!r}: streamed model call {spec.name!r} ({key!r}) has a receipt for "
            f"{total} chunks, but its stream.cursor events hold "
            f"{len(cur['data']) if cur else 0}; the log is incomplete. Start a new run id.",
            run_id=run.run_id,
            path=key,
        )
    return [spec.rebuild(c) for c in cur["data"]]
