"""The inspector's HTML: server-rendered pages, every value escaped.

Run ids, paths, workflow names, answers and error messages come from the
log and may hold any character, so every one of them goes through ``e()``
(text and attribute values) or ``u()`` (a query value in a link) before it
reaches the page. Nothing here builds markup from unescaped data.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote, urlencode

from ._model import STATUSES, Item, iso


def e(value: Any) -> str:
    """``value`` as text safe in HTML content and in quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def u(value: Any) -> str:
    """``value`` quoted for a URL path segment or query value."""
    return quote("" if value is None else str(value), safe="")


def run_href(run_id: str) -> str:
    """The run page's address, ``/runs/<run_id>`` (quoted: a run id may hold ``/``, ``?`` or ``#``)."""
    return f"/runs/{u(run_id)}"


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
<nav><a href="/">runs</a> <a href="/runtime">queues and workers</a></nav>
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


def runs_page(rows: list[dict[str, Any]], filters: str, *, live: str, flash: str | None) -> str:
    """The run list at ``/``."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["ui_status"]] = counts.get(r["ui_status"], 0) + 1
    summary = " ".join(f"{badge(s)} {counts[s]}" for s in STATUSES if s in counts)
    body = f'<h1>Runs</h1>{filters}<div id="live">{_summary(summary)}{runs_table(rows)}</div>'
    return layout("runs", body, live=live, flash=flash)


def _summary(text: str) -> str:
    return f'<p class="summary">{text}</p>' if text else ""


def _bar(it: Item, last: int) -> str:
    span = max(last, 1)
    left = 100.0 * (it.first_seq - 1) / span
    width = max(100.0 * (it.last_seq - it.first_seq + 1) / span, 0.8)
    return (
        f'<div class="bar" title="log seq {it.first_seq} to {it.last_seq}">'
        f'<span class="fill k-{e(it.kind)} st-{e(it.state)}" style="margin-left:{left:.2f}%;width:{width:.2f}%"></span></div>'
    )


def _duration(it: Item, longest: float) -> str:
    if it.ms is None:
        return ""
    width = max(100.0 * it.ms / longest, 0.8) if longest > 0 else 0.8
    return (
        f'<div class="bar" title="{it.ms:.3f} ms"><span class="fill k-{e(it.kind)} st-{e(it.state)}" '
        f'style="width:{width:.2f}%"></span></div><span class="ms">{_ms_text(it.ms)}</span>'
    )


def _ms_text(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _when(it: Item, started_at: float | None) -> str:
    """When the call's latest event was committed, after the run's first event (full time on hover)."""
    if it.at is None:
        return ""
    after = f"+{_ms_text(1000.0 * (it.at - started_at))}" if started_at is not None else ""
    return f'<time datetime="{e(iso(it.at, "milliseconds"))}" title="{e(iso(it.at, "milliseconds"))}">{e(after)}</time>'


def timeline_table(items: list[Item], last_seq: int, started_at: float | None = None) -> str:
    """A run's calls in log order: kind, key, state, executed or replayed, attempts, errors, span."""
    if not items:
        return '<p class="empty">No calls recorded yet.</p>'
    rows = []
    longest = max((it.ms for it in items if it.ms is not None), default=0.0)
    for it in items:
        child = (
            f' <a class="child" href="{e(run_href(it.child_run_id))}">child run {e(it.child_run_id)}</a>'
            if it.child_run_id
            else ""
        )
        errors = "".join(f'<li class="error">{e(x)}</li>' for x in it.errors)
        errors = f'<ul class="errors">{errors}</ul>' if errors else ""
        how = "replayed" if it.replayed else "executed"
        if it.state in ("pending", "running", "unconfirmed", "waiting", "set", "retrying"):
            how = "in flight" if it.state != "waiting" else "waiting"
        rows.append(
            f'<tr class="item" data-key="{e(it.key)}" data-state="{e(it.state)}"><td>{e(it.kind)}</td>'
            f"<td><code>{e(it.key)}</code>{child}{errors}</td><td>{e(it.state)}</td><td>{e(how)}</td>"
            f"<td>{it.attempts}</td><td>{e(it.detail)}</td><td>{_duration(it, longest)}</td>"
            f'<td class="when">{_when(it, started_at)}</td><td>{_bar(it, last_seq)}</td></tr>'
        )
    return (
        '<table class="timeline"><thead><tr><th>kind</th><th>call</th><th>state</th><th>executed / replayed</th>'
        "<th>attempts</th><th>detail</th><th>duration</th><th>committed</th><th>span in the log</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _blocked(d: dict[str, Any]) -> list[str]:
    """A blocked run's reason, error, the commands that unblock it, and its resolution forms."""
    b = d.get("blocked")
    if not b:
        return []
    rid = d["run_id"]
    fixes = "".join(f"<li><code>{e(f)}</code></li>" for f in b["fixes"])
    out = [
        f'<div class="run-blocked"><strong>blocked</strong> (<span class="reason">{e(b["reason"])}</span>)'
        + (f': <span class="message">{e(b["error"])}</span>' if b["error"] else "")
        + f'<p>From the shell:</p><ul class="fixes">{fixes}</ul></div>'
    ]
    if b["reason"] == "unknown_commit" and b.get("key"):
        key = e(b["key"])
        hidden = (
            f'<input type="hidden" name="id" value="{e(rid)}"><input type="hidden" name="key" value="{key}">'
        )
        out.append(
            '<section id="resolve"><h2>Did the call happen?</h2>'
            f"<p>Check the external system for idempotency key <code>{e(rid)}:{key}</code>.</p>"
            f'<form class="resolve" method="get" action="/confirm/resolve">{hidden}'
            '<input type="hidden" name="happened" value="1">'
            '<label>its result (JSON) <textarea name="result" rows="2">null</textarea></label>'
            '<button type="submit" data-action="resolve-happened">it happened…</button></form>'
            f'<form class="resolve" method="get" action="/confirm/resolve">{hidden}'
            '<input type="hidden" name="happened" value="0">'
            '<button type="submit" data-action="resolve-not-happened">it did not happen: call it again…</button>'
            "</form></section>"
        )
    return out


def _action_link(action: str, run_id: str, label: str, extra: dict[str, str] | None = None) -> str:
    q = urlencode({"id": run_id, **(extra or {})})
    return f'<a class="action" data-action="{e(action)}" href="/confirm/{e(action)}?{e(q)}">{e(label)}</a>'


def run_page(d: dict[str, Any], *, live: str, flash: str | None) -> str:
    """A run's page: its status, actions, waiting interrupts, timers, effects, timeline, raw events."""
    rid = d["run_id"]
    return layout(
        f"run {rid}",
        f'<h1>Run <code id="run-id">{e(rid)}</code></h1><div id="live">{run_body(d)}</div>',
        live=live,
        flash=flash,
    )


def run_body(d: dict[str, Any]) -> str:
    """The live part of a run's page."""
    rid = d["run_id"]
    status = d["status"]
    facts = [
        f'<dt>status</dt><dd id="run-status">{badge(status)}'
        + (f" ({e(d['reason'])})" if d.get("reason") else "")
        + "</dd>",
        f"<dt>workflow</dt><dd>{e(d['workflow'])}</dd>",
        f"<dt>created</dt><dd>{e(iso(d.get('created_at')))}</dd>",
        f"<dt>updated</dt><dd>{e(iso(d.get('updated_at')))}</dd>",
    ]
    if d.get("queue"):
        facts.append(f"<dt>queue</dt><dd>{e(d['queue'])}</dd>")
    if d.get("parent_run_id"):
        facts.append(
            f'<dt>parent</dt><dd><a href="{e(run_href(d["parent_run_id"]))}">{e(d["parent_run_id"])}</a></dd>'
        )
    if d.get("driver"):
        drv = d["driver"]
        facts.append(
            f"<dt>driver</dt><dd>{e(drv['driver'])} {e(drv.get('pid') or '')} {e(drv.get('host') or '')}</dd>"
        )
    out = [f'<dl class="facts">{"".join(facts)}</dl>']
    if d.get("error"):
        out.append(
            f'<div class="run-error"><strong>failed</strong> at <code>{e(d["error"]["path"] or "<workflow>")}</code>: '
            f'<span class="message">{e(d["error"]["text"])}</span></div>'
        )
    out.extend(_blocked(d))
    actions = []
    if d["raw_status"] in ("running", "enqueued", "blocked"):
        actions.append(_action_link("cancel", rid, "cancel"))
    drift = (d.get("error") or {}).get("drift_keys") or []
    if d["raw_status"] == "failed" and drift:
        actions.append(_action_link("resume", rid, "accept the drift and resume", {"drift": " ".join(drift)}))
    elif d["raw_status"] in ("cancelled", "failed") or (
        d["raw_status"] == "blocked" and (d.get("blocked") or {}).get("reason") != "unknown_commit"
    ):
        actions.append(_action_link("resume", rid, "resume"))
    if actions:
        out.append(f'<p class="actions">{" ".join(actions)}</p>')
    if d.get("resolutions"):
        rows = "".join(
            f"<tr><td>{e(r['decision'])}</td><td><code>{e(r['key'] or '')}</code></td>"
            f"<td>{e(r['by'])}</td><td>{e(r['when'])}</td></tr>"
            for r in d["resolutions"]
        )
        out.append(
            '<section id="resolutions"><h2>Decisions</h2>'
            f"<table><tr><th>decision</th><th>key</th><th>by</th><th>when</th></tr>{rows}</table></section>"
        )
    if d["waiting"]:
        forms = []
        for w in d["waiting"]:
            forms.append(
                f'<form class="answer" method="get" action="/confirm/answer"><input type="hidden" name="id" value="{e(rid)}">'
                f'<input type="hidden" name="path" value="{e(w["path"])}">'
                f"<p>waiting at <code>{e(w['path'])}</code> with <code>{e(w['value'])}</code></p>"
                f'<label>answer (JSON) <textarea name="answer" rows="2">""</textarea></label>'
                f'<button type="submit" data-action="answer">answer…</button></form>'
            )
        out.append("<section><h2>Waiting for an answer</h2>" + "".join(forms) + "</section>")
    if d.get("messages"):
        rows = "".join(
            f"<tr><td><code>{e(m['topic'] or '(default)')}</code></td><td>{e(m['sent_at'])}</td>"
            f"<td><code>{e(_clip(m['value']))}</code></td></tr>"
            for m in d["messages"]
        )
        out.append(
            '<section id="messages"><h2>Messages waiting</h2><p>Sent to this run and not received yet: '
            "its next <code>recv()</code> of the topic takes the oldest.</p>"
            f"<table><tr><th>topic</th><th>sent</th><th>value</th></tr>{rows}</table></section>"
        )
    if d["unconfirmed"]:
        keys = "".join(f"<li><code>{e(k)}</code></li>" for k in d["unconfirmed"])
        out.append(
            "<section><h2>Unconfirmed effects</h2><p>An intent without a receipt: the call may or may not "
            f'have happened.</p><ul class="unconfirmed">{keys}</ul></section>'
        )
    if d["timers"]:
        ts = "".join(
            f"<li><code>{e(t['path'])}</code> wakes {e(t['wake_at'])}{' (passed)' if t['passed'] else ''}</li>"
            for t in d["timers"]
        )
        out.append(f'<section><h2>Timers</h2><ul class="timers">{ts}</ul></section>')
    if d["children"]:
        cs = "".join(f'<li><a href="{e(run_href(c))}">{e(c)}</a></li>' for c in d["children"])
        out.append(f'<section><h2>Child runs</h2><ul class="children">{cs}</ul></section>')
    resumed = (
        f" Calls recorded before seq {d['resumed_at']} were replayed by the drive that resumed the run there."
        if d["resumed_at"]
        else ""
    )
    out.append(
        f'<section><h2>Timeline</h2><p class="hint">Bars show where each call sits in the log (by seq).{e(resumed)}</p>'
        + timeline_table(d["items"], d["last_seq"], d.get("started_at"))
        + "</section>"
    )
    if d["checkpoints"]:
        opts = "".join(
            f'<option value="{c["seq"]}">seq {c["seq"]}: {e(c["path"] or "snapshot")}</option>'
            for c in d["checkpoints"]
        )
        out.append(
            '<section><h2>Fork from a checkpoint</h2><form class="fork" method="get" action="/confirm/fork">'
            f'<input type="hidden" name="id" value="{e(rid)}"><select name="checkpoint" aria-label="checkpoint">{opts}</select> '
            '<button type="submit" data-action="fork">fork…</button></form></section>'
        )
    raw = "".join(
        f"<tr><td>{ev['seq']}</td><td>{e(iso(ev.get('at'), 'milliseconds'))}</td><td>{e(ev['type'])}</td>"
        f"<td><code>{e(json.dumps(_short(ev), default=str))}</code></td></tr>"
        for ev in d["events"]
    )
    out.append(
        f'<details class="raw"><summary>Raw events ({len(d["events"])})</summary><table class="events">'
        f"<thead><tr><th>seq</th><th>written</th><th>type</th><th>data</th></tr></thead><tbody>{raw}</tbody></table></details>"
    )
    return "".join(out)


def _short(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ev.items() if k not in ("run_id", "seq", "type", "manifest", "at")}


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
