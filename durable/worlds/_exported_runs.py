"""A run's log as one JSON document (``little export``), and that document replayed in a test.

The document holds the run's rows as the log returns them (decrypted, so
only a world opened with its key can export an encrypted run), each row's
payload as JSON, and the run's status. ``replay_file`` indexes those rows
in memory and replays them against the current code as ``dry_resume``
does, so a repository can keep recorded production runs as regression
tests with no world at all.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from ..engine import Recorded, WorldCore, run_not_found, workflow_spec
from ..errors import ConfigurationError, LogFormatError
from ..ops import DryResume, replay_recorded
from ._local import memory_world

EXPORT_FORMAT = "little-export/1"
"""The ``format`` of an exported run's document."""


def export_run(world: WorldCore, run_id: str) -> dict[str, Any]:
    """The run's log as JSON data: ``format``, ``run_id``, ``workflow``, ``status`` and ``rows``.

    Raises:
        RunNotFoundError: The world has no such run.
        CodecError: The run is encrypted and the world was opened without its key.
    """
    info = world.log.info(run_id)
    if info is None:
        raise run_not_found(world, run_id)
    rows = [[seq, type_, json.loads(text)] for seq, type_, text in world.log.read(run_id)]
    return {
        "format": EXPORT_FORMAT,
        "run_id": run_id,
        "workflow": info.workflow,
        "status": info.status,
        "rows": rows,
    }


def _load(path: str | Path) -> dict[str, Any]:
    where = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot read the exported run {where!r}: {exc}; write one with "
            "`little export RUN_ID > run.json`."
        ) from exc
    if (
        not isinstance(data, dict)
        or data.get("format") != EXPORT_FORMAT
        or not isinstance(data.get("rows"), list)
    ):
        raise LogFormatError(
            f"{where!r} is not a run exported by `little export` (format {EXPORT_FORMAT!r}); "
            "export the run again with `little export RUN_ID > run.json`."
        )
    return data


def replay_file(path: str | Path, wf: Any) -> DryResume:
    """Replay an exported run (``little export RUN_ID > run.json``) against the current code.

    Nothing runs that the log did not record and no world is opened. A
    completed run must replay to its end; a run that stopped before it (one
    that waits, or was cancelled or failed while it waited) may stop where
    it stopped, or where a resume would continue. Use it in a test to keep
    yesterday's production runs as regression tests.

    Args:
        path: The exported run's file.
        wf: The ``@workflow`` function as the current code defines it.

    Returns:
        The ``DryResume`` (``ok``, ``continues_at``) when the code can replay the run.

    Raises:
        CapabilityDriftError: The code's capabilities drifted from what the run used.
        NondeterminismError: The code makes other calls than the recorded run
            (an inserted, removed or reordered call).
        ConfigurationError: The file cannot be read, or ``wf`` is not a workflow.
        LogFormatError: The file is not an exported run.
    """
    spec = workflow_spec(wf)
    data = _load(path)
    run_id = str(data.get("run_id") or "")
    rows = [(int(seq), str(type_), json.dumps(payload)) for seq, type_, payload in data["rows"]]
    rec = Recorded.from_rows(rows, run_id)
    if rec.started is None:
        raise LogFormatError(f"the exported run {str(path)!r} has no run.started row.", run_id=run_id)
    world = memory_world()
    try:
        got: DryResume = _run(
            replay_recorded(spec, run_id, rec, world, str(data.get("status")), finished_too=True)
        )
    finally:
        world.close()
    if not got.ok and got.error is not None:
        raise got.error
    return got


def _run(coro: Any) -> Any:
    """Run ``coro`` to its end, also when the caller is inside an event loop (an async test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    out: list[Any] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(coro))
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    t = threading.Thread(target=target, name="durable-replay-file")
    t.start()
    t.join()
    if failed:
        raise failed[0]
    return out[0]
