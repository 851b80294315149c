"""A session's manifest: what an agent session records, and how a resume compares it.

Pure: the manifest is built from the session's role, model slot and the
decorated tools and workflows it offers, and compared leaf by leaf. The
keys read as the drift report shows them (``orchestratorModelSlotId``,
``availableTools[0].signature``), as the seeds' harness named them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import CapabilityDriftError, ConfigurationError, DriftChange
from ._drift import accept_advice
from ._manifest import definition_hash, describe, signature_text
from ._spec import Spec, spec_of
from ._values import canonical

_BAD_ROLE_CHARS = set(".[]#:/\\")


def _specs(kind: str, what: str, items: Iterable[Any]) -> list[Spec]:
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise ConfigurationError(f"session {what}= takes a list of @{kind} functions, not {items!r}.")
    found: list[Spec] = []
    for item in items:
        spec = spec_of(item)
        if spec is None or spec.kind != kind:
            raise ConfigurationError(
                f"session {what}= takes functions decorated with @{kind}; {item!r} is not one."
            )
        found.append(spec)
    names = [s.name for s in found]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigurationError(f"session {what}= names {kind} {dup!r} more than once.")
    return sorted(found, key=lambda s: s.name)


def _signature(spec: Spec) -> str:
    """A tool's signature with annotations evaluated where possible: ``(q: str) -> str``."""
    try:
        sig = inspect.signature(spec.fn, eval_str=True)
    except Exception:  # an annotation that does not evaluate: keep the text as written
        return signature_text(spec)
    params = list(sig.parameters.values())
    if spec.binding in ("method", "classmethod") and params:
        params = params[1:]
    return str(sig.replace(parameters=params))


MANIFEST_FORMAT = 2
"""The session manifest layout this SDK records: 2 lists the options set on each tool."""


def without_tool_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as format 1 recorded it: tools by name and signature only."""
    tools = [{k: v for k, v in t.items() if k != "options"} for t in manifest["availableTools"]]
    return {**manifest, "availableTools": tools}


def _tool_entry(spec: Spec) -> dict[str, Any]:
    """A tool as a session manifest lists it: name, signature and the options that are set.

    The options are those a run manifest records for a tool (``version``,
    ``idempotent``, ``reconcile``, ``retry``); only the ones set away from
    their defaults are listed, so a manifest of a tool with none set reads
    as it always did.
    """
    entry: dict[str, Any] = {"name": spec.name, "signature": _signature(spec)}
    options = {k: v for k, v in describe(spec)["options"].items() if v not in (None, False)}
    if options:
        entry["options"] = options
    return entry


def check_role(role: Any) -> str:
    """``role`` itself, or a ``ConfigurationError`` when it cannot name a session."""
    if not isinstance(role, str) or not role or _BAD_ROLE_CHARS & set(role):
        raise ConfigurationError(
            f"session role {role!r} is not usable in a path: use a non-empty string without "
            "any of . [ ] # : / \\"
        )
    return role


def session_manifest(
    role: str,
    model_slot: str,
    models: Mapping[str, str],
    tools: Iterable[Any],
    workflows: Iterable[Any],
) -> dict[str, Any]:
    """The manifest a session records: role, model slot and id, tools, workflows.

    Args:
        role: The session's role.
        model_slot: The model slot its model calls use.
        models: The run's slot → model id mapping.
        tools: The ``@tool`` functions the session offers.
        workflows: The ``@workflow`` functions the session may start.

    Returns:
        A JSON-safe dict whose keys read as the drift report shows them, e.g.
        ``orchestratorModelSlotId`` and ``availableWorkflows[1].definitionHash``.
    """
    return {
        "role": check_role(role),
        "modelSlot": model_slot,
        f"{role}ModelSlotId": models.get(model_slot),
        "availableTools": [_tool_entry(s) for s in _specs("tool", "tools", tools)],
        "availableWorkflows": [
            {"name": s.name, "definitionHash": definition_hash(s)}
            for s in _specs("workflow", "workflows", workflows)
        ],
    }


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flat(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value  # a scalar, or an empty container (so [] differs from a missing key)
    return out


_MISSING: Any = object()


def manifest_changes(old: dict[str, Any], new: dict[str, Any]) -> list[DriftChange]:
    """Each leaf that differs between two session manifests, in the order of the new one.

    A leaf present on one side only is a change even when its value is ``None``.
    """
    a, b = _flat(old, "", {}), _flat(new, "", {})
    keys = list(b) + [k for k in a if k not in b]
    return [
        DriftChange(k, a.get(k), b.get(k))
        for k in keys
        if a.get(k, _MISSING) is _MISSING or b.get(k, _MISSING) is _MISSING or a[k] != b[k]
    ]


def _show(value: Any) -> str:
    return "(none)" if value is None else canonical(value)


def _note(change: DriftChange, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    m = re.fullmatch(r"available(Workflows|Tools)\[(\d+)\]\.(definitionHash|signature)", change.key)
    if m is None:
        return None
    group = f"available{m.group(1)}"
    i = int(m.group(2))
    entries = new.get(group) or old.get(group) or []
    name = entries[i]["name"] if i < len(entries) else "?"
    if m.group(1) == "Workflows":
        return f"({name} workflow definition changed)"
    return f"({name} tool signature changed)"


def session_drift_error(
    run_id: str,
    role: str,
    path: str,
    old: dict[str, Any],
    new: dict[str, Any],
    changes: list[DriftChange],
) -> CapabilityDriftError:
    """The ``CapabilityDriftError`` of a session whose manifest changed."""
    lines = []
    for c in changes:
        lines.append(f"- {c.key}: {_show(c.old)} → {_show(c.new)}")
        note = _note(c, old, new)
        if note is not None:
            lines.append(f"  {note}")
    body = "\n".join(lines)
    return CapabilityDriftError(
        f"Run {run_id!r} was started with a different {role} config (session {path!r}).\n\n"
        f"Changes detected:\n{body}\n\n"
        "To resume cleanly, restore the prior state.\n"
        "To start fresh, run with a new run_id.\n"
        f"{accept_advice(changes)}",
        run_id=run_id,
        changes=changes,
    )


def recorded_model_drift(
    run_id: str, sessions: Mapping[str, dict[str, Any]], models: Mapping[str, str]
) -> CapabilityDriftError | None:
    """The drift of the model ids behind the recorded sessions' slots, found at resume.

    A run resumed with another ``models=`` mapping fails before anything runs,
    with the session's own key (``orchestratorModelSlotId``), not a generic one.
    """
    for path, started in sessions.items():
        old = started.get("manifest") or {}
        role = old.get("role")
        slot = old.get("modelSlot")
        if not isinstance(role, str) or not isinstance(slot, str):
            continue
        key = f"{role}ModelSlotId"
        if old.get(key) != models.get(slot):
            new = {**old, key: models.get(slot)}
            return session_drift_error(
                run_id, role, path, old, new, [DriftChange(key, old.get(key), models.get(slot))]
            )
    return None
