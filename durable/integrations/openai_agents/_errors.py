"""A model call's ``openai`` error kept with what the SDK's retry decision reads, and rebuilt on a replay.

The engine records a failed call's type, message and plain arguments, and a
replay rebuilds the type from them where it can. The ``openai`` client's
errors cannot be rebuilt that way (they hold an HTTP request or response),
so a replay would give ``StepFailedError`` without a status code, and the
SDK's retry policy (``retry_policies.http_status([429])``,
``provider_suggested()``, ``retry_after()``) would decide otherwise than it
did live: the run would fail on a resume where it had retried and gone on.

Inside the model call an ``openai.APIError`` travels as ``ProviderError``,
whose arguments are plain JSON: the error's type, message, status code, the
response headers the retry decision reads, and its body. The wrapper raises
the live error itself in the first execution, and on a replay the error
rebuilt as its own ``openai`` type with the same status, headers and body.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import openai

RETRY_HEADERS = ("retry-after", "retry-after-ms", "x-should-retry", "x-request-id")
"""The response headers kept: what the SDK's retry decision and ``request_id`` read (nothing else)."""

_URL = "https://api.openai.com/v1/responses"
"""The request URL a rebuilt error names (the live error's is not kept)."""


class ProviderError(Exception):
    """An ``openai.APIError`` of a model call, as the log keeps it (plain JSON arguments).

    Args:
        type_name: The qualified name of the error's type.
        message: Its message.
        facts: JSON of its status code, kept headers and body.
    """

    def __init__(self, type_name: str, message: str, facts: str) -> None:
        super().__init__(type_name, message, facts)
        self.type_name = type_name
        self.message = message
        self.facts = facts
        self.live: BaseException | None = None

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"

    @classmethod
    def of(cls, exc: openai.APIError) -> ProviderError:
        """``exc`` kept as JSON; the live error rides along for the first execution."""
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        facts = {
            "status_code": getattr(exc, "status_code", None),
            "headers": {h: headers[h] for h in RETRY_HEADERS if h in headers},
            "body": exc.body if _plain(exc.body) else None,
        }
        t = type(exc)
        kept = cls(f"{t.__module__}.{t.__qualname__}", exc.message, json.dumps(facts))
        kept.live = exc
        return kept

    def error(self) -> BaseException:
        """The live error in the first execution; on a replay, the recorded one rebuilt as its type."""
        if self.live is not None:
            return self.live
        facts = json.loads(self.facts)
        module, _, qual = self.type_name.rpartition(".")
        cls = getattr(sys.modules.get(module), qual, None)  # only a type already imported
        if not (isinstance(cls, type) and issubclass(cls, openai.APIError)):
            return self
        http = http_library()
        request = http.Request("POST", _URL)
        status = facts.get("status_code")
        try:
            if issubclass(cls, openai.APITimeoutError):
                return cls(request=request)
            if issubclass(cls, openai.APIConnectionError):
                return cls(message=self.message, request=request)
            response = http.Response(status or 500, headers=facts.get("headers") or {}, request=request)
            if issubclass(cls, openai.APIStatusError):
                return cls(self.message, response=response, body=facts.get("body"))
            if issubclass(cls, openai.APIResponseValidationError):
                return cls(response, facts.get("body"), message=self.message)
            return cls(self.message, request, body=facts.get("body"))
        except Exception:  # a later release's signature: the recorded error as it is
            return self


def _plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def http_library() -> Any:
    """The HTTP library the installed ``openai`` builds its errors with (``httpx2``, or ``httpx`` before)."""
    exceptions = sys.modules["openai._exceptions"]
    return getattr(exceptions, "httpx2", None) or exceptions.httpx
