"""The invariants, checked after every action against a small model of what the run must have done.

The model is what the code declares (read from the manifests the runs
recorded: which tools are plain, idempotent or reconciled, which have
undos), what the simulation expects (``Expect``: the budget, whether
version 2 changes the calls), the ledger (what the outside world saw
happen) and the decisions a person took (which keys were said not to have
happened, which drift was accepted). Each broken invariant is one line
``kind: what happened``; the kind tells findings apart.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durable
from durable.events import EFFECT_INTENT, EFFECT_RECEIPT, RUN_RESOLVED, RUN_STARTED
from durable.worlds import export_run

from .. import replay_file
from ._code import Code
from ._ledger import Ledger

MAX_DRIVES = 12
"""Drives of a run since its last outcome beyond which it loops (recovery blocks it after 5 cut ones)."""

CALLS_CHANGED = ("incompatible", "tool_required")
"""The changes of a generated program's version 2 that change the calls a run makes."""

REASONS = ("unknown_commit", "nondeterminism", "recovery_exhausted", "budget", "compensation_failed")
"""The documented reasons of a ``blocked`` run."""


@dataclass(frozen=True)
class Expect:
    """What the checks must know about the code beyond its manifests.

    Attributes:
        budget: The run's ``max_model_calls`` (``None``: no budget).
        calls_changed: Version 2 changes the calls a run makes (an inserted or
            removed call, or a new input): a run of version 1 may then not replay
            under it. Otherwise nondeterminism is never right.
        in_flight: How many model calls may be in flight at once (parallel branches).
    """

    budget: int | None = None
    calls_changed: bool = False
    in_flight: int = 1


def waits_for_code(st: Any) -> bool:
    """Whether a run waits for a worker whose code can replay it (a cancelled one too)."""
    return st.reason == "waiting_for_code" or str(st.detail or "").startswith("waiting for code")


def _cannot_start(exc: BaseException) -> bool:
    """Whether a replay failed before the first recorded call: the code cannot replay the run at all."""
    if isinstance(exc, durable.CapabilityDriftError):
        return True
    return isinstance(exc, durable.NondeterminismError) and "finished run" not in str(exc)


def first_line(exc: BaseException | None) -> str:
    """``Type: first line of the message`` of an error."""
    if exc is None:
        return ""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:240]


class Checker:
    """Checks one simulated run (see the module's docstring)."""

    def __init__(
        self,
        expect: Expect,
        ledger: Ledger,
        view: Any,
        codes: dict[int, Code],
        run_id: str,
        commits: dict[str, set[int]] | None = None,
    ):
        self.expect = expect
        self.commits = {} if commits is None else commits
        self.ledger = ledger
        self.view = view
        self.codes = codes
        self.run_id = run_id
        self.violations: list[str] = []
        self.not_happened: list[str] = []
        self.accepted_keys: list[str] = []
        self.futile = False  # a person accepted a drift the run said accepting would not get past
        self.max_calls = expect.budget
        self.reopened = False

    def fail(self, kind: str, text: str) -> None:
        line = f"{kind}: {text}"
        if line not in self.violations:
            self.violations.append(line)

    # -- what a person did ---------------------------------------------------------------

    def decided(self, key: str, happened: bool) -> None:
        if not happened:
            self.not_happened.append(key)

    def accepted(self, keys: list[str], budget: int | None) -> None:
        self.accepted_keys += keys
        if budget is not None:
            self.max_calls = budget

    def refused(self, decision: str, exc: BaseException, state: dict[str, Any]) -> None:
        """A decision the run's own fixes advise must be taken."""
        st = state.get("detail")
        fixes = " | ".join(st.fixes) if st is not None else ""
        advice = {"resolve": "little resolve", "answer": "little answer", "resume": "little resume"}
        word = advice.get(decision)
        raced = "right now" in str(exc)  # a driver took the run between the look and the decision
        if word and word in fixes and not raced:
            self.fail("advice-refused", f"{decision} (advised: {fixes!r}) was refused: {first_line(exc)}")

    # -- what the code declares ----------------------------------------------------------

    def rows(self, run_id: str | None = None) -> list[tuple[int, str, dict[str, Any]]]:
        return [(seq, t, json.loads(d)) for seq, t, d in self.view.log.read(run_id or self.run_id)]

    def tools(self) -> dict[str, dict[str, Any]]:
        """Each tool's options, as the runs' recorded manifests (the run's and its children's) say."""
        out: dict[str, dict[str, Any]] = {}
        for info in self.view.log.runs():
            if info.run_id != self.run_id and not info.run_id.startswith(self.run_id + ":"):
                continue
            rows = self.view.log.read(info.run_id)
            if rows and rows[0][1] == RUN_STARTED:
                manifest = json.loads(rows[0][2]).get("manifest") or {}
                for name, desc in (manifest.get("tools") or {}).items():
                    out.setdefault(name, desc.get("options") or {})
        return out

    # -- after every action --------------------------------------------------------------

    async def after(self, before: dict[str, Any], state: dict[str, Any], action: list[Any]) -> None:
        """The checks after ``action`` took the run from ``before`` to ``state``."""
        if action[0] in ("resume", "worker", "call") and before.get("status") in ("failed", "cancelled"):
            self.reopened = True  # a person tried a finished run again: its undos are history
        self.effects()
        self.status(state)
        self.compensations(state)
        self.budget()
        self.nondeterminism(state)
        if action[0] not in ("call", "start", "answer"):  # a caller of other code fails it closed, rightly
            await self.versions(state)

    def effects(self) -> None:
        """A plain side effect happens at most once per key (unless said not to have); one key per call."""
        tools = self.tools()
        counts: dict[str, int] = defaultdict(int)
        keys: dict[tuple[str, Any], set[str]] = defaultdict(set)
        for e in self.ledger.effects():
            if e.kind not in ("tool", "undo"):
                continue
            counts[e.key] += 1
            if e.arg is not None and e.kind == "tool":
                keys[(e.name, e.arg)].add(e.key)
            opts = tools.get(e.name)
            if opts is None or opts.get("idempotent"):
                continue
            allowed = 1 + sum(1 for k in self.not_happened if e.key.endswith(":" + k))
            if counts[e.key] > allowed:
                self.fail("duplicate-effect", f"{e.kind} {e.name} ran {counts[e.key]} times with key {e.key}")
        for (name, arg), found in keys.items():
            if len(found) > 1:
                self.fail("key-changed", f"{name}({arg}) ran with {len(found)} keys: {sorted(found)}")

    def status(self, state: dict[str, Any]) -> None:
        """A run ends, is blocked with a reason and fixes, or waits for something named."""
        st = state.get("detail")
        if st is None:
            return
        if state.get("timed_out"):
            what = "driven" if state["driven"] else "orphaned while a worker is alive"
            self.fail(
                "never-quiet",
                f"a virtual day on it is {st.status} ({st.reason}, {st.detail}), {what}; "
                f"drives {st.drives}, workers of versions {state['versions']}",
            )
        if st.drives > MAX_DRIVES:
            self.fail("loops", f"the run was driven {st.drives} times since its last outcome ({st.status})")
        if st.status == "blocked":
            if st.reason not in REASONS:
                self.fail("undocumented", f"blocked with reason {st.reason!r}")
            if not st.fixes:
                self.fail("no-fixes", f"blocked ({st.reason}) without a command that fixes it")

    def compensations(self, state: dict[str, Any]) -> None:
        """A failed or cancelled run undid its confirmed calls once each, newest first, and says so."""
        st = state.get("detail")
        if self.reopened or st is None:
            return
        own = self.run_id + ":compensate:"  # the run's own undos (a child run's id extends the run's)
        undos = [e for e in self.ledger.effects() if e.kind == "undo" and e.key.startswith(own)]
        if undos and st.status == "completed":
            self.fail("undone-but-completed", f"{len(undos)} compensations ran, yet the run completed")
        if st.status not in ("failed", "cancelled"):
            return
        if str((st.error or {}).get("error_type", "")).endswith("CapabilityDriftError"):
            return  # failed closed before any call: its undos wait for code that replays it, as it does
        expected = [f"compensate:{k}" for k in reversed(self.confirmed_compensable())]
        ran: list[str] = []
        for e in undos:
            short = e.key[len(self.run_id) + 1 :]
            if short not in ran:
                ran.append(short)
        missing = [k for k in expected if k not in ran]
        if missing:
            self.fail("undo-missing", f"the run ended {st.status} without running {missing} (ran {ran})")
        elif ran != expected:
            self.fail("undo-order", f"compensations ran in the order {ran}, not newest first {expected}")
        if list(st.compensated) != expected:
            self.fail("compensated-wrong", f"the run says compensated={st.compensated}, expected {expected}")

    def confirmed_compensable(self) -> list[str]:
        """The keys of the run's tool calls with an undo that are confirmed, in the order they were.

        A call is confirmed by its ``ok`` receipt, or by a person who said it happened.
        """
        with_undo = {n for n, o in self.tools().items() if o.get("compensate")}
        intents: dict[str, str] = {}
        out: list[str] = []
        for _, t, d in self.rows():
            key = str(d.get("key"))
            if t == EFFECT_INTENT and d.get("kind") == "tool":
                intents[key] = d["name"]
                continue
            said = t == RUN_RESOLVED and d.get("decision") == "happened"
            ok = (t == EFFECT_RECEIPT and d.get("outcome") == "ok") or said
            if ok and intents.get(key) in with_undo and key not in out:
                out.append(key)
        return out

    def budget(self) -> None:
        """Model calls stay within the budget, but for the calls in flight at once."""
        if self.max_calls is None:
            return
        executed = {e.key for e in self.ledger.effects() if e.kind == "model"}
        if len(executed) > self.max_calls + self.expect.in_flight - 1:
            self.fail(
                "over-budget", f"{len(executed)} model calls ran under max_model_calls={self.max_calls}"
            )

    def nondeterminism(self, state: dict[str, Any]) -> None:
        """Only a change of the calls themselves may make a run's log unreplayable."""
        st = state.get("detail")
        if st is None or self.expect.calls_changed:
            return
        err = st.error or {}
        if st.reason == "nondeterminism" or "Nondeterminism" in str(err.get("error_type", "")):
            accepted = f" after accepting {self.accepted_keys}" if self.accepted_keys else ""
            self.fail(
                "nondeterminism",
                f"the run is {st.status} for nondeterminism{accepted}, but every version makes the "
                f"same calls: {str(err.get('error_message', ''))[:200]}",
            )

    async def versions(self, state: dict[str, Any]) -> None:
        """No run is blocked by one version while a live worker of a version that replays it serves."""
        st = state.get("detail")
        if st is None or st.status != "blocked" or self.futile:
            return
        err = str((st.error or {}).get("error_type", ""))
        if st.reason != "nondeterminism" and "Drift" not in err:
            return
        for v in sorted(set(state["versions"])):
            got = await self.predict(self.codes[v])
            if isinstance(got, durable.DryResume) and got.ok:
                self.fail(
                    "blocked-beside-its-version",
                    f"the run is blocked ({st.reason or err}) while a worker of version {v}, "
                    f"whose code replays it ({got.line()}), is alive",
                )

    # -- the in-process path ---------------------------------------------------------------

    async def predict(self, code: Code) -> Any:
        """What ``dry_resume`` says a resume under ``code`` would do (or the error it raised)."""
        try:
            return await durable.dry_resume(code.workflow, self.run_id, world=self.view)
        except Exception as exc:
            return exc

    def drove(self, raised: BaseException | None, predicted: Any, state: dict[str, Any]) -> None:
        """An in-process drive records its outcome as a worker would, as ``dry_resume`` predicted."""
        st = state.get("detail")
        refused = isinstance(raised, durable.CapabilityDriftError)  # refused before it ran: nothing changed
        if st is not None and st.status == "running" and not state["driven"] and raised and not refused:
            self.fail(
                "no-outcome",
                f"run_workflow raised {first_line(raised)} and left the run running with no driver "
                "(a worker records blocked or failed)",
            )
        drift = (durable.NondeterminismError, durable.CapabilityDriftError)
        if isinstance(predicted, durable.DryResume):
            if predicted.ok and isinstance(raised, drift):
                self.fail(
                    "dry-resume-wrong",
                    f"dry_resume said {predicted.line()!r}, the resume raised {first_line(raised)}",
                )
            if not predicted.ok and raised is None and state["status"] == "completed":
                self.fail("dry-resume-wrong", f"dry_resume said {predicted.line()!r}, the resume completed")

    # -- at the end ------------------------------------------------------------------------

    async def at_end(self, state: dict[str, Any]) -> None:
        st = state.get("detail")
        if st is None:
            return
        waiting = waits_for_code(st)
        if st.status in ("running", "enqueued") and state["workers"] and not waiting and not state["driven"]:
            self.fail("never-quiet", f"the run is {st.status} with live workers that do not drive it")
        await self.replays(st)
        usage = await durable.RunHandle(self.run_id, self.view).usage()
        executed = {e.key for e in self.ledger.effects() if e.kind == "model"}
        if usage.calls > len(executed):
            self.fail("usage-counted-twice", f"usage says {usage.calls} model calls, {len(executed)} ran")

    async def replays(self, st: Any) -> None:
        """The exported run replays under ``replay_file`` with the code of some version."""
        if self.view.log.info(self.run_id) is None:
            return  # cancelled before it started: no log to replay
        data = export_run(self.view, self.run_id)
        errors: dict[int, BaseException] = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.json"
            path.write_text(json.dumps(data))
            for v, code in self.codes.items():
                try:
                    got = replay_file(path, code.workflow)
                except Exception as exc:
                    diverged = st.status == "cancelled" and isinstance(exc, durable.NondeterminismError)
                    if st.status == "completed" or diverged or _cannot_start(exc):
                        errors[v] = exc  # a run that stopped early may stop its replay where it stopped
                    continue
                if st.status == "completed" and not got.ok:
                    errors[v] = RuntimeError(got.line())
            if len(errors) == len(self.codes):
                detail = "; ".join(f"v{v}: {first_line(e)}" for v, e in errors.items())
                self.fail("unreplayable", f"the exported {st.status} run replays under no version: {detail}")
            elif st.status == "completed":
                self.prefixes(data, Path(tmp))

    def prefixes(self, data: dict[str, Any], tmp: Path) -> None:
        """Each prefix of a completed run's log (a crash's) replays under some version of the code.

        The replay continues at a call the log makes next (or waits, or meets an
        unconfirmed call a resume decides on).
        """
        rows = data["rows"]
        ends = self.commits.get(self.run_id, set())  # only where a transaction ended: a crash's prefix
        whole = [k for k in range(1, len(rows)) if rows[k - 1][0] in ends]
        for cut in sorted({whole[len(whole) * i // 6] for i in range(6)}) if whole else []:
            path = tmp / f"prefix-{cut}.json"
            path.write_text(json.dumps({**data, "status": "running", "rows": rows[:cut]}))
            later = {str(d.get("path") or d.get("key") or t) for _, t, d in rows[cut:]}
            failed: list[str] = []
            for code in self.codes.values():
                try:
                    got = replay_file(path, code.workflow)
                except (durable.NondeterminismError, durable.CapabilityDriftError) as exc:
                    if not _cannot_start(exc):
                        break  # a prefix that ends cancelled stops where it was cancelled
                    failed.append(f"v{code.version}: {first_line(exc)}")
                    continue
                except Exception:
                    break  # an unconfirmed call or a question where the prefix ends: a resume decides
                if got.continues_at is None or got.continues_at in later:
                    break
                failed.append(
                    f"v{code.version} continues at {got.continues_at!r}, a call the log never makes"
                )
            else:
                self.fail("prefix-unreplayable", f"the first {cut} events of the run do not replay: {failed}")
                return
