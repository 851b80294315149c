"""A run's calls as a tree: each call under the step, session, branch or loop visit that made it.

``build_tree`` takes the run's calls (``durable.ops._run_diff.calls_of``: what
each call returned) and its timeline items (``_model.timeline``: attempts,
errors, durations, executed or replayed) and returns nested nodes. A
branch of ``parallel`` and a loop (the visits of one looped step) have no
call of their own, so they get a node that only groups. A call a fork
inherited from its parent has no event in the fork's log: it is marked
``inherited``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..engine import VISIT_MARK, parent_of, without_visit
from ..ops import Call
from ._timeline_item import Item


@dataclass
class Node:
    """One line of the tree.

    Attributes:
        key: The call's path (for a grouping node, the scope's path).
        kind: The call's kind, or ``branch`` / ``loop`` for a grouping node.
        label: The last segment of the path (what the line shows; the path is its title).
        call: What the log says the call returned (``None`` for a timer or a grouping node).
        item: Its timeline entry (``None`` when the run's own log has no event of it).
        children: The calls it made, in the order they were written.
        depth: How deep it sits (0 at the workflow's body).
        own: Whether the run's own log has an event of it (a fork's inherited calls have none).
    """

    key: str
    kind: str
    label: str
    call: Call | None = None
    item: Item | None = None
    children: list[Node] = field(default_factory=list)
    depth: int = 0
    own: bool = True

    @property
    def inherited(self) -> bool:
        """Whether the call came from the run it was forked from (no event in this run's log)."""
        return self.call is not None and not self.own

    def walk(self) -> Iterable[Node]:
        """This node and every node under it, depth first, in order."""
        yield self
        for c in self.children:
            yield from c.walk()


def _looped(path: str) -> bool:
    i = path.rfind(VISIT_MARK)
    return i >= 0 and path.endswith("]") and path[i + len(VISIT_MARK) : -1].isdigit()


def _holder(path: str) -> str:
    """The path of the node a call hangs under (``""``: the workflow's body)."""
    if _looped(path):
        return without_visit(path)  # a visit hangs under its loop
    return parent_of(path)


def _scope_kind(path: str) -> str:
    """The kind of a scope with no call or timeline entry among those given, from its path.

    A branch of ``parallel`` (``name[key]``) has no call of its own; a step or a session
    that made the calls shown but began before them (a long run's page shows its last
    calls only) is told by its last segment.
    """
    last = path[len(parent_of(path)) :].lstrip(".")
    if _looped(path):  # a visit of a looped step
        return "step"
    if last.endswith("]"):
        return "branch"
    return "session" if last.startswith("session:") else "step"


def _label(path: str, holder: str) -> str:
    return path[len(holder) + 1 :] if holder and path.startswith(holder + ".") else path


def build_tree(
    calls: Mapping[str, Call], items: Iterable[Item], own: Collection[str] | None = None
) -> list[Node]:
    """The run's calls nested under the calls and scopes that made them.

    Args:
        calls: The run's calls by path, in the order they were first written.
        items: The run's timeline (a timer has an item and no call).
        own: The paths the run's own log names (``None``: every path); a call
            outside them was inherited from the run it was forked from. Given as
            the first seq of each path (``first_seqs``), it orders the lines too.

    Returns:
        The top-level nodes (the calls of the workflow's body), each with its children.
    """
    by_key: dict[str, Item] = {}
    for it in items:
        by_key.setdefault(it.key, it)
    order = list(calls)
    order += [k for k in by_key if k not in calls]
    if isinstance(own, Mapping):  # first seqs: a timer, or a call whose intent came before, in its place
        order.sort(key=lambda k: own.get(k, 0))
    nodes: dict[str, Node] = {}
    roots: list[Node] = []

    def ensure(path: str, kind: str | None = None) -> Node:
        node = nodes.get(path)
        if node is not None:
            return node
        holder = _holder(path)
        call, item = calls.get(path), by_key.get(path)
        if kind is None:
            kind = call.kind if call else (item.kind if item else _scope_kind(path))
        mine = own is None or path in own or call is None
        node = Node(path, kind, _label(path, holder), call, item, own=mine)
        nodes[path] = node
        if holder:
            parent = ensure(holder, "loop" if _looped(path) else None)
            node.depth = parent.depth + 1
            parent.children.append(node)
        else:
            roots.append(node)
        return node

    for path in order:
        ensure(path)
    return roots


def last_calls(roots: list[Node], n: int) -> tuple[list[Node], int]:
    """The tree cut to its last ``n`` calls as the page lists them, and how many calls it leaves out.

    The scopes that hold a kept call stay, so that it sits where it belongs.
    """
    calls = [node for root in roots for node in root.walk() if node.call is not None or node.item is not None]
    if len(calls) <= n:
        return roots, 0
    keep = {id(node) for node in calls[-n:]}

    def cut(node: Node) -> Node | None:
        kids = [c for c in map(cut, node.children) if c is not None]
        return replace(node, children=kids) if kids or id(node) in keep else None

    return [c for c in map(cut, roots) if c is not None], len(calls) - n
