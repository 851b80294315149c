"""The named migrations of a Postgres world's schema, in order (``_schema`` applies them).

A migration is appended, never edited: a schema records the names it has
applied, and its version is their number. The SQL names the schema ``{s}``.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 12
"""The number of migrations: a schema that has applied every one of them is at this version."""

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_log_locks_artifacts_control",
        """
CREATE TABLE {s}.events (
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE {s}.runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    parent_run_id TEXT,
    created_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    token BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_created ON {s}.runs (created_at DESC, run_id DESC);
CREATE INDEX runs_by_status ON {s}.runs (status);
CREATE TABLE {s}.leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    pid INTEGER,
    host TEXT,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE {s}.artifacts (
    sha256 TEXT PRIMARY KEY,
    data BYTEA NOT NULL,
    manifest TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE {s}.documents (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE SEQUENCE {s}.control_seq;
CREATE TABLE {s}.control (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    input TEXT NOT NULL DEFAULT 'null',
    models TEXT NOT NULL DEFAULT '{}',
    queue TEXT,
    partition_key TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    dedup_id TEXT,
    deadline DOUBLE PRECISION,
    state TEXT NOT NULL,
    owner TEXT,
    pid INTEGER,
    host TEXT,
    created_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    claimed_at DOUBLE PRECISION,
    cancel_reason TEXT,
    resume TEXT,
    seq BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX control_waiting ON {s}.control (queue, state, priority, seq);
CREATE INDEX control_dedup ON {s}.control (queue, dedup_id) WHERE state IN ('enqueued', 'claimed');
CREATE INDEX control_claims ON {s}.control (queue, claimed_at);
CREATE INDEX control_claimed ON {s}.control (state) WHERE state = 'claimed';
""",
    ),
    (
        "0002_control_traceparent",
        """
ALTER TABLE {s}.control ADD COLUMN traceparent TEXT;
""",
    ),
    (
        "0003_talk",
        """
CREATE TABLE {s}.messages (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    topic TEXT,
    message_id TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    sent_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    consumed_seq BIGINT
);
CREATE INDEX messages_waiting ON {s}.messages (run_id, topic, id) WHERE consumed_seq IS NULL;
CREATE INDEX messages_of_run ON {s}.messages (run_id, id);
CREATE TABLE {s}.outbox (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    next_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    owner TEXT,
    result TEXT,
    error TEXT,
    updated_at DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX outbox_due ON {s}.outbox (state, next_at);
CREATE INDEX outbox_of_run ON {s}.outbox (run_id);
CREATE TABLE {s}.schedules (
    name TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    cron TEXT,
    every DOUBLE PRECISION,
    input TEXT NOT NULL DEFAULT 'null',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    queue TEXT,
    catch_up TEXT NOT NULL DEFAULT 'latest',
    paused BOOLEAN NOT NULL DEFAULT false,
    last_tick DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL DEFAULT 0
);
""",
    ),
    (
        "0004_event_times",
        """
ALTER TABLE {s}.events ADD COLUMN written_at DOUBLE PRECISION;
ALTER TABLE {s}.events ALTER COLUMN written_at SET DEFAULT EXTRACT(EPOCH FROM now())::double precision;
""",
    ),
    (
        "0005_control_drives",
        """
ALTER TABLE {s}.control ADD COLUMN drives INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {s}.control ADD COLUMN driven_at DOUBLE PRECISION;
ALTER TABLE {s}.control ADD COLUMN blocked TEXT;
DROP INDEX {s}.control_dedup;
CREATE INDEX control_dedup ON {s}.control (queue, dedup_id) WHERE state IN ('enqueued', 'claimed', 'blocked');
""",
    ),
    (
        "0006_control_budget_debounce",
        """
ALTER TABLE {s}.control ADD COLUMN budget TEXT;
ALTER TABLE {s}.control ADD COLUMN debounce_key TEXT;
ALTER TABLE {s}.control ADD COLUMN start_at DOUBLE PRECISION;
ALTER TABLE {s}.control ADD COLUMN debounce_until DOUBLE PRECISION;
CREATE INDEX control_debounce ON {s}.control (queue, debounce_key) WHERE state = 'enqueued';
""",
    ),
    (
        "0007_runs_by_parent",
        """
CREATE INDEX runs_by_parent ON {s}.runs (parent_run_id);
""",
    ),
    (
        "0008_keyed_dedup_debounce_indexes",
        """
DROP INDEX {s}.control_dedup;
CREATE INDEX control_dedup ON {s}.control (queue, dedup_id)
    WHERE dedup_id IS NOT NULL AND state IN ('enqueued', 'claimed', 'blocked', 'waiting');
DROP INDEX {s}.control_debounce;
CREATE INDEX control_debounce ON {s}.control (queue, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'enqueued';
""",
    ),
    (
        "0009_workers",
        """
CREATE TABLE {s}.workers (
    name TEXT PRIMARY KEY,
    pid INTEGER NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    started_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    code TEXT NOT NULL DEFAULT '{}',
    queues TEXT NOT NULL DEFAULT '[]'
);
""",
    ),
    (
        # world.memory: the embedding column (pgvector's type) is added when the memory is first
        # opened, so that a server without the extension migrates and runs every other part.
        "0010_memory_items",
        """
CREATE TABLE {s}.memory_items (
    id BIGSERIAL PRIMARY KEY,
    ns TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    text TEXT,
    metadata TEXT,
    sealed_text BYTEA,
    sealed_metadata BYTEA,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    UNIQUE (ns, key),
    CHECK ((text IS NULL) = (metadata IS NULL) AND (sealed_text IS NULL) = (sealed_metadata IS NULL)
        AND (text IS NULL) <> (sealed_text IS NULL))
);
CREATE INDEX memory_items_plain ON {s}.memory_items (id) WHERE text IS NOT NULL;
""",
    ),
    (
        "0011_threads",
        """
CREATE TABLE {s}.threads (
    seq BIGSERIAL PRIMARY KEY,
    namespace TEXT NOT NULL,
    thread TEXT NOT NULL,
    key TEXT NOT NULL,
    value BYTEA NOT NULL,
    UNIQUE (namespace, thread, key)
);
""",
    ),
    (
        # A listing reads each run's code version from its summary, never its log, and pages a
        # filter through an index; the recovery pass and the claim find live control rows
        # through indexes that hold no finished run's row.
        "0012_runs_code_live_indexes",
        """
ALTER TABLE {s}.runs ADD COLUMN code TEXT;
DROP INDEX {s}.runs_by_status;
CREATE INDEX runs_by_status ON {s}.runs (status, created_at DESC, run_id DESC);
CREATE INDEX runs_by_workflow ON {s}.runs (workflow, created_at DESC, run_id DESC);
CREATE INDEX control_live ON {s}.control (state) WHERE state <> 'done';
CREATE INDEX control_unstarted ON {s}.control (seq)
    WHERE claimed_at IS NULL AND state IN ('enqueued', 'cancelled');
""",
    ),
]
"""Named migrations in order; migration ``n`` brings the schema to version ``n``."""

OWN_TABLES = {"durable_meta", "migrations"} | {
    name for _, text in MIGRATIONS for name in re.findall(r"CREATE TABLE \{s\}\.(\w+)", text)
}
"""Every table the migrations create: a schema holding any other table is not durable's alone."""
