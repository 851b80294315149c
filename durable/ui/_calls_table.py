"""The run page's tree of calls: a row per call, its state, timing, input and outcome.

Every value from the log is escaped (``e``) before it reaches the page.
"""

from __future__ import annotations

from ._model import Item, iso
from ._pages import e, run_href, value_block, value_href
from ._tree import Node

IN_FLIGHT = ("pending", "running", "unconfirmed", "set", "retrying")
INHERITED_STATES = {
    "step": "completed",
    "session": "completed",
    "interrupt": "answered",
    "tool": "confirmed",
    "model": "confirmed",
    "workflow": "confirmed",
}
"""The state the timeline would show for an inherited call that ended well, by kind."""
INDENT = '<div class="in">'
"""One level of a call's indent in the tree (nested, so its detail lines move with it: no inline style)."""


def _ms_text(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _duration(it: Item, longest: float) -> str:
    if it.ms is None:
        return ""
    width = max(100.0 * it.ms / longest, 0.8) if longest > 0 else 0.8
    # An SVG rectangle's width is an attribute, not a style: the page's policy allows no inline style.
    return (
        f'<div class="bar" title="{it.ms:.3f} ms"><svg><rect class="fill k-{e(it.kind)} st-{e(it.state)}" '
        f'width="{width:.2f}%" height="100%"/></svg></div><span class="ms">{_ms_text(it.ms)}</span>'
    )


def _when(it: Item, started_at: float | None) -> str:
    """When the call's latest event was committed, after the run's first event (full time on hover)."""
    if it.at is None:
        return ""
    after = f"+{_ms_text(1000.0 * (it.at - started_at))}" if started_at is not None else ""
    stamp = e(iso(it.at, "milliseconds"))
    return f'<time datetime="{stamp}" title="{stamp}">{e(after)}</time>'


def _how(node: Node) -> str:
    it = node.item
    if it is None:
        return "inherited" if node.inherited else ""
    if it.state == "waiting":
        return "waiting"
    if it.state in IN_FLIGHT:
        return "in flight"
    return "replayed" if it.replayed else "executed"


def _outcome(node: Node, run_id: str) -> str:
    call, it = node.call, node.item
    errors = list(it.errors) if it else []
    if call is not None and call.error and not errors:
        errors.append(call.error)
    out = _input(node, run_id)
    if errors:
        out += '<ul class="errors">' + "".join(f'<li class="error">{e(x)}</li>' for x in errors) + "</ul>"
    unread = call is not None and call.artifact is not None and call.output is None
    if call is not None and call.outcome == "ok" and node.kind != "session" and not unread:
        out += value_block(call.output, value_href(run_id, node.key))
        if call.artifact:
            out += f'<p class="hint">stored as artifact {e(call.artifact.get("sha256", "")[:19])}…</p>'
    return out


def _input(node: Node, run_id: str) -> str:
    """A call's input decoded (cut, with a link to the whole), or why the log shows none."""
    call = node.call
    if call is None or not call.input_hash:
        return ""
    if call.input_state == "recorded":
        out = value_block(call.input, value_href(run_id, node.key, "input"), label="input")
        if call.input_note in ("artifact", "delta"):
            how = (
                "as an artifact"
                if call.input_note == "artifact"
                else "as what it appends to an earlier call's"
            )
            out += f'<p class="hint input-stored">input stored {how}</p>'
        return out
    title = e(call.input_hash)
    if call.input_state == "earlier":  # a long run's page: the chain reaches before the events it read
        href = value_href(run_id, node.key, "input")
        return (
            f'<p class="hint input-earlier" title="{e(call.input_note or "")}">input stored as what it '
            f'appends to a call before the events this page read: <a class="whole" href="{e(href)}">'
            "whole input</a></p>"
        )
    if call.input_state == "unreadable":
        return (
            f'<p class="hint input-missing" title="{title}">input unreadable: {e(call.input_note or "")}</p>'
        )
    return f'<p class="hint input-missing" title="{title}">input not recorded (older log)</p>'


def _inherited_state(node: Node) -> str:
    """The state of a call the run has no event of, in the words the timeline uses."""
    if node.call is None:
        return ""
    if node.call.outcome != "ok":
        return node.call.outcome
    return INHERITED_STATES.get(node.kind, "recorded")


def _row(node: Node, run_id: str, longest: float, started_at: float | None) -> str:
    it = node.item
    state = it.state if it else _inherited_state(node)
    child = ""
    if it is not None and it.child_run_id:
        child = f' <a class="child" href="{e(run_href(it.child_run_id))}">child run {e(it.child_run_id)}</a>'
    shown = it is not None and it.detail and it.detail != it.kind and it.detail != node.kind
    detail = f'<div class="hint">{e(clip(it.detail))}</div>' if it and shown else ""
    return (
        f'<tr class="item" role="row" aria-level="{node.depth + 1}" data-key="{e(node.key)}" '
        f'data-kind="{e(node.kind)}" data-state="{e(state)}" data-depth="{node.depth}">'
        f'<td class="call">{INDENT * node.depth}'
        f'<span class="kind k-{e(node.kind)}">{e(node.kind)}</span> '
        f'<code class="call-name" title="{e(node.key)}">{e(node.label)}</code>{child}{detail}'
        f"{'</div>' * node.depth}</td>"
        f"<td>{e(state)}</td><td>{e(_how(node))}</td><td>{it.attempts if it else ''}</td>"
        f"<td>{_duration(it, longest) if it else ''}</td>"
        f'<td class="when">{_when(it, started_at) if it else ""}</td>'
        f'<td class="outcome">{_outcome(node, run_id)}</td></tr>'
    )


def calls_table(tree: list[Node], run_id: str, started_at: float | None = None) -> str:
    """The run's calls as an indented tree: kind, name, state, how, attempts, duration, input and output."""
    nodes = [n for root in tree for n in root.walk()]
    if not nodes:
        return '<p class="empty">No calls recorded yet.</p>'
    longest = max((n.item.ms for n in nodes if n.item is not None and n.item.ms is not None), default=0.0)
    rows = "".join(_row(n, run_id, longest, started_at) for n in nodes)
    return (
        '<table class="timeline tree" role="treegrid"><thead><tr><th>call</th><th>state</th>'
        "<th>executed / replayed</th><th>attempts</th><th>duration</th><th>committed</th>"
        "<th>input and output</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def clip(text: str, most: int = 200) -> str:
    """``text``, cut to ``most`` characters with an ellipsis."""
    return text if len(text) <= most else text[:most] + "…"
