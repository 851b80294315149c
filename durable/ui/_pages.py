"""The inspector's HTML: server-rendered pages, every value escaped.

Run ids, paths, workflow names, answers and error messages come from the
log and may hold any character, so every one of them goes through ``e()``
(text and attribute values) or ``u()`` (a query value in a link) before it
reaches the page. Nothing here builds markup from unescaped data.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote, urlencode

from ..ops import pretty
from ._model import STATUSES, iso

CUT = 600
"""Characters of a value shown on a page; past them the value is cut, with a link to the whole of it."""


def e(value: Any) -> str:
    """``value`` as text safe in HTML content and in quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def u(value: Any) -> str:
    """``value`` quoted for a URL path segment or query value."""
    return quote("" if value is None else str(value), safe="")


def run_href(run_id: str) -> str:
    """The run page's address, ``/runs/<run_id>`` (quoted: a run id may hold ``/``, ``?`` or ``#``)."""
    return f"/runs/{u(run_id)}"


def value_href(run_id: str, path: str, part: str = "output") -> str:
    """The address of a call's whole output (``part="input"``: its input) as JSON.

    ``path=""`` is the run's own input and output.
    """
    query = {"run": run_id, "path": path} | ({"part": part} if part != "output" else {})
    return "/value?" + urlencode(query)


def compare_href(run_a: str, run_b: str) -> str:
    """The address of the comparison of two runs."""
    return "/compare?" + urlencode({"a": run_a, "b": run_b})


def value_block(value: Any, href: str, *, label: str = "output") -> str:
    """A value as readable JSON, cut past ``CUT`` characters with a link to the whole of it."""
    text = pretty(value)
    more = ""
    if len(text) > CUT:
        text = text[:CUT] + "…"
        more = f' <a class="whole" href="{e(href)}">whole {e(label)} ({len(pretty(value))} characters)</a>'
    return f'<div class="value" data-part="{e(label)}"><pre>{e(text)}</pre>{more}</div>'


def layout(title: str, body: str, *, live: str | None = None, flash: str | None = None) -> str:
    """A full page: header with navigation, an optional flash message, the body."""
    live_attr = f' data-live="{e(live)}"' if live else ""
    note = f'<p class="flash" role="status">{e(flash)}</p>' if flash else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · little ui</title>
<link rel="stylesheet" href="/static/inspector.css">
<script src="/static/inspector.js" defer></script>
</head><body{live_attr}>
<header><a class="brand" href="/">little ui</a>
<nav><a href="/">runs</a> <a href="/compare">compare</a> <a href="/runtime">queues and workers</a></nav>
<span id="live-state" class="live-state" title="live updates">●</span></header>
<main>{note}{body}</main></body></html>"""


def badge(status: str) -> str:
    """A status as a coloured label."""
    return f'<span class="badge s-{e(status)}" data-status="{e(status)}">{e(status)}</span>'


def runs_filters(status: str | None, workflow: str | None, search: str | None, workflows: list[str]) -> str:
    """The filter form of the run list."""
    opts = ['<option value="">any status</option>'] + [
        f'<option value="{e(s)}"{" selected" if s == status else ""}>{e(s)}</option>' for s in STATUSES
    ]
    wopts = ['<option value="">any workflow</option>'] + [
        f'<option value="{e(w)}"{" selected" if w == workflow else ""}>{e(w)}</option>' for w in workflows
    ]
    return f"""<form class="filters" method="get" action="/">
<select name="status" aria-label="status">{"".join(opts)}</select>
<select name="workflow" aria-label="workflow">{"".join(wopts)}</select>
<input type="search" name="q" value="{e(search or "")}" placeholder="search run id or workflow" aria-label="search">
<button type="submit">filter</button></form>"""


def runs_table(rows: list[dict[str, Any]]) -> str:
    """The run list's table (the part live updates replace)."""
    if not rows:
        return '<p class="empty">No runs match.</p>'
    body = []
    for r in rows:
        parent = (
            f'<a href="{e(run_href(r["parent_run_id"]))}">{e(r["parent_run_id"])}</a>'
            if r.get("parent_run_id")
            else ""
        )
        body.append(
            f'<tr data-run-id="{e(r["run_id"])}"><td><a class="run-link" href="{e(run_href(r["run_id"]))}">'
            f"{e(r['run_id'])}</a></td><td>{e(r['workflow'])}</td><td>{badge(r['ui_status'])}</td>"
            f"<td>{e(r.get('queue') or '')}</td><td>{parent}</td><td>{e(iso(r.get('created_at')))}</td>"
            f"<td>{e(iso(r.get('updated_at')))}</td></tr>"
        )
    return (
        '<table class="runs"><thead><tr><th>run</th><th>workflow</th><th>status</th><th>queue</th>'
        "<th>parent</th><th>created</th><th>updated</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
    )


def runs_page(
    rows: list[dict[str, Any]], filters: str, *, live: str, flash: str | None, older: str | None = None
) -> str:
    """The run list at ``/`` (``older``: the address of the next page of older runs, when there are)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["ui_status"]] = counts.get(r["ui_status"], 0) + 1
    summary = " ".join(f"{badge(s)} {counts[s]}" for s in STATUSES if s in counts)
    more = f'<p class="older"><a rel="next" href="{e(older)}">older runs</a></p>' if older else ""
    body = f'<h1>Runs</h1>{filters}<div id="live">{_summary(summary)}{runs_table(rows)}</div>{more}'
    return layout("runs", body, live=live, flash=flash)


def _summary(text: str) -> str:
    return f'<p class="summary">{text}</p>' if text else ""


def confirm_page(action: str, run_id: str, fields: dict[str, str], token: str | None, question: str) -> str:
    """The confirmation step of an action: what will happen, and a button that POSTs it with the token."""
    hidden = "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items())
    tok = f'<input type="hidden" name="token" value="{e(token)}">' if token else ""
    missing = (
        ""
        if token
        else '<p class="warn">This page was opened without the token, so the action will be refused. '
        "Open the address <code>little ui</code> printed (it carries <code>?token=</code>).</p>"
    )
    body = (
        f"<h1>Confirm: {e(action)}</h1><p>{e(question)}</p>{missing}"
        f'<form method="post" action="/action/{e(action)}">{hidden}{tok}'
        f'<button type="submit" id="confirm" class="danger">{e(action)}</button> '
        f'<a href="{e(run_href(run_id))}">back</a></form>'
    )
    return layout(f"confirm {action}", body)


def runtime_page(view: dict[str, Any]) -> str:
    """Queues and the drivers that hold claims, from the runtime's control store."""
    qs = "".join(
        f"<tr><td>{e(q['name'])}</td><td>{e(', '.join(f'{k}: {v}' for k, v in sorted(q['states'].items())))}</td></tr>"
        for q in view["queues"]
    )
    ds = "".join(
        f"<tr><td>{e(d['owner'])}</td><td>{e(d.get('pid') or '')}</td><td>{e(d.get('host') or '')}</td><td>"
        + ", ".join(
            f'<a href="{e(run_href(r["run_id"]))}">{e(r["run_id"])}</a> ({e(r["driver"])})' for r in d["runs"]
        )
        + "</td></tr>"
        for d in view["drivers"]
    )
    body = (
        '<h1>Queues and workers</h1><div id="live"><h2>Queues</h2>'
        + (
            f"<table><thead><tr><th>queue</th><th>unfinished runs</th></tr></thead><tbody>{qs}</tbody></table>"
            if qs
            else '<p class="empty">No unfinished queued runs.</p>'
        )
        + "<h2>Drivers holding claims</h2>"
        + (
            f"<table><thead><tr><th>worker</th><th>pid</th><th>host</th><th>runs (driver)</th></tr></thead><tbody>{ds}</tbody></table>"
            if ds
            else '<p class="empty">No claimed runs.</p>'
        )
        + "</div>"
    )
    return layout("queues and workers", body, live="/live?view=runtime")


def message_page(title: str, text: str, status_back: str = "/") -> str:
    """A page with one sentence (errors, refusals)."""
    return layout(
        title,
        f'<h1>{e(title)}</h1><p class="message">{e(text)}</p><p><a href="{e(status_back)}">back</a></p>',
    )


def _clip(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[:most] + "…"
