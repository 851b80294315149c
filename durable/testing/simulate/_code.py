"""A program made code: its printed source (``_source``) compiled into real decorated functions.

``build(program, version, ledger)`` runs the factory ``code(version,
ledger)`` that ``_source.source(program)`` prints, so the functions a
simulation runs are exactly those a shrunk failure's test defines. Both
versions come from one factory, as two deploys of one code base: the same
names, differing only where the program says version 2 changes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._ledger import Ledger
from ._program import Program, dumps
from ._source import HEADER, source

SLOT = "writer"
MODELS = {SLOT: "sim-model"}
"""The model slot mapping of every simulated run."""


class SimulatedFailure(ValueError):
    """What a generated body raises to fail for good (no retry policy retries it)."""


@dataclass
class Code:
    """One version of the code under simulation.

    Attributes:
        version: 1, or 2 for the code after a deploy.
        workflow: The ``@workflow`` the run starts.
        children: The child workflows it calls (a worker serves them too), by name.
    """

    version: int
    workflow: Any
    children: dict[str, Any] = field(default_factory=dict)

    def workflows(self) -> list[Any]:
        """The workflows a worker of this code serves."""
        return [self.workflow, *self.children.values()]


Factory = Callable[[int, Ledger], Code]
"""``code(version, ledger)``: defines one version of the code, its fakes noting into ``ledger``."""


@functools.lru_cache(maxsize=64)
def _compiled(text: str) -> Any:
    return compile(HEADER + source_of(text), "<durable simulated code>", "exec")


def source_of(text: str) -> str:
    import json

    return source(json.loads(text))


def factory(program: Program) -> Factory:
    """The ``code(version, ledger)`` factory of a program (its printed source, compiled)."""
    namespace: dict[str, Any] = {"__name__": "durable_simulated"}
    exec(_compiled(dumps(program)), namespace)
    made: Factory = namespace["code"]
    return made


def build(program: Program, version: int, ledger: Ledger) -> Code:
    """Version ``version`` of ``program``'s code, its fakes noting side effects into ``ledger``."""
    return factory(program)(version, ledger)
