"""Which runs a worker's code can serve: the run's recorded manifest against the worker's own.

A worker drives a run only if its code can replay what the run recorded
(the drift rules of ``_manifest.run_drift``). The check is cheap when the
code is unchanged: the ``manifest_hash`` of the run's first row against
the hash of the worker's manifest for the same model slots, computed once
per workflow and slots. Only on a different hash does it read the run's
log and compare the capabilities the run used. A run the worker cannot
serve is left ``waiting`` in the control store, with the code it waits
for; a worker whose code matches takes it from there.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass
from typing import Any

from ..engine import (
    Recorded,
    Spec,
    WorldCore,
    canonical,
    manifest_hash,
    memory_manifest,
    recover_log,
    run_drift,
    run_manifest,
)
from ..errors import DriftChange
from ..store import ControlRecord
from ._driver import control_of
from ._outcome import where_args, workflow_target

log = logging.getLogger("durable.runtime")

WAITING_FOR_CODE = "waiting_for_code"
"""The reason ``status_detail()`` gives for a run that no live worker's code can replay."""

SHORT_HASH = 12
"""Hex digits of a manifest hash shown to people (``sha256:`` and this many)."""


def short_hash(tag: str | None) -> str | None:
    """``sha256:0123456789ab`` of a manifest hash (``None`` for none)."""
    if not tag:
        return None
    head, _, hexits = tag.partition(":")
    return f"{head}:{hexits[:SHORT_HASH]}" if hexits else tag[:SHORT_HASH]


@dataclass(frozen=True)
class Waiting:
    """What a ``waiting`` run waits for.

    Attributes:
        manifest_hash: The manifest the run recorded (the code that can replay it).
        drift_keys: What differs in the code of the worker that left it, as drift keys.
    """

    manifest_hash: str | None
    drift_keys: list[str]

    def text(self) -> str:
        """As the control record keeps it (JSON)."""
        return json.dumps({"manifest_hash": self.manifest_hash, "drift_keys": self.drift_keys})

    def detail(self) -> str:
        """``waiting for code matching sha256:… (differs: steps.x.signature)``."""
        keys = ", ".join(self.drift_keys) or "none named"
        return f"waiting for code matching {short_hash(self.manifest_hash)} (differs: {keys})"

    @staticmethod
    def of(rec: ControlRecord) -> Waiting:
        """The ``Waiting`` a ``waiting`` control record holds."""
        try:
            data = json.loads(rec.blocked or "{}")
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        keys = data.get("drift_keys")
        return Waiting(data.get("manifest_hash"), [str(k) for k in keys] if isinstance(keys, list) else [])


class CodeMatch:
    """One worker's check of runs against its code, with what it computed before.

    Args:
        world: The world whose runs it checks.
    """

    def __init__(self, world: WorldCore):
        self.world = world
        self._hashes: dict[tuple[str, str], str] = {}
        self._verdicts: dict[str, tuple[tuple[Any, ...], list[DriftChange]]] = {}
        self._warned: set[str] = set()

    def current_hash(self, spec: Spec, models: dict[str, str]) -> str:
        """The hash of this code's manifest for ``spec`` under ``models`` (computed once for each)."""
        key = (spec.name, canonical(models) if models else "{}")
        tag = self._hashes.get(key)
        if tag is None:
            tag = manifest_hash(run_manifest(spec, models, memory_manifest(self.world)))
            self._hashes[key] = tag
        return tag

    def changes(
        self,
        spec: Spec,
        run_id: str,
        started: dict[str, Any] | None,
        recorded: Recorded | None = None,
    ) -> list[DriftChange]:
        """What keeps this code from replaying the run: its drift not accepted (empty: it can).

        Args:
            spec: This code's workflow.
            run_id: The run.
            started: Its ``run.started`` data (``first_started``), ``None`` for a run not started.
            recorded: Its whole log, when the caller read it already (else it is read here
                when the manifest differs).
        """
        if started is None or started.get("workflow") != spec.name:
            return []  # a new run is anyone's; another workflow's run fails as it does today
        models = started.get("models") or {}
        if started.get("manifest_hash") == self.current_hash(spec, models):
            return []
        rec = recorded if recorded is not None else recover_log(self.world.log, run_id)
        if rec.started is None:
            return []
        changes = run_drift(rec.started, spec, models, rec, memory_manifest(self.world))
        accepted = set(rec.drift_keys)
        return [c for c in changes if c.key not in accepted]

    def known_mismatch(self, rec: ControlRecord | None) -> bool:
        """Whether a ``waiting`` record is one this worker found it cannot serve, unchanged since."""
        if rec is None or rec.state != "waiting":
            return False
        seen = self._verdicts.get(rec.run_id)
        return seen is not None and seen[0] == _mark(rec) and bool(seen[1])

    def remember(self, rec: ControlRecord, changes: list[DriftChange]) -> None:
        """Keep the verdict on a record this worker left ``waiting`` (until the record changes)."""
        self._verdicts[rec.run_id] = (_mark(rec), changes)

    def forget(self, keep: set[str]) -> None:
        """Drop the verdicts of runs no longer seen."""
        for rid in [r for r in self._verdicts if r not in keep]:
            del self._verdicts[rid]

    def say(self, owner: str, run_id: str, waiting: Waiting) -> None:
        """The one warning of a run this worker leaves alone."""
        if run_id in self._warned:
            return
        self._warned.add(run_id)
        log.warning(
            "worker %s leaves run %s alone: its code cannot replay it (drift: %s); the run waits for "
            "a worker running code matching %s",
            owner,
            run_id,
            ", ".join(waiting.drift_keys),
            short_hash(waiting.manifest_hash),
        )


def _mark(rec: ControlRecord) -> tuple[Any, ...]:
    """What changes in a control record when anyone drives its run again."""
    return (rec.state, rec.drives, rec.driven_at, rec.blocked)


def leave_waiting(
    code: CodeMatch,
    owner: str,
    rec: ControlRecord,
    started: dict[str, Any] | None,
    changes: list[DriftChange],
    *,
    counted: bool,
) -> None:
    """Put a run this code cannot serve in state ``waiting``, say so once, and remember it.

    Args:
        code: The worker's check.
        owner: The worker's name.
        rec: The run's control record.
        started: Its ``run.started`` data.
        changes: The drift that keeps this code from it.
        counted: Whether a drive was counted for it (a claim, an adoption) that did not happen.
    """
    ctl_waiting = Waiting(None if started is None else started.get("manifest_hash"), [c.key for c in changes])
    ctl = control_of(code.world)
    ctl.wait_for_code(rec.run_id, ctl_waiting.text())
    if counted:
        ctl.uncount(rec.run_id)
    now = ctl.get(rec.run_id)
    if now is not None:
        code.remember(now, changes)
    code.say(owner, rec.run_id, ctl_waiting)


def waiting_fixes(world: WorldCore, run_id: str, waiting: Waiting) -> list[str]:
    """The commands that move a ``waiting`` run, the first one first.

    A worker running the code that started the run; the new code's drift
    accepted for this run (when it is deliberate and safe); a cancel.
    """
    target = workflow_target(world, run_id) or "MODULE:FUNCTION"
    w, rid = where_args(world), shlex.quote(run_id)
    out = [f"little worker {shlex.quote(target)}{w}"]
    if waiting.drift_keys:
        keys = " ".join(shlex.quote(k) for k in waiting.drift_keys)
        out.append(f"little resume {rid} --accept-drift {keys}{w}")
    out.append(f"little cancel {rid}{w}")
    return out
