"""The engine core: decorators, the one claim/decide/record sequence, replay, keys, the runner.

Every kind of durable call is a few lines on ``_claim``; ``_decide`` is the pure decision,
``_recorded`` the run's canonical state, ``_runner`` the one place that combines the log,
replay, locks and the engine. The names imported below are the door the outer parts (worlds,
maintenance, runtime, outer loops, CLI, inspector) use; no outer part imports a private
module of the engine.
"""

from __future__ import annotations

from . import _event_writer

# The door: what the other parts of the package use (not public API).
from ._artifacts import referenced as referenced
from ._artifacts import verify_payload as verify_payload
from ._budget import Budget as Budget
from ._budget import Usage as Usage
from ._budget import budget_from_text as budget_from_text
from ._budget import budget_of as budget_of
from ._budget import budget_text as budget_text
from ._budget import checked_budget as checked_budget
from ._budget import recorded_budget as recorded_budget
from ._budget import run_usage as run_usage
from ._budget import runs_usage as runs_usage
from ._call_inputs import apply_delta as apply_delta
from ._capabilities import reachable as reachable
from ._carried import Carried as Carried
from ._carried import carried as carried
from ._carried import durable_cause as durable_cause
from ._compensation import compensated_keys as compensated_keys
from ._compensation import open_compensations as open_compensations
from ._compensation import undo_pending as undo_pending
from ._context import CURRENT as CURRENT
from ._context import EFFECT_KEY as EFFECT_KEY
from ._context import RunContext as RunContext
from ._context import Scope as Scope
from ._decorators import make_decorator as make_decorator
from ._determinism import record_value as record_value
from ._drift import acceptance_blockers as acceptance_blockers
from ._drift import blocked_advice as blocked_advice
from ._drift import change_lines as change_lines
from ._drift import drift_error as drift_error
from ._drift import run_drift as run_drift
from ._drift import undescribed as undescribed
from ._event_writer import encode as encode
from ._failures import error_data as error_data
from ._failures import error_type as error_type
from ._failures import rebuild_error as rebuild_error
from ._failures import rebuild_from as rebuild_from
from ._held_scopes import HeldSession as HeldSession
from ._held_scopes import entered as entered
from ._held_scopes import hold_session as hold_session
from ._held_scopes import keyed as keyed
from ._keys import COMPENSATE as COMPENSATE
from ._keys import EFFECT_KINDS as EFFECT_KINDS
from ._keys import VISIT_MARK as VISIT_MARK
from ._keys import parent_of as parent_of
from ._keys import without_visit as without_visit
from ._loader import completed_output as completed_output
from ._loader import first_started as first_started
from ._loader import outcome_of as outcome_of
from ._loader import recover_log as recover_log
from ._loader import run_not_found as run_not_found
from ._loader import unsafe_unconfirmed as unsafe_unconfirmed
from ._log_rows import FIRST_TYPES as FIRST_TYPES
from ._log_rows import until as until
from ._manifest import code_hash as code_hash
from ._manifest import definition_hash as definition_hash
from ._manifest import manifest_hash as manifest_hash
from ._manifest import run_manifest as run_manifest
from ._messages import check_topic as check_topic
from ._messages import record_send as record_send
from ._metrics import count_recovery as count_recovery
from ._metrics import count_run as count_run
from ._metrics import record_queue_wait as record_queue_wait
from ._nested_calls import effect_body_scope as effect_body_scope
from ._nested_calls import effect_body_scope_sync as effect_body_scope_sync
from ._nested_calls import in_effect_body as in_effect_body
from ._outbox_call import OUTBOX_TOOLS as OUTBOX_TOOLS
from ._rebind import signature_changes as signature_changes
from ._recorded import Recorded as Recorded
from ._retry_policy import RetryPolicy as RetryPolicy
from ._retry_policy import decide as decide
from ._run_end import final_failure as final_failure
from ._run_end import record_run_failed as record_run_failed
from ._run_input import DriveOptions as DriveOptions
from ._run_input import accepted_drift_keys as accepted_drift_keys
from ._run_input import check_same_run as check_same_run
from ._run_input import checked_run_id as checked_run_id
from ._run_input import new_run_id as new_run_id
from ._run_input import validate_input as validate_input
from ._run_input import workflow_spec as workflow_spec
from ._run_open import memory_manifest as memory_manifest
from ._runner import drive as drive
from ._runner import open_run as open_run
from ._session_manifest import recorded_model_drift as recorded_model_drift
from ._snapshots import decode_state as decode_state
from ._snapshots import encode_state as encode_state
from ._spec import Spec as Spec
from ._spec import check_recovery_attempts as check_recovery_attempts
from ._spec import spec_of as spec_of
from ._sync_bodies import call_sync_body as call_sync_body
from ._tracing import traceparent as traceparent
from ._values import ANY as ANY
from ._values import canonical as canonical
from ._values import loads as loads
from ._values import matches as matches
from ._values import sha256_tag as sha256_tag
from ._values import to_json as to_json
from ._values import value_hash as value_hash
from ._world import Durability as Durability
from ._world import WorldCore as WorldCore

payloads = _event_writer  # the module's functions are the surface
