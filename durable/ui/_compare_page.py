"""The comparison of two runs at ``/compare?a=RUN_A&b=RUN_B``: every call path, side by side.

The rows come from ``durable.ops._run_diff.align`` (the same alignment ``little
diff`` prints); a changed output is shown on both sides with the words that
differ marked (``<mark>``), cut past ``CUT`` characters with links to the
whole values.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from ..ops import DIFF_STATUSES, highlight, pretty, summary
from ._pages import CUT, e, layout, run_href, value_href


def compare_form(a: str = "", b: str = "", note: str | None = None) -> str:
    """The page that asks for two run ids (``/compare`` without both)."""
    warn = f'<p class="warn">{e(note)}</p>' if note else ""
    body = (
        f"<h1>Compare two runs</h1>{warn}"
        '<form class="compare-form" method="get" action="/compare">'
        f'<label>run A <input name="a" value="{e(a)}" placeholder="the parent run"></label> '
        f'<label>run B <input name="b" value="{e(b)}" placeholder="the fork"></label> '
        '<button type="submit">compare</button></form>'
        '<p class="hint">A fork\'s page links here with the run it was forked from. '
        "From the shell: <code>little diff RUN_A RUN_B</code>.</p>"
    )
    return layout("compare", body)


def _cut(text: str) -> str:
    return text if len(text) <= CUT else text[:CUT] + "…"


def _marked(parts: list[tuple[str, bool]], mark: str) -> str:
    return "".join(f'<mark class="{mark}">{e(t)}</mark>' if differs else e(t) for t, differs in parts)


def _side_text(side: dict[str, Any]) -> str:
    if side["kind"] == "session":
        return "(session ended)" if side["outcome"] == "ok" else "(session running)"
    if side["outcome"] == "error":
        return str(side["error"])
    if side["outcome"] != "ok":
        return f"({side['outcome']})"
    return pretty(side["output"])


def _more(run_id: str, path: str, text: str, part: str = "output") -> str:
    if len(text) <= CUT:
        return ""
    href = value_href(run_id, path, part)
    return f' <a class="whole" href="{e(href)}">whole {part} ({len(text)} characters)</a>'


def _inputs(a: dict[str, Any], b: dict[str, Any], run_a: str, run_b: str, path: str) -> tuple[str, str]:
    """Both inputs of a path whose input changed, the differing words marked, and how they differ."""
    change = b.get("input_change") or {}
    if change.get("status") == "same" or not change.get("changes"):
        return "", ""
    how = "".join(f"<li>{e(c)}</li>" for c in change["changes"])
    note = f'<ul class="hint input-differs">{how}</ul>'
    if change.get("status") != "changed":
        return "", note
    ta, tb = pretty(a["input"]), pretty(b["input"])
    left, right = highlight(_cut(ta), _cut(tb))
    return (
        f'<div class="input input-changed"><span class="hint">input</span><pre>{_marked(left, "del")}</pre>'
        f"{_more(run_a, path, ta, 'input')}</div>",
        f'<div class="input input-changed"><span class="hint">input</span><pre>{_marked(right, "ins")}</pre>'
        f"{_more(run_b, path, tb, 'input')}</div>{note}",
    )


def _cells(row: dict[str, Any], run_a: str, run_b: str) -> str:
    a, b, path = row["a"], row["b"], row["path"]
    ta = _side_text(a) if a else ""
    tb = _side_text(b) if b else ""
    if row["status"] == "changed":
        left, right = highlight(_cut(ta), _cut(tb))
        ca, cb = _marked(left, "del"), _marked(right, "ins")
    else:
        ca, cb = e(_cut(ta)), e(_cut(tb))
    cell_a = f"<pre>{ca}</pre>{_more(run_a, path, ta)}" if a else '<p class="absent">not in run A</p>'
    cell_b = f"<pre>{cb}</pre>{_more(run_b, path, tb)}" if b else '<p class="absent">not in run B</p>'
    in_a, in_b = _inputs(a, b, run_a, run_b, path) if a and b else ("", "")
    return f'<td class="side side-a">{in_a}{cell_a}</td><td class="side side-b">{in_b}{cell_b}</td>'


def compare_page(d: dict[str, Any], *, changed_only: bool = False) -> str:
    """Two runs aligned by call path: status of each path, and both outputs side by side."""
    run_a, run_b, rows = d["a"], d["b"], d["rows"]
    counts = summary(rows)
    chips = " ".join(
        f'<span class="badge d-{e(s)}" data-count="{e(s)}">{e(s.replace("_", " "))} {counts[s]}</span>'
        for s in DIFF_STATUSES
    )
    shown = [r for r in rows if not changed_only or r["status"] != "same"]
    body_rows = "".join(
        f'<tr class="diff-row" data-path="{e(r["path"])}" data-status="{e(r["status"])}">'
        f'<td class="path"><code class="call-name" title="{e(r["path"])}">{e(r["path"])}</code></td>'
        f'<td><span class="badge d-{e(r["status"])}">{e(r["status"].replace("_", " "))}</span></td>'
        f"{_cells(r, run_a, run_b)}</tr>"
        for r in shown
    )
    toggle_q = {"a": run_a, "b": run_b} | ({} if changed_only else {"changed": "1"})
    toggle = (
        f'<a class="toggle" href="/compare?{e(urlencode(toggle_q))}">'
        f"{'show every path' if changed_only else 'show only differences'}</a>"
    )
    origin = ""
    if d.get("fork_of") == run_a:
        origin = f' <span class="hint">(run B was forked from run A at seq {e(d.get("fork_seq"))})</span>'
    table = (
        '<table class="compare"><thead><tr><th>call path</th><th>status</th>'
        f'<th>run A: <a href="{e(run_href(run_a))}">{e(run_a)}</a></th>'
        f'<th>run B: <a href="{e(run_href(run_b))}">{e(run_b)}</a></th></tr></thead>'
        f"<tbody>{body_rows}</tbody></table>"
        if shown
        else '<p class="empty">No paths differ.</p>'
    )
    body = (
        f'<h1>Compare <code id="run-a">{e(run_a)}</code> and <code id="run-b">{e(run_b)}</code></h1>'
        f'<p class="summary">{chips}{origin} {toggle}</p>{table}'
    )
    return layout(f"compare {run_a} and {run_b}", body)
