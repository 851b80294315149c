"""Pure path handling: parents and step names of generated paths (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from durable.engine._drift import _visit_bases
from durable.engine._keys import effect_key, parent_of, step_name, step_path, step_path_format

name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
key_chars = st.characters(exclude_characters="[]", exclude_categories=["Cs"])
key = st.text(alphabet=key_chars, min_size=1, max_size=8)
segment = st.one_of(
    name,
    st.builds(lambda n, k: f"{n}[{k}]", st.one_of(st.just(""), name), key),
    st.builds(lambda n, v: step_path("", n, v, True), name, st.integers(min_value=0, max_value=99)),
)
scope = st.lists(segment, max_size=4).map(".".join)


@given(scope, name, st.one_of(st.none(), st.integers(min_value=0, max_value=99)))
def test_parent_and_name_of_a_step_path(parent: str, step: str, visit: int | None) -> None:
    """Any step path splits back into the scope it was made in and the step's name."""
    path = step_path(parent + "." if parent else "", step, visit or 0, visit is not None)
    assert parent_of(path) == parent
    assert step_name(path) == step


@given(scope, name, st.integers(min_value=0, max_value=999))
def test_parent_of_an_effect_key(parent: str, tool: str, n: int) -> None:
    """An effect key's parent is the scope the effect was called in, whatever dots branch keys hold."""
    key_ = effect_key(parent + "." if parent else "", "tool", tool, n)
    assert parent_of(key_) == parent


@given(st.lists(st.tuples(scope, name, st.one_of(st.none(), st.integers(0, 99))), max_size=6))
def test_visit_bases_strip_only_the_trailing_visit(calls: list[tuple[str, str, int | None]]) -> None:
    """The drift check's one name per loop: each path loses its own trailing ``.visit[k]`` only."""
    paths = [
        step_path(parent + "." if parent else "", step, v or 0, v is not None) for parent, step, v in calls
    ]
    expected = {(parent + "." if parent else "") + step for parent, step, _ in calls}
    assert _visit_bases(paths) == expected
    assert {step_name(p) for p in _visit_bases(paths)} == {step for _, step, _ in calls}


@given(scope)
def test_a_scope_prefixes_its_calls_as_keys_says(path: str) -> None:
    """The prefix a scope gives its calls is ``_keys.scope_prefix`` of its path."""
    from durable.engine._context import Scope
    from durable.engine._keys import scope_prefix

    assert Scope(None, path).prefix == scope_prefix(path)  # type: ignore[arg-type]


@given(
    scope,
    st.text(min_size=1, max_size=8).filter(lambda n: not set(n) & set(".[]#:/")),
    st.integers(0, 99),
    st.booleans(),
)
def test_a_steps_path_format_gives_the_path_step_path_gives(
    parent: str, step: str, visit: int, looped: bool
) -> None:
    """The path format made once per step builds the same path, braces in the name included."""
    prefix = parent + "." if parent else ""
    assert step_path_format(step, looped)(prefix, visit) == step_path(prefix, step, visit, looped)
