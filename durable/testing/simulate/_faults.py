"""The fault schedule: which process starts, crashes, is killed or deployed, and what a person decides.

A schedule is a list of actions, each ``[kind, {arguments}]`` (JSON data, so a
failing seed's schedule prints, shrinks and replays). A simulation either
draws each action from its seed when it reaches a point where the run is
quiet, choosing among the actions that make sense there, or plays a given
schedule, skipping the actions that do not apply at their point (a shrunk
schedule stays playable).

The kinds:

- ``start``: the run starts ``via`` a worker's queue, an in-process
  ``run_workflow`` call, or ``start_workflow`` driven in the background;
- ``worker``: a worker process of code ``version`` starts (it dies before its
  ``crash_at``-th append when that is set);
- ``call``: ``run_workflow`` with the run's id in a new process (the
  in-process path; ``answer`` answers its interrupt);
- ``kill``: the ``proc``-th live process is killed where it is;
- ``stop``: the ``proc``-th live worker stops gracefully;
- ``deploy``: version 2 of the code starts in a worker; ``mode`` ``replace``
  stops the version 1 workers, ``rolling`` leaves them alive beside it;
- ``cancel``, ``send``, ``answer``, ``resolve`` (``happened``), ``resume``
  (``accept`` the drift the run names, ``budget`` raised): a person's decision;
- ``wait``: time passes.

After each action the simulation lets the run go until it is quiet, or only
``until`` virtual seconds when that is set: the next action then meets the
run in flight (asleep in a drive, waiting for a message, undoing its calls).
"""

from __future__ import annotations

import random
from typing import Any

Action = list[Any]
"""``[kind, {arguments}]``."""


def crash_point(rng: random.Random) -> int | None:
    """Where a new process dies: before one of its first appends, or never."""
    return rng.randint(1, 16) if rng.random() < 0.7 else None


def horizon(rng: random.Random) -> float | None:
    """How long the simulation lets the run go after an action: until it is quiet, or a moment only."""
    return rng.choice((None, None, None, 0.5, 3.0, 20.0))


def first_actions(rng: random.Random) -> list[Action]:
    """How the run starts: its path, and a first worker when it goes through a queue."""
    via = rng.choices(("worker", "call", "background"), (5, 3, 2))[0]
    out: list[Action] = [["start", {"via": via, "crash_at": crash_point(rng)}]]
    if via == "worker":
        out.append(["worker", {"version": 1, "crash_at": crash_point(rng), "until": horizon(rng)}])
        if rng.random() < 0.3:
            out.append(["worker", {"version": 1, "crash_at": crash_point(rng), "until": horizon(rng)}])
    return out


def choose(
    rng: random.Random, state: dict[str, Any], topics: tuple[str, ...], versions: int
) -> Action | None:
    """The next action where the run is quiet, given what the simulation sees (``None``: it ends).

    ``state`` holds ``status``, ``reason``, ``live`` (live processes), ``workers``
    (live workers' versions), ``deployed`` (the newest version), ``via``,
    ``driven`` (a live driver holds the run) and ``key`` (an unknown commit's key).
    """
    status, reason = state["status"], state["reason"]
    options: list[tuple[float, Action]] = []
    version = state["deployed"]
    can_deploy = state["deployed"] < versions and rng.random() < 0.8

    def add(weight: float, kind: str, **args: Any) -> None:
        options.append((weight, [kind, args]))

    if status == "completed":
        return None
    if status in ("failed", "cancelled"):
        if rng.random() < 0.25:
            add(1, "resume", accept=False, budget=False)
            add(1, "worker", version=version, crash_at=crash_point(rng))
        else:
            return None
    if status in ("enqueued", "running"):
        if state["waiting"]:
            other = 1 if version == 2 else versions
            add(3, "worker", version=other if state["workers"] else version, crash_at=crash_point(rng))
            add(2, "resume", accept=True, budget=False)
        if not state["driven"]:
            add(4, "worker", version=version, crash_at=crash_point(rng))
            add(2 if state["via"] == "call" else 0.5, "call", crash_at=crash_point(rng))
        for i in range(state["live"]):
            add(1.5 / max(state["live"], 1), "kill", proc=i)
        add(1, "cancel")
        add(0.5, "wait", seconds=rng.choice((5, 60, 900)))
    if status == "blocked":
        if reason == "unknown_commit" and state["key"]:
            add(3, "resolve", happened=rng.random() < 0.5)
        add(2, "resume", accept=True, budget=reason == "budget")
        add(1, "cancel")
        if not state["workers"]:
            add(1, "worker", version=version, crash_at=crash_point(rng))
    if status == "interrupted":
        add(4, "answer", value=f"answer{rng.randint(0, 9)}")
        add(1, "cancel")
    if status in ("enqueued", "running", "blocked", "interrupted"):
        if topics:
            add(1, "send", topic=rng.choice(list(topics)), value=f"msg{rng.randint(0, 9)}")
        if can_deploy:
            add(1.5, "deploy", mode=rng.choice(("rolling", "replace")), crash_at=crash_point(rng))
        if state["workers"] > 1:
            add(0.5, "stop", proc=rng.randrange(state["workers"]))
    if not options:
        return None
    weights = [w for w, _ in options]
    action = rng.choices([a for _, a in options], weights)[0]
    if action[0] in ("cancel", "answer", "resolve", "resume"):
        action[1]["crash_at"] = crash_point(rng)  # the person's process drives the run on, and may die
    if action[0] != "wait":
        action[1]["until"] = horizon(rng)
    return action
