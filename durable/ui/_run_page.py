"""A run's page: one function per section, and the tree of its calls.

``run_body`` is the live part of the page: it joins what each function of
``SECTIONS`` returns (``""`` when the section has nothing to show), so a new
section is one function and one line in that list. Every value from the log
is escaped (``e``) before it reaches the page.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from ._calls_table import calls_table, clip
from ._model import iso
from ._pages import badge, compare_href, e, layout, run_href, value_block, value_href

Section = Callable[[dict[str, Any]], str]
"""A section of the run page: the run's detail (``_run_model.run_detail``) in, HTML out."""


def run_page(d: dict[str, Any], *, live: str, flash: str | None) -> str:
    """A run's whole page: its id, then the live body."""
    rid = d["run_id"]
    return layout(
        f"run {rid}",
        f'<h1>Run <code id="run-id">{e(rid)}</code></h1><div id="live">{run_body(d)}</div>',
        live=live,
        flash=flash,
    )


def run_body(d: dict[str, Any]) -> str:
    """The live part of a run's page: every section in order."""
    return "".join(section(d) for section in SECTIONS)


def facts_section(d: dict[str, Any]) -> str:
    """Status, workflow, times, queue, parent, fork origin, driver, input and output."""
    facts = [
        f'<dt>status</dt><dd id="run-status">{badge(d["status"])}'
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
    if d.get("fork_of"):
        src = d["fork_of"]
        facts.append(
            f'<dt>forked from</dt><dd><a href="{e(run_href(src))}">{e(src)}</a> at seq {e(d.get("fork_seq"))} '
            f'<a class="compare-fork" href="{e(compare_href(src, d["run_id"]))}">compare with it</a></dd>'
        )
    if d.get("code"):
        waits = f" ({e(d['code_detail'])})" if d.get("code_detail") else ""
        facts.append(f'<dt>code</dt><dd class="run-code">{e(d["code"])}{waits}</dd>')
    if d.get("patches"):
        facts.append(f'<dt>patched</dt><dd class="run-patches">{e(", ".join(d["patches"]))}</dd>')
    if d.get("driver"):
        drv = d["driver"]
        facts.append(
            f"<dt>driver</dt><dd>{e(drv['driver'])} {e(drv.get('pid') or '')} {e(drv.get('host') or '')}</dd>"
        )
    if d.get("usage"):
        u = d["usage"]
        facts.append(
            f'<dt>model usage</dt><dd id="run-usage">{e(u["calls"])} calls, {e(u["input_tokens"])} in + '
            f"{e(u['output_tokens'])} out tokens, cost {e(u['cost'])}</dd>"
        )
    elif d.get("budget"):  # a long run's page reads its last events only
        facts.append(
            '<dt>model usage</dt><dd id="run-usage">not counted on the page of a long run: '
            "<code>little runs --usage</code> counts it</dd>"
        )
    if d.get("budget"):
        facts.append(f'<dt>budget</dt><dd id="run-budget">{e(d["budget"]["text"])}</dd>')
    other = "/compare?" + urlencode({"a": d["run_id"]})
    facts.append(f'<dt>compare</dt><dd><a class="compare-other" href="{e(other)}">with another run…</a></dd>')
    href = value_href(d["run_id"], "")
    if d.get("has_input"):
        facts.append(
            f'<dt>input</dt><dd class="run-input">{value_block(d.get("input"), href, label="input")}</dd>'
        )
    if d.get("has_output"):
        out = value_block(d.get("output"), href, label="output")
        facts.append(f'<dt>output</dt><dd class="run-output">{out}</dd>')
    return f'<dl class="facts">{"".join(facts)}</dl>'


def error_section(d: dict[str, Any]) -> str:
    """Where and why the run failed."""
    if not d.get("error"):
        return ""
    return (
        f'<div class="run-error"><strong>failed</strong> at <code>{e(d["error"]["path"] or "<workflow>")}</code>: '
        f'<span class="message">{e(d["error"]["text"])}</span></div>'
    )


def blocked_section(d: dict[str, Any]) -> str:
    """A blocked run's reason, error, the commands that unblock it, and its resolution forms."""
    b = d.get("blocked")
    if not b:
        return ""
    rid = d["run_id"]
    fixes = "".join(f"<li><code>{e(f)}</code></li>" for f in b["fixes"])
    out = (
        f'<div class="run-blocked"><strong>blocked</strong> (<span class="reason">{e(b["reason"])}</span>)'
        + (f': <span class="message">{e(b["error"])}</span>' if b["error"] else "")
        + f'<p>From the shell:</p><ul class="fixes">{fixes}</ul></div>'
    )
    if b["reason"] == "unknown_commit" and b.get("key"):
        key = e(b["key"])
        hidden = (
            f'<input type="hidden" name="id" value="{e(rid)}"><input type="hidden" name="key" value="{key}">'
        )
        out += (
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
    if b["reason"] == "budget":
        out += budget_form(rid, (d.get("budget") or {}).get("json") or {})
    return out


def budget_form(run_id: str, budget: dict[str, Any]) -> str:
    """The form that raises a blocked run's budget and resumes it (after a confirmation)."""
    limits = {k: v for k, v in budget.items() if k != "prices"}
    return (
        '<section id="raise-budget"><h2>Raise the budget</h2>'
        "<p>The run stopped before a model call because its budget is spent. Give it new limits "
        "(JSON; the prices are kept unless given):</p>"
        '<form class="raise-budget" method="get" action="/confirm/resume">'
        f'<input type="hidden" name="id" value="{e(run_id)}">'
        f'<label>new budget <textarea name="budget" rows="2">{e(json.dumps(limits))}</textarea></label>'
        '<button type="submit" data-action="raise-budget">raise the budget and resume…</button>'
        "</form></section>"
    )


def _action_link(action: str, run_id: str, label: str, extra: dict[str, str] | None = None) -> str:
    q = urlencode({"id": run_id, **(extra or {})})
    return f'<a class="action" data-action="{e(action)}" href="/confirm/{e(action)}?{e(q)}">{e(label)}</a>'


def actions_section(d: dict[str, Any]) -> str:
    """Cancel a running, waiting or blocked run; resume a cancelled, failed or blocked one."""
    rid, actions = d["run_id"], []
    if d["raw_status"] in ("running", "enqueued", "blocked"):
        actions.append(_action_link("cancel", rid, "cancel"))
    drift = (d.get("error") or {}).get("drift_keys") or []
    if d["raw_status"] == "failed" and drift:
        actions.append(_action_link("resume", rid, "accept the drift and resume", {"drift": " ".join(drift)}))
    elif d["raw_status"] in ("cancelled", "failed") or (
        d["raw_status"] == "blocked" and (d.get("blocked") or {}).get("reason") != "unknown_commit"
    ):
        actions.append(_action_link("resume", rid, "resume"))
    return f'<p class="actions">{" ".join(actions)}</p>' if actions else ""


def resolutions_section(d: dict[str, Any]) -> str:
    """The decisions recorded for the run: who resolved, answered or resumed it, and when."""
    if not d.get("resolutions"):
        return ""
    rows = "".join(
        f"<tr><td>{e(r['decision'])}</td><td><code>{e(r['key'] or '')}</code></td>"
        f"<td>{e(r['by'])}</td><td>{e(r['when'])}</td></tr>"
        for r in d["resolutions"]
    )
    return (
        '<section id="resolutions"><h2>Decisions</h2>'
        f"<table><tr><th>decision</th><th>key</th><th>by</th><th>when</th></tr>{rows}</table></section>"
    )


def compensations_section(d: dict[str, Any]) -> str:
    """The compensations the run started: the call each undoes, its state, attempts, result or error."""
    rows = "".join(
        f'<tr class="compensation" data-key="{e(c["key"])}"><td><code>{e(c["key"])}</code></td>'
        f'<td class="state">{badge(c["state"])}</td><td class="attempts">{e(c["attempts"])}</td>'
        f'<td class="outcome">{e(c["error"] if c["error"] is not None else json.dumps(c["result"]))}</td></tr>'
        for c in d.get("compensations") or ()
    )
    if not rows:
        return ""
    return (
        '<section id="compensations"><h2>Compensations</h2>'
        "<p>The undo of each confirmed call, newest call first, each a durable call keyed "
        "<code>compensate:&lt;key&gt;</code>.</p>"
        "<table><tr><th>undoes</th><th>state</th><th>attempts</th><th>result or error</th></tr>"
        f"{rows}</table></section>"
    )


def waiting_section(d: dict[str, Any]) -> str:
    """The interrupts the run waits at, each with a form to answer it."""
    if not d["waiting"]:
        return ""
    rid, forms = d["run_id"], []
    for w in d["waiting"]:
        forms.append(
            f'<form class="answer" method="get" action="/confirm/answer"><input type="hidden" name="id" value="{e(rid)}">'
            f'<input type="hidden" name="path" value="{e(w["path"])}">'
            f"<p>waiting at <code>{e(w['path'])}</code> with <code>{e(w['value'])}</code></p>"
            f'<label>answer (JSON) <textarea name="answer" rows="2">""</textarea></label>'
            f'<button type="submit" data-action="answer">answer…</button></form>'
        )
    return "<section><h2>Waiting for an answer</h2>" + "".join(forms) + "</section>"


def messages_section(d: dict[str, Any]) -> str:
    """Messages sent to the run that it has not received yet."""
    if not d.get("messages"):
        return ""
    rows = "".join(
        f"<tr><td><code>{e(m['topic'] or '(default)')}</code></td><td>{e(m['sent_at'])}</td>"
        f"<td><code>{e(clip(m['value']))}</code></td></tr>"
        for m in d["messages"]
    )
    return (
        '<section id="messages"><h2>Messages waiting</h2><p>Sent to this run and not received yet: '
        "its next <code>recv()</code> of the topic takes the oldest.</p>"
        f"<table><tr><th>topic</th><th>sent</th><th>value</th></tr>{rows}</table></section>"
    )


def unconfirmed_section(d: dict[str, Any]) -> str:
    """Intents without a receipt."""
    if not d["unconfirmed"]:
        return ""
    keys = "".join(f"<li><code>{e(k)}</code></li>" for k in d["unconfirmed"])
    return (
        "<section><h2>Unconfirmed effects</h2><p>An intent without a receipt: the call may or may not "
        f'have happened.</p><ul class="unconfirmed">{keys}</ul></section>'
    )


def timers_section(d: dict[str, Any]) -> str:
    """Durable sleeps and when they wake."""
    if not d["timers"]:
        return ""
    ts = "".join(
        f"<li><code>{e(t['path'])}</code> wakes {e(t['wake_at'])}{' (passed)' if t['passed'] else ''}</li>"
        for t in d["timers"]
    )
    return f'<section><h2>Timers</h2><ul class="timers">{ts}</ul></section>'


def children_section(d: dict[str, Any]) -> str:
    """Links to the runs this run started."""
    if not d["children"]:
        return ""
    cs = "".join(f'<li><a href="{e(run_href(c))}">{e(c)}</a></li>' for c in d["children"])
    return f'<section><h2>Child runs</h2><ul class="children">{cs}</ul></section>'


def calls_section(d: dict[str, Any]) -> str:
    """The tree of the run's calls, with what each returned."""
    resumed = (
        f" Calls recorded before seq {d['resumed_at']} were replayed by the drive that resumed the run there."
        if d["resumed_at"]
        else ""
    )
    inherited = (
        " Calls marked inherited come from the run this one was forked from." if d.get("fork_of") else ""
    )
    missing = d.get("missing_artifacts")
    warn = (
        f'<p class="warn missing-artifact">{e(missing)}; <code>little verify</code> says more.</p>'
        if missing
        else ""
    )
    return (
        '<section><h2>Calls</h2><p class="hint">Each call sits under the step, session, branch or loop visit '
        f"that made it; its output is what a replay returns.{e(resumed)}{e(inherited)}</p>{warn}"
        + window_note(d)
        + calls_table(d["tree"], d["run_id"], d.get("started_at"))
        + "</section>"
    )


def window_note(d: dict[str, Any]) -> str:
    """What part of a long run the page shows, and the link that shows more of it."""
    w = d.get("window")
    if not w or (w["whole"] and not w["left_out"]):
        return ""
    more = f"{run_href(d['run_id'])}?calls={2 * w['calls']}"
    if w["whole"]:
        said = f"The run's last {w['calls']:,} calls; the {w['left_out']:,} before them are left out."
    else:
        said = (
            f"The run has {w['last_seq']:,} events: this page reads those from seq {w['first_seq']:,} on, "
            f"and shows their last {w['calls']:,} calls; the calls before them are left out, and so is "
            "what only earlier events say (model usage, earlier decisions, timers and checkpoints)."
        )
    return (
        f'<p class="window hint">{e(said)} <a class="more" href="{e(more)}">'
        f"show the last {2 * w['calls']:,} calls</a></p>"
    )


def fork_section(d: dict[str, Any]) -> str:
    """A form to fork a new run from one of the run's checkpoints."""
    if not d["checkpoints"]:
        return ""
    opts = "".join(
        f'<option value="{c["seq"]}">seq {c["seq"]}: {e(c["path"] or "snapshot")}</option>'
        for c in d["checkpoints"]
    )
    return (
        '<section><h2>Fork from a checkpoint</h2><form class="fork" method="get" action="/confirm/fork">'
        f'<input type="hidden" name="id" value="{e(d["run_id"])}"><select name="checkpoint" aria-label="checkpoint">{opts}</select> '
        '<button type="submit" data-action="fork">fork…</button></form></section>'
    )


def raw_section(d: dict[str, Any]) -> str:
    """Every event as the log holds it, collapsed."""
    raw = "".join(
        f"<tr><td>{ev['seq']}</td><td>{e(iso(ev.get('at'), 'milliseconds'))}</td><td>{e(ev['type'])}</td>"
        f"<td><code>{e(json.dumps(_short(ev), default=str))}</code></td></tr>"
        for ev in d["events"]
    )
    w = d.get("window")
    count = (
        f"{len(d['events'])}"
        if not w or w["whole"]
        else f"the last {len(d['events']):,} of {w['last_seq']:,}, from seq {w['first_seq']:,}"
    )
    return (
        f'<details class="raw"><summary>Raw events ({count})</summary><table class="events">'
        f"<thead><tr><th>seq</th><th>written</th><th>type</th><th>data</th></tr></thead><tbody>{raw}</tbody></table></details>"
    )


SECTIONS: list[Section] = [
    facts_section,
    error_section,
    blocked_section,
    actions_section,
    resolutions_section,
    compensations_section,
    waiting_section,
    messages_section,
    unconfirmed_section,
    timers_section,
    children_section,
    calls_section,
    fork_section,
    raw_section,
]
"""The run page's sections, top to bottom."""


def _short(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ev.items() if k not in ("run_id", "seq", "type", "manifest", "at")}
