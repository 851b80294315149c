"""Agent sessions: recorded manifests, drift before anything runs, Layer C replay."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durable
from durable import CapabilityDriftError, ConfigurationError, NondeterminismError
from durable.engine._keys import effect_key, session_path, session_position
from durable.engine._recorded import Recorded
from durable.engine._session_manifest import _flat, manifest_changes
from tests.conftest import Worlds
from tests.helpers.crash import SimulatedCrash, on

MODELS = {"orchestrator": "gpt-5"}


def rows_of(world: durable.World, run_id: str) -> list[tuple[int, str, str]]:
    return world.log.read(run_id)


def build(calls: Counter[str], *, limit_param: bool = False, scoring_version: int = 1) -> Any:
    """An orchestrator session: a model turn, a lookup tool, a child workflow, a last turn."""
    if limit_param:

        @durable.tool(name="lookup")
        async def lookup(q: str, limit: int = 3) -> str:
            calls[f"lookup:{q}"] += 1
            return q.upper()

    else:

        @durable.tool(name="lookup")
        async def lookup(q: str) -> str:  # type: ignore[misc]
            calls[f"lookup:{q}"] += 1
            return q.upper()

    @durable.workflow(name="candidate-intake")
    async def intake(cid: str) -> str:
        return cid

    @durable.workflow(name="candidate-scoring", version=scoring_version)
    async def scoring(cid: str) -> int:
        calls[f"scoring:{cid}"] += 1
        return len(cid)

    @durable.model_call(slot="orchestrator")
    async def think(turn: int) -> str:
        calls[f"model:{turn}"] += 1
        return f"answer {turn}"

    @durable.workflow(name="orchestrate")
    async def orchestrate(cid: str) -> str:
        async with durable.session("orchestrator", tools=[lookup], workflows=[intake, scoring]) as s:
            first = await think(0)
            found = await lookup(cid)
            score = await scoring(cid)
            last = await think(1)
            return f"{first}/{found}/{score}/{last}/{s.model}"

    return orchestrate


def crash_after_lookup(worlds: Worlds, calls: Counter[str]) -> None:
    """Run until the child workflow is about to start its own log, then 'die'."""
    wf = build(calls)
    with pytest.raises(SimulatedCrash):
        asyncio.run(
            durable.run_workflow(
                wf,
                "c7",
                # The child's own start: the parent's manifest names the child workflow too.
                world=worlds.crashing(on("run.started", '"workflow":"candidate-scoring"')),
                run_id="r",
                models=MODELS,
            )
        )


def test_session_records_its_manifest(world: durable.World) -> None:
    """session.started holds the role, the slot, its model id, tool signatures and workflow hashes."""
    calls: Counter[str] = Counter()
    out = asyncio.run(durable.run_workflow(build(calls), "c7", world=world, run_id="r", models=MODELS))
    assert out == "answer 0/C7/2/answer 1/gpt-5"
    events = world.events("r")
    started = next(e for e in events if e.type == "session.started")
    assert started.path == "session:orchestrator#0"
    m = started.manifest
    assert (m["role"], m["modelSlot"], m["orchestratorModelSlotId"]) == (
        "orchestrator",
        "orchestrator",
        "gpt-5",
    )
    assert m["availableTools"] == [{"name": "lookup", "signature": "(q: str) -> str"}]
    assert [w["name"] for w in m["availableWorkflows"]] == ["candidate-intake", "candidate-scoring"]
    assert all(w["definitionHash"].startswith("sha256:") for w in m["availableWorkflows"])
    assert [e.type for e in events].count("session.completed") == 1


def test_session_calls_are_keyed_under_the_session_path(world: durable.World) -> None:
    """Model and tool calls inside a session get effect keys below its path."""
    asyncio.run(durable.run_workflow(build(Counter()), "c7", world=world, run_id="r", models=MODELS))
    keys = [e.key for e in world.events("r") if e.type == "effect.intent"]
    assert keys == [
        "session:orchestrator#0.model:think#0",
        "session:orchestrator#0.tool:lookup#1",
        "session:orchestrator#0.workflow:candidate-scoring#2",
        "session:orchestrator#0.model:think#3",
    ]


def test_resume_replays_committed_calls_and_reissues_the_rest(worlds: Worlds) -> None:
    """After a crash, committed model and tool calls replay; only unfinished work runs."""
    calls: Counter[str] = Counter()
    crash_after_lookup(worlds, calls)
    assert calls == Counter({"model:0": 1, "lookup:c7": 1})
    out = asyncio.run(
        durable.run_workflow(build(calls), "c7", world=worlds.open(), run_id="r", models=MODELS)
    )
    assert out == "answer 0/C7/2/answer 1/gpt-5"
    assert calls == Counter({"model:0": 1, "lookup:c7": 1, "scoring:c7": 1, "model:1": 1})


def test_changed_model_id_raises_drift_before_anything_runs(worlds: Worlds) -> None:
    """Another model behind the session's slot fails closed with the slot's own key."""
    calls: Counter[str] = Counter()
    crash_after_lookup(worlds, calls)
    world = worlds.open()
    before = rows_of(world, "r")
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(
            durable.run_workflow(
                build(calls), "c7", world=world, run_id="r", models={"orchestrator": "gpt-4o-mini"}
            )
        )
    assert 'orchestratorModelSlotId: "gpt-5" → "gpt-4o-mini"' in str(info.value)
    assert "different orchestrator config" in str(info.value)
    assert [c.key for c in info.value.changes] == ["orchestratorModelSlotId"]
    assert calls == Counter({"model:0": 1, "lookup:c7": 1})
    assert rows_of(world, "r") == before


def test_changed_tool_signature_raises_drift_before_anything_runs(worlds: Worlds) -> None:
    """A tool offered with another signature fails closed before the session's first call."""
    calls: Counter[str] = Counter()
    crash_after_lookup(worlds, calls)
    world = worlds.open()
    before = rows_of(world, "r")
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(
            durable.run_workflow(build(calls, limit_param=True), "c7", world=world, run_id="r", models=MODELS)
        )
    text = str(info.value)
    assert '- availableTools[0].signature: "(q: str) -> str" → "(q: str, limit: int = 3) -> str"' in text
    assert "(lookup tool signature changed)" in text
    assert calls == Counter({"model:0": 1, "lookup:c7": 1})
    assert rows_of(world, "r") == before


def test_changed_sub_workflow_raises_drift_before_anything_runs(worlds: Worlds) -> None:
    """A workflow the session may start whose definition changed fails closed, named by index."""
    calls: Counter[str] = Counter()
    crash_after_lookup(worlds, calls)
    world = worlds.open()
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(
            durable.run_workflow(
                build(calls, scoring_version=2), "c7", world=world, run_id="r", models=MODELS
            )
        )
    text = str(info.value)
    assert '- availableWorkflows[1].definitionHash: "sha256:' in text
    assert "(candidate-scoring workflow definition changed)" in text
    assert [c.key for c in info.value.changes] == ["availableWorkflows[1].definitionHash"]
    assert calls == Counter({"model:0": 1, "lookup:c7": 1})


def test_changed_model_slot_name_raises_drift(worlds: Worlds) -> None:
    """A session moved to another model slot fails closed, even when both map to one model."""

    def wf_with(slot: str) -> Any:
        @durable.model_call
        async def ask(n: int) -> int:
            return n

        @durable.workflow(name="w")
        async def w() -> int:
            async with durable.session("planner", model_slot=slot):
                a = await ask(1)
                durable.interrupt("pause")
                return a

        return w

    models = {"fast": "m1", "smart": "m1"}
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(wf_with("fast"), world=worlds.open(), run_id="r", models=models))
    with pytest.raises(CapabilityDriftError) as info:
        asyncio.run(
            durable.run_workflow(
                wf_with("smart"), world=worlds.open(), run_id="r", models=models, resume="go"
            )
        )
    assert '- modelSlot: "fast" → "smart"' in str(info.value)


def test_session_where_the_log_has_a_step_is_nondeterminism(worlds: Worlds) -> None:
    """Code that opens a session where the log recorded a step is refused."""

    @durable.step(name="first")
    async def first() -> int:
        return 1

    def wf_with(session_first: bool) -> Any:
        @durable.workflow(name="w")
        async def w() -> int:
            if session_first:
                async with durable.session("worker"):
                    pass
            else:
                await first()
            durable.interrupt("pause")
            return 0

        return w

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(wf_with(False), world=worlds.open(), run_id="r"))
    with pytest.raises(NondeterminismError):
        asyncio.run(durable.run_workflow(wf_with(True), world=worlds.open(), run_id="r", resume=1))


def test_session_outside_a_run_is_plain() -> None:
    """Outside a run a session records nothing and its calls are plain calls."""

    @durable.tool
    async def double(x: int) -> int:
        return 2 * x

    async def main() -> tuple[int, str | None]:
        async with durable.session("worker", tools=[double]) as s:
            return await double(4), s.path

    assert asyncio.run(main()) == (8, None)


@pytest.mark.parametrize("role", ["", "a.b", "x[1]", "r#2", "p:q", 5])
def test_bad_role_is_a_configuration_error(role: Any) -> None:
    """A role that cannot name a path segment is refused with a typed error."""

    async def main() -> None:
        async with durable.session(role):
            pass

    with pytest.raises(ConfigurationError, match="role"):
        asyncio.run(main())


def test_undecorated_tool_is_a_configuration_error() -> None:
    """Tools must be @tool functions; anything else is refused before the session opens."""

    async def plain(q: str) -> str:
        return q

    async def main() -> None:
        async with durable.session("worker", tools=[plain]):
            pass

    with pytest.raises(ConfigurationError, match="@tool"):
        asyncio.run(main())


def test_step_with_role_is_a_session_at_the_step_path(worlds: Worlds) -> None:
    """@step(role=...) records session.started at the step's path and checks drift there."""

    def wf_with(version: int) -> Any:
        @durable.tool(name="fix", version=version)
        async def fix(line: int) -> str:
            return f"fixed {line}"

        @durable.step(role="fixer", tools=[fix])
        async def repair(line: int) -> str:
            return await fix(line)

        @durable.workflow(name="w")
        async def w(line: int) -> str:
            out = await repair(line)
            durable.interrupt("pause")
            return out

        return w

    world = worlds.open()
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(wf_with(1), 3, world=world, run_id="r", models={"fixer": "m"}))
    started = [e for e in world.events("r") if e.type == "session.started"]
    assert [(e.path, e.role, e.manifest["fixerModelSlotId"]) for e in started] == [("repair", "fixer", "m")]
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(
            durable.run_workflow(wf_with(1), 3, world=worlds.open(), run_id="r", models={"fixer": "m"})
        )


def test_session_options_without_role_are_refused() -> None:
    """tools= on a plain step is a mistake reported at decoration time."""

    @durable.tool
    async def t() -> None:
        return None

    with pytest.raises(ConfigurationError, match="role"):

        @durable.step(tools=[t])
        async def s() -> None:
            return None


def test_sync_session_step_is_refused() -> None:
    """A session step must be async; a sync one fails at decoration time."""
    with pytest.raises(ConfigurationError, match="async"):

        @durable.step(role="worker")
        def s() -> None:
            return None


def test_scratch_dir_is_under_the_run_and_session(tmp_path: Any) -> None:
    """scratch_dir() is <data_dir>/runs/<run_id>/harness/<session path>/ and survives the run."""

    @durable.workflow
    async def w() -> str:
        async with durable.session("worker"):
            folder = durable.scratch_dir()
            (folder / "notes.txt").write_text("draft")
            return str(folder)

    with durable.local_world(tmp_path) as world:
        out = asyncio.run(durable.run_workflow(w, world=world, run_id="r1"))
    expected = tmp_path / "runs" / "r1" / "harness" / "session:worker#0"
    assert out == str(expected)
    assert (expected / "notes.txt").read_text() == "draft"


def test_scratch_dir_needs_a_session() -> None:
    """scratch_dir() outside a session says where it can be used."""
    with pytest.raises(ConfigurationError, match="session"):
        durable.scratch_dir()


def test_scratch_dir_in_a_memory_world_is_refused() -> None:
    """A memory world keeps no files, so a session there has no scratch folder."""

    @durable.workflow
    async def w() -> str:
        async with durable.session("worker"):
            return str(durable.scratch_dir())

    with pytest.raises(ConfigurationError, match="memory_world"):
        asyncio.run(durable.run_workflow(w, world=durable.memory_world(), run_id="r"))


def test_parallel_tool_calls_replay_in_recorded_order(worlds: Worlds) -> None:
    """Tool calls of one turn keyed by tool_call_id return in the model's order however they finish."""
    finished: list[str] = []
    calls: Counter[str] = Counter()

    def build_wf() -> Any:
        @durable.tool(name="fetch")
        async def fetch(url: str) -> str:
            calls[url] += 1
            if url == "a":  # the first call waits until the second has finished
                await events["b"].wait()
            finished.append(url)
            if url == "b":
                events["b"].set()
            return f"page {url}"

        async def run_tool(call_id: str, url: str) -> str:
            async with durable.branch(call_id):
                return await fetch(url)

        @durable.workflow(name="w")
        async def w() -> list[str]:
            async with durable.session("worker", tools=[fetch]):
                return list(await asyncio.gather(run_tool("call_a", "a"), run_tool("call_b", "b")))

        return w

    events: dict[str, asyncio.Event] = {}

    async def go(world: durable.World) -> list[str]:
        events["b"] = asyncio.Event()
        return await durable.run_workflow(build_wf(), world=world, run_id="r")  # type: ignore[no-any-return]

    world = worlds.open()
    assert asyncio.run(go(world)) == ["page a", "page b"]
    assert finished == ["b", "a"]
    keys = [e.key for e in world.events("r") if e.type == "effect.receipt"]
    assert keys == ["session:worker#0.[call_b].tool:fetch#0", "session:worker#0.[call_a].tool:fetch#0"]
    assert asyncio.run(go(worlds.open())) == ["page a", "page b"]
    assert calls == Counter({"a": 1, "b": 1})


def test_crash_in_a_parallel_batch_reruns_only_unconfirmed_calls(worlds: Worlds) -> None:
    """A crash after one tool of a batch confirmed re-drives only the other one."""
    calls: Counter[str] = Counter()

    @durable.tool(name="fetch", idempotent=True)
    async def fetch(url: str) -> str:
        calls[url] += 1
        if url == "b":
            for _ in range(3):  # event-loop turns (no time passes): a's receipt is written first
                await asyncio.sleep(0)
        return f"page {url}"

    async def run_tool(call_id: str, url: str) -> str:
        async with durable.branch(call_id):
            return await fetch(url)

    @durable.workflow(name="w")
    async def w() -> list[str]:
        async with durable.session("worker", tools=[fetch]):
            return list(await asyncio.gather(run_tool("c1", "a"), run_tool("c2", "b")))

    crashing = worlds.crashing(lambda t, d: t == "effect.receipt" and "[c2]" in d["key"])
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(w, world=crashing, run_id="r"))
    rec = Recorded.from_rows(worlds.open().log.read("r"))
    assert set(rec.receipts) == {"session:worker#0.[c1].tool:fetch#0"}
    assert asyncio.run(durable.run_workflow(w, world=worlds.open(), run_id="r")) == ["page a", "page b"]
    assert calls == Counter({"a": 1, "b": 2})


def test_replayed_session_ends_once_in_the_log(worlds: Worlds) -> None:
    """A session that ended before the crash is not recorded as ending again on resume."""

    @durable.workflow(name="w")
    async def w() -> int:
        async with durable.session("planner"):
            pass
        return int(durable.interrupt("pause"))

    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(w, world=worlds.open(), run_id="r"))
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(w, world=world, run_id="r", resume=4)) == 4
    types = [e.type for e in world.events("r")]
    assert (types.count("session.started"), types.count("session.completed")) == (1, 1)


leaf = st.one_of(st.none(), st.integers(), st.text(max_size=5))
manifests = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["planner", "worker"]),
        "modelSlot": st.text(min_size=1, max_size=5),
        "availableTools": st.lists(st.fixed_dictionaries({"name": leaf, "signature": leaf}), max_size=3),
    }
)


@given(manifests)
def test_a_manifest_has_no_changes_against_itself(m: dict[str, Any]) -> None:
    """Diffing a manifest with itself finds nothing."""
    assert manifest_changes(m, m) == []


@given(manifests, manifests)
def test_manifest_changes_name_every_differing_leaf(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Each change names a leaf whose recorded and current values differ, and none is missed."""
    changes = manifest_changes(a, b)
    flat_a, flat_b = _flat(a, "", {}), _flat(b, "", {})
    assert {c.key for c in changes} == {
        k
        for k in flat_a.keys() | flat_b.keys()
        if k not in flat_a or k not in flat_b or flat_a[k] != flat_b[k]
    }
    assert (changes == []) == (a == b)


@given(
    st.text(alphabet="abcxyz_-", min_size=1, max_size=6), st.integers(0, 10_000), st.text("ab.", max_size=4)
)
def test_session_position_reads_the_ordinal_back(role: str, n: int, prefix: str) -> None:
    """The ordinal in a session path is read back whatever scope it sits in."""
    scope = f"{prefix}step" if prefix else ""
    path = session_path(f"{scope}." if scope else "", role, n)
    assert session_position(path) == n
    assert session_position(effect_key(f"{path}.", "model", "ask", n)) is None


def test_workflow_started_inside_a_tool_recovers_at_each_level(worlds: Worlds) -> None:
    """A start_workflow tool that crashed inside its child run resumes the same child from its log."""
    calls: Counter[str] = Counter()

    @durable.tool(name="score_part", idempotent=True)
    async def score_part(part: str) -> int:
        calls[part] += 1
        return len(part)

    @durable.workflow(name="scoring")
    async def scoring(cid: str) -> int:
        return await score_part(f"{cid}-skills") + await score_part(f"{cid}-refs")

    @durable.tool(name="start_workflow", idempotent=True)
    async def start_workflow(cid: str) -> str:
        calls["start"] += 1
        return f"score {await scoring(cid)}"

    @durable.workflow(name="w")
    async def w(cid: str) -> str:
        async with durable.session("orchestrator", tools=[start_workflow], workflows=[scoring]):
            return await start_workflow(cid)

    crashing = worlds.crashing(on("effect.receipt", "score_part#1"))
    with pytest.raises(SimulatedCrash):
        asyncio.run(durable.run_workflow(w, "ada", world=crashing, run_id="r"))
    world = worlds.open()
    assert asyncio.run(durable.run_workflow(w, "ada", world=world, run_id="r")) == "score 18"
    assert calls == Counter({"start": 2, "ada-skills": 1, "ada-refs": 2})
    children = [r for r in world.runs() if r.parent_run_id == "r"]
    assert [(c.workflow, c.status) for c in children] == [("scoring", "completed")]
    assert children[0].run_id.startswith("r:session:orchestrator#0.tool:start_workflow#0/scoring:")


def test_session_step_on_a_method_binds_self(world: durable.World) -> None:
    """@step(role=...) on a method runs as a session with self bound and excluded from identity."""

    class Fixer:
        def __init__(self, prefix: str):
            self.prefix = prefix

        @durable.step(role="fixer")
        async def repair(self, line: int) -> str:
            return f"{self.prefix}{line}"

    @durable.workflow(name="w")
    async def w(line: int) -> str:
        return await Fixer("fixed ").repair(line)

    assert asyncio.run(durable.run_workflow(w, 7, world=world, run_id="r")) == "fixed 7"
    started = [e for e in world.events("r") if e.type == "session.started"]
    assert [(e.path, e.role) for e in started] == [("repair", "fixer")]
