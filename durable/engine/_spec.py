"""What a durable decorator knows about the function it decorates.

``Spec`` holds the kind, the options and the lazily built pydantic adapters
of one decorated function; the checks here make misuse fail at decoration
time, not during recovery.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from itertools import product
from math import prod
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter

from ..errors import ConfigurationError
from ._keys import step_path_format
from ._module_name import module_name
from ._retry_policy import RetryPolicy, as_policy
from ._roundtrip import Output, plain_annotation
from ._values import (
    ANY,
    BLAKE2B_16,
    LONG_INT_DIGITS,
    adapter,
    json_bytes,
    readable,
    stored_bytes,
    to_json,
    unchanged_types,
)

KINDS = ("workflow", "step", "tool", "model")
_BAD_NAME_CHARS = set(".[]#:/")
_EMPTY = inspect.Parameter.empty
_JSON_TYPES = (dict, list, str, int, float, bool, type(None))


class _NeverHappened:
    """The answer a ``reconcile=`` function gives when the effect never took place."""

    _instance: _NeverHappened | None = None

    def __new__(cls) -> _NeverHappened:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "durable.NEVER_HAPPENED"


NEVER_HAPPENED = _NeverHappened()
"""What a ``reconcile=`` function returns when the effect never took place (``durable.NEVER_HAPPENED``)."""


class Spec:
    """Everything the engine needs to know about one decorated function."""

    __slots__ = (
        "_args_what",
        "_out",
        "_params",
        "_plan",
        "binding",
        "code_manifest",
        "compensate",
        "description",
        "fn",
        "hashes",
        "idempotent",
        "is_async",
        "is_asyncgen",
        "keep",
        "kind",
        "label",
        "max_recovery_attempts",
        "max_visits",
        "name",
        "options",
        "outbox",
        "path_of",
        "qualname",
        "reconcile",
        "retry",
        "role",
        "signature",
        "slot",
        "stream_to",
        "timeout",
        "uses",
        "version",
    )

    def __init__(self, kind: str, fn: Callable[..., Any], binding: str, **options: Any):
        self.kind = kind
        self.fn = fn
        self.binding = binding
        self.name: str = options.pop("name", None) or fn.__name__
        self.label = f"{kind} {self.name!r}"
        """How errors name a call of this function, e.g. ``step 'fetch'``."""
        self._args_what = f"the arguments of {self.label}"  # built once, not per call
        self.qualname = f"{module_name(fn)}.{fn.__qualname__}"
        """The importable module and qualified name, the same however the module was started."""
        self.version: str | None = options.pop("version", None)
        self.max_visits: int = options.pop("max_visits", 1)
        self.path_of = step_path_format(self.name, self.max_visits > 1)
        """A step's path from its scope's prefix and its visit (``_keys.step_path``)."""
        self.max_recovery_attempts: int | None = options.pop("max_recovery_attempts", None)
        """A workflow's bound on recoveries of a run (``None``: the worker's); not in the manifest."""
        self.retry: RetryPolicy | None = as_policy(options.pop("retry", None))
        self.idempotent: bool = options.pop("idempotent", False)
        self.reconcile: Callable[..., Any] | None = options.pop("reconcile", None)
        self.slot: str | None = options.pop("slot", None)
        self.uses: tuple[Any, ...] = tuple(options.pop("uses", ()) or ())
        self.role: str | None = options.pop("role", None)
        self.timeout: float | None = options.pop("timeout", None)
        self.compensate: Any = options.pop("compensate", None)
        """The ``@tool`` that undoes a confirmed call of this tool when its run fails or is cancelled."""
        self.outbox: bool = options.pop("outbox", False)
        """A tool whose calls in a run go to the outbox, for a dispatcher to call."""
        self.stream_to: str | None = options.pop("stream_to", None)
        """The run's stream that a streamed model call mirrors its chunks to."""
        self.options = options
        self.is_asyncgen = inspect.isasyncgenfunction(fn)
        self.is_async = inspect.iscoroutinefunction(fn) or self.is_asyncgen
        self.signature = inspect.signature(fn)
        self.description: dict[str, Any] | None = None
        """Its canonical description (``_manifest.describe``), computed on first use."""
        self.code_manifest: dict[str, Any] | None = None
        """A workflow's run manifest without models and memory (``_manifest.run_manifest``), on first use."""
        self.hashes: dict[Any, str] = {}
        """A workflow's manifest hashes by models and memory, and its output schema's (``_manifest``)."""

        self._params: list[tuple[str, TypeAdapter[Any]]] | None = None
        self._plan: _Plan | None = None
        # The types of recorded outputs that come back as they are (``Output.keep``), known
        # once ``rebuild`` ran: a replayed step returns such a value without a call.
        self.keep: tuple[type, ...] | None = None
        self._out: Output | None = None
        check_types(self)

    # -- lazily resolved types (modules are fully imported by the first call) --

    def _hints(self) -> dict[str, Any]:
        try:
            return typing.get_type_hints(self.fn)
        except Exception:
            return {}

    def params(self) -> list[tuple[str, TypeAdapter[Any]]]:
        """``(name, adapter)`` of each parameter the call's identity covers."""
        if self._params is None:
            hints = self._hints()
            params = list(self.signature.parameters.values())
            if self.binding in ("method", "classmethod") and params:
                params = params[1:]
            ads = [(p.name, _adapter_of(self, p.name, hints.get(p.name, Any))) for p in params]
            _ = self.out  # the return type too fails here, before any body runs
            self._params = ads
        return self._params

    @property
    def out(self) -> Output:
        """How outputs are stored and rebuilt: the return annotation's adapter and the round-trip rule."""
        if self._out is None:
            ret = self._hints().get("return", Any)
            if self.is_asyncgen:
                args = typing.get_args(ret)
                ret = args[0] if args else Any
            ad = ANY if ret is type(None) and self.kind != "workflow" else _adapter_of(self, "return", ret)
            # Recorded outputs are parsed JSON: an un-annotated output keeps every JSON type.
            self._out = Output(
                ad,
                _JSON_TYPES if ad is ANY else unchanged_types(ad),
                plain=ad is ANY or plain_annotation(ret),
                annotation=None if ad is ANY else _type_text(ret),
                owner=f"{self.label} ({self.qualname})",
                unresolved=_unresolved(self, ad),
            )
        return self._out

    def rebuild(self, data: Any) -> Any:
        """A recorded output (JSON data) of this function, rebuilt into its return annotation."""
        out = self._out if self._out is not None else self.out
        self.keep = out.keep
        if type(data) in out.keep:  # Output.rebuild's first test, without the call
            return data
        return out.rebuild(data)

    def dump_input(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str | None, path: str
    ) -> tuple[dict[str, Any], bytes, str]:
        """The call's arguments as JSON data, their JSON bytes (what the log records), and their hash.

        The plan is made at the first call: the parameters' names, and per
        parameter the plain JSON types its annotation keeps unchanged. A call
        whose positional arguments are all of those types (most calls) is
        stored as it is, checked and zipped in C; the input's bytes are
        encoded once, for the hash and the log.
        """
        plan = self._plan
        if plan is None:
            plan = self._plan = _Plan(self.params())
        if not kwargs and tuple(map(type, args)) in plan.plain:
            data = dict(zip(plan.names, args))  # noqa: B905 (the lengths are the plan's)
        else:
            data = self._dump_each(plan, args, kwargs, run_id, path)
        try:
            raw = json_bytes(data)
        except ValueError:
            raw = stored_bytes(data, what=self._args_what, run_id=run_id, path=path)  # raises, named
        if len(raw) > LONG_INT_DIGITS:  # long enough to hold an int too long to read back
            readable(raw, what=self._args_what, run_id=run_id, path=path)
        h = BLAKE2B_16.copy()  # bytes_hash(raw), without the call
        h.update(raw)
        return data, raw, h.hexdigest()

    def load_input(self, data: dict[str, Any]) -> dict[str, Any]:
        """Recorded arguments (JSON data by parameter name) rebuilt into the parameters' types.

        What a call made later from the log passes as keyword arguments: an
        outbox entry's dispatch, the undo of a confirmed call.
        """
        return {
            name: ad.validate_python(data[name], by_alias=True, by_name=True)
            for name, ad in self.params()
            if name in data
        }

    def _dump_each(
        self, plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str | None, path: str
    ) -> dict[str, Any]:
        """The arguments as JSON, each through its parameter's adapter (keywords bound first)."""
        data: dict[str, Any] = {}
        if not kwargs and len(args) == plan.arity:
            for name, ad, same, v in zip(plan.names, plan.adapters, plan.same, args, strict=True):
                # A value of a plain JSON type its annotation keeps unchanged is stored as is.
                data[name] = (
                    v
                    if type(v) in same
                    else to_json(ad, v, what=f"argument {name!r}", run_id=run_id, path=path)
                )
            return data
        sig_params = list(self.signature.parameters.values())
        if self.binding in ("method", "classmethod") and sig_params:
            sig_params = sig_params[1:]
        try:
            bound = self.signature.replace(parameters=sig_params).bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigurationError(f"{self.kind} {self.name!r} called wrongly: {exc}") from exc
        bound.apply_defaults()
        ads = dict(self.params())
        for name, v in bound.arguments.items():
            data[name] = to_json(ads.get(name, ANY), v, what=f"argument {name!r}", run_id=run_id, path=path)
        return data


_MOST_PLAIN = 512
"""The most combinations of plain argument types a plan lists (beyond, each argument is looked at)."""


class _Plan:
    """How a function's arguments become JSON: made once, at its first call inside a run.

    ``plain`` lists every tuple of argument types that is stored as it is
    (each argument of a plain JSON type its annotation keeps unchanged), so
    one look in a set decides for the whole call.
    """

    __slots__ = ("adapters", "arity", "names", "plain", "same")

    def __init__(self, params: list[tuple[str, TypeAdapter[Any]]]):
        self.names = tuple(name for name, _ in params)
        self.adapters = tuple(ad for _, ad in params)
        self.same = tuple(unchanged_types(ad) for ad in self.adapters)
        self.arity = len(params)
        count = prod(len(same) for same in self.same)
        self.plain = frozenset(product(*self.same)) if count <= _MOST_PLAIN else frozenset()


def _unresolved(spec: Spec, ad: TypeAdapter[Any]) -> str | None:
    """The text of a return annotation that could not be resolved, if that is why ``ad`` is ``Any``."""
    written = spec.signature.return_annotation
    if ad is not ANY or written is _EMPTY or "return" in spec._hints():
        return None
    return written if isinstance(written, str) else _type_text(written)


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return inspect.formatannotation(annotation)


def _adapter_of(spec: Spec, where: str, annotation: Any) -> TypeAdapter[Any]:
    """``adapter(annotation)``, or ``ConfigurationError`` when pydantic cannot handle the type."""
    try:
        return adapter(annotation)
    except PydanticSchemaGenerationError as exc:
        what = "return type" if where == "return" else f"parameter {where!r}"
        raise ConfigurationError(
            f"{spec.kind} {spec.name!r} ({spec.qualname}): its {what} "
            f"{_type_text(annotation)} is not a type pydantic can store as JSON, so its "
            "values could never be recorded or rebuilt. Annotate it with a type pydantic "
            "handles (list[float] for an array, a pydantic model or dataclass, or "
            "Annotated[..., PlainSerializer(...), PlainValidator(...)] to say how).\n"
            f"pydantic said: {str(exc).splitlines()[0]}"
        ) from None


def check_types(spec: Spec) -> None:
    """Fail at decoration time when an annotation is a type pydantic cannot handle.

    Annotations that cannot be resolved yet (names defined later in the
    module) are checked at the first call instead, before its body runs.
    """
    try:
        hints = typing.get_type_hints(spec.fn)
    except Exception:
        return
    for where, annotation in hints.items():
        if spec.is_asyncgen and where == "return":
            args = typing.get_args(annotation)
            annotation = args[0] if args else Any
        try:
            _adapter_of(spec, where, annotation)
        except ConfigurationError:
            raise
        except Exception:  # a model not fully defined yet is checked at the first call
            continue


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not name or _BAD_NAME_CHARS & set(name):
        raise ConfigurationError(
            f"@{kind} name {name!r} is not usable in a path: use a non-empty string without "
            "any of . [ ] # : /"
        )


def unwrap(kind: str, fn: Any) -> tuple[Callable[..., Any], str]:
    if spec_of(fn) is not None:
        raise ConfigurationError(
            f"@{kind} was applied to {fn.__wrapped__.__qualname__}, which is already decorated "
            f"as @{spec_of(fn).kind}; use one durable decorator per function."  # type: ignore[union-attr]
        )
    if isinstance(fn, classmethod):
        return fn.__func__, "classmethod"
    if isinstance(fn, staticmethod):
        return fn.__func__, "function"
    if not inspect.isfunction(fn):
        raise ConfigurationError(
            f"@{kind} decorates a function or method (def or async def), not {type(fn).__name__} {fn!r}."
        )
    params = list(inspect.signature(fn).parameters)
    method = bool(params) and params[0] in ("self", "cls") and "." in fn.__qualname__
    return fn, ("method" if method else "function")


def check_recovery_attempts(what: str, n: Any) -> None:
    """Refuse a ``max_recovery_attempts`` that is not an int >= 0.

    Raises:
        ConfigurationError: It is not.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigurationError(
            f"{what} must be an int >= 0 (recoveries before the run is blocked), not {n!r}."
        )


def validate(kind: str, fn: Callable[..., Any], options: dict[str, Any]) -> None:
    if options.get("name") is not None:
        _check_name(kind, options["name"])
    else:
        _check_name(kind, fn.__name__)
    mv = options.get("max_visits", 1)
    if not isinstance(mv, int) or isinstance(mv, bool) or mv < 1:
        raise ConfigurationError(f"@step max_visits must be an int >= 1, not {mv!r}.")
    check_recovery_attempts(f"@{kind} max_recovery_attempts", options.get("max_recovery_attempts", 0))
    timeout = options.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(f"@step timeout= takes a number of seconds > 0, not {timeout!r}.")
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"@step {fn.__qualname__} has timeout= but is not an async def; a sync body "
                "cannot be stopped from outside. Make it async, or drop timeout=."
            )
    version = options.get("version")
    if version is not None and not isinstance(version, str | int):
        raise ConfigurationError(f"version= takes a string or an int, not {version!r}.")
    rec = options.get("reconcile")
    if rec is not None and not callable(rec):
        raise ConfigurationError(f"@tool reconcile= takes a callable (key, input), not {rec!r}.")
    undo = options.get("compensate")
    if undo is not None:
        undo_spec = spec_of(undo)
        if undo_spec is None or undo_spec.kind != "tool" or undo_spec.outbox or not undo_spec.is_async:
            raise ConfigurationError(
                f"@tool {fn.__qualname__}: compensate= takes an async @durable.tool (called with the "
                f"original arguments and result=), not {undo!r}."
            )
        if options.get("outbox"):
            raise ConfigurationError(
                f"@tool {fn.__qualname__}: outbox=True and compensate= do not go together; an "
                "outbox call's result is not returned to the run, so it has nothing to undo."
            )
    slot = options.get("slot")
    if slot is not None and (not isinstance(slot, str) or not slot):
        raise ConfigurationError(f"@model_call slot= takes a non-empty string, not {slot!r}.")
    if options.get("outbox"):
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"@tool {fn.__qualname__} has outbox=True but is not an async def; the outbox "
                "hands the call to a dispatcher on an event loop. Make it async, or drop outbox=."
            )
        if options.get("reconcile") is not None:
            raise ConfigurationError(
                f"@tool {fn.__qualname__}: outbox=True and reconcile= do not go together; the "
                "outbox re-drives a call whose dispatcher died with the same idempotency key, "
                "so make the body deduplicate on durable.idempotency_key() instead."
            )
    stream_to = options.get("stream_to")
    if stream_to is not None:
        if not isinstance(stream_to, str) or not stream_to:
            raise ConfigurationError(f"@model_call stream_to= takes a stream name, not {stream_to!r}.")
        if not inspect.isasyncgenfunction(fn):
            raise ConfigurationError(
                f"@model_call {fn.__qualname__} has stream_to= but does not stream; only an "
                "async generator has chunks to mirror. Make it an async generator, or drop stream_to=."
            )
    if options.get("retry") is not None:
        options["retry"] = as_policy(options["retry"])
        if inspect.isasyncgenfunction(fn):
            raise ConfigurationError(
                f"@{kind} {fn.__qualname__} streams; retry= is not supported on streaming calls "
                "(a stream cut by a crash is reissued anyway)."
            )
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"@{kind} {fn.__qualname__} has retry= but is not an async def; the backoff "
                "between attempts is a durable sleep on the event loop. Make it async, or drop "
                "retry=."
            )
    if kind == "workflow":
        if inspect.isasyncgenfunction(fn):
            raise ConfigurationError("@workflow cannot decorate an async generator.")
        required = [
            p
            for p in list(inspect.signature(fn).parameters.values())[1:]
            if p.default is _EMPTY and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            raise ConfigurationError(
                f"@workflow {fn.__qualname__} takes one input; its other parameters "
                f"({', '.join(p.name for p in required)}) need defaults."
            )
    if kind != "model" and inspect.isasyncgenfunction(fn):
        raise ConfigurationError(f"@{kind} cannot decorate an async generator; only @model_call streams.")


def spec_of(obj: Any) -> Spec | None:
    """The ``Spec`` of a decorated function, or ``None`` for anything else."""
    spec = getattr(obj, "_self_spec", None)
    return spec if isinstance(spec, Spec) else None
