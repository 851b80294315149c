"""``little outbox`` and ``little schedules``: the outbox and the schedules of a data directory."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..engine import WorldCore
from ..runtime import Schedules
from ._registry import CliError, command, table


def _outbox_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=["list", "retry"],
        default="list",
        help="list the entries (default), or retry KEY: put a dead entry back for the dispatchers",
    )
    p.add_argument("key", nargs="?", help="with retry: the entry's key (as the list shows it)")
    p.add_argument("--dead", action="store_true", help="list only the dead letter")
    p.add_argument("--all", action="store_true", help="list delivered entries too")


def _outbox_table(data: Any) -> str:
    if isinstance(data, dict):
        return f"{data['key']}: {data['state']} (a worker's dispatcher calls it again)"
    rows = [{**r, "error": r["error"] or ""} for r in data]
    return table(rows, ["key", "tool", "state", "attempts", "error"])


@command(
    "outbox",
    "list pending and dead outbox entries (@tool(outbox=True) calls), or retry a dead one",
    _outbox_args,
    human=_outbox_table,
)
def _outbox(world: WorldCore, a: argparse.Namespace) -> Any:
    store = world.open_outbox()
    if a.action == "retry":
        if not a.key:
            raise CliError("little outbox retry takes the KEY of a dead entry (see `little outbox --dead`)")
        got = store.retry_dead(a.key, world.clock())
        if got is None:
            entry = store.get(a.key)
            where = f"it is {entry.state}" if entry is not None else "there is no such entry"
            raise CliError(f"outbox entry {a.key!r} is not in the dead letter: {where}")
        return {"key": got.key, "state": got.state}
    if a.key:
        raise CliError("little outbox lists entries; to re-drive one, use `little outbox retry KEY`")
    if a.dead:
        entries = store.entries("dead")
    elif a.all:
        entries = store.entries()
    else:
        entries = [e for e in store.entries() if e.state != "delivered"]
    return [dataclasses.asdict(e) for e in entries]


def _schedules_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=["list", "pause", "resume", "delete"],
        default="list",
        help="list the schedules (default), or pause, resume or delete the schedule NAME",
    )
    p.add_argument("name", nargs="?", help="the schedule's name, with pause, resume and delete")


def _show(data: Any) -> str:
    rows = data if isinstance(data, list) else [data]
    for r in rows:
        r["when"] = r["cron"] if r["cron"] is not None else f"every {r['every']:g} s"
        r["next_tick"] = r["next_tick"] or ("(paused)" if r["paused"] else "")
        r["handled_until"] = r["handled_until"] or "(not seen by a worker yet)"
    return table(rows, ["name", "workflow", "when", "timezone", "catch_up", "next_tick", "handled_until"])


@command(
    "schedules",
    "list schedules with their next tick, or pause, resume or delete one",
    _schedules_args,
    human=_show,
)
def _schedules(world: WorldCore, a: argparse.Namespace) -> Any:
    schedules = Schedules(world)
    if a.action == "list":
        return [dataclasses.asdict(s) for s in schedules.list()]
    if not a.name:
        raise CliError(f"little schedules {a.action} takes the NAME of a schedule (see `little schedules`)")
    if a.action == "delete":
        info = schedules.get(a.name)
        schedules.delete(a.name)
        return dataclasses.asdict(info)
    info = schedules.pause(a.name) if a.action == "pause" else schedules.resume(a.name)
    return dataclasses.asdict(info)
