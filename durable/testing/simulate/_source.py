"""A program printed as Python: the source of ``code(version, ledger)``, which defines its functions.

The source is what the simulation runs (``_code.build`` compiles it) and
what a shrunk failure prints into its test, so the two cannot differ. The
factory defines, for one version of the code, a decorated fake for every
declaration (its body notes its side effect in the ledger) and the
workflow ``sim``, whose body is the program's nodes written out as calls.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

from durable import ConfigurationError

from ._program import Node, Program, nodes_of

HEADER = """from __future__ import annotations

from typing import Any

import durable
from durable.testing.simulate import Code, Ledger, SimulatedFailure
"""


def _lit(value: Any) -> str:
    return json.dumps(value)


def _retry(attempts: int) -> str:
    if not attempts:
        return ""
    return (
        f", retry=durable.RetryPolicy(max_attempts={_lit(attempts)}, backoff=0.5, retry_on=ConnectionError)"
    )


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.loops = 0

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)


def _arg(n: Node, inside: bool) -> str:
    """A call's argument: the node's, and inside a step or child run the step's own too."""
    return f'f"{n["arg"]}@{{arg}}"' if inside else _lit(n["arg"])


def _tool_args(program: Program, fn: str, arg: str) -> str:
    """Version 2 of a tool that gained a required parameter is called with it."""
    if program["tools"].get(fn, {}).get("v2") == "required":
        return f"*(({arg}, True) if version == 2 else ({arg},))"
    return arg


def _block(w: _Writer, program: Program, nodes: list[Node], depth: int, inside: bool) -> None:
    """An indented block: the statements of ``nodes``, or ``pass``."""
    if not nodes:
        w.line(depth, "pass")
    _nodes(w, program, nodes, depth, inside)


def _nodes(w: _Writer, program: Program, nodes: list[Node], depth: int, inside: bool) -> None:
    """The statements of ``nodes`` (``inside``: a step or child body, where ``arg`` is bound)."""
    for n in nodes:
        op = n["op"]
        sync_step = op == "step" and program["steps"].get(n.get("fn", ""), {}).get("sync")
        if op == "tool":
            call = f"{n['fn']}({_tool_args(program, n['fn'], _arg(n, inside))})"
            sync = program["tools"][n["fn"]]["sync"]
            w.line(depth, f"out.append({call if sync else 'await ' + call})")
        elif op == "model":
            w.line(depth, f'out.append((await {n["fn"]}({_arg(n, inside)}))["text"])')
        elif op == "step":
            call = f"{n['fn']}({_arg(n, inside)})"
            w.line(depth, f"out.append({call if sync_step else 'await ' + call})")
        elif op == "loop":
            sync = program["steps"][n["fn"]]["sync"]
            w.loops += 1
            i = f"i{w.loops}"
            base = f"{n['arg']}@{{arg}}" if inside else n["arg"]
            call = f'{n["fn"]}(f"{base}.{{{i}}}")'
            w.line(depth, f"for {i} in range({_lit(n['times'])}):")
            w.line(depth + 1, f"out.append({call if sync else 'await ' + call})")
        elif op == "parallel":
            fanout = f"durable.parallel({_lit(n['name'])}, {_lit(n['items'])}, {n['fn']}, key=str)"
            w.line(depth, f"out.append(await {fanout})")
        elif op == "child":
            w.line(depth, f'out.append(await {n["fn"]}({{"arg": {_arg(n, inside)}}}))')
        elif op == "sleep":
            w.line(depth, f"await durable.sleep({_lit(n['seconds'])})")
        elif op == "recv":
            w.line(depth, f"out.append(await durable.recv({_lit(n['topic'])}, timeout={_lit(n['timeout'])}))")
        elif op == "send":
            w.line(depth, f'await durable.send(inp["run"], {_lit(n["value"])}, topic={_lit(n["topic"])})')
        elif op == "event":
            w.line(depth, f"durable.set_event({_lit(n['key'])}, {_lit(n['value'])})")
        elif op == "stream":
            for v in n["values"]:
                w.line(depth, f"await durable.write_stream({_lit(n['key'])}, {_lit(v)})")
            w.line(depth, f"durable.close_stream({_lit(n['key'])})")
        elif op == "interrupt":
            w.line(depth, f"out.append(durable.interrupt({_lit(n['prompt'])}))")
        elif op == "random":
            w.line(depth, "out.append(round(durable.random(), 6))")
        elif op == "flaky":
            w.line(depth, f'ledger.flaky(f"step:{{arg}}", {_lit(n["times"])})')
        elif op == "fail":
            where = "at {arg}" if inside else "after {len(out)} calls"
            w.line(depth, f'raise SimulatedFailure(f"the body fails {where}")')
        elif op == "patched":
            w.line(depth, f"if version == 2 and durable.patched({_lit(n['id'])}):")
            _block(w, program, n["new"], depth + 1, inside)
            w.line(depth, "else:")
            _block(w, program, n["old"], depth + 1, inside)
        elif op == "versioned":
            w.line(depth, "if version == 2:")
            _block(w, program, n["v2"], depth + 1, inside)
            w.line(depth, "else:")
            _block(w, program, n["v1"], depth + 1, inside)


def _decorator(w: _Writer, kind: str, opts: list[str], depth: int) -> None:
    """``@durable.kind(...)`` on one line, or an option a line when long (as the formatter writes it)."""
    one = f"@durable.{kind}({', '.join(opts)})"
    if len(one) + 4 * depth <= 110:
        w.line(depth, one)
        return
    w.line(depth, f"@durable.{kind}(")
    for o in opts:
        w.line(depth + 1, f"{o},")
    w.line(depth, ")")


def _tool(w: _Writer, name: str, decl: dict[str, Any]) -> None:
    opts = [f"name={_lit(name)}"]
    if decl["kind"] == "idem":
        opts.append("idempotent=True")
    if decl["kind"] == "recon":
        opts.append("reconcile=ledger.reconcile")
    if decl["undo"]:
        opts.append(f"compensate={decl['undo']}")
    if decl["retry"]:
        opts.append(_retry(decl["retry"])[2:])
    prefix = "def" if decl["sync"] else "async def"
    body = f"return ledger.effect({_lit(name)}, arg, flaky={_lit(decl['flaky'])})"
    shapes = {None: "arg: str", "default": "arg: str, fast: bool = False", "required": "arg: str, fast: bool"}
    if decl["v2"]:
        w.line(1, "if version == 2:  # a deploy changes its signature")
        w.line(0, "")
        _decorator(w, "tool", opts, 2)
        w.line(2, f"{prefix} {name}({shapes[decl['v2']]}) -> str:")
        w.line(3, body)
        w.line(1, "else:")
        w.line(0, "")
        depth = 2
    else:
        depth = 1
    _decorator(w, "tool", opts, depth)
    w.line(depth, f"{prefix} {name}(arg: str) -> str:")
    w.line(depth + 1, body)
    w.line(0, "")


def _step(w: _Writer, program: Program, name: str, decl: dict[str, Any]) -> None:
    opts = [f"name={_lit(name)}", f"max_visits={_lit(decl['visits'])}"]
    if decl["retry"]:
        opts.append(_retry(decl["retry"])[2:])
    prefix = "def" if decl["sync"] else "async def"

    def define(depth: int, params: str) -> None:
        _decorator(w, "step", opts, depth)
        w.line(depth, f"{prefix} {name}({params}) -> list[Any]:")
        w.line(depth + 1, "out: list[Any] = []")
        _nodes(w, program, decl["body"], depth + 1, True)
        w.line(depth + 1, "return out")

    if decl["v2"] == "default":
        w.line(1, "if version == 2:  # a deploy gives it a parameter with a default")
        w.line(0, "")
        define(2, "arg: str, extra: int = 0")
        w.line(1, "else:")
        w.line(0, "")
        define(2, "arg: str")
    else:
        define(1, "arg: str")
    w.line(0, "")


_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


_ARG = re.compile(r"[A-Za-z0-9_.\-]+\Z")


def _check_names(program: Program) -> None:
    """Names and arguments the source writes out as code are plain: identifiers, and ``a1``-like words."""
    declared: set[str] = set()
    for section in ("tools", "undos", "models", "steps", "children"):
        for name in program[section]:
            if not _NAME.match(name) or keyword.iskeyword(name):
                raise ConfigurationError(f"a program's {section} are named by identifiers, not {name!r}.")
            declared.add(name)
    for n in nodes_of(program):
        if "fn" in n and n["fn"] not in declared:
            raise ConfigurationError(f"a program's node calls {n['fn']!r}, which it does not declare.")
        if "arg" in n and not _ARG.match(str(n["arg"])):
            raise ConfigurationError(f"a program's arguments are plain words, not {n['arg']!r}.")


def source(program: Program) -> str:
    """The module text that defines ``code(version, ledger)`` for ``program``.

    Raises:
        ConfigurationError: A declaration's name is not an identifier.
    """
    _check_names(program)
    w = _Writer()
    w.line(0, "")
    w.line(0, "")
    w.line(0, "def code(version: int, ledger: Ledger) -> Code:")
    w.line(1, f'"""Version 1 or 2 of the simulated code (version 2: {program["change"]})."""')
    w.line(0, "")
    for name, decl in program["undos"].items():
        flag = ", idempotent=True" if decl["kind"] == "idem" else ""
        w.line(1, f"@durable.tool(name={_lit(name)}{flag})")
        w.line(1, f"async def {name}(arg: str, result: str) -> str:")
        w.line(2, f"return ledger.undo({_lit(name)}, arg, result)")
        w.line(0, "")
    for name, decl in program["models"].items():
        w.line(1, f'@durable.model_call(name={_lit(name)}, slot="writer")')
        w.line(1, f"async def {name}(arg: str) -> dict[str, Any]:")
        w.line(
            2, f"return ledger.model({_lit(name)}, arg, {_lit(decl['tokens'][0])}, {_lit(decl['tokens'][1])})"
        )
        w.line(0, "")
    for name, decl in program["tools"].items():
        _tool(w, name, decl)
    for name, decl in program["steps"].items():
        _step(w, program, name, decl)
    for name, decl in program["children"].items():
        w.line(1, f'@durable.workflow(name="sim_{name}")')
        w.line(1, f"async def {name}(inp: dict[str, str]) -> list[Any]:")
        w.line(2, "out: list[Any] = []")
        w.line(2, 'arg = inp["arg"]')
        _nodes(w, program, decl["body"], 2, True)
        w.line(2, "return out")
        w.line(0, "")
    uses = ", ".join(program["undos"])
    w.line(1, f'@durable.workflow(name="sim"{f", uses=[{uses}]" if uses else ""})')
    w.line(1, "async def sim(inp: dict[str, str]) -> list[Any]:")
    w.line(2, "out: list[Any] = []")
    _nodes(w, program, program["body"], 2, False)
    w.line(2, "return out")
    w.line(0, "")
    children = ", ".join(f'"{n}": {n}' for n in program["children"])
    w.line(1, f"return Code(version, sim, {{{children}}})")
    return "\n".join(w.lines) + "\n"
