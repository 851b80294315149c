"""Canonical descriptions, manifests and their hashes (pure; Hypothesis where it fits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import durable
from durable.engine._capabilities import reachable
from durable.engine._drift import diff, resume_changes
from durable.engine._manifest import (
    definition_hash,
    describe,
    manifest_hash,
    run_manifest,
    signature_text,
)
from durable.engine._spec import Spec, spec_of
from tests import drift_app
from tests.helpers.codegen import load_source


def _spec(fn: Any) -> Spec:
    spec = spec_of(fn)
    assert spec is not None
    return spec


class _Opaque:
    """A default whose repr holds an address; stored as anything (annotations must be storable)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()


_OPAQUE = _Opaque()


@durable.tool
async def _kinds(a: int, /, b: str = "x", *args: int, c: _Opaque = _OPAQUE, **kw: float) -> list[int]:
    return []


def test_signature_text_shows_every_parameter_kind() -> None:
    """Positional-only, defaults, ``*args``, keyword-only and ``**kw`` all appear as Python writes them."""
    assert signature_text(_spec(_kinds)) == (
        "(a: int, /, b: str = 'x', *args: int, c: _Opaque = <tests.unit.test_manifest._Opaque object>, "
        "**kw: float) -> list[int]"
    )


def test_signature_text_is_the_same_with_postponed_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    """``from __future__ import annotations`` does not change a description."""
    body = (
        "import durable\n\n@durable.tool\n"
        "async def f(x: int, y: list[str]) -> dict[str, int]:\n    return {}\n"
    )
    plain = load_source(monkeypatch, "sig_mod", body)
    eager = describe(_spec(plain.f))
    postponed = load_source(monkeypatch, "sig_mod", "from __future__ import annotations\n" + body)
    assert describe(_spec(postponed.f)) == eager
    assert eager["signature"] == "(x: int, y: list[str]) -> dict[str, int]"


def test_description_holds_every_decorator_option() -> None:
    """Version, max_visits, idempotent, reconcile, slot and retry are part of descriptions."""

    def check(key: str, value: object) -> object:
        return None

    @durable.step(max_visits=3, version="7")
    async def s() -> None: ...

    @durable.tool(idempotent=True, reconcile=check)
    async def t() -> None: ...

    policy = durable.RetryPolicy(max_attempts=2, backoff=0)

    @durable.model_call(slot="planner", retry=policy)
    async def m() -> None: ...

    assert describe(_spec(s))["options"] == {"version": "7", "max_visits": 3}
    assert describe(_spec(t))["options"] == {
        "version": None,
        "idempotent": True,
        "reconcile": "test_description_holds_every_decorator_option.<locals>.check",
    }
    assert describe(_spec(m))["options"] == {"version": None, "slot": "planner", "retry": policy.describe()}
    assert policy.describe().startswith("stop=stop_after_attempt(max_attempt_number=2)")


def test_manifest_keys_follow_the_documented_sections() -> None:
    """A run manifest names capabilities as ``tools.score``, ``workflows.scoring``, ``models.worker``."""
    manifest = run_manifest(_spec(drift_app.review), drift_app.MODELS)
    assert sorted(manifest) == [
        "declared",
        "model_calls",
        "models",
        "steps",
        "tools",
        "workflow",
        "workflows",
    ]
    assert sorted(manifest["tools"]) == ["score"]
    assert sorted(manifest["steps"]) == ["finish", "table", "worker"]
    assert sorted(manifest["model_calls"]) == ["ask"]
    assert list(manifest["workflows"]["scoring"]) == ["definition_hash"]
    assert manifest["models"] == {"worker": "gpt-5"}


_HASH_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from tests import drift_app
from durable.engine._manifest import manifest_hash, run_manifest
from durable.engine._spec import spec_of
print(manifest_hash(run_manifest(spec_of(drift_app.review), {"worker": "gpt-5", "planner": "o3"})))
"""


def test_manifest_hash_is_stable_across_processes_and_hash_seeds() -> None:
    """Two processes with different hash seeds compute the same manifest hash as this one."""
    root = str(Path(__file__).parents[2])
    hashes = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _HASH_SCRIPT, root], env=env, capture_output=True, text=True, check=True
        )
        hashes.add(out.stdout.strip())
    local = manifest_hash(run_manifest(_spec(drift_app.review), {"planner": "o3", "worker": "gpt-5"}))
    assert hashes == {local}
    assert local.startswith("sha256:")
    assert len(local) == len("sha256:") + 64


# -- Hypothesis -------------------------------------------------------------------------

_leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_json = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_names, inner, max_size=4),
    max_leaves=8,
)
_descriptions = st.dictionaries(_names, _json, min_size=1, max_size=6)


def _reordered(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: _reordered(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [_reordered(v, rnd) for v in value]
    return value


@settings(max_examples=60)
@given(_descriptions, st.randoms(use_true_random=False))
def test_manifest_hash_ignores_key_order(manifest: dict[str, Any], rnd: Any) -> None:
    """The same manifest built in any key order has the same hash."""
    assert manifest_hash(_reordered(manifest, rnd)) == manifest_hash(manifest)


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in _leaf_paths(v, (*path, k))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, (*path, i))]
    return [path]


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@settings(max_examples=60)
@given(_descriptions, st.data())
def test_any_single_change_changes_the_hash(manifest: dict[str, Any], data: st.DataObject) -> None:
    """Changing any one leaf of a description changes its hash, and diff names exactly that leaf."""
    path = data.draw(st.sampled_from(_leaf_paths(manifest)))
    old = _get(manifest, path)
    new = data.draw(_leaves.filter(lambda v: json.dumps(v) != json.dumps(old)))
    changed = _replace(manifest, path, new)
    assert manifest_hash(changed) != manifest_hash(manifest)
    assert len(diff(manifest, changed)) == 1


_TOOLS_SOURCE = "\n".join(f"@durable.tool\nasync def t{i}(x: int) -> int:\n    return x\n" for i in range(4))


@given(st.permutations(range(4)))
def test_declared_capabilities_hash_the_same_in_any_order(order: list[int]) -> None:
    """``uses=[...]`` in any order gives the same definition hash and manifest hash."""
    tools = types.ModuleType("perm_tools")
    exec(compile("import durable\n" + _TOOLS_SOURCE, "<perm_tools>", "exec"), tools.__dict__)
    listed = [getattr(tools, f"t{i}") for i in range(4)]

    def flow_with(uses: list[Any]) -> Spec:
        @durable.workflow(name="perm", uses=uses)
        async def perm() -> None:
            return None

        return _spec(perm)

    base, shuffled = flow_with(listed), flow_with([listed[i] for i in order])
    assert definition_hash(shuffled) == definition_hash(base)
    assert manifest_hash(run_manifest(shuffled, {})) == manifest_hash(run_manifest(base, {}))


_OPTION_CHANGES = {
    "version": ("@durable.step", '@durable.step(version="2")'),
    "max_visits": ("@durable.step", "@durable.step(max_visits=2)"),
    "retry": ("@durable.step", "@durable.step(retry=durable.RetryPolicy(max_attempts=2, backoff=0))"),
    "name": ("@durable.step", '@durable.step(name="renamed")'),
    "parameter": ("(x: int)", "(x: int, y: int = 0)"),
    "annotation": ("(x: int)", "(x: float)"),
    "default": ("(x: int)", "(x: int = 3)"),
    "returns": ("-> int:", "-> str:"),
}


@given(st.sampled_from(sorted(_OPTION_CHANGES)))
def test_any_single_change_to_a_function_changes_its_description_hash(what: str) -> None:
    """Changing one option, parameter, annotation, default or return type changes the hash."""
    source = "import durable\n\n@durable.step\nasync def s(x: int) -> int:\n    return 1\n"
    old, new = _OPTION_CHANGES[what]
    hashes = []
    for text in (source, source.replace(old, new, 1)):
        module = types.ModuleType("opt_mod")
        exec(compile(text, "<opt_mod>", "exec"), module.__dict__)
        hashes.append(manifest_hash(describe(_spec(module.s))))
    assert hashes[0] != hashes[1]


# -- diff and the relevant part --------------------------------------------------------


def test_diff_reports_an_added_or_removed_entry_once() -> None:
    """A capability present on one side only is one change, not one per leaf."""
    old = {"tools": {"a": {"signature": "()", "options": {"v": 1}}}}
    new = {"tools": {"b": {"signature": "()", "options": {"v": 1}}}}
    assert [(c.key, c.old is None, c.new is None) for c in diff(old, new)] == [
        ("tools.a", False, True),
        ("tools.b", True, False),
    ]


def test_diff_tells_booleans_from_numbers() -> None:
    """``true`` and ``1`` are different manifest values, although Python calls them equal."""
    assert [c.key for c in diff({"a": True, "b": 1}, {"a": 1, "b": 1.5})] == ["a", "b"]


def test_resume_changes_compare_only_used_or_declared_capabilities() -> None:
    """Unused and undeclared capabilities are left out of the comparison."""
    old = {"workflow": {}, "declared": ["tools.d"], "tools": {"u": 1, "n": 1, "d": 1}, "models": {}}
    new = {"workflow": {}, "declared": ["tools.d"], "tools": {"u": 2, "n": 2, "d": 2}, "models": {}}
    assert [c.key for c in resume_changes(old, new, used={"tools.u"})] == ["tools.d", "tools.u"]


# -- reachability ----------------------------------------------------------------------

_REACH = """
import durable
import reach_tools


@durable.tool
async def direct() -> int:
    return 1


@durable.tool
async def in_registry() -> int:
    return 1


@durable.step
async def in_child_only() -> int:
    return 1


@durable.workflow
async def child() -> int:
    return await in_child_only()


REGISTRY = {"r": in_registry}


async def helper() -> int:
    return await reach_tools.via_module() + await REGISTRY["r"]()


class Agent:
    async def act(self) -> int:
        return await direct()


def make(closed_over):
    @durable.workflow
    async def flow() -> int:
        await closed_over()
        await Agent().act()
        await child()
        return await helper()

    return flow
"""


def test_reachable_follows_globals_closures_modules_registries_and_classes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk finds tools through module attributes, dicts, closures, helpers and methods."""
    load_source(
        monkeypatch,
        "reach_tools",
        "import durable\n\n@durable.tool\nasync def via_module() -> int:\n    return 1\n\n"
        "@durable.tool\nasync def via_closure() -> int:\n    return 1\n",
    )
    mod = load_source(monkeypatch, "reach_app", _REACH)
    flow = mod.make(sys.modules["reach_tools"].via_closure)
    found = {(s.kind, s.name) for s in reachable(_spec(flow))}
    assert found == {
        ("tool", "direct"),
        ("tool", "in_registry"),
        ("tool", "via_module"),
        ("tool", "via_closure"),
        ("workflow", "child"),
    }


_HOSTILE = """
import durable


class Hostile:
    def __getattr__(self, name):
        raise RuntimeError("no attributes here")

    def __repr__(self):
        raise RuntimeError("no repr either")


THING = Hostile()


@durable.tool
async def use(x: int, thing: object = THING) -> int:
    return x


@durable.workflow
async def flow(x: int) -> int:
    THING
    return await use(x)
"""


def test_hostile_objects_in_the_code_do_not_break_a_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects whose attribute access or repr raises are skipped or named by their type."""
    mod = load_source(monkeypatch, "hostile_app", _HOSTILE)
    manifest = run_manifest(_spec(mod.flow), {})
    assert manifest["tools"]["use"]["signature"] == "(x: int, thing: object = <Hostile>) -> int"
