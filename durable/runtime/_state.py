"""What the runtime keeps for one world object: its control store, drivers, guards and wake-ups.

It lives on the world (``world.extensions["runtime"]``), never in a module
global: two worlds in one process share nothing, and closing a world closes
its control store.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .._spec import Spec
from .._world import WorldCore
from ..store._control import MemoryControl, RunControl
from ..store._sqlite_control import SqliteControl
from ._guard import RunGuard

if TYPE_CHECKING:
    from ._driver import Driver


class RuntimeState:
    """The runtime's state for one world object.

    Attributes:
        control: The world's control store (``runtime.db`` beside ``events.db``, or in memory).
        live: The guards of the runs this world object drives now, by run id.
        known: Workflows started or served through this world object, by recorded name.
        nudges: The wake-up events of the workers serving this world object.
        default: The driver of runs started without a queue, made on first use.
    """

    def __init__(self, world: WorldCore):
        self.control: RunControl = (
            SqliteControl(world.data_dir / "runtime.db") if world.data_dir is not None else MemoryControl()
        )
        self.live: dict[str, RunGuard] = {}
        self.known: dict[str, Spec] = {}
        self.nudges: list[asyncio.Event] = []
        self.default: Driver | None = None

    def close(self) -> None:
        """Close the control store (``WorldCore.close`` calls it)."""
        self.control.close()


def runtime_of(world: WorldCore) -> RuntimeState:
    """The world's runtime state, made on first use."""
    state: RuntimeState | None = world.extensions.get("runtime")
    if state is None:
        state = RuntimeState(world)
        world.extensions["runtime"] = state
    return state
