"""Where a drift is detected: a resume's code compared with the manifest its run recorded.

Pure, like ``_manifest``: ``run_drift`` takes the recorded ``run.started``,
the workflow's spec and the run's recorded calls and returns the changes
that matter to this run (only what the run used, only what is not a
compatible change); ``drift_error`` turns them into the error a resume raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import islice
from typing import Any

from ..errors import CapabilityDriftError, DriftChange
from ._compatible import compatible_change, rebinding
from ._keys import step_name
from ._manifest import SECTIONS, output_schema_hash, run_manifest
from ._module_name import module_of
from ._recorded import Recorded
from ._spec import Spec
from ._values import canonical

_SESSION_LISTS = {"tools": "availableTools", "workflows": "availableWorkflows"}


def _session_covers(rec: Recorded, where: str, section: str, name: str) -> bool:
    """Whether a recorded session around ``where`` lists this tool or workflow in its manifest.

    Such a capability is compared by the session's own manifest when the session
    is entered again, in the session's terms (``availableTools[0].signature``).
    """
    listed_in = _SESSION_LISTS.get(section)
    if listed_in is None:
        return False
    for path, started in rec.sessions.items():
        if where.startswith(path + "."):
            listed = (started.get("manifest") or {}).get(listed_in) or []
            if any(isinstance(e, dict) and e.get("name") == name for e in listed):
                return True
    return False


_VISIT_SUFFIX = re.compile(r"\.visit\[\d+\]$", re.MULTILINE)
_VISIT_SUFFIX_ONE = re.compile(r"\.visit\[\d+\]\Z")


def _visit_bases(paths: Iterable[str]) -> set[str]:
    """The step paths without a trailing ``.visit[k]``: one per loop, not one per visit.

    One regular-expression pass per 4,096 paths joined by newlines (so a long
    run's paths are never all copied at once); a branch key may hold a
    newline, and then each path of that chunk is stripped on its own.
    """
    bases: set[str] = set()
    it = iter(paths)
    while chunk := list(islice(it, 4096)):
        joined = "\n".join(chunk)
        if joined.count("\n") == len(chunk) - 1:
            bases.update(_VISIT_SUFFIX.sub("", joined).split("\n"))
        else:
            bases.update(_VISIT_SUFFIX_ONE.sub("", p) for p in chunk)
    return bases


def used_keys(rec: Recorded) -> set[str]:
    """The capability keys (``tools.score``, ``steps.worker``, …) the recorded log used.

    A tool or workflow used only inside agent sessions that offer it is left to
    those sessions' own manifests.
    """
    keys = {f"steps.{step_name(base)}" for base in _visit_bases(rec.steps_started)}
    for key, intent in rec.intents.items():
        section = SECTIONS.get(intent.get("kind", ""))
        if section is None:
            continue
        name = intent["name"]
        if not (rec.sessions and _session_covers(rec, key, section, name)):
            keys.add(f"{section}.{name}")
    return keys


OWN_EFFECTS = frozenset(
    {"tools.save_artifact"}
    | {f"tools.memory_{op}" for op in ("put", "delete", "get", "search", "namespaces", "count")}
)
"""durable's own effects (artifacts, the memory store): recorded like tools, not capabilities."""


def undescribed(recorded: dict[str, Any], rec: Recorded) -> list[str]:
    """Capability keys the log used that the recorded manifest does not describe.

    Drift cannot be checked for these (the workflow reached them in a way the
    walk of its code did not see); declaring them with ``uses=`` fixes that.
    durable's own effects (``OWN_EFFECTS``) are not capabilities and are left out.
    """
    described = {f"{section}.{n}" for section in SECTIONS.values() for n in recorded.get(section) or {}}
    return sorted(used_keys(rec) - described - OWN_EFFECTS)


def _relevant(manifest: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    wanted = set(keys)
    out: dict[str, Any] = {"workflow": manifest.get("workflow")}
    for section in SECTIONS.values():
        entries = manifest.get(section) or {}
        out[section] = {n: d for n, d in entries.items() if f"{section}.{n}" in wanted}
    out["models"] = manifest.get("models") or {}
    out["memory"] = manifest.get("memory")
    return out


def resume_changes(recorded: dict[str, Any], current: dict[str, Any], used: set[str]) -> list[DriftChange]:
    """What changed between a run's recorded manifest and the current one, as far as it matters.

    Compared: the workflow, the model mapping, every declared capability
    (then or now), and every capability the log used that the recorded
    manifest describes. Capabilities never used and never declared may
    change freely.

    Args:
        recorded: The manifest in ``run.started``.
        current: The manifest the current code and caller give.
        used: The capability keys the log shows used (``used_keys``).

    Returns:
        The changes, in key order (empty when the run may resume).

    A function's qualified name is not compared: its identity is its kind,
    its name (``name=``, or the function's own) and its signature, so
    moving it to another module, or starting its module as a script, is a
    refactor. A whole entry added or removed is still reported. A step's
    signature that only gained parameters with defaults is compatible
    (``_compatible``): every recorded call still binds.
    """
    described = {f"{section}.{n}" for section in SECTIONS.values() for n in recorded.get(section) or {}}
    keys = (used & described) | set(recorded.get("declared") or ()) | set(current.get("declared") or ())
    changes = diff(_relevant(recorded, keys), _relevant(current, keys))
    return [
        c
        for c in changes
        if not (c.key.endswith(".qualname") and c.old is not None and c.new is not None)
        and not compatible_change(c.key, c.old, c.new)
    ]


def _legacy_module(recorded: dict[str, Any], spec: Spec) -> str | None:
    """The workflow's module, when the recorded run named it ``__main__`` (logs of older versions)."""
    qualname = (recorded.get("workflow") or {}).get("qualname")
    if not isinstance(qualname, str) or not qualname.startswith("__main__."):
        return None
    return module_of(spec.qualname, spec.fn)


def run_drift(
    started: dict[str, Any],
    spec: Spec,
    models: dict[str, str],
    rec: Recorded,
    memory: dict[str, Any] | None = None,
    current: dict[str, Any] | None = None,
) -> list[DriftChange]:
    """Every drift between a run's ``run.started`` record and the current code and models.

    Args:
        started: The run's ``run.started`` data.
        spec: The workflow's spec as the code defines it now.
        models: The model slot mapping the caller gives now.
        rec: The run's recorded events (for what the log used).
        memory: The world's memory store as ``run_manifest`` records it.
        current: The run manifest of the code now, when the caller has it already.

    Returns:
        The manifest changes, then the output schema change if any.
    """
    if current is None:
        current = run_manifest(spec, models, memory)
    recorded = started.get("manifest") or {}
    used = used_keys(rec)
    changes = resume_changes(recorded, current, used)
    legacy = _legacy_module(recorded, spec) if changes else None
    if legacy is not None:
        # Hashes of child workflows and retry texts were recorded with the script's
        # functions named __main__.*: a change is one only if it is one in that form too.
        old_form = run_manifest(spec, models, memory, legacy=legacy)
        still = {c.key for c in resume_changes(recorded, old_form, used)}
        changes = [c for c in changes if c.key in still]
    schema = output_schema_hash(spec)
    recorded_schema = started.get("output_schema_hash")
    if recorded_schema not in (None, "", schema):
        changes.append(DriftChange("workflow.output_schema_hash", recorded_schema, schema))
    return changes


def flatten(manifest: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a manifest to ``{"a.b[0].c": leaf}``."""
    out: dict[str, Any] = {}
    if isinstance(manifest, dict):
        for k, v in manifest.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(manifest, list):
        for i, v in enumerate(manifest):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = manifest
    return out


def diff(old: Any, new: Any, prefix: str = "") -> list[DriftChange]:
    """Each difference between two manifests, as ``DriftChange``s in key order.

    Where a whole entry exists on one side only (a capability added or
    removed), the change is reported once for the entry, not per leaf.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[DriftChange] = []
        for k in sorted(old.keys() | new.keys()):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in old:
                changes.append(DriftChange(key, None, new[k]))
            elif k not in new:
                changes.append(DriftChange(key, old[k], None))
            else:
                changes += diff(old[k], new[k], key)
        return changes
    if canonical(old) != canonical(new):  # True == 1 in Python, not in a manifest
        return [DriftChange(prefix, old, new)]
    return []


def show(value: Any, limit: int = 160) -> str:
    """A value as a drift message shows it: JSON, ``(none)`` when absent, long ones shortened."""
    if value is None:
        return "(none)"
    text = canonical(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def change_lines(changes: list[DriftChange]) -> str:
    """The ``- key: old → new`` lines of a drift report."""
    return "\n".join(f"- {c.key}: {show(c.old)} → {show(c.new)}" for c in changes)


def drift_error(
    run_id: str,
    changes: list[DriftChange],
    blockers: dict[str, str] | None = None,
    what: str = "code or configuration",
) -> CapabilityDriftError:
    """The ``CapabilityDriftError`` listing ``changes`` as ``key: old → new``.

    ``blockers`` (``acceptance_blockers``): the changes whose acceptance would not let
    the run go on; the error then says so instead of advising ``accept_drift``.
    """
    return CapabilityDriftError(
        f"Run {run_id!r} was started with a different {what}.\n\n"
        f"Changes detected:\n{change_lines(changes)}\n\n"
        "To resume cleanly, restore the prior code or configuration and resume.\n"
        "To start fresh, run with a new run_id.\n"
        f"{blocked_advice(blockers) if blockers else accept_advice(changes)}",
        run_id=run_id,
        changes=changes,
    )


def acceptance_blockers(changes: list[DriftChange], rec: Recorded) -> dict[str, str]:
    """The changes that accepting would not get past, each with why: its recorded calls cannot replay.

    A changed signature of a capability the log used whose recorded calls do
    not bind to the new one (``_compatible.rebinding``), or a used capability
    the code no longer has.
    """
    used = used_keys(rec)
    out: dict[str, str] = {}
    for c in changes:
        section, _, rest = c.key.partition(".")
        name, _, leaf = rest.partition(".")
        if f"{section}.{name}" not in used or section not in ("steps", "tools", "model_calls"):
            continue
        if leaf == "" and c.old is not None and c.new is None:
            out[c.key] = "the code has no such capability any more, and the run recorded calls of it"
        elif leaf == "signature" and isinstance(c.old, str) and isinstance(c.new, str):
            how = rebinding(c.old, c.new)
            if isinstance(how, str):
                out[c.key] = f"the run's recorded calls do not bind to the new signature: {how}"
    return out


def blocked_advice(blockers: dict[str, str]) -> str:
    """What replaces the advice to accept drift when accepting would not help, and why."""
    lines = "\n".join(f"- {key}: {why}" for key, why in sorted(blockers.items()))
    return (
        "Accepting this drift (accept_drift=[...]) would not help: the run would stop at the "
        f"first call it recorded under the old code.\n{lines}"
    )


def accept_advice(changes: list[DriftChange]) -> str:
    """The third way out of a drift: accept exactly these changes for this run."""
    keys = ", ".join(f'"{c.key}"' for c in changes)
    return (
        "To keep this run going with the change (it is deliberate, for example an option an "
        f"error told you to set), resume with run_workflow(..., accept_drift=[{keys}])."
    )
