"""Checkpoints, restore and fork on both backends."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import durable
from durable import World

calls: Counter[str] = Counter()


@durable.step
async def fetch(topic: str) -> str:
    calls["fetch"] += 1
    return f"notes on {topic}"


@durable.step
async def outline(notes: str) -> str:
    calls["outline"] += 1
    return f"outline({notes})"


@durable.model_call(slot="writer")
async def write(text: str) -> str:
    calls["write"] += 1
    return f"{durable.model_for('writer')}: {text}"


@durable.step
async def publish(draft: str) -> str:
    calls["publish"] += 1
    return f"published {draft}"


@durable.step
async def stamp() -> str:
    calls["stamp"] += 1
    return "v1"


@durable.workflow
async def article(topic: str) -> str:
    version = await stamp()
    notes = await fetch(topic)
    plan = await outline(notes)
    draft = await write(plan)
    return f"{await publish(draft)} ({version})"


MODELS = {"writer": "small-model"}


def run(world: World, run_id: str, topic: str = "owls", models: dict[str, str] | None = None) -> str:
    coro = durable.run_workflow(article, topic, world=world, run_id=run_id, models=models or MODELS)
    return asyncio.run(coro)


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


def test_every_committed_step_is_a_checkpoint(world: World) -> None:
    """The checkpoint list has each step.completed with its seq, path and state version."""
    run(world, "r1")
    cps = durable.checkpoints("r1", world=world)
    assert [(c.path, c.state_version) for c in cps] == [
        ("stamp", 1),
        ("fetch", 2),
        ("outline", 3),
        ("publish", 4),
    ]
    completed = [e.seq for e in world.events("r1") if e.type == "step.completed"]
    assert [c.seq for c in cps] == completed


def test_checkpoints_of_an_unknown_run_raise(world: World) -> None:
    """Listing checkpoints of a run the world does not hold raises RunNotFoundError."""
    with pytest.raises(durable.RunNotFoundError):
        durable.checkpoints("ghost", world=world)


def test_restore_then_resume_reexecutes_exactly_the_steps_after_the_checkpoint(worlds) -> None:
    """After restoring to the fetch checkpoint a resume runs outline, write and publish again, once each."""
    world = worlds.open()
    first = run(world, "r1")
    fetch_cp = next(c for c in durable.checkpoints("r1", world=world) if c.path == "fetch")
    durable.restore("r1", fetch_cp.seq, world=world)
    calls.clear()
    assert run(worlds.open(), "r1") == first
    assert calls == Counter({"outline": 1, "write": 1, "publish": 1})


def test_restore_is_a_new_committed_transaction(world: World) -> None:
    """Restore appends run.restored with a higher state version and keeps every earlier event."""
    run(world, "r1")
    before = world.events("r1")
    done = durable.restore("r1", "stamp", world=world)
    after = world.events("r1")
    assert after[: len(before)] == before
    assert after[-1].type == "run.restored"
    assert after[-1].checkpoint == done.checkpoint.seq  # type: ignore[union-attr]
    assert done.state_version == 5
    state = durable.recover("r1", world=world)
    assert sorted(state.steps_completed) == ["stamp"]
    assert state.state_version == 5
    assert state.status() == "running"
    info = world.log.info("r1")
    assert info is not None
    assert info.status == "running"


def test_state_versions_keep_rising_after_a_restore(world: World) -> None:
    """Steps committed after a restore get state versions above the restore's."""
    run(world, "r1")
    durable.restore("r1", "fetch", world=world)
    run(world, "r1")
    versions = [c.state_version for c in durable.checkpoints("r1", world=world)]
    assert versions == [1, 2, 3, 4, 6, 7]


def test_restore_to_an_unknown_checkpoint_hints_at_listing_them(world: World) -> None:
    """An unknown checkpoint raises CheckpointNotFoundError telling to list checkpoints first."""
    run(world, "r1")
    with pytest.raises(durable.CheckpointNotFoundError, match="little checkpoints r1"):
        durable.restore("r1", 999, world=world)
    with pytest.raises(durable.CheckpointNotFoundError):
        durable.restore("r1", "no_such_step", world=world)
    assert "run.restored" not in [e.type for e in world.events("r1")]


def test_restore_rejects_a_checkpoint_of_the_wrong_type(world: World) -> None:
    """A checkpoint that is neither a seq nor a path raises ConfigurationError."""
    run(world, "r1")
    with pytest.raises(durable.ConfigurationError, match="seq"):
        durable.restore("r1", 1.5, world=world)  # type: ignore[arg-type]


def test_restore_after_compaction_reaches_only_the_snapshot_and_later(world: World) -> None:
    """After compaction the snapshot is the oldest checkpoint, and older ones are not found."""
    run(world, "r1")
    old = durable.checkpoints("r1", world=world)[0].seq
    durable.compact("r1", world=world)
    cps = durable.checkpoints("r1", world=world)
    assert [c.kind for c in cps] == ["snapshot"]
    with pytest.raises(durable.CheckpointNotFoundError):
        durable.restore("r1", old, world=world)
    durable.restore("r1", cps[0].seq, world=world)
    calls.clear()
    run(world, "r1")
    assert sum(calls.values()) == 0


def test_fork_reuses_the_steps_before_the_checkpoint_and_runs_the_rest(worlds) -> None:
    """A fork at the outline checkpoint calls only write and publish, with the new model."""
    world = worlds.open()
    run(world, "parent")
    calls.clear()
    forked = durable.fork("parent", "outline", world=world, models={"writer": "big-model"})
    out = asyncio.run(
        durable.run_workflow(
            article, forked.input, world=worlds.open(), run_id=forked.run_id, models=forked.models
        )
    )
    assert calls == Counter({"write": 1, "publish": 1})
    assert out == "published big-model: outline(notes on owls) (v1)"
    assert forked.reused == ["fetch", "outline", "stamp"]


def test_fork_records_its_parent_and_checkpoint(world: World) -> None:
    """The fork's run.started names the parent run and the checkpoint seq."""
    run(world, "parent")
    forked = durable.fork("parent", "fetch", world=world, new_run_id="child")
    started = world.events("child")[0]
    assert started.type == "run.started"
    assert (started.fork_of, started.fork_seq) == ("parent", forked.checkpoint.seq)  # type: ignore[union-attr]
    assert forked.run_id == "child"


def test_fork_leaves_the_parent_untouched(world: World) -> None:
    """Forking and running the fork adds nothing to the parent's log."""
    run(world, "parent")
    before = world.events("parent")
    forked = durable.fork("parent", "stamp", world=world)
    run(world, forked.run_id)
    assert world.events("parent") == before


def test_fork_with_a_changed_input_reruns_the_calls_whose_arguments_changed(world: World) -> None:
    """With a new input, stamp (no arguments) is reused and the input-derived steps run again."""
    run(world, "parent", "owls")
    calls.clear()
    forked = durable.fork("parent", "outline", world=world, input="bats")
    assert run(world, forked.run_id, "bats") == "published small-model: outline(notes on bats) (v1)"
    assert calls == Counter({"fetch": 1, "outline": 1, "write": 1, "publish": 1})


def test_fork_must_be_resumed_with_its_own_input(world: World) -> None:
    """Running a fork with another input than the one it was forked with fails with run_input_mismatch."""
    run(world, "parent", "owls")
    forked = durable.fork("parent", "fetch", world=world, input="bats")
    with pytest.raises(durable.RunFailedError) as info:
        run(world, forked.run_id, "owls")
    assert info.value.reason == "run_input_mismatch"


def test_fork_run_with_other_models_than_it_recorded_is_drift(world: World) -> None:
    """Running a fork without the models it was forked with raises CapabilityDriftError."""
    run(world, "parent")
    forked = durable.fork("parent", "fetch", world=world, models={"writer": "big-model"})
    with pytest.raises(durable.CapabilityDriftError, match=r"models\.writer"):
        run(world, forked.run_id, models=MODELS)


def test_only_inherited_records_are_marked_inherited(world: World) -> None:
    """A fork marks the step starts it inherited, not the ones it recorded itself."""
    run(world, "parent", "owls")
    forked = durable.fork("parent", "stamp", world=world, input="bats")
    run(world, forked.run_id, "bats")
    state = durable.recover(forked.run_id, world=world)
    assert not state.steps_started["fetch"].get("inherited")
    assert state.steps_started["stamp"].get("inherited") is True


def test_fork_into_a_used_run_id_is_refused(world: World) -> None:
    """Forking into an existing run id raises ConfigurationError and leaves that run alone."""
    run(world, "parent")
    run(world, "other")
    before = world.events("other")
    with pytest.raises(durable.ConfigurationError, match="already used"):
        durable.fork("parent", "stamp", world=world, new_run_id="other")
    assert world.events("other") == before


def test_fork_of_an_unknown_checkpoint_raises(world: World) -> None:
    """Forking from an unknown checkpoint raises CheckpointNotFoundError and creates no run."""
    run(world, "parent")
    with pytest.raises(durable.CheckpointNotFoundError, match="list its checkpoints first"):
        durable.fork("parent", 12345, world=world, new_run_id="f")
    assert world.log.read("f") == []


def test_fork_rejects_a_bad_model_mapping(world: World) -> None:
    """A models argument that is not str to str raises ConfigurationError."""
    run(world, "parent")
    with pytest.raises(durable.ConfigurationError, match="models"):
        durable.fork("parent", "stamp", world=world, models={"writer": 3})  # type: ignore[dict-item]


def test_fork_of_a_compacted_run_reuses_the_snapshot(world: World) -> None:
    """A fork from the snapshot checkpoint of a compacted run runs nothing that was committed."""
    run(world, "parent")
    durable.compact("parent", world=world)
    snap = durable.checkpoints("parent", world=world)[0]
    forked = durable.fork("parent", snap.seq, world=world)
    calls.clear()
    run(world, forked.run_id)
    assert sum(calls.values()) == 0


def test_model_for_outside_a_run_raises() -> None:
    """model_for needs a running run."""
    with pytest.raises(durable.ConfigurationError, match="inside a durable run"):
        durable.model_for("writer")


knobs = {"arg": 1, "fail": False}


@durable.step
async def begin() -> str:
    return "begun"


@durable.step
async def use(x: int) -> int:
    return x


@durable.step
async def finish() -> str:
    if knobs["fail"]:
        raise RuntimeError("finish failed")
    return "done"


@durable.workflow
async def knobbed() -> str:
    await begin()
    await use(knobs["arg"])
    return await finish()


def test_a_forks_own_record_called_with_other_arguments_is_nondeterminism(world: World) -> None:
    """A call the fork recorded itself fails closed on changed arguments; only inherited ones re-run."""
    knobs.update(arg=1, fail=False)
    asyncio.run(durable.run_workflow(knobbed, world=world, run_id="parent"))
    forked = durable.fork("parent", "begin", world=world, new_run_id="f")
    knobs["fail"] = True
    with pytest.raises(RuntimeError, match="finish failed"):
        asyncio.run(durable.run_workflow(knobbed, world=world, run_id="f"))
    knobs.update(arg=2, fail=False)
    with pytest.raises(durable.NondeterminismError, match="'use'"):
        asyncio.run(durable.run_workflow(knobbed, world=world, run_id=forked.run_id, retry_failed=True))
    knobs["arg"] = 1
    second = durable.fork("parent", "use", world=world)
    knobs["arg"] = 2
    assert asyncio.run(durable.run_workflow(knobbed, world=world, run_id=second.run_id)) == "done"
    assert durable.recover(second.run_id, world=world).steps_completed["use"]["output"] == 2


@durable.step(role="researcher")
async def investigate(topic: str) -> str:
    calls["investigate"] += 1
    return f"{durable.model_for('researcher')} on {topic}"


@durable.step(role="writer")
async def compose(notes: str) -> str:
    calls["compose"] += 1
    return f"{durable.model_for('writer')} writes {notes}"


@durable.workflow
async def agent_sessions(topic: str) -> str:
    return await compose(await investigate(topic))


def test_fork_with_new_models_reopens_sessions_after_the_checkpoint(world: World) -> None:
    """A fork with other models is not drift: inherited sessions replay, later ones record the new model."""
    models = {"researcher": "r-small", "writer": "w-small"}
    asyncio.run(durable.run_workflow(agent_sessions, "owls", world=world, run_id="p", models=models))
    calls.clear()
    forked = durable.fork("p", "investigate", world=world, models={**models, "writer": "w-big"})
    out = asyncio.run(
        durable.run_workflow(agent_sessions, "owls", world=world, run_id=forked.run_id, models=forked.models)
    )
    assert out == "w-big writes r-small on owls"
    assert calls == Counter({"compose": 1})
    with pytest.raises(durable.CapabilityDriftError):
        asyncio.run(
            durable.run_workflow(agent_sessions, "owls", world=world, run_id="p", models=forked.models)
        )
