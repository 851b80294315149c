"""``little rekey``: encrypt, re-encrypt or decrypt a data directory, or a Postgres world's schema.

The keys come from the environment, never from the command line:
``LITTLE_KEY`` (or the file ``LITTLE_KEY_FILE``) is the key to encrypt under
from now on; ``LITTLE_OLD_KEYS`` (or ``LITTLE_OLD_KEYS_FILE``) the key the
world is encrypted under now. With ``--dsn`` (or ``DURABLE_DSN``) the world
is the Postgres schema ``--schema``, else the data directory ``--data-dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..ops import rekey, rekey_postgres
from ..security import KEY_ENV, KEY_FILE_ENV, codec_from_env
from ._registry import CliError, command


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--decrypt",
        action="store_true",
        help="write every payload in the clear (the current key in LITTLE_KEY or LITTLE_OLD_KEYS)",
    )
    p.add_argument(
        "--batch",
        type=int,
        default=500,
        help="with --dsn: rows rewritten in one transaction (default 500)",
    )


_PARTS = (
    ("events", "events"),
    ("artifacts", "artifacts"),
    ("outer_loops", "outer-loop manifests"),
    ("memory_items", "memory items"),
    ("messages", "messages and outbox entries"),
    ("runtime_inputs", "queued and schedule inputs"),
    ("thread_values", "thread values"),
)


def _human(d: dict[str, Any]) -> str:
    to = d["to_key_id"] or "(none: in the clear)"
    parts = ", ".join(f"{d[k]} {said}" for k, said in _PARTS if k in d)
    return f"rekeyed from key id {d['from_key_id'] or '(none: in the clear)'} to {to}: {parts}"


@command(
    "rekey",
    "re-encrypt a data directory (or with --dsn a Postgres world) under the key in LITTLE_KEY "
    "(old keys in LITTLE_OLD_KEYS); stop every process using it first",
    _args,
    human=_human,
    raw=True,
)
def _rekey(_world: None, a: argparse.Namespace) -> Any:
    codec = codec_from_env()
    if codec is None:
        raise CliError(
            f"set {KEY_ENV} or {KEY_FILE_ENV} to the key to encrypt under (with --decrypt: the current key)"
        )
    # The new key encrypts; the old keys (or the new one, for a world already under it) read.
    new, old = (None, codec) if a.decrypt else (codec, codec)
    if a.dsn is not None:
        return rekey_postgres(a.dsn, new, old, schema=a.schema, batch=a.batch)
    return rekey(Path(a.data_dir), new, old)
