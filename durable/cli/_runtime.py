"""``little worker``, ``cancel`` and ``resume``: the runtime from the shell."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from typing import IO, Any

from ..engine import Budget, WorldCore, budget_from_text, outcome_of, recover_log, spec_of
from ..errors import ConfigurationError
from ..events import RUN_INTERRUPTED
from ..runtime import Queue, Worker, cancel_run, default_driver, driver_of, resume_run, run_status
from ._registry import CliError, command, run_id_arg


def _import(target: str, command: str = "worker") -> tuple[Any, Any]:
    """The module and the object named ``MODULE:ATTR``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"little {command} takes MODULE:ATTR, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise CliError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise CliError(f"{module_name!r} has no {attr!r}")
    return module, obj


def show_logs(stream: IO[str] | None = None) -> logging.Handler:
    """Print the ``durable`` logger's records (INFO and above) to stderr, for long-running commands.

    Args:
        stream: Where the records go instead of stderr.

    Returns:
        The handler added to the ``durable`` logger.
    """
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("durable")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def _worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="a @workflow, a list of workflows, or a Worker, served with every option it was made with",
    )
    p.add_argument(
        "--queue",
        action="append",
        default=[],
        help="a queue to claim from as well (repeatable; a Queue of the module keeps its limits)",
    )
    p.add_argument(
        "--concurrency", type=int, default=None, help="runs driven at once (default: the Worker's, or 100)"
    )
    p.add_argument(
        "--name", default=None, help="the worker's name in claims (default: the Worker's, or host:pid:random)"
    )


def build_worker(
    world: WorldCore, target: str, queues: list[str], concurrency: int | None, name: str | None
) -> Worker:
    """The worker that ``little worker`` runs."""
    module, obj = _import(target)
    known = {q.name: q for q in vars(module).values() if isinstance(q, Queue)}
    if concurrency is not None and concurrency < 1:
        raise CliError("--concurrency must be at least 1")
    served: list[Queue] = list(obj.queues) if isinstance(obj, Worker) else []
    for qn in queues:
        if all(q.name != qn for q in served):
            served.append(known.get(qn) or Queue(qn))
    changes: dict[str, Any] = {"queues": served}
    if concurrency is not None:
        changes["concurrency"] = concurrency
    if name is not None:
        changes["name"] = name
    if isinstance(obj, Worker):  # served as it is configured, but for the options given here
        return obj.on(world, **changes)
    if spec_of(obj) is not None:
        workflows = [obj]
    elif isinstance(obj, list | tuple):
        workflows = list(obj)
    else:
        raise CliError(f"{target!r} is not a @workflow, a list of workflows or a Worker")
    # The workflow objects carry their specs; re-wrap plain spec functions.
    return Worker(world, workflows=[_decorated(module, w) for w in workflows], **changes)


def _decorated(module: Any, fn: Any) -> Any:
    if spec_of(fn) is not None:
        return fn
    for v in vars(module).values():
        spec = spec_of(v)
        if spec is not None and spec.fn is fn:
            return v
    raise CliError(f"{fn!r} is not a @workflow")


@command("worker", "drive queued runs and recover runs whose driver died, until SIGTERM", _worker_args)
def _worker(world: WorldCore, a: argparse.Namespace) -> Any:
    try:
        worker = build_worker(world, a.target, a.queue, a.concurrency, a.name)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc
    show_logs()
    queues = ", ".join(q.name for q in worker.queues) or "(none: recovery only)"
    print(
        f"little worker {worker.name}: workflows {', '.join(sorted(worker.specs))}; queues {queues}",
        flush=True,
    )
    asyncio.run(worker.run(announce=False))  # it printed its own line
    print(f"little worker {worker.name}: stopped", flush=True)
    return None


def _cancel_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    p.add_argument(
        "--workflow",
        metavar="MODULE:FUNCTION",
        help="the run's workflow: a run nobody drives that has confirmed calls to undo (compensate=) "
        "is driven here to its cancellation, its compensations run",
    )


@command("cancel", "cancel a run: it stops at its next durable call (an enqueued run at once)", _cancel_args)
def _cancel(world: WorldCore, a: argparse.Namespace) -> Any:
    async def go() -> dict[str, Any]:
        status = cancel_run(world, a.run_id, workflows=workflow_of(a))
        task = default_driver(world).tasks.get(a.run_id)
        if task is not None:
            await asyncio.wait([task])  # its compensations, driven here in the foreground
            status = run_status(world, a.run_id).status
        detail = run_status(world, a.run_id)
        out: dict[str, Any] = {"run_id": a.run_id, "status": status, "reason": detail.reason}
        if status in ("interrupted", "blocked") and task is None:
            out["note"] = (
                "nothing drives it and it has confirmed calls to undo (compensate=): cancel it "
                "with --workflow MODULE:FUNCTION so that its compensations run here"
            )
        return out

    return asyncio.run(go())


def workflow_of(a: argparse.Namespace) -> list[Any]:
    """The workflow named by ``--workflow MODULE:FUNCTION``, as a list (empty without it)."""
    return [_import(a.workflow)[1]] if getattr(a, "workflow", None) else []


def _resume_args(p: argparse.ArgumentParser) -> None:
    run_id_arg(p)
    p.add_argument(
        "keys",
        nargs="*",
        metavar="KEY",
        help="with --accept-drift: the drift keys to accept (`little doctor` lists them)",
    )
    p.add_argument(
        "--accept-drift",
        action="store_true",
        help="accept the drift under the KEYs given after the run id (a run a worker left because of drift)",
    )
    p.add_argument(
        "--workflow",
        metavar="MODULE:FUNCTION",
        help="drive a run without a queue here until it stops (otherwise a worker drives it)",
    )
    p.add_argument(
        "--budget",
        metavar="JSON",
        help="the run's new budget, e.g. '{\"max_cost\": 2.0}' (keys: max_model_calls, max_tokens, "
        "max_cost, prices); the prices of the run's budget are kept unless given",
    )


def budget_arg(world: WorldCore, run_id: str, text: str | None) -> Budget | None:
    """``--budget JSON`` as a ``Budget``: the given limits over the run's recorded budget."""
    if text is None:
        return None
    try:
        return budget_from_text(text, recover_log(world.log, run_id).budget)
    except ConfigurationError as exc:
        raise CliError(f"--budget: {exc}") from None


def _check_resume(a: argparse.Namespace) -> None:
    if a.keys and not a.accept_drift:
        raise CliError("drift keys go after --accept-drift: little resume RUN_ID --accept-drift KEY ...")
    if a.accept_drift and not a.keys:
        raise CliError(
            "--accept-drift takes the drift keys to accept: little resume RUN_ID --accept-drift KEY ..."
        )


@command(
    "resume",
    "let a cancelled, failed or blocked run continue (a queued one goes back on its queue)",
    _resume_args,
    check=_check_resume,
)
def _resume(world: WorldCore, a: argparse.Namespace) -> Any:
    async def go() -> dict[str, Any]:
        before = run_status(world, a.run_id).status
        budget = budget_arg(world, a.run_id, a.budget)
        h = await resume_run(
            a.run_id, world=world, workflows=workflow_of(a), accept_drift=a.keys, budget=budget
        )
        task = default_driver(world).tasks.get(a.run_id)
        if task is not None:
            await asyncio.wait([task])  # driven here, in the foreground, to its outcome
        st = await h.status_detail()
        out: dict[str, Any] = {"run_id": a.run_id, "status": st.status}
        if st.status == "running" and task is None:
            d = driver_of(world, a.run_id)
            out["note"] = (
                f"a live driver drives it (pid {d['pid']} on {d['host']})"
                if d["driver"] == "live"
                else "nothing drives it in this process: a worker that knows its workflow does "
                "(`little worker MODULE:FUNCTION`), or pass --workflow MODULE:FUNCTION to drive it here"
            )
        elif st.status == "enqueued":
            out["note"] = f"back on queue {st.queue!r}: a worker serving it drives the run"
        elif before == "interrupted":
            kind, data = outcome_of(world.log, a.run_id) or ("", {})
            at = f" at {data['path']!r}" if kind == RUN_INTERRUPTED else ""
            out["note"] = (
                f"the run waits for an answer{at}, so there is nothing to resume"
                + ("" if budget is not None else " and nothing was recorded")
                + f": answer it with `{st.fixes[0]}`"
            )
            a.exit_status = 0 if budget is not None else 1  # a budget was recorded; else nothing was done
        elif before not in ("cancelled", "failed", "blocked", "running"):
            out["note"] = f"the run is {before}: there is nothing to resume"
        if st.fixes and st.status in ("failed", "blocked", "interrupted"):
            out["fixes"] = st.fixes
        return out

    return asyncio.run(go())
