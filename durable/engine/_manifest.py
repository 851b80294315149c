"""Canonical descriptions of decorated functions, run manifests and their hashes (drift: ``_drift``).

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
from typing import Any

from ._capabilities import reachable
from ._module_name import main_module, module_of
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


def describe(spec: Spec, legacy: str | None = None) -> dict[str, Any]:
    """The canonical description of one decorated function (what drift compares).

    Computed once per spec and kept on it (``spec.description``; never mutate
    it): a function's code and options do not change under its spec.

    Args:
        spec: The spec of a decorated function.
        legacy: A module whose functions are described as logs written before
            identities were importable names recorded them when the module ran
            as a script (``__main__.checkout``); only to accept such old logs.

    Returns:
        Its kind, name, qualified name, signature text, return schema and
        decorator options, as JSON-safe data.
    """
    if legacy is None:
        found = spec.description
        if found is None:
            found = spec.description = _describe(spec, None)
        return found
    return _describe(spec, legacy)


def _describe(spec: Spec, legacy: str | None) -> dict[str, Any]:
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


def output_schema_hash(spec: Spec) -> str:
    """The hash of a workflow's output schema (computed once per spec)."""
    found = spec.hashes.get(_RETURNS)
    if found is None:
        found = spec.hashes[_RETURNS] = sha256_tag(describe(spec)["returns"])
    return found


_RETURNS = "returns"
_KEPT_HASHES = 64
"""Manifest hashes kept per workflow (one per model mapping and memory store it ran with)."""


def _declared(spec: Spec) -> list[Spec]:
    return [s for s in (spec_of(u) for u in spec.uses) if s is not None]


def definition_hash(spec: Spec, legacy: str | None = None) -> str:
    """The hash of a workflow's own description and of the capabilities it declares."""
    uses = sorted((describe(u, legacy) for u in _declared(spec)), key=canonical)
    return sha256_tag({"workflow": describe(spec, legacy), "uses": uses})


def capability_key(spec: Spec) -> str:
    """The manifest key of a capability, e.g. ``tools.score``."""
    return f"{SECTIONS[spec.kind]}.{spec.name}"


def _entry(spec: Spec, legacy: str | None) -> dict[str, Any]:
    if spec.kind == "workflow":
        return {"definition_hash": definition_hash(spec, legacy)}
    return describe(spec, legacy)


def run_manifest(
    spec: Spec,
    models: dict[str, str],
    memory: dict[str, Any] | None = None,
    legacy: str | None = None,
) -> dict[str, Any]:
    """The manifest a run records at its start.

    It covers the workflow, every capability its code reaches or declares
    (so that a resume can compare whichever of them the log shows used),
    the names of the declared ones, and the model slot mapping. The part
    that depends on the code alone is computed once per spec and kept on it
    (``spec.code_manifest``); the models and the memory store are added per call.

    Args:
        spec: The workflow's spec.
        models: The model slot mapping given to ``run_workflow``.
        memory: The world's memory store (embedder name, dimension, metric),
            recorded when the store is configured.
        legacy: Describe this module's functions as old logs did when it ran as
            a script (see ``describe``).

    Returns:
        The manifest, as JSON-safe data.
    """
    code = spec.code_manifest if legacy is None else None
    if code is None:
        code = _code_manifest(spec, legacy)
        if legacy is None:
            spec.code_manifest = code
    manifest = dict(code)  # a new top level: the models and memory are this call's
    manifest["models"] = dict(sorted(models.items()))
    if memory is not None:
        manifest["memory"] = memory
    return manifest


def _code_manifest(spec: Spec, legacy: str | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {"workflow": describe(spec, legacy)}
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
            section[s.name] = _entry(s, legacy)
    return manifest


def manifest_hash(manifest: dict[str, Any]) -> str:
    """``sha256:<hex>`` over the manifest's canonical JSON."""
    return sha256_tag(manifest)


def code_hash(manifest: dict[str, Any]) -> str:
    """The hash of a run manifest's code alone: without its model slots and its memory store.

    What a worker's code and a run's manifest share when the worker's code can
    drive the run's calls (the run's models are the run's, whoever drives it).
    """
    return sha256_tag({k: v for k, v in manifest.items() if k not in ("models", "memory")})


def run_manifest_hash(
    spec: Spec, manifest: dict[str, Any], models: dict[str, str], memory: dict[str, Any] | None
) -> str:
    """``manifest_hash`` of ``run_manifest(spec, models, memory)``, which is ``manifest``.

    The hash depends on the code, the models and the memory store alone, so it
    is computed once per workflow for each mapping of models and memory store
    it runs with (a run's start would otherwise hash its whole manifest).
    """
    key = (tuple(sorted(models.items())), None if memory is None else canonical(memory))
    hashes = spec.hashes
    found = hashes.get(key)
    if found is None:
        if len(hashes) > _KEPT_HASHES:
            hashes.clear()
        found = hashes[key] = manifest_hash(manifest)
    return found
