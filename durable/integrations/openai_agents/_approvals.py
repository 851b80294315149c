"""Tool calls that need approval, answered from anywhere through ``durable.interrupt``.

When an agent run stops on interruptions (tools with ``needs_approval``), the
durable run asks ``durable.interrupt(value)`` where ``value`` names each
pending call: its call id, tool, arguments and agent. The run waits (status
``interrupted``) until ``handle.answer(...)``, ``little answer`` or the
inspector answers; the resumed run replays up to the same interruptions, gets
the answer, approves or rejects each call on the SDK's ``RunState`` and goes
on. The answer is ``True`` (approve all), ``False`` (reject all: the SDK's
rejection message reaches the model), or a dict of call id to ``True`` /
``False`` / ``{"approve": False, "message": "..."}``; calls it leaves out are
asked again, and an answer of another shape is asked again with ``problem``
saying what is wrong, so a run is never stuck on a typo.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import durable

KIND = "openai_agents.approval"


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def request(agent_name: str, items: list[Any], problem: str | None = None) -> dict[str, Any]:
    """The interrupt value of pending approvals: each call's id, tool, arguments and agent."""
    value: dict[str, Any] = {
        "kind": KIND,
        "agent": agent_name,
        "approvals": [
            {
                "call_id": item.call_id,
                "tool": item.tool_name,
                "arguments": _arguments(item.arguments),
                "agent": getattr(item.agent, "name", None),
            }
            for item in items
        ],
    }
    if problem is not None:
        value["problem"] = problem
    return value


def _decision(answer: Any, call_id: str) -> tuple[bool, str | None] | None:
    """One call's decision in an answer: (approved, rejection message), or ``None`` when left out."""
    if isinstance(answer, bool):
        return answer, None
    if not isinstance(answer, Mapping):
        raise _bad(answer)
    if call_id not in answer:
        return None
    one = answer[call_id]
    if isinstance(one, bool):
        return one, None
    if isinstance(one, Mapping) and isinstance(one.get("approve"), bool):
        message = one.get("message")
        return one["approve"], message if isinstance(message, str) else None
    raise _bad(answer)


def _bad(answer: Any) -> durable.ConfigurationError:
    return durable.ConfigurationError(
        f"a tool approval was answered with {answer!r}; answer True (approve every pending call), "
        'False (reject every one), or a dict of call id to True, False or {"approve": false, '
        '"message": "why"}.'
    )


def apply(answer: Any, items: list[Any], state: Any) -> list[Any]:
    """Approve or reject each pending call on ``state`` as ``answer`` says; the calls it left out.

    Raises:
        ConfigurationError: The answer is of another shape, or names calls that are not
            pending (nothing is approved or rejected then).
    """
    known = {item.call_id for item in items}
    if isinstance(answer, Mapping):
        unknown = sorted(set(answer) - known)
        if unknown:
            raise durable.ConfigurationError(
                f"a tool approval answered call ids {unknown} that are not pending; the pending "
                f"calls are {sorted(known)}."
            )
    decisions = [(item, _decision(answer, item.call_id)) for item in items]
    left = []
    for item, decision in decisions:
        if decision is None:
            left.append(item)
        elif decision[0]:
            state.approve(item)
        elif decision[1] is not None:
            state.reject(item, rejection_message=decision[1])
        else:
            state.reject(item)
    return left


def answered(agent_name: str, items: list[Any], state: Any) -> None:
    """Ask until every pending call of ``items`` is approved or rejected on ``state``."""
    problem = None
    while items:
        answer = durable.interrupt(request(agent_name, items, problem))
        try:
            items, problem = apply(answer, items, state), None
        except durable.ConfigurationError as exc:  # asked again, saying why
            problem = str(exc)
