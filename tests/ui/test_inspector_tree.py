"""The run page's tree of calls with their values, the whole-value link and the comparison (no browser)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durable
from durable.ops._run_diff import Call
from durable.store import Append
from durable.ui._app import Inspector, create_app
from durable.ui._pages import compare_href, run_href
from durable.ui._tree import build_tree
from tests.helpers.recorded import DATA
from tests.ui.harness import HOSTILE, seed_fork

testclient = pytest.importorskip("starlette.testclient")


def _client(world: durable.World) -> Any:
    return testclient.TestClient(create_app(Inspector(world, "s3cret", {})), base_url="http://127.0.0.1:8787")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[durable.World]:
    w = durable.local_world(tmp_path / "data")
    asyncio.run(seed_fork(w))
    try:
        yield w
    finally:
        w.close()


def _rows(page: str) -> dict[str, dict[str, str]]:
    """Each call row's attributes, by its data-key."""
    out = {}
    for attrs in re.findall(r'<tr class="item" ([^>]*)>', page):
        d = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
        out[d["data-key"]] = d
    return out


def test_calls_nest_under_their_step_branch_session_and_loop() -> None:
    """A tool under its step, a branch call under its branch, visits under a loop, a turn in its session."""
    calls = {
        p: Call(p, k, p, "ok", 1)
        for p, k in [
            ("research", "step"),
            ("research.tool:lookup#0", "tool"),
            ("research.sources[a.b].model:read#0", "model"),
            ("session:writer#1", "session"),
            ("session:writer#1.model:reply#0", "model"),
            ("polish.visit[0]", "step"),
            ("polish.visit[1]", "step"),
        ]
    }
    tree = build_tree(calls, [])
    shape = {n.key: (n.kind, n.depth, [c.key for c in n.children]) for r in tree for n in r.walk()}
    assert [n.key for n in tree] == ["research", "session:writer#1", "polish"]
    assert shape["research"] == ("step", 0, ["research.tool:lookup#0", "research.sources[a.b]"])
    assert shape["research.sources[a.b]"] == ("branch", 1, ["research.sources[a.b].model:read#0"])
    assert shape["session:writer#1"][2] == ["session:writer#1.model:reply#0"]
    assert shape["polish"] == ("loop", 0, ["polish.visit[0]", "polish.visit[1]"])
    assert [n.label for n in tree[2].children] == ["visit[0]", "visit[1]"]


def test_the_run_page_shows_the_tree_with_outputs_and_marks_inherited_calls(world: durable.World) -> None:
    """The fork's page nests its calls, shows what each returned, and marks what it inherited."""
    page = _client(world).get(run_href("support-big")).text
    rows = _rows(page)
    assert rows["research"]["data-depth"] == "0"
    assert rows["research.tool:lookup_customer_record#0"]["data-depth"] == "1"
    assert rows["research.sources[faq]"]["data-kind"] == "branch"
    assert rows["research.sources[faq].model:read_source#0"]["data-depth"] == "2"
    assert rows["polish"]["data-kind"] == "loop" and rows["polish.visit[1]"]["data-depth"] == "1"
    assert rows["session:writer#1.model:write_reply#0"]["data-depth"] == "1"
    research = page.split('data-key="research"', 1)[1].split("</tr>", 1)[0]
    assert "inherited" in research and "[research-model] notes from faq" in research
    reply = page.split('data-key="session:writer#1.model:write_reply#0"', 1)[1].split("</tr>", 1)[0]
    assert "executed" in reply and "[big-writer] Dear customer" in reply
    session = page.split('data-key="session:writer#1"', 1)[1].split("</tr>", 1)[0]
    assert "executed" in session and "inherited" not in session  # opened after the checkpoint


def test_a_long_output_is_cut_and_links_to_the_whole_value_as_json(world: durable.World) -> None:
    """A value past the cut ends in an ellipsis and a link; the link serves the whole value as JSON."""
    client = _client(world)
    page = client.get(run_href("support-small")).text
    row = page.split('data-key="research.tool:lookup_customer_record#0"', 1)[1].split("</tr>", 1)[0]
    assert "…</pre>" in row
    href = re.search(r'<a class="whole" href="([^"]+)"', row)
    assert href is not None
    got = client.get(href.group(1).replace("&amp;", "&"))
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.json()["history"] == "renewed twice; " * 60


def test_the_whole_value_of_an_unknown_call_or_run_is_not_found(world: durable.World) -> None:
    """A path the run does not have, or a run the world does not have, answers 404."""
    client = _client(world)
    assert client.get("/value", params={"run": "support-small", "path": "nothing"}).status_code == 404
    assert client.get("/value", params={"run": "nobody", "path": "research"}).status_code == 404
    whole = client.get("/value", params={"run": "support-small", "path": ""}).json()
    assert whole["input"] == "c-42" and whole["output"].startswith("[small-writer]")


def test_a_fork_s_page_links_to_its_comparison_with_its_source(world: durable.World) -> None:
    """The fork names the run and seq it was forked from and links to the comparison of the two."""
    page = _client(world).get(run_href("support-big")).text
    assert "forked from" in page
    assert (
        f'class="compare-fork" href="{compare_href("support-small", "support-big").replace("&", "&amp;")}"'
        in page
    )
    plain = _client(world).get(run_href("support-small")).text
    assert "compare-fork" not in plain
    assert 'class="compare-other" href="/compare?a=support-small"' in plain  # the form, run A filled in


def test_the_comparison_marks_each_path_and_highlights_the_changed_words(world: durable.World) -> None:
    """Inherited calls are the same; the reply and what follows changed, with the differing word marked."""
    page = _client(world).get(compare_href("support-small", "support-big")).text
    statuses = dict(re.findall(r'<tr class="diff-row" data-path="([^"]+)" data-status="([^"]+)"', page))
    assert statuses["research"] == "same"
    assert statuses["research.sources[tickets].model:read_source#0"] == "same"
    assert statuses["session:writer#1.model:write_reply#0"] == "changed"
    assert statuses["polish.visit[1]"] == "changed"
    assert '<mark class="del">small</mark>' in page and '<mark class="ins">big</mark>' in page
    assert "forked from run A at seq" in page
    only = _client(world).get(compare_href("support-small", "support-big") + "&changed=1").text
    assert 'data-status="same"' not in only and 'data-status="changed"' in only


def test_a_comparison_with_a_missing_run_says_so_in_the_form(world: durable.World) -> None:
    """An unknown run id answers 404 with the form filled in and the reason; no ids gives the empty form."""
    client = _client(world)
    got = client.get(compare_href("support-small", "gone"))
    assert got.status_code == 404 and "no run" in got.text and 'value="support-small"' in got.text
    empty = client.get("/compare")
    assert empty.status_code == 200 and 'class="compare-form"' in empty.text


def test_hostile_run_ids_stay_text_on_the_comparison(world: durable.World) -> None:
    """A run id full of markup is escaped in the heading, the links and the rows."""
    with pytest.raises(durable.RunInterrupted):
        asyncio.run(durable.run_workflow(_approval(), "x", world=world, run_id=HOSTILE))
    page = _client(world).get(compare_href(HOSTILE, "support-small")).text
    assert "<img" not in page and "evil&lt;img" in page


def _approval() -> Any:
    from tests.ui import app

    return app.approval


def test_an_encrypted_world_shows_values_with_the_key(tmp_path: Path) -> None:
    """The inspector holding the key shows decrypted outputs side by side."""
    pytest.importorskip("cryptography")
    w = durable.local_world(tmp_path / "enc", codec=durable.EncryptionCodec(bytes(range(32))))
    try:
        asyncio.run(seed_fork(w))
        page = _client(w).get(compare_href("support-small", "support-big")).text
        assert '<mark class="ins">big</mark>' in page
    finally:
        w.close()


def test_values_under_a_key_the_inspector_lacks_are_said_to_be_sealed(tmp_path: Path) -> None:
    """A run sealed under another key gives pages that say so, and show none of its values."""
    pytest.importorskip("cryptography")
    other = durable.local_world(tmp_path / "other", codec=durable.EncryptionCodec(bytes(range(1, 33))))
    mine = durable.local_world(tmp_path / "mine", codec=durable.EncryptionCodec(bytes(range(32))))
    try:
        asyncio.run(seed_fork(mine))
        asyncio.run(seed_fork(other))
        sealed_rows = other.log.inner.read("support-big")  # type: ignore[attr-defined]
        inner = mine.log.inner  # type: ignore[attr-defined]
        inner.append(
            [Append("stranger", sealed_rows, inner.fence("stranger"), "completed", ("support", None))]
        )
        client = _client(mine)
        for got in (
            client.get(compare_href("support-small", "stranger")),
            client.get(run_href("stranger")),
            client.get("/value", params={"run": "stranger", "path": "research"}),
        ):
            assert got.status_code == 403
            assert "values sealed" in got.text and "LITTLE_KEY" in got.text
            assert "big-writer" not in got.text and "research-model" not in got.text
        assert client.get(compare_href("support-small", "support-big")).status_code == 200
    finally:
        other.close()
        mine.close()


@durable.step
async def big(n: int) -> list[int]:
    return list(range(n))


@durable.workflow
async def makes_big(n: int) -> int:
    return len(await big(n))


def test_a_step_output_stored_as_an_artifact_is_shown_and_a_missing_one_named(tmp_path: Path) -> None:
    """An output beside the log is read back into the tree; once its file is gone the page says so."""
    with durable.local_world(tmp_path / "art", artifact_threshold=64) as w:
        asyncio.run(durable.run_workflow(makes_big, 300, world=w, run_id="big"))
        row = _client(w).get(run_href("big")).text.split('data-key="big"', 1)[1].split("</tr>", 1)[0]
        assert "stored as artifact sha256:" in row
        assert _client(w).get("/value", params={"run": "big", "path": "big"}).json() == list(range(300))
    for blob in (tmp_path / "art" / "artifacts").rglob("*"):
        if blob.is_file() and blob.suffix != ".json":
            blob.unlink()
    with durable.local_world(tmp_path / "art") as w:
        page = _client(w).get(run_href("big")).text
        assert 'class="warn missing-artifact"' in page and "is missing from the artifact store" in page


def test_a_run_written_by_a_newer_sdk_is_refused_with_what_to_do(world: durable.World) -> None:
    """A log of a newer format gives a page (409) that says to upgrade, on the run page and the comparison."""
    _load_recorded(world, "newer_format", "from-the-future")
    client = _client(world)
    for got in (
        client.get(run_href("from-the-future")),
        client.get(compare_href("support-small", "from-the-future")),
    ):
        assert got.status_code == 409 and "Upgrade little-workflow" in got.text


def _load_recorded(world: durable.World, case: str, run_id: str) -> None:
    rows = [json.loads(line) for line in (DATA / case / "events.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["run_id"] == "run_recorded"]
    stored = [(int(r["seq"]), str(r["type"]), json.dumps(r["data"])) for r in rows]
    token = world.log.fence(run_id)
    world.log.append(
        [Append(run_id, stored, token, str(rows[0]["status"]), (str(rows[0]["workflow"]), None))]
    )


SEGMENTS = st.sampled_from(
    ["s", "tool:t#0", "model:m#1", "session:w#0", "b[k.1]", "loop.visit[0]", "loop.visit[1]"]
)


@given(st.lists(st.lists(SEGMENTS, min_size=1, max_size=4).map(".".join), max_size=12, unique=True))
def test_every_call_appears_once_under_the_scope_its_path_names(paths: list[str]) -> None:
    """Whatever the paths, each call is one node, and every node's key extends its parent's."""
    calls = {p: Call(p, "step", p, "ok", None) for p in paths}
    nodes = [n for root in build_tree(calls, []) for n in root.walk()]
    keys = [n.key for n in nodes]
    assert sorted(k for k in keys if k in calls) == sorted(paths)
    assert len(keys) == len(set(keys))
    for node in nodes:
        for child in node.children:
            assert child.key.startswith(node.key) and child.depth == node.depth + 1


def test_each_call_shows_its_input_and_a_long_one_links_to_the_whole_input(world: durable.World) -> None:
    """A short input is shown whole; a long one is cut, and its link serves the whole input as JSON."""
    client = _client(world)
    page = client.get(run_href("support-small")).text
    rows = {
        k: page.split(f'data-key="{k}"', 1)[1].split("</tr>", 1)[0]
        for k in ("research", "research.tool:file_record#1")
    }
    assert (
        '<div class="value" data-part="input"><pre>{\n  &quot;customer_id&quot;: &quot;c-42&quot;\n}</pre>'
        in rows["research"]
    )
    filed = rows["research.tool:file_record#1"]
    href = re.search(
        r'data-part="input"><pre>[^<]*…</pre> <a class="whole" href="([^"]+)">whole input', filed
    )
    assert href is not None and "part=input" in href.group(1)
    got = client.get(href.group(1).replace("&amp;", "&"))
    assert got.status_code == 200 and got.json()["record"]["history"] == "renewed twice; " * 60


def test_the_comparison_shows_a_changed_input_side_by_side_and_says_how(world: durable.World) -> None:
    """The fork's polish step got another text: both inputs shown, the words marked, the argument named."""
    page = _client(world).get(compare_href("support-small", "support-big")).text
    row = page.split('data-path="polish.visit[0]"', 1)[1].split("</tr>", 1)[0]
    assert row.count('class="input input-changed"') == 2
    assert '<mark class="del">small</mark>' in row and '<mark class="ins">big</mark>' in row
    assert re.search(
        r'<ul class="hint input-differs"><li>text: &quot;\[small-writer\].*in A, .*in B</li>', row
    )
    same = page.split('data-path="research"', 1)[1].split("</tr>", 1)[0]
    assert "input-changed" not in same and "input-differs" not in same


def test_a_call_of_an_older_log_says_its_input_was_not_recorded(world: durable.World) -> None:
    """A log written before inputs were recorded shows "input not recorded"; its whole input is not found."""
    _load_recorded(world, "clean", "older")
    client = _client(world)
    page = client.get(run_href("older")).text
    assert "input not recorded (older log)" in page and "input hash" not in page
    path = re.search(r'<tr class="item" [^>]*data-key="([^"]+)" data-kind="step"', page)
    assert path is not None
    got = client.get("/value", params={"run": "older", "path": path.group(1), "part": "input"})
    assert got.status_code == 404 and "logs before format 8 keep its hash" in got.text
