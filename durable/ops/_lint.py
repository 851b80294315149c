"""``little lint``: static determinism checks of workflow and step bodies.

The source is read with ``ast`` and never imported. A function is a workflow,
step, tool or model call when it carries one of durable's decorators as the
module imports them (``@workflow``, ``@durable.step(max_visits=3)``,
``@dl.tool``...). Workflow bodies are checked, and so are the module's own
undecorated functions they call (transitively). A step's output is recorded,
so what its body reads replays with it: a step body is checked only when it
makes a durable call (``_may_call_durably``), whose path a value read in the
body could change when the step runs again. Tool and model call bodies are
where the world is met, so they are not checked. The rules live in
``durable.ops._lint_rules``.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ._lint_rules import (
    AWAITED_INTERRUPT,
    DURABLE_ASYNC,
    ENVIRONMENT,
    ENVIRONMENT_NAMES,
    IO,
    IO_METHODS,
    IO_PREFIXES,
    NOT_AWAITED,
    STEP_IN_LOOP,
    SYNTAX,
    Rule,
    classify,
)

_KINDS = {"workflow", "step", "tool", "model_call"}
_RECORDS_NOTHING = frozenset({"durable.current_run", "durable.idempotency_key"})
"""Calls of durable's API inside a step that are no durable call (they read the run's identity)."""
_IGNORE = re.compile(r"#\s*durable:\s*ignore(?:\[([^\]]*)\])?")
_SKIP_DIRS = {"__pycache__", "node_modules", "venv", "site-packages"}


@dataclass(frozen=True)
class LintFinding:
    """One finding: where it is, which rule, and what to do."""

    path: str
    line: int
    col: int
    rule: Rule
    message: str

    def as_dict(self) -> dict[str, Any]:
        """The finding as JSON-able data (``little lint --json``)."""
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.rule.code,
            "rule": self.rule.name,
            "message": self.message,
        }


@dataclass
class _Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    kind: str | None  # None for an undecorated helper
    max_visits: bool = False  # a @step with max_visits= other than 1


@dataclass
class _Module:
    path: str
    imports: dict[str, str] = field(default_factory=dict)
    functions: dict[str, _Function] = field(default_factory=dict)  # "name" or "self.name"
    findings: list[LintFinding] = field(default_factory=list)
    checked: set[int] = field(default_factory=set)

    def dotted(self, node: ast.expr) -> str | None:
        """``node`` (a name or attribute chain) spelled out through the imports, e.g. ``time.time``."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.imports.get(node.id, node.id))
        return ".".join(reversed(parts))

    def kind_of(self, decorator: ast.expr) -> tuple[str | None, bool]:
        """The durable kind a decorator makes (or ``None``) and whether it sets ``max_visits`` above 1."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = self.dotted(target) or ""
        head, _, kind = name.rpartition(".")
        if kind not in _KINDS or not (head == "durable" or head.startswith("durable.")):
            return None, False
        visits = False
        if isinstance(decorator, ast.Call):
            for kw in decorator.keywords:
                if kw.arg == "max_visits":
                    visits = not (isinstance(kw.value, ast.Constant) and kw.value.value == 1)
        return kind, visits


def _read_imports(module: _Module, tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    module.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    module.imports[head] = head
        elif isinstance(node, ast.ImportFrom):  # a relative import keeps its dots: ``.tools.charge``
            base = "." * node.level + (node.module or "")
            sep = "." if node.module else ""
            for alias in node.names:
                module.imports[alias.asname or alias.name] = f"{base}{sep}{alias.name}"


def _read_functions(module: _Module, tree: ast.Module) -> None:
    def add(fn: ast.FunctionDef | ast.AsyncFunctionDef, key: str) -> None:
        kind, visits = None, False
        for decorator in fn.decorator_list:
            kind, visits = module.kind_of(decorator)
            if kind is not None:
                break
        module.functions[key] = _Function(fn, kind, visits)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            add(node, node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    add(item, f"self.{item.name}")


def _ignored(source: str) -> dict[int, set[str]]:
    """Line → the codes and names silenced there (``*`` for all)."""
    out: dict[int, set[str]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and (m := _IGNORE.search(tok.string)):
                names = {n.strip() for n in (m.group(1) or "*").split(",") if n.strip()}
                out.setdefault(tok.start[0], set()).update(names or {"*"})
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


class _BodyCheck(ast.NodeVisitor):
    """Walks one workflow, step or helper body and records what breaks replay."""

    def __init__(self, module: _Module, where: str) -> None:
        self.module = module
        self.where = where
        self.scopes: list[str] = []  # "loop" and "branch", innermost last
        self.helpers: list[tuple[_Function, str]] = []

    def report(self, node: ast.AST, rule: Rule, what: str) -> None:
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1
        message = f"{what} in {self.where}: {rule.advice}"
        self.module.findings.append(LintFinding(self.module.path, line, col, rule, message))

    def _loop(self, node: ast.AST) -> None:
        self.scopes.append("loop")
        self.generic_visit(node)
        self.scopes.pop()

    visit_For = visit_AsyncFor = visit_While = _loop
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _loop

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        branch = any(
            isinstance(item.context_expr, ast.Call)
            and (self.module.dotted(item.context_expr.func) or "")
            in {"durable.branch", "durable.engine._parallel.branch"}
            for item in node.items
        )
        if branch:
            self.scopes.append("branch")
        self.generic_visit(node)
        if branch:
            self.scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._nested(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._nested(node)

    def _nested(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if not any(self.module.kind_of(d)[0] for d in node.decorator_list):  # a nested @tool meets the world
            self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Call):
            self._unawaited(node.value)
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        call = node.value
        if isinstance(call, ast.Call) and self.module.dotted(call.func) == "durable.interrupt":
            self.report(node, AWAITED_INTERRUPT, "await durable.interrupt()")
        self.generic_visit(node)

    def _unawaited(self, call: ast.Call) -> None:
        key = self._local_key(call.func)
        fn = self.module.functions.get(key) if key else None
        if fn is not None and fn.kind is not None and isinstance(fn.node, ast.AsyncFunctionDef):
            self.report(call, NOT_AWAITED, f"the {fn.kind} {fn.node.name}() is called without await")
            return
        name = self.module.dotted(call.func) or ""
        head, _, tail = name.rpartition(".")
        if head == "durable" and tail in DURABLE_ASYNC:
            self.report(call, NOT_AWAITED, f"{name}() is called without await")

    def _local_key(self, func: ast.expr) -> str | None:
        return _local_key(self.module, func)

    def visit_Call(self, node: ast.Call) -> None:
        key = self._local_key(node.func)
        fn = self.module.functions.get(key) if key else None
        if fn is not None:
            if fn.kind == "step" and not fn.max_visits and self._in_loop():
                self.report(node, STEP_IN_LOOP, f"the step {fn.node.name}() is called in a loop")
            elif fn.kind is None:
                self.helpers.append((fn, f"{fn.node.name}() (called from {self.where})"))
        else:
            name = self.module.dotted(node.func)
            rule = classify(name) if name else None
            if rule is not None:
                self.report(node, rule, f"{name}()")
            elif (
                rule is None
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in IO_METHODS
                and not (name or "").startswith("durable.")
            ):
                self.report(node, IO, f".{node.func.attr}()")
        self.generic_visit(node)

    def _in_loop(self) -> bool:
        if "loop" not in self.scopes:
            return False
        last_loop = len(self.scopes) - 1 - self.scopes[::-1].index("loop")
        return "branch" not in self.scopes[last_loop:]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and self.module.dotted(node) in ENVIRONMENT_NAMES:
            self.report(node, ENVIRONMENT, str(self.module.dotted(node)))
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self.module.imports.get(node.id) in ENVIRONMENT_NAMES:
            self.report(node, ENVIRONMENT, self.module.imports[node.id])


def _local_key(module: _Module, func: ast.expr) -> str | None:
    """The key of the module's own function a call names (``name`` or ``self.name``), if any."""
    if isinstance(func, ast.Name) and func.id not in module.imports:
        return func.id
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in {"self", "cls"}
    ):
        return f"self.{func.attr}"
    return None


def _from_elsewhere(module: _Module, func: ast.expr) -> bool:
    """Whether a call names a function imported from outside the standard library and HTTP clients.

    Such a function may be a durable call of another module of the application
    (a tool of ``tools.py``), which the linter does not read.
    """
    while isinstance(func, ast.Attribute):
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in module.imports:
        return False
    origin = module.imports[func.id]
    top = origin.split(".")[0]
    return not (top == "durable" or top in sys.stdlib_module_names or origin.startswith(IO_PREFIXES))


def _may_call_durably(module: _Module, fn: _Function) -> bool:
    """Whether a body makes a durable call, directly or through the module's own helpers.

    A durable call is a call of one of the module's decorated functions, of
    durable's API (``durable.sleep``, ``durable.now``, ``durable.branch``...),
    or an awaited call of a function imported from another module of the
    application (it may be a tool there; the linter does not read that module).
    """
    pending, seen = [fn], set()
    while pending:
        current = pending.pop()
        if id(current.node) in seen:
            continue
        seen.add(id(current.node))
        for node in (n for statement in current.node.body for n in ast.walk(statement)):
            if (
                isinstance(node, ast.Await)
                and isinstance(node.value, ast.Call)
                and _from_elsewhere(module, node.value.func)
            ):
                return True
            if not isinstance(node, ast.Call):
                continue
            key = _local_key(module, node.func)
            target = module.functions.get(key) if key else None
            if target is not None:
                if target.kind is not None:
                    return True
                pending.append(target)
            elif (name := module.dotted(node.func) or "").startswith(
                "durable."
            ) and name not in _RECORDS_NOTHING:
                return True
    return False


def _check(module: _Module, fn: _Function, where: str) -> None:
    pending = [(fn, where)]
    while pending:
        current, label = pending.pop()
        if id(current.node) in module.checked:
            continue
        module.checked.add(id(current.node))
        visitor = _BodyCheck(module, label)
        for statement in current.node.body:
            visitor.visit(statement)
        pending.extend(visitor.helpers)


def lint_source(source: str, path: str = "<string>") -> list[LintFinding]:
    """The findings in one module's source, sorted by line (silenced lines left out)."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return [LintFinding(path, exc.lineno or 0, exc.offset or 0, SYNTAX, f"{exc.msg}: {SYNTAX.advice}")]
    module = _Module(path)
    _read_imports(module, tree)
    _read_functions(module, tree)
    for fn in module.functions.values():
        if fn.kind == "workflow" or (fn.kind == "step" and _may_call_durably(module, fn)):
            _check(module, fn, f"{fn.kind} {fn.node.name!r}")
    ignored = _ignored(source)
    seen: set[tuple[int, int, str]] = set()
    out = []
    for f in sorted(module.findings, key=lambda f: (f.line, f.col, f.rule.code)):
        silenced = ignored.get(f.line, set())
        if {"*", f.rule.code, f.rule.name} & silenced or (f.line, f.col, f.rule.code) in seen:
            continue
        seen.add((f.line, f.col, f.rule.code))
        out.append(f)
    return out


def lint_files(target: str) -> list[Path]:
    """The ``.py`` files ``target`` names: a file, a directory (recursively) or a module name.

    A module name is looked up on ``sys.path`` (and the working directory)
    without importing it or its parent packages.
    """
    path = Path(target)
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*.py")
            if not any(part in _SKIP_DIRS or part.startswith(".") for part in p.relative_to(path).parts[:-1])
        )
    if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target):
        rel = Path(*target.split("."))
        for entry in ["", *sys.path]:
            base = Path(entry or ".")
            if (base / rel).with_suffix(".py").is_file():
                return [(base / rel).with_suffix(".py")]
            if (base / rel / "__init__.py").is_file():
                return lint_files(str(base / rel))
    raise ConfigurationError(
        f"nothing to lint at {target!r}: it is no file, no directory and no module on the path; "
        "pass a .py file, a directory or a module name such as myapp.flows"
    )


def lint(target: str) -> list[LintFinding]:
    """Every finding in the files ``target`` names (see ``lint_files``)."""
    return lint_paths(lint_files(target))


def lint_paths(paths: list[Path]) -> list[LintFinding]:
    """Every finding in ``paths``, file by file."""
    out: list[LintFinding] = []
    for path in paths:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"cannot read {str(path)!r} to lint it: {exc}") from None
        out += lint_source(source, str(path))
    return out


__all__ = ["LintFinding", "lint", "lint_files", "lint_paths", "lint_source"]
