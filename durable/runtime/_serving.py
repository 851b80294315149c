"""Which runs a worker's code can serve: the run's manifest against the worker's own.

A worker drives a run only if its code can replay what the run recorded
(the drift rules of ``_manifest.run_drift``). The check is cheap when the
code is unchanged: the ``manifest_hash`` of the run's manifest in force
(the one of the code that made its latest calls) against the hash of the
worker's manifest for the same model slots, computed once per workflow and
slots. Only on a different hash does it compare the capabilities the run
used. A run the worker cannot serve is left ``waiting`` in the control
store, with the code it waits for and the codes that cannot serve it; a
worker whose code matches takes it from there.

Code can also differ where no manifest looks (a call inserted into a body):
a replay of the run under that code then diverges. When the run's manifest
is another code's and a live worker runs that code (``_live_workers``),
the run is left waiting for it the same way (``settle_divergence``);
only when none is alive is it ``blocked``, saying so.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..engine import (
    Recorded,
    Spec,
    WorldCore,
    acceptance_blockers,
    canonical,
    code_hash,
    manifest_hash,
    memory_manifest,
    recover_log,
    run_drift,
    run_manifest,
)
from ..errors import DriftChange
from ..store import ControlRecord
from ._driver import WAITING, control_of, say_blocked
from ._live_workers import runs_code, spec_code
from ._outcome import BLOCKED, NONDETERMINISM, blocked_text, where_args, workflow_target

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
        codes: The code hashes (``engine.code_hash``) of the workers that found they cannot
            serve it: a worker of one of these codes does not try again while the run waits.
        diverges: Whether a worker whose code shows no drift left it because its replay
            diverged from the log (the error is in that worker's warning, not in the record:
            its paths can hold the run's values).
        blockers: The drift keys whose acceptance would not let the run go on, each with
            why (``engine.acceptance_blockers``).
    """

    manifest_hash: str | None
    drift_keys: list[str]
    codes: list[str] = field(default_factory=list)
    diverges: bool = False
    blockers: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """As the control record keeps it (JSON)."""
        data: dict[str, Any] = {"manifest_hash": self.manifest_hash, "drift_keys": self.drift_keys}
        if self.codes:
            data["codes"] = self.codes
        if self.diverges:
            data["diverges"] = True
        if self.blockers:
            data["blockers"] = self.blockers
        return json.dumps(data)

    def detail(self) -> str:
        """``waiting for code matching sha256:… (differs: steps.x.signature)``."""
        code = short_hash(self.manifest_hash)
        if self.diverges and not self.drift_keys:
            return (
                f"waiting for code matching {code} (a replay under other code diverges from its log; "
                "little dry-resume with that code shows where)"
            )
        keys = ", ".join(self.drift_keys) or "none named"
        said = f"waiting for code matching {code} (differs: {keys})"
        if self.blockers:
            why = "; ".join(f"{k}: {w}" for k, w in sorted(self.blockers.items()))
            said += f"; accepting the drift would not help ({why})"
        return said

    @staticmethod
    def of(rec: ControlRecord) -> Waiting:
        """The ``Waiting`` a ``waiting`` control record holds."""
        try:
            data = json.loads(rec.blocked or "{}")
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        keys, codes, blockers = data.get("drift_keys"), data.get("codes"), data.get("blockers")
        return Waiting(
            data.get("manifest_hash"),
            [str(k) for k in keys] if isinstance(keys, list) else [],
            [str(c) for c in codes] if isinstance(codes, list) else [],
            data.get("diverges") is True,
            {str(k): str(v) for k, v in blockers.items()} if isinstance(blockers, dict) else {},
        )


class CodeMatch:
    """One driver's check of runs against its code.

    Args:
        world: The world whose runs it checks.
        owner: The name of the driver (a worker's), in its warnings.
    """

    def __init__(self, world: WorldCore, owner: str = ""):
        self.world = world
        self.owner = owner
        self._hashes: dict[tuple[str, str], str] = {}
        self._codes: dict[str, str] = {}
        self._warned: set[str] = set()
        self._theirs: dict[str, str | None] = {}

    def current_hash(self, spec: Spec, models: dict[str, str]) -> str:
        """The hash of this code's manifest for ``spec`` under ``models`` (computed once for each)."""
        key = (spec.name, canonical(models) if models else "{}")
        tag = self._hashes.get(key)
        if tag is None:
            tag = manifest_hash(run_manifest(spec, models, memory_manifest(self.world)))
            self._hashes[key] = tag
        return tag

    def code(self, spec: Spec) -> str:
        """The hash of this code of ``spec``, models aside (``engine.code_hash``; once per workflow)."""
        found = self._codes.get(spec.name)
        if found is None:
            found = self._codes[spec.name] = spec_code(self.world, spec)
        return found

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
            started: Its ``run.started`` data as in force (``Recorded.started``), ``None`` for a
                run not started.
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

    def known_mismatch(self, rec: ControlRecord | None, spec: Spec) -> bool:
        """Whether a ``waiting`` record says that code like this one cannot serve its run."""
        if rec is None or rec.state != "waiting":
            return False
        return self.code(spec) in Waiting.of(rec).codes

    def stranded(self, rec: ControlRecord, spec: Spec) -> bool:
        """Whether a run left ``waiting`` as its replay diverges here has no live worker of its code left.

        A worker leaves such a run to a live worker of the code that recorded it
        (``settle_divergence``); when that worker dies before it takes the run (or
        was dying when it was counted as live), nobody else would: the run is
        driven here once more, and the divergence then blocks it, naming its code.
        """
        waits = Waiting.of(rec)
        if not waits.diverges or waits.drift_keys:
            return False
        if rec.run_id not in self._theirs:
            manifest = (recover_log(self.world.log, rec.run_id).started or {}).get("manifest") or {}
            self._theirs[rec.run_id] = code_hash(manifest) if manifest else None
        theirs = self._theirs[rec.run_id]
        return theirs is not None and not runs_code(self.world, spec.name, theirs)

    def waiting(
        self,
        spec: Spec,
        rec: ControlRecord,
        manifest: str | None,
        changes: list[DriftChange],
        recorded: Recorded | None = None,
        diverges: bool = False,
    ) -> Waiting:
        """What a run this code cannot serve waits for, this code added to those that cannot.

        Args:
            spec: This code's workflow.
            rec: The run's control record (a ``waiting`` one keeps the codes it names).
            manifest: The hash of the run's manifest in force.
            changes: The drift that keeps this code from it.
            recorded: The run's log (for why accepting the drift would not help).
            diverges: Whether a replay under this code diverges, when that is what keeps it.
        """
        before = Waiting.of(rec).codes if rec.state == "waiting" else []
        codes = sorted({*before, self.code(spec)})
        blockers = acceptance_blockers(changes, recorded) if changes and recorded is not None else {}
        return Waiting(manifest, [c.key for c in changes], codes, diverges, blockers)

    def say(self, run_id: str, waiting: Waiting, diverged: str | None = None) -> None:
        """The one warning of a run this worker leaves alone (``diverged``: where its replay did)."""
        if run_id in self._warned:
            return
        self._warned.add(run_id)
        why = (
            f"its replay diverges: {diverged}"
            if waiting.diverges and not waiting.drift_keys
            else f"drift: {', '.join(waiting.drift_keys)}"
        )
        log.warning(
            "worker %s leaves run %s alone: its code cannot replay it (%s); the run waits for "
            "a worker running code matching %s",
            self.owner,
            run_id,
            why,
            short_hash(waiting.manifest_hash),
        )

    def settle_divergence(self, spec: Spec, run_id: str, exc: BaseException) -> str:
        """Record the end of a drive whose replay met ``exc`` (a ``NondeterminismError``): its state.

        When the run's manifest is another code's (this drive wrote nothing, so
        the run is still the code's that made its calls) and a live worker
        runs that code, the run is left ``waiting`` for it, as for drift.
        Otherwise it is ``blocked`` (``nondeterminism``); when its code is
        another one that no live worker runs, the block says so and names it.

        Returns:
            ``waiting`` or ``blocked``.
        """
        world = self.world
        ctl = control_of(world)
        rec = recover_log(world.log, run_id)
        manifest = (rec.started or {}).get("manifest") or {}
        recorded_with = (rec.started or {}).get("manifest_hash")
        theirs = code_hash(manifest) if manifest else None
        other = theirs is not None and theirs != self.code(spec)
        if other and theirs is not None and runs_code(world, spec.name, theirs):
            now = ctl.get(run_id)
            if now is not None:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                waits = self.waiting(spec, now, recorded_with, [], diverges=True)
                leave_waiting(self, now, waits, counted=True, diverged=first)
                return WAITING
        code = recorded_with if other else None
        ctl.block(run_id, blocked_text(world, run_id, NONDETERMINISM, exc, code=code))
        say_blocked(world, run_id, NONDETERMINISM, exc, code=code)
        return BLOCKED


def leave_waiting(
    code: CodeMatch, rec: ControlRecord, waiting: Waiting, *, counted: bool, diverged: str | None = None
) -> None:
    """Put a run this code cannot serve in state ``waiting`` and say so once.

    Args:
        code: The worker's check.
        rec: The run's control record.
        waiting: What it waits for (``CodeMatch.waiting``).
        counted: Whether a drive was counted for it (a claim, an adoption) that did not happen.
        diverged: Where a replay under this code diverged, for the warning (the record does not
            keep it: its paths can hold the run's values).
    """
    ctl = control_of(code.world)
    ctl.wait_for_code(rec.run_id, waiting.text())
    if counted:
        ctl.uncount(rec.run_id)
    code.say(rec.run_id, waiting, diverged)


def waiting_fixes(world: WorldCore, run_id: str, waiting: Waiting) -> list[str]:
    """The commands that move a ``waiting`` run, the first one first.

    A worker running the code that recorded the run; the new code's drift
    accepted for this run (when it is deliberate and safe, and would let the
    run go on); a cancel.
    """
    target = workflow_target(world, run_id) or "MODULE:FUNCTION"
    w, rid = where_args(world), shlex.quote(run_id)
    out = [f"little worker {shlex.quote(target)}{w}"]
    if waiting.drift_keys and not waiting.blockers:  # accepting would help
        keys = " ".join(shlex.quote(k) for k in waiting.drift_keys)
        out.append(f"little resume {rid} --accept-drift {keys}{w}")
    out.append(f"little cancel {rid}{w}")
    return out
