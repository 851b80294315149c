"""What the engine tells the standard ``logging`` module, under the ``durable`` logger.

Each record carries ``run_id`` and ``path`` as ``extra`` fields (so a
formatter can print ``%(run_id)s``, and a JSON handler finds them on the
record), plus a few fields of its own (``workflow``, ``attempt``,
``recorded_calls``...). Records are built only when the logger is enabled
for their level: ``note`` asks ``isEnabledFor`` first, so a disabled logger
costs one call on paths that are not hot, and hot paths do not log at all.

What is logged (levels in brackets):

- runs: started, resumed with how many recorded calls replay, completed
  [INFO], interrupted and cancelled [INFO], failed [ERROR];
- every retry decision: a retry [WARNING], giving up [ERROR];
- effects found without a receipt: a re-drive or a reconcile [WARNING], an
  unknown commit refused [ERROR];
- a wait of more than a second for a run's lock [WARNING], and how long it
  took once taken [INFO];
- workers (``durable.runtime``): each run claimed, each run recovered, each
  drive of a run whose last drive was cut [INFO]; any other drive [DEBUG]
  (its claim or its start says it already).

The ``durable`` logger has a ``NullHandler``, as a library's should: without
logging configured by the application nothing is printed (``little worker``
and ``little ui`` configure it to print INFO and above to stderr).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

LOG = logging.getLogger("durable")
LOG.addHandler(logging.NullHandler())  # a library logs; the application decides where records go

DEBUG = logging.DEBUG
INFO = logging.INFO
WARNING = logging.WARNING
ERROR = logging.ERROR


def note(
    level: int,
    run_id: str | None,
    path: str | None,
    msg: str,
    *args: object,
    logger: logging.Logger = LOG,
    **fields: Any,
) -> None:
    """Log ``msg % args`` with ``run_id``, ``path`` and ``fields`` as extras, if enabled for ``level``.

    The record names the caller of ``note`` as where it was logged
    (``pathname``, ``lineno``, ``funcName``): its frame is taken directly,
    which costs less than ``Logger.log``'s search of the stack, and that
    search would stop here, naming this function for every record.
    """
    if logger.isEnabledFor(level):
        frame = sys._getframe(1)
        code = frame.f_code
        extra = {"run_id": run_id, "path": path, **fields}
        record = logger.makeRecord(
            logger.name, level, code.co_filename, frame.f_lineno, msg, args, None, code.co_name, extra
        )
        logger.handle(record)
