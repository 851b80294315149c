"""The alignment of two runs by call path, and the word-by-word highlight of a changed output."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import durable
from durable.engine._recorded import Recorded
from durable.ops._run_diff import Call, align, calls_of, first_seqs, highlight, summary

PATHS = st.sampled_from(["a", "b", "c", "a.tool:t#0", "a.tool:t#1", "b.model:m#0", "loop.visit[0]", "x[k].s"])
OUTPUTS = st.one_of(
    st.none(), st.integers(-3, 3), st.text(max_size=4), st.lists(st.integers(0, 2), max_size=2)
)


def _calls(data: list[tuple[str, Any]]) -> dict[str, Call]:
    return {p: Call(p, "step", p, "ok", out) for p, out in data}


RUNS = st.lists(st.tuples(PATHS, OUTPUTS), max_size=8, unique_by=lambda t: t[0]).map(_calls)


@given(RUNS)
def test_a_run_aligned_with_itself_is_the_same_everywhere(run: dict[str, Call]) -> None:
    """Every path of a run compared with itself is ``same``, in the run's own order."""
    rows = align(run, run)
    assert [r["path"] for r in rows] == list(run)
    assert {r["status"] for r in rows} <= {"same"}


@given(RUNS, RUNS)
def test_every_path_of_either_run_appears_once_with_its_status(
    a: dict[str, Call], b: dict[str, Call]
) -> None:
    """The rows cover the union of both runs' paths once each; the status says which side has it."""
    rows = align(a, b)
    paths = [r["path"] for r in rows]
    assert sorted(paths) == sorted(set(a) | set(b))
    for r in rows:
        p = r["path"]
        expected = "only_b" if p not in a else "only_a" if p not in b else None
        if expected:
            assert r["status"] == expected
        else:
            same = a[p].output == b[p].output
            assert r["status"] == ("same" if same else "changed")
        assert (r["a"] is None) == (p not in a) and (r["b"] is None) == (p not in b)


@given(RUNS, RUNS)
def test_run_a_keeps_its_order_and_b_s_own_calls_follow_their_predecessor(
    a: dict[str, Call], b: dict[str, Call]
) -> None:
    """A's paths come in A's order; a path only B has comes right after the path before it in B."""
    paths = [r["path"] for r in align(a, b)]
    assert [p for p in paths if p in a] == list(a)
    b_order = list(b)
    for i, p in enumerate(b_order):
        if p in a:
            continue
        before = [q for q in b_order[:i] if q in a]
        if before:
            assert paths.index(p) > paths.index(before[-1])


def test_outputs_are_compared_as_data_not_as_text() -> None:
    """Dicts with their keys in another order are the same; another value or an error is a change."""
    a = {"s": Call("s", "step", "s", "ok", {"x": 1, "y": 2})}
    b = {"s": Call("s", "step", "s", "ok", {"y": 2, "x": 1})}
    c = {"s": Call("s", "step", "s", "ok", {"x": 1, "y": 3})}
    d = {"s": Call("s", "step", "s", "error", None, "ValueError: no")}
    assert [r["status"] for r in align(a, b)] == ["same"]
    assert [r["status"] for r in align(a, c)] == ["changed"]
    assert [r["status"] for r in align(a, d)] == ["changed"]


def test_outputs_stored_as_artifacts_are_compared_by_their_hash() -> None:
    """Two artifact outputs with the same payload hash are the same; another hash is a change."""
    ref = {"sha256": "sha256:aa", "size": 3}

    def side(r: dict[str, Any]) -> dict[str, Call]:
        return {"s": Call("s", "step", "s", "ok", None, artifact=r)}

    assert align(side(ref), side(dict(ref)))[0]["status"] == "same"
    assert align(side(ref), side({"sha256": "sha256:bb", "size": 3}))[0]["status"] == "changed"


def test_summary_counts_every_status() -> None:
    """The summary names the four statuses, zeros included."""
    a = {"x": Call("x", "step", "x", "ok", 1), "y": Call("y", "step", "y", "ok", 1)}
    b = {"x": Call("x", "step", "x", "ok", 2), "z": Call("z", "step", "z", "ok", 1)}
    assert summary(align(a, b)) == {"same": 0, "changed": 1, "only_a": 1, "only_b": 1}


@given(st.text(max_size=40), st.text(max_size=40))
def test_highlight_gives_both_texts_back(a: str, b: str) -> None:
    """Joining each side's parts gives that side's text exactly; equal texts have nothing marked."""
    left, right = highlight(a, b)
    assert "".join(t for t, _ in left) == a
    assert "".join(t for t, _ in right) == b
    if a == b:
        assert not any(d for _, d in left + right)


def test_highlight_marks_the_words_that_differ() -> None:
    """Only the changed word is marked on each side."""
    left, right = highlight("[small-writer] thank you", "[big-writer] thank you")
    assert [t for t, d in left if d] == ["small"]
    assert [t for t, d in right if d] == ["big"]


@durable.step
async def double(x: int) -> int:
    return 2 * x


@durable.tool
async def shout(text: str) -> str:
    return text.upper()


@durable.step
async def speak(x: int) -> str:
    return await shout(f"n={x}")


@durable.workflow
async def wf(x: int) -> str:
    return await speak(await double(x))


def test_calls_of_reads_steps_and_effects_with_their_outputs_and_a_fork_s_inherited_calls() -> None:
    """A run's calls carry what they returned; a fork's index has its parent's calls before the checkpoint."""
    world = durable.memory_world()
    asyncio.run(durable.run_workflow(wf, 4, world=world, run_id="p"))
    rows = world.log.read("p")
    calls = calls_of(Recorded.from_rows(rows, "p"))
    assert {p: (c.kind, c.output) for p, c in calls.items()} == {
        "double": ("step", 8),
        "speak": ("step", "N=8"),
        "speak.tool:shout#0": ("tool", "N=8"),
    }
    fork = durable.fork("p", "double", world=world, new_run_id="f")
    inherited = calls_of(Recorded.from_rows(world.log.read(fork.run_id), "f"))
    assert list(inherited) == ["double"] and inherited["double"].output == 8


def test_first_seqs_takes_the_first_event_of_each_path() -> None:
    """A path's order is the seq of its first event, whether it names a path or a key."""
    events = [
        {"seq": 2, "type": "step.started", "path": "s"},
        {"seq": 3, "type": "effect.intent", "key": "s.tool:t#0"},
        {"seq": 4, "type": "effect.receipt", "key": "s.tool:t#0"},
        {"seq": 5, "type": "step.completed", "path": "s"},
    ]
    assert first_seqs(events) == {"s": 2, "s.tool:t#0": 3}
