"""Canonical descriptions of decorated functions, run manifests, hashes and diffs.

Pure: every function takes data and returns data.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from ._serde import canonical, sha256_tag
from ._spec import Spec
from .errors import CapabilityDriftError, DriftChange


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    return inspect.formatannotation(annotation)


def signature_text(spec: Spec) -> str:
    """The signature as people read it, e.g. ``(candidate_id: str) -> int``."""
    sig = spec.signature
    params = list(sig.parameters.values())
    if spec.binding in ("method", "classmethod") and params:
        params = params[1:]
    return str(sig.replace(parameters=params))


def _schema(spec: Spec) -> Any:
    try:
        return spec.out.json_schema()
    except Exception:
        hints: dict[str, Any]
        try:
            hints = typing.get_type_hints(spec.fn)
        except Exception:
            hints = {}
        return {"annotation": _annotation_text(hints.get("return", inspect.Parameter.empty))}


def describe(spec: Spec) -> dict[str, Any]:
    """The canonical description of one decorated function (what drift compares)."""
    params = list(spec.signature.parameters.values())
    if spec.binding in ("method", "classmethod") and params:
        params = params[1:]
    options: dict[str, Any] = {"version": spec.version}
    if spec.kind == "step":
        options["max_visits"] = spec.max_visits
    if spec.kind == "tool":
        options["idempotent"] = spec.idempotent
        options["reconcile"] = getattr(spec.reconcile, "__qualname__", None)
    if spec.kind == "model":
        options["slot"] = spec.slot
    if spec.retry is not None:
        options["retry"] = retry_text(spec.retry)
    return {
        "kind": spec.kind,
        "name": spec.name,
        "qualname": spec.qualname,
        "signature": signature_text(spec),
        "params": [
            {
                "name": p.name,
                "kind": p.kind.name,
                "annotation": _annotation_text(p.annotation),
                "default": None if p.default is inspect.Parameter.empty else repr(p.default),
            }
            for p in params
        ],
        "returns": _schema(spec),
        "options": options,
    }


def retry_text(retry: Any) -> str:
    """A stable text of a retry policy (its repr, without memory addresses)."""
    describe_ = getattr(retry, "describe", None)
    if callable(describe_):
        return str(describe_())
    text = repr(retry)
    return text if " at 0x" not in text else type(retry).__qualname__


def output_schema_hash(spec: Spec) -> str:
    """The hash of a workflow's output schema."""
    return sha256_tag(_schema(spec))


def definition_hash(spec: Spec) -> str:
    """The hash of a workflow's own description and of the capabilities it declares."""
    uses = sorted((describe(u) for u in _declared(spec)), key=canonical)
    return sha256_tag({"workflow": describe(spec), "uses": uses})


def _declared(spec: Spec) -> list[Spec]:
    from ._spec import spec_of

    found = []
    for u in spec.uses:
        s = spec_of(u)
        if s is not None:
            found.append(s)
    return found


def run_manifest(spec: Spec, models: dict[str, str]) -> dict[str, Any]:
    """The manifest a run records at its start: the workflow, what it declares, the models."""
    caps: dict[str, Any] = {}
    for s in _declared(spec):
        caps[f"{_plural(s.kind)}.{s.name}"] = describe(s)
    return {
        "workflow": describe(spec),
        "capabilities": caps,
        "models": dict(sorted(models.items())),
    }


def _plural(kind: str) -> str:
    return {"tool": "tools", "model": "models_calls", "step": "steps", "workflow": "workflows"}[kind]


def flatten(manifest: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a manifest to ``{"a.b[0].c": leaf}`` for diffs."""
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


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[DriftChange]:
    """Each leaf that differs between two manifests, as ``DriftChange``s in key order."""
    a, b = flatten(old), flatten(new)
    return [
        DriftChange(key, a.get(key), b.get(key))
        for key in sorted(a.keys() | b.keys())
        if a.get(key) != b.get(key)
    ]


def _show(value: Any) -> str:
    return "(none)" if value is None else canonical(value)


def drift_error(
    run_id: str, changes: list[DriftChange], what: str = "code or configuration"
) -> CapabilityDriftError:
    """The ``CapabilityDriftError`` listing ``changes`` as ``key: old → new``."""
    lines = "\n".join(f"- {c.key}: {_show(c.old)} → {_show(c.new)}" for c in changes)
    return CapabilityDriftError(
        f"Run {run_id!r} was started with a different {what}.\n\n"
        f"Changes detected:\n{lines}\n\n"
        "To resume cleanly, restore the prior code or configuration and resume.\n"
        "To start fresh, run with a new run_id.",
        run_id=run_id,
        changes=changes,
    )
