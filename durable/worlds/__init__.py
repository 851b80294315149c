"""Worlds: ``local_world``, ``memory_world`` and ``postgres_world``.

Each puts a log, locks, artifacts, a codec and a memory store together into the ``World``
the engine runs in.
"""

from __future__ import annotations

# The door: what the other parts of the package use (not public API).
from ._exported_runs import export_run as export_run
from ._exported_runs import replay_file as replay_file
from ._local import local_world as local_world
from ._postgres import postgres_world as postgres_world
