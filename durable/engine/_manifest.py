"""Canonical descriptions of decorated functions, run manifests, hashes and diffs.

Pure: every function takes data (specs, recorded manifests) and returns
data. A run's manifest is a JSON object whose flattened keys name what drift
reports, for example ``tools.score.signature``, ``models.worker`` or
``workflows.scoring.definition_hash``::

    {
      "workflow":    {<description of the workflow>},
      "declared":    ["tools.score", ...],        # named with @workflow(uses=[...])
      "steps":       {"worker": {<description>}},
      "tools":       {"score": {<description>}},
      "model_calls": {"ask": {<description>}},
      "workflows":   {"scoring": {"definition_hash": "sha256:..."}},
      "models":      {"worker": "gpt-5"}
    }
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from itertools import islice
from typing import Any

from ..errors import CapabilityDriftError, DriftChange
from ._capabilities import reachable
from ._compatible import compatible_change
from ._keys import step_name
from ._module_name import main_module, module_of
from ._recorded import Recorded
from ._spec import Spec, spec_of
from ._values import canonical, sha256_tag

SECTIONS = {"step": "steps", "tool": "tools", "model": "model_calls", "workflow": "workflows"}
"""The manifest section of each kind of decorated function."""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_P = inspect.Parameter


def _stable(text: str) -> str:
    """``text`` without memory addresses, which differ between processes."""
    return _ADDRESS.sub("", text)


def _annotation_text(annotation: Any, module: str) -> str:
    if isinstance(annotation, str):
        return annotation
    # Names from the function's own module are shown bare, also inside generics.
    return _stable(inspect.formatannotation(annotation, module)).replace(module + ".", "")


def _default_text(value: Any) -> str:
    try:
        return _stable(repr(value))
    except Exception:  # a repr that fails still names a stable type
        return f"<{type(value).__qualname__}>"


def _hints(spec: Spec) -> dict[str, Any]:
    hints: dict[str, Any] = spec._hints()
    return hints


def _params(spec: Spec) -> list[inspect.Parameter]:
    params = list(spec.signature.parameters.values())
    if spec.binding in ("method", "classmethod") and params:
        params = params[1:]
    return params


def signature_text(spec: Spec) -> str:
    """The signature as people read it, e.g. ``(candidate_id: str) -> int``.

    Annotations are shown resolved (the same text with or without
    ``from __future__ import annotations``); defaults by their ``repr``
    without memory addresses.
    """
    hints = _hints(spec)
    module = spec.fn.__module__
    parts: list[str] = []
    params = _params(spec)
    star_done = False
    for i, p in enumerate(params):
        if p.kind is _P.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.kind is _P.VAR_POSITIONAL:
            text, star_done = "*" + text, True
        elif p.kind is _P.VAR_KEYWORD:
            text = "**" + text
        annotation = hints.get(p.name, p.annotation)
        if annotation is not _P.empty:
            text += ": " + _annotation_text(annotation, module)
        if p.default is not _P.empty:
            text += (" = " if annotation is not _P.empty else "=") + _default_text(p.default)
        parts.append(text)
        last_positional_only = p.kind is _P.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind is not _P.POSITIONAL_ONLY
        )
        if last_positional_only:
            parts.append("/")
    text = f"({', '.join(parts)})"
    ret = hints.get("return", spec.signature.return_annotation)
    if ret is not _P.empty:
        text += " -> " + _annotation_text(ret, module)
    return text


def _schema(spec: Spec) -> Any:
    try:
        return spec.out.json_schema()
    except Exception:  # pydantic cannot describe every annotation; fall back to its text
        ret = _hints(spec).get("return", _P.empty)
        return {"annotation": "" if ret is _P.empty else _annotation_text(ret, spec.fn.__module__)}


def retry_text(retry: Any) -> str:
    """A stable text of a retry policy (its ``describe()`` or repr, without memory addresses).

    Callables of a module run as a script are named by the module's importable
    name, as ``Spec.qualname`` names functions.
    """
    describe_ = getattr(retry, "describe", None)
    text = _stable(str(describe_()) if callable(describe_) else repr(retry))
    if "__main__." in text:
        text = text.replace("__main__.", main_module() + ".")
    return text


Cache = dict[Spec, dict[str, Any]]
"""Descriptions already computed, per spec (a world keeps one; specs do not change)."""


def manifest_cache(world: Any) -> Cache:
    """The description cache a world keeps (``world.descriptions``: one per world, no global)."""
    cache: Cache = world.descriptions
    return cache


def describe(spec: Spec, cache: Cache | None = None, legacy: str | None = None) -> dict[str, Any]:
    """The canonical description of one decorated function (what drift compares).

    Args:
        spec: The spec of a decorated function.
        cache: Descriptions computed before, reused and filled (never mutate its values).
        legacy: A module whose functions are described as logs written before
            identities were importable names recorded them when the module ran
            as a script (``__main__.checkout``); only to accept such old logs.

    Returns:
        Its kind, name, qualified name, signature text, return schema and
        decorator options, as JSON-safe data.
    """
    if cache is not None and legacy is None:
        found = cache.get(spec)
        if found is None:
            found = cache[spec] = describe(spec)
        return found
    options: dict[str, Any] = {"version": spec.version}
    if spec.kind == "step":
        options["max_visits"] = spec.max_visits
        if spec.role is not None:
            options["role"] = spec.role
    if spec.kind == "tool":
        options["idempotent"] = spec.idempotent
        options["reconcile"] = getattr(spec.reconcile, "__qualname__", None)
        if spec.outbox:  # only when set: the manifests of other tools keep their hashes
            options["outbox"] = True
        if spec.compensate is not None:  # only when set, as outbox
            options["compensate"] = getattr(spec_of(spec.compensate), "name", None)
    if spec.kind == "model":
        options["slot"] = spec.slot
    if spec.retry is not None:
        options["retry"] = retry_text(spec.retry)
    qualname = spec.qualname
    if legacy is not None:
        if "retry" in options:
            options["retry"] = options["retry"].replace(legacy + ".", "__main__.")
        if module_of(qualname, spec.fn) == legacy:
            qualname = "__main__." + spec.fn.__qualname__
    return {
        "kind": spec.kind,
        "name": spec.name,
        "qualname": qualname,
        "signature": signature_text(spec),
        "returns": _schema(spec),
        "options": options,
    }


def output_schema_hash(spec: Spec, cache: Cache | None = None) -> str:
    """The hash of a workflow's output schema."""
    return sha256_tag(describe(spec, cache)["returns"])


def _declared(spec: Spec) -> list[Spec]:
    return [s for s in (spec_of(u) for u in spec.uses) if s is not None]


def definition_hash(spec: Spec, cache: Cache | None = None, legacy: str | None = None) -> str:
    """The hash of a workflow's own description and of the capabilities it declares."""
    uses = sorted((describe(u, cache, legacy) for u in _declared(spec)), key=canonical)
    return sha256_tag({"workflow": describe(spec, cache, legacy), "uses": uses})


def capability_key(spec: Spec) -> str:
    """The manifest key of a capability, e.g. ``tools.score``."""
    return f"{SECTIONS[spec.kind]}.{spec.name}"


def _entry(spec: Spec, cache: Cache | None, legacy: str | None = None) -> dict[str, Any]:
    if spec.kind == "workflow":
        return {"definition_hash": definition_hash(spec, cache, legacy)}
    return describe(spec, cache, legacy)


def run_manifest(
    spec: Spec,
    models: dict[str, str],
    cache: Cache | None = None,
    memory: dict[str, Any] | None = None,
    legacy: str | None = None,
) -> dict[str, Any]:
    """The manifest a run records at its start.

    It covers the workflow, every capability its code reaches or declares
    (so that a resume can compare whichever of them the log shows used),
    the names of the declared ones, and the model slot mapping.

    Args:
        spec: The workflow's spec.
        models: The model slot mapping given to ``run_workflow``.
        cache: Descriptions computed before (see ``describe``).
        memory: The world's memory store (embedder name, dimension, metric),
            recorded when the store is configured.
        legacy: Describe this module's functions as old logs did when it ran as
            a script (see ``describe``).

    Returns:
        The manifest, as JSON-safe data.
    """
    manifest: dict[str, Any] = {"workflow": describe(spec, cache, legacy)}
    declared = _declared(spec)
    manifest["declared"] = sorted({capability_key(s) for s in declared})
    for section in SECTIONS.values():
        manifest[section] = {}
    # Declared capabilities first, so a declared one wins a name clash with a reached one.
    for s in [*declared, *reachable(spec)]:
        if s is spec:
            continue
        section = manifest[SECTIONS[s.kind]]
        if s.name not in section:
            section[s.name] = _entry(s, cache, legacy)
    manifest["models"] = dict(sorted(models.items()))
    if memory is not None:
        manifest["memory"] = memory
    return manifest


def manifest_hash(manifest: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the manifest's canonical JSON."""
    return sha256_tag(manifest)


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
    cache: Cache | None = None,
    memory: dict[str, Any] | None = None,
) -> list[DriftChange]:
    """Every drift between a run's ``run.started`` record and the current code and models.

    Args:
        started: The run's ``run.started`` data.
        spec: The workflow's spec as the code defines it now.
        models: The model slot mapping the caller gives now.
        rec: The run's recorded events (for what the log used).
        cache: Descriptions computed before (see ``describe``).
        memory: The world's memory store as ``run_manifest`` records it.

    Returns:
        The manifest changes, then the output schema change if any.
    """
    current = run_manifest(spec, models, cache, memory)
    recorded = started.get("manifest") or {}
    used = used_keys(rec)
    changes = resume_changes(recorded, current, used)
    legacy = _legacy_module(recorded, spec) if changes else None
    if legacy is not None:
        # Hashes of child workflows and retry texts were recorded with the script's
        # functions named __main__.*: a change is one only if it is one in that form too.
        old_form = run_manifest(spec, models, None, memory, legacy=legacy)
        still = {c.key for c in resume_changes(recorded, old_form, used)}
        changes = [c for c in changes if c.key in still]
    schema = output_schema_hash(spec, cache)
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
    run_id: str, changes: list[DriftChange], what: str = "code or configuration"
) -> CapabilityDriftError:
    """The ``CapabilityDriftError`` listing ``changes`` as ``key: old → new``."""
    return CapabilityDriftError(
        f"Run {run_id!r} was started with a different {what}.\n\n"
        f"Changes detected:\n{change_lines(changes)}\n\n"
        "To resume cleanly, restore the prior code or configuration and resume.\n"
        "To start fresh, run with a new run_id.\n"
        f"{accept_advice(changes)}",
        run_id=run_id,
        changes=changes,
    )


def accept_advice(changes: list[DriftChange]) -> str:
    """The third way out of a drift: accept exactly these changes for this run."""
    keys = ", ".join(f'"{c.key}"' for c in changes)
    return (
        "To keep this run going with the change (it is deliberate, for example an option an "
        f"error told you to set), resume with run_workflow(..., accept_drift=[{keys}])."
    )
