"""Maintenance of a data directory: compaction, gc, time travel, verify and rekey.

It reads and rewrites logs through the engine's door and the store protocols; the runtime
and the CLI call it, it calls neither.
"""

from __future__ import annotations

# The door: what the other parts of the package use (not public API).
from ._compaction import compact as compact
from ._compaction import gc as gc
from ._compaction import record_cancelled as record_cancelled
from ._dry_resume import DryResume as DryResume
from ._dry_resume import dry_resume as dry_resume
from ._dry_resume import replay_recorded as replay_recorded
from ._lint import lint_files as lint_files
from ._lint import lint_paths as lint_paths
from ._rekey import rekey as rekey
from ._rekey_postgres import rekey_postgres as rekey_postgres
from ._run_calls import read_calls as read_calls
from ._run_diff import DIFF_STATUSES as DIFF_STATUSES
from ._run_diff import Call as Call
from ._run_diff import align as align
from ._run_diff import canonical as canonical
from ._run_diff import first_seqs as first_seqs
from ._run_diff import highlight as highlight
from ._run_diff import pretty as pretty
from ._run_diff import summary as summary
from ._timetravel import UNCHANGED as UNCHANGED
from ._timetravel import checkpoints as checkpoints
from ._timetravel import checkpoints_of as checkpoints_of
from ._timetravel import fork as fork
from ._timetravel import restore as restore
from ._verify import completed_text as completed_text
from ._verify import database_problems as database_problems
from ._verify import import_workflow as import_workflow
from ._verify import parse_models as parse_models
from ._verify import report_text as report_text
from ._verify import verify_run as verify_run
