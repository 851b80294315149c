"""The inspector's guard: what every request passes before it reaches a page (an ASGI middleware).

On loopback a request must name this machine in its ``Host`` header;
bound beyond loopback, reading needs the token. The printed address
(``?token=...``) sets the token as a cookie and drops it from the address.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from . import _pages
from ._state import COOKIE, Inspector, inspector_of


def refused(text: str, status: int = 403) -> HTMLResponse:
    """A page that refuses the request in one sentence."""
    return HTMLResponse(_pages.message_page("refused", text), status_code=status)


def _loopback_host(request: Request) -> bool:
    """Whether the request names this machine in its Host header (not a rebound domain name)."""
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
    return name in ("127.0.0.1", "localhost", "[::1]") or name.startswith("127.")


def check(inspector: Inspector, request: Request) -> Response | None:
    """The response that stops ``request`` here, or ``None`` to let it through."""
    if not inspector.private and not _loopback_host(request):
        # A page of another site that rebinds its name to 127.0.0.1 must not read runs.
        return refused("This inspector answers only to 127.0.0.1, localhost or [::1].")
    given = request.query_params.get("token")
    if given is not None and inspector.is_token(given):
        # The printed address: keep the token as a cookie and drop it from the address bar.
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        resp = RedirectResponse(target, status_code=303)
        resp.set_cookie(COOKIE, inspector.token, httponly=True, samesite="strict")
        return resp
    if inspector.private and not inspector.holds_token(request):
        return refused(
            "This inspector listens beyond loopback, so reading needs the token too: "
            "open the address little ui printed.",
            401,
        )
    return None


class Guard:
    """The middleware that puts every HTTP request through ``check``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        stop = check(inspector_of(request), request)
        if stop is not None:
            await stop(scope, receive, send)
            return
        await self.app(scope, receive, send)
