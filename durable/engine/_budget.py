"""Budgets: what a run may spend on model calls, and what it has spent.

A model call's receipt carries the token usage its response reported
(``usage`` in ``effect.receipt``, read from the recorded result by
``usage_of``). A run's usage is the sum over its model receipts and those of
its child runs, read from the logs, so a replayed call never counts twice and
a resume on another worker starts from what was spent. During a drive an
``Account`` adds each executed call; before the next model call executes,
``Account.check`` raises ``BudgetExhaustedError`` once a limit is reached,
which the runtime records as a ``blocked`` run with reason ``budget``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BudgetExhaustedError, ConfigurationError
from ..events import BUDGET_SET, EFFECT_INTENT, EFFECT_RECEIPT, RUN_RESTORED, SNAPSHOT

if TYPE_CHECKING:
    from ._recorded import Recorded
    from ._world import WorldCore

Json = dict[str, Any]

_INPUT_NAMES = ("input_tokens", "prompt_tokens", "request_tokens")
_OUTPUT_NAMES = ("output_tokens", "completion_tokens", "response_tokens")
_MODEL_NAMES = ("model", "model_name")


@dataclass(frozen=True)
class Budget:
    """What a run (with its child runs) may spend on model calls; ``None`` is no limit.

    Attributes:
        max_model_calls: Model calls that may execute.
        max_tokens: Input plus output tokens the model responses may report.
        max_cost: Cost, in the unit of ``prices``, the responses may add up to.
        prices: Model name to ``(input, output)`` cost per million tokens; a model
            not named costs nothing.

    Example:
        >>> import durable
        >>> durable.Budget(max_tokens=10_000, max_cost=0.5, prices={"gpt-5": (1.25, 10.0)})
        Budget(max_model_calls=None, max_tokens=10000, max_cost=0.5, prices={'gpt-5': (1.25, 10.0)})
    """

    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    prices: Mapping[str, tuple[float, float]] | None = None

    def __post_init__(self) -> None:
        for name in ("max_model_calls", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigurationError(
                    f"Budget({name}=...) takes a whole number >= 0 or None, not {value!r}."
                )
        cost = self.max_cost
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0
        ):
            raise ConfigurationError(f"Budget(max_cost=...) takes a number >= 0 or None, not {cost!r}.")
        for model, price in (self.prices or {}).items():
            ok = isinstance(price, tuple | list) and len(price) == 2
            if not ok or not all(isinstance(p, int | float) and p >= 0 for p in price):
                raise ConfigurationError(
                    f"Budget(prices=...) maps a model name to (input, output) cost per million "
                    f"tokens, e.g. {{'gpt-5': (1.25, 10.0)}}; {model!r} has {price!r}."
                )
        if self.prices is not None:
            object.__setattr__(
                self, "prices", {m: (float(p[0]), float(p[1])) for m, p in self.prices.items()}
            )

    def to_json(self) -> Json:
        """The budget as the log records it (``budget.set``)."""
        return {
            "max_model_calls": self.max_model_calls,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "prices": None if self.prices is None else {m: list(p) for m, p in self.prices.items()},
        }

    @classmethod
    def from_json(cls, data: Json) -> Budget:
        """A budget read back from ``to_json`` data."""
        prices = data.get("prices")
        return cls(
            max_model_calls=data.get("max_model_calls"),
            max_tokens=data.get("max_tokens"),
            max_cost=data.get("max_cost"),
            prices=None if prices is None else {m: (p[0], p[1]) for m, p in prices.items()},
        )

    def cost(self, model: str | None, input_tokens: int, output_tokens: int) -> float:
        """What ``input_tokens`` and ``output_tokens`` of ``model`` cost under ``prices``."""
        price = (self.prices or {}).get(model or "")
        if price is None:
            return 0.0
        return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000

    def spent(self, usage: Usage) -> str | None:
        """The limit ``usage`` has reached (``"max_tokens"``...), or ``None`` while some is left."""
        if self.max_model_calls is not None and usage.calls >= self.max_model_calls:
            return "max_model_calls"
        if self.max_tokens is not None and usage.input_tokens + usage.output_tokens >= self.max_tokens:
            return "max_tokens"
        if self.max_cost is not None and usage.cost >= self.max_cost:
            return "max_cost"
        return None


@dataclass(frozen=True)
class Usage:
    """What a run and its child runs spent on model calls.

    Attributes:
        calls: Model calls that executed (a replayed call counts once).
        input_tokens: Input (prompt) tokens their responses reported.
        output_tokens: Output (completion) tokens their responses reported.
        cost: Their cost under the run's budget's ``prices`` (0 without prices).
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages."""
        return Usage(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost + other.cost,
        )


def _int_of(source: Any, names: tuple[str, ...]) -> int:
    for name in names:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def usage_of(result: Any) -> Json | None:
    """The token usage a model call's result reports: ``{"input_tokens", "output_tokens", "model"}``.

    A result reports usage when it has a ``usage`` (a key of a mapping or an
    attribute) holding ``input_tokens``/``output_tokens`` (Anthropic,
    pydantic-ai), ``prompt_tokens``/``completion_tokens`` (OpenAI) or
    ``request_tokens``/``response_tokens``; its ``model`` or ``model_name``
    names the model for ``Budget.prices``. A list is the chunks of a stream
    (``stream_usage``). ``None``: the result reports none.
    """
    if result is None or isinstance(result, str | bytes | int | float | list):
        return stream_usage(result) if isinstance(result, list) else None
    usage = result.get("usage") if isinstance(result, Mapping) else getattr(result, "usage", None)
    if usage is None or isinstance(usage, str | bytes | int | float | list):
        return None
    out: Json = {"input_tokens": _int_of(usage, _INPUT_NAMES), "output_tokens": _int_of(usage, _OUTPUT_NAMES)}
    for name in _MODEL_NAMES:
        model = result.get(name) if isinstance(result, Mapping) else getattr(result, name, None)
        if isinstance(model, str):
            out["model"] = model
            break
    return out


_WRAPPERS = ("message", "response")
"""Where a stream event holds a whole message with its usage (Anthropic's ``message_start``,
OpenAI's ``response.completed``, a pydantic-ai stream's last chunk)."""


def chunk_usage(chunk: Any) -> Json | None:
    """The usage one chunk of a streamed model call reports, or ``None`` (most chunks report none).

    A chunk reports usage as a result does (``usage_of``: OpenAI's last chat
    chunk with ``stream_options={"include_usage": True}``, Anthropic's
    ``message_delta``), or inside its ``message`` or ``response``.
    """
    if not isinstance(chunk, Mapping):
        return (
            None if isinstance(chunk, str | bytes | int | float | list) or chunk is None else usage_of(chunk)
        )
    usage = usage_of(chunk)
    if usage is None:
        for name in _WRAPPERS:
            inner = chunk.get(name)
            if isinstance(inner, Mapping):
                usage = usage_of(inner)
                if usage is not None:
                    break
    return usage


def merged_usage(seen: Json | None, usage: Json) -> Json:
    """Two usages of one stream as one: the larger count of each kind (streams report running totals).

    Anthropic's ``message_start`` reports the input tokens and its
    ``message_delta`` the output tokens so far; OpenAI reports both once, in
    the last chunk: the larger of each is the stream's usage either way.
    """
    if seen is None:
        return usage
    out = {
        "input_tokens": max(seen["input_tokens"], usage["input_tokens"]),
        "output_tokens": max(seen["output_tokens"], usage["output_tokens"]),
    }
    model = seen.get("model") or usage.get("model")
    if model is not None:
        out["model"] = model
    return out


def stream_usage(chunks: list[Any]) -> Json | None:
    """The usage the chunks of a stream report together (``merged_usage``), or ``None``."""
    seen: Json | None = None
    for chunk in chunks:
        usage = chunk_usage(chunk)
        if usage is not None:
            seen = merged_usage(seen, usage)
    return seen


def receipt_usage(receipt: Json, budget: Budget | None) -> Usage:
    """What one model call's receipt adds to its run's usage."""
    usage = receipt.get("usage") or {}
    i, o = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    cost = 0.0 if budget is None else budget.cost(usage.get("model"), i, o)
    return Usage(1, i, o, cost)


def recorded_usage(rec: Recorded, budget: Budget | None) -> Usage:
    """The usage of one run's own model calls, from its index (each receipt once)."""
    total = Usage()
    for key, receipt in rec.receipts.items():
        intent = rec.intents.get(key)
        if receipt.get("usage") is not None or (intent is not None and intent.get("kind") == "model"):
            total = total.plus(receipt_usage(receipt, budget))
    return total


def recorded_budget(rec: Recorded) -> Budget | None:
    """The budget the run's log holds (the last ``budget.set``), or ``None``."""
    return None if rec.budget is None else Budget.from_json(rec.budget)


def child_run_ids(world: WorldCore, run_id: str, rec: Recorded) -> list[str]:
    """The runs started by ``run_id``: child workflows of its bodies and of its tool bodies."""
    return children_of(world, {run_id: rec})[run_id]


def children_of(world: WorldCore, recs: Mapping[str, Recorded]) -> dict[str, list[str]]:
    """The runs each of ``recs`` started: those its intents name, and those started in its tool bodies.

    A workflow started in a tool body takes an id under the tool's key
    (``_keys.tool_child_run_id``) and is found by its parent, through the
    log's index on it (``child_runs``) where the log has one.
    """
    found = {
        r: {i["child_run_id"] for i in rec.intents.values() if i.get("child_run_id")}
        for r, rec in recs.items()
    }
    with_tools = [r for r, rec in recs.items() if any(i.get("kind") == "tool" for i in rec.intents.values())]
    if with_tools:
        index = getattr(world.log, "child_runs", None)
        if index is not None:
            started: dict[str, list[str]] = index(with_tools)
        else:  # a log of another program: its run list, read once
            wanted, started = set(with_tools), {}
            for info in world.log.runs():
                if info.parent_run_id in wanted:
                    started.setdefault(info.parent_run_id, []).append(info.run_id)
        for parent in with_tools:
            found[parent].update(c for c in started.get(parent, ()) if c.startswith(f"{parent}:"))
    return {r: sorted(c) for r, c in found.items()}


def tree_usage(world: WorldCore, run_id: str, rec: Recorded, budget: Budget | None) -> Usage:
    """The usage of a run and of every run it started, read from their logs."""
    from ._loader import recover_log  # recovery reads the log through the runner's modules

    total = recorded_usage(rec, budget)
    for child in child_run_ids(world, run_id, rec):
        total = total.plus(tree_usage(world, child, recover_log(world.log, child), budget))
    return total


USAGE_TYPES = (SNAPSHOT, RUN_RESTORED, EFFECT_INTENT, EFFECT_RECEIPT, BUDGET_SET)
"""The events a run's usage and budget are read from (a compacted run's snapshot holds them too)."""


def _usage_records(world: WorldCore, run_ids: list[str]) -> dict[str, Recorded]:
    """The index of each run built from its usage events only, in one read of the log where it can."""
    from ._loader import recover_log  # recovery reads the log through the runner's modules
    from ._recorded import Recorded

    many = getattr(world.log, "rows_of_types", None)
    if many is None:
        return {r: recover_log(world.log, r) for r in run_ids}
    found: dict[str, list[tuple[int, str, str]]] = many(run_ids, USAGE_TYPES)
    return {r: Recorded.from_rows(found.get(r, []), r) for r in run_ids}


def runs_usage(world: WorldCore, run_ids: list[str]) -> dict[str, tuple[Usage, Budget | None]]:
    """What each run and the runs it started spent, and its budget: one read per level of the trees.

    The usage ``run_usage`` gives for each run, for a list of runs at once
    (``little runs --usage``): the logs are read for their usage events only,
    all the listed runs in one query, then their children in another, and so
    on down; each run is read once however many listed trees hold it.
    """
    recs: dict[str, Recorded] = {}
    kids: dict[str, list[str]] = {}
    todo = list(dict.fromkeys(run_ids))
    while todo:
        level = _usage_records(world, todo)
        recs.update(level)
        kids.update(children_of(world, level))
        todo = list(dict.fromkeys(c for r in level for c in kids[r] if c not in recs))

    def tree(run_id: str, budget: Budget | None, seen: set[str]) -> Usage:
        total = recorded_usage(recs[run_id], budget)
        for child in kids.get(run_id, ()):
            if child not in seen:
                seen.add(child)
                total = total.plus(tree(child, budget, seen))
        return total

    out: dict[str, tuple[Usage, Budget | None]] = {}
    for r in run_ids:
        budget = recorded_budget(recs[r])
        out[r] = (tree(r, budget, {r}), budget)
    return out


class Account:
    """A run tree's budget and spending during a drive (a child run shares its parent's).

    Plain counters, not a ``Usage`` per call: the check and the count run on
    every model call of a budgeted run.

    Attributes:
        budget: The limits.
        run_id: The run whose budget it is (the root of the tree).
        calls: Model calls the run tree executed, those of this drive included.
        input_tokens: Their input tokens.
        output_tokens: Their output tokens.
        cost: Their cost under ``budget.prices``.
    """

    __slots__ = ("budget", "calls", "cost", "input_tokens", "output_tokens", "run_id")

    def __init__(self, budget: Budget, used: Usage, run_id: str = ""):
        self.budget, self.run_id = budget, run_id
        self.calls, self.input_tokens, self.output_tokens, self.cost = (
            used.calls,
            used.input_tokens,
            used.output_tokens,
            used.cost,
        )

    @property
    def used(self) -> Usage:
        """What the run tree spent so far."""
        return Usage(self.calls, self.input_tokens, self.output_tokens, self.cost)

    def check(self, run_id: str, key: str) -> None:
        """Before the model call at ``key`` executes: ``BudgetExhaustedError`` once a limit is reached."""
        b = self.budget
        if (
            (b.max_model_calls is None or self.calls < b.max_model_calls)
            and (b.max_tokens is None or self.input_tokens + self.output_tokens < b.max_tokens)
            and (b.max_cost is None or self.cost < b.max_cost)
        ):
            return
        u, limit = self.used, b.spent(self.used) or ""
        raise BudgetExhaustedError(
            f"run {self.run_id!r} has spent its budget ({limit}={getattr(b, limit, None)!r}; used "
            f"{u.calls} model calls, {u.input_tokens}+{u.output_tokens} tokens, cost {u.cost:g}), so the "
            f"model call {key!r} of run {run_id!r} did not execute. Raise the budget with "
            f"durable.resume_run({self.run_id!r}, world=..., budget=durable.Budget(...)) or "
            f"`little resume {self.run_id} --budget JSON`.",
            run_id=self.run_id,
            path=key,
            limit=limit,
        )

    def add(self, receipt: Json) -> None:
        """Count the model call whose receipt is ``receipt``."""
        self.calls += 1
        usage = receipt.get("usage")
        if usage is None:
            return
        i, o = usage["input_tokens"], usage["output_tokens"]
        self.input_tokens += i
        self.output_tokens += o
        if self.budget.prices:
            self.cost += self.budget.cost(usage.get("model"), i, o)


def checked_budget(budget: Any) -> Budget:
    """``budget`` when it is a ``durable.Budget``; otherwise a ``ConfigurationError`` that says so."""
    if not isinstance(budget, Budget):
        raise ConfigurationError(
            f"budget= takes a durable.Budget (e.g. durable.Budget(max_tokens=10_000)), not {budget!r}."
        )
    return budget


def account_of(world: WorldCore, run_id: str, rec: Recorded) -> Account | None:
    """The account of a run that is the root of its tree: its budget and what the tree spent."""
    budget = recorded_budget(rec)
    if budget is None:
        return None
    return Account(budget, tree_usage(world, run_id, rec, budget), run_id)


def budget_of(text: str | None) -> Budget | None:
    """A budget stored as JSON text (a control record's ``budget``), or ``None``."""
    return None if not text else Budget.from_json(json.loads(text))


def run_usage(world: WorldCore, run_id: str) -> Usage:
    """What a run and the runs it started spent, from their logs (cost under the run's budget's prices)."""
    from ._loader import recover_log  # recovery reads the log through the runner's modules

    rec = recover_log(world.log, run_id)
    return tree_usage(world, run_id, rec, recorded_budget(rec))


def budget_text(budget: Budget) -> str:
    """A budget's limits in one short line (``calls<=20 tokens<=10000 cost<=0.5``), ``-`` for none."""
    parts = [
        f"{label}<={value:g}"
        for label, value in (
            ("calls", budget.max_model_calls),
            ("tokens", budget.max_tokens),
            ("cost", budget.max_cost),
        )
        if value is not None
    ]
    return " ".join(parts) or "-"


BUDGET_KEYS = ("max_model_calls", "max_tokens", "max_cost", "prices")


def budget_from_text(text: str, recorded: Json | None) -> Budget:
    """A budget from JSON text (``{"max_cost": 2.0}``), over the limits and prices ``recorded`` holds.

    Raises:
        ConfigurationError: The text is not a JSON object of budget keys, or a limit is bad.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(
            f'a budget is a JSON object such as {{"max_cost": 2.0}}, not {text!r}: {exc}'
        ) from None
    if not isinstance(data, dict) or set(data) - set(BUDGET_KEYS):
        raise ConfigurationError(
            f"a budget is a JSON object with the keys {', '.join(BUDGET_KEYS)}; got {text!r}."
        )
    return Budget.from_json({**(recorded or {}), **data})
