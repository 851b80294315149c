"""The inspector's app without a browser: the token, private mode, escaping and the timeline model."""

# ruff: noqa: E402  (the extra is checked with importorskip before the imports that need it)

from __future__ import annotations

import asyncio
import contextlib
import datetime
import re
from pathlib import Path
from typing import Any

import pytest

testclient = pytest.importorskip("starlette.testclient")  # the ui extra

import durable
from durable.ui import is_loopback
from durable.ui._app import COOKIE, Inspector, create_app
from durable.ui._model import timeline
from durable.ui._pages import e, run_href
from tests.ui import app


def client_of(app_: Any) -> Any:
    """A test client that names the server as a browser on this machine does."""
    return testclient.TestClient(app_, base_url="http://127.0.0.1:8787")


@pytest.fixture
def world(tmp_path: Path) -> durable.World:
    w = durable.local_world(tmp_path / "data")

    async def seed() -> None:
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(app.approval, "x", world=w, run_id="a<b>")

    asyncio.run(seed())
    return w


def test_loopback_addresses_are_told_apart() -> None:
    """127.0.0.0/8, ::1 and localhost are loopback; anything else is not."""
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.org")


def test_beyond_loopback_reading_needs_the_token(world: durable.World) -> None:
    """A private inspector answers 401 without the token, and serves the page once it is given."""
    client = client_of(create_app(Inspector(world, "s3cret", {}, private=True)))
    assert client.get("/").status_code == 401
    assert client.get("/runs/x").status_code == 401
    got = client.get("/?token=s3cret", follow_redirects=False)
    assert got.status_code == 303 and got.headers["location"] == "/"
    assert COOKIE in got.cookies
    client.cookies.clear()
    client.cookies.set(COOKIE, "s3cret")
    assert client.get("/").status_code == 200
    client.cookies.clear()
    client.cookies.set(COOKIE, "wrong")
    assert client.get("/").status_code == 401


def test_on_loopback_reading_is_open_and_actions_still_need_the_token(world: durable.World) -> None:
    """Loopback pages read without the token; a POST without it, or with a wrong one, is refused."""
    client = client_of(create_app(Inspector(world, "s3cret", {})))
    page = client.get(run_href("a<b>"))
    assert page.status_code == 200
    assert "a&lt;b&gt;" in page.text and "<b>" not in page.text.split("<main>", 1)[1].split("</h1>")[0]
    assert client.post("/action/cancel", data={"id": "a<b>"}).status_code == 403
    assert client.post("/action/cancel", data={"id": "a<b>", "token": "nope"}).status_code == 403
    confirm = client.get("/confirm/cancel", params={"id": "a<b>"})
    assert 'name="token"' not in confirm.text  # a page opened without the token cannot carry it


def test_escape_covers_text_and_attributes() -> None:
    """Markup characters and both quotes are escaped; run links quote every reserved character."""
    assert e("<a href=\"x\" onclick='y'>&") == "&lt;a href=&quot;x&quot; onclick=&#x27;y&#x27;&gt;&amp;"
    assert run_href('a/b?c#d"') == "/runs/a%2Fb%3Fc%23d%22"


def test_the_timeline_marks_calls_before_a_resume_as_replayed() -> None:
    """Calls recorded before an interrupt.resumed are replayed; the ones after executed."""
    events = [
        {"seq": 1, "type": "run.started"},
        {"seq": 2, "type": "step.completed", "path": "draft", "attempt": 1},
        {"seq": 3, "type": "interrupt", "path": "interrupt#1", "value": "q"},
        {"seq": 4, "type": "run.interrupted", "path": "interrupt#1"},
        {"seq": 5, "type": "interrupt.resumed", "path": "interrupt#1", "value": "yes"},
        {"seq": 6, "type": "effect.intent", "key": "tool:publish#2", "kind": "tool", "name": "publish"},
        {"seq": 7, "type": "effect.receipt", "key": "tool:publish#2", "outcome": "ok"},
    ]
    items, resumed_at = timeline(events)
    assert resumed_at == 5
    assert [(i.key, i.state, i.replayed) for i in items] == [
        ("draft", "completed", True),
        ("interrupt#1", "answered", False),
        ("tool:publish#2", "confirmed", False),
    ]


def test_an_enqueued_run_is_waiting_in_the_list_and_counted_on_its_queue(world: durable.World) -> None:
    """A queued run nobody claimed yet shows as waiting, and the queues page counts it."""
    durable.start_workflow(app.ticking, 1, world=world, run_id="queued-1", queue=durable.Queue("slow"))
    client = client_of(create_app(Inspector(world, "s3cret", {})))
    listing = client.get("/", params={"status": "waiting"})
    assert 'data-run-id="queued-1"' in listing.text and 'data-status="waiting"' in listing.text
    assert 'data-run-id="a&lt;b&gt;"' not in listing.text  # filtered out: it is interrupted
    runtime = client.get("/runtime")
    assert "<td>slow</td><td>enqueued: 1</td>" in runtime.text
    page = client.get(run_href("queued-1"))
    assert page.status_code == 200 and 'data-status="waiting"' in page.text


def test_fork_with_the_token_starts_a_new_run_from_the_checkpoint(world: durable.World) -> None:
    """A confirmed fork creates a run that records its parent and checkpoint, and the page goes there."""
    client = client_of(create_app(Inspector(world, "s3cret", {})))
    seq = world.events("a<b>")[1].seq  # the step's commit
    got = client.post(
        "/action/fork", data={"id": "a<b>", "checkpoint": str(seq), "token": "s3cret"}, follow_redirects=False
    )
    assert got.status_code == 303
    new_id = got.headers["location"].split("/runs/", 1)[1].split("?", 1)[0]
    forked = [i for i in world.runs() if i.run_id not in ("a<b>",)]
    assert [i.run_id for i in forked] == [new_id]
    started = world.events(new_id)[0]
    assert started.fork_of == "a<b>" and started.fork_seq == seq  # type: ignore[union-attr]


def test_resume_with_the_token_reopens_a_failed_run(tmp_path: Path) -> None:
    """A confirmed resume of a failed run asks the runtime to retry it (its control record says so)."""
    from durable.runtime._driver import control_of

    w = durable.local_world(tmp_path / "data")

    async def seed() -> None:
        with contextlib.suppress(ValueError):
            await durable.run_workflow(app.failing, 1, world=w, run_id="broke")

    asyncio.run(seed())
    client = client_of(create_app(Inspector(w, "s3cret", {})))
    got = client.post("/action/resume", data={"id": "broke", "token": "s3cret"}, follow_redirects=False)
    assert got.status_code == 303 and "resume+requested" in got.headers["location"]
    rec = control_of(w).get("broke")
    assert rec is not None and rec.resume == "failed"
    w.close()


def test_answer_without_a_known_workflow_is_recorded_and_left_to_a_worker(world: durable.World) -> None:
    """The answer is written after the interrupt, with who gave it, and the run waits for a worker."""
    client = client_of(create_app(Inspector(world, "s3cret", {})))
    got = client.post(
        "/action/answer",
        data={"id": "a<b>", "path": "interrupt#1", "answer": '"yes"', "token": "s3cret"},
        follow_redirects=False,
    )
    assert got.status_code == 303 and "little+worker" in got.headers["location"]
    answered, decided = world.events("a<b>")[-2:]
    assert answered.type == "interrupt.resumed" and answered.value == "yes"  # type: ignore[union-attr]
    assert decided.type == "run.resolved" and decided.decision == "answer"  # type: ignore[union-attr]
    assert decided.by.startswith("inspector")  # type: ignore[union-attr]
    info = world.log.info("a<b>")
    assert info is not None and info.status == "running"
    again = client.post(
        "/action/answer",
        data={"id": "a<b>", "path": "interrupt#1", "answer": '"no"', "token": "s3cret"},
        follow_redirects=False,
    )
    assert again.status_code == 409  # it waits no more


def test_a_bad_answer_is_refused_with_what_to_write(world: durable.World) -> None:
    """An answer that is not JSON is refused (409) and nothing is written."""
    client = client_of(create_app(Inspector(world, "s3cret", {})))
    before = len(world.events("a<b>"))
    got = client.post(
        "/action/answer", data={"id": "a<b>", "path": "interrupt#1", "answer": "yes", "token": "s3cret"}
    )
    assert got.status_code == 409 and "not valid JSON" in got.text
    assert len(world.events("a<b>")) == before


def test_on_loopback_a_rebound_host_name_is_refused(world: durable.World) -> None:
    """A request whose Host is not a loopback name (DNS rebinding) is refused; loopback names are served."""
    client = testclient.TestClient(create_app(Inspector(world, "s3cret", {})), base_url="http://evil.example")
    assert client.get("/").status_code == 403
    for base in ("http://localhost:8787", "http://127.0.0.1:8787", "http://[::1]:8787"):
        assert (
            testclient.TestClient(create_app(Inspector(world, "s3cret", {})), base_url=base)
            .get("/")
            .status_code
            == 200
        )


def test_a_run_s_page_lists_the_messages_it_has_not_received(world: durable.World) -> None:
    """Messages sent to a run and not consumed yet are shown, escaped, with their topic."""
    client = client_of(create_app(Inspector(world, "s3cret", {}, private=False)))
    assert "Messages waiting" not in client.get(run_href("a<b>")).text
    asyncio.run(durable.send("a<b>", {"note": "<i>hi</i>"}, topic="chat", world=world))
    page = client.get(run_href("a<b>")).text
    assert "Messages waiting" in page
    assert "chat" in page
    assert "&lt;i&gt;hi&lt;/i&gt;" in page
    assert "<i>hi</i>" not in page


def test_the_timeline_sums_each_call_s_recorded_durations() -> None:
    """``ms`` of every attempt's outcome adds up; a call whose log says nothing has no duration."""
    events = [
        {"type": "step.completed", "seq": 1, "path": "a", "ms": 2.5},
        {"type": "effect.intent", "seq": 2, "key": "tool:t#0", "name": "t", "kind": "tool"},
        {"type": "effect.receipt", "seq": 3, "key": "tool:t#0", "outcome": "error", "ms": 1.0},
        {"type": "effect.intent", "seq": 4, "key": "tool:t#0", "name": "t", "kind": "tool"},
        {"type": "effect.receipt", "seq": 5, "key": "tool:t#0", "outcome": "ok", "ms": 4.0},
        {"type": "step.completed", "seq": 6, "path": "old"},
    ]
    items, _ = timeline(events)
    assert [(it.key, it.ms) for it in items] == [("a", 2.5), ("tool:t#0", 5.0), ("old", None)]


def test_a_run_records_how_long_each_attempt_took(world: durable.World) -> None:
    """Steps and tools of a new run carry ``ms``; the run page shows them."""
    events = [e for e in world.events("a<b>") if e.type in ("step.completed", "effect.receipt")]
    assert events and all(isinstance(getattr(e, "ms", None), float) and e.ms >= 0 for e in events)
    page = client_of(create_app(Inspector(world, "s3cret", {}, private=False))).get(run_href("a<b>")).text
    assert " ms</span>" in page


def test_the_timeline_and_raw_events_show_when_each_event_was_committed(world: durable.World) -> None:
    """Every call says when it was committed after the run began; every raw event its ISO time."""
    events = world.events("a<b>")
    page = client_of(create_app(Inspector(world, "s3cret", {}, private=False))).get(run_href("a<b>")).text
    stamps = re.findall(r'<time datetime="([^"]+)"', page)
    items, _ = timeline([ev.model_dump(mode="json") for ev in events])
    assert len(stamps) == len(items) > 0
    at = {ev.seq: ev.at for ev in events}
    for it, stamp in zip(items, stamps, strict=True):
        written = at[it.last_seq]
        assert written is not None
        assert datetime.datetime.fromisoformat(stamp).timestamp() == pytest.approx(written, abs=0.001)
    raw = page.split('class="events"', 1)[1]
    for ev in events:
        assert ev.at is not None
        shown = datetime.datetime.fromtimestamp(ev.at, tz=datetime.UTC).isoformat(timespec="milliseconds")
        assert f"<td>{ev.seq}</td><td>{shown}</td>" in raw
