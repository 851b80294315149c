"""Calls recorded under an earlier signature of their function, matched under the current one.

A capability's signature can change under a run in three ways that leave
the run going: a step gained parameters with defaults (compatible), a
deploy changed a capability before the run used it (the run's manifest then
follows the code that made its calls), or a person accepted the change
(``accept_drift``). Calls recorded before still carry the earlier input.
``signature_changes`` collects, per capability, every signature the run
recorded for it besides the current one; ``earlier_input`` turns a call of
the current code into the input the earlier signature recorded for the same
call (``_compatible.rebinding``), so that it replays; where it still
differs, ``SignatureChange.why`` lays the difference to the signature.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ._compatible import Rebinding, rebinding
from ._manifest import SECTIONS
from ._recorded import Recorded
from ._spec import Spec
from ._values import bytes_hash, stored_bytes, to_json

_SIGNATURE = ".signature"
_CALLED = frozenset(SECTIONS[k] for k in ("step", "tool", "model"))
"""The manifest sections whose entries are called with arguments (a workflow's child runs are not)."""


@dataclass(frozen=True)
class SignatureChange:
    """The signatures one capability had in a run, besides its current one.

    Attributes:
        key: The capability, e.g. ``tools.ship``.
        now: Its current signature text.
        earlier: Each earlier signature text with how its calls read now (a
            ``Rebinding``), or the sentence saying why they do not bind.
    """

    key: str
    now: str
    earlier: tuple[tuple[str, Rebinding | str], ...]

    def why(self, what: str) -> str:
        """The advice of a recorded call of this capability whose input does not match.

        Args:
            what: The capability as people read it, e.g. ``tool 'ship'``.
        """
        old = " or ".join(o for o, _ in self.earlier)
        reasons = [r for _, r in self.earlier if isinstance(r, str)]
        how = (
            reasons[0]
            if reasons
            else "they bind, but to other values than this call's (a new parameter off its default)"
        )
        return (
            f"The signature of {what} changed since this call was recorded ({old} → {self.now}), and "
            f"the recorded arguments do not bind to the new one as this call's do: {how}. This is the "
            "changed signature, not the clock or the environment: restore the signature the run "
            "recorded (a worker running that code finishes the run), or start a new run id."
        )


def _earlier(rec: Recorded, in_force: bool) -> dict[str, set[str]]:
    """Per capability key, the signature texts the run's manifests gave it before the current code."""
    out: dict[str, set[str]] = {}
    for accepted in rec.accepted:
        if accepted.get("session") is not None:
            continue
        for c in (*accepted.get("changes", ()), *(accepted.get("replaced") or ())):
            key, old = c.get("key", ""), c.get("old")
            if key.endswith(_SIGNATURE) and isinstance(old, str):
                out.setdefault(key[: -len(_SIGNATURE)], set()).add(old)
            elif isinstance(old, dict) and isinstance(old.get("signature"), str):
                out.setdefault(key, set()).add(old["signature"])  # a whole entry replaced
    if in_force:
        recorded = (rec.started or {}).get("manifest") or {}
        for section in _CALLED:
            for name, entry in (recorded.get(section) or {}).items():
                if isinstance(entry, dict) and isinstance(entry.get("signature"), str):
                    out.setdefault(f"{section}.{name}", set()).add(entry["signature"])
    return out


def signature_changes(rec: Recorded, current: dict[str, Any], same: bool) -> dict[str, SignatureChange]:
    """Every capability of ``current`` whose signature the run recorded otherwise before.

    Args:
        rec: The run's index: its manifest in force and its ``drift.accepted`` events.
        current: The manifest of the code now.
        same: Whether the manifest in force is ``current`` (its hash is): only the
            accepted changes can then hold an earlier signature.

    Returns:
        Per capability key (``tools.ship``), its ``SignatureChange``; empty when none changed.
    """
    if same and not rec.accepted:
        return {}
    out: dict[str, SignatureChange] = {}
    for key, olds in _earlier(rec, not same).items():
        section, _, name = key.partition(".")
        now = ((current.get(section) or {}).get(name) or {}).get("signature")
        if section not in _CALLED or not isinstance(now, str):
            continue
        olds.discard(now)
        if olds:
            out[key] = SignatureChange(key, now, tuple((o, rebinding(o, now)) for o in sorted(olds)))
    return out


def _default(spec: Spec, name: str) -> Any:
    """A parameter's default as the call's input records it (``*args``: empty, ``**kwargs``: empty)."""
    p = spec.signature.parameters[name]
    if p.kind is inspect.Parameter.VAR_POSITIONAL:
        return []
    if p.kind is inspect.Parameter.VAR_KEYWORD:
        return {}
    adapters = dict(spec.params())
    return to_json(adapters[name], p.default, what=name, run_id=None, path=None)


def _as_recorded(spec: Spec, data: dict[str, Any], how: Rebinding) -> dict[str, Any] | None:
    """``data`` (a call's input now) as the earlier signature recorded the same call, or ``None``."""
    if any(name not in spec.signature.parameters for name in how.added):
        return None
    for name in how.added:
        if name in data and data[name] != _default(spec, name):
            return None  # another value than the recorded call stands for: another call
    out: dict[str, Any] = {}
    for old in how.order:
        now = how.names[old]
        if now not in data:
            return None
        out[old] = data[now]
    return out


def earlier_input(
    spec: Spec, change: SignatureChange, recorded_hash: str, data: dict[str, Any], ih: str
) -> tuple[dict[str, Any], str]:
    """The call's input and hash as recorded under an earlier signature, when that is the recorded one.

    Args:
        spec: The called function's spec (its current signature and adapters).
        change: Its earlier signatures in this run.
        recorded_hash: The input hash the log recorded for the call.
        data: The call's input now, as JSON.
        ih: Its hash.

    Returns:
        ``(data, ih)`` as recorded when one earlier signature gives the recorded hash,
        else the call's own ``(data, ih)`` (a replay then finds the inputs differ).
    """
    for _, how in change.earlier:
        if isinstance(how, str):
            continue
        then = _as_recorded(spec, data, how)
        if then is None:
            continue
        h = bytes_hash(stored_bytes(then, what="the arguments", run_id=None, path=None))
        if h == recorded_hash:
            return then, h
    return data, ih
