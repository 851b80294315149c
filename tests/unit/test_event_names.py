"""Event types are defined once, in ``durable.events``, and the package uses them by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import durable
from durable import events

PACKAGE = Path(durable.__file__).parent


def _model_types() -> dict[str, type]:
    return {m.model_fields["type"].default: m for m in get_args(get_args(events.Event)[0])}


def _name(event_type: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", event_type).upper()


def test_every_event_model_has_its_type_named_in_events():
    """Each model's ``type`` has a constant of the same text in ``durable.events``."""
    missing = {t for t in _model_types() if getattr(events, _name(t), None) != t}
    assert missing == set()


def test_the_named_types_are_the_models_types():
    """No constant names a type that no model carries."""
    named = {
        getattr(events, n)
        for n in events.__all__
        if n.isupper()
        and n not in ("EVENT_TYPES", "LOG_FORMAT_VERSION")
        and isinstance(getattr(events, n), str)
    }
    assert named == set(_model_types())


def test_no_module_writes_a_dotted_event_type_out_by_hand():
    """Outside ``durable/events/`` no code literal is a dotted event type (docstrings and f-strings aside)."""
    dotted = {t for t in _model_types() if "." in t}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE / "events":
            continue
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr | ast.MatchValue):
                skip.update(id(n) for n in ast.walk(node))
            elif isinstance(node, ast.Subscript) and "Literal" in ast.unparse(node.value):
                skip.update(id(n) for n in ast.walk(node.slice))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                skip.add(id(node.value))
        found += [
            f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in dotted and id(node) not in skip
        ]
    assert found == []
