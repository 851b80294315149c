"""What a drive is given: the workflow's spec, its input checked against it, and the runtime's options."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigurationError, RunFailedError, RunInputMismatchError
from ._context import Guard
from ._recorded import Recorded
from ._spec import Spec, spec_of
from ._values import bytes_hash, matches, stored_bytes, to_json, value_hash


@dataclass(frozen=True)
class DriveOptions:
    """What a runtime (or a parent run) adds to a drive; ``run_workflow`` passes none.

    Attributes:
        guard: Cancellation, deadlines and stops of the run (a child run's is its parent's child).
        deadline: Seconds the run may take, recorded as an absolute time when it starts.
        lock_held: The caller took the run's lock itself (a worker's driver does).
        resume_cancelled: Continue a run that was cancelled (``resume_run``).
        traceparent: The trace of the code that started the run, which a new run's span continues.
        opened: The run's fencing token and its log read after that fence (``open_run``),
            when the caller holding the lock read them already (a worker checks its code
            against the run before it drives it): the drive then neither fences nor reads again.
        checked: The input as ``validate_input`` returned it, when the caller checked it
            before it fenced the run (a bad input must leave nothing written): the drive
            does not check it again.
        on_execute: Called once the log accepted this drive, right before the workflow
            body runs (not for a finished run, nor a drive refused as asked): ``run_workflow``
            claims there a run that the runtime knows.
    """

    guard: Guard | None = None
    deadline: float | None = None
    lock_held: bool = False
    resume_cancelled: bool = False
    traceparent: str | None = None
    opened: tuple[int, Recorded] | None = None
    checked: tuple[Any, Any, str] | None = None
    on_execute: Callable[[], None] | None = None


PLAIN = DriveOptions()
"""The options of a drive nobody adds anything to."""


def new_run_id() -> str:
    """A fresh, unique run id."""
    return f"run_{uuid.uuid4().hex}"


def checked_run_id(run_id: Any) -> str:
    """``run_id`` when it can name a run (a new id for ``None``), checked before anything is written.

    Raises:
        ConfigurationError: ``run_id`` is not a non-empty string of valid Unicode text.
    """
    rid = new_run_id() if run_id is None else run_id
    if not isinstance(rid, str) or not rid:
        raise ConfigurationError(f"run_id must be a non-empty string, not {rid!r}. Nothing was written.")
    try:
        rid.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"run_id {rid!r} is not valid Unicode text ({exc.reason} at position {exc.start}): a log "
            "stores run ids as UTF-8. Pass a run id without lone surrogates. Nothing was written."
        ) from None
    return rid


def workflow_spec(wf: Any) -> Spec:
    """The spec of a function decorated with ``@workflow``.

    Raises:
        ConfigurationError: ``wf`` is not a workflow.
    """
    spec = spec_of(wf)
    if spec is None or spec.kind != "workflow":
        raise ConfigurationError(f"run_workflow needs a function decorated with @workflow, not {wf!r}.")
    return spec


def validate_input(spec: Spec, value: Any, run_id: str, *, recorded: bool = False) -> tuple[Any, Any, str]:
    """The input rebuilt as the workflow's annotated type, its JSON and its hash.

    ``recorded``: ``value`` is the input the run's log recorded (a runtime drives a
    started run); a rejection then ends the run ``failed``, and the error says how
    to continue it once the code accepts the input again.

    Raises:
        RunFailedError: The input is not valid for the workflow.
        SerializationError: The input cannot be stored as JSON.
    """
    params = spec.params()
    if not params:
        if value is not None:
            raise RunFailedError(
                f"workflow {spec.name!r} takes no input, but run {run_id!r} was given {value!r}.",
                cause_code="runtime_config_error",
                reason="invalid_input",
                run_id=run_id,
            )
        return None, None, value_hash(None)
    name, ad = params[0]
    try:
        value = ad.validate_python(value, by_alias=True, by_name=True)  # recorded inputs hold names
    except ValidationError as exc:
        said = (
            f"the input that run {run_id!r} recorded is no longer valid for workflow {spec.name!r} "
            f"(parameter {name!r}), so the run failed: fix the validation (the code must accept "
            f"the inputs it accepted before), then `little resume {run_id}` (or "
            f"durable.resume_run({run_id!r}, world=...)) continues it"
            if recorded
            else f"the input of workflow {spec.name!r} (parameter {name!r}) is not valid for run "
            f"{run_id!r}; nothing was recorded"
        )
        raise RunFailedError(
            f"{said}:\n{exc}",
            cause_code="runtime_config_error",
            reason="invalid_input",
            run_id=run_id,
        ) from exc
    what = f"the input of workflow {spec.name!r} (parameter {name!r})"
    data = to_json(ad, value, what=what, run_id=run_id, path="")
    return value, data, bytes_hash(stored_bytes(data, what=what, run_id=run_id, path=""))


def check_same_run(
    spec: Spec, run_id: str, workflow: str | None, recorded_hash: str, data: Any, input_hash: str
) -> None:
    """Refuse a run id given again with another workflow or another input than its run has.

    ``workflow`` and ``recorded_hash`` are what the run was started (or
    enqueued) with; ``data`` and ``input_hash`` the input given now.

    Raises:
        RunFailedError: The run belongs to another workflow (reason ``run_workflow_mismatch``).
        RunInputMismatchError: The run was started with another input (reason ``run_input_mismatch``).
    """
    if workflow != spec.name:
        raise RunFailedError(
            f"run {run_id!r} belongs to workflow {workflow!r}, not {spec.name!r}; "
            "resume it with its own workflow, or start a new run id.",
            cause_code="runtime_config_error",
            reason="run_workflow_mismatch",
            run_id=run_id,
        )
    if not matches(recorded_hash, data, input_hash):
        raise RunInputMismatchError(
            f"run {run_id!r} was started with another input (hash {recorded_hash}, now {input_hash}); "
            "nothing was written. A run id names one run with one input: pass the input it was "
            "started with to resume it, or a new run id for new input.",
            run_id=run_id,
            recorded_hash=recorded_hash,
            input_hash=input_hash,
        )


def accepted_drift_keys(accept_drift: Iterable[str]) -> frozenset[str]:
    """The drift keys of ``accept_drift=``, checked.

    Raises:
        ConfigurationError: ``accept_drift`` is a string or holds something else than strings.
    """
    keys = [] if isinstance(accept_drift, str) else list(accept_drift)
    if isinstance(accept_drift, str) or not all(isinstance(k, str) for k in keys):
        raise ConfigurationError(
            f"accept_drift= takes a list of drift keys as a CapabilityDriftError prints them "
            f'(e.g. ["tools.pay.options.idempotent"]), not {accept_drift!r}.'
        )
    return frozenset(keys)
