"""What an outer loop hands to user code and gets back: cycles, answers and the result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Done(Generic[T]):
    """What ``supervise`` returns to end the loop.

    Attributes:
        final_output: The loop's final output (JSON-serializable through pydantic).
    """

    final_output: T


@dataclass(frozen=True)
class Continue(Generic[T]):
    """What ``supervise`` returns to run another cycle.

    Attributes:
        next_input: The next cycle's input, valid for the workflow's input type.
        summary: An optional note kept with the cycle in the manifest.
    """

    next_input: T
    summary: str | None = None


@dataclass(frozen=True)
class CycleRecord:
    """A committed cycle.

    Attributes:
        number: The cycle's number, from 1.
        run_id: The run that executed the cycle.
        input: The cycle's input, as the workflow's input type.
        output: The cycle's output, as the workflow's output type.
        decision: ``"done"`` or ``"continue"``: what supervise answered.
        summary: The ``Continue`` summary, if supervise gave one.
    """

    number: int
    run_id: str
    input: Any
    output: Any
    decision: Literal["done", "continue"]
    summary: str | None = None


@dataclass(frozen=True)
class Cycle:
    """What ``supervise`` receives after a cycle's run finished.

    Attributes:
        outer_loop_id: The loop's id.
        number: The cycle's number, from 1.
        run_id: The run that executed the cycle.
        input: The cycle's input.
        output: The cycle's output.
        history: The cycles committed before this one, oldest first.
        max_cycles: The loop's cap; ``number == max_cycles`` is the last cycle.
    """

    outer_loop_id: str
    number: int
    run_id: str
    input: Any
    output: Any
    history: tuple[CycleRecord, ...]
    max_cycles: int

    @property
    def is_last(self) -> bool:
        """Whether the loop ends after this cycle whatever supervise answers."""
        return self.number >= self.max_cycles


@dataclass(frozen=True)
class OuterLoopResult:
    """How an outer loop ended.

    Attributes:
        outer_loop_id: The loop's id.
        final_output: ``Done.final_output`` when supervise ended the loop; the last
            cycle's output when the loop reached ``max_cycles`` without ``Done``.
            It is the value recorded in the log, rebuilt as the workflow's output
            type when it is one, else as plain JSON data, so every caller gets
            the same value.
        cycles: Every cycle, oldest first.
        ended: ``"done"`` or ``"max_cycles"``.
    """

    outer_loop_id: str
    final_output: Any
    cycles: tuple[CycleRecord, ...]
    ended: Literal["done", "max_cycles"]

    @property
    def done(self) -> bool:
        """Whether supervise ended the loop with ``Done`` (not the cycle cap)."""
        return self.ended == "done"


Supervise = Callable[[Cycle], Done[Any] | Continue[Any] | Awaitable[Done[Any] | Continue[Any]]]
"""A supervise function: sync or async, takes the finished ``Cycle``, returns ``Done`` or ``Continue``."""
