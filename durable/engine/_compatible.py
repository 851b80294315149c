"""Changed signatures: which change is compatible, and how a recorded call reads under a new one.

One change is compatible: a **step** that gained parameters with default
values, placed so that every call that bound to the old signature binds to
the new one with the same values for the old parameters (appended after the
positional parameters, or keyword-only), while nothing else of its signature
changed. A recorded call of such a step is the same call when the new
parameters are at their defaults: its input hash is compared without them.

Tools, model calls and workflows stay strict: their signature is what the
outside sees (an agent's tool schema, the system a re-driven call reaches),
so any change of it is drift.

Any other signature change that a person accepts (``accept_drift``), or
that a deploy brought to a capability before the run used it, still leaves
calls recorded under the earlier signature: ``rebinding`` says how such a
call reads under the current one (a renamed parameter by its position, a
new parameter at its default), or why it cannot. Pure: texts in, data out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

_Param = tuple[str, str, str | None]
"""A parameter as compared: its name, its annotation's text and its default's text (``None``: none)."""


def _parse(text: str) -> ast.arguments | None:
    """The parameters of a signature text, or ``None`` when it is not Python (an unreadable default)."""
    try:
        fn = ast.parse(f"def f{text}: pass").body[0]
    except (SyntaxError, ValueError, RecursionError):
        return None
    return fn.args if isinstance(fn, ast.FunctionDef) else None


def _text(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _returns(text: str) -> str | None:
    fn = ast.parse(f"def f{text}: pass").body[0]
    return _text(fn.returns) if isinstance(fn, ast.FunctionDef) else None


def _positional(args: ast.arguments) -> list[tuple[str, _Param]]:
    every = [("only", a) for a in args.posonlyargs] + [("either", a) for a in args.args]
    defaults: list[ast.expr | None] = [None] * (len(every) - len(args.defaults)) + list(args.defaults)
    return [
        (kind, (a.arg, _text(a.annotation) or "", _text(d)))
        for (kind, a), d in zip(every, defaults, strict=True)
    ]


def _keyword_only(args: ast.arguments) -> dict[str, _Param]:
    return {
        a.arg: (a.arg, _text(a.annotation) or "", _text(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    }


def _catch_all(arg: ast.arg | None) -> tuple[str, str] | None:
    return None if arg is None else (arg.arg, _text(arg.annotation) or "")


def added_parameters(old: str, new: str) -> tuple[str, ...] | None:
    """The parameters ``new`` adds to ``old`` when every call of ``old`` binds to it the same way.

    Args:
        old: The recorded signature text, e.g. ``(x: int) -> int``.
        new: The current one, e.g. ``(x: int, strict: bool = False) -> int``.

    Returns:
        The added parameters' names (empty when nothing changed), or ``None``
        when the change is not compatible: a parameter without a default, one
        that shifts positional calls, a changed or removed parameter, a new
        ``*args`` or ``**kwargs``, a changed return annotation, or a text
        that is not Python.
    """
    a, b = _parse(old), _parse(new)
    if a is None or b is None or _returns(old) != _returns(new):
        return None
    if _catch_all(a.vararg) != _catch_all(b.vararg) or _catch_all(a.kwarg) != _catch_all(b.kwarg):
        return None
    pa, pb = _positional(a), _positional(b)
    extra = pb[len(pa) :]
    if pb[: len(pa)] != pa or any(kind != "either" or p[2] is None for kind, p in extra):
        return None
    if extra and (a.vararg is not None or a.kwarg is not None):
        return None  # a new positional parameter takes what *args took; a name **kwargs took
    ka, kb = _keyword_only(a), _keyword_only(b)
    added_kw = [name for name in kb if name not in ka]
    if any(kb.get(name) != p for name, p in ka.items()) or any(kb[n][2] is None for n in added_kw):
        return None
    if added_kw and a.kwarg is not None:
        return None
    return tuple(p[0] for _, p in extra) + tuple(added_kw)


def step_additions(recorded: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """For each step whose signature changed compatibly between two manifests, the parameters added."""
    out: dict[str, tuple[str, ...]] = {}
    now = current.get("steps") or {}
    for name, then in (recorded.get("steps") or {}).items():
        was, is_ = (then or {}).get("signature"), (now.get(name) or {}).get("signature")
        if isinstance(was, str) and isinstance(is_, str) and was != is_:
            added = added_parameters(was, is_)
            if added:
                out[name] = added
    return out


def compatible_change(key: str, old: Any, new: Any) -> bool:
    """Whether one manifest change (``steps.fetch.signature``: old → new) is compatible."""
    section, _, rest = key.partition(".")
    if section != "steps" or not rest.endswith(".signature"):
        return False
    return isinstance(old, str) and isinstance(new, str) and bool(added_parameters(old, new))


@dataclass(frozen=True)
class Rebinding:
    """How a call recorded under an earlier signature reads under the current one.

    Attributes:
        order: The earlier signature's parameters in order: the keys of a recorded input.
        names: The current name of each earlier parameter: by position for the positional
            ones (a renamed parameter passed positionally), by name for the others.
        added: The current parameters the earlier signature had no counterpart of; each
            has a default (a new ``*args`` or ``**kwargs``: empty), which a recorded call
            stands for.
    """

    order: tuple[str, ...]
    names: dict[str, str]
    added: tuple[str, ...]


def _each(args: ast.arguments) -> tuple[list[ast.arg], list[ast.arg]]:
    """The positional parameters and the keyword-only ones of a parsed signature."""
    return [*args.posonlyargs, *args.args], list(args.kwonlyargs)


def _has_default(args: ast.arguments, name: str) -> bool:
    positional, keyword = _each(args)
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        if a.arg == name:
            return i >= first_default
    return any(a.arg == name and d is not None for a, d in zip(keyword, args.kw_defaults, strict=True))


def rebinding(old: str, new: str) -> Rebinding | str:
    """How a call recorded under the signature ``old`` binds to ``new``, or why it does not.

    A positional parameter binds to the current parameter at its position (a
    rename keeps its value); a keyword-only one, or one past the current
    positional parameters, to the current parameter of its name; ``*args``
    and ``**kwargs`` to their kind. A current parameter left over needs a
    default: a recorded call stands for a call that leaves it there.

    Args:
        old: The signature text the call was recorded under, e.g. ``(order_id: str) -> str``.
        new: The current one, e.g. ``(oid: str, priority: int = 0) -> str``.

    Returns:
        The ``Rebinding``, or a sentence saying which parameter does not bind.
    """
    a, b = _parse(old), _parse(new)
    if a is None or b is None:
        return "a signature is not Python text (an unreadable default): its parameters are unknown"
    old_pos, old_kw = _each(a)
    new_pos, new_kw = _each(b)
    names = {p.arg: q.arg for p, q in zip(old_pos, new_pos, strict=False)}
    free = [p.arg for p in [*new_pos[len(old_pos) :], *new_kw]]
    for name in [p.arg for p in old_pos[len(new_pos) :]] + [p.arg for p in old_kw]:
        if name not in free:
            return f"the recorded parameter {name!r} has no place in {new}"
        names[name] = name
        free.remove(name)
    for name in free:
        if not _has_default(b, name):
            return f"the parameter {name!r} of {new} has no default, and the recorded calls pass none"
    for kind, was, now in (("*", a.vararg, b.vararg), ("**", a.kwarg, b.kwarg)):
        if was is not None and now is None:
            return f"the recorded {kind}{was.arg} has no place in {new}"
        if was is not None and now is not None:
            names[was.arg] = now.arg
        elif now is not None:
            free.append(now.arg)  # empty in every recorded call
    star = [a.vararg.arg] if a.vararg else []
    stars = [a.kwarg.arg] if a.kwarg else []
    order = (*(p.arg for p in old_pos), *star, *(p.arg for p in old_kw), *stars)
    return Rebinding(order, names, tuple(free))
