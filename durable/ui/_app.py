"""The inspector's web app (Starlette): pages, live updates, token-guarded actions.

The token is a random secret made when the server starts and printed in its
address (``?token=...``). Opening that address once sets it as a cookie
(``HttpOnly``, ``SameSite=Strict``), so the pages after it carry no secret in
their links. Every action is a POST that must carry the token in its form
(the confirmation page puts it there only for a browser that holds the
cookie): a page opened without the token can read on loopback, never act.
Bound beyond loopback, reading needs the token too. What every request
passes first is the guard (``_guard``).

Each endpoint is a module-level function that finds the inspector's state
(``Inspector``: the world, the token, the workflows it may drive) on its
app (``inspector_of``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..engine import WorldCore
from ..errors import CodecError, DurableError, KeyMismatchError, RunNotFoundError
from . import _actions, _compare_page, _model, _pages, _run_model, _run_page
from ._guard import Guard, refused
from ._state import COOKIE, Inspector, inspector_of

__all__ = ["COOKIE", "Inspector", "create_app"]

STATIC = Path(__file__).parent / "static"
LIVE_INTERVAL = 0.5
"""Seconds between two looks at the data directory while a page listens for changes."""


def create_app(inspector: Inspector) -> Starlette:
    """The Starlette app of ``inspector``: its routes behind the guard, its state on ``app.state``."""
    app = Starlette(
        routes=[
            Route("/", runs),
            Route("/runs/{run_id:path}", run),
            Route("/compare", compare),
            Route("/value", value),
            Route("/runtime", runtime),
            Route("/metrics", metrics),
            Route("/confirm/{action}", confirm),
            Route("/action/{action}", act, methods=["POST"]),
            Route("/live", live),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(Guard)],
    )
    app.state.inspector = inspector
    return app


def _sealed(exc: CodecError) -> str:
    """The page for values that do not open: under a key the inspector lacks, or damaged."""
    first = str(exc).splitlines()[0]
    if not isinstance(exc, KeyMismatchError):
        return _pages.message_page("values do not decrypt", first)
    return _pages.message_page(
        "values sealed",
        "These values are encrypted under a key this inspector does not hold, so they stay sealed: "
        f"{first} Start little ui with LITTLE_KEY (or LITTLE_KEY_FILE) set to that key.",
    )


def _unreadable(exc: DurableError) -> HTMLResponse:
    """The page for a run that cannot be shown: unknown (404), sealed (403) or unreadable (409)."""
    if isinstance(exc, RunNotFoundError):
        return HTMLResponse(_pages.message_page("no such run", str(exc)), status_code=404)
    if isinstance(exc, CodecError):  # KeyMismatchError included
        return HTMLResponse(_sealed(exc), status_code=403)
    # A log this code cannot read (a newer format, a damaged row).
    return HTMLResponse(_pages.message_page("cannot read the run", str(exc).splitlines()[0]), 409)


async def runs(request: Request) -> Response:
    """The run list (``?fragment=1``: its live part only)."""
    world = inspector_of(request).world
    q = request.query_params
    status, workflow, search = q.get("status") or None, q.get("workflow") or None, q.get("q") or None
    offset = _offset(q.get("offset"))
    rows, older = _model.list_runs(world, status=status, workflow=workflow, search=search, offset=offset)
    if q.get("fragment"):
        return HTMLResponse(_list_fragment(rows))
    workflows = sorted(
        {i.workflow for i in world.runs(limit=_model.PAGE)} | ({workflow} if workflow else set())
    )
    filters = _pages.runs_filters(status, workflow, search, workflows)
    more = _older_href(q, offset + _model.PAGE) if older else None
    return HTMLResponse(
        _pages.runs_page(rows, filters, live="/live?view=list", flash=q.get("flash"), older=more)
    )


def _offset(text: str | None) -> int:
    """The run list's ``?offset=`` (runs skipped, newest first); anything else is the first page."""
    return int(text) if text and text.isdigit() else 0


def _older_href(q: Any, offset: int) -> str:
    """The address of the run list's next older page, with the same filters."""
    kept = {k: v for k, v in q.items() if k in ("status", "workflow", "q") and v}
    return "/?" + urlencode({**kept, "offset": offset})


async def run(request: Request) -> Response:
    """A run's page: its facts and its last calls (``?calls=N``; ``?fragment=1``: the live part only)."""
    rid = request.path_params["run_id"]
    try:
        d = _run_model.run_detail(inspector_of(request).world, rid, _calls(request))
    except DurableError as exc:
        return _unreadable(exc)
    if request.query_params.get("fragment"):
        return HTMLResponse(_run_page.run_body(d))
    live = "/live?" + urlencode({"view": "run", "id": rid})
    return HTMLResponse(_run_page.run_page(d, live=live, flash=request.query_params.get("flash")))


def _calls(request: Request) -> int:
    """How many of a run's last calls its page shows (``?calls=N``, within 1 and ``MOST_CALLS``)."""
    asked = request.query_params.get("calls", "")
    n = int(asked) if asked.isdigit() else _run_model.CALLS
    return min(max(n, 1), _run_model.MOST_CALLS)


async def compare(request: Request) -> Response:
    """Two runs side by side (``?a=&b=``), or the form that asks for them."""
    q = request.query_params
    a, b = (q.get("a") or "").strip(), (q.get("b") or "").strip()
    if not a or not b:
        return HTMLResponse(_compare_page.compare_form(a, b))
    try:
        d = _model.compare_runs(inspector_of(request).world, a, b)
    except RunNotFoundError as exc:
        return HTMLResponse(_compare_page.compare_form(a, b, str(exc).splitlines()[0]), status_code=404)
    except DurableError as exc:
        return _unreadable(exc)
    return HTMLResponse(_compare_page.compare_page(d, changed_only=bool(q.get("changed"))))


async def value(request: Request) -> Response:
    """A call's whole output or input, as JSON."""
    rid, path = request.query_params.get("run", ""), request.query_params.get("path", "")
    part = "input" if request.query_params.get("part") == "input" else "output"
    try:
        found, data = _model.whole_value(inspector_of(request).world, rid, path, part)
    except DurableError as exc:
        return _unreadable(exc)
    if not found:
        older = " whose input the log records (logs before format 8 keep its hash)" if part == "input" else ""
        return HTMLResponse(
            _pages.message_page("no such call", f"run {rid} has no call at {path!r}{older}"), 404
        )
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    # Served as JSON, never as a page (the guard adds nosniff): a value cannot become markup or script.
    return Response(text, media_type="application/json")


async def runtime(request: Request) -> Response:
    """Queues and the drivers that hold claims (``?fragment=1``: the live part only)."""
    page = _pages.runtime_page(_model.runtime_view(inspector_of(request).world))
    if request.query_params.get("fragment"):
        start = page.index('<div id="live">') + len('<div id="live">')
        return HTMLResponse(page[start : page.rindex("</div></main>")])
    return HTMLResponse(page)


async def metrics(request: Request) -> Response:
    """The world's Prometheus exposition."""
    try:
        from ._prometheus import exposition
    except ImportError:  # pragma: no cover - prometheus_client ships with the ui extra
        return Response("/metrics needs prometheus-client (the ui extra)\n", 501, media_type="text/plain")
    body, content_type = exposition(inspector_of(request).world)
    return Response(body, media_type=content_type)


def _question(action: str, q: dict[str, str]) -> tuple[dict[str, str], str]:
    """The fields an action's form posts, and the question its confirmation asks."""
    rid = q.get("id", "")
    fields = {"id": rid}
    if action == "cancel":
        return fields, f"Cancel run {rid}? It stops at its next durable call; resume continues it."
    if action == "resume":
        fields |= {"drift": q.get("drift", ""), "budget": q.get("budget", "")}
        question = f"Resume run {rid}? It continues from its log." + (
            f" The drift under {q.get('drift')} is accepted." if q.get("drift") else ""
        )
        return fields, question + (f" Its budget becomes {q.get('budget')}." if q.get("budget") else "")
    if action == "resolve":
        did = q.get("happened") == "1"
        fields |= {"key": q.get("key", ""), "happened": "1" if did else "0", "result": q.get("result", "")}
        if did:
            return fields, (
                f"Record that the call {q.get('key', '')} of run {rid} happened, with result "
                f"{q.get('result', '')}? The run goes on as if the tool had returned it."
            )
        return fields, (
            f"Record that the call {q.get('key', '')} of run {rid} did not happen? "
            "It is called again, with the same idempotency key."
        )
    if action == "answer":
        fields |= {"path": q.get("path", ""), "answer": q.get("answer", "")}
        return fields, f"Answer the interrupt of run {rid} at {q.get('path', '')} with {q.get('answer', '')}?"
    if action == "fork":
        fields |= {"checkpoint": q.get("checkpoint", "")}
        return fields, f"Fork a new run from run {rid} at seq {q.get('checkpoint', '')}?"
    return fields, f"{action} run {rid}?"


async def confirm(request: Request) -> Response:
    """An action's confirmation: what will happen, and the button that posts it (with the token, if held)."""
    inspector = inspector_of(request)
    action = request.path_params["action"]
    if action not in _actions.ACTIONS:
        return HTMLResponse(_pages.message_page("no such action", action), status_code=404)
    fields, question = _question(action, dict(request.query_params))
    token = inspector.token if inspector.holds_token(request) else None
    return HTMLResponse(_pages.confirm_page(action, fields["id"], fields, token, question))


async def _perform(inspector: Inspector, action: str, form: dict[str, str]) -> tuple[str, str]:
    """Do a confirmed action; return the run to show next and a sentence saying what happened."""
    world, specs, rid = inspector.world, inspector.specs, form.get("id", "")
    if action == "cancel":
        return rid, await _actions.cancel(world, rid)
    if action == "resume":
        return rid, await _actions.resume(world, rid, specs, form.get("drift", ""), form.get("budget", ""))
    if action == "resolve":
        key, happened, result = form.get("key", ""), form.get("happened", ""), form.get("result", "")
        return rid, await _actions.resolve(world, rid, key, happened, result, specs)
    if action == "answer":
        return rid, await _actions.answer(world, rid, form.get("path", ""), form.get("answer", ""), specs)
    return await _actions.fork_from(world, rid, form.get("checkpoint", ""), specs)


async def act(request: Request) -> Response:
    """A confirmed action, posted with the token; then back to the run's page with what happened."""
    inspector = inspector_of(request)
    action = request.path_params["action"]
    body = parse_qs((await request.body()).decode(), keep_blank_values=True)
    form = {k: v[-1] for k, v in body.items()}
    if not inspector.is_token(form.get("token", "")):
        return refused("This action needs the inspector's token: open the address little ui printed.")
    if action not in _actions.ACTIONS:
        return HTMLResponse(_pages.message_page("no such action", action), status_code=404)
    rid = form.get("id", "")
    try:
        rid, text = await _perform(inspector, action, form)
    except (_actions.ActionError, DurableError) as exc:
        return HTMLResponse(
            _pages.message_page(f"{action} failed", str(exc).splitlines()[0], _pages.run_href(rid)),
            status_code=409,
        )
    return RedirectResponse(_pages.run_href(rid) + "?" + urlencode({"flash": text}), status_code=303)


def _fingerprint(world: WorldCore, view: str, run_id: str) -> str:
    """What a page of ``view`` shows changes when this does."""
    if view == "run":
        return _run_model.run_fingerprint(world, run_id)
    if view == "runtime":
        return json.dumps(_model.runtime_view(world), default=str)
    return _model.list_fingerprint(world)


async def live(request: Request) -> Response:
    """Server-sent events: ``change`` whenever what the page of ``?view=`` (and ``&id=``) shows changed."""
    world = inspector_of(request).world
    view = request.query_params.get("view", "list")
    rid = request.query_params.get("id", "")

    async def stream() -> AsyncIterator[str]:
        last: str | None = None
        yield "retry: 1000\n\n"
        while True:
            now: str | None
            try:
                now = _fingerprint(world, view, rid)
            except Exception:  # a busy or closing store: look again next round
                now = last
            if now != last:
                # The first one too: the page may have been rendered before a change that
                # happened while this stream was connecting.
                yield f"event: change\ndata: {json.dumps(now)}\n\n"
                last = now
            else:
                yield ": idle\n\n"  # lets the server notice a client that left
            if await request.is_disconnected():
                return
            await asyncio.sleep(LIVE_INTERVAL)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


def _list_fragment(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["ui_status"]] = counts.get(r["ui_status"], 0) + 1
    summary = " ".join(f"{_pages.badge(s)} {counts[s]}" for s in _model.STATUSES if s in counts)
    return (f'<p class="summary">{summary}</p>' if summary else "") + _pages.runs_table(rows)
