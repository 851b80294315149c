"""``little ui``: a local web inspector over a data directory (extra ``ui``: starlette and uvicorn).

Pages: the run list, a run's page (its calls as a tree with what each
returned), the comparison of two runs (``/compare?a=&b=``), a call's whole
value (``/value``), and the queues and workers.

The server binds to 127.0.0.1 unless told otherwise and prints its address
with a random token; the token guards every action (cancel, resume, answer
an interrupt, fork from a checkpoint), and a server bound beyond loopback
asks for it before showing anything. Pages are rendered on the server; a
small script (shipped in the wheel, no CDN) swaps in fresh content when the
server says something changed.

Example:
    >>> from durable.ui import is_loopback
    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0")
    (True, False)
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
from collections.abc import Callable
from typing import Any

from ..engine import Spec, WorldCore

__all__ = ["Inspector", "bind", "create_app", "is_loopback", "new_token", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random token for one server."""
    return secrets.token_urlsafe(24)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port=0``: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def create_app(inspector: Any) -> Any:
    """The Starlette app of an ``Inspector`` (imports starlette on first use)."""
    from ._app import create_app as make

    return make(inspector)


def __getattr__(name: str) -> Any:
    if name == "Inspector":
        from ._app import Inspector

        return Inspector
    raise AttributeError(name)


def serve(
    world: WorldCore,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    token: str | None = None,
    specs: dict[str, Spec] | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the inspector until interrupted (Ctrl-C or SIGTERM).

    Args:
        world: The world to inspect.
        host: The address to bind; anything but loopback needs the token for reading too.
        port: The port (``0``: any free one).
        token: The token (a random one when ``None``).
        specs: Workflows the inspector may drive after an answer, resume or fork.
        announce: Called once with the address to open, token included.
    """
    import uvicorn

    from ..runtime import default_driver
    from ._app import Inspector, create_app

    tok = token or new_token()
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/?token={tok}"
    inspector = Inspector(world, tok, dict(specs or {}), private=not is_loopback(host))
    config = uvicorn.Config(
        create_app(inspector), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    announce(url)

    async def run() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            await default_driver(world).stop(grace=5.0)

    try:
        asyncio.run(run())
    finally:
        sock.close()
