"""The tree of calls and the comparison of a fork with its source, in a real headless chromium."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import pg
from tests.ui.harness import ROOT, Server, env, serve

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why, and fails under CI=true
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser

NARROW = {"width": 900, "height": 700}


def _one_line(page: Any, selector: str) -> list[str]:
    """The texts of the elements matching ``selector`` that the browser broke over more than one line."""
    broken: list[str] = page.eval_on_selector_all(
        selector, "els => els.filter(e => e.getClientRects().length > 1).map(e => e.textContent)"
    )
    return broken


def test_calls_sit_under_their_step_and_their_names_never_wrap(page: Any, server: Server) -> None:
    """On a narrow window, a tool call is indented under its step and no call name breaks over two lines."""
    page.set_viewport_size(NARROW)
    page.goto(f"{server.base}/runs/support-small")
    step = 'tr.item[data-key="research"] code.call-name'
    tool = 'tr.item[data-key="research.tool:lookup_customer_record#0"] code.call-name'
    expect(page.locator(tool)).to_have_text("tool:lookup_customer_record#0")
    # Both measured in one look: a live refresh may swap the table between two separate reads.
    step_x, tool_x = page.evaluate(
        "([a, b]) => [a, b].map(s => document.querySelector(s).getBoundingClientRect().x)", [step, tool]
    )
    assert tool_x > step_x + 10
    visit = page.locator('tr.item[data-key="polish.visit[1]"]')
    expect(visit).to_contain_text("executed")
    assert page.locator("code.call-name").count() >= 10
    assert _one_line(page, "code.call-name") == []


def test_a_cut_value_opens_whole(page: Any, server: Server) -> None:
    """An output past the cut shows its start and an ellipsis; its link opens the whole value."""
    page.goto(f"{server.base}/runs/support-small")
    row = page.locator('tr.item[data-key="research.tool:lookup_customer_record#0"]')
    output = row.locator('.value[data-part="output"]')
    expect(output.locator("pre")).to_contain_text("renewed twice;…")
    expect(output.locator("pre")).not_to_contain_text("enterprise")  # past the cut
    output.locator("a.whole").click()
    expect(page.locator("body")).to_contain_text('"plan": "enterprise"')
    assert page.locator("body").inner_text().count("renewed twice;") == 60


def test_a_fork_links_to_its_comparison_which_shows_the_changed_words(page: Any, server: Server) -> None:
    """From the fork's page to the comparison: inherited calls same, the new writer's words marked."""
    page.goto(f"{server.base}/runs/support-big")
    expect(page.locator('tr.item[data-key="research"]')).to_contain_text("inherited")
    page.click("a.compare-fork")
    expect(page.locator("h1")).to_contain_text("support-small")
    reply = page.locator('tr.diff-row[data-path="session:writer#1.model:write_reply#0"]')
    expect(reply).to_have_attribute("data-status", "changed")
    expect(reply.locator(".side-a mark")).to_have_text("small")
    expect(reply.locator(".side-b mark")).to_have_text("big")
    expect(page.locator('tr.diff-row[data-path="research"]')).to_have_attribute("data-status", "same")
    expect(page.locator('[data-count="changed"]')).to_have_text("changed 3")
    page.click("a.toggle")
    expect(page.locator('tr.diff-row[data-status="same"]')).to_have_count(0)
    expect(page.locator("tr.diff-row")).to_have_count(3)


def test_a_call_shows_its_input_and_a_long_one_opens_whole(page: Any, server: Server) -> None:
    """A call's input is labelled and decoded; a long one is cut and its link opens the whole input."""
    page.goto(f"{server.base}/runs/support-small")
    step = page.locator('tr.item[data-key="research"] .value[data-part="input"] pre')
    expect(step).to_contain_text('"customer_id": "c-42"')
    filed = page.locator('tr.item[data-key="research.tool:file_record#1"] .value[data-part="input"]')
    expect(filed.locator("pre")).to_contain_text("renewed twice; renewed twice…")
    filed.locator("a.whole").click()
    expect(page.locator("body")).to_contain_text('"record": {')
    assert page.locator("body").inner_text().count("renewed twice;") == 60


def test_the_comparison_shows_where_the_fork_s_inputs_differ(page: Any, server: Server) -> None:
    """The step after the new writer got another text: both inputs shown, words marked, the argument named."""
    page.goto(f"{server.base}/compare?a=support-small&b=support-big")
    polish = page.locator('tr.diff-row[data-path="polish.visit[0]"]')
    expect(polish.locator(".side-a .input-changed mark.del").first).to_have_text("small")
    expect(polish.locator(".side-b .input-changed mark.ins").first).to_have_text("big")
    expect(polish.locator("ul.input-differs")).to_contain_text("text:")
    expect(page.locator('tr.diff-row[data-path="research"] .input-changed')).to_have_count(0)


def test_the_compare_form_takes_two_run_ids(page: Any, server: Server) -> None:
    """The header's compare link asks for two runs and shows their comparison."""
    page.click('header a[href="/compare"]')
    page.fill('input[name="a"]', "support-small")
    page.fill('input[name="b"]', "family")
    page.click('form.compare-form button[type="submit"]')
    expect(page.locator('[data-count="only_a"]')).not_to_have_text("only a 0")
    expect(page.locator('[data-count="only_b"]')).not_to_have_text("only b 0")
    assert _one_line(page, "td.path code.call-name") == []


@pytest.fixture(scope="module")
def pg_server_ui(pg_server: pg.Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``little ui --dsn`` over a Postgres schema seeded with the fork and its source."""
    schema = pg.new_schema()
    code = (
        "import asyncio, durable\nfrom tests.ui.harness import seed_fork\n"
        f"w = durable.postgres_world({pg_server.dsn!r}, schema={schema!r})\n"
        "asyncio.run(seed_fork(w))\nw.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True, timeout=120)
    folder = tmp_path_factory.mktemp("ui-pg") / "data"
    folder.mkdir()
    try:
        with serve(folder, "--dsn", pg_server.dsn, "--schema", schema) as s:
            yield s
    finally:
        pg.drop_schema(pg_server.dsn, schema)


def test_the_comparison_works_over_postgres(browser: Any, pg_server_ui: Server) -> None:
    """Over Postgres the fork links to the comparison, which marks new words and inputs; inputs are kept."""
    context = browser.new_context()
    pg_page = context.new_page()
    pg_page.set_default_timeout(20_000)
    try:
        pg_page.goto(pg_server_ui.url)
        pg_page.goto(f"{pg_server_ui.base}/runs/support-big")
        tool = pg_page.locator('tr.item[data-key="research.tool:lookup_customer_record#0"]')
        expect(tool).to_have_attribute("data-depth", "1")
        pg_page.click("a.compare-fork")
        reply = pg_page.locator('tr.diff-row[data-path="session:writer#1.model:write_reply#0"] .side-b mark')
        expect(reply).to_have_text("big")
        polish = pg_page.locator('tr.diff-row[data-path="polish.visit[0]"] .side-b .input-changed mark.ins')
        expect(polish.first).to_have_text("big")
        pg_page.goto(f"{pg_server_ui.base}/runs/support-big")
        inherited = pg_page.locator('tr.item[data-key="research"] .value[data-part="input"] pre')
        expect(inherited).to_contain_text('"customer_id": "c-42"')  # an inherited call keeps its input
    finally:
        context.close()
