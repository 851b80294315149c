"""``little rekey``: encrypt, re-encrypt or decrypt a data directory.

The keys come from the environment, never from the command line:
``LITTLE_KEY`` (or the file ``LITTLE_KEY_FILE``) is the key to encrypt under
from now on; ``LITTLE_OLD_KEYS`` (or ``LITTLE_OLD_KEYS_FILE``) the key the
directory is encrypted under now.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..ops import rekey
from ..security import KEY_ENV, KEY_FILE_ENV, codec_from_env
from ._registry import CliError, command


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--decrypt",
        action="store_true",
        help="write every payload in the clear (the current key in LITTLE_KEY or LITTLE_OLD_KEYS)",
    )


def _human(d: dict[str, Any]) -> str:
    to = d["to_key_id"] or "(none: in the clear)"
    return (
        f"rekeyed from key id {d['from_key_id'] or '(none: in the clear)'} to {to}: "
        f"{d['events']} events, {d['artifacts']} artifacts, {d['outer_loops']} outer-loop manifests, "
        f"{d['memory_items']} memory items, {d['messages']} messages and outbox entries, "
        f"{d['runtime_inputs']} queued and schedule inputs"
    )


@command(
    "rekey",
    "re-encrypt a data directory under the key in LITTLE_KEY (old keys in LITTLE_OLD_KEYS); "
    "stop every process using it first",
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
    if a.decrypt:
        return rekey(Path(a.data_dir), None, codec)
    # The new key encrypts; the old keys (or the new one, for a directory already under it) read.
    return rekey(Path(a.data_dir), codec, codec)
