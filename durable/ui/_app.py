"""The inspector's web app (Starlette): pages, live updates, token-guarded actions.

The token is a random secret made when the server starts and printed in its
address (``?token=...``). Opening that address once sets it as a cookie
(``HttpOnly``, ``SameSite=Strict``), so the pages after it carry no secret in
their links. Every action is a POST that must carry the token in its form
(the confirmation page puts it there only for a browser that holds the
cookie): a page opened without the token can read on loopback, never act.
Bound beyond loopback, reading needs the token too. On loopback, a request
whose Host header is not a loopback name is refused, so a web page whose
domain is rebound to 127.0.0.1 cannot read runs either.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..engine import Spec, WorldCore
from ..errors import CodecError, DurableError, KeyMismatchError, RunNotFoundError
from . import _actions, _compare_page, _model, _pages, _run_page

COOKIE = "little_ui_token"
STATIC = Path(__file__).parent / "static"
LIVE_INTERVAL = 0.5
"""Seconds between two looks at the data directory while a page listens for changes."""


class Inspector:
    """The state of one inspector: the world it reads, its token, what it may drive.

    Args:
        world: The world to inspect.
        token: The secret that guards actions (and reading, when ``private``).
        specs: Workflows this process may drive after an answer, a resume or a fork.
        private: Whether reading needs the token too (bound beyond loopback).
    """

    def __init__(self, world: WorldCore, token: str, specs: dict[str, Spec], *, private: bool = False):
        self.world = world
        self.token = token
        self.specs = specs
        self.private = private

    def holds_token(self, request: Request) -> bool:
        """Whether the request carries the token (cookie, ``?token=`` or ``Authorization: Bearer``)."""
        bearer = request.headers.get("authorization", "")
        bearer = bearer[7:].strip() if bearer[:7].lower() == "bearer " else ""
        given = request.cookies.get(COOKIE) or request.query_params.get("token") or bearer
        return hmac.compare_digest(given.encode(), self.token.encode())


def _loopback_host(request: Request) -> bool:
    """Whether the request names this machine in its Host header (not a rebound domain name)."""
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
    return name in ("127.0.0.1", "localhost", "[::1]") or name.startswith("127.")


def _refused(text: str, status: int = 403) -> HTMLResponse:
    return HTMLResponse(_pages.message_page("refused", text), status_code=status)


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


def _unreadable(exc: DurableError) -> str:
    return _pages.message_page("cannot read the run", str(exc).splitlines()[0])


def create_app(inspector: Inspector) -> Starlette:
    """The Starlette app of ``inspector``."""
    world = inspector.world

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            if not inspector.private and not _loopback_host(request):
                # A page of another site that rebinds its name to 127.0.0.1 must not read runs.
                return _refused("This inspector answers only to 127.0.0.1, localhost or [::1].", 403)
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given.encode(), inspector.token.encode()):
                # The printed address: keep the token as a cookie and drop it from the address bar.
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
                resp: Response = RedirectResponse(target, status_code=303)
                resp.set_cookie(COOKIE, inspector.token, httponly=True, samesite="strict")
                return resp
            if inspector.private and not inspector.holds_token(request):
                return _refused(
                    "This inspector listens beyond loopback, so reading needs the token too: "
                    "open the address little ui printed.",
                    401,
                )
            return await handler(request)

        return wrapped

    async def runs(request: Request) -> Response:
        q = request.query_params
        status, workflow, search = q.get("status") or None, q.get("workflow") or None, q.get("q") or None
        rows = _model.list_runs(world, status=status, workflow=workflow, search=search)
        workflows = sorted({r["workflow"] for r in _model.list_runs(world)})
        if q.get("fragment"):
            return HTMLResponse(_list_fragment(rows))
        filters = _pages.runs_filters(status, workflow, search, workflows)
        return HTMLResponse(_pages.runs_page(rows, filters, live="/live?view=list", flash=q.get("flash")))

    async def run(request: Request) -> Response:
        rid = request.path_params["run_id"]
        try:
            d = _model.run_detail(world, rid)
        except RunNotFoundError as exc:
            return HTMLResponse(_pages.message_page("no such run", str(exc)), status_code=404)
        except CodecError as exc:  # KeyMismatchError included
            return HTMLResponse(_sealed(exc), status_code=403)
        except DurableError as exc:  # a log this code cannot read (a newer format, a damaged row)
            return HTMLResponse(_unreadable(exc), status_code=409)
        if request.query_params.get("fragment"):
            return HTMLResponse(_run_page.run_body(d))
        live = "/live?" + urlencode({"view": "run", "id": rid})
        return HTMLResponse(_run_page.run_page(d, live=live, flash=request.query_params.get("flash")))

    async def compare(request: Request) -> Response:
        q = request.query_params
        a, b = (q.get("a") or "").strip(), (q.get("b") or "").strip()
        if not a or not b:
            return HTMLResponse(_compare_page.compare_form(a, b))
        try:
            d = _model.compare_runs(world, a, b)
        except RunNotFoundError as exc:
            return HTMLResponse(_compare_page.compare_form(a, b, str(exc).splitlines()[0]), status_code=404)
        except CodecError as exc:  # KeyMismatchError included
            return HTMLResponse(_sealed(exc), status_code=403)
        except DurableError as exc:  # a log this code cannot read (a newer format, a damaged row)
            return HTMLResponse(_unreadable(exc), status_code=409)
        return HTMLResponse(_compare_page.compare_page(d, changed_only=bool(q.get("changed"))))

    async def value(request: Request) -> Response:
        rid, path = request.query_params.get("run", ""), request.query_params.get("path", "")
        part = "input" if request.query_params.get("part") == "input" else "output"
        try:
            found, data = _model.whole_value(world, rid, path, part)
        except RunNotFoundError as exc:
            return HTMLResponse(_pages.message_page("no such run", str(exc)), status_code=404)
        except CodecError as exc:
            return HTMLResponse(_sealed(exc), status_code=403)
        except DurableError as exc:  # a log this code cannot read (a newer format, a damaged row)
            return HTMLResponse(_unreadable(exc), status_code=409)
        if not found:
            return HTMLResponse(
                _pages.message_page(
                    "no such call",
                    f"run {rid} has no call at {path!r}"
                    + (
                        " whose input the log records (logs before format 8 keep its hash)"
                        if part == "input"
                        else ""
                    ),
                ),
                404,
            )
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
        # Served as JSON, never as a page: a value from the log cannot become markup or script.
        return Response(text, media_type="application/json", headers={"X-Content-Type-Options": "nosniff"})

    async def runtime(request: Request) -> Response:
        page = _pages.runtime_page(_model.runtime_view(world))
        if request.query_params.get("fragment"):
            start = page.index('<div id="live">') + len('<div id="live">')
            return HTMLResponse(page[start : page.rindex("</div></main>")])
        return HTMLResponse(page)

    async def metrics(request: Request) -> Response:
        try:
            from ._prometheus import exposition
        except ImportError:  # pragma: no cover - prometheus_client ships with the ui extra
            return Response("/metrics needs prometheus-client (the ui extra)\n", 501, media_type="text/plain")
        body, content_type = exposition(world)
        return Response(body, media_type=content_type)

    async def confirm(request: Request) -> Response:
        action = request.path_params["action"]
        if action not in _actions.ACTIONS:
            return HTMLResponse(_pages.message_page("no such action", action), status_code=404)
        q = request.query_params
        rid = q.get("id", "")
        fields = {"id": rid}
        question = f"{action} run {rid}?"
        if action == "cancel":
            question = f"Cancel run {rid}? It stops at its next durable call; resume continues it."
        elif action == "resume":
            fields |= {"drift": q.get("drift", ""), "budget": q.get("budget", "")}
            question = f"Resume run {rid}? It continues from its log." + (
                f" The drift under {q.get('drift')} is accepted." if q.get("drift") else ""
            )
            if q.get("budget"):
                question += f" Its budget becomes {q.get('budget')}."
        elif action == "resolve":
            did = q.get("happened") == "1"
            fields |= {
                "key": q.get("key", ""),
                "happened": "1" if did else "0",
                "result": q.get("result", ""),
            }
            question = (
                f"Record that the call {q.get('key', '')} of run {rid} happened, with result "
                f"{q.get('result', '')}? The run goes on as if the tool had returned it."
                if did
                else f"Record that the call {q.get('key', '')} of run {rid} did not happen? "
                "It is called again, with the same idempotency key."
            )
        elif action == "answer":
            fields |= {"path": q.get("path", ""), "answer": q.get("answer", "")}
            question = f"Answer the interrupt of run {rid} at {q.get('path', '')} with {q.get('answer', '')}?"
        elif action == "fork":
            fields |= {"checkpoint": q.get("checkpoint", "")}
            question = f"Fork a new run from run {rid} at seq {q.get('checkpoint', '')}?"
        token = inspector.token if inspector.holds_token(request) else None
        return HTMLResponse(_pages.confirm_page(action, rid, fields, token, question))

    async def act(request: Request) -> Response:
        action = request.path_params["action"]
        form = {
            k: v[-1] for k, v in parse_qs((await request.body()).decode(), keep_blank_values=True).items()
        }
        given = form.get("token", "")
        if not given or not hmac.compare_digest(given.encode(), inspector.token.encode()):
            return _refused("This action needs the inspector's token: open the address little ui printed.")
        rid = form.get("id", "")
        try:
            if action == "cancel":
                text = await _actions.cancel(world, rid)
            elif action == "resume":
                text = await _actions.resume(
                    world, rid, inspector.specs, form.get("drift", ""), form.get("budget", "")
                )
            elif action == "resolve":
                text = await _actions.resolve(
                    world,
                    rid,
                    form.get("key", ""),
                    form.get("happened", ""),
                    form.get("result", ""),
                    inspector.specs,
                )
            elif action == "answer":
                text = await _actions.answer(
                    world, rid, form.get("path", ""), form.get("answer", ""), inspector.specs
                )
            elif action == "fork":
                rid, text = await _actions.fork_from(world, rid, form.get("checkpoint", ""), inspector.specs)
            else:
                return HTMLResponse(_pages.message_page("no such action", action), status_code=404)
        except (_actions.ActionError, DurableError) as exc:
            return HTMLResponse(
                _pages.message_page(f"{action} failed", str(exc).splitlines()[0], _pages.run_href(rid)),
                status_code=409,
            )
        return RedirectResponse(_pages.run_href(rid) + "?" + urlencode({"flash": text}), status_code=303)

    async def live(request: Request) -> Response:
        view = request.query_params.get("view", "list")
        rid = request.query_params.get("id", "")

        def fingerprint() -> str:
            if view == "run":
                return _model.run_fingerprint(world, rid)
            if view == "runtime":
                return json.dumps(_model.runtime_view(world), default=str)
            return _model.list_fingerprint(world)

        async def stream() -> AsyncIterator[str]:
            last: str | None = None
            yield "retry: 1000\n\n"
            while True:
                now: str | None
                try:
                    now = fingerprint()
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

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    routes = [
        Route("/", guarded(runs)),
        Route("/runs/{run_id:path}", guarded(run)),
        Route("/compare", guarded(compare)),
        Route("/value", guarded(value)),
        Route("/runtime", guarded(runtime)),
        Route("/metrics", guarded(metrics)),
        Route("/confirm/{action}", guarded(confirm)),
        Route("/action/{action}", guarded(act), methods=["POST"]),
        Route("/live", guarded(live)),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)


def _list_fragment(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["ui_status"]] = counts.get(r["ui_status"], 0) + 1
    summary = " ".join(f"{_pages.badge(s)} {counts[s]}" for s in _model.STATUSES if s in counts)
    return (f'<p class="summary">{summary}</p>' if summary else "") + _pages.runs_table(rows)
