"""Pure path handling: parents and step names of generated paths (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from durable._manifest import _visit_bases
from durable._paths import parent_of, step_name

name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
key_chars = st.characters(exclude_characters="[]", exclude_categories=["Cs"])
key = st.text(alphabet=key_chars, min_size=1, max_size=8)
segment = st.one_of(
    name,
    st.builds(lambda n, k: f"{n}[{k}]", st.one_of(st.just(""), name), key),
    st.builds(lambda n, v: f"{n}.visit[{v}]", name, st.integers(min_value=0, max_value=99)),
)
scope = st.lists(segment, max_size=4).map(".".join)


@given(scope, name, st.one_of(st.none(), st.integers(min_value=0, max_value=99)))
def test_parent_and_name_of_a_step_path(parent: str, step: str, visit: int | None) -> None:
    """Any step path splits back into the scope it was made in and the step's name."""
    path = (parent + "." if parent else "") + step + (f".visit[{visit}]" if visit is not None else "")
    assert parent_of(path) == parent
    assert step_name(path) == step


@given(scope, name, st.integers(min_value=0, max_value=999))
def test_parent_of_an_effect_key(parent: str, tool: str, n: int) -> None:
    """An effect key's parent is the scope the effect was called in, whatever dots branch keys hold."""
    key_ = (parent + "." if parent else "") + f"tool:{tool}#{n}"
    assert parent_of(key_) == parent


@given(st.lists(st.tuples(scope, name, st.one_of(st.none(), st.integers(0, 99))), max_size=6))
def test_visit_bases_strip_only_the_trailing_visit(calls: list[tuple[str, str, int | None]]) -> None:
    """The drift check's one name per loop: each path loses its own trailing ``.visit[k]`` only."""
    paths = [
        (parent + "." if parent else "") + step + (f".visit[{v}]" if v is not None else "")
        for parent, step, v in calls
    ]
    expected = {(parent + "." if parent else "") + step for parent, step, _ in calls}
    assert _visit_bases(paths) == expected
    assert {step_name(p) for p in _visit_bases(paths)} == {step for _, step, _ in calls}
