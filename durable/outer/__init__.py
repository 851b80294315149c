"""Outer loops: a workflow re-run cycle after cycle under a supervisor (``run_outer_loop``).

Each cycle is a fresh run; the loop's own record (goal, cycles, result) is
an outer-loop manifest kept beside the world's data. The names are
re-exported by ``durable``.
"""

from __future__ import annotations

from ._loop import run_outer_loop
from ._types import Continue, Cycle, CycleRecord, Done, OuterLoopResult

__all__ = ["Continue", "Cycle", "CycleRecord", "Done", "OuterLoopResult", "run_outer_loop"]
