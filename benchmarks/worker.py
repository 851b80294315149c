"""One measurement in a fresh process: ``python -m benchmarks.worker '<json job>'``.

The job names a system module, an operation and its keyword arguments; the
figures come back as one JSON line on stdout. A fresh process per
measurement keeps imports, caches and peak memory of one measurement out of
the next one, and lets a resume start cold, as it does after a crash.
"""

from __future__ import annotations

import importlib
import json
import sys


def main(argv: list[str]) -> int:
    job = json.loads(argv[1])
    module = importlib.import_module(f"benchmarks.systems.{job['module']}")
    result = getattr(module, job["op"])(**job["args"])
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
