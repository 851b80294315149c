"""Browser fixtures: Debian's chromium driven by Playwright; skipped where missing, never under CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.harness import CHROMIUM, LAUNCH_ARGS, Server, seed, serve


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI must run the browser tests (.ci/run installs chromium)")
    pytest.skip(f"{why}: the inspector's browser tests need it (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with seeded runs, shared by a module's tests."""
    path = tmp_path_factory.mktemp("ui") / "data"
    seed(path)
    return path


@pytest.fixture(scope="module")
def server(data_dir: Path) -> Iterator[Server]:
    """``little ui`` over the seeded data directory, in a subprocess."""
    with serve(data_dir) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium (``/usr/bin/chromium``), never a downloaded browser."""
    if not CHROMIUM.exists():
        _missing(f"no chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    """A fresh page that opened the printed address (so it holds the token's cookie)."""
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.goto(server.url)
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def stranger(browser: Any, server: Server) -> Iterator[Any]:
    """A page that never saw the token."""
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    try:
        yield pg
    finally:
        context.close()
