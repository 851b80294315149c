"""Programs: generated workflows as data, drawn from a grammar of every kind of call and control.

A program is JSON data: the tools, undos, model calls, steps and child
workflows it declares, and a body, a list of nodes. ``_code.build`` turns it
into real decorated functions for one version of the code; ``_source``
prints it as Python. A node is a dict with an ``op``:

- ``tool`` / ``model`` / ``step`` / ``child``: call the named function with ``arg``;
- ``loop``: call a step ``times`` times (a decision loop, ``max_visits``);
- ``parallel``: ``durable.parallel`` of a step over ``items``;
- ``sleep``, ``recv`` (with a timeout), ``send`` (to the run itself), ``event``,
  ``stream``, ``interrupt``, ``random``;
- ``fail`` (the body raises), ``flaky`` (the first attempt of a step raises);
- ``patched``: ``old`` nodes, and in version 2 ``new`` ones behind ``durable.patched(id)``;
- ``versioned``: the nodes of version 1 (``v1``) and of version 2 (``v2``), an incompatible deploy.

A declaration's ``v2`` says how version 2 of the code changes it: ``default``
(a parameter with a default added) or ``required`` (a parameter without one).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

Node = dict[str, Any]
Program = dict[str, Any]

TOOL_KINDS = ("plain", "idem", "recon")
CHANGES = ("none", "step_default", "tool_default", "tool_required", "incompatible", "patched")
"""What version 2 of a program's code changes: nothing, a step or a tool signature, the calls, or a patch."""


def nodes_of(program: Program) -> Iterator[Node]:
    """Every node of the program: the body, the steps' and children's bodies, nested lists."""

    def walk(nodes: list[Node]) -> Iterator[Node]:
        for n in nodes:
            yield n
            for field in ("old", "new", "v1", "v2"):
                if isinstance(n.get(field), list):
                    yield from walk(n[field])

    yield from walk(program["body"])
    for decl in [*program["steps"].values(), *program["children"].values()]:
        yield from walk(decl["body"])


def dumps(program: Program) -> str:
    """The program as canonical JSON (what a seed's record and a worker process get)."""
    return json.dumps(program, sort_keys=True, separators=(",", ":"))


def used_names(program: Program) -> set[str]:
    """The declared names the nodes call (directly or through a compensation)."""
    names: set[str] = set()
    for n in nodes_of(program):
        if "fn" in n:
            names.add(n["fn"])
    for name in list(names):
        undo = program["tools"].get(name, {}).get("undo")
        if undo:
            names.add(undo)
    return names


def prune(program: Program) -> Program:
    """A copy without declarations no node uses (a shrunk program keeps what it calls)."""
    out = copy.deepcopy(program)
    while True:
        used = used_names(out)
        before = sum(len(out[s]) for s in ("tools", "undos", "models", "steps", "children"))
        for section in ("tools", "undos", "models", "steps", "children"):
            out[section] = {k: v for k, v in out[section].items() if k in used}
        if sum(len(out[s]) for s in ("tools", "undos", "models", "steps", "children")) == before:
            return out


class Grammar:
    """Draws programs from a seed: every kind of call and control, in small random shapes.

    Args:
        rng: The seeded random source (the only source of choice).
        size: About how many calls the workflow body makes.
    """

    def __init__(self, rng: random.Random, size: int = 6, *, fast: bool = False):
        self.rng = rng
        self.size = size
        self.fast = fast
        self.count = 0
        self.program: Program = {
            "tools": {},
            "undos": {},
            "models": {},
            "steps": {},
            "children": {},
            "body": [],
            "budget": None,
            "deadline": None,
            "change": "none",
        }

    def arg(self) -> str:
        self.count += 1
        return f"a{self.count}"

    def _name(self, section: str, prefix: str) -> str:
        return f"{prefix}{len(self.program[section])}"

    def tool(self, *, sync: bool | None = None) -> str:
        rng, p = self.rng, self.program
        name = self._name("tools", "t")
        decl: dict[str, Any] = {
            "kind": rng.choice(TOOL_KINDS),
            "undo": None,
            "sync": rng.random() < 0.2 if sync is None else sync,
            "retry": 0,
            "flaky": 0,
            "v2": None,
        }
        if rng.random() < 0.45:
            undo = self._name("undos", "u")
            p["undos"][undo] = {"kind": rng.choice(("plain", "idem"))}
            decl["undo"] = undo
        if decl["kind"] != "plain" and not decl["sync"] and rng.random() < 0.25:
            decl["retry"] = rng.choice((2, 3))
            decl["flaky"] = rng.choice((1, decl["retry"] - 1))
        p["tools"][name] = decl
        return name

    def model(self) -> str:
        name = self._name("models", "m")
        self.program["models"][name] = {"tokens": [self.rng.randint(5, 50), self.rng.randint(5, 50)]}
        return name

    def leaf(self, *, sync: bool = False) -> Node:
        """A call a step body makes: a tool, a model call (async only), or a failure."""
        rng, tools = self.rng, self.program["tools"]
        roll = rng.random()
        if sync:
            if roll < 0.1:
                return {"op": "fail"}
            pool = [t for t, d in tools.items() if d["sync"]]
            fn = rng.choice(pool) if pool and rng.random() < 0.5 else self.tool(sync=True)
            return {"op": "tool", "fn": fn, "arg": self.arg()}
        if roll < 0.08:
            return {"op": "fail"}
        if roll < 0.35:
            models = list(self.program["models"])
            fn = rng.choice(models) if models and rng.random() < 0.5 else self.model()
            return {"op": "model", "fn": fn, "arg": self.arg()}
        pool = list(tools)
        fn = rng.choice(pool) if pool and rng.random() < 0.3 else self.tool()
        return {"op": "tool", "fn": fn, "arg": self.arg()}

    def step(self, visits: int = 1, *, sync_ok: bool = True) -> str:
        rng = self.rng
        name = self._name("steps", "s")
        sync = sync_ok and rng.random() < 0.15
        body = [self.leaf(sync=sync) for _ in range(rng.randint(0, 2))]
        retry = 0
        if not sync and rng.random() < 0.2:  # retry= needs an async body
            retry = rng.choice((2, 3))
            body.insert(0, {"op": "flaky", "times": retry - 1})
        self.program["steps"][name] = {
            "visits": visits,
            "sync": sync,
            "retry": retry,
            "v2": None,
            "body": body,
        }
        return name

    def node(self, depth: int = 0) -> Node:
        rng = self.rng
        kinds = [
            ("tool", 6),
            ("model", 3),
            ("step", 4),
            ("loop", 1.5),
            ("parallel", 1.5),
            ("child", 1),
            ("sleep", 1.5),
            ("recv", 1),
            ("send", 0.7),
            ("event", 0.5),
            ("stream", 0.5),
            ("interrupt", 1),
            ("random", 0.4),
            ("fail", 0.6),
        ]
        op = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        if op == "tool":
            pool = list(self.program["tools"])
            fn = rng.choice(pool) if pool and rng.random() < 0.2 else self.tool()
            return {"op": "tool", "fn": fn, "arg": self.arg()}
        if op == "model":
            return {"op": "model", "fn": self.model(), "arg": self.arg()}
        if op == "step":
            return {"op": "step", "fn": self.step(), "arg": self.arg()}
        if op == "loop":
            times = rng.randint(2, 3)
            return {"op": "loop", "fn": self.step(visits=times), "arg": self.arg(), "times": times}
        if op == "parallel":
            base = self.arg()
            items = [f"{base}.{i}" for i in range(rng.randint(2, 3))]
            return {
                "op": "parallel",
                "fn": self.step(sync_ok=False),
                "name": f"p{self.count}",
                "items": items,
            }
        if op == "child":
            name = self._name("children", "c")
            self.program["children"][name] = {"body": [self.leaf() for _ in range(rng.randint(1, 2))]}
            return {"op": "child", "fn": name, "arg": self.arg()}
        if op == "sleep":
            return {"op": "sleep", "seconds": rng.choice((0.05, 0.2, 1) if self.fast else (1, 5, 30, 600))}
        if op == "recv":
            return {
                "op": "recv",
                "topic": f"q{self.count}",
                "timeout": rng.choice((0.2, 1) if self.fast else (5, 60)),
            }
        if op == "send":
            return {"op": "send", "topic": f"q{self.count}", "value": self.arg()}
        if op == "event":
            return {"op": "event", "key": f"e{self.count}", "value": self.arg()}
        if op == "stream":
            return {"op": "stream", "key": f"w{self.count}", "values": [self.arg(), self.arg()]}
        if op == "interrupt":
            return {"op": "interrupt", "prompt": self.arg()}
        if op == "random":
            return {"op": "random"}
        return {"op": "fail"}

    def draw(self) -> Program:
        """One program: a body of about ``size`` nodes, options, and what version 2 changes."""
        rng, p = self.rng, self.program
        p["body"] = [self.node() for _ in range(rng.randint(1, self.size))]
        if rng.random() < 0.25 and p["models"]:
            p["budget"] = {"max_model_calls": rng.randint(0, 3)}
        if rng.random() < 0.1 and not self.fast:
            p["deadline"] = rng.choice((20, 300))
        self._change()
        return p

    def _change(self) -> None:
        """What version 2 of the code changes (a deploy may bring it)."""
        rng, p = self.rng, self.program
        change = rng.choice(CHANGES)
        if change == "step_default" and p["steps"]:
            p["steps"][rng.choice(sorted(p["steps"]))]["v2"] = "default"
        elif change in ("tool_default", "tool_required") and p["tools"]:
            # A tool with an undo keeps its signature: its undo takes the tool's parameters, and
            # a deploy that changes one must change the other (code that does not is refused).
            plain = sorted(t for t, d in p["tools"].items() if not d.get("undo"))
            if plain:
                p["tools"][rng.choice(plain)]["v2"] = change.split("_")[1]
            else:
                change = "none"
        elif change == "incompatible":
            at = rng.randrange(len(p["body"]) + 1)
            p["body"].insert(at, {"op": "versioned", "v1": [], "v2": [self.node()]})
        elif change == "patched":
            at = rng.randrange(len(p["body"]) + 1)
            p["body"].insert(
                at, {"op": "patched", "id": f"change-{self.count}", "old": [], "new": [self.node()]}
            )
        else:
            change = "none"
        p["change"] = change


def generate(seed: int, size: int = 6, *, fast: bool = False) -> Program:
    """The program of ``seed`` (the same seed always gives the same program).

    ``fast``: sleeps and timeouts of a second at most, for runs on the real clock.
    """
    return Grammar(random.Random(f"program:{seed}"), size, fast=fast).draw()
