"""The state of one inspector, kept on its app (``app.state.inspector``) and read by every endpoint."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field

from starlette.requests import Request

from ..engine import Spec, WorldCore

COOKIE = "little_ui_token"
"""The cookie that keeps the token once the printed address was opened."""


@dataclass
class Inspector:
    """The state of one inspector: the world it reads, its token, what it may drive.

    Args:
        world: The world to inspect.
        token: The secret that guards actions (and reading, when ``private``).
        specs: Workflows this process may drive after an answer, a resume or a fork.
        private: Whether reading needs the token too (bound beyond loopback).
    """

    world: WorldCore
    token: str
    specs: dict[str, Spec] = field(default_factory=dict)
    private: bool = False

    def is_token(self, given: str) -> bool:
        """Whether ``given`` is the token (compared in constant time)."""
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def holds_token(self, request: Request) -> bool:
        """Whether the request carries the token (cookie, ``?token=`` or ``Authorization: Bearer``)."""
        bearer = request.headers.get("authorization", "")
        bearer = bearer[7:].strip() if bearer[:7].lower() == "bearer " else ""
        return self.is_token(request.cookies.get(COOKIE) or request.query_params.get("token") or bearer)


def inspector_of(request: Request) -> Inspector:
    """The inspector whose app serves ``request``."""
    found = request.app.state.inspector
    assert isinstance(found, Inspector), "create_app puts the Inspector on app.state"
    return found
