"""Screenshots of the inspector for docs/inspector.md: the run list, run pages and a comparison.

Run from the repository root (needs /usr/bin/chromium and the dev extra)::

    python scripts/inspector_screenshots.py

It seeds a data directory with the runs the browser tests use, starts
``little ui`` on it, opens the pages in headless chromium and writes
``docs/images/inspector-list.png``, ``docs/images/inspector-run.png`` (a run
waiting for an answer), ``docs/images/inspector-tree.png`` (a fork's tree of
calls) and ``docs/images/inspector-compare.png`` (the fork compared with its
source).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.ui.harness import CHROMIUM, LAUNCH_ARGS, seed, serve, start_driver, wait_for_run  # noqa: E402

OUT = ROOT / "docs" / "images"
SHOTS = ("inspector-list.png", "inspector-run.png", "inspector-tree.png", "inspector-compare.png")


def main() -> None:
    """Write every screenshot."""
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        seed(data)
        driver = start_driver(data, "nightly-report", 100_000)
        try:
            wait_for_run(data, "nightly-report")
            with serve(data) as server, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
                page = browser.new_page(viewport={"width": 1200, "height": 640})
                page.goto(server.url)
                expect(page.locator('tr[data-run-id="nightly-report"] .badge')).to_have_text("running")
                page.screenshot(path=str(OUT / "inspector-list.png"), full_page=True)
                page.goto(f"{server.base}/runs/family")
                expect(page.locator("#run-status .badge")).to_have_text("completed")
                page.goto(f"{server.base}/runs/needs-answer")
                expect(page.locator("form.answer")).to_be_visible()
                page.screenshot(path=str(OUT / "inspector-run.png"), full_page=True)
                page.goto(f"{server.base}/runs/support-big")
                expect(page.locator("a.compare-fork")).to_be_visible()
                page.locator("section", has=page.locator("table.tree")).screenshot(
                    path=str(OUT / "inspector-tree.png")
                )
                page.click("a.compare-fork")
                expect(page.locator("table.compare")).to_be_visible()
                page.screenshot(path=str(OUT / "inspector-compare.png"), full_page=True)
                browser.close()
        finally:
            driver.kill()
            driver.wait()
    print("wrote " + ", ".join(f"docs/images/{name}" for name in SHOTS))


if __name__ == "__main__":
    main()
