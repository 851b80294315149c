"""What the inspector's guard lets through: the Host a request names, where a post comes from, framing."""

# ruff: noqa: E402  (the extra is checked with importorskip before the imports that need it)

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

testclient = pytest.importorskip("starlette.testclient")  # the ui extra

import durable
from durable.ui._app import Inspector, create_app
from durable.ui._pages import run_href
from tests.ui import app

REBOUND = ("127.evil.example", "127.0.0.1.nip.io", "127.0.0.1.evil.example:8787", "localhost.evil.example")
"""Host names a web page can rebind to 127.0.0.1: each starts like a loopback name and is not one."""
LOOPBACK = (
    "127.0.0.1",
    "127.0.0.1:8787",
    "127.0.0.2:8787",
    "localhost",
    "localhost:8787",
    "[::1]",
    "[::1]:8787",
)
"""Host headers that name this machine: localhost, [::1] and loopback addresses, with or without a port."""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[durable.World]:
    """A data directory with a run waiting for an answer (its page shows the answer's input)."""
    w = durable.local_world(tmp_path / "data")

    async def seed() -> None:
        with contextlib.suppress(durable.RunInterrupted):
            await durable.run_workflow(app.approval, "secret plans", world=w, run_id="waits")

    asyncio.run(seed())
    try:
        yield w
    finally:
        w.close()


def _client(world: durable.World, *, private: bool = False) -> Any:
    return testclient.TestClient(create_app(Inspector(world, "s3cret", {}, private=private)))


@pytest.mark.parametrize("host", REBOUND)
def test_on_loopback_a_rebound_name_that_starts_like_a_loopback_address_reads_nothing(
    world: durable.World, host: str
) -> None:
    """DNS rebinding: a name such as 127.evil.example is refused on every page, the run's too."""
    client = _client(world)
    for path in ("/", run_href("waits"), "/value?run=waits&path=", "/live?view=run&id=waits"):
        got = client.get(path, headers={"host": host})
        assert got.status_code == 403, (host, path)
        assert "secret plans" not in got.text
        assert "answers only to 127.0.0.1, localhost or [::1]" in got.text


@pytest.mark.parametrize("host", LOOPBACK)
def test_on_loopback_localhost_and_literal_loopback_addresses_are_served(
    world: durable.World, host: str
) -> None:
    """localhost, [::1] and any 127.0.0.0/8 address, with or without a port, read the run."""
    got = _client(world).get(run_href("waits"), headers={"host": host})
    assert got.status_code == 200, host
    assert "secret plans" in got.text


@pytest.mark.parametrize(
    "host", ["", "127.0.0.1:", "127.0.0.1:http", "[::1", "::1", "[::2]:8787", "0.0.0.0:8787"]
)
def test_on_loopback_a_host_header_that_is_not_a_loopback_address_is_refused(
    world: durable.World, host: str
) -> None:
    """No Host, a bad port, an unclosed bracket, a bare IPv6 address or another address: refused."""
    assert _client(world).get("/", headers={"host": host}).status_code == 403, host


@pytest.mark.parametrize("host", ["inspector.lan:8787", "192.168.1.20:8787", *REBOUND])
def test_beyond_loopback_any_host_reads_with_the_token_and_none_without(
    world: durable.World, host: str
) -> None:
    """Bound beyond loopback on purpose, the token guards reading whatever name the browser used."""
    client = _client(world, private=True)
    assert client.get(run_href("waits"), headers={"host": host}).status_code == 401
    got = client.get(run_href("waits"), headers={"host": host, "authorization": "Bearer s3cret"})
    assert got.status_code == 200 and "secret plans" in got.text


FOREIGN = (
    {"origin": "http://evil.example"},
    {"origin": "http://127.0.0.1:9999"},  # another port of this machine: same site, not the same origin
    {"origin": "null"},
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
    {"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
)
"""Where a post can say it comes from, other than the inspector's own pages."""


@pytest.mark.parametrize("sent_from", FOREIGN)
def test_a_post_from_another_origin_is_refused_even_with_the_token(
    world: durable.World, sent_from: dict[str, str]
) -> None:
    """A cancel posted with the right token from another origin is refused (403, one line) and not done."""
    client = _client(world)
    got = client.post(
        "/action/cancel",
        data={"id": "waits", "token": "s3cret"},
        headers={"host": "127.0.0.1:8787", **sent_from},
        follow_redirects=False,
    )
    assert got.status_code == 403
    assert "posted from another site" in got.text
    assert durable.runtime.run_status(world, "waits").status == "interrupted"


def test_a_post_from_the_inspector_s_own_page_is_done(world: durable.World) -> None:
    """The same cancel from the inspector's own origin (as a browser sends it) goes through."""
    got = _client(world).post(
        "/action/cancel",
        data={"id": "waits", "token": "s3cret"},
        headers={
            "host": "127.0.0.1:8787",
            "origin": "http://127.0.0.1:8787",
            "sec-fetch-site": "same-origin",
        },
        follow_redirects=False,
    )
    assert got.status_code == 303 and "cancel+requested" in got.headers["location"]
    assert durable.runtime.run_status(world, "waits").status == "cancelled"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        run_href("waits"),
        "/confirm/cancel?id=waits",
        "/compare",
        "/runtime",
        "/static/inspector.js",
        "/nowhere",
    ],
)
def test_every_answer_forbids_framing_and_allows_only_the_inspector_s_own_scripts(
    world: durable.World, path: str
) -> None:
    """Pages, assets, refusals and 404s alike carry frame-ancestors 'none', X-Frame-Options and the CSP."""
    for host in ("127.0.0.1:8787", "evil.example"):
        got = _client(world).get(path, headers={"host": host})
        policy = dict(
            part.strip().split(" ", 1)
            for part in got.headers["content-security-policy"].split(";")
            if part.strip()
        )
        assert policy["frame-ancestors"] == "'none'"
        assert policy["default-src"] == "'none'"
        assert policy["script-src"] == policy["style-src"] == "'self'"
        assert got.headers["x-frame-options"] == "DENY"


def test_no_page_holds_inline_script_or_style(world: durable.World) -> None:
    """What the policy would block is not on the pages: no inline script, style element or attribute."""
    client = _client(world)
    for path in ("/", run_href("waits"), "/confirm/cancel?id=waits", "/compare", "/runtime"):
        page = client.get(path, headers={"host": "127.0.0.1:8787"}).text
        assert "<style" not in page and " style=" not in page and " on" not in page.replace(" one", "")
        assert page.count("<script") == 1 and '<script src="/static/inspector.js" defer></script>' in page
