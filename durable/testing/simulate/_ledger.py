"""The outside world of a simulation: every side effect a fake tool or model call made, in order.

A fake body calls the ledger instead of a real service (``ledger.effect``,
``ledger.undo``, ``ledger.model``), which notes what happened under the
call's idempotency key. The notes outlive any crash of the process that
made them, as an external system's records would: in memory for simulated
crashes, in an append-only file (one JSON line each, written with
``O_APPEND``) when worker processes are killed for real. The ledger is also
what a reconcile function and an honest operator ask: did the call with
this key happen, and what did it return?

Example:
    >>> import durable
    >>> from durable.testing.simulate import Ledger
    >>> ledger = Ledger()
    >>> @durable.tool
    ... async def charge(order: str) -> str:
    ...     return ledger.effect("charge", order)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durable


@dataclass(frozen=True)
class Effect:
    """One side effect.

    Attributes:
        kind: ``tool``, ``undo`` (a compensation), ``model``, or ``attempt``
            (an attempt of a flaky call that failed before doing anything).
        name: The function's name.
        key: The idempotency key (``run_id:path``), or ``step:<arg>`` for a step's attempt.
        arg: The call's argument (``None`` when the fake did not say).
        result: What the call returned.
    """

    kind: str
    name: str
    key: str
    arg: Any = None
    result: Any = None


class Ledger:
    """The side effects of one simulation, kept in memory or in an append-only file.

    Args:
        path: A file to append to (worker processes killed for real share it), or ``None``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = None if path is None else Path(path)
        self._effects: list[Effect] = []

    def clear(self) -> None:
        """Forget every effect (a new simulation starts)."""
        self._effects.clear()
        if self.path is not None and self.path.exists():
            self.path.unlink()

    def note(self, kind: str, name: str, key: str, arg: Any = None, result: Any = None) -> None:
        """Record one side effect (it survives any crash that follows)."""
        if self.path is None:
            self._effects.append(Effect(kind, name, key, arg, result))
            return
        line = json.dumps([kind, name, key, arg, result]) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def effects(self) -> list[Effect]:
        """Every side effect so far, in order."""
        if self.path is None:
            return list(self._effects)
        if not self.path.exists():
            return []
        return [Effect(*json.loads(line)) for line in self.path.read_text().splitlines() if line]

    def result_of(self, key: str) -> Any:
        """``{"value": result}`` of the effect with this key, or ``None`` when it never happened."""
        for e in self.effects():
            if e.key == key and e.kind != "attempt":
                return {"value": e.result}
        return None

    def attempts(self, key: str) -> int:
        """How many attempts of the call with this key began (failed ones and the one that ran)."""
        return sum(1 for e in self.effects() if e.key == key)

    # -- what fake bodies call -------------------------------------------------------------

    def effect(self, name: str, arg: Any = None, *, flaky: int = 0, result: Any = None) -> Any:
        """The body of a fake ``@tool``: note the side effect under the call's key; return ``result``.

        Args:
            name: The tool's name.
            arg: Its argument (calls are told apart by it).
            flaky: The first ``flaky`` attempts of each key raise ``ConnectionError`` instead.
            result: What the tool returns (default ``"name(arg)"``).
        """
        key = durable.idempotency_key() or ""
        self.flaky(key, flaky)
        out = f"{name}({arg})" if result is None else result
        self.note("tool", name, key, arg, out)
        return out

    def undo(self, name: str, arg: Any, result: Any) -> str:
        """The body of a fake compensation: note it; return ``"undone <result>"``."""
        self.note("undo", name, durable.idempotency_key() or "", arg, f"undone {result}")
        return f"undone {result}"

    def model(self, name: str, arg: Any, input_tokens: int = 10, output_tokens: int = 10) -> dict[str, Any]:
        """The body of a fake ``@model_call``: note it; return a response with its token usage."""
        text = f"{name}({arg})"
        self.note("model", name, durable.idempotency_key() or "", arg, text)
        usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
        return {"text": text, "usage": usage, "model": "sim"}

    def flaky(self, key: str, times: int) -> None:
        """Raise ``ConnectionError`` for the first ``times`` attempts under ``key`` (noted as attempts)."""
        if times and self.attempts(key) < times:
            self.note("attempt", "", key)
            raise ConnectionError(f"the service did not answer attempt {self.attempts(key)} of {key}")

    def reconcile(self, key: str, inp: Any = None) -> Any:
        """A ``reconcile=`` function: the recorded result of the call with ``key``, or ``NEVER_HAPPENED``."""
        found = self.result_of(key)
        return durable.NEVER_HAPPENED if found is None else found["value"]
