"""The inspector's guard: what every request passes before it reaches a page (an ASGI middleware).

On loopback a request must name this machine in its ``Host`` header;
bound beyond loopback, reading needs the token. The printed address
(``?token=...``) sets the token as a cookie and drops it from the address.
A request that changes something (a POST) must come from the inspector's
own pages: a browser says where it was sent from (``Origin``,
``Sec-Fetch-Site``), and another origin is refused even with the token.
Every answer forbids being framed and allows only the inspector's own
scripts and styles (``HEADERS``).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import _pages
from ._state import COOKIE, Inspector, inspector_of

POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
"""The content security policy of every answer: the inspector's own files only, and no framing."""
HEADERS = [
    (b"content-security-policy", POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
"""Added to every answer: a page of another site cannot frame the inspector (where a click would act)."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def refused(text: str, status: int = 403) -> HTMLResponse:
    """A page that refuses the request in one sentence."""
    return HTMLResponse(_pages.message_page("refused", text), status_code=status)


def loopback_host(host: str) -> bool:
    """Whether a ``Host`` header names this machine: ``localhost`` or a loopback address (port or not).

    Parsed, not matched by prefix: ``127.evil.example`` or ``127.0.0.1.nip.io``
    are names a web page can rebind to 127.0.0.1, and are refused.
    """
    bracketed = host.startswith("[")
    if bracketed:  # an IPv6 address: [::1] or [::1]:8787
        name, bracket, port = host[1:].partition("]")
        if not bracket or (port and port[0] != ":"):
            return False
        port = port[1:]
    else:
        name, colon, port = host.partition(":")
        if colon and not port:
            return False
    if port and not port.isdigit():
        return False
    if not bracketed and name.lower() == "localhost":
        return True
    try:
        address = ipaddress.IPv6Address(name) if bracketed else ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return address.is_loopback


def check(inspector: Inspector, request: Request) -> Response | None:
    """The response that stops ``request`` here, or ``None`` to let it through."""
    if not inspector.private and not loopback_host(request.headers.get("host", "")):
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
    if request.method not in SAFE_METHODS:
        return _foreign(request)
    return None


def _foreign(request: Request) -> Response | None:
    """The refusal of a request that changes something and was sent from another origin, or ``None``.

    A browser names where a request comes from: ``Sec-Fetch-Site`` (``same-origin`` for the
    inspector's own pages) and ``Origin``, which must name the host the request was sent to.
    A client that sends neither (curl, a script) is not a browser a web page could drive.
    """
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None and site != "same-origin":
        where = f"Sec-Fetch-Site: {site}"
    elif origin is not None and not _same_origin(origin, request.headers.get("host", "")):
        where = f"Origin: {origin}"
    else:
        return None
    return refused(
        f"This action was posted from another site ({where}): the inspector acts only on "
        "the buttons of its own pages."
    )


def _same_origin(origin: str, host: str) -> bool:
    scheme, sep, rest = origin.partition("://")
    return bool(sep) and scheme in ("http", "https") and rest.lower() == host.lower()


class Guard:
    """The middleware that puts every HTTP request through ``check``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *HEADERS]}
            await send(message)

        request = Request(scope)
        stop = check(inspector_of(request), request)
        if stop is not None:
            await stop(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)
